"""The decode pass: q new tokens per head against a KV cache of N tokens, H_q query heads over
H_kv KV heads. Its config, its cost model (the cache read once, the split over the SMs) and the
CPU backend's two algorithms, exact against a float64 reference by FlashAttention's criterion."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpu.algorithms import NAIVE, SPLIT_KV, TILED
from gpu.backends import cpu_decode
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import DECODE, FORWARD, STEP, AttentionConfig, ConfigError, ceil_div
from gpu.errors import UnsupportedConfig
from gpu.files.schema import check_config
from gpu.launch import decode_split
from gpu.model.costmodel import GPUS, algorithm_cost, compulsory_cost, l2_aware_cost
from gpu.model.decode_cost import kv_cache_bytes, plan_for, score_bytes

H100 = GPUS["H100 SXM 80 GB"]


def decode(**kw) -> AttentionConfig:
    return AttentionConfig(pass_=DECODE, **kw)


# --------------------------------------------------------------------------------------------
# The config


def test_decode_config_has_kv_heads_and_new_tokens_and_is_no_training_pass():
    cfg = decode(seq_len=4096, heads=32, kv_heads=8, new_tokens=4)
    assert (cfg.kv_head_count, cfg.group_size, cfg.query_rows) == (8, 4, 4)
    assert not cfg.has_backward and not cfg.has_forward_timed
    assert cfg.label() == "B=1 h=32/8 N=4096 d=64 fp16, inference decode q=4"
    assert AttentionConfig(heads=12).kv_head_count == 12  # unset: MHA


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"pass_": DECODE, "heads": 12, "kv_heads": 5}, "kv_heads", "divisor of heads = 12"),
        ({"pass_": DECODE, "kv_heads": 0}, "kv_heads", "from 1 to 256"),
        ({"pass_": DECODE, "new_tokens": 9}, "new_tokens", "from 1 to 8"),
        ({"pass_": DECODE, "new_tokens": 0}, "new_tokens", "from 1 to 8"),
        ({"pass_": DECODE, "causal": True}, "causal", "whole cache"),
        ({"pass_": DECODE, "deterministic": True}, "deterministic", "no dQ"),
        ({"heads": 8, "kv_heads": 2}, "kv_heads", "outside the decode pass"),
        ({"pass_": STEP, "new_tokens": 2}, "new_tokens", "outside the decode pass"),
    ],
)
def test_bad_decode_fields_name_the_field_and_the_rule(changes, field, fragment):
    with pytest.raises(ConfigError) as info:
        AttentionConfig(**changes)
    assert info.value.field == field and fragment in str(info.value)


def test_decode_fields_are_written_only_when_set_and_round_trip_through_files():
    assert "kv_heads" not in AttentionConfig().to_dict()
    assert "new_tokens" not in AttentionConfig().to_dict()
    cfg = decode(seq_len=17, heads=32, kv_heads=1, new_tokens=8)
    data = json.loads(json.dumps(cfg.to_dict()))
    assert (data["kv_heads"], data["new_tokens"], data["pass"]) == (1, 8, "decode")
    assert AttentionConfig.from_dict(data) == cfg
    assert check_config(data, "f.json") == cfg


# --------------------------------------------------------------------------------------------
# The cost model


def test_the_kv_cache_is_two_b_hkv_n_d_bytes_and_split_kv_reads_it_once():
    cfg = decode(seq_len=131072, heads=32, kv_heads=8, head_dim=128, batch=8)
    assert kv_cache_bytes(cfg) == 2 * 8 * 8 * 131072 * 128 * 2 == 4_294_967_296
    split = compulsory_cost(cfg, SPLIT_KV)
    q_bytes = 8 * 32 * 128 * 2
    partials = decode_split.partial_bytes(cfg, plan_for(cfg))
    assert split.bytes_read == q_bytes + kv_cache_bytes(cfg) + partials
    assert split.bytes_written == q_bytes + partials
    assert split.flops == 4 * 8 * 32 * 131072 * 128


@pytest.mark.parametrize(("heads", "kv_heads", "group"), [(32, 32, 1), (32, 8, 4), (64, 8, 8)])
def test_decode_sits_far_left_of_the_ridge_at_about_g_flop_per_byte(heads, kv_heads, group):
    cfg = decode(seq_len=65536, heads=heads, kv_heads=kv_heads, head_dim=128)
    intensity = compulsory_cost(cfg, SPLIT_KV).arithmetic_intensity
    assert intensity == pytest.approx(group, rel=0.01)  # 2 · G · q / 2 bytes
    assert intensity < H100.ridge_flops_per_byte / 30


def test_naive_writes_and_reads_its_scores_a_few_percent_beside_the_cache():
    cfg = decode(seq_len=131072, heads=32, kv_heads=8, head_dim=128, batch=8)
    naive, split = compulsory_cost(cfg, NAIVE), compulsory_cost(cfg, SPLIT_KV)
    s = score_bytes(cfg)
    assert s == 8 * 32 * 131072 * 2
    assert [k.name for k in naive.kernels] == ["gemm_qk", "softmax", "gemm_pv"]
    # S written, read, P written, read: 4 score matrices on top of Q, K, V, O once
    assert naive.hbm_bytes == 2 * 8 * 32 * 128 * 2 + kv_cache_bytes(cfg) + 4 * s
    assert naive.peak_bytes - split.peak_bytes == 2 * s - decode_split.partial_bytes(
        cfg, plan_for(cfg)
    ) - decode_split.counter_bytes(plan_for(cfg))
    assert 4 * s / kv_cache_bytes(cfg) < 0.07  # the wall is the cache, not S


def test_the_l2_aware_decode_figure_is_the_compulsory_one_and_no_reuse_rereads_row_chunks():
    big_group = decode(seq_len=8192, heads=32, kv_heads=1, new_tokens=8, head_dim=128)
    assert decode_split.row_chunks(big_group) == 32  # 256 rows of one KV head, 8 per block
    lower, upper = compulsory_cost(big_group, SPLIT_KV), algorithm_cost(big_group, SPLIT_KV)
    assert l2_aware_cost(big_group, SPLIT_KV, H100) == lower
    # every row chunk reads the keys, and every split's block the rows of Q
    splits = plan_for(big_group).splits
    q_bytes = 32 * 8 * 128 * 2
    assert upper.bytes_read - lower.bytes_read == (
        31 * kv_cache_bytes(big_group) + (splits - 1) * q_bytes
    )


def test_prefill_kernels_have_no_decode_and_the_decode_kernel_no_forward():
    with pytest.raises(KeyError, match="no decode pass"):
        algorithm_cost(decode(seq_len=128), TILED)
    cpu = CpuBackend()
    assert cpu.passes(SPLIT_KV) == (DECODE,) and DECODE in cpu.passes(NAIVE)
    with pytest.raises(UnsupportedConfig, match="split_kv has no inference forward"):
        cpu.run(AttentionConfig(seq_len=64), SPLIT_KV)
    with pytest.raises(UnsupportedConfig, match="inference decode runs naive, split_kv"):
        cpu.run(decode(seq_len=64), TILED)


# --------------------------------------------------------------------------------------------
# The split: enough blocks to fill the SMs, chosen by wave efficiency


@pytest.mark.parametrize(
    ("batch", "heads", "kv_heads", "n"),
    [
        (8, 32, 8, 131072),
        (1, 32, 8, 4096),
        (1, 32, 8, 16384),
        (1, 32, 8, 131072),
        (8, 32, 32, 131072),
    ],
)
def test_the_issues_shapes_fill_the_h100s_slots_as_well_as_any_split_can(batch, heads, kv_heads, n):
    cfg = decode(seq_len=n, heads=heads, kv_heads=kv_heads, head_dim=128, batch=batch)
    plan = plan_for(cfg, H100)
    granule = decode_split.KEY_GRANULE
    best = 0.0
    for wanted in range(1, decode_split.MAX_SPLITS + 1):  # every split of whole granules
        keys = ceil_div(ceil_div(n, wanted), granule) * granule
        blocks = plan.units * ceil_div(n, keys)
        best = max(best, blocks / (ceil_div(blocks, plan.slots) * plan.slots))
    assert plan.wave_efficiency >= min(decode_split.WAVE_TARGET, best) - 1e-12
    assert plan.wave_efficiency > 0.85
    assert plan.keys_per_split % granule == 0
    assert (plan.splits - 1) * plan.keys_per_split < n <= plan.splits * plan.keys_per_split


def test_the_split_is_the_fewest_that_reach_the_target():
    cfg = decode(seq_len=131072, heads=32, kv_heads=8, head_dim=128, batch=8)
    plan = plan_for(cfg, H100)
    # 64 (batch, KV head) units, 3 blocks of 128 threads per SM (167 registers): 396 slots
    assert (plan.units, plan.slots, plan.splits, plan.blocks) == (64, 396, 6, 384)
    fewer = decode_split.SplitPlan(64, 5, 131072 // 5, 4, 1, 396)
    assert fewer.wave_efficiency < decode_split.WAVE_TARGET


def test_a_short_cache_is_cut_no_finer_than_the_key_granule():
    plan = plan_for(decode(seq_len=100, heads=8, kv_heads=8), H100)
    assert (plan.splits, plan.keys_per_split) == (4, 32)
    assert plan_for(decode(seq_len=1), H100).splits == 1


# --------------------------------------------------------------------------------------------
# The CPU backend: exact by FlashAttention's criterion


def _errors(config: AttentionConfig) -> tuple[float, float]:
    """(naive's, split-KV's) largest |error| against the float64 reference on one input."""
    q, k, v = cpu_decode.random_decode_inputs(config, seed=config.seq_len)
    ref = cpu_decode.reference_decode(q, k, v, config)
    naive, _ = cpu_decode.naive_decode(config, q, k, v)
    split, _ = cpu_decode.split_decode(config, q, k, v)
    assert naive.shape == split.shape == q.shape
    return (
        float(np.max(np.abs(naive.astype(np.float64) - ref))),
        float(np.max(np.abs(split.astype(np.float64) - ref))),
    )


#: The grid of shapes (N, query group, new tokens): every group and q at the small N; at
#: 131071 (seconds of NumPy each) the smallest and the largest of them (tests/test_decode_gpu.py
#: runs the whole grid on the GPU).
DECODE_GRID = [(n, group, q) for n in (1, 17, 4097) for group in (1, 4, 8, 32) for q in (1, 8)] + [
    (131071, 1, 1),
    (131071, 32, 1),
    (131071, 4, 8),
]


@pytest.mark.parametrize(("n", "group", "new_tokens"), DECODE_GRID)
def test_split_kv_decode_is_exact_by_flashattentions_criterion(n, group, new_tokens):
    """The fused algorithm's error against float64 is at most twice that of the fp16 naive
    path (S and P rounded to fp16, as a framework's fp16 attention does)."""
    kv_heads, batch, d = (1, 1, 32) if n > 100_000 else (2, 2, 64)
    cfg = decode(
        seq_len=n, heads=group * kv_heads, kv_heads=kv_heads, new_tokens=new_tokens,
        head_dim=d, batch=batch,
    )  # fmt: skip
    naive, split = _errors(cfg)
    assert naive <= 1e-2  # the fp16 tolerance of every backend
    assert split <= 2 * naive + 1e-6


def test_bf16_decode_is_exact_by_the_same_criterion():
    cfg = decode(seq_len=4097, heads=8, kv_heads=2, new_tokens=2, dtype="bf16", head_dim=64)
    naive, split = _errors(cfg)
    assert split <= 2 * naive + 1e-6 and naive <= 6e-2


def test_query_head_h_reads_kv_head_h_over_g():
    cfg = decode(seq_len=33, heads=4, kv_heads=2, head_dim=16)
    q, k, v = cpu_decode.random_decode_inputs(cfg, 1)
    v[:, 1] += 100.0  # KV head 1's values stand out: heads 2 and 3 must see them, 0 and 1 not
    out, _ = cpu_decode.split_decode(cfg, q, k, v)
    means = out.astype(np.float64).mean(axis=(0, 2, 3))
    assert np.all(means[:2] < 10) and np.all(means[2:] > 90)


def test_the_partials_merge_to_the_whole_softmax_in_any_order():
    rng = np.random.default_rng(3)
    qg, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((4, 16), (300, 16), (300, 16)))
    m, l_sum, o = cpu_decode.split_partials(qg, k, v, 0.25, keys_per_split=64)
    assert m.shape == (5, 4)  # ceil(300 / 64) ranges
    s = qg.astype(np.float64) @ k.T.astype(np.float64) * 0.25
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v
    order = [3, 0, 4, 1, 2]
    got = cpu_decode.merge_partials(m[order], l_sum[order], o[order])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_naive_decode_materializes_its_scores_and_split_kv_never_does():
    cfg = decode(seq_len=16384, heads=32, kv_heads=8, head_dim=64)
    backend, options = CpuBackend(), RunOptions(warmup=0, repeats=1, check=True)
    naive, split = backend.run(cfg, NAIVE, options), backend.run(cfg, SPLIT_KV, options)
    assert naive.agrees and split.agrees
    assert [k.name for k in naive.kernel_times] == ["gemm_qk", "softmax", "gemm_pv"]
    assert [k.name for k in split.kernel_times] == ["decode_split"]
    inputs = 2 * 32 * 64 * 2 + kv_cache_bytes(cfg)  # Q, O, K, V
    assert naive.peak_bytes >= inputs + 2 * score_bytes(cfg)  # S and P really held
    assert split.peak_bytes < inputs + score_bytes(cfg)


