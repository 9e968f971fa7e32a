"""The main window and what frames it: menus, status line, lesson strip, the backend switch
and the measurement requests; the widgets it shares with every room are app/kit's."""
