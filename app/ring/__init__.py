"""The Ring tab: ring attention over P devices, its plots, the ring view and the
per-device timeline."""
