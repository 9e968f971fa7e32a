"""Results files: atomic, never silently overwritten, checked field by field on the way in and
out, and a bad file gives one message naming the field, not a crash."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from gpu.algorithms import NAIVE, TILED
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import AttentionConfig
from gpu.errors import FileWriteError, SchemaError
from gpu.files.recording import (
    Recording,
    RecordingError,
    load_recording,
    recording_from_document,
    results_csv,
    save_recording,
)
from gpu.results import KernelTime

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"


@pytest.fixture(scope="module")
def recording() -> Recording:
    backend = CpuBackend()
    cfg = AttentionConfig(seq_len=64, heads=2, head_dim=16)
    opts = RunOptions(warmup=0, repeats=1, check=True)
    results = tuple(backend.run(cfg, a, opts) for a in (NAIVE, TILED))
    oom = backend.run(cfg.with_(seq_len=4096), NAIVE, RunOptions(budget_bytes=1000))
    return Recording(backend.device_info(), (*results, oom), {"command": "test"})


def test_a_recording_round_trips_to_equal_results(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    loaded = load_recording(path)
    assert loaded.results == recording.results
    assert loaded.device == recording.device
    assert loaded.results[-1].oom and loaded.results[-1].message


def test_the_shipped_recording_passes_the_results_format():
    rec = load_recording(SHIPPED)
    assert len(rec.results) > 100 and rec.device.name == "NVIDIA H200"


def test_existing_file_is_not_replaced_without_overwrite(tmp_path, recording):
    path = tmp_path / "run.json"
    path.write_text("precious")
    with pytest.raises(FileExistsError):
        save_recording(recording, path)
    assert path.read_text() == "precious"
    save_recording(recording, path, overwrite=True)
    assert load_recording(path).results == recording.results


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_read_only_folder_gives_a_message_and_no_partial_file(tmp_path, recording):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(FileWriteError, match="cannot write"):
            save_recording(recording, folder / "run.json")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(stat.S_IRWXU)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_a_folder_even_root_cannot_write_gives_a_message(recording):
    with pytest.raises(FileWriteError, match="cannot write in /proc"):
        save_recording(recording, "/proc/run.json")


def test_missing_folder_gives_a_message(tmp_path, recording):
    with pytest.raises(FileWriteError, match="cannot write"):
        save_recording(recording, tmp_path / "nope" / "run.json")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_abs_error": -1.0}, "results[0].max_abs_error"),
        ({"kernel_times": (KernelTime("flash_fwd", float("inf")),)}, "kernel_times[0].ms"),
        ({"kernel_times": (KernelTime("flash_fwd", 0.0),)}, "kernel_times[0].ms"),
        ({"peak_bytes": -1}, "results[0].peak_bytes"),
    ],
)
def test_a_result_the_format_refuses_is_never_written(tmp_path, recording, change, field):
    bad = replace(recording, results=(replace(recording.results[1], **change),))
    path = tmp_path / "run.json"
    with pytest.raises(FileWriteError, match=field.replace("[", r"\[").replace("]", r"\]")):
        save_recording(bad, path)
    assert list(tmp_path.iterdir()) == []


def test_written_json_never_holds_nan_or_infinity(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the file"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": "tilescope.results/1", "device": {', "not valid JSON"),
        ("[1, 2, 3]", "not a Tilescope results file"),
        ('{"schema": "tilescope.results/7", "results": []}', "newer Tilescope"),
        (
            '{"schema": "tilescope.results/1", "device": {"backend": "cpu"}, "results": []}',
            "device: object missing required field `name`",
        ),
        (
            '{"schema": "tilescope.results/1", "device": {"backend": "cpu", "name": "x", '
            '"memory_total_bytes": 1, "memory_free_bytes": 1}, '
            '"results": [{"config": {"seq_len": -1}}]}',
            r"results\[0\].config.seq_len",
        ),
        ("", "is empty"),
    ],
)
def test_corrupt_truncated_or_future_files_give_a_message(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(RecordingError, match=message):
        load_recording(path)


def test_truncating_a_real_recording_anywhere_gives_a_message(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    text = path.read_text()
    for cut in range(0, len(text) - 2, max(1, len(text) // 40)):
        path.write_text(text[:cut])
        with pytest.raises(RecordingError):
            load_recording(path)


def _shipped_data() -> dict:
    return json.loads(SHIPPED.read_text())


def _bad(mutate) -> dict:
    data = _shipped_data()
    mutate(data)
    return data


def _set(path: str, value):
    """A mutation putting `value` at a dotted path with [k] indices."""

    def mutate(data):
        keys = [
            int(k) if k.isdigit() else k for k in path.replace("[", ".").replace("]", "").split(".")
        ]
        node = data
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return mutate


# What a user's hand-edited or corrupted recording holds, and the field each message names.
BAD_FIELDS = [
    ("results[3].kernel_times[0].ms", "0.25", "expected `float`, got `str`"),
    ("results[3].kernel_times[0].ms", 0, "expected `float` >= 1e-09"),
    ("results[3].kernel_times[0].ms", -1.5, "expected `float` >= 1e-09"),
    # A time of no duration would make the derived TFLOP/s infinite (it could not be written).
    ("results[3].kernel_times[0].ms", 1.1e-308, "expected `float` >= 1e-09"),
    ("results[3].kernel_times[0].ms", 1e300, "expected `float` <= "),
    ("results[3].peak_bytes", "4718592", "expected `int | null`, got `str`"),
    ("results[3].peak_bytes", -4, "expected `int` >= 0"),
    ("results[3].peak_bytes", 10**400, "expected `int` <= "),
    ("results[3].flops", 10**400, "digit number, beyond the limit"),
    ("results[3].hbm_bytes", -1, "expected `int` >= 0"),
    ("results[3].max_abs_error", "small", "expected `float | null`, got `str`"),
    ("results[3].oom", "no", "expected `bool`, got `str`"),
    ("results[3].config.dtype", "fp8", "invalid enum value 'fp8'"),
    ("results[3].config.heads", 10**400, "expected `int` <= 256"),
    ("results[3].config.causal", 1, "expected `bool`, got `int`"),
    ("results[3].algorithm", 7, "expected `str`, got `int`"),
    ("results[3].kernel_times", {"a": 1}, "expected `array`, got `object`"),
    ("device.name", 7, "expected `str`, got `int`"),
    ("device.name", None, "expected `str`, got `null`"),
    ("device.memory_total_bytes", -1, "expected `int` >= 0"),
    ("device.memory_total_bytes", "150 GB", "expected `int`, got `str`"),
    # device details the roofline computes with: numbers, or the file is refused
    ("device.details.l2_peak_bandwidth_bytes_s", [1], "expected `float`, got `array`"),
    ("device.details.l2_read_bandwidth_bytes_s", -8.5e12, "expected `float` >= 1000000.0"),
    ("device.details.smem_per_block_optin_bytes", "227 KiB", "expected `int`, got `str`"),
    ("meta", [], "expected `object`, got `array`"),
    ("meta", None, "expected `object`, got `null`"),
    ("results", None, "expected `array`, got `null`"),
]


@pytest.mark.parametrize(("path", "value", "reason"), BAD_FIELDS, ids=[b[0] for b in BAD_FIELDS])
def test_every_bad_field_is_refused_naming_its_path(tmp_path, path, value, reason):
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(_bad(_set(path, value))))
    with pytest.raises(RecordingError) as info:
        load_recording(file)
    message = str(info.value)
    assert message.startswith(f"{file}: {path}: "), message
    assert reason in message, message
    assert "\n" not in message
    assert isinstance(info.value.__cause__, SchemaError) and info.value.__cause__.where == path


@pytest.mark.parametrize(
    "literal", ["NaN", "Infinity", "-Infinity"], ids=["nan", "inf", "minus_inf"]
)
def test_nan_and_infinite_times_are_refused(tmp_path, literal):
    text = json.dumps(_bad(_set("results[0].kernel_times[0].ms", 1.0)))
    text = text.replace('"ms": 1.0', f'"ms": {literal}', 1)
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(RecordingError, match="not valid JSON"):
        load_recording(path)


def test_parsed_documents_with_nan_are_refused_too():
    data = _bad(_set("results[0].kernel_times[0].ms", float("nan")))
    with pytest.raises(RecordingError, match=r"results\[0\].kernel_times\[0\].ms"):
        recording_from_document(data, "doc")


def test_optional_fields_of_later_results_are_accepted():
    data = _shipped_data()
    r = data["results"][0]
    r["kernel_times"][0] |= {"min_ms": r["kernel_times"][0]["ms"] * 0.9, "max_ms": 1.0}
    r |= {
        "measured": {"dram_bytes": 123, "l2_bytes": 456, "samples": 3, "ncu_name": "x"},
        "device_peak_bytes": 5_000_000,
        "devices": 2,
        "a_field_from_the_future": {"anything": [1, 2]},
    }
    data["results"][1]["algorithm"] = "ring"
    data["results"][2]["algorithm"] = "tiled_ws"
    rec = recording_from_document(data, "doc")
    assert rec.results[0].kernel_times[0].ms == r["kernel_times"][0]["ms"]
    assert rec.results[1].algorithm == "ring"


def test_optional_fields_are_still_checked_when_present():
    for path, value in [
        ("results[0].device_peak_bytes", -5),
        ("results[0].traffic", [{"name": "flash_fwd", "dram_read_bytes": "many"}]),
        ("results[0].ring", {"devices": 0, "layout": "zigzag", "transport": "nccl", "kernel": "k"}),
        ("results[0].remeasured", -1),
        ("results[0].kernel_times[0].min_ms", 1e6),  # above the median
    ]:
        data = _shipped_data()
        _set(path, value)(data)
        with pytest.raises(RecordingError, match=path.split(".")[-1]):
            recording_from_document(data, "doc")


def test_csv_has_one_row_per_result_with_units(recording):
    lines = results_csv(recording.results).strip().splitlines()
    assert len(lines) == 1 + len(recording.results)
    assert "total_ms [ms]" in lines[0]


def test_json_is_plain_data(tmp_path, recording):
    path = tmp_path / "run.json"
    save_recording(recording, path)
    data = json.loads(path.read_text())
    assert data["schema"] == "tilescope.results/1" and len(data["results"]) == 3


def test_every_field_the_dataclasses_write_is_checked_by_the_format():
    """A field added to RunResult, KernelTime, DeviceInfo or AttentionConfig must be added to
    its document type in gpu/files/schema.py too, with its type and range."""
    from dataclasses import fields

    from gpu.files.schema import ConfigDoc, DeviceDoc, KernelTimeDoc, ResultDoc
    from gpu.results import DeviceInfo, RunResult

    for cls, doc in (
        (RunResult, ResultDoc),
        (KernelTime, KernelTimeDoc),
        (DeviceInfo, DeviceDoc),
        (AttentionConfig, ConfigDoc),
    ):
        missing = {f.name for f in fields(cls)} - set(doc.__struct_fields__)
        assert not missing, f"add {sorted(missing)} to gpu.files.schema.{doc.__name__}"


def test_every_field_a_file_may_leave_out_takes_the_same_default_in_the_program():
    """A field the format lets a file leave out (a default in gpu/files/schema.py) needs the same
    default in the dataclass it builds, or a file the check accepted fails to load."""
    from dataclasses import MISSING, fields

    import msgspec

    from gpu.files.schema import (
        KernelTimeDoc,
        KernelTrafficDoc,
        ResultDoc,
        RingDoc,
        RingEventDoc,
        TrafficStripDoc,
    )
    from gpu.results import KernelTraffic, RunResult, TrafficStrip
    from gpu.ring_timeline import RingEvent, RingMeasurement

    for cls, doc in (
        (RunResult, ResultDoc),
        (KernelTime, KernelTimeDoc),
        (KernelTraffic, KernelTrafficDoc),
        (TrafficStrip, TrafficStripDoc),
        (RingMeasurement, RingDoc),
        (RingEvent, RingEventDoc),
    ):
        ours = {f.name: f for f in fields(cls)}
        for field in msgspec.inspect.type_info(doc).fields:
            if field.required or field.name not in ours:
                continue
            mine = ours[field.name]
            assert mine.default is not MISSING or mine.default_factory is not MISSING, (
                f"{cls.__name__}.{field.name} needs a default: a file may leave it out"
            )
            if mine.default is not MISSING and field.default is not msgspec.NODEFAULT:
                assert mine.default == field.default, f"{cls.__name__}.{field.name}"


def test_a_traffic_entry_with_only_its_byte_counts_loads():
    data = _shipped_data()
    data["results"][0]["traffic"] = [
        {"name": "flash_fwd", "dram_read_bytes": 1, "dram_write_bytes": 2, "l2_bytes": 3}
    ]
    traffic = recording_from_document(data, "doc").results[0].traffic[0]
    assert (traffic.dram_bytes, traffic.l2_bytes, traffic.launches) == (3, 3, 1)


def test_a_nan_error_from_a_backend_is_written_as_a_finite_disagreement(tmp_path, recording):
    bad = replace(recording, results=(replace(recording.results[1], max_abs_error=float("nan")),))
    path = tmp_path / "run.json"
    save_recording(bad, path)
    (r,) = load_recording(path).results
    assert r.agrees is False and "NaN or infinity" in r.message


@pytest.mark.gpu
def test_cuda_results_pass_the_format_and_round_trip(tmp_path):
    from gpu.backends.factory import create_backend

    cuda = create_backend("cuda")
    cfg = AttentionConfig(seq_len=1024)
    opts = RunOptions(warmup=1, repeats=3, check=True)
    results = tuple(cuda.run(cfg, a, opts) for a in cuda.algorithms())
    oom = cuda.run(cfg.with_(seq_len=65536), NAIVE, RunOptions(budget_bytes=10**9))
    rec = Recording(cuda.device_info(), (*results, oom), {"command": "test"})
    save_recording(rec, tmp_path / "cuda.json")
    loaded = load_recording(tmp_path / "cuda.json")
    assert loaded.results == rec.results and loaded.device == rec.device
    assert loaded.results[-1].oom
