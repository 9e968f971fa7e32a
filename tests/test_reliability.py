"""Reliability of the app: faults become messages and fallbacks, load leaves no backlog, and every
number field says why it refuses typed input.

Faults (fakes here; the `gpu` tests at the end build the same faults on a real device):
- a kernel that fails to compile: its NVRTC log behind "Details…" (non-modal), that algorithm off
  for the session, the other kernels still measured;
- a CUDA error mid-run: the CPU backend takes over with a banner, later measurements are CPU's;
- out of memory stays a result, also when a MemoryError escapes a backend;
- tiles or head dims beyond a kernel's limits: the message names the limit next to the field;
- the CPU backend's refusal of a config beyond free RAM reaches the window.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pyqtgraph as pg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt

from app.controls.panel import ControlsPanel
from app.state.model.cost_model_backend import CostModelBackend
from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.config import AttentionConfig
from gpu.errors import UnsupportedConfig
from gpu.launch import flash_launch, flash_mma, flash_readable
from gpu.launch.cuda_kernels import KernelCompileError

H100_SMEM_OPTIN = 232_448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on an H100/H200

NVRTC_LOG = (
    '/tmp/flash_mma.cu(212): error: identifier "acc_o" is undefined\n'
    "      acc_o[i] *= alpha;\n"
    "      ^\n\n"
    '1 error detected in the compilation of "flash_mma.cu".\n'
)


class CUDARuntimeError(RuntimeError):
    """Stands in for cupy.cuda.runtime.CUDARuntimeError (a RuntimeError there too)."""


class FaultyBackend(CostModelBackend):
    """CostModelBackend with faults: a kernel that won't compile, a CUDA error at some N, a
    MemoryError at some N, and the real kernels' supports() limits."""

    def __init__(
        self,
        *args,
        broken: dict[str, str] | None = None,
        cuda_error_at: tuple[int, ...] = (),
        memory_error_at: tuple[int, ...] = (),
        check_supports: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.broken = broken or {}
        self.cuda_error_at = cuda_error_at
        self.memory_error_at = memory_error_at
        self.check_supports = check_supports

    def run(self, config, algorithm, options=None):
        faulty = (
            algorithm in self.broken
            or config.seq_len in self.cuda_error_at
            or config.seq_len in self.memory_error_at
        )
        if faulty:
            with self._lock:
                self.calls.append((config.seq_len, algorithm, None))
        if algorithm in self.broken:
            source = self.broken[algorithm]
            raise KernelCompileError(Path(source), ("-std=c++17", "-arch=sm_90"), NVRTC_LOG)
        if config.seq_len in self.cuda_error_at:
            raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access")
        if config.seq_len in self.memory_error_at:
            raise MemoryError("Out of memory allocating 4,294,967,296 bytes")
        if self.check_supports and algorithm != NAIVE:
            module = flash_readable if algorithm == TILED else flash_mma
            reason = module.supports(config)
            if reason is not None:
                raise UnsupportedConfig.from_kernel(
                    reason, config, module, tiles_from_config=algorithm == TILED
                )
        return super().run(config, algorithm, options)


@pytest.fixture
def h100_smem(monkeypatch):
    """The real supports() messages, with an H100's shared-memory limit and no device."""
    monkeypatch.setattr(flash_readable, "smem_optin_bytes", lambda: H100_SMEM_OPTIN)
    monkeypatch.setattr(flash_launch, "device_limits", lambda: (90, H100_SMEM_OPTIN))


# ------------------------------------------------------------------------------------ runner


BASE = AttentionConfig(seq_len=1024)


def test_runner_a_kernel_that_will_not_compile_is_off_for_the_session_with_its_log(
    qtbot, runner, start_backend, outcomes
):
    backend = FaultyBackend(
        algorithms=(NAIVE, TILED, TILED_MMA), broken={TILED_MMA: "flash_mma.cu"}
    )
    ready = start_backend(backend)
    seen = outcomes
    runner.request(BASE, [NAIVE, TILED, TILED_MMA], None)
    qtbot.waitUntil(lambda: len(seen) == 3 and not runner.busy, timeout=5000)
    by_algo = {o.job.algorithm: o for o in seen}
    failed = by_algo[TILED_MMA]
    assert failed.unavailable and not failed.skipped and failed.result is None
    assert failed.details == NVRTC_LOG  # the compiler's own words, for Details…
    assert failed.error.startswith("flash_mma.cu failed to compile")
    assert 'identifier "acc_o" is undefined' in failed.error  # the first error line
    assert by_algo[NAIVE].result is not None and by_algo[TILED].result is not None
    assert runner.unavailable(ready.key) == {TILED_MMA: failed.error}
    # Never compiled again this session: the next request skips it without calling the backend.
    runner.request(BASE.with_(seq_len=2048), [NAIVE, TILED_MMA], None)
    qtbot.waitUntil(lambda: len(seen) == 5 and not runner.busy, timeout=5000)
    assert seen[-1].unavailable and seen[-1].skipped
    assert [a for _, a, _ in backend.calls].count(TILED_MMA) == 1


def test_runner_a_cuda_error_mid_run_drops_that_backend_and_its_queue(
    qtbot, runner, start_backend, outcomes
):
    backend = FaultyBackend(name="cuda", delay_s=0.02, cuda_error_at=(512,))
    start_backend(backend, requested="auto")
    seen = outcomes
    lost, finished = [], []
    runner.backendLost.connect(lost.append)
    runner.sweepFinished.connect(finished.append)
    items = [(BASE.with_(seq_len=n), a) for n in (256, 512, 1024, 2048) for a in (NAIVE, TILED)]
    runner.start_sweep(items, None)
    qtbot.waitUntil(lambda: bool(lost) and not runner.busy, timeout=5000)
    assert lost[0].requested == "auto"
    assert "cudaErrorIllegalAddress" in lost[0].message
    assert finished == [True]  # the sweep ends (cancelled): its backend is gone
    failed = [o for o in seen if o.backend_lost]
    assert len(failed) == 1 and failed[0].job.config.seq_len == 512
    # Nothing more ran on the broken backend, and nothing more is waiting for it.
    assert max(n for n, _, _ in backend.calls) == 512
    count = len(seen)
    runner.request(BASE, [NAIVE], None)
    qtbot.waitUntil(lambda: len(seen) == count + 1 and not runner.busy, timeout=5000)
    assert seen[-1].skipped and seen[-1].error == "no backend is ready"


def test_runner_out_of_memory_is_a_result_even_when_a_memory_error_escapes(
    qtbot, runner, start_backend, outcomes
):
    backend = FaultyBackend(memory_error_at=(4096,))
    start_backend(backend)
    seen = outcomes
    runner.request(BASE.with_(seq_len=65536), [NAIVE], 10**9)  # over budget: the backend says OOM
    qtbot.waitUntil(lambda: len(seen) == 1, timeout=5000)
    runner.request(BASE.with_(seq_len=4096), [NAIVE, TILED], None)  # the backend raises
    qtbot.waitUntil(lambda: len(seen) == 3 and not runner.busy, timeout=5000)
    for o in seen:
        assert o.result is not None and o.result.oom, o
        assert not o.error and not o.backend_lost
        assert "out of memory" in o.result.message
    escaped = seen[1].result
    assert escaped.model_peak_bytes > 0 and escaped.config.seq_len == 4096
    assert "4,294,967,296 bytes" in escaped.message


def test_runner_tiles_beyond_shared_memory_name_the_limit_and_the_field(
    qtbot, runner, start_backend, outcomes, h100_smem
):
    backend = FaultyBackend(algorithms=(NAIVE, TILED, TILED_MMA), check_supports=True)
    start_backend(backend)
    seen = outcomes
    big = BASE.with_(head_dim=256, block_m=256, block_n=256)
    runner.request(big, [NAIVE, TILED, TILED_MMA], None)
    qtbot.waitUntil(lambda: len(seen) == 3 and not runner.busy, timeout=5000)
    by_algo = {o.job.algorithm: o for o in seen}
    assert by_algo[NAIVE].result is not None
    tiles = by_algo[TILED]
    assert tiles.unsupported and tiles.error_field == "block_m"
    assert f"{H100_SMEM_OPTIN:,} bytes" in tiles.error and "shared memory" in tiles.error
    dims = by_algo[TILED_MMA]
    assert dims.unsupported and dims.error_field == "head_dim"
    assert "head_dim 64 and 128, not 256" in dims.error


@pytest.mark.parametrize(("backend_name", "trims_expected"), [("cpu", 3), ("cuda", 1)])
def test_runner_gives_freed_heap_back_after_each_cpu_run_and_when_idle(
    qtbot, runner, start_backend, outcomes, monkeypatch, backend_name, trims_expected
):
    import app.work.runner as runner_module

    runner_module.trim_heap()  # the real one: glibc's malloc_trim, a no-op elsewhere
    trims = []
    monkeypatch.setattr(runner_module, "trim_heap", lambda: trims.append(time.monotonic()))
    runner.idle_trim_after_s = 0.3
    start_backend(CostModelBackend(name=backend_name))
    qtbot.waitUntil(lambda: not runner.busy, timeout=5000)
    qtbot.wait(500)
    trims.clear()
    seen = outcomes
    runner.request(BASE.with_(seq_len=256), [NAIVE, TILED], None)
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=5000)
    done = time.monotonic()
    # cpu: one trim after each of the two runs; any backend: one once idle for 0.3 s, not before
    # (a trim holds the allocator's lock: never while the window is busy with fresh results).
    qtbot.waitUntil(lambda: len(trims) >= trims_expected, timeout=5000)
    qtbot.wait(200)
    assert len(trims) == trims_expected
    assert trims[-1] - done >= 0.25


