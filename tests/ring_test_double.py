"""TEST DOUBLE of the ring's transport: P ranks on ONE GPU, blocks moved by device copies.

The product ring always moves blocks with NCCL (gpu/ring/cuda_ring.py, `NcclTransport`), one device
per rank. NCCL refuses two ranks on one device, so on a one-GPU machine this double stands in for it
to run the multi-step ring (block order, double buffering, merges, events) on the real fused
kernels: `CudaRing([0, 0, 0], transport=SameDeviceCopyTransport())`. Its timings say nothing
about links and its ranks share one GPU; use it to check results, never to measure a ring.

It keeps NCCL's ordering contract: a rank's receive starts only after the sender's block is in
place (everything before it on the sender's comm stream), and a rank's shift ends only after
its own block has been read by the next rank, as an NCCL send completes only once delivered.
"""

from __future__ import annotations

from collections.abc import Sequence

import cupy

from gpu.ring.cuda_ring import Rank


class SameDeviceCopyTransport:
    """Device-to-device copies between ranks that share a GPU (test double; see module doc)."""

    name = "same-device copies (test double)"

    def shift(
        self, ranks: Sequence[Rank], send: Sequence[cupy.ndarray], recv: Sequence[cupy.ndarray]
    ) -> None:
        size = len(ranks)
        ready = []
        for rank in ranks:  # each sender's block is in place once its comm stream gets here
            with cupy.cuda.Device(rank.device):
                event = cupy.cuda.Event()
                event.record(rank.comm)
                ready.append(event)
        read = []
        for rank, into in zip(ranks, recv, strict=True):
            src = (rank.index - 1) % size
            with cupy.cuda.Device(rank.device):
                rank.comm.wait_event(ready[src])
                into.data.copy_from_device_async(send[src].data, send[src].nbytes, rank.comm)
                event = cupy.cuda.Event()
                event.record(rank.comm)
                read.append(event)
        for rank in ranks:  # a rank's block was read by the next rank before it moves on
            with cupy.cuda.Device(rank.device):
                rank.comm.wait_event(read[(rank.index + 1) % size])

    def close(self) -> None:
        pass
