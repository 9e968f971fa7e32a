"""Shared test setup: offscreen Qt, the `gpu` marker skipped where no CUDA device is present and
the `multigpu` marker where fewer than two are."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
#: The offscreen platform's own screen is 800×800; the window keeps itself on its screen, so the
#: tests give it a 1920×1080 desktop (a test of a smaller screen resizes the window itself).
SCREEN = Path(__file__).parent / "data" / "offscreen_1920x1080.json"
if os.environ["QT_QPA_PLATFORM"] == "offscreen":
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={SCREEN}"

#: What the app keeps between runs in the user's cache folder (this CPU's best memory bandwidth)
#: goes to a folder of the test run's own.
os.environ.setdefault("TILESCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="tilescope-test-cache-"))

# Applies the PySide6 6.12 / CPython 3.11 reference-count work-around before any Qt call (app's
# __init__ itself imports no Qt, so this is safe on a GPU host without Qt).
import app  # noqa: F401, E402

#: How long the shared fixtures wait for a condition before calling it a hang.
HANG_MS = 60_000


#: How long the interpreter may take to end after the last test before it is called a hang.
EXIT_HANG_S = 120


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run ends now: the compute process goes (a job left running in it by a test would
    hold the interpreter's exit), and an exit that still hangs prints every thread's stack and
    ends the run with status 1 instead of waiting for the CI machine's limit."""
    import faulthandler
    import sys

    if "app.work.background" in sys.modules:
        sys.modules["app.work.background"].end_compute_process()
    faulthandler.dump_traceback_later(EXIT_HANG_S, exit=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Jobs still running on Qt's thread pool (a widget's worker, the widget closed by its test)
    finish while Python's objects are alive: at interpreter exit their report would go to a
    collected object and print a traceback. The app's own windows wait for theirs on close."""
    import sys

    if "PySide6.QtCore" in sys.modules:
        from PySide6.QtCore import QThreadPool

        QThreadPool.globalInstance().waitForDone(30_000)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_multigpu_without_two_devices(items)
    if not any("gpu" in item.keywords for item in items):
        return
    from gpu.backends.factory import cuda_available

    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (CuPy sees none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _skip_multigpu_without_two_devices(items: list[pytest.Item]) -> None:
    if not any("multigpu" in item.keywords for item in items):
        return
    from gpu.ring.backend import cuda_device_count

    present = cuda_device_count()
    if present >= 2:
        return
    skip = pytest.mark.skip(reason=f"needs 2 CUDA devices (CuPy sees {present})")
    for item in items:
        if "multigpu" in item.keywords:
            item.add_marker(skip)


# ------------------------------------------------------------------- the main window, for app tests
# Qt is imported inside the fixtures: a GPU host may run the engine tests without Qt.


@pytest.fixture
def window_settings(tmp_path):
    """Settings in a temporary file, starting at N = 1024 whatever the defaults become."""
    from PySide6.QtCore import QSettings

    from gpu.algorithms import ALGORITHMS

    s = QSettings(str(tmp_path / "tilescope.ini"), QSettings.Format.IniFormat)
    s.setValue("controls/seq_len", 1024)
    # Every algorithm ticked and "Every series" on, as a user can: the app tests see every
    # series. The default view (naive, the fastest fused kernel, one peer) has its own tests,
    # without these settings.
    s.setValue("controls/algorithms", ",".join(ALGORITHMS))
    s.setValue("view/every_series", True)
    return s


@pytest.fixture
def make_window(qtbot, window_settings):
    """make(backend=None, factory=None, seq_len=None, **MainWindow kwargs): a shown main window
    whose backend (a CostModelBackend unless given) is ready and whose results are drawn."""
    from app.state.model.cost_model_backend import CostModelBackend
    from app.window.main_window import MainWindow

    def make(backend=None, factory=None, seq_len=None, **kwargs):
        if seq_len is not None:
            window_settings.setValue("controls/seq_len", seq_len)
        backend = backend if backend is not None else CostModelBackend()
        window = MainWindow(
            backend_factory=factory or (lambda name: backend), settings=window_settings, **kwargs
        )
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        # Condition waits: their bounds only catch a hang (a loaded machine starts slowly).
        qtbot.waitUntil(lambda: window.backend is not None, timeout=HANG_MS)
        qtbot.waitUntil(lambda: window.results_drawn, timeout=HANG_MS)
        return window

    return make


@pytest.fixture
def wait_started(qtbot):
    """wait(window): until the window's start-up work is done (first runs measured, the
    animation's lanes, the model curves and the explain text made and applied)."""

    def wait(window) -> None:
        # the explain pane and the lesson strip: busy while a text waits for the slider to rest
        workers = (window.plots.model_worker, window.explain, window.lesson)

        def idle() -> bool:
            return (
                window.animation is not None
                and not window.runner.busy
                and not any(w.busy for w in workers)
            )

        qtbot.waitUntil(idle, timeout=HANG_MS)
        qtbot.wait(50)  # what those handed back is applied and painted
        qtbot.waitUntil(idle, timeout=HANG_MS)

    return wait


# ------------------------------------------------------------------- the runner, for runner tests


@pytest.fixture
def runner(qtbot):
    """A Runner (its worker thread started), shut down after the test."""
    from app.work.runner import Runner

    r = Runner()
    yield r
    r.shutdown(timeout=2.0)


@pytest.fixture
def start_backend(qtbot, runner):
    """start(backend, requested="fake") -> BackendReady: hand `backend` to the runner and wait
    until it says it is ready."""

    def start(backend, requested="fake"):
        with qtbot.waitSignal(runner.backendReady, timeout=5000) as blocker:
            runner.set_backend(requested, lambda: backend)
        return blocker.args[0]

    return start


@pytest.fixture
def outcomes(runner):
    """Every RunOutcome the runner hands back during the test, in order."""
    seen = []
    runner.outcome.connect(seen.append)
    return seen
