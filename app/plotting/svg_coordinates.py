"""SVG that every renderer draws alike: strokes written in output coordinates.

Qt's SVG generator writes each pyqtgraph curve inside a group whose transform maps data to
pixels (a scale of about 200× on log axes) and keeps its pens one pixel wide with
`vector-effect="non-scaling-stroke"`. Browsers and Qt honour that attribute; librsvg
(rsvg-convert, GNOME, ImageMagick) and cairosvg do not, and stroke every curve 200 px wide:
huge filled bands and black markers. `output_space` rewrites such shapes with the group's
transform applied to their coordinates, so the pixel widths hold in any renderer.

Plain Python (xml.etree), no Qt: it works on the bytes the generator wrote.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
NON_SCALING = "non-scaling-stroke"

Matrix = tuple[float, float, float, float, float, float]  # a b c d e f, as SVG's matrix()
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)

_MATRIX = re.compile(r"matrix\(([^)]*)\)")
_TOKEN = re.compile(r"[MmLlHhVvCcSsQqTtZzAa]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: Cubic Bézier handle length of a quarter circle of radius 1.
_KAPPA = 4 * (math.sqrt(2) - 1) / 3


class _Unsupported(ValueError):
    """A shape this module leaves as it is (an elliptic arc, a path it cannot read)."""


def parse_matrix(text: str | None) -> Matrix | None:
    """The transform of a group as a matrix; None for anything but one `matrix(...)`."""
    if not text:
        return None
    m = _MATRIX.fullmatch(text.strip())
    if m is None:
        return None
    values = [float(v) for v in re.split(r"[\s,]+", m.group(1).strip()) if v]
    return tuple(values) if len(values) == 6 else None  # type: ignore[return-value]


def _apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


def _num(v: float) -> str:
    return f"{v:.6g}"


def _pairs(points: list[tuple[float, float]]) -> str:
    return " ".join(f"{_num(x)},{_num(y)}" for x, y in points)


def transform_path(d: str, m: Matrix) -> str:
    """Path data `d` with `m` applied to every point: absolute commands out (M, L, C, Q, Z)."""
    tokens = _TOKEN.findall(d)
    out: list[str] = []
    i, cmd = 0, ""
    cx = cy = sx = sy = 0.0

    def take(n: int) -> list[float]:
        nonlocal i
        if i + n > len(tokens):
            raise _Unsupported("truncated path data")
        vals = [float(t) for t in tokens[i : i + n]]
        i += n
        return vals

    while i < len(tokens):
        if tokens[i].isalpha():
            cmd = tokens[i]
            i += 1
            if cmd in "Zz":
                out.append("Z")
                cx, cy = sx, sy
                continue
        elif not cmd or cmd in "Zz":
            raise _Unsupported("path data without a command")
        rel = cmd.islower()
        up = cmd.upper()
        ox, oy = (cx, cy) if rel else (0.0, 0.0)
        if up in "ML":
            x, y = take(2)
            cx, cy = ox + x, oy + y
            out.append(f"{up} {_pairs([_apply(m, cx, cy)])}")
            if up == "M":
                sx, sy = cx, cy
                cmd = "l" if rel else "L"  # further pairs are line-tos
        elif up == "H":
            (x,) = take(1)
            cx = ox + x
            out.append(f"L {_pairs([_apply(m, cx, cy)])}")
        elif up == "V":
            (y,) = take(1)
            cy = (cy if rel else 0.0) + y
            out.append(f"L {_pairs([_apply(m, cx, cy)])}")
        elif up in "CQ":
            n = 3 if up == "C" else 2
            vals = take(2 * n)
            pts = [(ox + vals[2 * k], oy + vals[2 * k + 1]) for k in range(n)]
            cx, cy = pts[-1]
            out.append(f"{up} {_pairs([_apply(m, x, y) for x, y in pts])}")
        else:  # S, T and A need the previous control point or an arc: not written by Qt
            raise _Unsupported(f"path command {cmd!r}")
    return " ".join(out)


def _circle_path(cx: float, cy: float, rx: float, ry: float) -> str:
    """An ellipse as four cubic Béziers (exact under any affine transform)."""
    k_x, k_y = rx * _KAPPA, ry * _KAPPA
    return (
        f"M {_num(cx + rx)},{_num(cy)} "
        f"C {_num(cx + rx)},{_num(cy + k_y)} {_num(cx + k_x)},{_num(cy + ry)} "
        f"{_num(cx)},{_num(cy + ry)} "
        f"C {_num(cx - k_x)},{_num(cy + ry)} {_num(cx - rx)},{_num(cy + k_y)} "
        f"{_num(cx - rx)},{_num(cy)} "
        f"C {_num(cx - rx)},{_num(cy - k_y)} {_num(cx - k_x)},{_num(cy - ry)} "
        f"{_num(cx)},{_num(cy - ry)} "
        f"C {_num(cx + k_x)},{_num(cy - ry)} {_num(cx + rx)},{_num(cy - k_y)} "
        f"{_num(cx + rx)},{_num(cy)} Z"
    )


def _attr(el: ET.Element, name: str, default: float = 0.0) -> float:
    value = el.get(name)
    return float(value) if value not in (None, "") else default


def transform_shape(el: ET.Element, m: Matrix) -> None:
    """`el` (path, polyline, polygon, line, rect, circle, ellipse) rewritten with `m` applied
    to its coordinates (a rect, circle or ellipse becomes a path); raises _Unsupported."""
    tag = el.tag.rsplit("}", 1)[-1]
    if tag == "path":
        el.set("d", transform_path(el.get("d", ""), m))
    elif tag in ("polyline", "polygon"):
        values = [float(v) for v in re.split(r"[\s,]+", el.get("points", "").strip()) if v]
        pts = [_apply(m, values[k], values[k + 1]) for k in range(0, len(values) - 1, 2)]
        el.set("points", _pairs(pts) + " ")
    elif tag == "line":
        x1, y1 = _apply(m, _attr(el, "x1"), _attr(el, "y1"))
        x2, y2 = _apply(m, _attr(el, "x2"), _attr(el, "y2"))
        for name, value in (("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)):
            el.set(name, _num(value))
    elif tag == "rect":
        x, y, w, h = (_attr(el, n) for n in ("x", "y", "width", "height"))
        corners = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
        d = "M " + " L ".join(_pairs([_apply(m, *p)]) for p in corners) + " Z"
        _become_path(el, d)
    elif tag in ("circle", "ellipse"):
        cx, cy = _attr(el, "cx"), _attr(el, "cy")
        rx = _attr(el, "r") if tag == "circle" else _attr(el, "rx")
        ry = _attr(el, "r") if tag == "circle" else _attr(el, "ry")
        _become_path(el, transform_path(_circle_path(cx, cy, rx, ry), m))
    else:
        raise _Unsupported(f"<{tag}>")
    del el.attrib["vector-effect"]


def _become_path(el: ET.Element, d: str) -> None:
    keep = {k: v for k, v in el.attrib.items() if k not in _GEOMETRY}
    el.clear()
    el.tag = f"{{{SVG_NS}}}path" if el.tag.startswith("{") else "path"
    el.attrib.update(keep)
    el.set("d", d)


_GEOMETRY = {"x", "y", "width", "height", "rx", "ry", "cx", "cy", "r", "points", "d"}


def _groups(root: ET.Element) -> Iterator[tuple[ET.Element, ET.Element]]:
    """(parent, group) for every <g>, parents first (a snapshot: safe to insert meanwhile)."""
    found = []
    for parent in root.iter():
        for child in list(parent):
            if child.tag.rsplit("}", 1)[-1] == "g":
                found.append((parent, child))
    return iter(found)


def output_space(svg: bytes) -> bytes:
    """`svg` with every non-scaling stroke inside a transformed group written in output
    coordinates (see the module docstring). Shapes it cannot rewrite are left as they are."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(svg)
    for parent, group in _groups(root):
        m = parse_matrix(group.get("transform"))
        if m is None or m == IDENTITY:
            continue
        moved = []
        for child in list(group):
            if child.get("vector-effect") != NON_SCALING:
                continue
            try:
                transform_shape(child, m)
            except (_Unsupported, ValueError, IndexError):
                continue
            moved.append(child)
        if not moved:
            continue
        if len(moved) == len(group):
            group.set("transform", "matrix(1,0,0,1,0,0)")
            continue
        # Text or other shapes stay in the transformed group; the rewritten ones move to a
        # sibling right after it, with the same style and no transform.
        twin = ET.Element(group.tag, {**group.attrib, "transform": "matrix(1,0,0,1,0,0)"})
        for child in moved:
            group.remove(child)
            twin.append(child)
        parent.insert(list(parent).index(group) + 1, twin)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