# ------------------------------------------------------------------------------------ window


def _memory(window):
    return window.findChild(pg.PlotWidget, "memoryPlot")


def _measured(window, n: int, algorithms) -> bool:
    series = _memory(window).series
    return all(n in series[f"measured_{a}"][0] for a in algorithms)


def test_a_kernel_that_will_not_compile_shows_its_log_and_the_rest_keep_working(qtbot, make_window):
    backend = FaultyBackend(
        algorithms=(NAIVE, TILED, TILED_MMA), broken={TILED_MMA: "flash_mma.cu"}
    )
    window = make_window(backend)
    banner = window.banner
    qtbot.waitUntil(lambda: not banner.isHidden(), timeout=5000)
    assert "flash_mma.cu failed to compile" in banner.message
    assert "unavailable for this session" in banner.message
    assert banner.details == NVRTC_LOG
    assert banner.details_button.isVisible()
    qtbot.mouseClick(banner.details_button, Qt.MouseButton.LeftButton)
    dialog = banner.details_dialog
    assert dialog is not None and dialog.isVisible()
    assert not dialog.isModal() and dialog.windowModality() == Qt.WindowModality.NonModal
    assert dialog.text.toPlainText() == NVRTC_LOG
    # The algorithm is off (and says why); the window keeps working while the log is open.
    check = window.controls.algo_checks[TILED_MMA]
    assert not check.isEnabled() and "Unavailable this session" in check.toolTip()
    assert window.controls.algorithms() == (NAIVE, TILED)
    window.controls.set_seq_len(4096)
    qtbot.waitUntil(lambda: _measured(window, 4096, (NAIVE, TILED)), timeout=5000)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=5000)
    assert [a for _, a, _ in backend.calls].count(TILED_MMA) == 1  # compiled once, never again
    assert dialog.isVisible()
    dialog.close()


