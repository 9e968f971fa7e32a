"""The GPUs the model runs on: each one's figures from its datasheet, with their sources.

`GpuSpec` holds what a roofline and a memory wall are drawn from (memory, bandwidths, compute
roofs per unit, shared memory, SMs, L2, clock) and what an SM holds at once (its compute
capability's occupancy limits, `sm_limits`); `GPUS` is the table the app offers, and
`gpu_for_device_name` matches a CUDA device to it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..launch.occupancy import ADA, AMPERE_A100, AMPERE_GA10X, HOPPER, TURING, SmLimits

#: Compute units a kernel's matmul FLOPs run on (keys of `GpuSpec.compute_peaks`).
TENSOR = "tensor"
FP32 = "fp32"

GB = 10**9
GiB = 2**30
MiB = 2**20
KiB = 1024

#: Results per clock per SM of exp2 and the other special functions on the XU (MUFU) unit:
#: 16 on compute capability 5.x to 9.0 (CUDA C++ Programming Guide, "Arithmetic Instructions"
#: throughput table).
XU_OPS_PER_CLOCK_PER_SM = 16
#: Dense fp16/bf16 FLOPs per clock per SM of Hopper's tensor cores through wgmma: four tensor
#: cores of 512 FMA/clock each (NVIDIA Hopper architecture whitepaper). The counters agree: for
#: wgmma and cuBLAS/cuDNN kernels on the H200, sm__pipe_tensor_cycles_active (one count per
#: busy sub-partition cycle) equals FLOPs / 1024 exactly.
HOPPER_WGMMA_FLOPS_PER_CLOCK_PER_SM = 4096
#: The same tensor cores driven by the warp-level mma.sync.m16n8k16 (Ampere's instruction):
#: the counters measured 682.7 FLOPs per busy sub-partition cycle for every mma.sync kernel on
#: the H200 (tiled_mma and FlashAttention-2, resources/recorded/h200_sweep.json: FLOPs ÷
#: sm__pipe_tensor_cycles_active), 2/3 of wgmma's 1,024: 4 × 2048/3 per SM.
HOPPER_MMA_SYNC_FLOPS_PER_CLOCK_PER_SM = 4 * 2048 / 3
#: fp32 FLOPs per clock per SM: 128 FP32 lanes × 2 (an FMA) (Hopper whitepaper, SM diagram).
HOPPER_FP32_FLOPS_PER_CLOCK_PER_SM = 256
#: SM sub-partitions (each with its own tensor core, warp scheduler and MUFU): Volta to Hopper.
SUBPARTITIONS_PER_SM = 4
#: The H100/H200 SXM's maximum SM boost clock: 1,980 MHz (on the H200: nvidia-smi -q -d CLOCK
#: "Max Clocks" SM 1980 MHz, cudaDevAttrClockRate 1,980,000 kHz; docs/bench/h200_clocks.txt).
#: The roofs are quoted at it unless the counters measured the clock.
HOPPER_SXM_BOOST_CLOCK_HZ = 1.98e9
HOPPER_CLOCK_SOURCE = "boost clock 1.98 GHz (H200's max SM clock, nvidia-smi 'Max Clocks')"

GPU, CPU = "gpu", "cpu"


@dataclass(frozen=True)
class GpuSpec:
    """The figures of one processor that its roofline and memory wall are drawn from.

    `name` is the product as its maker sells it ("H200 SXM 141 GB"; saved settings refer to
    it). Capacities and rates are decimal (GB = 10⁹ B, TB/s = 10¹² B/s, TFLOP/s = 10¹² FLOP/s):
    the H200's datasheet says 141 GB (`memory_bytes` = 141·10⁹), the device reports
    150,109,880,320 B (150.1 GB), which `Device`/`DeviceInfo` carry apart. GiB appear only
    where named.

    `memory_bytes` is the device's capacity, one rule everywhere: `main.py model`'s fits and
    walls, `explain`'s, the app's budget line, its explain pane's walls, the Tiles tab and the
    runs on "this device" all use it, for a live or a recorded GPU alike. The datasheet's
    figure is the one every user of the part can cite and the one a shape-only model can know;
    what a device reports differs by driver and ECC mode and is shown beside it, never used. It
    also leaves room for the CUDA context: the H200 recordings had 149.56 GB free at their start,
    above the 141 GB.

    Compute roofs are per-clock rates × `clock_hz` where the rate per clock is known
    (`*_per_clock_per_sm`; Hopper), else the datasheet's peak at its own clock. `clock_hz` is
    the datasheet's boost clock unless `clock_source` says the counters measured it
    (`with_clock`). `kind` is GPU, or CPU for this machine's processor (gpu/model/cpu_roofs.py):
    then `sms` are cores and the compute roof is fp32 SIMD.
    """

    name: str
    memory_bytes: int
    bandwidth_bytes_s: float
    smem_per_sm_bytes: int
    fp16_tensor_flops: float  # dense, fp32 accumulate, at the datasheet's clock
    sms: int
    source: str
    l2_bytes: int = 0
    #: L2 bandwidth; None where no measured or published figure is known.
    l2_bandwidth_bytes_s: float | None = None
    fp32_flops: float = 0.0  # CUDA cores, FMA = 2 FLOPs, at the datasheet's clock
    clock_hz: float = 0.0
    xu_ops_per_clock_per_sm: int = XU_OPS_PER_CLOCK_PER_SM
    l2_source: str = ""
    #: Whether the L2 figure is a nominal peak (the counters' own), not a measured rate.
    l2_nominal: bool = False
    clock_source: str = ""
    clock_measured: bool = False
    tensor_flops_per_clock_per_sm: float = 0.0  # wgmma on Hopper; 0: use fp16_tensor_flops
    mma_sync_flops_per_clock_per_sm: float = 0.0  # 0: mma.sync is the tensor path itself
    fp32_flops_per_clock_per_sm: float = 0.0  # 0: use fp32_flops
    kind: str = GPU
    bandwidth_source: str = ""
    #: Compute capability and per-SM occupancy limits (threads, blocks, registers); None on a
    #: CPU.
    sm_limits: SmLimits | None = None

    @property
    def compute_capability(self) -> str:
        """'9.0' ('' on a CPU)."""
        return self.sm_limits.compute_capability if self.sm_limits is not None else ""

    @property
    def tensor_flops(self) -> float:
        """Dense fp16/bf16 tensor FLOP/s at `clock_hz` (wgmma on Hopper)."""
        if self.tensor_flops_per_clock_per_sm and self.clock_hz:
            return self.tensor_flops_per_clock_per_sm * self.sms * self.clock_hz
        return self.fp16_tensor_flops

    @property
    def mma_sync_flops(self) -> float:
        if self.mma_sync_flops_per_clock_per_sm and self.clock_hz:
            return self.mma_sync_flops_per_clock_per_sm * self.sms * self.clock_hz
        return self.tensor_flops

    @property
    def fp32_peak_flops(self) -> float:
        if self.fp32_flops_per_clock_per_sm and self.clock_hz:
            return self.fp32_flops_per_clock_per_sm * self.sms * self.clock_hz
        return self.fp32_flops

    @property
    def top_flops(self) -> float:
        """The fastest compute roof: the tensor cores on a GPU, fp32 SIMD on a CPU."""
        return max(self.tensor_flops, self.fp32_peak_flops)

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel can be compute-bound on this device (its
        fastest compute roof over its DRAM bandwidth)."""
        return self.top_flops / self.bandwidth_bytes_s

    @property
    def xu_ops_s(self) -> float:
        """Exponentials (and other special functions) per second, all SMs (0 on a CPU)."""
        if self.kind != GPU:
            return 0.0
        return self.xu_ops_per_clock_per_sm * self.sms * self.clock_hz

    @property
    def memory_gb(self) -> float:
        return self.memory_bytes / GB

    @property
    def memory_label(self) -> str:
        """'141 GB': the capacity, decimal."""
        return f"{self.memory_gb:.0f} GB"

    @property
    def label(self) -> str:
        """'H200 SXM, 141 GB' (or the CPU's name)."""
        if self.kind != GPU:
            return self.name
        return f"{self.name.rsplit(' ', 2)[0]}, {self.memory_label}"

    @property
    def compute_peaks(self) -> dict[str, float]:
        """FLOP/s of each matmul unit (keys TENSOR, FP32), where known."""
        peaks = {}
        if self.tensor_flops:
            peaks[TENSOR] = self.tensor_flops
        if self.fp32_peak_flops:
            peaks[FP32] = self.fp32_peak_flops
        return peaks

    def kernel_seconds(self, hbm_bytes: int, flops: int) -> float:
        return max(hbm_bytes / self.bandwidth_bytes_s, flops / self.top_flops)


