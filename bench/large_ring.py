"""A recording whose ring run holds about 200,000 timeline events (2·P² for P = 316 devices):
opened in the window by bench/bench_gui.py --only ring.

    python bench/large_ring.py OUT.json [--devices 316]

It is the ring test recording (tests/data/ring_smoke_subset.json) with its widest ring run
stretched to P devices: each device computes one step and sends one block per step, the
steps 1 ms apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SOURCE = ROOT / "tests" / "data" / "ring_smoke_subset.json"


def large_ring_document(devices: int = 316) -> dict:
    doc = json.loads(SOURCE.read_text())
    rings = [r for r in doc["results"] if r.get("ring")]
    widest = max(rings, key=lambda r: (r["ring"]["devices"], len(r["ring"]["timeline"])))
    ring = dict(widest["ring"], devices=devices)
    ring["device_names"] = [ring["device_names"][0]] * devices
    ring["device_peak_bytes"] = [ring["device_peak_bytes"][0]] * devices
    events = []
    for d in range(devices):
        for step in range(devices):
            t = step * 1.0 + d * 1e-3
            events.append(dict(device=d, step=step, stream="comm", start_ms=t, end_ms=t + 0.2,
                               bytes=ring["step_bytes"]))  # fmt: skip
            events.append(dict(device=d, step=step, stream="compute", start_ms=t + 0.2,
                               end_ms=t + 0.9, bytes=0))  # fmt: skip
    ring["timeline"] = events
    result = dict(widest, ring=ring)
    doc["results"] = [r for r in doc["results"] if r is not widest] + [result]
    return doc


def write_large_ring(path: Path, devices: int = 316) -> Path:
    if not path.exists():
        path.write_text(json.dumps(large_ring_document(devices), separators=(",", ":")))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--devices", type=int, default=316)
    args = parser.parse_args()
    path = write_large_ring(Path(args.out), args.devices)
    print(f"{path}: {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
