"""Where each attention backward rounds, modelled in NumPy: the naive CUDA path (cuBLAS GEMMs
around gpu/kernels/softmax.cu and softmax_bwd.cu), torch's math SDPA in its two modes, and a
float64 reference. With it the accuracy of the naive backward is judged on any machine.

The naive path stores S, P, dP and dS in the inputs' dtype (fp16 or bf16) between its kernels:
    S  = rnd(√d⁻¹ · Q Kᵀ)          cuBLAS, fp32 accumulation, 1/√d as the GEMM's alpha
    P  = rnd(softmax(S))            softmax.cu, fp32 math on the stored S
    O  = rnd(P V)
    dV = rnd(Pᵀ dO),  dP = rnd(dO Vᵀ)
    D  = Σ_j P_j dP_j               softmax_bwd.cu, fp32, in the kernel's own summation order
    dS = rnd(P ∘ (dP − D))
    dQ = rnd(√d⁻¹ · dS K),  dK = rnd(√d⁻¹ · dSᵀ Q)
rnd is round-to-nearest-even to the dtype. A product of two stored values is exact in fp32, so
NumPy's fp32 matmul is cuBLAS's arithmetic up to the order of the fp32 sums (a few fp32 ulps,
2¹³ times finer than an fp16 rounding); softmax_bwd's row term is summed in the kernel's order.

torch's math SDPA (`torch.ops.aten._scaled_dot_product_attention_math`) on fp16/bf16 inputs
upcasts them to fp32, computes in fp32 and rounds O and the gradients once at the end, unless
`torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)`: then it works in the inputs'
dtype (Q and K each scaled by d^-¼, S = Q'K'ᵀ rounded, softmax rounded, autograd in the dtype).
Only the second is a PyTorch implementation in the same dtype, the peer of FlashAttention's
criterion (max error against the reference at most twice the peer's).

`python tests/attention_rounding.py` prints the naive backward's error over each peer's.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

f32, f64 = np.float32, np.float64
DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}
LOG2E = f32(1.4426950408889634)
#: softmax_bwd.cu's chunks per thread before a row is re-read (naive_bwd.CACHE_CHUNKS).
CACHE_CHUNKS = 4

Grads = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class NaiveArithmetic:
    """Where the naive backward rounds. The defaults are what the CUDA kernels do; the other
    settings are the changes one might try: FlashAttention's D = rowsum(dO ∘ O), or dP / dS
    kept in fp32 (four bytes an element, the N×N matrices twice as large)."""

    row_term: str = "p_dp"  # "p_dp": D = Σ P ∘ dP from the stored P, dP; "do_o": Σ dO ∘ O
    dp_fp32: bool = False
    ds_fp32: bool = False


def random_inputs(
    batch: int, heads: int, n: int, d: int, dtype: str, seed: int
) -> tuple[np.ndarray, ...]:
    """Q, K, V, dO: unit-normal entries rounded to the dtype, shape (B, h, N, d)."""
    rng = np.random.default_rng(seed)
    shape = (batch, heads, n, d)
    return tuple(rng.standard_normal(shape, dtype=f32).astype(DTYPES[dtype]) for _ in range(4))


def _rnd(x: np.ndarray, dtype) -> np.ndarray:
    return np.asarray(x, f32).astype(dtype)


def _t(x: np.ndarray) -> np.ndarray:
    """The transpose of each (N, ·) matrix, copied so that matmul runs through BLAS."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


def _gemm(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, out=None) -> np.ndarray:
    """cuBLAS with CUBLAS_COMPUTE_32F: products of two fp16/bf16 values are exact in fp32, summed
    in fp32, times alpha in fp32, rounded to `out` (the inputs' dtype unless given)."""
    acc = (a.astype(f32) @ b.astype(f32)) * f32(alpha)
    return acc if out is f32 else acc.astype(out or a.dtype)


def _masked(n: int, causal: bool) -> np.ndarray:
    """True where the causal mask hides key j from query i (j > i)."""
    above = np.arange(n)[None, :] > np.arange(n)[:, None]
    return above if causal else np.zeros((n, n), bool)


def _warp_sum(x: np.ndarray) -> np.ndarray:
    """reductions.cuh's warp_sum on the last axis (32 lanes): xor butterfly, fp32."""
    lanes = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        x = (x + x[..., lanes ^ off]).astype(f32)
    return x


