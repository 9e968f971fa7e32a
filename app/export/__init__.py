"""Exports: images, tables and animations (GIF/MP4), written atomically and never
over an existing file without asking."""
