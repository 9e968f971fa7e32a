"""Every process the app starts dies with it, however the app ends: SIGKILL of the window or of
`main.py render`, idle, with a run in flight and during a large open, leaves no descendant
alive 5 s later, and no child keeps the parent's stdout open."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"
DEADLINE_S = 5.0


@pytest.fixture(scope="module")
def large_file(tmp_path_factory) -> Path:
    """A recording of about 27 MB: its open keeps the compute process parsing for a while."""
    base = json.loads(SHIPPED.read_text())
    measured = [r for r in base["results"] if not r["oom"]]
    results = []
    for batch in range(1, 31):
        for heads in range(1, 46):
            for dtype in ("fp16", "bf16"):
                for causal in (False, True):
                    for n in (256, 512, 1024, 2048, 4096):
                        r = dict(measured[(batch + heads) % len(measured)])
                        r["config"] = dict(
                            r["config"], batch=batch, heads=heads, dtype=dtype, causal=causal,
                            seq_len=n,
                        )  # fmt: skip
                        r["traffic"] = []
                        results.append(r)
    path = tmp_path_factory.mktemp("large") / "large.json"
    path.write_text(json.dumps(dict(base, results=results, traces=[]), indent=1))
    return path


def _start(args: list[str], tmp_path: Path, settings: dict[str, object] | None = None):
    config = tmp_path / "config"
    (config / "Tilescope").mkdir(parents=True, exist_ok=True)
    lines = ["[controls]", *(f"{k}={v}" for k, v in (settings or {}).items())]
    (config / "Tilescope" / "Tilescope.conf").write_text("\n".join(lines) + "\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(config))
    return subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def _wait_for_children(proc: subprocess.Popen, count: int, timeout_s: float = 120.0):
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the app ended early with {proc.returncode}"
        kids = parent.children(recursive=True)
        if len(kids) >= count:
            return kids
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} children after {timeout_s} s")


def _busy(process: psutil.Process, cpu_s: float, timeout_s: float = 60.0) -> None:
    """Until `process` has used `cpu_s` of CPU time (it is at work, not starting)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        times = process.cpu_times()
        if times.user + times.system >= cpu_s:
            return
        time.sleep(0.05)
    raise AssertionError(f"{process.pid} did not get to work")


def _reading(process: psutil.Process, timeout_s: float = 120.0) -> None:
    """Until `process` holds 40 MB more than when first seen: it is parsing the large file."""
    start = process.memory_info().rss
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.memory_info().rss > start + 40e6:
            return
        time.sleep(0.02)
    raise AssertionError(f"{process.pid} did not start reading")


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _kill_and_check(proc: subprocess.Popen, kids: list[psutil.Process]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + DEADLINE_S
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive(kids)
    for p in left:  # the test never leaves them behind, whatever it finds
        p.kill()
    assert not left, [" ".join(p.cmdline())[:90] for p in left]
    # nothing holds the stdout pipe: reading it ends
    os.set_blocking(proc.stdout.fileno(), False)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            if proc.stdout.read() == b"":
                return
        except BlockingIOError:
            pass
        time.sleep(0.05)
    raise AssertionError("the app's stdout is still held open")


def _compute_child(kids: list[psutil.Process], timeout_s: float = 60.0) -> psutil.Process:
    """The compute process among `kids`, once it runs its own program: a child seen between
    its fork and its exec (a loaded machine stretches that) still shows the app's command."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for k in kids:
            with contextlib.suppress(psutil.Error):
                if "spawn_main" in " ".join(k.cmdline()):
                    return k
        time.sleep(0.02)
    raise AssertionError("no compute process among the app's children")


def test_sigkill_of_the_idle_window_leaves_no_child(tmp_path):
    proc = _start([], tmp_path, {"seq_len": 512, "backend": "cpu"})
    kids = _wait_for_children(proc, 2)  # the compute process and multiprocessing's tracker
    time.sleep(1.0)
    _kill_and_check(proc, kids)


def test_sigkill_of_the_window_with_a_run_in_flight_leaves_no_child(tmp_path):
    proc = _start([], tmp_path, {"seq_len": 2048, "backend": "cpu", "heads": 12})
    kids = _wait_for_children(proc, 2)
    _busy(psutil.Process(proc.pid), 4.0)  # past start-up: measuring
    _kill_and_check(proc, kids)


def test_sigkill_of_the_window_during_a_large_open_leaves_no_child(tmp_path, large_file):
    proc = _start(["--open", str(large_file)], tmp_path, {"seq_len": 1024})
    kids = _wait_for_children(proc, 2)
    _reading(_compute_child(kids))
    _kill_and_check(proc, kids)


def test_sigkill_of_render_mid_sweep_leaves_no_child(tmp_path):
    out = tmp_path / "r.png"
    proc = _start(["render", "--seq", "8192", "--backend", "cpu", "--out", str(out)], tmp_path)
    kids = _wait_for_children(proc, 2)
    _busy(psutil.Process(proc.pid), 5.0)
    _kill_and_check(proc, kids)
    assert not out.exists()


def test_sigkill_of_render_during_a_large_open_leaves_no_child(tmp_path, large_file):
    out = tmp_path / "r.png"
    args = ["render", "--seq", "1024", "--open", str(large_file), "--out", str(out)]
    proc = _start(args, tmp_path)
    kids = _wait_for_children(proc, 2, timeout_s=180.0)
    _reading(_compute_child(kids))
    _kill_and_check(proc, kids)


def test_a_child_ends_when_its_parent_is_gone_even_in_a_long_c_call(tmp_path):
    """The child itself, without the app: its parent (a bare Python) ends by os._exit while
    the child is inside one long call that holds the interpreter."""
    script = f"""
import multiprocessing, os, sys, time
sys.path.insert(0, {str(ROOT)!r})
from app.work.child_process import die_with_parent
from concurrent.futures import ProcessPoolExecutor

def hold():
    sum(range(10**11))  # one C loop, minutes long, holding the GIL

if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with_parent, initargs=(os.getpid(),))
    pool.submit(hold)
    time.sleep(3)
    os._exit(3)
