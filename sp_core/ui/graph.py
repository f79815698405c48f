"""The graph to choose K from: the selection cost of the best K keys, for every K.

Nothing is drawn before there is an analysis. The x axis opens on the useful range (where the
cost is still falling); the mouse wheel zooms K, "All K" shows every K and "Reset" returns to
the useful range. The suggested K is a labelled star; the other suggestions ("cliffs") are
dots. The readout under the plot wraps instead of clipping.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from sp_core.selection import SelectionSpace
from sp_core.ui.axes import OpaqueGridAxis, WholeNumberGridAxis

#: Maya's colours: red for keys (and the current K), green for breakdowns.
KEY_RED = "#e0443e"
BREAKDOWN_GREEN = "#6ac46a"
CURVE_BLUE = "#6fa8dc"
SUGGESTED = "#f6b26b"
BACKGROUND = "#26282b"

#: The useful range ends where the cost has fallen to this fraction of its value at K = 2 ...
USEFUL_DROP = 0.02
#: ... but shows at least this many times the suggested K.
USEFUL_OVER_SUGGESTED = 3


def useful_range(space: SelectionSpace, suggested: int, cliffs: list[int]) -> tuple[int, int]:
    """K from the fewest keys to where the cost has mostly fallen (and past the suggestions)."""
    keys, errors = space.key_counts, space.normalised_errors()  # distances, for any cost
    finite = np.isfinite(errors)
    high = space.max_keys
    if finite.any():
        start = errors[finite][0]
        low_enough = np.flatnonzero(finite & (errors <= USEFUL_DROP * start))
        if len(low_enough):
            high = int(keys[low_enough[0]])
    wanted = max([high, USEFUL_OVER_SUGGESTED * suggested, space.min_keys + 10]
                 + [int(1.3 * c) for c in cliffs])
    return space.min_keys, int(min(wanted, space.max_keys))


#: Said in the plot when no K has a cost to draw (a still clip, or two frames).
NOTHING_TO_DRAW = ("every K has cost 0: the poses lie on the lines between any two keys "
                   "(nothing moves, or too few frames)")


class _PlotWidget(pg.PlotWidget):
    """A plot widget that says when it has painted (:attr:`painted`)."""

    painted = QtCore.Signal()

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt's name
        super().paintEvent(event)
        self.painted.emit()


class ErrorGraph(QtWidgets.QWidget):
    """cost(K) for every K, the current K as a draggable line, suggestions as clickable marks.

    Signals
    -------
    k_requested(int)
        The user dragged the marker or clicked a suggestion.
    """

    k_requested = QtCore.Signal(int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        self.space: SelectionSpace | None = None
        self.suggested_k: int | None = None
        self.cliffs: list[int] = []
        self.cost_label = "selection cost"
        self.unit = "pose units"
        self._k: int | None = None
        self.plot_widget = _PlotWidget(background=BACKGROUND, axisItems={
            "bottom": WholeNumberGridAxis("bottom", background=BACKGROUND),
            "left": OpaqueGridAxis("left", background=BACKGROUND)})
        self._after_paint: list[Callable[[], None]] = []
        self.plot_widget.painted.connect(self._painted)
        self.plot_widget.setMinimumSize(120, 180)  # the axis label fits (a tab page scrolls)
        # (its gestures were found only in the docs)
        self.plot_widget.setToolTip(
            "the selection's cost of the best keys for every K (the cost the keys are chosen "
            "by, not the mm error): drag the red line to choose K, click the star (suggested "
            "K) or a grey cliff to jump there, the mouse wheel zooms")
        self.plot = self.plot_widget.getPlotItem()
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        for side in ("bottom", "left"):  # their opaque grid beneath the curve, not over it
            self.plot.getAxis(side).setZValue(self.plot.vb.zValue() - 1)
        self.plot.setLabel("bottom", "keyframes K")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.vb.setMouseEnabled(x=True, y=False)  # the wheel zooms K only
        # the cost axis fits the K in view (all K's costs span ten orders of magnitude)
        self.plot.vb.setAutoVisible(y=True)
        self.curve = self.plot.plot([], [], pen=pg.mkPen(CURVE_BLUE, width=2))
        # layered mode: the breakdown space of the current keyposes (x = all keys)
        self.second_curve = self.plot.plot([], [], pen=pg.mkPen(
            BREAKDOWN_GREEN, width=2, style=QtCore.Qt.PenStyle.DashLine))
        self.second: SelectionSpace | None = None
        self.suggested = pg.ScatterPlotItem(size=9, brush=pg.mkBrush("#bbbbbb"),
                                            pen=pg.mkPen(BACKGROUND), hoverable=True,
                                            hoverSize=13, tip=None)
        self.suggested.sigClicked.connect(self._suggestion_clicked)
        self.plot.addItem(self.suggested)
        self.star = pg.ScatterPlotItem(size=20, symbol="star", brush=pg.mkBrush(SUGGESTED),
                                       pen=pg.mkPen(BACKGROUND), hoverable=True, tip=None)
        self.star.sigClicked.connect(self._suggestion_clicked)
        # (a review read the star as the K to use while the tolerance had chosen another)
        self.star.setToolTip("suggested K: the threshold rule's K, where the cost stops "
                             "dropping steeply (accuracy and significance in Setup); it does "
                             "not check an error in mm, 'smallest K within' does; click to "
                             "use it")
        self.plot.addItem(self.star)
        self.star_label = pg.TextItem("", color=SUGGESTED, anchor=(0, 1.2))
        self.plot.addItem(self.star_label)
        # the label reads leftwards of a star in the right half of the view (rightwards it
        # was cut off at the edge)
        self.plot.vb.sigXRangeChanged.connect(self._anchor_star_label)
        self.marker = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen(KEY_RED, width=2),
                                      hoverPen=pg.mkPen("#ff9999", width=3))
        self.marker.sigDragged.connect(self._marker_dragged)
        self.plot.addItem(self.marker)
        # said in the plot when no K has a cost to draw (a still clip or 2 frames: every K
        # has cost 0, which a log axis cannot show)
        self.nothing = pg.TextItem("", color="#bbbbbb", anchor=(0.5, 0.5))
        self.nothing.setParentItem(self.plot.vb)
        self.plot.vb.sigResized.connect(self._place_nothing)
        self.placeholder = QtWidgets.QLabel(
            "Press Analyze: this graph then shows, for every number of keys K, how well the "
            "best K keys describe the motion. Drag the red line to choose K.")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setObjectName("graphPlaceholder")
        self.stack = QtWidgets.QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.plot_widget)
        self.readout = QtWidgets.QLabel(" ")
        self.readout.setObjectName("graphReadout")
        self.readout.setWordWrap(True)  # long readouts wrap: nothing is cut off in a narrow dock
        self.readout.setMinimumHeight(2 * self.readout.fontMetrics().lineSpacing() + 2)
        self.log_box = QtWidgets.QCheckBox("log cost")
        self.log_box.setToolTip("logarithmic cost axis (cliffs are easier to see)")
        self.log_box.setChecked(True)
        self.log_box.toggled.connect(self._redraw)
        self.reset_button = QtWidgets.QToolButton()
        self.reset_button.setText("Reset")
        self.reset_button.setToolTip("zoom back to the useful range of K (mouse wheel: zoom)")
        self.reset_button.clicked.connect(self.reset_view)
        self.all_button = QtWidgets.QToolButton()
        self.all_button.setText("All K")
        self.all_button.setToolTip("show every K of the analysis")
        self.all_button.clicked.connect(self.show_all)
        tools = QtWidgets.QHBoxLayout()
        tools.addWidget(self.log_box)
        tools.addStretch(1)
        tools.addWidget(self.reset_button)
        tools.addWidget(self.all_button)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.readout)
        layout.addLayout(tools)
        self.plot_widget.scene().sigMouseMoved.connect(self._hover)
        self._redraw()

    # ------------------------------------------------------------------ data
    def after_paint(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the plot has painted what it shows now (at once where it is
        not shown: nothing will paint)."""
        if not self.plot_widget.isVisible():
            callback()
            return
        self._after_paint.append(callback)
        # the view ranged to its new data now: ranged in the paint, it asked for another
        self.plot_widget.scene().prepareForPaint()
        self.plot_widget.viewport().update()  # (a paint comes even if nothing changed)

    def _painted(self) -> None:
        waiting, self._after_paint = self._after_paint, []
        for callback in waiting:
            callback()

    def set_space(self, space: SelectionSpace | None, suggested: int | None = None,
                  cliffs: list[int] | None = None, cost_label: str = "selection cost",
                  unit: str = "pose units") -> None:
        """Show ``space`` (None: nothing) with its suggested K and cliffs.

        ``cost_label`` names what the DP minimised (e.g. "line-max cost"); ``unit`` its unit.
        What is shown already is left as it is, and so is its view (the space drawn while
        the tolerance's search ran, shown again when the analysis ends: the redraw and its
        paint were a third of the UI thread's work then).
        """
        if space is not None and space is self.space and (
                suggested, list(cliffs or []), cost_label, unit) == (
                self.suggested_k, self.cliffs, self.cost_label, self.unit):
            return
        self.space = space
        self.suggested_k = suggested
        self.cliffs = list(cliffs or [])
        self.cost_label, self.unit = cost_label, unit
        self._redraw()
        if space is not None:
            self.reset_view()

    def set_second(self, space: SelectionSpace | None) -> None:
        """Also draw ``space`` (the breakdown space), dashed; None removes it."""
        self.second = space
        if space is None:
            self.second_curve.setData([], [])
            return
        self.second_curve.setData(*self._values(space))

    def set_k(self, k: int, reveal: bool = True) -> None:
        """Move the marker (no signal); with ``reveal`` the view widens to show it (a K typed
        past the useful range)."""
        self._k = k
        self.marker.blockSignals(True)
        self.marker.setValue(k)
        self.marker.blockSignals(False)
        self._show_readout(k)
        low, high = self.plot.vb.viewRange()[0]
        if reveal and self.space is not None and not low <= k <= high:
            self.plot.setXRange(min(low, k), max(high, k), padding=0.03)

    def useful_range(self) -> tuple[int, int]:
        assert self.space is not None
        return useful_range(self.space, self.suggested_k or self.space.min_keys, self.cliffs)

    def reset_view(self) -> None:
        """The useful range of K (and the current K, wherever it is)."""
        if self.space is not None:
            low, high = self.useful_range()
            if self._k is not None and self.space.min_keys <= self._k <= self.space.max_keys:
                low, high = min(low, self._k), max(high, self._k)
            self.plot.setXRange(low, high, padding=0.03)

    def show_all(self) -> None:
        if self.space is not None:
            self.plot.setXRange(self.space.min_keys, self.space.max_keys, padding=0.02)

    def _values(self, space: SelectionSpace) -> tuple[np.ndarray, np.ndarray]:
        """Key counts and costs that can be drawn (finite; positive on the log axis)."""
        keys, errors = space.key_counts, space.errors
        ok = np.isfinite(errors)
        if self.log_box.isChecked():
            ok &= errors > 0
        return keys[ok], errors[ok]

    def _y(self, k: int) -> float | None:
        """Where K's cost is drawn (log10 on the log axis); None if it cannot be."""
        assert self.space is not None
        y = self.space.error(k)
        if not np.isfinite(y) or (self.log_box.isChecked() and y <= 0):
            return None
        return float(np.log10(y)) if self.log_box.isChecked() else float(y)

    def _anchor_star_label(self, *_args: object) -> None:
        low, high = self.plot.vb.viewRange()[0]
        k = self.suggested_k
        self.star_label.setAnchor((1, 1.2) if k is not None and k > (low + high) / 2
                                  else (0, 1.2))

    def _place_nothing(self, *_args: object) -> None:
        box = self.plot.vb.boundingRect()
        self.nothing.setPos(box.center())
        self.nothing.setTextWidth(max(80.0, 0.9 * box.width()))

    def _redraw(self) -> None:
        self.stack.setCurrentIndex(0 if self.space is None else 1)
        self.reset_button.setEnabled(self.space is not None)
        self.all_button.setEnabled(self.space is not None)
        if self.space is None:
            self.curve.setData([], [])
            self.suggested.setData([], [])
            self.star.setData([], [])
            self.star_label.setText("")
            self.readout.setText("No analysis yet.")
            return
        log = self.log_box.isChecked()
        shown = self.plot.vb.viewRange()[0] if self.curve.xData is not None and len(
            self.curve.xData) else None
        if log and not self.plot.getAxis("left").logMode:
            # the cost axis' linear range (up to millions) would be read as powers of ten
            # until the view ranges again (numpy's overflow warning on every switch)
            low, high = self.plot.vb.viewRange()[1]
            self.plot.vb.setYRange(np.log10(max(low, 1e-12)), np.log10(max(high, 1e-12)),
                                   padding=0.0)
        self.plot.setLogMode(x=False, y=log)
        # short enough for the height of a graph in a short dock: the readout under the graph
        # names the cost, and the powers of ten on the axis say it is logarithmic
        self.plot.setLabel("left", f"cost ({self.unit})")
        keys, errors = self._values(self.space)
        self.set_second(self.second)  # the breakdown space follows the axis too
        self.curve.setData(keys, errors)
        costs = self.space.errors[np.isfinite(self.space.errors)]
        zero = len(keys) == 0 and bool((costs == 0).all())
        self.nothing.setText(NOTHING_TO_DRAW if zero else "")
        self.plot.getAxis("left").setStyle(showValues=not zero)  # (no cost to read off)
        if zero:
            self.plot.vb.setYRange(0, 1)  # (turns the cost axis' auto range off ...)
            self._place_nothing()
        else:
            self.plot.vb.enableAutoRange(y=True)  # (... which the next space's needs)
        marks = [k for k in self.cliffs if k != self.suggested_k and self._y(k) is not None]
        self.suggested.setData(marks, [self._y(k) for k in marks], data=marks)
        k = self.suggested_k
        if k is not None and self._y(k) is not None:
            self.star.setData([k], [self._y(k)], data=[k])
            self.star_label.setText(f"suggested K = {k}")
            self.star_label.setPos(k, self._y(k))
            self._anchor_star_label()
        else:
            self.star.setData([], [])
            self.star_label.setText("")
        self.marker.setBounds((self.space.min_keys, self.space.max_keys))
        if shown is not None:  # the K in view stay (a new log mode ranges over every K)
            self.plot.setXRange(*shown, padding=0.0)
        if self._k is not None:
            self.set_k(self._k, reveal=shown is None)

    # ------------------------------------------------------------------ interaction
    def _marker_dragged(self) -> None:
        k = int(round(self.marker.value()))
        if k != self._k:
            self._k = k
            self._show_readout(k)
            self.k_requested.emit(k)

    def _suggestion_clicked(self, _item: object, points: list, *_args: object) -> None:
        if len(points):
            k = int(points[0].data())
            self.set_k(k)
            self.k_requested.emit(k)

    def _hover(self, position: QtCore.QPointF) -> None:
        if self.space is None or not self.plot.sceneBoundingRect().contains(position):
            return
        x = self.plot.vb.mapSceneToView(position).x()
        k = int(round(min(max(x, self.space.min_keys), self.space.max_keys)))
        self._show_readout(k, hover=True)

    def _show_readout(self, k: int, hover: bool = False) -> None:
        if self.space is None:
            return
        kept = 100.0 * k / self.space.n_frames
        self.readout.setText(
            f"{'hover' if hover else 'current'}: K = {k} ({kept:.1f} % of "
            f"{self.space.n_frames} frames), {self.cost_label} {self.space.error(k):.3g} "
            f"{self.unit}")
