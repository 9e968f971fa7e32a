"""The main window and what frames it: menus, status line, lesson strip, theme,
settings, and the plain-text rule for every string that comes from outside."""
