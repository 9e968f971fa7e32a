"""A hostile-file pass: thousands of mutated recordings, sessions and traces through `explain`,
the window's File ▸ Open (shown and painted) and `render`, counting what must never happen.

    QT_QPA_PLATFORM=offscreen python bench/adversarial.py [--files 2000] [--workers 2]
        [--render-every 10] [--tabs-every 5] [--cli-every 100] [--seed 1] [--out FILE]

Each file is a small valid recording or session (tests/document_mutations.py's bases: two
measured results, an out-of-memory result, a reference peer, a real trace) with one to four
mutations drawn from: an extreme float in a numeric field (5e-324, subnormals, -0.0, 1.8e308,
2^63, 2^64), markup in a string field (`<b>`, `&amp;`, `<img src=...>` of a FIFO), junk of any
type anywhere, a key deleted or added, a trace block that ends before it starts, a phase past
its block's end, a repeated block id, the text truncated, invalid UTF-8, 3000-deep nesting.

Every file goes through `explain` (in-process, `main.main`) and through the window (painted;
every --tabs-every'th with each tab shown in turn); every --render-every'th through `render`
in-process (`app.launch.render_window`, a fresh window each
time), and every --cli-every'th through real `main.py render` and `main.py explain` processes.
Counted as failures: a traceback (stderr, sys.excepthook, threading.excepthook), an exit status
outside 0/1/2, output on stdout or a picture left by a run that failed, a `.part` file left
behind, a FIFO opened by Qt, and markup read as HTML anywhere in the window. Workers run in
--workers processes (at most 2 on a 2-core machine).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

EXTREMES = (5e-324, 1e-310, 2.2250738585072014e-308, -0.0, 0.0, 1.7976931348623157e308, 1e300,
            -1e300, 1e30, 2.0**63, 2**63, 2**64, -1, 10**400)  # fmt: skip
JUNK = (None, True, False, "", "12", "fp8", -1, 0, 1, -1.5, 2**63, 1e308, [], {}, [1, "a"],
        {"a": 1})  # fmt: skip
SEQS = (256, 1024, 4096, 16384)


def _paths(node, prefix=()):
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:2]):
            out += _paths(v, (*prefix, i))
    return out


def _leaf(doc, path):
    node = doc
    for k in path[:-1]:
        node = node[k]
    return node, path[-1]


def mutate(rng: random.Random, base: dict, markup: str) -> tuple[bytes, list[str]]:
    """One mutated document (bytes: some mutations are not JSON) and what was done."""
    doc = json.loads(json.dumps(base))
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        paths = _paths(doc)
        how = rng.choices(
            ("extreme", "markup", "junk", "delete", "add", "trace", "truncate", "utf8", "deep"),
            weights=(8, 6, 2, 1, 1, 1, 0.3, 0.3, 0.2),
        )[0]
        try:
            if how == "extreme":
                nums = [p for p in paths if p and _is_number(_leaf(doc, p))]
                path = rng.choice(nums)
                parent, key = _leaf(doc, path)
                parent[key] = rng.choice(EXTREMES)
            elif how == "markup":
                strs = [p for p in paths if p and isinstance(_get(doc, p), str)]
                path = rng.choice(strs)
                parent, key = _leaf(doc, path)
                parent[key] = rng.choice((markup, markup + " " + str(parent[key])))
            elif how in ("junk", "delete", "add"):
                path = rng.choice([p for p in paths if p])
                parent, key = _leaf(doc, path)
                if how == "junk":
                    parent[key] = rng.choice(JUNK)
                elif how == "delete":
                    del parent[key]
                elif isinstance(parent[key], dict):
                    parent[key]["x" + str(rng.randrange(99))] = rng.choice(JUNK)
                else:
                    parent[key] = [parent[key], rng.choice(JUNK)]
            elif how == "trace" and doc.get("traces"):
                blocks = doc["traces"][0]["blocks"]
                kind = rng.choice(("ends early", "phase past end", "repeated id"))
                if kind == "ends early":
                    blocks[0][3] = blocks[0][2] - 1
                elif kind == "phase past end":
                    blocks[0][5][-1] = blocks[0][3] - blocks[0][2] + 1
                else:
                    blocks[1][0] = blocks[0][0]
                how = f"trace: {kind}"
            elif how in ("truncate", "utf8", "deep"):
                done.append(how)
                continue
            done.append(how)
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    text = json.dumps(doc).encode()
    if "deep" in done:
        text = text.replace(
            b'"meta": {', b'"meta": {"deep": ' + b"[" * 3000 + b"]" * 3000 + b", ", 1
        )
    if "utf8" in done:
        cut = rng.randrange(len(text))
        text = text[:cut] + b"\xff\xfe" + text[cut:]
    if "truncate" in done:
        text = text[: rng.randrange(len(text))]
    return text, done


def _get(doc, path):
    try:
        parent, key = _leaf(doc, path)
        return parent[key]
    except (KeyError, IndexError, TypeError):
        return None


def _is_number(leaf) -> bool:
    parent, key = leaf
    try:
        v = parent[key]
    except (KeyError, IndexError, TypeError):
        return False
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ------------------------------------------------------------------------------------ a worker


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.failures: list[str] = []

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def fail(self, what: str) -> None:
        self.add("failures")
        if len(self.failures) < 50:
            self.failures.append(what[:600])


def _fifo_watch(path: str, opened: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.002)
            continue
        os.close(fd)
        opened[0] += 1


def work(args: tuple[int, int, dict]) -> dict:
    worker, workers, opts = args
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    import main as cli
    from app.launch import render_window
    from app.window.main_window import MainWindow
    from gpu.backends.model_backend import CostModelBackend
    from gpu.config import AttentionConfig
    from tests.document_mutations import BASE, SESSION
    from tests.test_plain_text import shown_texts

    app = QApplication.instance() or QApplication([])
    tally = Tally()
    folder = Path(tempfile.mkdtemp(prefix=f"tilescope-adv-{worker}-"))
    fifo = folder / "watched.fifo"
    os.mkfifo(fifo)
    opened, stop = [0], threading.Event()
    threading.Thread(target=_fifo_watch, args=(str(fifo), opened, stop), daemon=True).start()
    markup = f"<b>BOLD</b> &amp;AMP <img src='{fifo}'>"
    hooks: list[str] = []
    sys.excepthook = lambda t, v, tb: hooks.append("".join(traceback.format_exception(t, v, tb)))
    threading.excepthook = lambda a: hooks.append(
        "".join(traceback.format_exception(a.exc_type, a.exc_value, a.exc_traceback))
    )
    settings = QSettings(str(folder / "adv.ini"), QSettings.Format.IniFormat)
    settings.setValue("controls/seq_len", 1024)
    backend = CostModelBackend()
    window = MainWindow(backend_factory=lambda name: backend, settings=settings)
    window.resize(1600, 1000)
    window.show()
    _spin(app, lambda: window.backend is not None, 30)
    rng = random.Random(opts["seed"] * 1000 + worker)
    import re

    for k in range(worker, opts["files"], workers):
        base = BASE if rng.random() < 0.6 else SESSION
        data, done = mutate(rng, base, markup)
        path = folder / "mutated.json"
        path.write_bytes(data)
        tally.add("files")
        for how in done:
            tally.add(f"mutation: {how}")
        where = f"file {k} ({', '.join(done)})"
        # explain, in-process
        seq = rng.choice(SEQS)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(["explain", "--seq", str(seq), "--open", str(path)])
            except BaseException as exc:
                code = -1
                err.write(traceback.format_exc() + repr(exc))
        tally.add("explain runs")
        tally.add(f"explain exit {code}")
        if code not in (0, 1, 2) or "Traceback" in err.getvalue():
            tally.fail(f"explain {where}: exit {code}: {err.getvalue()}")
        elif code and out.getvalue():
            tally.fail(f"explain {where}: output despite exit {code}")
        # the window: File > Open, every tab painted
        outcome: list[str] = []
        fm = window.file_menu
        fm.fileOpened.connect(outcome.append)
        fm.openFailed.connect(outcome.append)
        fm.open_file(str(path))
        _spin(app, lambda outcome=outcome: bool(outcome), 30)
        fm.fileOpened.disconnect(outcome.append)
        fm.openFailed.disconnect(outcome.append)
        _spin(app, lambda: not window.runner.busy, 30)
        tally.add("GUI opens")
        tally.add("GUI opened" if outcome and outcome[0] == str(path) else "GUI refused")
        if k % opts["tabs_every"] == 0:  # the Tiles and Ring views with it too
            for i in range(window.tabs.count()):
                window.tabs.setCurrentIndex(i)
                _spin(app, lambda: False, 0.005)
            window.tabs.setCurrentIndex(0)
        window.grab()
        for w, t in shown_texts(window):
            if re.search(r"(?<!<b>)BOLD", t) or re.search(r"(?<!&amp;)AMP", t):
                tally.fail(f"GUI {where}: markup read as HTML in {w}: {t[:120]}")
                break
        # render, in-process: a fresh window each time
        if k % opts["render_every"] == 0:
            png = folder / "render.png"
            png.unlink(missing_ok=True)
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                try:
                    code = render_window(
                        AttentionConfig(seq_len=seq), open_path=str(path), out=str(png)
                    )
                except BaseException:
                    code = -1
                    err.write(traceback.format_exc())
            tally.add("render runs")
            tally.add(f"render exit {code}")
            if code not in (0, 1, 2) or "Traceback" in err.getvalue():
                tally.fail(f"render {where}: exit {code}: {err.getvalue()}")
            elif png.exists() != (code == 0):
                tally.fail(f"render {where}: exit {code} with picture={png.exists()}")
        # the real command line
        if k % opts["cli_every"] == 0:
            for argv in (["explain", "--seq", str(seq), "--open", str(path)],
                         ["render", "--seq", str(seq), "--open", str(path), "--out",
                          str(folder / "cli.png"), "--force"]):  # fmt: skip
                (folder / "cli.png").unlink(missing_ok=True)
                proc = subprocess.run(
                    [sys.executable, str(ROOT / "main.py"), *argv], capture_output=True,
                    text=True, timeout=300, cwd=folder,
                )  # fmt: skip
                tally.add(f"CLI {argv[0]} processes")
                tally.add(f"CLI {argv[0]} exit {proc.returncode}")
                if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
                    tally.fail(f"CLI {argv[0]} {where}: exit {proc.returncode}: {proc.stderr}")
                elif proc.returncode and proc.stdout:
                    tally.fail(f"CLI {argv[0]} {where}: output despite exit {proc.returncode}")
        parts = [p.name for p in folder.iterdir() if ".part" in p.name]
        if parts:
            tally.fail(f"{where}: partial files left: {parts}")
            for p in parts:
                (folder / p).unlink()
        while hooks:
            tally.fail(f"{where}: traceback in the window: {hooks.pop()}")
        if opts["out"] and tally.counts["files"] % 25 == 0:  # progress, readable at any time
            Path(f"{opts['out']}.worker{worker}").write_text(
                json.dumps({"counts": tally.counts, "failures": tally.failures}, indent=1)
            )
    window.close()
    _spin(app, lambda: False, 0.2)
    stop.set()
    if opened[0]:
        tally.fail(f"the FIFO was opened {opened[0]} times")
    tally.add("FIFO opens", opened[0])
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    # The window's compute process is this worker's child: a worker of a process pool joins
    # its children as it ends, before the interpreter's own exit hooks would end that one.
    from app.work.background import end_compute_process

    end_compute_process()
    return {"counts": tally.counts, "failures": tally.failures}


def _spin(app, until, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            return False
        app.processEvents()
        time.sleep(0.002)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2, choices=(1, 2))
    parser.add_argument("--render-every", type=int, default=10)
    parser.add_argument("--tabs-every", type=int, default=5)
    parser.add_argument("--cli-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    opts = vars(args)
    t0 = time.perf_counter()
    jobs = [(w, args.workers, opts) for w in range(args.workers)]
    if args.workers == 1:
        parts = [work(jobs[0])]
    else:
        # not multiprocessing.Pool: its workers are daemons, which may not start the window's
        # own compute process
        with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
            parts = list(pool.map(work, jobs))
    counts: dict[str, int] = {}
    failures: list[str] = []
    for part in parts:
        for key, n in part["counts"].items():
            counts[key] = counts.get(key, 0) + n
        failures += part["failures"]
    report = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "seconds": round(time.perf_counter() - t0, 1),
        "counts": dict(sorted(counts.items())),
        "failures": failures,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 1 if counts.get("failures") else 0


if __name__ == "__main__":
    raise SystemExit(main())
