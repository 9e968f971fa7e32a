"""Ring attention over P devices: the split and block order, its cost model, the run on
GPUs with NCCL, the NumPy simulation, the backend both sit behind, and the per-device timeline."""
