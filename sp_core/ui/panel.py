"""The Salient Poses panel: a plain QWidget any host can dock (usable from ~350 px wide).

It assembles the boxes (Character, Analysis, Pins in the Setup tab; the K area and Apply in the
Keyframes tab; Propagate edit) over one :class:`sp_core.session.Session`, whose options object
is the single source of truth: every editor is bound to an option field
(:mod:`sp_core.ui.bindings`), settings persist the options, and Analyze and Apply read nothing
from widgets. Analyses, the reductions of Apply and the error estimates of the K shown run in
worker threads; their results come back as signals and only then change the session (on the UI
thread, where host APIs belong). K changes preview the keyframes in the host, throttled to one
preview per frame of the UI (16 ms).
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets

from sp_core.errors import OptionError, SalientPosesError, said
from sp_core.host import write_report
from sp_core.options import Options, field_specs, flag_of, k_for, words_of
from sp_core.poses import error_unit
from sp_core.reduction import Reduction
from sp_core.session import Analysis, Session
from sp_core.ui.analysis_box import AnalysisBox
from sp_core.ui.apply_box import APPLY_TIP, ApplyBox, apply_summary
from sp_core.ui.bindings import Binder
from sp_core.ui.estimate import ErrorEstimator, describe
from sp_core.ui.k_box import KBox
from sp_core.ui.nodes_box import NodesBox
from sp_core.ui.pins_box import PinsBox
from sp_core.ui.settings import panel_settings, restore_options, save_options
from sp_core.ui.wand_tab import PropagateTab
from sp_core.ui.worker import Task, TaskRunner, readable

if TYPE_CHECKING:
    from sp_core.selection import SelectionSpace

#: Longest time between a K change and its preview in the host, ms.
PREVIEW_INTERVAL_MS = 16
#: A command-line flag in the schema's help text.
FLAG = re.compile(r"--[a-z][a-z-]*[a-z]")

STYLE = """
QWidget#salientPosesPanel { font-size: 12px; }
QGroupBox { font-weight: bold; border: 1px solid #555; border-radius: 4px; margin-top: 8px;
            padding-top: 6px; }
QGroupBox::title { subcontrol-origin: margin; left: 8px; padding: 0 4px; }
QLabel#status { padding: 4px; border-radius: 3px; }
QLabel#status[kind="error"] { background: #5a2a2a; color: #ffd7d7; }
QLabel#status[kind="ok"] { background: #2a4a2f; color: #d8f5dc; }
QLabel#bigK { font-size: 20px; font-weight: bold; min-width: 36px; }
QLabel#kError { font-weight: bold; }
"""


class _Page(QtWidgets.QWidget):
    """A tab's page whose height for a width is its layout's *minimum* (wrapped labels
    included): a resizable scroll area makes the page that tall at least, and the viewport's
    height when it is taller, so the stretching rows (the graph) grow into a tall dock and
    shrink to their minimum before the page scrolls. (A widget's own height for a width is
    its layout's preferred height: the graph at its preferred height pushed the K controls
    and Apply below the fold.)"""

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        layout = self.layout()
        return layout.totalMinimumHeightForWidth(width) if layout is not None \
            else super().heightForWidth(width)


class _Scroll(QtWidgets.QScrollArea):
    """A vertical scroll area at least as wide as its page needs now (and its scroll bar): it
    never scrolls sideways, so a narrower dock would cut the page's right side off (Apply
    with it); the page's needs change as its texts do (after an analysis)."""

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        page = self.widget()
        if page is not None:
            hint.setWidth(max(hint.width(), page.minimumSizeHint().width()
                              + self.verticalScrollBar().sizeHint().width()))
        return hint


def scrolled(page: QtWidgets.QWidget) -> QtWidgets.QScrollArea:
    """``page`` (a :class:`_Page`) in a vertical scroll area (:class:`_Scroll`): in a short
    dock (a laptop's Maya) the page scrolls instead of squeezing its rows below their height
    (the Apply summary was cut to one line in a 700-pixel window, the rows over the graph
    overlapped)."""
    scroll = _Scroll()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setWidget(page)
    return scroll


class _ProgressBar(QtWidgets.QProgressBar):
    """A progress bar whose text is elided to one line of its width, the percentage kept:
    a stage's message ("K = 49: fitting 49 keys in channel space") wrapped inside a
    dock-wide bar, its second line cut off."""

    def text(self) -> str:
        whole = super().text()
        metrics = self.fontMetrics()
        room = self.contentsRect().width() - 2 * metrics.averageCharWidth()
        if metrics.horizontalAdvance(whole) <= room:
            return whole
        head, opening, rest = whole.rpartition(" (")
        percent = bool(opening) and rest.endswith("%)")
        message, tail = (head, opening + rest) if percent else (whole, "")
        short = metrics.elidedText(message, QtCore.Qt.TextElideMode.ElideRight,
                                   max(room - metrics.horizontalAdvance(tail), 0))
        return short + tail if short.strip("…") else (rest[:-1] if percent else short)


