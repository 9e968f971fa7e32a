"""The command-line contract: model --json keys, bench --check, --out, exit codes, one line per
error, bench's progress and table, render's formats."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

import gpu.cli.bench
import main
from gpu.cli.arguments import size_bytes
from gpu.cli.bench import DEFAULT_SEQ
from gpu.cli.parser import build_parser
from gpu.files.recording import load_recording
from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_model_json_has_the_contract_keys_and_the_lessons_numbers():
    proc = run_cli("model", "--seq", "4096", "--heads", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in (
        "attn_matrix_bytes",
        "naive_peak_bytes",
        "tiled_peak_bytes",
        "naive_hbm_bytes",
        "tiled_hbm_bytes",
        "flops",
    ):
        assert key in data
    assert data["attn_matrix_bytes"] == 402_653_184


@pytest.mark.parametrize(
    "args",
    [
        ["model"],
        ["model", "--seq", "0"],
        ["model", "--seq", "abc"],
        ["model", "--seq", "128", "--dtype", "fp8"],
        ["model", "--seq", "128", "--head-dim", "1000"],
        ["bench", "--seq", "1,x"],
        ["bench", "--algo", "magic"],
        ["bench", "--backend", "tpu"],
        ["bench", "--out", "results.txt"],
        ["--no-such-flag"],
    ],
)
def test_bad_flags_give_one_line_and_exit_2(args, capsys):
    assert main.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tilescope: error:")
    assert "\n" not in err and "Traceback" not in err


def test_bench_check_passes_and_writes_json(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench",
        "--backend",
        "cpu",
        "--seq",
        "64,100",
        "--heads",
        "2",
        "--head-dim",
        "16",
        "--repeats",
        "1",
        "--check",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    rec = load_recording(out)
    assert [(r.config.seq_len, r.algorithm) for r in rec.results] == [
        (64, "naive"),
        (64, "tiled"),
        (100, "naive"),
        (100, "tiled"),
    ]
    assert all(r.agrees for r in rec.results)


def test_bench_check_fails_when_an_algorithm_disagrees(monkeypatch, tmp_path, capsys):
    import gpu.backends.cpu_backend as cpu

    real = cpu._tiled_kernels

    def broken(config, q, k, v, **kw):
        out, spent = real(config, q, k, v, **kw)
        return out * 1.5, spent

    monkeypatch.setattr(cpu, "_tiled_kernels", broken)
    code = main.main(
        [
            "bench",
            "--backend",
            "cpu",
            "--seq",
            "32",
            "--heads",
            "1",
            "--head-dim",
            "8",
            "--repeats",
            "1",
            "--check",
        ]
    )
    assert code == 1
    assert "check failed: tiled" in capsys.readouterr().err


def test_bench_csv_has_units_in_the_header_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "r.csv"
    args = [
        "bench",
        "--backend",
        "cpu",
        "--seq",
        "32",
        "--heads",
        "1",
        "--head-dim",
        "8",
        "--repeats",
        "1",
        "--algo",
        "naive",
        "--out",
        str(out),
    ]
    assert run_cli(*args).returncode == 0
    rows = list(csv.reader(out.open()))
    assert "total_ms [ms]" in rows[0] and "peak_bytes [B]" in rows[0]
    assert rows[1][rows[0].index("algorithm")] == "naive"
    before = out.read_bytes()
    second = run_cli(*args)
    assert second.returncode == 2 and "--force" in second.stderr
    assert out.read_bytes() == before
    assert run_cli(*args, "--force").returncode == 0


def test_cuda_backend_without_a_gpu_is_a_clear_error(monkeypatch, capsys):
    import gpu.backend_factory as backends_module

    monkeypatch.setattr(backends_module, "cuda_available", lambda: False)
    assert main.main(["bench", "--backend", "cuda", "--seq", "64"]) == 2
    assert "cuda backend unavailable" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# bench: flags checked before measuring, one line per error, results never thrown away

BENCH_SMALL = ["bench", "--backend", "cpu", "--seq", "32", "--heads", "1", "--head-dim", "8"]
BENCH_SMALL += ["--repeats", "1", "--warmup", "0"]


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("tilescope: error:"), err
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.fixture
def no_runs(monkeypatch):
    """Fails the test if anything is measured."""
    from gpu.backends.cpu_backend import CpuBackend

    def run(*a, **k):
        raise AssertionError("measured before the flags were checked")

    monkeypatch.setattr(CpuBackend, "run", run)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ("inf", "not a finite size"),
        ("1e400", "more than 2^63 - 1 bytes"),
        ("nan", "not a finite size"),
        ("0.5B", "not a whole number of bytes"),
        ("1.5B", "not a whole number of bytes"),
        ("-1GB", "must be positive"),
        ("0", "must be positive"),
        ("1e30", "more than 2^63 - 1 bytes"),
        ("9223372036854775808", "more than 2^63 - 1 bytes"),
        ("12QB", "is not a size"),
        # beyond a decimal's own exponent: decimal.Overflow ended as an "unexpected error", 1
        ("1e1000000", "more than 2^63 - 1 bytes (a size is 1 to 2^63 - 1 bytes)"),
        ("1e999999GB", "more than 2^63 - 1 bytes"),
        ("1e+999999KiB", "more than 2^63 - 1 bytes"),
    ],
)
def test_a_budget_that_is_not_a_whole_finite_size_exits_2(capsys, no_runs, budget, message):
    assert main.main([*BENCH_SMALL, f"--budget={budget}"]) == 2
    assert message in _one_line_error(capsys)


@pytest.mark.parametrize("seq", ["1,,2", "64,", ",64", " , "])
def test_a_sequence_list_with_an_empty_item_is_refused_not_shortened(capsys, no_runs, seq):
    assert main.main([*BENCH_SMALL, f"--seq={seq}"]) == 2
    assert "empty item" in _one_line_error(capsys)


def test_budget_sizes_in_every_unit():
    assert size_bytes("24GB") == 24 * 10**9
    assert size_bytes("512MiB") == 512 * 2**20
    assert size_bytes("1.5 KiB") == 1536
    assert size_bytes("1e9") == 10**9
    assert size_bytes("2B") == 2
    assert size_bytes("9223372036854775807") == 2**63 - 1  # exact, not rounded to 2^63


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("", "--out needs a file name"),
        ("{tmp}/missing/r.json", "No such file or directory"),
        ("{tmp}/folder.json", "it is a folder"),
        ("{tmp}/old.json", "exists; add --force"),
        ("{tmp}/r.txt", "must end in .json or .csv"),
    ],
    ids=["empty", "missing_folder", "a_folder", "existing", "suffix"],
)
def test_a_bad_out_is_refused_before_anything_is_measured(capsys, tmp_path, no_runs, out, message):
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "old.json").write_text("precious")
    assert main.main([*BENCH_SMALL, f"--out={out.format(tmp=tmp_path)}"]) == 2
    assert message in _one_line_error(capsys)
    assert (tmp_path / "old.json").read_text() == "precious"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_a_read_only_folder_for_out_is_refused_before_measuring(capsys, tmp_path, no_runs):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert main.main([*BENCH_SMALL, "--out", str(folder / "r.json")]) == 2
        assert "Permission denied" in _one_line_error(capsys)
    finally:
        folder.chmod(0o700)


def test_when_the_final_write_fails_the_results_are_kept_in_a_named_file(
    capsys, tmp_path, monkeypatch
):
    import gpu.files.recording as recording
    from gpu.errors import FileWriteError
    from gpu.files.recording import load_recording

    out = tmp_path / "r.json"
    real = recording.atomic_write_text

    def full_disk(path, text, **kw):
        if Path(path) == out:
            raise FileWriteError(f"cannot write {out}: No space left on device")
        return real(path, text, **kw)

    monkeypatch.setattr(recording, "atomic_write_text", full_disk)
    keep = tmp_path / "kept"
    keep.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(keep))
    assert main.main([*BENCH_SMALL, "--out", str(out)]) == 1
    err = _one_line_error(capsys)
    assert "No space left on device" in err and "the results were kept in" in err
    (kept,) = keep.iterdir()
    assert str(kept) in err and kept.name.startswith("tilescope-results-")
    assert len(load_recording(kept).results) == 2 and not out.exists()


def test_a_kernel_that_will_not_compile_is_one_line_and_the_rest_still_runs(capsys, monkeypatch):
    from gpu.backends.cpu_backend import CpuBackend
    from gpu.launch.cuda_kernels import KernelCompileError

    real = CpuBackend.run
    log = 'flash.cu(12): error: identifier "acc" is undefined\n  acc += 1;\n'

    def run(self, config, algorithm, options=None):
        if algorithm == "tiled":
            raise KernelCompileError(Path("/src/flash.cu"), ("-std=c++17",), log)
        return real(self, config, algorithm, options)

    monkeypatch.setattr(CpuBackend, "run", run)
    # one algorithm at a time, as on a GPU (where kernels compile): no interleaved rounds
    monkeypatch.setattr("gpu.cli.bench._interleaves", lambda backend: False)
    assert main.main([*BENCH_SMALL, "--seq", "32,64"]) == 1
    out, err = capsys.readouterr()
    assert out.count(" naive ") == 2 and "FAILED" in out and "SKIPPED" in out
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert 'flash.cu failed to compile: flash.cu(12): error: identifier "acc"' in err


def test_a_memory_error_is_an_oom_row_not_a_crash(capsys, monkeypatch):
    from gpu.backends.cpu_backend import CpuBackend

    def run(self, config, algorithm, options=None):
        raise MemoryError("cannot allocate 4 GiB")

    monkeypatch.setattr(CpuBackend, "run", run)
    assert main.main([*BENCH_SMALL, "--algo", "naive"]) == 0
    assert "OOM out of memory: cannot allocate 4 GiB" in capsys.readouterr().out


def test_an_unexpected_error_is_one_line_with_a_hint(capsys, monkeypatch):
    def boom(name):
        raise RuntimeError("the unexpected\nsecond line")

    monkeypatch.setattr(gpu.cli.bench, "create_backend", boom)
    monkeypatch.delenv("TILESCOPE_DEBUG", raising=False)
    assert main.main(BENCH_SMALL) == 1
    err = _one_line_error(capsys)
    assert "RuntimeError: the unexpected" in err and "TILESCOPE_DEBUG=1" in err
    monkeypatch.setenv("TILESCOPE_DEBUG", "1")
    assert main.main(BENCH_SMALL) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().endswith("RuntimeError: the unexpected")


def test_the_cpu_table_uses_gflops_and_keeps_its_columns_aligned(capsys):
    assert main.main([*BENCH_SMALL, "--seq", "32,100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(ln for ln in lines if ln.lstrip().startswith("N "))
    assert "GFLOP/s" in header and "TFLOP/s" not in header
    rows = [ln for ln in lines if ln.split()[:1] in (["32"], ["100"])]
    assert len(rows) == 4
    end = header.index("GFLOP/s") + len("GFLOP/s")
    for row in rows:  # the rate column ends where its header does, on every row
        assert row[end - 1] != " " and row[end] == " ", row
        assert float(row[:end].split()[-1]) > 0  # never rounds to 0.00


def test_the_cpu_runs_smaller_sequences_by_default(monkeypatch, capsys):
    from gpu.backends.cpu_backend import CpuBackend

    seen = []
    real = CpuBackend.run

    def run(self, config, algorithm, options=None):
        seen.append(config.seq_len)
        return real(self, config.with_(seq_len=16, heads=1, head_dim=8), algorithm, options)

    monkeypatch.setattr(CpuBackend, "run", run)
    assert main.main(["bench", "--backend", "cpu", "--repeats", "1", "--algo", "tiled"]) == 0
    assert seen == DEFAULT_SEQ["cpu"] == [256, 512, 1024]


def test_progress_goes_to_a_terminal_on_stderr_only(monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main.main([*BENCH_SMALL, "--seq", "32,64"]) == 0
    # the NumPy backend runs a config's algorithms together: runs 3 and 4 are N = 64's
    assert "runs 3–4/4" in terminal.getvalue() and "%|" in terminal.getvalue()
    out = capsys.readouterr().out
    assert "runs 3–4/4" not in out and out.count(" tiled ") == 2
    assert main.main([*BENCH_SMALL, "--seq", "32"]) == 0  # not a terminal: no bar at all
    assert "%|" not in capsys.readouterr().err


def test_help_states_the_limits_on_files_and_traces():
    text = build_parser()._subparsers._group_actions[0].choices["bench"].format_help()
    flat = " ".join(text.split())
    assert "256 MiB" in flat and "1024 SMs" in flat and "1,048,576 blocks" in flat
    assert "256,512,1024 on cpu" in flat
    assert "256 MiB" in " ".join(build_parser().format_help().split())


# --------------------------------------------------------------------------------------------
# render: the format the suffix names, and what was substituted


def test_render_refuses_an_image_suffix_it_cannot_write(capsys, tmp_path):
    assert main.main(["render", "--seq", "64", "--out", str(tmp_path / "x.gif")]) == 2
    assert ".png, .jpg, .jpeg" in _one_line_error(capsys)
    assert main.main(["render", "--seq", "64", "--colors", "16", "--out", "x.jpg"]) == 2
    assert "palette PNG" in _one_line_error(capsys)


def test_render_writes_jpeg_for_jpg_and_says_what_the_recording_substituted(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    out = tmp_path / "shot.jpg"
    argv = ["render", "--backend", "replay", "--seq", "1", "--heads", "1", "--out", str(out)]
    assert main.main(argv) == 0
    assert out.read_bytes()[:3] == b"\xff\xd8\xff"  # JPEG, not PNG bytes
    err = capsys.readouterr().err
    assert "tilescope: note: the window shows B=1 h=12 N=" in err
    assert "not the requested B=1 h=1 N=1" in err


def test_the_app_failing_to_start_is_one_line_too(capsys, monkeypatch):
    import app.launch

    def no_display(open_path=None):
        raise ImportError("libEGL.so.1: cannot open shared object file")

    monkeypatch.setattr(app.launch, "run_gui", no_display)
    monkeypatch.delenv("TILESCOPE_DEBUG", raising=False)
    assert main.main([]) == 1
    assert "ImportError: libEGL.so.1" in _one_line_error(capsys)


def test_a_cpu_bench_of_hours_is_refused_with_its_estimate_when_stdout_is_no_terminal(
    capsys, monkeypatch
):
    from gpu.backends.cpu_backend import CpuBackend

    def measured(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("measured although the estimate is hours")

    monkeypatch.setattr(CpuBackend, "run", measured)
    assert not sys.stdout.isatty()  # capsys: a pipe, as in a script or CI
    code = main.main(["bench", "--backend", "cpu", "--seq", "100000"])
    out, err = capsys.readouterr()
    assert code == 2 and not out
    # naive would need hundreds of GB there and is refused at once; tiled is hours of NumPy
    assert err.startswith("tilescope: error: tiled at N=100000 on the cpu backend: about ")
    assert " h by the estimate" in err and "--time-limit 600 s" in err and err.count("\n") == 1


def test_a_long_cpu_bench_says_its_estimate_before_the_table(capsys, monkeypatch):
    from gpu.config import AttentionConfig
    from gpu.model.costmodel import pass_useful_flops
    from gpu.ring import sim as ring_sim

    flops = pass_useful_flops(AttentionConfig(seq_len=128, heads=1)) * 3  # warm-up, run, meter
    monkeypatch.setattr(ring_sim, "SIM_FLOPS_PER_S", flops / 30)  # 30 s by the estimate
    code = main.main(
        ["bench", "--backend", "cpu", "--seq", "128", "--heads", "1", "--algo", "naive",
         "--repeats", "1", "--warmup", "1", "--time-limit", "100"]
    )  # fmt: skip
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 0
    assert first.startswith("# about 30 s by the estimate (NumPy at about "), first
