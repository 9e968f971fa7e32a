"""How the program ends and what it does at the edges: Ctrl+C to the process group, SIGHUP,
a signal while the interpreter shuts down, a closed pipe, a window closed during a large open,
file names too long for the system, sizes in exact bytes, tiny times, folder names given as
files, and traces whose blocks contradict themselves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

import main as cli
from gpu.files.recording import recording_from_document
from tests.document_mutations import BASE, BASE_TEXT
from tests.test_child_processes import _alive, _start, _wait_for_children
from tests.test_child_processes import large_file as large_file  # the fixture
from tests.test_open_files import open_and_wait

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------- signals and exits


#: A program that ends while jobs still wait for a thread of Qt's pool (more jobs than threads,
#: each 0.3 s), as the app does when Ctrl+C comes soon after its start.
POOL_AT_EXIT = textwrap.dedent(
    """
    import sys, time
    from PySide6.QtCore import QThreadPool, QTimer
    from PySide6.QtWidgets import QApplication, QWidget
    from app.work.background import LatestOnly, finish_pool_jobs

    def main():
        app = QApplication([])
        window = QWidget()
        ran = []
        threads = QThreadPool.globalInstance().maxThreadCount()
        jobs = [LatestOnly(window) for _ in range(threads + 3)]
        for job in jobs:
            job.submit(lambda: (time.sleep(0.3), ran.append(1)), lambda _r: None)
        QTimer.singleShot(50, app.quit)
        app.exec()
        if sys.argv[1] == "finish":
            finish_pool_jobs(timeout_s=30)
            print(len(ran), len(jobs))

    main()
    """
)


def test_jobs_waiting_for_a_pool_thread_at_the_end_run_out_before_their_objects_go(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    script = tmp_path / "pool_at_exit.py"
    script.write_text(POOL_AT_EXIT)

    def run(how: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(script), how], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip

    left = run("plain")  # what the end of the program does by itself: the check can fail
    assert "Signal source has been deleted" in left.stderr
    finished = run("finish")
    assert finished.returncode == 0, finished.stderr
    assert "Traceback" not in finished.stderr and "deleted" not in finished.stderr
    ran, submitted = map(int, finished.stdout.split())
    assert ran == submitted


def test_ctrl_c_to_the_process_group_ends_the_window_with_130_and_no_traceback(tmp_path):
    config = tmp_path / "config"
    (config / "Tilescope").mkdir(parents=True)
    (config / "Tilescope" / "Tilescope.conf").write_text("[controls]\nseq_len=512\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(config))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py")], cwd=tmp_path, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    kids = _wait_for_children(proc, 2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl+C does
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err.decode()
    deadline = time.monotonic() + 5
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(kids)


def test_sighup_ends_the_window_with_129_and_no_traceback(tmp_path):
    proc = _start([], tmp_path, {"seq_len": 512})
    _wait_for_children(proc, 2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(30) == 129


def test_sighup_on_the_command_line_removes_a_partial_file_and_exits_129(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from gpu.files.fileio import new_partial_file, remove_partial_files_on_signals
        remove_partial_files_on_signals()
        tmp = new_partial_file({str(tmp_path / "target.gif")!r}, ".gif")
        print(tmp, flush=True)
        time.sleep(30)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    partial = proc.stdout.readline().strip()
    assert os.path.exists(partial)
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(10) == 129
    assert not os.path.exists(partial)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_the_interpreter_shuts_down_exits_with_its_status(signum, status):
    """main has returned and the exit hooks are running (a slow one here) when the signal
    comes: the status is 128 + the signal's number, not a death by the signal (-15, -2)."""
    script = textwrap.dedent(f"""
        import atexit, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from gpu import exit_status
        exit_status.finish_at_exit()
        atexit.register(time.sleep, 1.5)  # runs before finish_at_exit's hook
        exit_status.shutting_down(0)
        print("down", flush=True)
        sys.exit(0)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "down"
    time.sleep(0.5)
    proc.send_signal(signum)
    assert proc.wait(10) == status


def test_no_signal_while_shutting_down_keeps_mains_status():
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from gpu import exit_status
        exit_status.finish_at_exit()
        exit_status.shutting_down(2)
        print("partial line without newline", end="")
        sys.exit(2)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == "partial line without newline"


#: A program whose main thread is inside a C library's call back into Python (as the CPU
#: backend's NumPy allocator hooks are all the time) when the signal comes: an exception raised
#: there by a handler is printed as "Exception ignored" and lost.
IN_A_CALLBACK = textwrap.dedent(
    """
    import ctypes, subprocess, sys, time
    sys.path.insert(0, {root!r})
    from gpu.files.fileio import new_partial_file, remove_partial_files_on_signals
    remove_partial_files_on_signals()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    tmp = new_partial_file({target!r}, ".gif")
    def busy():
        print(child.pid, tmp, flush=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20:
            pass
    ctypes.CFUNCTYPE(None)(busy)()
    time.sleep(20)  # the signal's exception, if lost, lets the program run on
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_landing_in_a_call_back_from_c_still_ends_the_program_at_once(tmp_path, signum):
    script = IN_A_CALLBACK.format(root=str(ROOT), target=str(tmp_path / "anim.gif"))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    child_pid, partial = proc.stdout.readline().split()
    child = psutil.Process(int(child_pid))
    t0 = time.monotonic()
    proc.send_signal(signum)
    try:
        code = proc.wait(15)
    finally:
        proc.kill()
    took = time.monotonic() - t0
    assert code == 128 + signum, proc.stderr.read()
    assert took < 3.0, f"ended {took:.1f} s after the signal"
    assert not os.path.exists(partial)
    deadline = time.monotonic() + 2
    while _alive([child]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive([child]), "its child outlived it"
    assert "Exception ignored" not in proc.stderr.read()


def test_a_signal_while_the_main_thread_registers_a_partial_file_ends_the_program(tmp_path):
    """The handler removes the partial files on the main thread, which may be inside the
    registry's lock at that moment: with a plain lock the handler deadlocked there, and the
    program hung for good (seen once in 13 SIGINTs to `bench`)."""
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from gpu.files import fileio
        fileio.remove_partial_files_on_signals()
        tmp = fileio.new_partial_file({str(tmp_path / "out.json")!r})
        print(tmp, flush=True)
        with fileio._in_flight_lock:  # as inside new_partial_file or commit_partial_file
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(20)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    partial = proc.stdout.readline().strip()
    try:
        code = proc.wait(15)
    finally:
        proc.kill()
    assert code == 143
    assert not os.path.exists(partial)


def test_a_program_started_with_sighup_ignored_keeps_it_ignored(tmp_path):
    """`nohup main.py bench ...` must outlive the terminal: a signal the program was started
    with ignored stays ignored (SIGINT of a shell's background job too), as Python itself
    leaves an ignored SIGINT."""
    start = textwrap.dedent(f"""
        import os, signal, sys
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts it
        os.execv(sys.executable, [sys.executable, {str(ROOT / "main.py")!r}, "bench",
                 "--backend", "cpu", "--seq", "64,128", "--repeats", "3", "--algo", "tiled"])
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", start], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.stdout.readline().startswith("# cpu backend")  # it runs, its handlers are in
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "tiled" in out


#: SIGINT while the window starts its compute process (made slow here, as on a loaded machine).
SIGINT_AT_THE_CHILDS_START = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    sys.path.insert(0, {root!r})
    from gpu import exit_status
    exit_status.install()
    from app.work import background

    class SlowStart(background.ProcessPoolExecutor):
        def submit(self, *args, **kwargs):
            time.sleep(0.5)
            return super().submit(*args, **kwargs)

    background.ProcessPoolExecutor = SlowStart
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    background.start_compute_process()
    print("started", flush=True)
    time.sleep(20)
    """
)


def test_sigint_while_the_compute_process_starts_is_not_lost(tmp_path):
    """The window had SIGINT ignored while it started its compute process (so that the child
    ignores it from its first instruction): a Ctrl+C then was lost, and the window ran on."""
    script = SIGINT_AT_THE_CHILDS_START.format(root=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        code = proc.wait(15)
    finally:
        proc.kill()
    assert code == 130, proc.stderr.read()
    assert "Traceback" not in proc.stderr.read()


#: `render` of a CPU sweep at N = 4096: its window is built, then measures for tens of seconds.
RENDER = ["render", "--seq", "4096", "--heads", "8", "--backend", "cpu", "--force"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_render_while_its_window_is_built_or_measures_ends_it_promptly(
    tmp_path, signum
):
    """SIGINT's KeyboardInterrupt landed in a Qt slot or an import and was lost: render ran on
    for 30 s and more with its compute process alive."""
    for after in (0.3, 1.2, 2.5):  # after its compute process started
        out = tmp_path / f"x{after}.png"
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "main.py"), *RENDER, "--out", str(out)],
            cwd=tmp_path, env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            kids = _wait_for_children(proc, 1)
            time.sleep(after)
            kids = psutil.Process(proc.pid).children(recursive=True)
            t0 = time.monotonic()
            proc.send_signal(signum)
            code = proc.wait(30)
            took = time.monotonic() - t0
        finally:
            proc.kill()
        err = proc.stderr.read()
        assert code == 128 + signum, err
        assert took < 3.0, f"{after} s in: ended {took:.1f} s after the signal"
        deadline = time.monotonic() + 2
        while _alive(kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(kids), f"{after} s in: a child outlived render"
        assert "Exception ignored" not in err and "Traceback" not in err, err
        assert not out.exists() and not [p for p in tmp_path.iterdir() if ".part" in p.name]


def test_model_into_a_closed_pipe_exits_0_quietly():
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "model", "--seq", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdout.readline()
    proc.stdout.close()  # `| head -n1`
    err = proc.stderr.read()
    assert proc.wait(30) == 0, err
    assert b"Broken pipe" not in err and b"Traceback" not in err


# ------------------------------------------------------------------------- the window


def _compute_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())]


def test_closing_the_window_during_a_large_open_is_prompt_and_quiet(
    qtbot, make_window, large_file, capfd
):
    window = make_window()
    hang_ms = 60_000  # only a hang waits this long
    qtbot.waitUntil(lambda: bool(_compute_children()), timeout=hang_ms)
    child = _compute_children()[0]
    before = child.memory_info().rss
    window.file_menu.open_file(str(large_file))
    # The compute process is reading: it holds 40 MB more than before the open.
    qtbot.waitUntil(lambda: child.memory_info().rss > before + 40e6, timeout=hang_ms)
    assert window.file_menu.reader.busy  # still in flight when the window closes
    t0 = time.perf_counter()
    window.close()
    closed_in = time.perf_counter() - t0
    qtbot.wait(500)  # whatever the stopped job reports lands now
    assert closed_in < 1.5, f"the close took {closed_in:.1f} s"
    err = capfd.readouterr().err
    assert "Signal source has been deleted" not in err and "Traceback" not in err


def test_closing_the_window_while_a_large_open_checks_its_results_stops_the_check(
    qtbot, make_window, large_file, monkeypatch
):
    """The compute process has read the file; the reading thread checks and builds its tens of
    thousands of results: a closing window stops that too, or the program's end waits for it
    (25-35 s for 237 MB, then superqt's "Signal source has been deleted")."""
    import threading

    from app.state import recorded_run

    checking = threading.Event()
    real = recorded_run.recording_from_members

    def check(members, where):  # type: ignore[no-untyped-def]
        checking.set()
        return real(members, where)

    monkeypatch.setattr(recorded_run, "recording_from_members", check)
    window = make_window()
    reader = window.file_menu.reader
    window.file_menu.open_file(str(large_file))
    qtbot.waitUntil(checking.is_set, timeout=60_000)
    qtbot.wait(200)
    assert reader.busy  # still checking when the window closes
    t0 = time.perf_counter()
    window.close()
    assert reader.wait(30)
    stopped_in = time.perf_counter() - t0
    assert stopped_in < 1.0, f"the open went on for {stopped_in:.1f} s after the close"


def test_closing_the_window_while_its_jobs_wait_for_a_pool_thread_is_prompt(
    qtbot, make_window, wait_started
):
    """Every pool thread busy (other work of the process, finishing alone): the jobs the
    window submits wait for a thread, and a closing window does not wait for them."""
    import threading

    from PySide6.QtCore import QThreadPool
    from superqt.utils import create_worker

    window = make_window()
    wait_started(window)
    pool = QThreadPool.globalInstance()
    release = threading.Event()
    holding = []
    started = threading.Semaphore(0)

    def hold() -> None:
        started.release()
        release.wait(30)

    try:
        for _ in range(pool.maxThreadCount()):
            worker = create_worker(hold, _start_thread=False)
            holding.append(worker)
            worker.start()
        for _ in holding:
            assert started.acquire(timeout=10)  # every thread of the pool is held
        window.controls.heads.setValue(window.controls.heads.value() + 1)  # a model job
        assert window.plots.model_worker.busy  # waiting for a thread
        t0 = time.perf_counter()
        window.close()
        closed_in = time.perf_counter() - t0
    finally:
        release.set()
    assert closed_in < 1.5, f"the close took {closed_in:.1f} s"


def test_a_successful_open_clears_an_earlier_files_refusal(qtbot, make_window, tmp_path):
    window = make_window()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert not open_and_wait(qtbot, window, bad)
    assert window.banner.message.startswith("Could not open bad.json")
    good = tmp_path / "good.json"
    good.write_text(BASE_TEXT)
    assert open_and_wait(qtbot, window, good)
    assert not window.banner.message


@pytest.mark.parametrize(
    "earlier",
    [
        "Could not start the cuda backend: no device — using cpu instead.",
        "Could not save the session: [Errno 28] No space left on device",
    ],
)
def test_a_successful_open_clears_whatever_error_the_banner_still_showed(
    qtbot, make_window, tmp_path, earlier
):
    window = make_window()
    window.banner.show_message(earlier)  # about no config: it would stay until dismissed
    good = tmp_path / "good.json"
    good.write_text(BASE_TEXT)
    assert open_and_wait(qtbot, window, good)
    assert not window.banner.message and window.banner.isHidden()


def test_an_export_name_too_long_for_the_system_gives_a_message(qtbot, make_window, tmp_path):
    from app.window.file_menu import ExportRequest

    window = make_window()
    folder = tmp_path / "exports"
    folder.mkdir()
    for kind in ("plots_png", "plots_csv", "plots_svg"):
        path = folder / ("x" * 300 + ".png")
        assert not window.file_menu.export(ExportRequest(kind, str(path)))
        assert "file name" in window.banner.message or "too long" in window.banner.message
    assert not list(folder.iterdir())


# ------------------------------------------------------------------------- the command line


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("length", [250, 300, 5000])
def test_an_out_name_too_long_exits_2_with_one_line(capsys, tmp_path, length):
    name = str(tmp_path / ("r" * length + ".json"))
    code, out, err = _run(capsys, "bench", "--backend", "cpu", "--seq", "64", "--out", name)
    assert code == 2 and err.count("\n") == 1 and not out
    png = str(tmp_path / ("r" * length + ".png"))
    code, _, err = _run(capsys, "render", "--seq", "256", "--out", png)
    assert code == 2 and err.count("\n") == 1


def test_explain_with_an_empty_open_is_refused(capsys):
    code, out, err = _run(capsys, "explain", "--seq", "1024", "--open", "")
    assert code == 2 and "--open needs a file name" in err and not out


def test_render_to_a_name_ending_in_a_slash_is_refused_and_writes_nothing(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "render", "--seq", "256", "--out", "r.png/")
    assert code == 2 and "not a folder" in err
    assert not (tmp_path / "r.png").exists()


def test_explain_prints_a_picosecond_time_in_plain_decimals():
    from gpu.units import fmt_ms_column

    assert fmt_ms_column(3e-9) == "0.000000003000"
    assert fmt_ms_column(1e-9) == "0.000000001000"
    assert "e" not in fmt_ms_column(0.000123)


# ------------------------------------------------------------------------- traces


def _with_block(change) -> dict:
    doc = json.loads(BASE_TEXT)
    change(doc["traces"][0]["blocks"])
    return doc


@pytest.mark.parametrize(
    ("case", "change", "message"),
    [
        ("ends before it starts", lambda b: b[0].__setitem__(3, b[0][2] - 1), "before it starts"),
        ("phase past its end", lambda b: b[0][5].__setitem__(-1, 10**9), "after its block's end"),
        ("duplicate id", lambda b: b[1].__setitem__(0, b[0][0]), "appears twice"),
    ],
)
def test_a_trace_whose_blocks_contradict_themselves_is_refused(case, change, message):
    with pytest.raises(ValueError, match=message):
        recording_from_document(_with_block(change), "t.json")


def test_the_base_trace_is_valid():
    assert recording_from_document(json.loads(json.dumps(BASE)), "t.json").traces
