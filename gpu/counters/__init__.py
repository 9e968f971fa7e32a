"""What the hardware counted: DRAM and L2 bytes, clocks and pipe activity of each kernel, read
with CUPTI's PM sampling (`profiler`), for the cuda backend's profile mode."""