def with_clock(gpu: GpuSpec, clock_hz: float, source: str, measured: bool = True) -> GpuSpec:
    """`gpu` with its roofs quoted at `clock_hz` (the counters' measured clock)."""
    if not clock_hz or clock_hz <= 0:
        return gpu
    return replace(gpu, clock_hz=float(clock_hz), clock_source=source, clock_measured=measured)


#: Per-clock rates and the clock of the Hopper SXM parts (H100, H200): their roofs.
_HOPPER_SXM = {
    "clock_hz": HOPPER_SXM_BOOST_CLOCK_HZ,
    "clock_source": HOPPER_CLOCK_SOURCE,
    "tensor_flops_per_clock_per_sm": HOPPER_WGMMA_FLOPS_PER_CLOCK_PER_SM,
    "mma_sync_flops_per_clock_per_sm": HOPPER_MMA_SYNC_FLOPS_PER_CLOCK_PER_SM,
    "fp32_flops_per_clock_per_sm": HOPPER_FP32_FLOPS_PER_CLOCK_PER_SM,
    "sm_limits": HOPPER,
}

GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        # NVIDIA H200 Tensor Core GPU datasheet (2024): 141 GB HBM3e (the device reports
        # 150,109,880,320 B = 150.1 GB usable), 4.8 TB/s, FP16 Tensor Core 1,979 TFLOPS with
        # sparsity (989.5 dense), FP32 67 TFLOPS; Hopper tuning guide: 228 KiB shared/SM
        # (227 KiB usable by one block); 132 SMs on the SXM part; L2 60 MiB
        # (cudaDevAttrL2CacheSize on the H200). L2 bandwidth: not published. Measured with
        # `python3 bench/l2_bandwidth.py` on an H200 (driver 580.159.04, 2026-11-30): 15.42 TB/s
        # is the L2 counters' nominal peak (lts__t_bytes ÷ its pct_of_peak_sustained; the roof
        # Nsight Compute draws), not a rate anything reached; the best streaming read of a
        # 30 MiB buffer reached 8.52 TB/s.
        GpuSpec(
            "H200 SXM 141 GB",
            141 * GB,
            4.8e12,
            228 * KiB,
            989.5e12,
            132,
            "NVIDIA H200 datasheet; Hopper tuning guide",
            l2_bytes=60 * MiB,
            fp32_flops=67e12,
            l2_bandwidth_bytes_s=15.42e12,
            l2_nominal=True,
            l2_source="size: cudaDevAttrL2CacheSize on an H200; bandwidth: nominal, the L2 "
            "counters' peak on an H200 (bench/l2_bandwidth.py; best streaming read 8.52 TB/s)",
            **_HOPPER_SXM,
        ),
        # NVIDIA H100 datasheet (SXM5): 80 GB HBM3, 3.35 TB/s, FP16 Tensor 1,979 TFLOPS sparse,
        # FP32 67 TFLOPS; H100 architecture whitepaper: 50 MB L2 on the SXM5 part.
        GpuSpec(
            "H100 SXM 80 GB",
            80 * GB,
            3.35e12,
            228 * KiB,
            989.5e12,
            132,
            "NVIDIA H100 datasheet; Hopper tuning guide",
            l2_bytes=50 * MiB,
            fp32_flops=67e12,
            **_HOPPER_SXM,
            l2_source="size: NVIDIA H100 whitepaper; bandwidth not published",
        ),
        # NVIDIA A100 datasheet: 40 GB HBM2 at 1,555 GB/s, 80 GB HBM2e at 2,039 GB/s; FP16 Tensor
        # 312 TFLOPS dense, FP32 19.5 TFLOPS, boost 1,410 MHz; Ampere tuning guide: 164 KB
        # shared/SM; 108 SMs. A100 whitepaper: 40 MB L2, 5,120 B/clock L2 read bandwidth
        # (2.3× V100's 2,048 B/clock): 7.2 TB/s at 1,410 MHz.
        GpuSpec(
            "A100 SXM 40 GB",
            40 * GB,
            1.555e12,
            164 * KiB,
            312e12,
            108,
            "NVIDIA A100 datasheet; Ampere tuning guide",
            l2_bytes=40 * MiB,
            l2_bandwidth_bytes_s=5120 * 1.41e9,
            fp32_flops=19.5e12,
            clock_hz=1.41e9,
            clock_source="A100 datasheet boost clock 1,410 MHz",
            l2_source="NVIDIA A100 whitepaper: 5,120 B/clock at 1,410 MHz",
            sm_limits=AMPERE_A100,
        ),
        GpuSpec(
            "A100 SXM 80 GB",
            80 * GB,
            2.039e12,
            164 * KiB,
            312e12,
            108,
            "NVIDIA A100 datasheet; Ampere tuning guide",
            l2_bytes=40 * MiB,
            l2_bandwidth_bytes_s=5120 * 1.41e9,
            fp32_flops=19.5e12,
            clock_hz=1.41e9,
            clock_source="A100 datasheet boost clock 1,410 MHz",
            l2_source="NVIDIA A100 whitepaper: 5,120 B/clock at 1,410 MHz",
            sm_limits=AMPERE_A100,
        ),
        # NVIDIA Ada GPU architecture whitepaper (RTX 4090): 24 GB GDDR6X at 1,008 GB/s, FP16
        # Tensor with FP32 accumulate 165.2 TFLOPS dense, FP32 82.6 TFLOPS, boost 2,520 MHz,
        # 72 MB L2; Ada tuning guide: 100 KB shared/SM; 128 SMs.
        GpuSpec(
            "RTX 4090 24 GB",
            24 * GB,
            1.008e12,
            100 * KiB,
            165.2e12,
            128,
            "NVIDIA Ada whitepaper; Ada tuning guide",
            l2_bytes=72 * MiB,
            fp32_flops=82.6e12,
            clock_hz=2.52e9,
            clock_source="Ada whitepaper boost clock 2,520 MHz",
            l2_source="size: NVIDIA Ada whitepaper; bandwidth not published",
            sm_limits=ADA,
        ),
        # RTX 3060 12 GB: 360 GB/s (192-bit GDDR6 at 15 Gbps, NVIDIA spec page), 28 SMs at
        # 1.777 GHz boost, FP32 12.7 TFLOPS; GA10x whitepaper's GeForce rate of 512 dense FP16
        # FLOP/clk/SM with FP32 accumulate gives 25.5 TFLOPS (derived); 3 MB L2 (GA106); Ampere
        # tuning guide: 100 KB shared/SM on GA10x.
        GpuSpec(
            "RTX 3060 12 GB",
            12 * GB,
            360e9,
            100 * KiB,
            25.5e12,
            28,
            "NVIDIA spec page; GA10x whitepaper (derived rate)",
            l2_bytes=3 * MiB,
            fp32_flops=12.7e12,
            clock_hz=1.777e9,
            clock_source="NVIDIA spec page boost clock 1,777 MHz",
            l2_source="size: NVIDIA GA10x whitepaper; bandwidth not published",
            sm_limits=AMPERE_GA10X,
        ),
        # NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s, 65 TFLOPS mixed precision, 8.1 TFLOPS
        # FP32, boost 1,590 MHz; Turing whitepaper: 4 MB L2 (TU104); Turing tuning guide: 64 KB
        # shared/SM; 40 SMs.
        GpuSpec(
            "T4 16 GB",
            16 * GB,
            320e9,
            64 * KiB,
            65e12,
            40,
            "NVIDIA T4 datasheet; Turing tuning guide",
            l2_bytes=4 * MiB,
            fp32_flops=8.1e12,
            clock_hz=1.59e9,
            clock_source="T4 datasheet boost clock 1,590 MHz",
            l2_source="size: NVIDIA Turing whitepaper; bandwidth not published",
            sm_limits=TURING,
        ),
    )
}

DEFAULT_GPU = "H200 SXM 141 GB"


def gpu_for_device_name(device_name: str) -> GpuSpec | None:
    """Best-effort match of a CUDA device name ('NVIDIA H200') to the table."""
    lowered = device_name.lower()
    for key, spec in GPUS.items():
        model = key.split()[0].lower()
        if model in lowered and (model != "a100" or key.split()[2].lower() in lowered):
            return spec
    for key, spec in GPUS.items():
        if key.split()[0].lower() in lowered:
            return spec
    return None


def with_measured_l2(
    gpu: GpuSpec, l2_bandwidth_bytes_s: float | None, source: str, nominal: bool = False
) -> GpuSpec:
    """`gpu` with an L2 bandwidth from the device (None: unchanged); `nominal` when the figure
    is the counters' peak rather than a rate measured."""
    if not l2_bandwidth_bytes_s:
        return gpu
    return replace(
        gpu, l2_bandwidth_bytes_s=float(l2_bandwidth_bytes_s), l2_source=source, l2_nominal=nominal
    )
