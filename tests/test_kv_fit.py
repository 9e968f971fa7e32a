"""What fits at inference: weights plus KV cache on a GPU, worked out by hand for four presets
on the H100 (80 GB) and the H200 (141 GB), decimal GB as the datasheets give them."""

from __future__ import annotations

import json

import pytest

from gpu.model.costmodel import GPUS
from gpu.model.kv_fit import DECODE_MODELS, what_fits

H100 = GPUS["H100 SXM 80 GB"].memory_bytes  # 80,000,000,000
H200 = GPUS["H200 SXM 141 GB"].memory_bytes  # 141,000,000,000


def test_the_gpus_budgets_are_their_datasheets_decimal_gb():
    assert (H100, H200) == (80 * 10**9, 141 * 10**9)


def test_preset_parameter_counts_are_the_published_models():
    # Llama 3 8B: 32 · (2·4096² + 2·4096·1024 + 3·4096·14336 + 2·4096) + 2·128256·4096 + 4096
    assert DECODE_MODELS["llama-3-8b"].params == 8_030_261_248
    assert DECODE_MODELS["llama-2-7b"].params == 6_738_415_616
    assert DECODE_MODELS["llama-3-70b"].params == 70_553_706_496
    assert DECODE_MODELS["falcon-7b"].params == 6_921_720_704
    assert [m.attention for m in DECODE_MODELS.values()] == [
        "GQA 32/8", "MHA 32/32", "GQA 64/8", "MQA 71/1",
    ]  # fmt: skip


def test_kv_bytes_per_token_is_two_l_hkv_d_bytes():
    m = DECODE_MODELS
    assert m["llama-3-8b"].kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131_072
    assert m["llama-2-7b"].kv_bytes_per_token() == 2 * 32 * 32 * 128 * 2 == 524_288
    assert m["llama-3-70b"].kv_bytes_per_token("fp8") == 2 * 80 * 8 * 128 * 1 == 163_840
    assert m["falcon-7b"].kv_bytes_per_token() == 2 * 32 * 1 * 64 * 2 == 8_192


def test_llama_3_8b_in_fp16_on_the_h100_and_the_h200():
    # weights 8,030,261,248 · 2 = 16,060,522,496 B
    h100 = what_fits("llama-3-8b", H100)
    assert h100.weight_bytes == 16_060_522_496
    # (80,000,000,000 − 16,060,522,496) / 131,072 = 487,819.6
    assert h100.max_tokens == 487_819
    assert h100.max_context(batch=8) == 60_977
    # (141,000,000,000 − 16,060,522,496) / 131,072 = 953,212.0
    assert what_fits("llama-3-8b", H200).max_tokens == 953_212


def test_llama_2_7b_mha_holds_a_quarter_of_the_gqa_models_tokens():
    # weights 13,476,831,232 B; (80e9 − 13,476,831,232) / 524,288 = 126,882.97
    assert what_fits("llama-2-7b", H100).max_tokens == 126_882
    # (141e9 − 13,476,831,232) / 524,288 = 243,231.9
    assert what_fits("llama-2-7b", H200).max_tokens == 243_231


def test_llama_3_70b_in_fp16_does_not_fit_an_h200_and_fp8_makes_room():
    fp16 = what_fits("llama-3-70b", H200)
    assert not fp16.weights_fit and fp16.max_tokens == 0
    assert fp16.weight_bytes - H200 == 107_412_992  # 141,107,412,992 B of weights
    # fp8 weights 70,553,706,496 B; fp16 cache 327,680 B/token on the H100:
    # (80e9 − 70,553,706,496) / 327,680 = 28,827.8
    assert what_fits("llama-3-70b", H100, "fp8").max_tokens == 28_827
    # an fp8 cache too: 163,840 B/token; H100 57,655.6, H200 429,970.5
    assert what_fits("llama-3-70b", H100, "fp8", "fp8").max_tokens == 57_655
    assert what_fits("llama-3-70b", H200, "fp8", "fp8").max_tokens == 429_970


def test_falcon_7b_mqa_caches_8_kb_per_token():
    # weights 13,843,441,408 B; (80e9 − 13,843,441,408) / 8,192 = 8,075,751.8
    assert what_fits("falcon-7b", H100).max_tokens == 8_075_751


def test_the_formula_states_the_numbers_it_divides():
    fit = what_fits("llama-3-8b", H100)
    text = fit.formula()
    assert "80,000,000,000 − 16,060,522,496" in text and "2 · 32 · 8 · 128 · 2" in text
    assert text.endswith("487,819 tokens")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("llama-9b", H100), "unknown model"),
        (("llama-3-8b", H100, "fp4"), "weights dtype"),
        (("llama-3-8b", 0), "positive"),
    ],
)
def test_bad_what_fits_questions_say_why(args, fragment):
    with pytest.raises((KeyError, ValueError), match=fragment):
        what_fits(*args)


def test_model_cli_prints_what_fits_per_gpu_and_budget(capsys):
    from main import main

    argv = ["model", "--pass", "decode", "--seq", "8192", "--preset", "llama-3-8b",
            "--batch", "8", "--budget", "24GB", "--json"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    fits = report["fits"]["budgets"]
    assert fits["H100 SXM 80 GB"]["max_tokens"] == 487_819
    assert fits["H100 SXM 80 GB"]["max_context"] == 60_977
    # 24 GB: (24e9 − 16,060,522,496) / 131,072 = 60,573.3 tokens, 7,571 a sequence at batch 8
    assert (fits["budget"]["max_tokens"], fits["budget"]["max_context"]) == (60_573, 7_571)
    assert (
        report["config"]["kv_heads"] == 8 and report["kv_cache_bytes"] == 2 * 8 * 8 * 8192 * 128 * 2
    )


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--preset", "gpt2-small"], "training preset"),
        (["--preset", "llama-3-8b", "--kv-heads", "4"], "leave out"),
        (["--layers", "4"], "--layers describes a training step"),
    ],
)
def test_decode_cli_refuses_what_it_cannot_mean(argv, fragment, capsys):
    from main import main

    assert main(["model", "--pass", "decode", "--seq", "64", *argv]) == 2
    assert fragment in capsys.readouterr().err
