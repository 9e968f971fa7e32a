"""The Ring tab's Qt-free model: curves, device counts, playback, runs and
the story it tells."""
