"""The Measurements tab: the four plots (memory, time, traffic, roofline), the
traffic strip chart and the explain pane, all following the current point."""
