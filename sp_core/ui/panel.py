"""The Salient Poses panel: a plain QWidget any host can dock.

It drives a :class:`sp_core.session.Session` and shows its state; it never calls an application
API itself. The analysis runs in a worker thread; K changes preview the keyframes in the host,
throttled to one preview per frame of the UI (16 ms).
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from sp_core.costs import available_costs, get_cost
from sp_core.errors import SalientPosesError
from sp_core.fitting import FIT_SPACES, TANGENT_MODES
from sp_core.host import HostNotes, SkipReport
from sp_core.poses import POSE_SPACES
from sp_core.selection import COMPOSITIONS
from sp_core.session import Pin, Session
from sp_core.ui.graph import ErrorGraph
from sp_core.ui.wand_tab import PropagateTab
from sp_core.ui.worker import AnalysisWorker, start_analysis

#: Longest time between a K change and its preview in the host, ms.
PREVIEW_INTERVAL_MS = 16

STYLE = """
QWidget#salientPosesPanel { font-size: 12px; }
QGroupBox { font-weight: bold; border: 1px solid #555; border-radius: 4px; margin-top: 8px;
            padding-top: 6px; }
QGroupBox::title { subcontrol-origin: margin; left: 8px; padding: 0 4px; }
QLabel#status { padding: 4px; border-radius: 3px; }
QLabel#status[kind="error"] { background: #5a2a2a; color: #ffd7d7; }
QLabel#status[kind="ok"] { background: #2a4a2f; color: #d8f5dc; }
QLabel#bigK { font-size: 20px; font-weight: bold; min-width: 48px; }
"""


def _spin(low: int, high: int, value: int, special: str = "") -> QtWidgets.QSpinBox:
    box = QtWidgets.QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    if special:
        box.setSpecialValueText(special)
    return box


class SalientPosesPanel(QtWidgets.QWidget):
    """Setup, Analyze, the error graph, the K slider and Apply, over a session.

    Parameters
    ----------
    session : Session
    settings : QSettings, optional
        Where options persist between sessions (default: the user's Salient Poses settings).
    parent : QWidget, optional
    """

    def __init__(self, session: Session, settings: QtCore.QSettings | None = None,
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("salientPosesPanel")
        self.setStyleSheet(STYLE)
        self.session = session
        self.settings = settings or QtCore.QSettings("SalientPoses", "panel")
        self._thread: QtCore.QThread | None = None
        self._worker: AnalysisWorker | None = None
        self._pending_k: int | None = None
        self._preview_timer = QtCore.QTimer(self)
        self._preview_timer.setSingleShot(True)
        self._preview_timer.setInterval(PREVIEW_INTERVAL_MS)
        self._preview_timer.timeout.connect(self._preview_pending)
        self._build()
        self._show_session_options()
        self._restore_settings()
        self.refresh_from_host()
        self._update_enabled()
        session.subscribe("k_changed", self._on_k_changed)

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        title = QtWidgets.QLabel(f"<b>Salient Poses</b> — {self.session.host.name}")
        outer.addWidget(title)
        splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        outer.addWidget(splitter, 1)

        # setup (scrollable, it is the tallest part)
        setup = QtWidgets.QWidget()
        setup_layout = QtWidgets.QVBoxLayout(setup)
        setup_layout.setContentsMargins(0, 0, 0, 0)
        setup_layout.addWidget(self._build_nodes())
        setup_layout.addWidget(self._build_analysis())
        setup_layout.addWidget(self._build_pins())
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(setup)
        splitter.addWidget(scroll)

        results = QtWidgets.QWidget()
        results_layout = QtWidgets.QVBoxLayout(results)
        results_layout.setContentsMargins(0, 0, 0, 0)
        run_row = QtWidgets.QHBoxLayout()
        self.analyze_button = QtWidgets.QPushButton("Analyze")
        self.analyze_button.setDefault(True)
        self.analyze_button.clicked.connect(self.start_analysis)
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_analysis)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("")
        run_row.addWidget(self.analyze_button)
        run_row.addWidget(self.cancel_button)
        run_row.addWidget(self.progress, 1)
        results_layout.addLayout(run_row)

        self.graph = ErrorGraph()
        self.graph.setMinimumHeight(200)
        self.graph.k_requested.connect(self.request_k)
        results_layout.addWidget(self.graph, 1)

        k_row = QtWidgets.QHBoxLayout()
        self.k_label = QtWidgets.QLabel("–")
        self.k_label.setObjectName("bigK")
        self.k_slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.k_slider.setRange(2, 2)
        self.k_slider.valueChanged.connect(self.request_k)
        self.k_spin = _spin(2, 2, 2)
        self.k_spin.valueChanged.connect(self.request_k)
        self.suggested_button = QtWidgets.QPushButton("Suggested")
        self.suggested_button.setToolTip("the K of the threshold rule")
        self.suggested_button.clicked.connect(lambda: self.request_k(self.session.suggested_k))
        k_row.addWidget(QtWidgets.QLabel("K"))
        k_row.addWidget(self.k_label)
        k_row.addWidget(self.k_slider, 1)
        k_row.addWidget(self.k_spin)
        k_row.addWidget(self.suggested_button)
        results_layout.addLayout(k_row)
        results_layout.addWidget(self._build_apply())
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.addTab(results, "Keyframes")
        self.wand = PropagateTab(self.session, self._wand_status)
        self.tabs.addTab(self.wand, "Propagate edit")
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([380, 560])

        self.status = QtWidgets.QLabel("Select the character and press Analyze.")
        self.status.setObjectName("status")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.status)

    def _build_nodes(self) -> QtWidgets.QGroupBox:
        box = QtWidgets.QGroupBox("Character")
        layout = QtWidgets.QVBoxLayout(box)
        row = QtWidgets.QHBoxLayout()
        self.roots_label = QtWidgets.QLabel("")
        use = QtWidgets.QPushButton("Use selection")
        use.setToolTip("analyse the hierarchies under the host's selected nodes")
        use.clicked.connect(self.use_host_selection)
        row.addWidget(self.roots_label, 1)
        row.addWidget(use)
        layout.addLayout(row)
        self.node_table = QtWidgets.QTableWidget(0, 2)
        self.node_table.setHorizontalHeaderLabels(["node", "weight"])
        self.node_table.horizontalHeader().setSectionResizeMode(
            0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.node_table.verticalHeader().hide()
        self.node_table.setSelectionBehavior(
            QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.node_table.setMinimumHeight(110)
        layout.addWidget(self.node_table)
        row = QtWidgets.QHBoxLayout()
        lead = QtWidgets.QPushButton("Lead with selected rows")
        lead.setToolTip("only the selected nodes count in the analysis (the 'leading part', "
                        "e.g. the hands of a gesture); the others get weight 0")
        lead.clicked.connect(self.lead_with_selected_rows)
        every = QtWidgets.QPushButton("All nodes")
        every.clicked.connect(lambda: self._set_weights({}))
        row.addWidget(lead)
        row.addWidget(every)
        layout.addLayout(row)
        return box

    def _build_analysis(self) -> QtWidgets.QGroupBox:
        box = QtWidgets.QGroupBox("Analysis")
        form = QtWidgets.QFormLayout(box)
        self.cost_combo = QtWidgets.QComboBox()
        for name in sorted(available_costs()):
            self.cost_combo.addItem(name)
            self.cost_combo.setItemData(self.cost_combo.count() - 1, get_cost(name).description,
                                        QtCore.Qt.ItemDataRole.ToolTipRole)
        self.cost_combo.currentTextChanged.connect(self._render_cost_options)
        form.addRow("cost", self.cost_combo)
        self.cost_options = QtWidgets.QWidget()
        self.cost_options_form = QtWidgets.QFormLayout(self.cost_options)
        self.cost_options_form.setContentsMargins(12, 0, 0, 0)
        form.addRow(self.cost_options)
        self.compose_combo = QtWidgets.QComboBox()
        self.compose_combo.addItems(list(COMPOSITIONS))
        self.compose_combo.setToolTip("max: minimise the worst segment; sum: their total")
        form.addRow("compose", self.compose_combo)
        self.pose_combo = QtWidgets.QComboBox()
        self.pose_combo.addItems(list(POSE_SPACES))
        form.addRow("pose space", self.pose_combo)
        range_row = QtWidgets.QHBoxLayout()
        self.first_spin = _spin(-10**7, 10**7, 0)
        self.last_spin = _spin(-10**7, 10**7, 0)
        playback = QtWidgets.QToolButton()
        playback.setText("playback range")
        playback.clicked.connect(self.use_playback_range)
        range_row.addWidget(self.first_spin)
        range_row.addWidget(QtWidgets.QLabel("to"))
        range_row.addWidget(self.last_spin)
        range_row.addWidget(playback)
        form.addRow("frames", range_row)
        self.stride_spin = _spin(1, 1000, 1)
        self.stride_spin.setToolTip("interior keys only on frames divisible by this")
        form.addRow("stride", self.stride_spin)
        self.span_spin = _spin(0, 10**6, 0, "no limit")
        self.span_spin.setToolTip("longest gap between two keyframes, frames")
        form.addRow("max span", self.span_spin)
        self.max_keys_spin = _spin(0, 10**6, 0, "auto (half the frames)")
        form.addRow("max keys", self.max_keys_spin)
        self.layered_box = QtWidgets.QCheckBox("keyposes + breakdowns")
        self.layered_box.setToolTip(
            "K counts keyposes chosen on the leading part (select its rows in the node table); "
            "breakdowns are then chosen on all nodes with the keyposes pinned")
        self.breakdown_spin = _spin(-1, 10**4, -1, "auto")
        self.breakdown_spin.setToolTip("breakdowns added to the keyposes (auto: the threshold "
                                       "rule of the breakdown space)")
        self.breakdown_spin.valueChanged.connect(self._breakdowns_changed)
        layered = QtWidgets.QHBoxLayout()
        layered.addWidget(self.layered_box)
        layered.addWidget(QtWidgets.QLabel("breakdowns"))
        layered.addWidget(self.breakdown_spin)
        form.addRow("mode", layered)
        self._render_cost_options(self.cost_combo.currentText())
        return box

    def _build_pins(self) -> QtWidgets.QGroupBox:
        box = QtWidgets.QGroupBox("Pins (frames that must be keys)")
        layout = QtWidgets.QVBoxLayout(box)
        self.pin_table = QtWidgets.QTableWidget(0, 3)
        self.pin_table.setHorizontalHeaderLabels(["frame", "name", "note"])
        self.pin_table.horizontalHeader().setSectionResizeMode(
            2, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.pin_table.verticalHeader().hide()
        self.pin_table.setMinimumHeight(80)
        self.pin_table.itemChanged.connect(self._pins_edited)
        layout.addWidget(self.pin_table)
        row = QtWidgets.QHBoxLayout()
        add_current = QtWidgets.QPushButton("Add current frame")
        add_current.clicked.connect(self.pin_current_frame)
        self.pin_entry = QtWidgets.QLineEdit()
        self.pin_entry.setPlaceholderText("frames, e.g. 1040, 1100")
        self.pin_entry.returnPressed.connect(self.pin_typed_frames)
        remove = QtWidgets.QPushButton("Remove")
        remove.clicked.connect(self.remove_selected_pins)
        row.addWidget(add_current)
        row.addWidget(self.pin_entry, 1)
        row.addWidget(remove)
        layout.addLayout(row)
        row = QtWidgets.QHBoxLayout()
        importer = QtWidgets.QPushButton("Import…")
        importer.clicked.connect(self._import_pins_dialog)
        exporter = QtWidgets.QPushButton("Export…")
        exporter.clicked.connect(self._export_pins_dialog)
        row.addStretch(1)
        row.addWidget(importer)
        row.addWidget(exporter)
        layout.addLayout(row)
        return box

    def _build_apply(self) -> QtWidgets.QGroupBox:
        box = QtWidgets.QGroupBox("Apply")
        grid = QtWidgets.QGridLayout(box)
        self.tangent_combo = QtWidgets.QComboBox()
        self.tangent_combo.addItems(list(TANGENT_MODES))
        self.tangent_combo.currentTextChanged.connect(self._update_enabled)
        self.smooth_spin = QtWidgets.QDoubleSpinBox()
        self.smooth_spin.setRange(0.0, 1e6)
        self.smooth_spin.setDecimals(3)
        self.smooth_spin.setValue(1.0)
        self.space_combo = QtWidgets.QComboBox()
        self.space_combo.addItems(list(FIT_SPACES))
        self.space_combo.setToolTip("world: fit what the viewer shows (joint positions); "
                                    "channel: fit the curves (faster)")
        self.layer_edit = QtWidgets.QLineEdit("salientPoses")
        self.residual_box = QtWidgets.QCheckBox("store residual layer, weight")
        self.residual_box.setToolTip("an additive layer with original − reduced: at weight 1 "
                                     "the scene plays the original motion again")
        self.residual_box.toggled.connect(self._update_enabled)
        self.residual_spin = QtWidgets.QDoubleSpinBox()
        self.residual_spin.setRange(0.0, 1.0)
        self.residual_spin.setSingleStep(0.1)
        self.residual_spin.setValue(1.0)
        self.apply_button = QtWidgets.QPushButton("Apply")
        self.apply_button.clicked.connect(self.apply)
        self.remove_button = QtWidgets.QPushButton("Remove")
        self.remove_button.setToolTip("delete the layers Apply created")
        self.remove_button.clicked.connect(self.remove)
        grid.addWidget(QtWidgets.QLabel("tangents"), 0, 0)
        grid.addWidget(self.tangent_combo, 0, 1)
        grid.addWidget(QtWidgets.QLabel("smoothness"), 0, 2)
        grid.addWidget(self.smooth_spin, 0, 3)
        grid.addWidget(QtWidgets.QLabel("fit"), 1, 0)
        grid.addWidget(self.space_combo, 1, 1)
        grid.addWidget(QtWidgets.QLabel("layer"), 1, 2)
        grid.addWidget(self.layer_edit, 1, 3)
        grid.addWidget(self.residual_box, 2, 0, 1, 3)
        grid.addWidget(self.residual_spin, 2, 3)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.remove_button)
        buttons.addWidget(self.apply_button)
        grid.addLayout(buttons, 3, 0, 1, 4)
        return box

    def _show_session_options(self) -> None:
        """Start from the session's options (the engine's defaults)."""
        a, r = self.session.analysis, self.session.reduction
        self.cost_combo.setCurrentText(a.cost)
        self.compose_combo.setCurrentText(a.compose)
        self.pose_combo.setCurrentText(a.pose)
        self.stride_spin.setValue(a.stride)
        self.span_spin.setValue(a.max_span or 0)
        self.max_keys_spin.setValue(a.max_keys or 0)
        self.tangent_combo.setCurrentText(r.tangents)
        self.smooth_spin.setValue(r.smoothness)
        self.space_combo.setCurrentText(r.space)
        self.layer_edit.setText(r.layer)
        self.residual_box.setChecked(r.residual)
        self.residual_spin.setValue(r.residual_weight)
        self._show_pins()

    # ------------------------------------------------------------------ setup actions
    def refresh_from_host(self) -> None:
        """Fill roots, nodes and range from the host (keeps user weights where names match)."""
        try:
            roots = self.session.roots()
            nodes = [n for n, _ in self.session.host.hierarchy(roots)]
            first, last = self.session.host.playback_range()
        except SalientPosesError as exc:
            self.show_error(str(exc))
            return
        self.roots_label.setText("under: " + ", ".join(roots))
        weights = self.session.analysis.weights
        self.node_table.setRowCount(len(nodes))
        for row, name in enumerate(nodes):
            item = QtWidgets.QTableWidgetItem(name)
            item.setFlags(item.flags() & ~QtCore.Qt.ItemFlag.ItemIsEditable)
            self.node_table.setItem(row, 0, item)
            weight = QtWidgets.QDoubleSpinBox()
            weight.setRange(0.0, 100.0)
            weight.setSingleStep(0.5)
            weight.setValue(weights.get(name, 1.0))
            self.node_table.setCellWidget(row, 1, weight)
        if self.session.analysis.frame_range is None:
            self.first_spin.setValue(first)
            self.last_spin.setValue(last)

    def use_host_selection(self) -> None:
        self.session.analysis.roots = None
        self.refresh_from_host()

    def use_playback_range(self) -> None:
        first, last = self.session.host.playback_range()
        self.first_spin.setValue(first)
        self.last_spin.setValue(last)

    def lead_with_selected_rows(self) -> None:
        rows = {index.row() for index in self.node_table.selectionModel().selectedRows()}
        if not rows:
            self.show_error("select the rows of the leading nodes first")
            return
        names = [self.node_table.item(r, 0).text() for r in range(self.node_table.rowCount())]
        self._set_weights({n: (1.0 if r in rows else 0.0) for r, n in enumerate(names)})

    def _set_weights(self, weights: dict[str, float]) -> None:
        for row in range(self.node_table.rowCount()):
            name = self.node_table.item(row, 0).text()
            self.node_table.cellWidget(row, 1).setValue(weights.get(name, 1.0))

    def _render_cost_options(self, name: str) -> None:
        """One editor per declared option of the cost (the panel knows no cost)."""
        while self.cost_options_form.rowCount():
            self.cost_options_form.removeRow(0)
        self._option_editors: dict[str, QtWidgets.QWidget] = {}
        for option in get_cost(name).options:
            editor: QtWidgets.QWidget
            if option.choices:
                editor = QtWidgets.QComboBox()
                editor.addItems([str(c) for c in option.choices])
                editor.setCurrentText(str(option.default))
            elif option.type is bool:
                editor = QtWidgets.QCheckBox()
                editor.setChecked(bool(option.default))
            elif option.type is int:
                editor = _spin(int(option.minimum if option.minimum is not None else -10**6),
                               int(option.maximum if option.maximum is not None else 10**6),
                               int(option.default))
            elif option.type is float:
                editor = QtWidgets.QDoubleSpinBox()
                editor.setDecimals(4)
                editor.setRange(option.minimum if option.minimum is not None else -1e9,
                                option.maximum if option.maximum is not None else 1e9)
                editor.setValue(float(option.default))
            else:
                editor = QtWidgets.QLineEdit(str(option.default))
            editor.setToolTip(option.help)
            self._option_editors[option.name] = editor
            self.cost_options_form.addRow(option.name, editor)
        self.cost_options.setVisible(bool(self._option_editors))

    def _cost_option_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, editor in self._option_editors.items():
            if isinstance(editor, QtWidgets.QComboBox):
                values[name] = editor.currentText()
            elif isinstance(editor, QtWidgets.QCheckBox):
                values[name] = editor.isChecked()
            elif isinstance(editor, QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox):
                values[name] = editor.value()
            elif isinstance(editor, QtWidgets.QLineEdit):
                values[name] = editor.text()
        return values

    # ------------------------------------------------------------------ pins
    def _show_pins(self) -> None:
        self.pin_table.blockSignals(True)
        pins = self.session.analysis.pins
        self.pin_table.setRowCount(len(pins))
        for row, pin in enumerate(pins):
            frame = QtWidgets.QTableWidgetItem(str(pin.frame))
            frame.setFlags(frame.flags() & ~QtCore.Qt.ItemFlag.ItemIsEditable)
            self.pin_table.setItem(row, 0, frame)
            self.pin_table.setItem(row, 1, QtWidgets.QTableWidgetItem(pin.name))
            self.pin_table.setItem(row, 2, QtWidgets.QTableWidgetItem(pin.note))
        self.pin_table.blockSignals(False)

    def _pins_edited(self, item: QtWidgets.QTableWidgetItem) -> None:
        pin = self.session.analysis.pins[item.row()]
        if item.column() == 1:
            pin.name = item.text()
        elif item.column() == 2:
            pin.note = item.text()

    def add_pins(self, frames: list[int]) -> None:
        have = {p.frame for p in self.session.analysis.pins}
        self.session.analysis.pins.extend(Pin(f) for f in frames if f not in have)
        self.session.analysis.pins.sort(key=lambda p: p.frame)
        self._show_pins()

    def pin_current_frame(self) -> None:
        self.add_pins([self.session.host.current_frame()])

    def pin_typed_frames(self) -> None:
        text = self.pin_entry.text().replace(";", ",")
        try:
            frames = [int(f) for f in text.split(",") if f.strip()]
        except ValueError:
            self.show_error(f"pins take whole frame numbers separated by commas, got {text!r}")
            return
        self.add_pins(frames)
        self.pin_entry.clear()

    def remove_selected_pins(self) -> None:
        rows = sorted({i.row() for i in self.pin_table.selectedIndexes()}, reverse=True)
        for row in rows:
            del self.session.analysis.pins[row]
        self._show_pins()

    def _import_pins_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Import pins", "", "JSON (*.json)")
        if path:
            try:
                self.session.import_pins(path)
            except SalientPosesError as exc:
                self.show_error(str(exc))
                return
            self._show_pins()

    def _export_pins_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export pins", "pins.json",
                                                        "JSON (*.json)")
        if path:
            self.session.export_pins(path)

    # ------------------------------------------------------------------ analysis
    def collect_options(self) -> None:
        """Copy the widgets' values into the session's analysis and reduction options."""
        a = self.session.analysis
        a.cost = self.cost_combo.currentText()
        a.cost_options = self._cost_option_values()
        a.compose = self.compose_combo.currentText()
        a.pose = self.pose_combo.currentText()
        a.frame_range = (self.first_spin.value(), self.last_spin.value())
        a.stride = self.stride_spin.value()
        a.max_span = self.span_spin.value() or None
        a.max_keys = self.max_keys_spin.value() or None
        weights = {}
        for row in range(self.node_table.rowCount()):
            value = self.node_table.cellWidget(row, 1).value()
            if value != 1.0:
                weights[self.node_table.item(row, 0).text()] = value
        a.weights = weights
        a.layered = self.layered_box.isChecked()
        rows = sorted({i.row() for i in self.node_table.selectionModel().selectedRows()})
        a.leading = [self.node_table.item(r, 0).text() for r in rows]
        a.breakdowns = None if self.breakdown_spin.value() < 0 else self.breakdown_spin.value()
        r = self.session.reduction
        r.tangents = self.tangent_combo.currentText()
        r.smoothness = self.smooth_spin.value()
        r.space = self.space_combo.currentText()
        r.layer = self.layer_edit.text().strip() or "salientPoses"
        r.residual = self.residual_box.isChecked()
        r.residual_weight = self.residual_spin.value()

    def start_analysis(self) -> None:
        if self._thread is not None:
            return
        self.collect_options()
        self._save_settings()
        if self.session.analysis.layered and not self.session.analysis.leading:
            self.show_error("keyposes + breakdowns: select the rows of the leading part in the "
                            "node table first (e.g. the hands of a gesture)")
            return
        try:
            self._thread, self._worker = start_analysis(self.session, self)
        except SalientPosesError as exc:
            self.show_error(str(exc))
            return
        self._worker.progress.connect(self._on_progress)
        self._worker.finished.connect(self._on_finished)
        self._worker.failed.connect(self._on_failed)
        self._worker.cancelled.connect(self._on_cancelled)
        self._thread.finished.connect(self._on_thread_done)
        self.progress.setValue(0)
        self.show_status("Analysing…")
        self._update_enabled()

    def cancel_analysis(self) -> None:
        if self._worker is not None:
            self._worker.token.cancel()
            self.show_status("Cancelling…")

    @property
    def analysing(self) -> bool:
        return self._thread is not None

    def _on_progress(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(1000 * fraction))
        self.progress.setFormat(f"{message} (%p%)")

    def _on_finished(self, space: Any) -> None:
        motion = self.session.motion
        scale = 1.0
        if motion is not None:
            try:
                scale = motion.mm_per_unit()
            except SalientPosesError:
                scale = 1.0
        self.graph.set_space(space, scale)
        for widget in (self.k_slider, self.k_spin):
            widget.blockSignals(True)
            widget.setRange(space.min_keys, space.max_keys)
            widget.blockSignals(False)
        self.progress.setValue(1000)
        self.progress.setFormat("done")
        s = space.suggestions()
        t = space.timings
        self.show_status(f"Analysed frames {space.first_frame}–{space.last_frame} in "
                         f"{t['table_s'] + t['select_s']:.2f} s. Suggested K = {s['threshold']}; "
                         f"cliffs at {', '.join(map(str, s['cliffs'])) or 'none'}.", ok=True)
        self.request_k(self.session.k if self.session.k is not None else s["threshold"],
                       immediately=True)
        self.wand.on_analysed()

    def _wand_status(self, text: str, error: bool = False) -> None:
        if error:
            self.show_error(text)
        else:
            self.show_status(text, ok=True)
        self._update_enabled()

    def _on_failed(self, message: str) -> None:
        self.progress.setFormat("failed")
        self.show_error(message)

    def _on_cancelled(self) -> None:
        self.progress.setValue(0)
        self.progress.setFormat("cancelled")
        self.show_status("Analysis cancelled; the previous result is kept.")

    def _on_thread_done(self) -> None:
        if self._thread is not None:
            self._thread.deleteLater()
        self._thread = None
        self._worker = None
        self._update_enabled()

    # ------------------------------------------------------------------ K
    def request_k(self, k: int, immediately: bool = False) -> None:
        """Show K everywhere at once; preview it in the host within one UI frame."""
        if self.session.space is None:
            return
        space = self.session.space
        k = int(min(max(int(k), space.min_keys), space.max_keys))
        self._sync_k_widgets(k)
        self._pending_k = k
        if immediately:
            self._preview_pending()
        elif not self._preview_timer.isActive():
            self._preview_timer.start()

    def _preview_pending(self) -> None:
        if self._pending_k is None:
            return
        k, self._pending_k = self._pending_k, None
        try:
            self.session.set_k(k)
        except SalientPosesError as exc:
            self.show_error(str(exc))
        except Exception as exc:  # noqa: BLE001 - never a traceback in the panel
            self.show_error(f"preview failed: internal error ({type(exc).__name__}: {exc}); "
                            "please report it")

    def _sync_k_widgets(self, k: int) -> None:
        for widget in (self.k_slider, self.k_spin):
            if widget.value() != k:
                widget.blockSignals(True)
                widget.setValue(k)
                widget.blockSignals(False)
        self.k_label.setText(str(k))
        self.graph.set_k(k)

    def _on_k_changed(self, k: int, frames: Any) -> None:
        self._sync_k_widgets(k)
        two_pass = self.session.two_pass
        self.graph.set_second(None if two_pass is None else two_pass.breakdown_space(k))
        chosen = self.session.selection(k)
        if chosen is not None:
            self.show_status(f"{len(chosen.keyposes)} keyposes, {len(chosen.breakdowns)} "
                             f"breakdowns: {', '.join(map(str, chosen.frames))}", ok=True)

    def _breakdowns_changed(self, value: int) -> None:
        self.session.analysis.breakdowns = None if value < 0 else value
        if self.session.space is not None and self.session.two_pass is not None:
            self.request_k(self.k_slider.value(), immediately=True)

    # ------------------------------------------------------------------ apply / remove
    def apply(self) -> None:
        if self.session.space is None:
            self.show_error("analyse first")
            return
        self._preview_pending()
        self.collect_options()
        self._save_settings()
        QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
        try:
            reduction = self.session.apply()
        except SalientPosesError as exc:
            self.show_error(f"Apply failed, the scene is unchanged: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - never a traceback in the panel
            self.show_error(f"Apply failed, the scene is unchanged: internal error "
                            f"({type(exc).__name__}: {exc}); please report it")
            return
        finally:
            QtWidgets.QApplication.restoreOverrideCursor()
        m = reduction.metrics
        layers = ", ".join(h.name for h in self.session.applied)
        skipped = ""
        if isinstance(self.session.host, SkipReport) and self.session.host.skipped:
            skipped = " Left alone: " + ", ".join(
                f"{plug} ({why})" for plug, why in self.session.host.skipped.items()) + "."
        if isinstance(self.session.host, HostNotes) and self.session.host.notes:
            skipped += " " + " ".join(self.session.host.notes)
        self.show_status(f"Applied {len(reduction.curves.frames)} keys "
                         f"({reduction.tangents}, {reduction.space} fit) into {layers}: mean "
                         f"error {m.mean_mm:.1f} mm, max {m.max_mm:.1f} mm at "
                         f"{m.worst_node}, frame {m.worst_frame}.{skipped}", ok=True)
        self._update_enabled()

    def remove(self) -> None:
        try:
            removed = self.session.remove()
        except SalientPosesError as exc:
            self.show_error(f"Remove failed: {exc}")
            return
        self.show_status(f"Removed {', '.join(h.name for h in removed) or 'nothing'}.", ok=True)
        self._update_enabled()

    # ------------------------------------------------------------------ status, state
    def show_status(self, text: str, ok: bool = False) -> None:
        self.status.setText(text)
        self.status.setProperty("kind", "ok" if ok else "")
        self.status.style().polish(self.status)

    def show_error(self, text: str) -> None:
        self.status.setText(text)
        self.status.setProperty("kind", "error")
        self.status.style().polish(self.status)

    def _update_enabled(self, *_args: object) -> None:
        busy = self._thread is not None
        has_space = self.session.space is not None
        self.analyze_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        for widget in (self.k_slider, self.k_spin, self.suggested_button, self.apply_button):
            widget.setEnabled(has_space and not busy)
        self.remove_button.setEnabled(bool(self.session.applied))
        self.smooth_spin.setEnabled(self.tangent_combo.currentText() == "smooth")
        self.residual_spin.setEnabled(self.residual_box.isChecked())

    _PERSISTED = ("cost", "compose", "pose", "stride", "max_span", "tangents", "smoothness",
                  "space", "layer", "residual", "residual_weight", "log")

    def _widgets(self) -> dict[str, tuple[QtWidgets.QWidget, type]]:
        return {"cost": (self.cost_combo, str), "compose": (self.compose_combo, str),
                "pose": (self.pose_combo, str), "stride": (self.stride_spin, int),
                "max_span": (self.span_spin, int), "tangents": (self.tangent_combo, str),
                "smoothness": (self.smooth_spin, float), "space": (self.space_combo, str),
                "layer": (self.layer_edit, str), "residual": (self.residual_box, bool),
                "residual_weight": (self.residual_spin, float),
                "log": (self.graph.log_box, bool)}

    def _save_settings(self) -> None:
        for key, (widget, _kind) in self._widgets().items():
            if isinstance(widget, QtWidgets.QComboBox):
                value: Any = widget.currentText()
            elif isinstance(widget, QtWidgets.QCheckBox):
                value = widget.isChecked()
            elif isinstance(widget, QtWidgets.QLineEdit):
                value = widget.text()
            else:
                value = widget.value()
            self.settings.setValue(key, value)
        self.settings.sync()

    def _restore_settings(self) -> None:
        for key, (widget, kind) in self._widgets().items():
            stored = self.settings.value(key)
            if stored is None:
                continue
            try:
                value = (str(stored).lower() == "true") if kind is bool else kind(stored)
            except (TypeError, ValueError):
                continue
            if isinstance(widget, QtWidgets.QComboBox):
                if widget.findText(str(value)) >= 0:
                    widget.setCurrentText(str(value))
            elif isinstance(widget, QtWidgets.QCheckBox):
                widget.setChecked(bool(value))
            elif isinstance(widget, QtWidgets.QLineEdit):
                widget.setText(str(value))
            else:
                widget.setValue(value)

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.cancel_analysis()
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait(5000)
        self.collect_options()
        self._save_settings()
        super().closeEvent(event)
