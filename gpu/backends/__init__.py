"""The backends behind one interface: NumPy on the CPU, CUDA kernels through CuPy on the
GPU, how `auto` picks one, and how their times and peaks are measured."""
