"""The app's Qt-free figures for the decode pass: the lesson's steps, the explain pane's decode
section with what fits and its formula, and the model curves, for a config whose pass is decode
(a recorded decode run opens on one)."""

from __future__ import annotations

from app.measure.explain import explain_html
from app.state.lesson import lesson_steps
from app.state.model.curves import model_curves
from app.state.point_inputs import PointInputs
from app.state.units import fmt_bytes, fmt_int
from gpu.algorithms import NAIVE, SPLIT_KV, TILED
from gpu.config import DECODE, AttentionConfig
from gpu.model.costmodel import GPUS, algorithm_cost
from gpu.model.decode_cost import kv_cache_bytes

H100 = GPUS["H100 SXM 80 GB"]
LLAMA_3_8B_SHAPE = AttentionConfig(
    seq_len=131072, heads=32, kv_heads=8, head_dim=128, batch=8, pass_=DECODE
)


def _inputs(config: AttentionConfig, budget: int | None = H100.memory_bytes) -> PointInputs:
    return PointInputs(config, (NAIVE, SPLIT_KV), H100, "H100 SXM", budget, "an H100")


def test_a_decode_config_gets_the_decode_lesson():
    steps = lesson_steps(_inputs(LLAMA_3_8B_SHAPE))
    assert [s.title for s in steps] == [
        "The KV cache grows as N, and every token reads it",
        "What fits on this device",
        "Memory-bound even when fused",
        "What GQA saves",
    ]
    assert fmt_bytes(kv_cache_bytes(LLAMA_3_8B_SHAPE)) in steps[0].text  # 4.29 GB at 128k
    # Llama-3-8B's shape on an H100: 487,819 tokens, 60,977 a sequence at batch 8
    assert fmt_int(487_819) in steps[1].text and fmt_int(60_977) in steps[1].text
    assert "4× less" in steps[3].text  # groups of 4


def test_a_shape_no_preset_has_still_says_what_one_layer_holds():
    config = LLAMA_3_8B_SHAPE.with_(heads=12, kv_heads=4, head_dim=64, batch=1)
    step = lesson_steps(_inputs(config))[1]
    per_token = 2 * 4 * 64 * 2
    assert fmt_int(H100.memory_bytes // per_token) in step.text
    assert "memory of this device is not known" in lesson_steps(_inputs(config, None))[1].text


def test_the_explain_pane_gives_the_cache_and_what_fits_with_its_formula():
    html = explain_html(_inputs(LLAMA_3_8B_SHAPE))
    assert "2 · 8 · 8 · 131" in html and "<b>4.29 GB</b>" in html
    assert "What fits: Llama-3-8B (GQA 32/8)" in html
    assert "(80,000,000,000 − 16,060,522,496) / (2 · 32 · 8 · 128 · 2)" in html
    assert "= 487,819 tokens" in html
    assert "tiled" not in html.lower().replace("split", "")  # no prefill kernel's section


def test_decode_model_curves_draw_split_kv_as_the_fused_memory_line():
    family = LLAMA_3_8B_SHAPE.with_(seq_len=128)
    curves = model_curves(family, (NAIVE, TILED, SPLIT_KV), H100)
    n, peaks = curves.series[("memory", "model_tiled")]
    i = n.index(131072)
    assert peaks[i] == algorithm_cost(family.with_(seq_len=131072), SPLIT_KV).peak_bytes
    assert curves.series[("traffic", "model_tiled")] == ((), ())  # no decode of a prefill kernel
