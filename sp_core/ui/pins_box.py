"""The Pins box: frames that must be keyframes (``options.analysis.pins``), with names and notes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6 import QtCore, QtWidgets

from sp_core.errors import SalientPosesError
from sp_core.options import Pin, coerce
from sp_core.ui.bindings import Binder

FRAME, NAME, NOTE = range(3)


class PinsBox(QtWidgets.QGroupBox):
    """A table of pins; every change goes through ``session.set_options(pins=...)``."""

    def __init__(self, binder: Binder, report_error: Callable[[str | Exception], None],
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Pins (frames that must be keys)", parent)
        self.binder = binder
        self.session = binder.session
        self.report_error = report_error
        layout = QtWidgets.QVBoxLayout(self)
        self.table = QtWidgets.QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["frame", "name", "note"])
        self.table.horizontalHeader().setSectionResizeMode(
            NOTE, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(80)
        self.table.itemChanged.connect(self._edited)
        layout.addWidget(self.table)
        row = QtWidgets.QHBoxLayout()
        add_current = QtWidgets.QPushButton("Pin current")
        add_current.setToolTip("pin the host's current frame")
        add_current.clicked.connect(self.pin_current_frame)
        self.entry = QtWidgets.QLineEdit()
        self.entry.setPlaceholderText("frames, e.g. 1040, 1100")
        self.entry.returnPressed.connect(self.pin_typed_frames)
        remove = QtWidgets.QPushButton("Remove")
        remove.clicked.connect(self.remove_selected)
        row.addWidget(add_current)
        row.addWidget(self.entry, 1)
        row.addWidget(remove)
        layout.addLayout(row)
        row = QtWidgets.QHBoxLayout()
        importer = QtWidgets.QPushButton("Import…")
        importer.clicked.connect(self._import_dialog)
        exporter = QtWidgets.QPushButton("Export…")
        exporter.clicked.connect(self._export_dialog)
        row.addStretch(1)
        row.addWidget(importer)
        row.addWidget(exporter)
        layout.addLayout(row)
        binder.add("pins", self.table, self._show)

    def _show(self, pins: Any) -> None:
        self.table.setRowCount(len(pins))
        for row, pin in enumerate(pins):
            frame = QtWidgets.QTableWidgetItem(str(pin.frame))
            frame.setFlags(frame.flags() & ~QtCore.Qt.ItemFlag.ItemIsEditable)
            self.table.setItem(row, FRAME, frame)
            self.table.setItem(row, NAME, QtWidgets.QTableWidgetItem(pin.name))
            self.table.setItem(row, NOTE, QtWidgets.QTableWidgetItem(pin.note))

    @property
    def pins(self) -> tuple[Pin, ...]:
        return self.session.options.analysis.pins

    def _edited(self, item: QtWidgets.QTableWidgetItem) -> None:
        pins = list(self.pins)
        field = {NAME: "name", NOTE: "note"}.get(item.column())
        if field is None or item.row() >= len(pins):
            return
        pins[item.row()] = replace(pins[item.row()], **{field: item.text()})
        self.binder.edit(pins=tuple(pins))

    def add_pins(self, frames: list[int] | str) -> bool:
        """Pin more frames (numbers, or text as typed: ``"1040, 1100"``)."""
        if isinstance(frames, str):
            frames = frames.replace(";", ",")
        have = {p.frame for p in self.pins}
        try:
            wanted = coerce("pins", frames, "pins")
        except SalientPosesError as exc:
            self.report_error(exc)
            return False
        if not self.binder.edit(pins=self.pins + tuple(p for p in wanted if p.frame not in have)):
            return False
        # said now, not at Analyze (the range may still change: the pins are kept)
        try:
            first, last = self.session.frame_range()
        except SalientPosesError:
            return True  # (Analyze says what the range is not)
        outside = [p.frame for p in self.pins if not first <= p.frame <= last]
        if outside:
            plural, them = ("s", "them") if len(outside) > 1 else ("", "it")
            self.report_error(
                f"pinned frame{plural} {', '.join(map(str, outside))} outside the frames "
                f"Analyze reads now ({first}–{last}): Analyze refuses {them} unless the range "
                f"takes {them} in")
        return True

    def pin_current_frame(self) -> None:
        self.add_pins([self.session.host.current_frame()])

    def pin_typed_frames(self) -> None:
        if self.add_pins(self.entry.text()):
            self.entry.clear()

    def remove_selected(self) -> None:
        rows = {i.row() for i in self.table.selectedIndexes()}
        self.binder.edit(pins=tuple(p for r, p in enumerate(self.pins) if r not in rows))

    def _import_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Import pins", "", "JSON (*.json)")
        if path:
            try:
                self.session.import_pins(path)
            except SalientPosesError as exc:
                self.report_error(exc)

    def _export_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export pins", "pins.json",
                                                        "JSON (*.json)")
        if path:
            self.session.export_pins(path)
