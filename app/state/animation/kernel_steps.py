"""What each kernel of the animation moves and is called: the HBM tensors it reads and writes,
its title, and the tensors each kind of step uses."""

from __future__ import annotations

from gpu.model.schedule import READ, WRITE

from .blockdetail import KIND_CODES

#: Step kinds as the block detail codes them.
READ_CODE, WRITE_CODE, COMPUTE_CODE = KIND_CODES[READ], KIND_CODES[WRITE], 2

#: What each known kernel reads back from / writes to HBM as a whole matrix (for progress fills).
KERNEL_HBM_IO: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gemm_qk": ((), ("S",)),
    "softmax": (("S",), ("P",)),
    "gemm_pv": (("P",), ("O",)),
    "flash_fwd": ((), ("O", "ml")),
}


KERNEL_TITLES: dict[str, str] = {
    "gemm_qk": "S = Q·Kᵀ/√d   (GEMM, writes S to HBM)",
    "softmax": "P = softmax(S)   (reads S, writes P)",
    "gemm_pv": "O = P·V   (GEMM, reads P back)",
    "flash_fwd": "fused kernel: Q_i stays, K_j/V_j stream, online softmax",
}


#: The matrices whose on-chip buffers each step works on (a ring stage only when it holds the
#: step's tile).
STEP_USES: dict[str, tuple[str, ...]] = {
    "load_Q_i": ("Q",),
    "load_K_j": ("K",),
    "load_V_j": ("V",),
    "compute_S_ij": ("S", "Q", "K"),
    "online_softmax": ("S", "ml", "P"),
    "accumulate_O_i": ("O", "P", "V"),
    "store_O_i": ("O",),
    "store_ml": ("ml",),
    "qk_load_Q_i": ("Q",),
    "qk_load_K_j": ("K",),
    "qk_compute_S_ij": ("S",),
    "qk_store_S_ij": ("S",),
    "softmax_read_S": ("S",),
    "softmax_write_P": ("S",),
    "pv_load_P_ik": ("P",),
    "pv_load_V_k": ("V",),
    "pv_compute_O_i": ("O",),
    "pv_store_O_i": ("O",),
}
