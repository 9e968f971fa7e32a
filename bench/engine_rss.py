"""Does the CUDA engine alone (no window) keep memory from run to run?

    python bench/engine_rss.py          # on a CUDA machine; about two minutes

Runs every algorithm the CUDA backend offers at N = 256, 1024, 4096 (N, heads and the mask vary
a little from cycle to cycle so caches see new configs), 20 cycles to warm up, then cycles for
100 s under tracemalloc. Prints process RSS before and after, and the 8 largest growths of
Python allocations by traceback. Used to tell the engine apart from the GUI when the CUDA soak
(bench/soak.py) showed a slow RSS creep.
"""

import gc
import os
import sys
import time
import tracemalloc

import psutil

sys.path.insert(0, os.getcwd())
from gpu.backends.backend import RunOptions
from gpu.backends.cuda_backend import CudaBackend
from gpu.config import AttentionConfig

b = CudaBackend()
algos = b.algorithms()
p = psutil.Process()


def cycle(i):
    for n in (256, 1024, 4096):
        for a in algos:
            config = AttentionConfig(seq_len=n + (i % 7), heads=4 + i % 3, causal=bool(i % 2))
            b.run(config, a, RunOptions(warmup=1, repeats=3))


for i in range(20):
    cycle(i)
gc.collect()
tracemalloc.start(12)
s0 = tracemalloc.take_snapshot()
r0 = p.memory_info().rss
t0 = time.time()
i = 20
while time.time() - t0 < 100:
    cycle(i)
    i += 1
gc.collect()
s1 = tracemalloc.take_snapshot()
r1 = p.memory_info().rss
print("cycles", i - 20, "rss MB", r0 / 1e6, "->", r1 / 1e6)
for st in s1.compare_to(s0, "traceback")[:8]:
    print(st.size_diff, st.count_diff)
    print("\n".join(st.traceback.format()[-8:]))
