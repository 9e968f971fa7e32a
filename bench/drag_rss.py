"""Idle RSS after slider-drag storms: does what a drag leaves behind plateau or keep growing?

    QT_QPA_PLATFORM=offscreen python bench/drag_rss.py [--storms 60] [--tab 0|1] [--out rss.json]

The real main window offscreen (bench_gui's window, cost-model backend). A storm drags the
slider over every N of its scale up to 131072 and back, one move per 16 ms frame; then the
window is left to go idle (the runner idle, 0.3 s of rest) and the process's RSS is sampled.
Prints the RSS after every storm, and the growth over the first and over the second half.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storms", type=int, default=60)
    parser.add_argument("--tab", type=int, default=0, help="0: Measurements, 1: Tiles")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    import bench_gui as bg

    bg._quiet_qt()
    app = bg.make_app()
    samples: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        window = bg.make_window(app, folder, bg.backend_factory("model", 1.0))
        bg.show_tab(app, window, args.tab)
        bg.wait_idle(app, window)
        scale = bg.scale_up_to(window, 131072)
        for storm in range(args.storms):
            for n in scale + scale[::-1]:
                window.controls.set_seq_len(n)
                bg.spin(app, bg.FRAME_S)
            bg.wait_idle(app, window)
            bg.spin(app, 0.3)
            samples.append(rss_mib())
            print(f"storm {storm + 1}: {samples[-1]:.1f} MiB", flush=True)
        window.close()
        bg.spin(app, 0.2)
    half = len(samples) // 2
    first = samples[half - 1] - samples[0] if half > 1 else 0.0
    second = samples[-1] - samples[half - 1] if half > 0 else 0.0
    print(f"growth: first half {first:+.2f} MiB, second half {second:+.2f} MiB")
    if args.out:
        Path(args.out).write_text(json.dumps({"tab": args.tab, "rss_mib": samples}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