def test_a_cuda_error_mid_run_falls_back_to_the_cpu_backend_with_a_banner(qtbot, make_window):
    cuda = FaultyBackend(name="cuda", device="NVIDIA H200", cuda_error_at=(2048,))
    cpu = CostModelBackend(name="cpu", device="CPU: fake (2 cores)")
    window = make_window(factory=lambda name: cpu if name == "cpu" else cuda)
    assert window.backend.info.backend == "cuda"
    window.controls.set_seq_len(2048)
    qtbot.waitUntil(lambda: not window.banner.isHidden(), timeout=5000)
    assert "cudaErrorIllegalAddress" in window.banner.message
    assert "switched to the CPU backend" in window.banner.message
    qtbot.waitUntil(
        lambda: window.backend is not None and window.backend.info.backend == "cpu", timeout=5000
    )
    assert window.controls.backend_choice() == "cpu"
    assert "after a cuda error" in window.readouts.backend.text()
    key = window.backend.key
    qtbot.waitUntil(
        lambda: all(window.store.get(window.config, a, key) is not None for a in (NAIVE, TILED)),
        timeout=5000,
    )
    assert window.store.get(window.config, NAIVE, key).backend == "cpu"
    cuda_calls = len(cuda.calls)
    window.controls.set_seq_len(3072)  # what follows is measured on the CPU backend
    qtbot.waitUntil(lambda: _measured(window, 3072, (NAIVE, TILED)), timeout=5000)
    assert cpu.runs_for(3072) == 2 and len(cuda.calls) == cuda_calls
    assert "switched to the CPU backend" in window.banner.message  # still up, not wiped


