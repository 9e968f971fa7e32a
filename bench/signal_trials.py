"""Signals at random moments: every entry (the window, `render`, `bench`, `explain`) is sent
SIGINT, SIGTERM or SIGHUP at a random moment of its life and must end within 2 s, leave no
process it started alive and no `.part` file behind.

    python bench/signal_trials.py [--trials 50] [--signals INT,TERM,HUP] [--seed 1]
        [--entries gui,gui-open,gui-mp4,render,bench,explain] [--limit-s 2.0]
        [--mp4-during-compute 20] [--out FILE]

Entries, each a real `main.py` process in a folder of its own:
- gui: the window (offscreen, the CPU backend measuring N = 2048), signalled 0-5 s after it
  starts (imports, the window being built, the compute process starting, runs in flight);
- gui-open: the window opening the 60 MB recording below, signalled 0-8 s after it starts
  (the compute process reading it, the reading thread checking its 15,000 results);
- gui-mp4: the window, with an MP4 export of the tile animation started at a random moment
  0-4 s after the start (bench/app_driver.py runs main.py's own entry point and starts the
  export from a timer), signalled 0-0.6 s around the export's start;
- render: `render --seq 4096 --heads 8 --backend cpu`, signalled 0-6 s after it starts;
- bench: `bench --backend cpu --seq 512,...,4096 --out r.json`, signalled 0-4 s after;
- explain: `explain --seq 4096 --open FILE --json` of a 60 MB recording, signalled 0-3 s after.

A trial passes when the process exits with 128 + the signal's number within --limit-s of the
signal (or ended on its own before the signal came, or was ended by the signal's default action
before its interpreter had started main.py: both counted apart); every descendant seen
while it ran (polled every 20 ms) is gone by then; no `.part` file is in its folder; and its
error output holds no traceback ("Traceback", "Exception ignored"). The report gives, per entry
and signal, the trials, the failures and the slowest end.

Trials run one after another (the machine's other work is not held up by more than one app).

--close-during-open COUNT runs the window opening a recording of --open-mb MB (default 237,
within the 256 MiB limit) COUNT times and closes it at a random moment 1-12 s after it shows
(bench/app_driver.py close-at): it passes when the program has ended within --limit-s of the
close, with status 0, no process left and no traceback ("Signal source has been deleted").

--mp4-during-compute COUNT first runs the window on the CPU backend with COUNT MP4 exports in a
row, each started while a sweep up to N = 4096 computes (bench/app_driver.py): it passes when
every export is written before a timeout of 60 s an export (a freeze never ends by itself).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "main.py")
DRIVER = str(ROOT / "bench" / "app_driver.py")
SHIPPED = ROOT / "resources" / "recorded" / "h200_sweep.json"
SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "HUP": signal.SIGHUP}

#: (command after the interpreter, (earliest, latest) moment of the signal in seconds).
RENDER = "render --seq 4096 --heads 8 --backend cpu --out {folder}/x.png --force"
BENCH = "bench --backend cpu --seq 512,1024,2048,4096 --out {folder}/r.json"
EXPLAIN = "explain --seq 4096 --open {large} --json"
ENTRIES: dict[str, tuple[list[str], tuple[float, float]]] = {
    "gui": ([MAIN], (0.0, 5.0)),
    "gui-open": ([MAIN, "--open", "{large}"], (0.0, 8.0)),
    "gui-mp4": ([DRIVER, "mp4-at", "{mp4_at}", "--out", "{folder}/tiles.mp4"], (0.0, 0.6)),
    "render": ([MAIN, *RENDER.split()], (0.0, 6.0)),
    "bench": ([MAIN, *BENCH.split()], (0.0, 4.0)),
    "explain": ([MAIN, *EXPLAIN.split()], (0.0, 3.0)),
}


def large_recording(path: Path, target_bytes: int = 60_000_000) -> Path:
    """The shipped recording with copies of its results under other batch sizes, about
    `target_bytes` of JSON: its read and check keep `explain` busy for a while."""
    if path.exists():
        return path
    base = json.loads(SHIPPED.read_text())
    results = list(base["results"])
    one = len(json.dumps(base["results"], indent=1))
    for batch in range(2, 1 + max(1, target_bytes // one)):
        for r in base["results"]:
            results.append(dict(r, config=dict(r["config"], batch=batch)))
    path.write_text(json.dumps(dict(base, results=results), indent=1))
    return path


def _settings(folder: Path) -> dict[str, str]:
    config = folder / "config"
    (config / "Tilescope").mkdir(parents=True, exist_ok=True)
    (config / "Tilescope" / "Tilescope.conf").write_text("[controls]\nseq_len=2048\nbackend=cpu\n")
    return dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(config))


def _descendants(proc: psutil.Process, seen: dict[int, psutil.Process]) -> None:
    with contextlib.suppress(psutil.Error):
        for child in proc.children(recursive=True):
            seen.setdefault(child.pid, child)


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out


def trial(entry: str, signame: str, rng: random.Random, large: Path, limit_s: float) -> dict:
    """One run of `entry` signalled with `signame` at a random moment (see the module)."""
    args, (lo, hi) = ENTRIES[entry]
    folder = Path(tempfile.mkdtemp(prefix=f"sig-{entry}-"))
    delay = rng.uniform(lo, hi)
    fields = {"folder": str(folder), "large": str(large), "mp4_at": f"{rng.uniform(0, 4):.3f}"}
    command = [sys.executable, *(a.format(**fields) for a in args)]
    signum = SIGNALS[signame]
    proc = subprocess.Popen(
        command, cwd=folder, env=_settings(folder), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    me = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {}
    if entry == "gui-mp4":  # the driver prints a line when the export starts
        assert proc.stderr is not None
        lines = []
        while not lines or not (lines[-1].startswith(b"export started") or lines[-1] == b""):
            lines.append(proc.stderr.readline())
        if lines[-1] == b"":
            proc.kill()
            proc.wait()
            err = b"".join(lines) + proc.stderr.read()
            shutil.rmtree(folder, ignore_errors=True)
            return {"entry": entry, "signal": signame, "ok": False,
                    "why": f"no export: {err.decode(errors='replace')[-300:]}"}  # fmt: skip
    start = time.monotonic()
    while time.monotonic() - start < delay and proc.poll() is None:
        _descendants(me, seen)
        time.sleep(0.02)
    _descendants(me, seen)
    ended_first = proc.poll() is not None
    sent = time.monotonic()
    if not ended_first:
        proc.send_signal(signum)
    while proc.poll() is None and time.monotonic() - sent < 30:
        _descendants(me, seen)
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    ended_s = time.monotonic() - sent
    code = proc.wait()
    children = list(seen.values())
    while _alive(children) and time.monotonic() - sent < limit_s:
        time.sleep(0.02)
    gone_s = time.monotonic() - sent
    left = _alive(children)
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    parts = [p.name for p in folder.rglob("*") if ".part" in p.name]
    shutil.rmtree(folder, ignore_errors=True)
    # The interpreter's own start (about 50 ms) comes before any handler: the signal's default
    # action ends the process (SIGINT: Python's KeyboardInterrupt traceback, then -2).
    before_handlers = code == -signum and not children
    why = []
    if not ended_first and code != 128 + signum and not before_handlers:
        why.append(f"exit status {code}")
    if ended_s > limit_s:
        why.append(f"ended {ended_s:.2f} s after the signal")
    if left:
        why.append(f"{len(left)} processes left: {[p.pid for p in left]}")
    if parts:
        why.append(f"partial files left: {parts}")
    for word in ("Traceback", "Exception ignored"):
        if word in err and not before_handlers:
            why.append(f"{word!r} on stderr: {err[err.index(word) :][:300]!r}")
    return {
        "entry": entry, "signal": signame, "delay_s": round(delay, 3),
        "ended_first": ended_first, "before_handlers": before_handlers, "status": code,
        "ended_s": round(ended_s, 3),
        "children_gone_s": round(gone_s, 3), "children": len(children), "ok": not why,
        "why": "; ".join(why), "stderr_tail": err[-400:] if why else "",
    }  # fmt: skip


def close_during_open(count: int, megabytes: int, rng: random.Random, limit_s: float) -> dict:
    """The window closed during a large open, COUNT times (see the module docstring)."""
    large = large_recording(
        Path(tempfile.gettempdir()) / f"tilescope-signal-trials-{megabytes}MB.json",
        megabytes * 1_000_000,
    )
    rows = []
    for _ in range(count):
        folder = Path(tempfile.mkdtemp(prefix="sig-close-"))
        at = rng.uniform(1.0, 12.0)
        command = [sys.executable, DRIVER, "close-at", f"{at:.3f}", "--open", str(large)]
        proc = subprocess.Popen(
            command, cwd=folder, env=_settings(folder), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        me = psutil.Process(proc.pid)
        seen: dict[int, psutil.Process] = {}
        assert proc.stderr is not None
        lines = []
        while not lines or not (lines[-1].startswith(b"closing") or lines[-1] == b""):
            _descendants(me, seen)
            lines.append(proc.stderr.readline())
        closed = time.monotonic()
        while proc.poll() is None and time.monotonic() - closed < 60:
            _descendants(me, seen)
            time.sleep(0.02)
        if proc.poll() is None:
            proc.kill()
        ended_s = time.monotonic() - closed
        code = proc.wait()
        children = list(seen.values())
        while _alive(children) and time.monotonic() - closed < limit_s:
            time.sleep(0.02)
        left = _alive(children)
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        err = proc.stderr.read().decode(errors="replace")
        shutil.rmtree(folder, ignore_errors=True)
        quiet = "Traceback" not in err and "deleted" not in err
        rows.append({
            "closed_at_s": round(at, 2), "ended_s": round(ended_s, 3), "status": code,
            "left": len(left), "quiet": quiet,
            "ok": code == 0 and ended_s <= limit_s and not left and quiet,
        })  # fmt: skip
    return {
        "megabytes": large.stat().st_size / 1e6, "closes": count,
        "failures": sum(not r["ok"] for r in rows),
        "slowest_end_s": max((r["ended_s"] for r in rows), default=None), "rows": rows,
    }  # fmt: skip


def mp4_during_compute(count: int) -> dict:
    """COUNT MP4 exports in a row during a CPU computation (see the module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="sig-mp4-"))
    command = [sys.executable, DRIVER, "mp4-during-compute", "--count", str(count), "--out",
               str(folder)]  # fmt: skip
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=folder, env=_settings(folder), capture_output=True, text=True,
            timeout=60 * count, start_new_session=True,
        )  # fmt: skip
        status, out = done.returncode, done.stdout
    except subprocess.TimeoutExpired as exc:
        status, out = None, (exc.stdout or b"").decode(errors="replace")
    lines = [line for line in out.splitlines() if line.startswith("export ")]
    written = sorted(p.name for p in folder.glob("tiles*.mp4") if p.stat().st_size > 0)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "exports": count, "written": len(written), "exit_status": status,
        "froze": status is None, "seconds": round(time.monotonic() - t0, 1), "lines": lines,
        "ok": status == 0 and len(written) == count,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50, help="per entry and signal")
    parser.add_argument("--entries", default=",".join(ENTRIES))
    parser.add_argument("--signals", default="INT,TERM,HUP")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit-s", type=float, default=2.0)
    parser.add_argument("--mp4-during-compute", type=int, default=0, metavar="COUNT")
    parser.add_argument("--close-during-open", type=int, default=0, metavar="COUNT")
    parser.add_argument("--open-mb", type=int, default=237)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    # The trials' processes start as from a terminal: with SIGINT and SIGHUP handled. Started
    # in the background (`&`, nohup), this process ignores both, and its children would too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    mp4 = mp4_during_compute(args.mp4_during_compute) if args.mp4_during_compute else None
    if mp4 is not None:
        print(json.dumps({k: v for k, v in mp4.items() if k != "lines"}), file=sys.stderr)
    closes = None
    if args.close_during_open:
        rng_close = random.Random(args.seed + 1)
        closes = close_during_open(args.close_during_open, args.open_mb, rng_close, args.limit_s)
        print(json.dumps({k: v for k, v in closes.items() if k != "rows"}), file=sys.stderr)
    rng = random.Random(args.seed)
    large = large_recording(Path(tempfile.gettempdir()) / "tilescope-signal-trials-60MB.json")
    entries = args.entries.split(",")
    signames = args.signals.split(",")
    t0 = time.monotonic()
    trials = []
    for i in range(args.trials):
        for entry in entries:
            for signame in signames:
                result = trial(entry, signame, rng, large, args.limit_s)
                trials.append(result)
                if not result["ok"]:
                    print(f"[{i}] {entry} {signame}: {result['why']}", file=sys.stderr)
    summary = {}
    for entry in entries:
        for signame in signames:
            mine = [t for t in trials if t["entry"] == entry and t["signal"] == signame]
            signalled = [t for t in mine if not t.get("ended_first", False)]
            summary[f"{entry} {signame}"] = {
                "trials": len(mine),
                "signalled": len(signalled),
                "failures": sum(not t["ok"] for t in mine),
                "before_handlers": sum(t.get("before_handlers", False) for t in mine),
                "slowest_end_s": max((t.get("ended_s", 0) for t in signalled), default=None),
                "slowest_children_gone_s": max(
                    (t.get("children_gone_s", 0) for t in signalled if t.get("children")),
                    default=None,
                ),
            }
    report = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "seconds": round(time.monotonic() - t0, 1),
        "load_average": os.getloadavg(),
        "summary": summary,
        "failures": [t for t in trials if not t["ok"]],
        "mp4_during_compute": mp4,
        "close_during_open": closes,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("command", "seconds", "summary")}, indent=1))
    failed = (mp4 is not None and not mp4["ok"]) or (closes is not None and closes["failures"] > 0)
    return 1 if report["failures"] or failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