def softmax_bwd_launch(n: int) -> tuple[int, int]:
    """(VEC, threads per row) of softmax_bwd_rows for fp16/bf16 rows of n (naive_bwd's plan)."""
    vec = 8 if n % 8 == 0 else 1
    per_thread = -(-(n // vec) // CACHE_CHUNKS)
    return vec, min(1024, max(32, 1 << (per_thread - 1).bit_length()))


def softmax_bwd_row_term(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """softmax_bwd_rows's D = Σ_j P_j dP_j for each row of (rows, n) P and dP, summed as the
    kernel sums: per thread over its chunks (VEC elements each), then warp_sum, then block_sum
    over the warps."""
    rows, n = p.shape
    vec, threads = softmax_bwd_launch(n)
    chunks = n // vec
    pc = p.reshape(rows, chunks, vec).astype(f32)
    dc = dp.reshape(rows, chunks, vec).astype(f32)
    acc = np.zeros((rows, threads), f32)
    for c0 in range(0, chunks, threads):  # thread t takes chunks t, t + threads, ... in order
        c1 = min(c0 + threads, chunks)
        for e in range(vec):
            acc[:, : c1 - c0] += pc[:, c0:c1, e] * dc[:, c0:c1, e]  # exact product, fp32 sum
    warps = threads // 32
    per_warp = _warp_sum(acc.reshape(rows, warps, 32))[:, :, 0]
    lanes = np.zeros((rows, 32), f32)
    lanes[:, :warps] = per_warp
    return _warp_sum(lanes)[:, 0]


def naive_forward(q, k, v, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """P and O as the naive CUDA forward stores them (gemm_qk, softmax.cu, gemm_pv)."""
    n, d = q.shape[-2:]
    s = _gemm(q, _t(k), d**-0.5).astype(f32)  # S stored in the dtype, read back as fp32
    hidden = _masked(n, causal)
    mx2 = np.where(hidden, -np.inf, s).max(-1, keepdims=True) * LOG2E
    e = np.exp2((s.astype(f64) * LOG2E - mx2).astype(f32))  # exp2f(fmaf(x, LOG2E, -mx2))
    e = np.where(hidden, f32(0), e)
    inv_sum = f32(1) / e.sum(-1, keepdims=True, dtype=f32)
    p = _rnd(e * inv_sum, q.dtype)
    return p, _gemm(p, v)


def naive_backward(q, k, v, p, o, do, arithmetic: NaiveArithmetic = NaiveArithmetic()) -> Grads:
    """dQ, dK, dV as the naive CUDA backward rounds them (naive_bwd.py's five kernels)."""
    n, d = q.shape[-2:]
    dv = _gemm(_t(p), do)
    dp = _gemm(do, _t(v), out=f32 if arithmetic.dp_fp32 else None)
    if arithmetic.row_term == "do_o":
        row = (do.astype(f32) * o.astype(f32)).sum(-1, keepdims=True, dtype=f32)
    elif dp.dtype == q.dtype:
        row = softmax_bwd_row_term(p.reshape(-1, n), dp.reshape(-1, n)).reshape(p.shape[:-1])
        row = row[..., None]
    else:
        row = (p.astype(f32) * dp).sum(-1, keepdims=True, dtype=f32)
    ds = (p.astype(f32) * (dp.astype(f32) - row)).astype(f32)
    if not arithmetic.ds_fp32:
        ds = ds.astype(q.dtype)
    dq = _gemm(ds, k, d**-0.5, out=q.dtype)
    dk = _gemm(_t(ds), q, d**-0.5, out=q.dtype)
    return dq, dk, dv


def reference(q, k, v, do, causal: bool) -> Grads:
    """float64 dQ, dK, dV of softmax(Q Kᵀ/√d) V on the inputs as stored."""
    q, k, v, do = (x.astype(f64) for x in (q, k, v, do))
    n, d = q.shape[-2:]
    s = np.where(_masked(n, causal), -np.inf, q @ _t(k) * d**-0.5)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = do @ _t(v)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    return ds @ k * d**-0.5, _t(ds) @ q * d**-0.5, _t(p) @ do


def torch_math_sdpa(q, k, v, do, causal: bool, same_dtype: bool, ref: Grads | None = None) -> Grads:
    """The gradients torch's math SDPA returns for these inputs. `same_dtype`: with
    allow_fp16_bf16_reduction_math_sdp(True), computed in the inputs' dtype; without it (torch's
    default), computed in fp32 and rounded once (`ref`, the float64 gradients, if at hand)."""
    dtype = q.dtype
    if not same_dtype:
        ref = reference(q, k, v, do, causal) if ref is None else ref
        return tuple(g.astype(f32).astype(dtype) for g in ref)
    n, d = q.shape[-2:]
    root = f32(np.sqrt(d**-0.5))  # the scale split over Q and K, each product rounded
    qs, ks = _rnd(q.astype(f32) * root, dtype), _rnd(k.astype(f32) * root, dtype)
    s = np.where(_masked(n, causal), -np.inf, _gemm(qs, _t(ks)).astype(f32))
    e = np.exp(s - s.max(-1, keepdims=True)).astype(f32)
    p = _rnd(e / e.sum(-1, keepdims=True, dtype=f32), dtype)  # softmax: fp32 inside
    dv = _gemm(_t(p), do)
    dp = _gemm(do, _t(v)).astype(f32)
    pf = p.astype(f32)
    ds = _rnd(pf * (dp - (pf * dp).sum(-1, keepdims=True, dtype=f32)), dtype)
    dq = _rnd(_gemm(ds, ks).astype(f32) * root, dtype)  # the gradient through Q · d^-¼
    dk = _rnd(_gemm(_t(ds), qs).astype(f32) * root, dtype)
    return dq, dk, dv


def max_errors(grads: Grads, ref: Grads) -> np.ndarray:
    """max |g − ref| of dQ, dK, dV."""
    return np.array([np.abs(g.astype(f64) - r).max() for g, r in zip(grads, ref, strict=True)])


@dataclass(frozen=True)
class Ratios:
    """The naive backward's max error over each torch peer's, for dQ, dK, dV: FlashAttention's
    criterion holds against a peer where all three are at most 2."""

    same_dtype: np.ndarray  # torch math SDPA computing in the inputs' dtype
    fp32_math: np.ndarray  # torch math SDPA as it runs by default: fp32 math, rounded once


def criterion_ratios(
    batch: int, heads: int, n: int, d: int, dtype: str, causal: bool, seed: int,
    arithmetic: NaiveArithmetic = NaiveArithmetic(),
) -> Ratios:  # fmt: skip
    """Both ratios for one set of random inputs."""
    q, k, v, do = random_inputs(batch, heads, n, d, dtype, seed)
    ref = reference(q, k, v, do, causal)
    p, o = naive_forward(q, k, v, causal)
    ours = max_errors(naive_backward(q, k, v, p, o, do, arithmetic), ref)
    same = max_errors(torch_math_sdpa(q, k, v, do, causal, True), ref)
    upcast = max_errors(torch_math_sdpa(q, k, v, do, causal, False, ref), ref)
    return Ratios(same_dtype=ours / same, fp32_math=ours / upcast)


def main() -> None:
    """The table docs/KERNELS.md quotes: worst ratio of 3 seeds, B·h = 4·16 (2·3 at N = 1023)."""
    print("naive backward max error / torch math SDPA's, worst of 3 seeds, dQ dK dV")
    print("dtype   d     N  mask   | same-dtype peer | fp32-math peer (torch's default)")
    for dtype in ("fp16", "bf16"):
        for d in (64, 128):
            for n in (17, 113, 1023):
                for causal in (False, True):
                    batch, heads = (4, 16) if n < 1000 else (2, 3)
                    runs = [
                        criterion_ratios(batch, heads, n, d, dtype, causal, s) for s in range(3)
                    ]
                    same = np.max([r.same_dtype for r in runs], axis=0)
                    upcast = np.max([r.fp32_math for r in runs], axis=0)
                    mask = "causal" if causal else "full"
                    cols = [" ".join(f"{x:4.2f}" for x in worst) for worst in (same, upcast)]
                    print(f"{dtype}  {d:3d}  {n:4d}  {mask:6s} | {cols[0]}  | {cols[1]}")


if __name__ == "__main__":
    main()
