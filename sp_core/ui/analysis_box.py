"""The Analysis box: how poses are compared and which keyframe sets are allowed.

Every row is a field of :class:`sp_core.options.AnalysisOptions`: plain fields get editors
generated from the schema; the frame range and the cost's own options have their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtWidgets

from sp_core.costs import get_cost
from sp_core.errors import SalientPosesError
from sp_core.ui.bindings import WIDE, Binder


def form_layout(parent: QtWidgets.QWidget) -> QtWidgets.QFormLayout:
    """A form that puts long rows under their label in a narrow dock (~350 px)."""
    form = QtWidgets.QFormLayout(parent)
    form.setRowWrapPolicy(QtWidgets.QFormLayout.RowWrapPolicy.WrapLongRows)
    form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    return form


class AnalysisBox(QtWidgets.QGroupBox):
    """Pose space, cost (and its options), composition, range, stride, spans, layered mode."""

    def __init__(self, binder: Binder, report_error: Callable[[str | Exception], None],
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Analysis", parent)
        self.binder = binder
        self.session = binder.session
        self.report_error = report_error
        form = form_layout(self)
        form.addRow("pose space", binder.generate("pose"))
        cost = binder.generate("cost")
        for index in range(cost.count()):
            cost.setItemData(index, get_cost(cost.itemText(index)).description,
                             role=QtCore.Qt.ItemDataRole.ToolTipRole)
        # options of the previous cost mean nothing to the next one
        cost.currentTextChanged.connect(self._cost_changed)
        form.addRow("cost", cost)
        self.cost_options = QtWidgets.QWidget()
        self.cost_options_form = form_layout(self.cost_options)
        self.cost_options_form.setContentsMargins(12, 0, 0, 0)
        self._editors: dict[str, QtWidgets.QWidget] = {}
        self._cost_shown: str | None = None
        form.addRow(self.cost_options)
        binder.add("cost_options", self.cost_options, self._show_cost_options)
        form.addRow("compose", binder.generate("compose"))
        form.addRow("time scale", binder.generate("time_scale", zero="off"))
        form.addRow("frames", self._build_range())
        form.addRow("stride", binder.generate("stride"))
        form.addRow("max span", binder.generate("max_span", empty="no limit"))
        form.addRow("max keys", binder.generate("max_keys", empty="auto (half the frames)"))
        form.addRow("memory (GiB)", binder.generate("memory_gib"))
        form.addRow("time budget (s)", binder.generate("time_budget"))
        # the row's label is how messages name the option ("turn on keyposes + breakdowns")
        form.addRow("keyposes + breakdowns", binder.generate("layered"))
        form.addRow("breakdowns", binder.generate("breakdowns", empty="auto (threshold rule)"))
        form.addRow("accuracy", binder.generate("accuracy"))
        form.addRow("significance", binder.generate("significance"))

    def _cost_changed(self, _name: str) -> None:
        if self.session.options.analysis.cost_options:
            self.binder.edit(cost_options=())

    # ------------------------------------------------------------------ frame range
    def _build_range(self) -> QtWidgets.QWidget:
        holder = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(holder)
        row.setContentsMargins(0, 0, 0, 0)
        self.first_spin = QtWidgets.QSpinBox()
        self.last_spin = QtWidgets.QSpinBox()
        for box in (self.first_spin, self.last_spin):
            box.setRange(-WIDE, WIDE)
            box.setKeyboardTracking(False)
            box.valueChanged.connect(self._range_edited)
        playback = QtWidgets.QToolButton()
        playback.setText("all")
        playback.setToolTip("the host's playback range (the whole clip standalone)")
        playback.clicked.connect(lambda: self.binder.submit("frame_range", None))
        row.addWidget(self.first_spin, 1)
        row.addWidget(QtWidgets.QLabel("to"))
        row.addWidget(self.last_spin, 1)
        row.addWidget(playback)
        self.binder.add("frame_range", holder, self._show_range)
        return holder

    def _show_range(self, value: Any) -> None:
        if value is None:
            try:
                value = self.session.host.playback_range()
            except SalientPosesError as exc:
                self.report_error(exc)
                return
        for box, frame in zip((self.first_spin, self.last_spin), value, strict=True):
            blocked = box.blockSignals(True)
            box.setValue(int(frame))
            box.blockSignals(blocked)

    def _range_edited(self, _value: int) -> None:
        self.binder.edit(frame_range=(self.first_spin.value(), self.last_spin.value()))

    # ------------------------------------------------------------------ the cost's options
    def _show_cost_options(self, values: Any) -> None:
        """One editor per declared option of the current cost (the panel knows no cost)."""
        name = self.session.options.analysis.cost
        if name != self._cost_shown:
            self._build_cost_editors(name)
        values = dict(values)
        for option_name, editor in self._editors.items():
            option = next(o for o in get_cost(name).options if o.name == option_name)
            value = values.get(option_name, option.default)
            blocked = editor.blockSignals(True)
            if isinstance(editor, QtWidgets.QComboBox):
                editor.setCurrentText(str(value))
            elif isinstance(editor, QtWidgets.QCheckBox):
                editor.setChecked(bool(value))
            elif isinstance(editor, QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox):
                editor.setValue(value)
            elif isinstance(editor, QtWidgets.QLineEdit):
                editor.setText(str(value))
            editor.blockSignals(blocked)

    def _build_cost_editors(self, name: str) -> None:
        while self.cost_options_form.rowCount():
            self.cost_options_form.removeRow(0)
        self._editors = {}
        self._cost_shown = name
        for option in get_cost(name).options:
            editor: QtWidgets.QWidget
            if option.choices:
                editor = QtWidgets.QComboBox()
                editor.addItems([str(c) for c in option.choices])
                editor.currentTextChanged.connect(self._cost_option_edited)
            elif option.type is bool:
                editor = QtWidgets.QCheckBox()
                editor.toggled.connect(self._cost_option_edited)
            elif option.type in (int, float):
                editor = QtWidgets.QSpinBox() if option.type is int else QtWidgets.QDoubleSpinBox()
                if isinstance(editor, QtWidgets.QDoubleSpinBox):
                    editor.setDecimals(4)
                editor.setRange(option.minimum if option.minimum is not None else -WIDE,
                                option.maximum if option.maximum is not None else WIDE)
                editor.setKeyboardTracking(False)
                editor.valueChanged.connect(self._cost_option_edited)
            else:
                editor = QtWidgets.QLineEdit()
                editor.editingFinished.connect(self._cost_option_edited)
            editor.setToolTip(option.help)
            self._editors[option.name] = editor
            self.cost_options_form.addRow(option.name, editor)
        self.cost_options.setVisible(bool(self._editors))

    def _cost_option_edited(self, *_args: object) -> None:
        values: dict[str, Any] = {}
        for name, editor in self._editors.items():
            if isinstance(editor, QtWidgets.QComboBox):
                values[name] = editor.currentText()
            elif isinstance(editor, QtWidgets.QCheckBox):
                values[name] = editor.isChecked()
            elif isinstance(editor, QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox):
                values[name] = editor.value()
            elif isinstance(editor, QtWidgets.QLineEdit):
                values[name] = editor.text()
        defaults = {o.name: o.default for o in get_cost(self._cost_shown or "").options}
        self.binder.edit(cost_options={n: v for n, v in values.items() if v != defaults[n]})