def test_an_out_of_memory_escaping_the_backend_is_a_marked_point_not_an_error(qtbot, make_window):
    window = make_window(FaultyBackend(memory_error_at=(8192,)))
    window.controls.set_seq_len(8192)
    qtbot.waitUntil(lambda: 8192 in _memory(window).series["oom"][0], timeout=5000)
    assert window.banner.isHidden()
    assert "out of memory" in window.run_status.text()


def test_tiles_and_head_dims_a_kernel_cannot_take_name_the_limit_inline(
    qtbot, make_window, h100_smem
):
    backend = FaultyBackend(algorithms=(NAIVE, TILED, TILED_MMA), check_supports=True)
    window = make_window(backend)
    c = window.controls
    c.set_config(window.config.with_(head_dim=256, block_m=256, block_n=256))
    qtbot.waitUntil(lambda: bool(c.error_text("block_m")), timeout=5000)
    text = c.error_text("block_m")
    assert text.startswith("tiled (readable) cannot run this here")
    assert f"opt-in limit of {H100_SMEM_OPTIN:,} bytes" in text
    qtbot.waitUntil(lambda: bool(c.error_text("head_dim")), timeout=5000)
    assert "head_dim 64 and 128, not 256" in c.error_text("head_dim")
    qtbot.waitUntil(lambda: _measured(window, 1024, (NAIVE,)), timeout=5000)
    assert window.banner.isHidden()  # a limit, not a failure
    c.set_config(window.config.with_(head_dim=64, block_m=64, block_n=64))
    qtbot.waitUntil(lambda: _measured(window, 1024, (NAIVE, TILED, TILED_MMA)), timeout=5000)
    assert c.error_text("block_m") == "" and c.error_text("head_dim") == ""


def test_the_cpu_backend_refusing_a_config_beyond_free_ram_shows_why(qtbot, make_window):
    window = make_window(CpuBackend(), seq_len=128)
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=20000)
    window.controls.set_seq_len(131072)  # naive: S and P alone are 412 GB
    qtbot.waitUntil(lambda: 131072 in _memory(window).series["oom"][0], timeout=10000)
    # The runner's outcomes reach the window in its next turns: wait for the skip's note.
    qtbot.waitUntil(lambda: "Not run, over" in window.run_status.text(), timeout=10000)
    status = window.run_status.text()
    assert "tiled ~" in status and "naive N=131072 out of memory" in status  # both kept
    assert "free RAM allows" in window.readouts.last.toolTip()
    assert window.banner.isHidden()


