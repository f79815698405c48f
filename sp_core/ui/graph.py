"""The error-against-K graph of the whole selection space, with a draggable K marker."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from sp_core.selection import SelectionSpace


class ErrorGraph(QtWidgets.QWidget):
    """error(K) for every K, the current K as a draggable line, suggestions as clickable dots.

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
        self.mm_per_unit = 1.0
        self.plot_widget = pg.PlotWidget(background="#26282b")
        self.plot = self.plot_widget.getPlotItem()
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.setLabel("bottom", "keyframes K")
        self.plot.setLabel("left", "error")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#6fa8dc", width=2))
        # layered mode: the breakdown space of the current keyposes (x = all keys)
        self.second_curve = self.plot.plot([], [], pen=pg.mkPen("#93c47d", width=2,
                                                                 style=QtCore.Qt.PenStyle.DashLine))
        self.second: SelectionSpace | None = None
        self.suggested = pg.ScatterPlotItem(size=11, brush=pg.mkBrush("#f6b26b"),
                                            pen=pg.mkPen("#26282b"), hoverable=True,
                                            hoverSize=15, tip=None)
        self.suggested.sigClicked.connect(self._suggestion_clicked)
        self.plot.addItem(self.suggested)
        self.marker = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen("#e06666", width=2),
                                      hoverPen=pg.mkPen("#ff9999", width=3))
        self.marker.sigDragged.connect(self._marker_dragged)
        self.plot.addItem(self.marker)
        self.readout = QtWidgets.QLabel(" ")
        self.readout.setObjectName("graphReadout")
        # the text changes on every hover: it must never resize the plot under the mouse
        self.readout.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored,
                                   QtWidgets.QSizePolicy.Policy.Fixed)
        self.log_box = QtWidgets.QCheckBox("log error")
        self.log_box.setChecked(True)
        self.log_box.toggled.connect(self._redraw)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.readout, 1)
        top.addWidget(self.log_box)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.plot_widget, 1)
        self.plot_widget.scene().sigMouseMoved.connect(self._hover)
        self._k: int | None = None

    # ------------------------------------------------------------------ data
    def set_space(self, space: SelectionSpace | None, mm_per_unit: float = 1.0) -> None:
        self.space = space
        self.mm_per_unit = mm_per_unit
        self._redraw()

    def set_second(self, space: SelectionSpace | None) -> None:
        """Also draw ``space`` (the breakdown space), dashed; None removes it."""
        self.second = space
        if space is None:
            self.second_curve.setData([], [])
            return
        self.second_curve.setData(*self._values(space))

    def set_k(self, k: int) -> None:
        """Move the marker (no signal)."""
        self._k = k
        self.marker.blockSignals(True)
        self.marker.setValue(k)
        self.marker.blockSignals(False)
        self._show_readout(k)

    def _values(self, space: SelectionSpace) -> tuple[np.ndarray, np.ndarray]:
        """Key counts and errors that can be drawn (finite; positive on the log axis)."""
        keys, errors = space.key_counts, space.errors
        ok = np.isfinite(errors)
        if self.log_box.isChecked():
            ok &= errors > 0
        return keys[ok], errors[ok]

    def _redraw(self) -> None:
        if self.space is None:
            self.curve.setData([], [])
            self.suggested.setData([], [])
            return
        log = self.log_box.isChecked()
        self.plot.setLogMode(x=False, y=log)
        keys, errors = self._values(self.space)
        self.set_second(self.second)  # the breakdown space follows the axis too
        self.curve.setData(keys, errors)
        s = self.space.suggestions()
        marks = sorted(set(s["cliffs"]) | {s["threshold"]})
        ys = np.array([self.space.error(k) for k in marks])
        keep = ys > 0 if log else np.isfinite(ys)
        self.suggested.setData(np.array(marks)[keep], np.log10(ys[keep]) if log else ys[keep],
                               data=np.array(marks)[keep])
        self.marker.setBounds((self.space.min_keys, self.space.max_keys))
        self.plot.setXRange(self.space.min_keys, self.space.max_keys, padding=0.02)
        if self._k is not None:
            self.set_k(self._k)

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
        error = self.space.error(k)
        kept = 100.0 * k / self.space.n_frames
        where = "hover" if hover else "current"
        self.readout.setText(
            f"{where}: K = {k}   pose error {error:.4g} units "
            f"({error * self.mm_per_unit:.0f} mm)   {kept:.1f} % of frames kept")
