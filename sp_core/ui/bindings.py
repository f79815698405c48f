"""Option fields bound to widgets: the panel's one path between widgets and ``session.options``.

A :class:`Binder` holds the binding table (field name → :class:`Binding`). A widget edit calls
:meth:`sp_core.session.Session.set_options`; a refused value shows the :class:`OptionError` in
the status line and the widget reverts to the session's value. Every ``options_changed`` event
updates every bound widget. Simple fields get widgets generated from their
:class:`sp_core.options.Spec` (choices → combo box, ranges → spin box limits, help →
tooltip); fields with a richer editor (node table, pins, frame range...) register their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from PySide6 import QtCore, QtWidgets

from sp_core.errors import OptionError
from sp_core.options import Options, Spec, field_specs, words_of
from sp_core.session import Session

#: Spin-box limit of fields without a bound (frames, counts).
WIDE = 10**7


def option_value(options: Options, name: str) -> Any:
    """The value of field ``name`` in ``options``."""
    group = field_specs()[name][0]
    return getattr(getattr(options, group), name)


def tooltip(name: str) -> str:
    """The field's help, unit and valid range, for a tooltip."""
    spec = field_specs()[name][1]
    parts = [spec.help]
    if spec.unit:
        parts.append(f"unit: {spec.unit}")
    if spec.bounds_text():
        parts.append(f"valid: {spec.bounds_text()}")
    return "; ".join(parts)


@dataclass
class Binding:
    """One field ↔ one editor.

    Attributes
    ----------
    name : str
        Field name in :mod:`sp_core.options`.
    widget : QWidget
        The editor (what tests and the layout see).
    show : callable
        ``show(value)`` puts an option value into the editor (signals are blocked around it).
    """

    name: str
    widget: QtWidgets.QWidget
    show: Callable[[Any], None]


