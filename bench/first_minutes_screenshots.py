"""Real-display screenshots of the first start on a machine without a GPU: a fresh Xvfb screen
of each size with the openbox window manager, the app on Qt's xcb platform with empty settings
(it opens the recorded H200 run), the screen as the X server shows it once the first screen has
settled (tests/test_display_first_minutes.py runs the same start and checks it).

    python bench/first_minutes_screenshots.py --out docs/screenshots [--force]

Writes first_start_<W>x<H>.png (256-colour palette PNGs, about a third of the bytes) and prints
the window's frame and anything cut (nothing is expected).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = ((1280, 800), (1920, 1080))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for first_start_<W>x<H>.png")
    ap.add_argument("--force", action="store_true", help="replace existing files")
    args = ap.parse_args(argv)

    from PIL import Image

    from gpu.files.fileio import atomic_write_bytes
    from tests.test_display_first_minutes import first_minutes

    args.out.mkdir(parents=True, exist_ok=True)
    bad = 0
    for w, h in SIZES:
        target = args.out / f"first_start_{w}x{h}.png"
        if target.exists() and not args.force:
            print(f"{target} exists (use --force to replace it)", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as folder:
            raw = Path(folder) / "screen.png"
            report, title = first_minutes(Path(folder), w, h, shot=raw)
            image = Image.open(raw).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
            png = Path(folder) / "palette.png"
            image.save(png, optimize=True)
            atomic_write_bytes(target, png.read_bytes(), overwrite=True)
        print(f"wrote {target}: {title!r}, frame {report['frame']} on {report['screen']}")
        for line in report["cut"]:
            print(f"  cut: {line}")
        bad += bool(report["cut"]) or not report["inside"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
