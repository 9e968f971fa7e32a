"""Dark and light themes: a Qt style sheet from resources/ plus the matching plot colours.

Series colours are picked per theme (Okabe-Ito based, colour-blind safe) so every line keeps its
contrast on both backgrounds; the same algorithm keeps the same hue in every plot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu.algorithms import NAIVE, TILED, TILED_MMA, TILED_WGMMA

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
THEMES = ("dark", "light")


@dataclass(frozen=True)
class Palette:
    name: str
    background: str
    foreground: str
    grid_alpha: float
    muted: str
    cursor: str
    budget: str
    oom: str
    roof: str
    series: dict[str, str]  # algorithm id or kernel name -> colour
    error_bg: str
    error_fg: str

    def color(self, key: str) -> str:
        return self.series.get(key, self.foreground)


DARK = Palette(
    name="dark",
    background="#1b1d23",
    foreground="#d8dae0",
    grid_alpha=0.18,
    muted="#8a8f9c",
    cursor="#c8ccd6",
    budget="#ff6b6b",
    oom="#ff4d4d",
    roof="#c8ccd6",
    series={
        NAIVE: "#ff8a5b",
        TILED: "#56b4e9",
        TILED_MMA: "#6fd08c",
        TILED_WGMMA: "#c9a0dc",
        "gemm_qk": "#e69f00",
        "softmax": "#f0e442",
        "gemm_pv": "#cc79a7",
    },
    error_bg="#5a1f24",
    error_fg="#ffd9d9",
)

LIGHT = Palette(
    name="light",
    background="#ffffff",
    foreground="#22252b",
    grid_alpha=0.22,
    muted="#6b7080",
    cursor="#4a4f5c",
    budget="#c62828",
    oom="#c00000",
    roof="#3a3f4a",
    series={
        NAIVE: "#d55e00",
        TILED: "#0072b2",
        TILED_MMA: "#009e73",
        TILED_WGMMA: "#8e44ad",
        "gemm_qk": "#e69f00",
        "softmax": "#a08a00",
        "gemm_pv": "#cc79a7",
    },
    error_bg="#fde2e2",
    error_fg="#7a1010",
)

PALETTES = {"dark": DARK, "light": LIGHT}


def palette(theme: str) -> Palette:
    return PALETTES.get(theme, DARK)


#: Base widget colours per theme (window, base, text, button, highlight, muted text).
QT_COLORS = {
    "dark": ("#1f2128", "#272a33", "#d8dae0", "#2c3040", "#3d6fb6", "#8a8f9c"),
    "light": ("#f4f5f8", "#ffffff", "#22252b", "#e9ecf2", "#8bb8ec", "#6b7080"),
}


def qt_palette(theme: str):  # type: ignore[no-untyped-def]
    """A QPalette for the theme: colours every widget cheaply, without a style sheet (style
    sheets on the plot widgets slowed every repaint down)."""
    from PySide6.QtGui import QColor, QPalette

    window, base, text, button, highlight, muted = QT_COLORS[palette(theme).name]
    pal = QPalette()
    role = QPalette.ColorRole
    for r, c in (
        (role.Window, window),
        (role.WindowText, text),
        (role.Base, base),
        (role.AlternateBase, window),
        (role.Text, text),
        (role.Button, button),
        (role.ButtonText, text),
        (role.Highlight, highlight),
        (role.HighlightedText, "#ffffff" if theme == "dark" else "#111318"),
        (role.ToolTipBase, base),
        (role.ToolTipText, text),
        (role.PlaceholderText, muted),
        (role.BrightText, "#ffffff"),
        (role.Link, highlight),
    ):
        pal.setColor(r, QColor(c))
    for r in (role.WindowText, role.Text, role.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, r, QColor(muted))
    return pal


def style_sheet(theme: str) -> str:
    """The theme's QSS; an empty string (Qt's defaults) if the file is missing."""
    path = RESOURCES / f"{palette(theme).name}.qss"
    try:
        return path.read_text()
    except OSError:
        return ""


def icon_path() -> Path:
    return RESOURCES / "tilescope.svg"
