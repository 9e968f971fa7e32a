"""Dark and light themes: a Qt style sheet from resources/ plus the matching plot colours.

Series colours are picked per theme (Okabe-Ito based, colour-blind safe) so every line keeps its
contrast on both backgrounds; the same algorithm keeps the same hue in every plot. An algorithm's
colours are its registry entry's (gpu/algorithms.py, `AlgorithmInfo.style`); naive's kernels'
are here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu.algorithms import ALGORITHMS

RESOURCES = Path(__file__).resolve().parents[2] / "resources"
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


def _algorithm_colors(theme: str) -> dict[str, str]:
    """Every registered algorithm's colour on `theme`."""
    return {a: info.style.color(theme) for a, info in ALGORITHMS.items()}


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
        **_algorithm_colors("dark"),
        "gemm_qk": "#e69f00",
        "softmax": "#f0e442",
        "gemm_pv": "#cc79a7",
        "bwd_dV_gemm": "#b07aa1",
        "bwd_dP_gemm": "#c49a7c",
        "softmax_bwd": "#edc948",
        "bwd_dQ_gemm": "#76b7b2",
        "bwd_dK_gemm": "#ff9da7",
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
        **_algorithm_colors("light"),
        "gemm_qk": "#e69f00",
        "softmax": "#a08a00",
        "gemm_pv": "#cc79a7",
        "bwd_dV_gemm": "#8c5a8a",
        "bwd_dP_gemm": "#7a5a45",
        "softmax_bwd": "#b8950c",
        "bwd_dQ_gemm": "#3f8f8a",
        "bwd_dK_gemm": "#d9577a",
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


# ---------------------------------------------------------------------------------------------
# The Tiles tab: the animation canvas, the trace views and the kernel source (their own colours,
# picked per theme like the plots'; app/animation/colors.py turns them into QColors).


@dataclass(frozen=True)
class AnimationPalette:
    """Colours of the tile animation, the real-trace views and the kernel source panel."""

    name: str
    background: str
    panel: str
    panel_edge: str
    hbm_panel: str
    empty_matrix: str
    text: str
    dim: str
    faint: str
    read: str
    #: Second and third shades of `read`: K's tile load beside Q's, V's copy beside K's.
    read_second: str
    read_third: str
    write: str
    compute: str
    softmax: str  # a warp role's softmax
    cursor: str  # the time cursor in the trace views
    label_on_fill: str  # text drawn on a filled bar
    input_matrix: str  # Q, K, V in HBM
    big_matrix: str  # S, P once materialised: the memory wall
    out_matrix: str  # O, m, l once written
    grid: str  # #rrggbbaa
    slot_fills: dict[str, str]  # matrix -> SRAM band colour
    slot_edges: dict[str, str]  # matrix -> outline of the HBM region a band came from
    slot_empty: str  # #rrggbbaa
    box: str  # the SRAM box's fill
    box_edge: str
    timebar: str
    timebar_lane: str
    progress: str
    done: str
    warn: str
    error: str
    waves: tuple[str, ...]
    source_highlight: str
    source_highlight_tag: str


ANIMATION_DARK = AnimationPalette(
    name="dark",
    background="#15181d",
    panel="#1d2128",
    panel_edge="#3a414c",
    hbm_panel="#191c22",
    empty_matrix="#20242b",
    text="#d8dde6",
    dim="#8a93a3",
    faint="#59616e",
    read="#43a6ff",
    read_second="#9cd0ff",
    read_third="#8fcaff",
    write="#ff9838",
    compute="#c18cff",
    softmax="#ffcf5a",
    cursor="#ffe066",
    label_on_fill="#15181d",
    input_matrix="#2f5e78",
    big_matrix="#b8405a",
    out_matrix="#3f8f5a",
    grid="#ffffff1a",
    slot_fills={
        "Q": "#3f7ea3",
        "K": "#4f8fb0",
        "V": "#5fa0bc",
        "S": "#c4576f",
        "P": "#c4576f",
        "O": "#4fa86c",
        "ml": "#8fc46a",
        "": "#7a7f8a",
    },
    slot_edges={
        "Q": "#5ebdf4",
        "K": "#7bd2ff",
        "V": "#9ce1ff",
        "S": "#ff98af",
        "P": "#ff98af",
        "O": "#76fca2",
        "ml": "#d1ffb1",
        "": "#b7bfcf",
    },
    slot_empty="#ffffff0e",
    box="#101317",
    box_edge="#aab3c2",
    timebar="#2a2f38",
    timebar_lane="#46546a",
    progress="#5b8def",
    done="#7fd18f",
    warn="#e0b84a",
    error="#ff6b6b",
    waves=("#4f8fd0", "#a77be0", "#4fb07a", "#d6a24a", "#d0607d", "#5fc0c0"),
    source_highlight="#3b4a2a",
    source_highlight_tag="#55692f",
)

ANIMATION_LIGHT = AnimationPalette(
    name="light",
    background="#f6f7f9",
    panel="#ffffff",
    panel_edge="#c3c9d3",
    hbm_panel="#f0f2f5",
    empty_matrix="#e6e9ee",
    text="#22252b",
    dim="#555c69",
    faint="#8d95a3",
    read="#1f6fc4",
    read_second="#1a5ca3",
    read_third="#19599d",
    write="#c8650f",
    compute="#7a3fc8",
    softmax="#e0a23a",
    cursor="#b08800",
    label_on_fill="#ffffff",
    input_matrix="#8cbad3",
    big_matrix="#d77b8f",
    out_matrix="#7cc493",
    grid="#0000001f",
    slot_fills={
        "Q": "#6ea6c9",
        "K": "#7fb3d1",
        "V": "#93c1db",
        "S": "#dd8a9c",
        "P": "#dd8a9c",
        "O": "#79c08f",
        "ml": "#a9d27f",
        "": "#a3a8b2",
    },
    slot_edges={
        "Q": "#55809b",
        "K": "#628aa1",
        "V": "#7194a8",
        "S": "#aa6a78",
        "P": "#aa6a78",
        "O": "#5d946e",
        "ml": "#82a262",
        "": "#7d8189",
    },
    slot_empty="#0000000f",
    box="#fbfcfd",
    box_edge="#5c6473",
    timebar="#dfe3ea",
    timebar_lane="#b4bfce",
    progress="#3f73d6",
    done="#2f9a4e",
    warn="#a87a00",
    error="#c62828",
    waves=("#3f7fc4", "#8e5fd0", "#3a9a63", "#c18a22", "#c24d6c", "#3aa5a5"),
    source_highlight="#e3efd2",
    source_highlight_tag="#c9e0a8",
)

ANIMATION_PALETTES = {"dark": ANIMATION_DARK, "light": ANIMATION_LIGHT}


def animation_palette(theme: str) -> AnimationPalette:
    return ANIMATION_PALETTES.get(theme, ANIMATION_DARK)