class _StatusScroll(QtWidgets.QScrollArea):
    """The status line's holder: as tall as its text at the current width, up to
    :attr:`LINES` whole lines, the rest a scroll away (by lines). A long note (a long take's
    window) then scrolls instead of pushing the pages, and Apply with them, out of a short
    dock, and the holder's height is never left to the layout, which had cut a line in half
    (read as a broken last line). While ``keep()`` it does not shrink: its text then sits at
    the top."""

    LINES = 5

    def __init__(self, label: QtWidgets.QLabel, keep: Callable[[], bool]) -> None:
        super().__init__()
        self._keep = keep
        self._kept = 0
        self.setWidget(label)
        self.setWidgetResizable(True)
        self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred,
                           QtWidgets.QSizePolicy.Policy.Fixed)
        self._label = label
        self._width = -1
        self.verticalScrollBar().setSingleStep(label.fontMetrics().lineSpacing())

    def _height(self) -> int:
        label = self._label
        spacing = label.fontMetrics().lineSpacing()
        margins = label.contentsMargins()  # (the style sheet's padding)
        # (a text that scrolls has its bottom padding at its end: in view above it, the next
        # line's top would show)
        most = self.LINES * spacing + margins.top()
        width = self.viewport().width() if self.width() > 0 else label.sizeHint().width()
        height = min(label.heightForWidth(width), most)
        if self._keep():
            height = max(height, self._kept)
        self._kept = height
        return height

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt's name
        return QtCore.QSize(super().sizeHint().width(), self._height())

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt's name
        return QtCore.QSize(super().minimumSizeHint().width(), self._height())

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if event.size().width() != self._width:  # the text wraps anew: another height
            self._width = event.size().width()
            self.updateGeometry()


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
        self.settings = settings or panel_settings()
        self.runner = TaskRunner(self)
        self._analysis: Task | None = None
        self._applying: Task | None = None
        self._started = 0.0
        self._said_stale = False  # the status says an option changed since the analysis
        self._said_refused = False  # the status says an option value was refused
        self._apply_options = session.options  # the options of the running (or last) Apply
        self._analysis_started = 0.0
        self._graph_ahead = False  # the graph shows a space the session has not adopted yet
        self._closed = False
        self._pending_k: int | None = None
        self._pending_user = False
        self._preview_timer = QtCore.QTimer(self)
        self._preview_timer.setSingleShot(True)
        self._preview_timer.setInterval(PREVIEW_INTERVAL_MS)
        self._preview_timer.timeout.connect(self._preview_pending)
        self._clock = QtCore.QTimer(self)  # elapsed time of a running Apply
        self._clock.setInterval(250)
        self._clock.timeout.connect(self._tick)
        self.binder = Binder(session, self._refused, self)
        self._build()
        # how messages name options here: the rows' labels, fixed once the forms are built
        self._labels = {name: self.option_label(name) for name in field_specs()}
        self.binder.labels = self._labels
        self._tooltips_in_labels()
        self._restore_settings()
        self.nodes.refresh_from_host()
        self.estimator = ErrorEstimator(session, self.runner)
        self.estimator.ready.connect(lambda _k, text: self.k_box.error_label.setText(text))
        self._unsubscribe = [session.subscribe("k_changed", self._on_k_changed),
                             session.subscribe("options_changed", self._on_options_changed)]
        self._on_options_changed(session.options)
        self._update_enabled()  # (before an analysis only Analyze may be pressed)

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        title = QtWidgets.QLabel(f"<b>Salient Poses</b> — {self.session.host.name}")
        outer.addWidget(title)
        run_row = QtWidgets.QHBoxLayout()
        self.analyze_button = QtWidgets.QPushButton("Analyze")
        self.analyze_button.setDefault(True)
        self.analyze_button.setToolTip("find the best keyframes for every K (F5); runs in the "
                                       "background")
        self.analyze_button.clicked.connect(self.start_analysis)
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.cancel_button.setToolTip("stop the running Analyze or Apply (Esc); nothing "
                                      "changes")
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = _ProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("")
        self.progress.setMinimumWidth(60)
        run_row.addWidget(self.analyze_button)
        run_row.addWidget(self.cancel_button)
        run_row.addWidget(self.progress, 1)
        outer.addLayout(run_row)

        self.tabs = QtWidgets.QTabWidget()
        keys_tab = _Page()
        keys_layout = QtWidgets.QVBoxLayout(keys_tab)
        keys_layout.setContentsMargins(2, 2, 2, 2)
        self.k_box = KBox(self.binder)
        self.k_box.k_requested.connect(lambda k: self.request_k(k, user=True))
        self.k_box.suggested_requested.connect(self.use_suggested_k)
        self.k_box.ratio_requested.connect(self.use_ratio)
        keys_layout.addWidget(self.k_box, 1)
        self.apply_box = ApplyBox(self.binder)
        self.apply_box.apply_button.clicked.connect(self.apply)
        self.apply_box.remove_button.clicked.connect(self.remove)
        keys_layout.addWidget(self.apply_box)
        self.tabs.addTab(scrolled(keys_tab), "Keyframes")

        setup = _Page()
        setup_layout = QtWidgets.QVBoxLayout(setup)
        setup_layout.setContentsMargins(0, 0, 0, 0)
        self.nodes = NodesBox(self.binder, self.show_error)
        self.analysis_box = AnalysisBox(self.binder, self.show_error)
        self.pins = PinsBox(self.binder, self.show_error)
        setup_layout.addWidget(self.nodes, 1)
        setup_layout.addWidget(self.analysis_box)
        setup_layout.addWidget(self.pins)
        self.tabs.addTab(scrolled(setup), "Setup")
        self.wand = PropagateTab(self.binder, self._wand_status, self.runner)
        # scrolled too: unscrolled, its form and plot set the whole panel's minimum height
        wand_page = _Page()
        wand_layout = QtWidgets.QVBoxLayout(wand_page)
        wand_layout.setContentsMargins(0, 0, 0, 0)
        wand_layout.addWidget(self.wand)
        self.tabs.addTab(scrolled(wand_page), "Propagate edit")
        outer.addWidget(self.tabs, 1)

        self.status = QtWidgets.QLabel("Select the character and press Analyze.")
        self.status.setObjectName("status")
        # (at the top of a holder kept taller, see _StatusScroll; no indent above it, which
        # Qt adds on the aligned side of a label with a frame)
        self.status.setAlignment(QtCore.Qt.AlignmentFlag.AlignLeft
                                 | QtCore.Qt.AlignmentFlag.AlignTop)
        self.status.setIndent(0)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        # (while an analysis runs its height only grows: each new height had the whole
        # panel laid out and painted anew, 25-45 ms on the UI thread at its start and when
        # its graph is first drawn)
        self.status_holder = _StatusScroll(self.status, keep=lambda: self.analysing)
        outer.addWidget(self.status_holder)
        self._shortcuts()

    def _tooltips_in_labels(self) -> None:
        """The schema's help names other options by their command-line flags ("see
        --corrective-budget"); in the panel's tooltips they are named as its rows are."""
        names = {flag_of(name): name for name in field_specs()}

        def label(match: re.Match[str]) -> str:
            name = names.get(match.group())
            return f"'{self._labels[name]}'" if name is not None else match.group()
        for widget in self.findChildren(QtWidgets.QWidget):
            if "--" in widget.toolTip():
                widget.setToolTip(FLAG.sub(label, widget.toolTip()))

    def _shortcuts(self) -> None:
        self.shortcuts: list[QtGui.QShortcut] = []
        for keys, action in (("F5", self.start_analysis), ("Ctrl+Return", self.apply),
                             ("Escape", self.cancel), ("S", self.use_suggested_k),
                             ("[", lambda: self._step_k(-1)), ("]", lambda: self._step_k(1))):
            shortcut = QtGui.QShortcut(QtGui.QKeySequence(keys), self)
            shortcut.activated.connect(action)
            self.shortcuts.append(shortcut)
        self.set_shortcut_context(QtCore.Qt.ShortcutContext.WidgetWithChildrenShortcut)
        # the K spin box, a text field, would take [, ] and S as typing (they name no number)
        self.k_spin.installEventFilter(self)

    def set_shortcut_context(self, context: QtCore.Qt.ShortcutContext) -> None:
        """Where the panel's keys work: in the panel (a dock in a host application, whose own
        keys are left alone), or the whole window (the standalone viewer's)."""
        for shortcut in self.shortcuts:
            shortcut.setContext(context)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if (watched is self.k_spin and event.type() == QtCore.QEvent.Type.ShortcutOverride
                and isinstance(event, QtGui.QKeyEvent) and event.text() in ("[", "]", "S", "s")):
            return True  # not taken as typing: the panel's shortcut gets the key
        return super().eventFilter(watched, event)

    # the widgets tests and hosts reach for
    @property
    def graph(self):  # noqa: ANN201 - ErrorGraph
        return self.k_box.graph

    @property
    def k_slider(self) -> QtWidgets.QSlider:
        return self.k_box.k_slider

    @property
    def k_spin(self) -> QtWidgets.QSpinBox:
        return self.k_box.k_spin

    @property
    def k_label(self) -> QtWidgets.QLabel:
        return self.k_box.k_label

    @property
    def apply_button(self) -> QtWidgets.QPushButton:
        return self.apply_box.apply_button

    @property
    def remove_button(self) -> QtWidgets.QPushButton:
        return self.apply_box.remove_button

    @property
    def node_table(self) -> QtWidgets.QTableWidget:
        return self.nodes.table

    def widget(self, name: str) -> QtWidgets.QWidget:
        """The editor bound to option field ``name``."""
        return self.binder.widget(name)

    # ------------------------------------------------------------------ options
    def _refused(self, error: str | Exception) -> None:
        """An option value refused: said in red until a value is taken."""
        self.show_error(error)
        self._said_refused = True

    def _on_options_changed(self, options: Options) -> None:
        self._save_settings()
        if self._said_refused:  # (the value refused before stayed in red over the one taken)
            self._said_refused = False
            self.show_status("")
        fit = options.fit
        self.widget("smoothness").setEnabled(fit.tangents == "smooth")
        self.widget("world_iterations").setEnabled(fit.space == "world")
        self.widget("objective").setEnabled(fit.space == "world")
        self.widget("residual_weight").setEnabled(options.layer.residual_layer)
        self.k_box.show_key_choice()
        self._show_summary()
        if self.session.k is not None and self.session.space is not None and not self.busy:
            self.estimator.request(self.session.k)
            stale = self._stale()  # say at once that Apply will want a new analysis
            if stale:
                self.show_error(stale)
            elif self._said_stale:  # (set back as it was: the red line would mislead)
                self.show_status("The options match the analysis again.", ok=True)
            self._said_stale = bool(stale)

    def _stale(self) -> str:
        """What changed since the analysis that Apply needs a new one for ("" if nothing)."""
        try:
            self.session.check_analysis_current()
        except SalientPosesError as exc:
            return readable(exc, self.option_label)
        return ""

    def _show_summary(self) -> None:
        session = self.session
        replacing = bool(session.reduction_layers())  # (a propagated edit is kept)
        # (layered: K keyposes and their breakdowns)
        keys = None if session.k is None or session.space is None else len(session.keyframes())
        still = session.nothing_to_write() if session.space is not None else None
        self.apply_box.summary.setText(
            f"Nothing to write: {still}." if still is not None else
            apply_summary(session.options, keys, replacing, session.corrective_plan()))

    def _save_settings(self) -> None:
        save_options(self.settings, self.session.options)
        self.settings.setValue("log", self.graph.log_box.isChecked())

    def _restore_settings(self) -> None:
        log = self.settings.value("log")
        if log is not None:
            self.graph.log_box.setChecked(str(log).lower() == "true")
        restore_options(self.settings, self.session)

    # ------------------------------------------------------------------ analysis
    @property
    def analysing(self) -> bool:
        return self._analysis is not None

    @property
    def applying(self) -> bool:
        return self._applying is not None

    @property
    def busy(self) -> bool:
        return self._analysis is not None or self._applying is not None

    def start_analysis(self) -> None:
        if self.busy:
            return
        analysis = self.session.analysis
        if analysis.layered and not analysis.leading:
            self.show_error("keyposes + breakdowns: tick the leading nodes in the Setup tab's "
                            "node table first (e.g. the hands of a gesture)")
            return
        try:
            motion = self.session.read_motion()  # host APIs belong to the UI thread
            self.session.requested_k(motion)  # a K the range cannot hold is refused now
        except SalientPosesError as exc:
            self.show_error(exc)
            return
        session = self.session
        asked = session.options  # a change while the worker runs is said when it ends

        def work(report: Any, token: Any) -> Analysis:
            # the graph of the space comes before the tolerance's search, which is most of
            # the wait (seconds; on a take of thousands of frames, tens of seconds)
            return session.compute_analysis(progress=report, cancel=token, motion=motion,
                                            space_ready=task.show_partial, options=asked,
                                            graph=True)

        task = Task(work, name_of=self.option_words())
        task.progress.connect(self._on_progress)
        task.partial.connect(self._on_space_ready)
        task.finished.connect(self._on_analysed)
        task.failed.connect(self._on_failed)
        task.cancelled.connect(self._on_cancelled)
        self._analysis = self.runner.start(task)
        if self._analysis is None:
            return
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self._analysis_started = time.monotonic()
        self.show_status("Analysing…")
        self._update_enabled()

    def cancel(self) -> None:
        """Stop what runs; the panel is idle at once (the work stops in the background)."""
        if self._analysis is not None:
            task, self._analysis = self._analysis, None
            self._abandon(task)
            self.progress.setRange(0, 1000)
            self.progress.setValue(0)
            self.progress.setFormat("cancelled")
            self._show_session_space()
            self._say_kept()
        elif self._applying is not None:
            task, self._applying = self._applying, None
            self._abandon(task)
            self._clock.stop()
            self.progress.setRange(0, 1000)
            self.progress.setValue(0)
            self.progress.setFormat("cancelled")
            self.show_status("Apply cancelled; the scene is unchanged.")
        self._update_enabled()

    cancel_analysis = cancel

    def _abandon(self, task: Task) -> None:
        with warnings.catch_warnings():  # PySide warns about signals with no connection
            warnings.simplefilter("ignore", RuntimeWarning)
            for signal in (task.progress, task.partial, task.finished, task.failed,
                           task.cancelled):
                signal.disconnect()
        task.quit_on_end()
        task.cancel()

    def _on_progress(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(1000 * fraction))
        self.progress.setFormat(f"{message} (%p%)")
        self.progress.setToolTip(message)

    def _show_space(self, space: SelectionSpace, ahead: bool = False) -> dict[str, Any]:
        """Draw ``space``'s graph with its suggested K and cliffs and return those
        suggestions (``space.suggestions``); ``ahead``: a space the session has not adopted
        yet."""
        self._graph_ahead = ahead
        options = self.session.analysis
        s = self.session.suggestions if space is self.session.space \
            else space.suggestions(options.accuracy, options.significance)
        self.graph.set_space(space, s["threshold"], s["cliffs"], f"{space.cost.name} cost",
                             error_unit(options.pose, space.cost.squared))
        return s

    def _show_session_space(self) -> None:
        """The graph back to the session's space after an analysis that drew its own early
        and then did not finish."""
        if not self._graph_ahead:
            return
        if self.session.space is None:
            self._graph_ahead = False
            self.graph.set_space(None)
            return
        self._show_space(self.session.space)
        if self.session.k is not None:
            self.graph.set_k(self.session.k)

    def _on_space_ready(self, space: SelectionSpace) -> None:
        # the tolerance's search for K goes on: the graph now, K and the preview when it ends
        # (until then K requests are ignored: the session still holds the previous space)
        task = self._analysis
        if task is None:  # posted before a cancel
            return
        try:
            self._show_space(space, ahead=True)
            self.graph.readout.setText("Choosing K: the smallest within the tolerance…")
            waited = time.monotonic() - self._analysis_started if self._analysis_started \
                else 0.0
            self.show_status(f"Selection space of frames {space.first_frame}–"
                             f"{space.last_frame} ready in {waited:.1f} s; choosing the K "
                             "within the tolerance…")
        finally:
            # the search waits until the graph has painted (Task.show_partial): beside it,
            # the paint took turns on the GIL with the search's Python. The status' new
            # height is laid out first, or the graph painted, was resized and painted again.
            for _ in range(3):
                QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.LayoutRequest)
            self.graph.after_paint(task.partial_shown)

    def _on_analysed(self, analysis: Analysis) -> None:
        self._analysis = None
        try:
            space = self.session.adopt_analysis(analysis)
        except SalientPosesError as exc:
            self._show_session_space()
            self.show_error(exc)
            self._update_enabled()
            return
        s = self._show_space(space)
        self.k_box.set_range(space.min_keys, space.max_keys, self.graph.useful_range()[1])
        self.progress.setValue(1000)
        self.progress.setFormat("done")
        t = space.timings
        cliffs = ", ".join(map(str, s["cliffs"])) or "none"
        chosen = ""
        known = self.session.known_reduction() if self.session.k is not None else None
        if known is not None:  # the tolerance's search fitted the chosen K exactly
            m = known.metrics
            assert self.session.k is not None
            self.estimator.remember(self.session.k, m, "what Apply writes")
            chosen = (f" K = {self.session.k} keeps the error within the tolerance: "
                      f"{m.said(2, 1)} ({m.keys_said(self.session.k)}).")
        # the whole wait (the selection space took t's seconds; the tolerance's fits the rest)
        waited = t["table_s"] + t["select_s"]
        if self._analysis_started:
            waited = max(waited, time.monotonic() - self._analysis_started)
        # what the analysis wants the user to know (a long take's window, a tolerance out of
        # reach) comes last, where it is read
        notes = "".join(f" Note: {said(note, self.option_label).rstrip('.')}."
                        for note in self.session.notes)
        self.request_k(self.session.k if self.session.k is not None else s["threshold"],
                       immediately=True)
        # (after the K: the layered mode's keyposes would hide the notes)
        selection = self._selection_text(self.session.k)
        # an option changed while the analysis ran: said now, not at Apply
        stale = self._stale()
        self._said_stale = bool(stale)
        text = (f"Analysed frames {space.first_frame}–{space.last_frame} in {waited:.1f} s. "
                f"Suggested K = {s['threshold']}; cliffs at {cliffs}.{chosen}"
                f"{' ' + selection if selection else ''}{notes}")
        if stale:
            self.show_error(f"{text} {stale}")
        else:
            self.show_status(text, ok=True)
        self.wand.on_analysed()
        self._update_enabled()

    def _wand_status(self, text: str, error: bool = False) -> None:
        if error:
            self.show_error(text)
        else:
            self.show_status(text, ok=True)
        self._update_enabled()

    def _on_failed(self, message: str) -> None:
        self._analysis = None
        self.progress.setFormat("failed")
        self._show_session_space()
        self.show_error(message)
        self._update_enabled()

    def _on_cancelled(self) -> None:  # the work stopped itself (a cancellation check)
        self._analysis = None
        self.progress.setValue(0)
        self.progress.setFormat("cancelled")
        self._show_session_space()
        self._say_kept()
        self._update_enabled()

    def _say_kept(self) -> None:
        """A cancelled analysis: the previous one is kept, and whether the options still
        describe it (one changed while the cancelled one ran: Apply would refuse)."""
        stale = self._stale() if self.session.space is not None else ""
        self._said_stale = bool(stale)
        # (a first analysis cancelled has no previous result to keep)
        kept = " the previous result is kept." if self.session.space is not None else ""
        if stale:
            self.show_error(f"Analysis cancelled;{kept} {stale}")
        else:
            self.show_status(f"Analysis cancelled;{kept}" if kept else "Analysis cancelled.")

    # ------------------------------------------------------------------ K
    def request_k(self, k: int, immediately: bool = False, user: bool = False) -> None:
        """Show K everywhere at once; preview it in the host within one UI frame.

        ``user``: the user chose this K, so it becomes the ``keys`` option.
        """
        if self.session.space is None or self._graph_ahead or (user and self.busy):
            # (the graph shows an analysis still running: its K comes when it ends; a K
            # chosen during Apply would become the keys option beside layers of the K
            # pressed)
            return
        space = self.session.space
        k = int(min(max(int(k), space.min_keys), space.max_keys))
        self.k_box.sync(k)
        self._pending_k = k
        self._pending_user = user
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
            keys = self.session.options.keys
            if self._pending_user and keys.keys != k:
                self.binder.edit(keys=k, ratio=None, suggested=False)
        except SalientPosesError as exc:
            self.show_error(exc)
        except Exception as exc:  # noqa: BLE001 - never a traceback in the panel
            self.show_error(f"preview failed: internal error ({type(exc).__name__}: {exc}); "
                            "please report it")

    def _step_k(self, step: int) -> None:
        if self.session.k is not None and not self.busy:
            self.request_k(self.session.k + step, user=True)

    def use_suggested_k(self) -> None:
        if self.busy:  # (its shortcut too: as the K line, while Analyze or Apply runs)
            return
        if self.binder.edit(suggested=True, keys=None, ratio=None) and self.session.space:
            self.request_k(self.session.suggested_k, immediately=True)

    def use_ratio(self, ratio: float) -> None:
        if self.busy or not self.binder.edit(ratio=ratio, keys=None, suggested=False):
            return
        motion = self.session.motion
        if motion is not None and self.session.space is not None:
            try:
                k = k_for(self.session.options, motion.first_frame, motion.last_frame)
            except OptionError as exc:
                self.show_error(exc)
                return
            space = self.session.space
            if k is not None and not space.min_keys <= k <= space.max_keys:
                # (it was cut to the space's end, K = 75 under "ratio 1.000", without a word)
                self.show_error(f"ratio {ratio:g} asks for K = {k}, outside the {space.min_keys}"
                                f" to {space.max_keys} keys this analysis offers; press Analyze "
                                "to offer it")
                return
            if k is not None:
                self.request_k(k, immediately=True)

    def _on_k_changed(self, k: int, frames: Any) -> None:
        self.k_box.sync(k)
        two_pass = self.session.two_pass
        self.graph.set_second(None if two_pass is None else two_pass.breakdown_space(k))
        text = self._selection_text(k)
        if text:
            self.show_status(text, ok=True)
        self._show_summary()
        self.estimator.request(k)

    def _selection_text(self, k: int | None) -> str:
        """The layered mode's keyposes and breakdowns at ``k`` ("" in the other modes)."""
        chosen = None if k is None else self.session.selection(k)
        if chosen is None:
            return ""
        text = (f"{len(chosen.keyposes)} keyposes, {len(chosen.breakdowns)} breakdowns: "
                f"{', '.join(map(str, chosen.frames))}.")
        if not len(chosen.breakdowns):
            text += (" No breakdown improves on these keyposes by the accuracy threshold "
                     f"({self.session.analysis.accuracy:g}); set 'breakdowns' in Setup or "
                     "lower accuracy to add some.")
        return text

    # ------------------------------------------------------------------ apply / remove
    def ask_layer_action(self, name: str) -> str | None:
        """A layer ``name`` was written before: "replace", "add" or None (cancel)."""
        box = QtWidgets.QMessageBox(self)
        box.setObjectName("replaceOrAdd")
        box.setWindowTitle("Salient Poses")
        written = [h.name for h in self.session.reduction_layers()]  # (an edit is kept)
        if written == [name]:
            text = f"Apply already wrote a layer '{name}'. Replace it, or add another layer?"
        else:  # Replace takes every layer written here, as Remove does
            text = (f"Apply already wrote {', '.join(repr(n) for n in written)}. Replace "
                    "them, or add another layer?")
        box.setText(text)
        replace = box.addButton("Replace", QtWidgets.QMessageBox.ButtonRole.AcceptRole)
        add = box.addButton("Add new layer", QtWidgets.QMessageBox.ButtonRole.ActionRole)
        box.addButton(QtWidgets.QMessageBox.StandardButton.Cancel)
        box.exec()
        clicked = box.clickedButton()
        box.deleteLater()  # (a child of the panel: not kept for the panel's lifetime)
        return "replace" if clicked is replace else "add" if clicked is add else None

    def apply(self) -> None:
        """Fit in the worker (progress, Cancel), then write the layers here: one undo step."""
        if self.busy:
            return
        if self.session.space is None:
            self.show_error("analyse first")
            return
        stale = self._stale()
        if stale:
            self.show_error(stale)
            return
        self._preview_pending()
        layer = self.session.options.layer.layer
        replace, name = False, None
        # (any layer written before: a Replace's layer may have another name, the next free
        # one while the layers it replaced were there)
        if self.session.reduction_layers():  # (a propagated edit's layer is the artist's)
            action = self.ask_layer_action(layer)
            if action is None:
                return
            replace = action == "replace"
            if action == "add":  # this apply's layer; the option (and the next session) keep
                taken = {h.name for h in self.session.applied}  # the name the user gave
                number = 2
                while f"{layer}{number}" in taken:
                    number += 1
                name = f"{layer}{number}"
        session = self.session
        k = session.k
        frames, labels = session.keyframes(k), session.labels(k)
        asked = session.options  # what this Apply fits and records, whatever changes meanwhile

        def work(report: Any, token: Any) -> Reduction:
            def fitted(fraction: float, message: str) -> None:
                token.check()
                report(fraction, message)
            return session.reduce(frames, labels, progress=fitted, options=asked)

        task = Task(work, interruptible=True, name_of=self.option_words())
        # bound methods only: Qt then queues the calls to this (the UI) thread
        task.progress.connect(self._on_progress)
        task.finished.connect(self._on_reduced)
        task.failed.connect(self._on_apply_failed)
        task.cancelled.connect(self.cancel)
        self._apply_k, self._apply_replace, self._apply_name = k, replace, name
        self._apply_options = asked
        self._applying = self.runner.start(task)
        if self._applying is None:
            return
        self._started = time.monotonic()
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat("fitting (%p%)")
        self._clock.start()
        self._tick()
        self._update_enabled()

    def _tick(self) -> None:
        fit = self.session.options.fit
        self.show_status(f"Fitting {self.session.k} keys ({fit.tangents} tangents, {fit.space} "
                         f"fit)… {time.monotonic() - self._started:.0f} s; Cancel stops it.")

    def _on_reduced(self, reduction: Reduction) -> None:
        k, replace = self._apply_k, self._apply_replace
        self._applying = None
        self._clock.stop()
        self.progress.setRange(0, 1000)
        before = list(self.session.applied)
        try:
            # (one undo step: a failed write leaves the replaced layers where they were)
            self.session.apply(reduction, self._apply_name, replace=replace,
                               options=self._apply_options)
        except SalientPosesError as exc:
            self._on_apply_failed(readable(exc, self.option_label))
            return
        except Exception as exc:  # noqa: BLE001 - never a traceback in the panel
            self._on_apply_failed(f"internal error ({type(exc).__name__}: {exc}); please "
                                  "report it")
            return
        self.progress.setValue(1000)
        self.progress.setFormat("applied")
        m = reduction.metrics
        asked, now = self._apply_options, self.session.options
        moved = [self.option_label(f.name) for group in ("fit", "layer")
                 for f in fields(getattr(asked, group))
                 if getattr(getattr(now, group), f.name) != getattr(getattr(asked, group),
                                                                    f.name)]
        if asked.fit == now.fit:  # (figures of other fit options than the current ones are
            self.estimator.remember(k, m, "as applied")  # not kept)
        self.k_box.error_label.setText(describe(k, m, f"{reduction.space} fit, as applied"))
        layers = ", ".join(h.name for h in self.session.applied
                           if h not in before)  # this Apply's
        skipped = "".join(" " + sentence for sentence in write_report(self.session.host))
        if moved:
            skipped += (f" Changed during the fit, not in these layers: {', '.join(moved)} "
                        "(the next Apply uses them).")
        stale = self._stale()  # (an analysis option changed during the fit)
        self._said_stale = bool(stale)
        skipped += f" {stale}." if stale else ""
        self.show_status(f"Applied {m.keys_said(len(reduction.curves.frames))} "
                         f"({reduction.tangents}, {reduction.space} fit) into {layers}: error "
                         f"{m.said(1, 1)} at {m.worst_node}, frame {m.worst_frame}.{skipped}",
                         ok=True)
        self._show_summary()
        self._update_enabled()

    def _on_apply_failed(self, message: str) -> None:
        self._applying = None
        self._clock.stop()
        self.progress.setRange(0, 1000)
        self.progress.setFormat("failed")
        self.show_error(f"Apply failed, the scene is unchanged: {message}")
        self._update_enabled()

    def refresh_layers(self) -> None:
        """The host's layers changed outside the panel (an undo): Remove and the summary follow
        the session's list of applied layers."""
        if self.progress.format() in ("applied", "removed"):  # (it said "applied" with every
            applied = bool(self.session.applied)  # Apply undone, "removed" with them back)
            self.progress.setValue(1000 if applied else 0)
            self.progress.setFormat("applied" if applied else "")
        self._show_summary()
        self._update_enabled()

    def remove(self) -> None:
        try:
            removed = self.session.remove()
        except SalientPosesError as exc:
            self.show_error(f"Remove failed: {readable(exc, self.option_label)}")
            return
        self.show_status(f"Removed {', '.join(h.name for h in removed) or 'nothing'}.", ok=True)
        if removed:  # (it said "applied" with the layers gone)
            self.progress.setValue(0)
            self.progress.setFormat("removed")
        self.estimator.unapplied()
        if self.session.k is not None and self.session.space is not None:
            self.estimator.request(self.session.k)
        self._show_summary()
        self._update_enabled()

    # ------------------------------------------------------------------ status, state
    def show_status(self, text: str, ok: bool = False) -> None:
        self._say(text, "ok" if ok else "")

    def show_error(self, text: str | Exception) -> None:
        """The status line in red: a message, or an error with the options it names said as
        this panel's labels (:meth:`option_label`)."""
        if isinstance(text, Exception):
            text = readable(text, self.option_label)
        self._say(text, "error")

    def _say(self, text: str, kind: str) -> None:
        self.status.setText(text)
        self.status.setProperty("kind", kind)
        self.status.style().polish(self.status)
        self.status_holder.updateGeometry()  # (its height follows the text's lines)

    def option_label(self, name: str) -> str:
        """How this panel names option ``name`` in messages: the label of its row in a form
        ("max span", "memory (GiB)"), else the field name in words."""
        binding = self.binder.bindings.get(name)
        parent = binding.widget.parentWidget() if binding is not None else None
        form = parent.layout() if parent is not None else None
        if binding is not None and isinstance(form, QtWidgets.QFormLayout):
            label = form.labelForField(binding.widget)
            if isinstance(label, QtWidgets.QLabel) and label.text():
                return label.text()
        return words_of(name)

    def option_words(self) -> Callable[[str], str]:
        """:meth:`option_label` of every option, as read once the forms were built: what a
        task's worker thread may call, which must not touch a widget."""
        labels = self._labels
        return lambda name: labels.get(name, words_of(name))

    def _update_enabled(self, *_args: object) -> None:
        busy = self.busy
        has_space = self.session.space is not None
        self.analyze_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.k_box.set_enabled(has_space and not busy)
        # (the graph's K line too: a K chosen while Apply writes would become the keys
        # option beside layers of the K pressed)
        self.graph.marker.setMovable(has_space and not busy)
        still = self.session.nothing_to_write() if has_space else None
        self.apply_button.setEnabled(has_space and not busy and still is None)
        self.apply_button.setToolTip(APPLY_TIP if still is None else f"nothing to write: {still}")
        self.remove_button.setEnabled(bool(self.session.applied) and not busy)

    @property
    def settled(self) -> bool:
        """Nothing runs: no analysis, no Apply, no error estimate (for scripted runs)."""
        return not self.busy and self.estimator.idle

    def shutdown(self) -> None:
        """Stop every worker, wait for their threads and save the options (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._analysis = self._applying = None
        self._preview_timer.stop()
        self._clock.stop()
        self.estimator.stop()
        self.runner.close()
        self._save_settings()
        self.settings.sync()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self.binder.close()

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.shutdown()
        super().closeEvent(event)
