"""What the hardware did, block by block: real execution traces (which SM ran each block and
when each phase began) recorded on the GPU by the kernels' trace builds. The trace model and
its file format are gpu/files/trace.py; the hardware counters are gpu/counters/."""