# ------------------------------------------------------------------------------------ load


#: Random slider changes in the load test: at the 16 ms frame pace below, ~25 frames' worth of
#: changes land between results, enough to show the coalescing and the absence of a backlog.
LOAD_CHANGES = 1500


def test_random_slider_spam_leaves_no_backlog_and_ends_on_the_last_config(qtbot, make_window):
    backend = CostModelBackend(delay_s=0.02)  # a fast GPU: 20 ms a measurement
    window = make_window(backend)
    slider = window.controls.slider
    rng = random.Random(5000)
    calls0, updates0 = len(backend.calls), window.model.updates
    changes = 0
    start = last_frame = time.monotonic()
    while changes < LOAD_CHANGES:
        pos = rng.randrange(slider.minimum(), slider.maximum() + 1)
        if pos == slider.value():
            continue
        slider.setValue(pos)
        changes += 1
        now = time.monotonic()
        if now - last_frame >= 1 / 60:  # the event loop runs (results land, plots paint) as
            qtbot.wait(0)  # during a real drag: once a frame, not once a change
            last_frame = now
    spent = time.monotonic() - start
    final = window.config
    assert final.seq_len == window.controls.seq_scale[slider.value()]
    assert window.model.updates - updates0 == changes  # each change one state update, no echo
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=10000)
    runner = window.runner
    assert runner._live == [] and runner._sweep == []  # no backlog
    runs = len(backend.calls) - calls0
    print(f"load: {changes} changes in {spent:.1f} s, {runs} runs")
    assert runs < changes // 10, f"{runs} runs for {changes} changes: no coalescing"
    settled = len(backend.calls)
    qtbot.wait(200)
    assert len(backend.calls) == settled  # nothing was still queued
    key = window.backend.key
    for algo in (NAIVE, TILED):
        result = window.store.get(final, algo, key)
        assert result is not None and result.config == final, algo
    qtbot.waitUntil(lambda: _measured(window, final.seq_len, (NAIVE, TILED)), timeout=5000)
    assert _memory(window).cursor_n == final.seq_len
    # Pace: a change costs the GUI thread about a millisecond; leave room for a loaded CI box.
    assert spent < LOAD_CHANGES * 0.008, f"{changes} slider changes took {spent:.1f} s"


# ------------------------------------------------------------------------------------ bad input

NUMBER_FIELDS = {
    "seq_len": "seq_spin",
    "heads": "heads",
    "head_dim": "head_dim",
    "batch": "batch",
    "budget": "custom_gb",
}


@st.composite
def typed_value(draw):
    """(field, text typed into its box, whether the text is surely out of range)."""
    field = draw(st.sampled_from(sorted(NUMBER_FIELDS)))
    lo, hi = {
        "seq_len": (128, 131072),
        "heads": (1, 256),
        "head_dim": (1, 256),
        "batch": (1, 1024),
        "budget": (0.1, 4096.0),
    }[field]
    out_of_range = st.one_of(
        st.integers(min_value=-(10**6), max_value=int(lo) - 1 if lo >= 1 else -1),
        st.integers(min_value=int(hi) + 1, max_value=10**12),
    )
    if draw(st.booleans()):
        return field, str(draw(out_of_range)), True
    junk = draw(st.text(alphabet="0123456789-+.,eE xk", min_size=0, max_size=7))
    return field, junk, False


