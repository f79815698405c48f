"""The K area: the graph, the K slider and spin box, Suggested, ratio, and the real error of
the K shown (mean and max joint error in mm).

Binds ``keys`` (the K spin box and slider: the K the user chose), ``ratio`` and ``suggested``.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets

from sp_core.options import field_specs, key_choice
from sp_core.ui.bindings import Binder, tooltip
from sp_core.ui.graph import ErrorGraph


class KBox(QtWidgets.QWidget):
    """Choose K.

    Signals
    -------
    k_requested(int)
        The user asked for K (slider, spin box, graph, the [ and ] keys).
    suggested_requested()
        The user pressed Suggested.
    ratio_requested(float)
        The user typed a ratio of keys to frames.
    """

    k_requested = QtCore.Signal(int)
    suggested_requested = QtCore.Signal()
    ratio_requested = QtCore.Signal(float)

    def __init__(self, binder: Binder, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.graph = ErrorGraph()
        self.graph.setMinimumHeight(180)
        self.graph.k_requested.connect(self.k_requested)
        layout.addWidget(self.graph, 1)

        row = QtWidgets.QHBoxLayout()
        self.k_label = QtWidgets.QLabel("–")
        self.k_label.setObjectName("bigK")
        self.k_spin = QtWidgets.QSpinBox()
        self.k_spin.setRange(2, 2)
        self.k_spin.setToolTip(tooltip("keys") + " ([ and ] step K)")
        self.k_spin.valueChanged.connect(self.k_requested)
        self.suggested_button = QtWidgets.QPushButton("Suggested")
        self.suggested_button.setCheckable(True)
        self.suggested_button.setToolTip(
            "the K of the threshold rule (accuracy and significance in Setup); shortcut S")
        self.suggested_button.clicked.connect(lambda: self.suggested_requested.emit())
        self.ratio_spin = QtWidgets.QDoubleSpinBox()
        spec = field_specs()["ratio"][1]
        self.ratio_spin.setDecimals(3)
        self.ratio_spin.setSingleStep(0.01)
        self.ratio_spin.setRange(0.0, spec.high or 1.0)
        self.ratio_spin.setSpecialValueText("ratio –")
        self.ratio_spin.setPrefix("ratio ")
        self.ratio_spin.setKeyboardTracking(False)
        self.ratio_spin.valueChanged.connect(self._ratio_edited)
        row.addWidget(QtWidgets.QLabel("K"))
        row.addWidget(self.k_label)
        row.addWidget(self.k_spin)
        row.addWidget(self.suggested_button)
        row.addWidget(self.ratio_spin)
        row.addStretch(1)
        layout.addLayout(row)
        tolerance = QtWidgets.QHBoxLayout()
        tolerance.addWidget(QtWidgets.QLabel("smallest K within"))
        self.tolerance_edit = binder.generate("tolerance")
        tolerance.addWidget(self.tolerance_edit, 1)
        layout.addLayout(tolerance)
        self.k_slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.k_slider.setRange(2, 2)
        self.k_slider.setToolTip(self.k_spin.toolTip())
        self.k_slider.valueChanged.connect(self.k_requested)
        layout.addWidget(self.k_slider)
        self.error_label = QtWidgets.QLabel("")
        self.error_label.setObjectName("kError")
        self.error_label.setWordWrap(True)
        self.error_label.setToolTip(
            "distance between the original and the reduced joints over every frame and joint "
            "(End Sites included), for the character scaled to 1.7 m")
        layout.addWidget(self.error_label)
        self._binder = binder
        binder.add("keys", self.k_spin, self._show_keys)
        binder.add("ratio", self.ratio_spin, self._show_ratio)
        binder.add("suggested", self.suggested_button, self.show_key_choice)

    def _ratio_edited(self, value: float) -> None:
        if value > 0:  # 0 is the "no ratio" special value
            self.ratio_requested.emit(float(value))

    # ------------------------------------------------------------------ options → widgets
    def _show_keys(self, value: Any) -> None:
        # the session's K where it has one: that is what Apply writes (the keys option, a K
        # pressed before, pulled the controls back from a K a script set, and Apply wrote
        # another number of keys than shown)
        session = self._binder.session
        if session.k is not None and session.space is not None:
            self.sync(int(session.k))
        elif value is not None:
            self.sync(int(value))
        self.show_key_choice(None)

    def _show_ratio(self, value: Any) -> None:
        self.ratio_spin.setValue(0.0 if value is None else float(value))

    def show_key_choice(self, _value: Any = None) -> None:
        """The Suggested button pressed while the threshold rule chooses K (not while the
        tolerance does)."""
        self.suggested_button.setChecked(key_choice(self._binder.session.options)
                                         == "suggested")

    # ------------------------------------------------------------------ K
    def set_range(self, low: int, high: int, slider_high: int | None = None) -> None:
        """K from ``low`` to ``high`` in the spin box; the slider spans ``low..slider_high``
        (the graph's useful range: on a long take 2..2500 would leave no room for the K that
        matter; a larger K is typed or reached with ])."""
        for widget, top in ((self.k_slider, slider_high or high), (self.k_spin, high)):
            blocked = widget.blockSignals(True)
            widget.setRange(low, top)
            widget.blockSignals(blocked)

    def sync(self, k: int) -> None:
        """Show K in every widget (no signals); the slider reaches as far as K does (a K typed
        past the graph's useful range, or a tolerance's K there)."""
        if k > self.k_slider.maximum() and k <= self.k_spin.maximum():
            blocked = self.k_slider.blockSignals(True)
            self.k_slider.setMaximum(k)
            self.k_slider.blockSignals(blocked)
        for widget in (self.k_slider, self.k_spin):
            if widget.value() != k:
                blocked = widget.blockSignals(True)
                widget.setValue(k)
                widget.blockSignals(blocked)
        self.k_label.setText(str(k))
        self.graph.set_k(k)

    def set_enabled(self, enabled: bool) -> None:
        for widget in (self.k_slider, self.k_spin, self.suggested_button, self.ratio_spin):
            widget.setEnabled(enabled)