"""
    path = tmp_path / "parent.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE)
    kids = _wait_for_children(proc, 2, timeout_s=30.0)
    assert proc.wait(30) == 3
    deadline = time.monotonic() + DEADLINE_S
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive(kids)
    for p in left:
        p.kill()
    assert not left


def test_the_program_ends_at_once_when_it_exits_with_a_job_still_running_in_the_compute_process(
    tmp_path,
):
    """A normal exit (the end of main, sys.exit) while a job runs in the compute process: the
    interpreter's own pool join would wait for the job; the process ends at once instead."""
    script = f"""
import sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from app.work.background import ComputeStopped, in_process

def wait_for_job():
    try:
        in_process(time.sleep, 600)()
    except ComputeStopped:
        pass

threading.Thread(target=wait_for_job, daemon=True).start()
time.sleep(0.5)
"""
    path = tmp_path / "exits.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE)
    kids = _wait_for_children(proc, 2, timeout_s=30.0)
    try:
        assert proc.wait(60) == 0  # a job of 600 s: only a stuck exit gets near this bound
        deadline = time.monotonic() + DEADLINE_S
        while _alive(kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(kids)
    finally:
        for p in [psutil.Process(proc.pid), *kids] if proc.poll() is None else kids:
            with contextlib.suppress(psutil.Error):
                p.kill()


def test_a_job_whose_process_was_killed_mid_result_fails_and_the_program_still_ends(tmp_path):
    """The compute process killed while it sends a result (a window closing during a large
    open) leaves half a message in the result pipe. The job waiting on it must fail with
    ComputeStopped, and the program must still end."""
    script = f"""
import struct, sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from app.work import background

out = []

def wait_for_job():
    try:
        background.in_process(time.sleep, 600)()
    except background.ComputeStopped:
        out.append("stopped")

threading.Thread(target=wait_for_job, daemon=True).start()
while background._jobs_in_process == 0 or background._pool is None:
    time.sleep(0.01)
time.sleep(1.0)  # the job is in the process
# Half a result message in the pipe, as a process killed while sending one leaves it.
background._pool._result_queue._writer._send(struct.pack("!i", 118284) + b"p" * 65036)
time.sleep(0.2)
background.stop_compute_process()
deadline = time.monotonic() + 10
while not out and time.monotonic() < deadline:
    time.sleep(0.01)
print(out)
"""
    path = tmp_path / "killed_mid_result.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        stdout, _ = proc.communicate(timeout=60)
    finally:
        for p in [proc, *(psutil.Process(proc.pid).children(True) if proc.poll() is None else [])]:
            with contextlib.suppress(Exception):
                p.kill()
    assert proc.returncode == 0
    assert stdout.strip() == "['stopped']"


_VIDEO_EXPORT = """
import os, signal, sys
import numpy as np
sys.path.insert(0, {root!r})
from app.export.animation_writers import open_writer
from gpu.files.fileio import new_partial_file
tmp = new_partial_file({target!r}, ".mp4")
writer = open_writer(".mp4", tmp, (64, 48), 10.0)
for i in range(20):
    writer.append(np.full((48, 64, 3), i * 10, dtype=np.uint8))
print(writer._process.pid, tmp, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_during_a_video_export_ends_the_encoder_and_the_next_export_clears_its_file(
    tmp_path,
):
    pytest.importorskip("imageio_ffmpeg")
    from app.export.animation_writers import open_writer
    from gpu.files.fileio import commit_partial_file, new_partial_file

    target = tmp_path / "tiles.mp4"
    script = _VIDEO_EXPORT.format(root=str(ROOT), target=str(target))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid_text, tmp = proc.stdout.readline().split()
    encoder = psutil.Process(int(pid_text))
    assert proc.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + DEADLINE_S
    while _alive([encoder]) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive([encoder])
    for p in left:
        p.kill()
    assert not left, "the video encoder outlived the app"
    assert Path(tmp).exists() and not target.exists()  # a SIGKILL can clean nothing up ...
    again = new_partial_file(target, ".mp4")  # ... the next export of the same file does
    assert not Path(tmp).exists()
    writer = open_writer(".mp4", again, (64, 48), 10.0)
    writer.append(np.zeros((48, 64, 3), dtype=np.uint8))
    writer.close()
    commit_partial_file(again, target)
    assert target.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiles.mp4"]


_VIDEO_EXPORTS_UNDER_BLAS = """
import os, sys, threading
import numpy as np
sys.path.insert(0, {root!r})
from app.export.animation_writers import ENCODER_NICENESS, open_writer
busy = threading.Event()
def compute():  # a CPU run: BLAS threads busy with one large product after another
    a = np.random.default_rng(0).random((1024, 1024))
    while True:
        a @ a
        busy.set()
threading.Thread(target=compute, daemon=True).start()
busy.wait()
for i in range({count}):
    path = os.path.join({folder!r}, f"{{i}}.mp4")
    open(path, "wb").close()  # the exporter's partial file
    writer = open_writer(".mp4", path, (64, 48), 10.0)
    nice = int(open(f"/proc/{{writer._process.pid}}/stat").read().rsplit(")", 1)[1].split()[16])
    writer.append(np.full((48, 64, 3), i, dtype=np.uint8))
    writer.close()
    print(i, nice - os.nice(0), flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_video_exports_started_during_a_blas_computation_never_freeze(tmp_path):
    """An encoder started with a hook between fork and exec forced a real fork(), whose BLAS
    handler waited for threads busy with the computation: the app froze for good."""
    pytest.importorskip("imageio_ffmpeg")
    count = 20
    script = _VIDEO_EXPORTS_UNDER_BLAS.format(root=str(ROOT), folder=str(tmp_path), count=count)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    lines = stdout.decode().split()
    assert proc.returncode == 0, f"froze after {len(lines) // 2} exports: {stderr.decode()}"
    assert len(lines) == 2 * count
    niceness = {int(n) for n in lines[1::2]}
    lowest = 19 - os.nice(0)  # a niced app's encoder cannot go past 19, the lowest priority
    assert niceness == {min(10, lowest)}, "the encoder runs below the app's priority"
    assert all((tmp_path / f"{i}.mp4").stat().st_size > 0 for i in range(count))


_KILLED_WITH_A_COMPUTE_PROCESS = """
import sys, time
sys.path.insert(0, {root!r})
from app.work.background import compute_process, start_compute_process
start_compute_process()
assert compute_process().submit(int, "7").result() == 7
print("ready", flush=True)
time.sleep(60)
"""


def test_a_killed_app_leaves_no_leaked_semaphore_warning_on_its_terminal(tmp_path):
    """multiprocessing's resource tracker outlives a SIGKILLed app for a moment, removes the
    compute process's semaphores and warned about them on the app's stderr."""
    script = _KILLED_WITH_A_COMPUTE_PROCESS.format(root=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    kids = psutil.Process(proc.pid).children(recursive=True)
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + DEADLINE_S
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(kids)
    err = proc.stderr.read()  # every writer of the app's stderr is gone now
    assert "leaked" not in err and "resource_tracker" not in err, err
