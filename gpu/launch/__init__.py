"""Host-side launch of our CUDA kernels (gpu/kernels/*.cu): compiling them once per process, the
shared launch path of the fused kernels, each kernel's launcher, and the fp32 reference they are
checked against."""