@pytest.fixture
def panels(qtbot):
    made = []

    def make():
        panel = ControlsPanel()
        qtbot.addWidget(panel)
        panel.show()  # inline messages are visible only in a shown panel
        made.append(panel)
        return panel

    return make


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=typed_value())
def test_typing_a_value_a_number_field_cannot_take_says_so_inline(qtbot, panels, case):
    field, text, surely_bad = case
    panel = panels()
    if field == "budget":
        panel.set_budget_preset("custom")  # the custom budget box is enabled only then
    box = getattr(panel, NUMBER_FIELDS[field])
    before_config, before_value = panel.last_valid_config, box.value()
    emitted = []
    panel.state.changed.connect(emitted.append)
    box.lineEdit().selectAll()
    qtbot.keyClicks(box, text)
    qtbot.keyClick(box, Qt.Key.Key_Return)
    message = panel.error_text(field)
    if surely_bad or message:
        # Refused: the message names the field and the allowed range, the value is kept.
        assert message.startswith(f"{field} = "), (text, message)
        assert "is not allowed" in message and "kept" in message
        assert box.value() == before_value
        assert panel.last_valid_config == before_config
        assert emitted == []
    else:
        # Accepted (Qt took a valid prefix, say): the config follows the box, no stale message.
        config = panel.config()
        if field != "budget":
            assert getattr(config, field) == box.value() or panel.seq_spin.snap
    assert panel.config().seq_len >= 128  # whatever was typed, the config is valid


def test_a_refused_edit_in_the_window_requests_nothing_and_clears_on_a_good_one(qtbot, make_window):
    window = make_window()
    qtbot.waitUntil(lambda: not window.runner.busy, timeout=5000)
    requests = window.runner.stats.requests
    heads = window.controls.heads
    heads.lineEdit().selectAll()
    qtbot.keyClicks(heads, "0")
    qtbot.keyClick(heads, Qt.Key.Key_Return)
    assert window.controls.error_text("heads") == (
        "heads = 0 is not allowed: an integer from 1 to 256; kept 12"
    )
    assert window.runner.stats.requests == requests and window.config.heads == 12
    heads.lineEdit().selectAll()
    qtbot.keyClicks(heads, "12")  # the same value, now typed validly: the message goes
    qtbot.keyClick(heads, Qt.Key.Key_Return)
    assert window.controls.error_text("heads") == ""


# ------------------------------------------------------------------------------------ real GPU


@pytest.mark.gpu
def test_gpu_a_broken_copy_of_a_kernel_raises_the_nvrtc_log_and_the_app_keeps_working(
    qtbot, make_window, tmp_path, monkeypatch
):
    from gpu.backends.cuda_backend import CudaBackend
    from gpu.launch import cuda_kernels

    broken = tmp_path / "flash_readable.cu"
    shutil.copy(cuda_kernels.KERNEL_DIR / flash_readable.SOURCE, broken)
    source = broken.read_text()
    broken.write_text(source.replace("{", "{ this_is_not_cuda;", 1))
    config = AttentionConfig(seq_len=256, heads=2)
    with pytest.raises(KernelCompileError) as err:
        cuda_kernels.get_kernel(broken, flash_readable.kernel_name(config))
    assert "this_is_not_cuda" in err.value.log and "error" in err.value.log

    # The real backend with the broken copy in place of the readable kernel.
    monkeypatch.setattr(flash_readable, "SOURCE", str(broken))
    backend = CudaBackend()
    window = make_window(backend, seq_len=1024)
    qtbot.waitUntil(lambda: "failed to compile" in window.banner.message, timeout=60000)
    assert "this_is_not_cuda" in window.banner.details
    assert TILED not in window.controls.algorithms()
    window.controls.set_seq_len(2048)
    key = window.backend.key
    qtbot.waitUntil(lambda: window.store.get(window.config, NAIVE, key) is not None, timeout=60000)
    assert window.store.get(window.config, NAIVE, key).backend == "cuda"


