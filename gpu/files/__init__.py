"""Files in and out: atomic writes, the file formats checked field by field, and
recorded runs, JSON and CSV."""
