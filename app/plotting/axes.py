"""Axes for log-log plots: data sit in log10 coordinates, and these axes tick them at powers of
two (N) or at decades and print the real values; what a log axis can draw at all."""

from __future__ import annotations

import math
from collections.abc import Callable

import pyqtgraph as pg

from ..state.units import short_n

_LOG2 = math.log10(2.0)


#: What a log axis can draw: positive values from 1e-200 to 1e200 (pyqtgraph refuses a range
#: that is not finite, and 1e308 overflows the padding around it). A figure outside is left
#: out of the plot, never drawn as a range error.
DRAWABLE = (1e-200, 1e200)


def drawable(value: float | None) -> bool:
    """Whether a log axis can draw `value` (see DRAWABLE)."""
    return value is not None and DRAWABLE[0] <= value <= DRAWABLE[1]


class QuietAxis(pg.AxisItem):
    """An axis that lays its label out again only when the label's text changes: pyqtgraph
    sets it again (rich text, a layout of its own) on every range change, to follow an SI
    prefix, and a change of what is shown moves every plot's ranges several times."""

    _label_html: str | None = None

    def _updateLabel(self) -> None:
        html = self.labelString()
        if html != self._label_html:
            self._label_html = html
            self.label.setHtml(html)
            self._adjustSize()
        self.picture = None
        self.update()


class Log2NAxis(QuietAxis):
    """x axis of N in log10 coordinates, ticked at powers of two (128, 512, 2k, ... 128k)."""

    def tickValues(self, minVal, maxVal, size):
        lo, hi = sorted((minVal, maxVal))
        if hi - lo <= 0 or size <= 0:
            return []
        k0, k1 = math.ceil(lo / _LOG2 - 1e-9), math.floor(hi / _LOG2 + 1e-9)
        px_per_octave = size * _LOG2 / (hi - lo)
        step = 1
        while px_per_octave * step < 38:
            step += 1
        # Label the first power of two in view (128 on the default scale), then every step-th.
        major = [k * _LOG2 for k in range(k0, k1 + 1) if (k - k0) % step == 0]
        minor = [k * _LOG2 for k in range(k0, k1 + 1) if (k - k0) % step != 0]
        return [(step * _LOG2, major), (_LOG2, minor)]

    def tickStrings(self, values, scale, spacing):
        return [short_n(2 ** round(v / _LOG2)) for v in values]


class LogValueAxis(QuietAxis):
    """y (or x) axis in log10 coordinates, ticked at decades, printed with `formatter`."""

    def __init__(self, orientation: str, formatter: Callable[[float], str]) -> None:
        super().__init__(orientation)
        self.formatter = formatter

    def tickValues(self, minVal, maxVal, size):
        lo, hi = sorted((minVal, maxVal))
        if hi - lo <= 0 or size <= 0:
            return []
        d0, d1 = math.ceil(lo - 1e-9), math.floor(hi + 1e-9)
        px_per_decade = size / (hi - lo)
        step = 1
        while px_per_decade * step < 24:
            step += 1
        major = [float(d) for d in range(d0, d1 + 1) if d % step == 0]
        minor = [float(d) for d in range(d0, d1 + 1) if d % step != 0]
        if step == 1 and px_per_decade > 70:
            for d in range(math.floor(lo), math.ceil(hi) + 1):
                for m in (2, 5) if px_per_decade < 160 else (2, 3, 5):
                    v = d + math.log10(m)
                    if lo <= v <= hi:
                        (major if px_per_decade > 110 else minor).append(v)
        return [(float(step), sorted(major)), (1.0, sorted(minor))]

    def tickStrings(self, values, scale, spacing):
        return [self.formatter(10.0**v) for v in values]


def decades(lo: float, hi: float) -> list[float]:
    return [float(d) for d in range(math.ceil(lo), math.floor(hi) + 1)]


def octaves(lo: float, hi: float) -> list[float]:
    return [k * _LOG2 for k in range(math.ceil(lo / _LOG2), math.floor(hi / _LOG2) + 1)]
