"""Plot axes of whole numbers: key counts and frames are never fractional.

pyqtgraph spaces ticks by powers of ten and halves of them, so a view of a few frames or key
counts (a 2-frame clip: 0 to 1) read 0.1, 0.2, ... or 1.5, 2.5: frames that do not exist.
The error graph's axes also draw their grid opaque (:class:`OpaqueGridAxis`): it is painted on
the UI thread while an analysis runs.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6 import QtCore, QtGui


class WholeNumberAxis(pg.AxisItem):
    """An axis whose ticks fall on whole numbers only (at least one apart)."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802
        """pyqtgraph's levels of ticks without those under one apart (or off whole numbers);
        a view narrower than pyqtgraph's finest whole level gets the whole numbers in it."""
        levels = [(spacing, [v for v in values if float(v).is_integer()])
                  for spacing, values in super().tickValues(minVal, maxVal, size)
                  if spacing >= 1]
        if not levels:
            low, high = sorted((minVal, maxVal))
            levels = [(1.0, [float(v) for v in range(math.ceil(low), math.floor(high) + 1)])]
        return levels


class OpaqueGridAxis(pg.AxisItem):
    """An axis whose grid lines are drawn opaque, in the colour their translucent pen gives
    over ``background``.

    Qt's raster engine draws a translucent 1-pixel line several times slower than an opaque
    one (62 lines of a log cost axis' grid: 3.3 ms against 0.6 ms on the CI machine kind), and
    the graph is drawn on the UI thread while an analysis runs. Over the plain background the
    colour is the same (where two lines cross, the translucent ones were brighter). Opaque
    lines hide what is under them: a plot using this axis must set its z value below its
    view's (pyqtgraph puts axes above it; :class:`~sp_core.ui.graph.ErrorGraph` does), so
    the curves are drawn over the grid.

    Parameters
    ----------
    orientation : str
        "left", "bottom", ... as for :class:`pyqtgraph.AxisItem`.
    background : str
        The plot's background colour (a Qt colour name such as "#26282b").
    """

    def __init__(self, orientation: str, background: str, **kwargs: object) -> None:
        super().__init__(orientation, **kwargs)
        self._background = QtGui.QColor(background)

    def generateDrawSpecs(self, p: QtGui.QPainter):  # noqa: ANN201, N802 - pyqtgraph's name
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return None
        axis, ticks, texts = specs
        # pyqtgraph draws a line once for each level of ticks it is on (on a log axis a
        # decade is also a minor tick): over each other their translucent colours add up,
        # opaque the last would hide the others, so coincident lines are composed into one
        lines: dict[tuple[float, float, float, float], list] = {}
        for pen, p1, p2 in ticks:
            line = lines.setdefault((p1.x(), p1.y(), p2.x(), p2.y()), [p1, p2, []])
            line[2].append(pen)
        # (a level's ticks share one pen: each set of pens is composed once)
        composed: dict[tuple[int, ...], QtGui.QPen] = {}
        drawn = []
        for p1, p2, pens in lines.values():
            same = tuple(map(id, pens))
            if same not in composed:
                composed[same] = self._opaque_pen(pens)
            drawn.append((composed[same], p1, p2))
        return axis, drawn, texts

    def _opaque_pen(self, pens: list[QtGui.QPen]) -> QtGui.QPen:
        """One pen (shaped as the first) drawing what ``pens``, drawn in turn, draw over the
        background."""
        if any(pen.brush().style() != QtCore.Qt.BrushStyle.SolidPattern for pen in pens):
            return pens[-1]  # (a gradient or pattern: drawn as pyqtgraph drew it last)
        rgb = _rgb(self._background)
        for pen in pens:
            a = pen.color().alphaF()
            rgb = tuple(a * c + (1 - a) * b
                        for c, b in zip(_rgb(pen.color()), rgb, strict=True))
        opaque = QtGui.QPen(pens[0])
        opaque.setColor(QtGui.QColor.fromRgbF(*rgb))
        return opaque


def _rgb(color: QtGui.QColor) -> tuple[float, ...]:
    """Red, green and blue of ``color`` (0 to 1)."""
    return color.redF(), color.greenF(), color.blueF()


class WholeNumberGridAxis(WholeNumberAxis, OpaqueGridAxis):
    """Whole-number ticks (:class:`WholeNumberAxis`) and an opaque grid
    (:class:`OpaqueGridAxis`)."""
