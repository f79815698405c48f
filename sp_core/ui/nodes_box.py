"""The Character box: which hierarchies are analysed and how much each node counts.

Binds ``roots`` (the label and Use selection), ``nodes`` (the "counts" column), ``weights``
(the "weight" column) and ``leading`` (the "leads" column of keyposes + breakdowns) to one
table of the nodes under the roots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtWidgets

from sp_core.errors import SalientPosesError
from sp_core.ui.bindings import Binder

NAME, COUNTS, WEIGHT, LEADS = range(4)
CHECKED = QtCore.Qt.CheckState.Checked
UNCHECKED = QtCore.Qt.CheckState.Unchecked


class NodesBox(QtWidgets.QGroupBox):
    """The node table under the analysed roots.

    Parameters
    ----------
    binder : Binder
    report_error : callable
        ``report_error(message or error)``: the panel's status line.
    """

    def __init__(self, binder: Binder, report_error: Callable[[str | Exception], None],
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Character", parent)
        self.binder = binder
        self.session = binder.session
        self.report_error = report_error
        layout = QtWidgets.QVBoxLayout(self)
        row = QtWidgets.QHBoxLayout()
        self.roots_label = QtWidgets.QLabel("")
        self.roots_label.setWordWrap(True)
        use = QtWidgets.QPushButton("Use selection")
        use.setToolTip("analyse the hierarchies under the host's selected nodes (nothing "
                       "selected: the whole scene)")
        use.clicked.connect(self.use_host_selection)
        row.addWidget(self.roots_label, 1)
        row.addWidget(use)
        layout.addLayout(row)
        self.table = QtWidgets.QTableWidget(0, 4)
        self.table.setObjectName("nodeTable")
        self.table.setHorizontalHeaderLabels(["node", "counts", "weight", "leads"])
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(NAME, QtWidgets.QHeaderView.ResizeMode.Stretch)
        for column in (COUNTS, WEIGHT, LEADS):
            header.setSectionResizeMode(column, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        # many rows at once: the table takes the height the Setup tab gives it
        self.table.setMinimumHeight(220)
        self.table.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding,
                                 QtWidgets.QSizePolicy.Policy.Expanding)
        self.table.itemChanged.connect(self._edited)
        layout.addWidget(self.table, 1)
        row = QtWidgets.QHBoxLayout()
        lead = QtWidgets.QPushButton("Selected rows lead")
        lead.setToolTip("the selected rows become the leading part of keyposes + breakdowns "
                        "(e.g. the hands of a gesture)")
        lead.clicked.connect(self.lead_with_selected_rows)
        every = QtWidgets.QPushButton("Reset")
        every.setToolTip("every node counts, weight 1, no leading part")
        every.clicked.connect(self.reset)
        row.addWidget(lead)
        row.addWidget(every)
        row.addStretch(1)
        layout.addLayout(row)
        self._names: list[str] = []
        binder.add("roots", self.roots_label, self._show_roots)
        binder.add("nodes", self.table, lambda v: self._show_column(COUNTS, v))
        binder.add("weights", self.table, lambda v: self._show_column(WEIGHT, v))
        binder.add("leading", self.table, lambda v: self._show_column(LEADS, v))

    # ------------------------------------------------------------------ from the host
    def refresh_from_host(self) -> None:
        """List the nodes under the roots (the option, else the host's selection)."""
        try:
            roots = self.session.roots()
            names = [n for n, _ in self.session.host.hierarchy(roots)]
        except SalientPosesError as exc:
            self.report_error(exc)
            return
        self._names = names
        self.roots_label.setText("under: " + ", ".join(roots))
        blocked = self.table.blockSignals(True)
        self.table.setRowCount(len(names))
        for row, name in enumerate(names):
            item = QtWidgets.QTableWidgetItem(name)
            item.setFlags(item.flags() & ~QtCore.Qt.ItemFlag.ItemIsEditable)
            self.table.setItem(row, NAME, item)
            for column in (COUNTS, LEADS):
                check = QtWidgets.QTableWidgetItem()
                check.setFlags(QtCore.Qt.ItemFlag.ItemIsUserCheckable
                               | QtCore.Qt.ItemFlag.ItemIsEnabled
                               | QtCore.Qt.ItemFlag.ItemIsSelectable)
                self.table.setItem(row, column, check)
            self.table.setItem(row, WEIGHT, QtWidgets.QTableWidgetItem("1"))
        self.table.blockSignals(blocked)
        options = self.session.options.analysis
        for column, value in ((COUNTS, options.nodes), (WEIGHT, options.weights),
                              (LEADS, options.leading)):
            blocked = self.table.blockSignals(True)
            self._show_column(column, value)
            self.table.blockSignals(blocked)

    def use_host_selection(self) -> None:
        try:
            selected = tuple(self.session.host.selected_nodes())
        except SalientPosesError as exc:
            self.report_error(exc)
            return
        if self.binder.edit(roots=selected or None):
            self.refresh_from_host()

    def reset(self) -> None:
        self.binder.edit(nodes=None, weights=(), leading=())

    def lead_with_selected_rows(self) -> None:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        if not rows:
            self.report_error("select the rows of the leading nodes first")
            return
        self.binder.edit(leading=tuple(self._names[r] for r in rows))

    # ------------------------------------------------------------------ both directions
    def _show_roots(self, roots: Any) -> None:
        if roots:
            self.roots_label.setText("under: " + ", ".join(roots))

    def _show_column(self, column: int, value: Any) -> None:
        if column == WEIGHT:
            weights = dict(value)
            for row, name in enumerate(self._names):
                self.table.item(row, WEIGHT).setText(f"{weights.get(name, 1.0):g}")
            return
        chosen = set(self._names if value is None and column == COUNTS else value or ())
        for row, name in enumerate(self._names):
            self.table.item(row, column).setCheckState(CHECKED if name in chosen else UNCHECKED)

    def _column(self, column: int) -> list[str]:
        return [name for row, name in enumerate(self._names)
                if self.table.item(row, column).checkState() == CHECKED]

    def _edited(self, item: QtWidgets.QTableWidgetItem) -> None:
        column = item.column()
        if column == COUNTS:
            counted = self._column(COUNTS)
            self.binder.edit(nodes=None if len(counted) == len(self._names) else
                             tuple(counted) if counted else ())
        elif column == LEADS:
            self.binder.edit(leading=tuple(self._column(LEADS)))
        elif column == WEIGHT:
            weights = dict(self.session.options.analysis.weights)
            name = self._names[item.row()]
            weights[name] = item.text()
            self.binder.edit(weights={n: w for n, w in weights.items()
                                      if str(w).strip() not in ("1", "1.0")})