class Binder(QtCore.QObject):
    """The binding table of a panel over one session.

    Parameters
    ----------
    session : Session
    report_error : callable
        ``report_error(error)`` shows a refused value (the panel's status line; it says the
        options the error names its own way).
    """

    def __init__(self, session: Session, report_error: Callable[[str | Exception], None],
                 parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.report_error = report_error
        #: how a refused value's message names each option (the panel sets its rows' labels)
        self.labels: Mapping[str, str] = {name: words_of(name) for name in field_specs()}
        self.bindings: dict[str, Binding] = {}
        self._unsubscribe = session.subscribe("options_changed", self.show)

    def close(self) -> None:
        self._unsubscribe()

    # ------------------------------------------------------------------ table
    def add(self, name: str, widget: QtWidgets.QWidget, show: Callable[[Any], None]) -> None:
        """Register an editor for field ``name`` and show the session's value in it."""
        if name not in field_specs():
            raise KeyError(f"no option {name!r} in sp_core.options")
        if name in self.bindings:
            raise KeyError(f"option {name!r} is bound twice")
        self.bindings[name] = Binding(name, widget, show)
        if not widget.toolTip():
            widget.setToolTip(tooltip(name))
        self._show_one(self.bindings[name], self.session.options)

    def widget(self, name: str) -> QtWidgets.QWidget:
        return self.bindings[name].widget

    # ------------------------------------------------------------------ both directions
    def edit(self, **changes: Any) -> bool:
        """Ask the session for ``changes``; on refusal report it and revert every editor."""
        try:
            self.session.set_options(labels=self.labels, **changes)
        except OptionError as exc:
            self.report_error(exc)
            self.show(self.session.options)
            return False
        return True

    def submit(self, name: str, value: Any) -> None:
        """:meth:`edit` of one field, for Qt signals (a slot returns nothing: PySide6 once
        mishandled a bool returned from a slot)."""
        self.edit(**{name: value})

    def show(self, options: Options) -> None:
        for binding in self.bindings.values():
            self._show_one(binding, options)

    def _show_one(self, binding: Binding, options: Options) -> None:
        blocked = binding.widget.blockSignals(True)
        try:
            binding.show(option_value(options, binding.name))
        finally:
            binding.widget.blockSignals(blocked)

    # ------------------------------------------------------------------ generated editors
    def generate(self, name: str, empty: str = "auto", zero: str | None = None
                 ) -> QtWidgets.QWidget:
        """A widget for a plain field, made from its Spec and bound.

        ``empty`` is what a nullable number shows for None (one step below its low bound);
        ``zero``, what a number whose low bound 0 means "off" shows there ("0.000" said
        nothing).
        """
        spec = field_specs()[name][1]
        if spec.kind == "choice":
            widget: QtWidgets.QWidget = self._combo(name, spec)
        elif spec.kind == "bool":
            widget = self._check(name, spec)
        elif spec.kind in ("int", "float"):
            widget = self._spin(name, spec, empty)
            if zero is not None and spec.low == 0 and not spec.nullable:
                cast(QtWidgets.QAbstractSpinBox, widget).setSpecialValueText(zero)
        elif spec.kind == "str":
            widget = self._line(name)
        elif spec.kind == "tolerance":
            widget = self._line(name, lambda value: "" if value is None else
                                f"{value[0]:g}, {value[1]:g}", placeholder="MEAN, MAX mm")
        elif spec.kind == "budget":
            widget = self._line(name, lambda value: "" if value is None else str(value),
                                placeholder="keys or %")
        else:
            raise TypeError(f"option {name!r} of kind {spec.kind!r} needs its own editor")
        widget.setObjectName(f"option_{name}")
        return widget

    def _combo(self, name: str, spec: Spec) -> QtWidgets.QComboBox:
        combo = QtWidgets.QComboBox()
        combo.addItems(list(spec.allowed()))
        combo.currentTextChanged.connect(lambda text: self.submit(name, text))
        self.add(name, combo, lambda value: combo.setCurrentText(str(value)))
        return combo

    def _check(self, name: str, spec: Spec) -> QtWidgets.QCheckBox:
        box = QtWidgets.QCheckBox()
        box.toggled.connect(lambda on: self.submit(name, bool(on)))
        self.add(name, box, lambda value: box.setChecked(bool(value)))
        return box

    def _line(self, name: str, text: Callable[[Any], str] = str,
              placeholder: str = "") -> QtWidgets.QLineEdit:
        line = QtWidgets.QLineEdit()
        line.setPlaceholderText(placeholder)
        spec = field_specs()[name][1]
        # an emptied line is None for a nullable field (the schema checks everything else)
        line.editingFinished.connect(lambda: self.submit(
            name, None if spec.nullable and not line.text().strip() else line.text()))
        self.add(name, line, lambda value: line.setText(text(value)))
        return line

    def _spin(self, name: str, spec: Spec, empty: str) -> QtWidgets.QAbstractSpinBox:
        whole = spec.kind == "int"
        box: QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox
        if whole:
            box = QtWidgets.QSpinBox()
            step = 1.0
        else:
            box = QtWidgets.QDoubleSpinBox()
            box.setDecimals(3)
            step = 0.01 if spec.high is not None and spec.high <= 1 else 0.1
            box.setSingleStep(step)
        # the spin box allows the bounds themselves: an open bound is refused by the schema,
        # which the user then reads in the status line
        low = spec.low if spec.low is not None else -WIDE
        high = spec.high if spec.high is not None else WIDE
        if spec.nullable:
            low -= step
            box.setSpecialValueText(empty)
        box.setRange(low, high)
        none_at = low if spec.nullable else None

        def show(value: Any) -> None:
            box.setValue(none_at if value is None else value)

        def edited(value: float) -> None:
            given = None if none_at is not None and value <= none_at else value
            self.submit(name, int(given) if whole and given is not None else given)

        # editing stops at the end of typing or a click on the arrows, not on every key
        box.setKeyboardTracking(False)
        box.valueChanged.connect(edited)
        self.add(name, box, show)
        return box