def test_bench_default_algorithms_are_the_passes_own(capsys):
    from main import main

    status = main(
        ["bench", "--backend", "cpu", "--pass", "decode", "--seq", "64", "--heads", "4",
         "--kv-heads", "2", "--new-tokens", "2", "--check", "--repeats", "1"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    assert " naive " in out and " split_kv " in out and " tiled " not in out


def test_forward_configs_still_run_and_name_no_decode_fields():
    r = CpuBackend().run(AttentionConfig(seq_len=64, heads=2), TILED, RunOptions(repeats=1))
    assert r.config.pass_ == FORWARD and "kv_heads" not in r.to_dict()["config"]


# --------------------------------------------------------------------------------------------
# The shipped recording: replayed without a GPU


def test_the_shipped_decode_recording_replays_without_a_gpu():
    from pathlib import Path

    from gpu.files.recording import load_recording

    path = Path(__file__).resolve().parents[1] / "resources" / "recorded" / "h100_decode.json"
    recording = load_recording(path)
    assert "H100" in recording.device.name
    by_n: dict[int, dict[str, object]] = {}
    for r in recording.results:
        assert r.config.is_decode and r.config.kv_head_count == 8 and r.config.heads == 32
        by_n.setdefault(r.config.seq_len, {})[r.algorithm] = r
    assert sorted(by_n) == [1024 << i for i in range(8)]
    for n, results in by_n.items():
        assert set(results) == {NAIVE, SPLIT_KV, "sdpa_flash", "sdpa_cudnn"}
        split = results[SPLIT_KV]
        assert split.agrees and split.total_ms > 0
        cache = kv_cache_bytes(split.config)
        # measured by CUPTI after an L2 flush: the cache read once, within 1 %
        assert abs(split.measured_dram_bytes - cache) < 0.01 * cache, n


def test_a_recorded_decode_runs_measured_bytes_count_its_own_outputs():
    """The plots' measured DRAM bytes count each kernel's compulsory writes in full: a decode
    step's scores are B·h·q·N, not the prefill's B·h·N² (which made naive's 4.6 GB 8.8 TB)."""
    from pathlib import Path

    from gpu.files.recording import load_recording
    from gpu.model.roofline import compulsory_writes, counted_dram_bytes

    path = Path(__file__).resolve().parents[1] / "resources" / "recorded" / "h100_decode.json"
    for r in load_recording(path).results:
        if r.algorithm in (NAIVE, SPLIT_KV) and r.config.seq_len == 131072:
            measured = sum(t.dram_read_bytes + t.dram_write_bytes for t in r.traffic)
            assert measured <= counted_dram_bytes(r) < 1.1 * measured
    naive = compulsory_writes(decode(seq_len=1000, heads=4, kv_heads=2, new_tokens=2), NAIVE)
    scores, out = 4 * 2 * 1000 * 2, 4 * 2 * 64 * 2
    assert naive == {"gemm_qk": scores, "softmax": scores, "gemm_pv": out}