@pytest.mark.gpu
@pytest.mark.parametrize("module_name", ["flash_mma", "flash_wgmma"])
def test_gpu_a_broken_tensor_core_kernel_is_off_and_the_others_keep_running_on_the_gpu(
    qtbot, make_window, tmp_path, monkeypatch, module_name
):
    import dataclasses
    import importlib

    from gpu.backends.cuda_backend import CudaBackend
    from gpu.launch import cuda_kernels

    module = importlib.import_module(f"gpu.launch.{module_name}")
    config = AttentionConfig(seq_len=1024, heads=2, head_dim=64, dtype="fp16")
    if module.supports(config) is not None:
        pytest.skip(module.supports(config))
    algorithm = TILED_MMA if module_name == "flash_mma" else TILED_WGMMA
    broken = tmp_path / module.SOURCE
    shutil.copy(cuda_kernels.KERNEL_DIR / module.SOURCE, broken)
    broken.write_text(broken.read_text() + "\nthis_is_not_cuda here;\n")  # not in a comment
    # The launcher's spec names the source and keeps the compiled variants: a copy of it that
    # reads the broken file, with an empty cache, stands in for the module's own.
    spec = dataclasses.replace(module.SPEC, source=str(broken), kernels={})
    monkeypatch.setattr(module, "SPEC", spec)
    for name in ("supports", "get_kernel", "kernel_resources", "prepare"):
        monkeypatch.setattr(module, name, getattr(spec, name))

    # The backend raises the compiler's log, not CuPy's own exception (which the runner would
    # take for a CUDA fault and drop the whole GPU backend for).
    with pytest.raises(KernelCompileError) as err:
        CudaBackend().run(config, algorithm, RunOptions(warmup=0, repeats=1))
    assert "this_is_not_cuda" in err.value.log

    backend = CudaBackend()
    window = make_window(backend, seq_len=1024)
    window.controls.set_checked_algorithms((NAIVE, algorithm))
    qtbot.waitUntil(lambda: "failed to compile" in window.banner.message, timeout=120000)
    assert "this_is_not_cuda" in window.banner.details
    assert algorithm not in window.controls.algorithms()
    window.controls.set_seq_len(2048)
    key = window.backend.key
    qtbot.waitUntil(lambda: window.store.get(window.config, NAIVE, key) is not None, timeout=60000)
    assert window.store.get(window.config, NAIVE, key).backend == "cuda"


@pytest.mark.gpu
def test_gpu_tiles_beyond_the_devices_shared_memory_name_its_limit(qtbot, make_window):
    from gpu.backends.cuda_backend import CudaBackend
    from gpu.launch.cuda_kernels import smem_optin_bytes

    window = make_window(CudaBackend(), seq_len=512)
    c = window.controls
    c.set_config(window.config.with_(head_dim=256, block_m=256, block_n=256))
    qtbot.waitUntil(lambda: bool(c.error_text("block_m")), timeout=60000)
    assert f"{smem_optin_bytes():,} bytes" in c.error_text("block_m")
    assert window.banner.isHidden()


@pytest.mark.gpu
def test_gpu_a_real_cuda_runtime_error_mid_run_falls_back_to_cpu(qtbot, make_window):
    import cupy

    from gpu.backends.cuda_backend import CudaBackend

    class Failing(CudaBackend):
        def run(self, config, algorithm, options=None):
            if config.seq_len == 1024:  # 719: cudaErrorLaunchFailure
                raise cupy.cuda.runtime.CUDARuntimeError(719)
            return super().run(config, algorithm, options)

    cuda = Failing()
    window = make_window(factory=lambda name: CpuBackend() if name == "cpu" else cuda, seq_len=512)
    window.controls.set_seq_len(1024)
    qtbot.waitUntil(lambda: "switched to the CPU backend" in window.banner.message, timeout=60000)
    qtbot.waitUntil(
        lambda: window.backend is not None and window.backend.info.backend == "cpu", timeout=60000
    )
    assert "cudaErrorLaunchFailure" in window.banner.message
