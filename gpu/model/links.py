"""The links that join GPUs, from their datasheets, and how a cluster wires them.

Ring attention sends each device's K/V block to the next device while receiving the previous
one's, so what matters is a link's bandwidth in ONE direction: datasheets often quote both
directions added together. Every figure here is a peak; what a transfer achieves is measured
(`RingMeasurement.achieved_bytes_s`) and compared with it.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 10**9


@dataclass(frozen=True)
class LinkSpec:
    """One GPU's connection to the next device in the ring."""

    name: str
    #: Peak bytes per second in one direction, per GPU.
    bytes_per_s: float
    source: str

    def seconds(self, nbytes: int) -> float:
        return nbytes / self.bytes_per_s


LINKS: dict[str, LinkSpec] = {
    link.name: link
    for link in (
        # Hopper: 18 fourth-generation NVLink links per GPU, 900 GB/s total bandwidth, i.e. both
        # directions together: 450 GB/s each way.
        LinkSpec(
            "NVLink 4 (H100/H200 SXM)",
            450 * GB,
            "NVIDIA H100 and H200 datasheets (NVLink 900 GB/s per GPU, both directions); "
            "NVIDIA Hopper architecture whitepaper (18 NVLink 4 links, 50 GB/s each)",
        ),
        # Ampere: 12 third-generation links, 600 GB/s total: 300 GB/s each way.
        LinkSpec(
            "NVLink 3 (A100 SXM)",
            300 * GB,
            "NVIDIA A100 datasheet (NVLink 600 GB/s, both directions); Ampere architecture "
            "whitepaper (12 NVLink 3 links)",
        ),
        # PCIe 5.0: 32 GT/s per lane with 128b/130b coding, x16 = 63 GB/s each way; the H200
        # datasheet quotes 128 GB/s for both directions.
        LinkSpec(
            "PCIe Gen5 x16",
            64 * GB,
            "PCI-SIG PCI Express 5.0 base specification (32 GT/s per lane); NVIDIA H200 "
            "datasheet (PCIe Gen5 128 GB/s, both directions)",
        ),
        LinkSpec(
            "PCIe Gen4 x16",
            32 * GB,
            "PCI-SIG PCI Express 4.0 base specification (16 GT/s per lane); NVIDIA A100 "
            "datasheet (PCIe Gen4 64 GB/s, both directions)",
        ),
        # Between nodes: one 400 Gb/s NDR InfiniBand port per GPU (DGX H100/H200 compute fabric).
        LinkSpec(
            "InfiniBand NDR 400 Gb/s",
            50 * GB,
            "NVIDIA ConnectX-7 datasheet (400 Gb/s NDR InfiniBand per port); NVIDIA DGX H100/H200 "
            "user guide (one ConnectX-7 400 Gb/s port per GPU for the compute fabric)",
        ),
    )
}

NVLINK4 = LINKS["NVLink 4 (H100/H200 SXM)"]
NVLINK3 = LINKS["NVLink 3 (A100 SXM)"]
PCIE5 = LINKS["PCIe Gen5 x16"]
PCIE4 = LINKS["PCIe Gen4 x16"]
IB_NDR = LINKS["InfiniBand NDR 400 Gb/s"]


@dataclass(frozen=True)
class Topology:
    """GPUs per node on a fast link, nodes joined by a slower one.

    A ring is as fast as its slowest hop: every device waits for its block each step, so once
    the ring spans more than one node every step takes the inter-node link's time.
    """

    name: str
    gpus_per_node: int
    intra: LinkSpec
    inter: LinkSpec

    def link_for(self, devices: int) -> LinkSpec:
        return self.intra if devices <= self.gpus_per_node else self.inter


TOPOLOGIES: dict[str, Topology] = {
    t.name: t
    for t in (
        Topology("DGX H200: 8 GPUs on NVLink 4, NDR InfiniBand between nodes", 8, NVLINK4, IB_NDR),
        Topology("8 GPUs on PCIe Gen5, NDR InfiniBand between nodes", 8, PCIE5, IB_NDR),
    )
}
DEFAULT_TOPOLOGY = TOPOLOGIES["DGX H200: 8 GPUs on NVLink 4, NDR InfiniBand between nodes"]


def link_from_topology_matrix(entry: str) -> LinkSpec | None:
    """The link behind an `nvidia-smi topo -m` entry between two GPUs on a Hopper system:
    'NV18' (18 NVLink 4 links) -> NVLink 4; 'PIX', 'PXB', 'PHB', 'NODE', 'SYS' -> PCIe Gen5.
    None for anything else (older GPUs, fewer links, unknown)."""
    entry = entry.strip().upper()
    if entry == "NV18":
        return NVLINK4
    if entry in ("PIX", "PXB", "PHB", "NODE", "SYS"):
        return PCIE5
    return None
