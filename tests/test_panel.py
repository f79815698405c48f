"""The PySide6 panel over a FakeHost (pytest-qt, offscreen): bindings, workers, drags, Apply."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from fake_host import FakeHost

pytest.importorskip("pytestqt")
from choices import SUGGESTED
from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402

from sp_core.errors import CapacityError, SelectionError  # noqa: E402
from sp_core.options import Options, field_specs  # noqa: E402
from sp_core.reduction import reduce  # noqa: E402
from sp_core.session import Session  # noqa: E402
from sp_core.standalone import StandaloneHost  # noqa: E402
from sp_core.ui.panel import SalientPosesPanel  # noqa: E402


@pytest.fixture()
def make_panel(qtbot, tmp_path, sample_clip):
    def make(fail_on=None, frames=(0, 300), width=480, host=None, options=SUGGESTED):
        host = host or FakeHost(sample_clip.sub_range(*frames), fail_on=fail_on)
        session = Session(host, options)
        settings = QtCore.QSettings(str(tmp_path / "panel.ini"), QtCore.QSettings.Format.IniFormat)
        panel = SalientPosesPanel(session, settings=settings)
        qtbot.addWidget(panel)
        panel.resize(width, 1000)
        panel.show()
        qtbot.waitExposed(panel)
        return panel, host, session
    return make


def analyse(qtbot, panel):
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.analysing, timeout=60_000)


def apply(qtbot, panel):
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.applying, timeout=120_000)


def settled(qtbot, panel):
    qtbot.waitUntil(lambda: panel.settled, timeout=60_000)


def commit_text(qtbot, line, text):
    """Type into a line edit as a user does: select all, type, Return."""
    line.selectAll()
    qtbot.keyClick(line, QtCore.Qt.Key.Key_Backspace)
    qtbot.keyClicks(line, text)
    qtbot.keyClick(line, QtCore.Qt.Key.Key_Return)


# ------------------------------------------------------------------ bindings (issue 16)
def test_every_panel_option_is_bound_to_a_widget(make_panel):
    panel, _host, _session = make_panel()
    wanted = {name for name, (_g, spec) in field_specs().items() if "panel" in spec.fronts}
    assert wanted <= set(panel.binder.bindings)
    for name in wanted:
        widget = panel.widget(name)
        assert isinstance(widget, QtWidgets.QWidget) and widget.toolTip(), name


def test_generated_editors_follow_the_schema(make_panel):
    panel, _host, _session = make_panel()
    specs = field_specs()
    cost = panel.widget("cost")
    assert [cost.itemText(i) for i in range(cost.count())] == list(specs["cost"][1].allowed())
    eigen = panel.widget("eigen")
    assert (eigen.minimum(), eigen.maximum()) == (specs["eigen"][1].low, specs["eigen"][1].high)
    # a time scale of 0 says it is off ("0.000" said nothing)
    assert panel.widget("time_scale").text() == "off"
    # the graph says its gestures (they were found only in the docs)
    assert "drag the red line to choose K" in panel.graph.plot_widget.toolTip()
    # and its star is not the tolerance's K (a review took it for the K to use)
    assert "does not check an error in mm, 'smallest K within' does" in \
        panel.graph.star.toolTip()
    # the help, with the option it names said as the panel's row says it
    assert specs["accuracy"][1].help.replace(
        "--significance", f"'{panel.option_label('significance')}'") \
        in panel.widget("accuracy").toolTip()


def test_a_refused_value_is_explained_and_the_widget_reverts(make_panel, qtbot):
    panel, _host, session = make_panel()
    box = panel.widget("accuracy")
    box.setValue(0.0)  # accuracy is in (0, 1]
    assert panel.status.text() == "accuracy must be a number in (0, 1], got 0.0"
    assert panel.status.property("kind") == "error"
    assert box.value() == pytest.approx(0.05) and session.options.analysis.accuracy == 0.05
    panel.tabs.setCurrentIndex(0)
    commit_text(qtbot, panel.widget("layer"), "")  # an empty layer name does not fall back
    assert panel.status.text() == "layer must be a non-empty name, got ''"
    assert panel.widget("layer").text() == "salientPoses"


def test_session_options_changes_show_in_the_widgets(make_panel):
    panel, _host, session = make_panel()
    session.set_options(stride=3, tangents="broken", residual_layer=True, sigma=0.5)
    assert panel.widget("stride").value() == 3
    assert panel.widget("tangents").currentText() == "broken"
    assert panel.widget("residual_layer").isChecked()
    assert panel.widget("residual_weight").isEnabled()
    assert panel.widget("sigma").value() == pytest.approx(0.5)


def test_apply_reads_the_session_options_not_the_widgets(make_panel, qtbot):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    session.set_options(space="channel", layer="fromScript")
    apply(qtbot, panel)
    assert [layer["handle"].name for layer in host.layers] == ["fromScript"]


def test_options_persist_between_sessions(make_panel, qtbot):
    panel, _host, _session = make_panel()
    panel.widget("tangents").setCurrentText("broken")
    panel.widget("stride").setValue(3)
    panel.close()
    again, _host, session = make_panel()
    assert again.widget("tangents").currentText() == "broken"
    assert again.widget("stride").value() == 3
    assert session.options.fit.tangents == "broken" and session.options.analysis.stride == 3
    stored = again.settings.value("options")
    assert '"tangents": "broken"' in stored and '"pins"' not in stored
    # keyposes + breakdowns goes with its leading nodes, which belong to one scene (restored
    # alone, every Analyze of the next session was refused)
    session.set_options(layered=True, leading=("RightWrist",), breakdowns=2)
    again.close()
    _panel, _host, session = make_panel()
    assert not session.options.analysis.layered and session.options.analysis.breakdowns is None


# ------------------------------------------------------------------ workers
def test_analysis_runs_in_a_worker_and_reports_progress(make_panel, qtbot):
    panel, host, session = make_panel()
    threads, fractions, changes = set(), [], []

    def progress(fraction, message):
        threads.add(threading.get_ident())
        fractions.append(fraction)

    session.subscribe("analysis_progress", progress)
    session.subscribe("analysis_finished", lambda space: changes.append(threading.get_ident()))
    analyse(qtbot, panel)
    assert threads and threading.get_ident() not in threads
    assert changes == [threading.get_ident()]  # the session changes on the UI thread
    assert fractions == sorted(fractions) and panel.progress.value() == 1000
    assert panel.k_slider.value() == session.suggested_k == session.k
    assert host.previews[-1] == session.keyframes(session.k).tolist()
    assert "Suggested K" in panel.status.text()


def test_the_status_line_shows_whole_lines_and_scrolls_the_rest(make_panel, qtbot):
    """A long status (a long take's note) shows five whole lines and scrolls the rest (the
    layout had sized the holder and cut a line in half); a short one is shown whole."""
    panel, _host, _session = make_panel(width=380)
    holder, label = panel.status_holder, panel.status
    spacing = label.fontMetrics().lineSpacing()
    margins = label.contentsMargins()
    panel.show_status("Analysed frames 0–4999 in 9.0 s. " * 12, ok=True)
    qtbot.waitUntil(lambda: holder.verticalScrollBar().maximum() > 0)
    assert holder.viewport().height() == 5 * spacing + margins.top()
    panel.show_error("one line")
    qtbot.waitUntil(lambda: holder.verticalScrollBar().maximum() == 0)
    assert holder.viewport().height() == spacing + margins.top() + margins.bottom()


def test_the_status_keeps_its_height_while_an_analysis_runs(make_panel, qtbot):
    """Each new height of the status had the whole panel laid out and painted anew (25-45 ms
    of the UI thread as an analysis starts and as its graph is first drawn): while it runs,
    the status does not shrink, its text at the top; after, its height follows the text."""
    panel, _host, _session = make_panel(frames=(0, 240), options=Options())
    holder, label = panel.status_holder, panel.status
    panel.show_status("Analysed frames 0–4999 in 9.0 s. " * 8, ok=True)
    qtbot.waitUntil(lambda: holder.height() > 3 * label.fontMetrics().lineSpacing())
    tall = holder.height()
    seen: list[tuple[bool, int, int]] = []  # (analysing, the holder's height, the text's)
    timer = QtCore.QTimer()
    timer.timeout.connect(lambda: seen.append((panel.analysing, holder.height(),
                                               label.heightForWidth(label.width()))))
    timer.start(1)
    analyse(qtbot, panel)
    timer.stop()
    during = [(height, text) for analysing, height, text in seen if analysing]
    assert during and all(height == tall for height, _ in during)
    assert min(text for _, text in during) < tall  # (shorter texts were shown meanwhile)
    assert label.alignment() & QtCore.Qt.AlignmentFlag.AlignTop
    panel.show_status("one line")
    qtbot.waitUntil(lambda: holder.height() < tall / 2)


def test_the_progress_text_is_one_line_of_the_bar(make_panel, qtbot):
    """A stage's message is elided to the bar's width with its percentage kept (it wrapped
    inside a dock-wide bar, its second line cut off); the tooltip has it whole."""
    panel, _host, _session = make_panel(width=380)
    bar = panel.progress
    message = "K = 49: fitting 49 keys in channel space"
    panel._on_progress(0.24, message)
    metrics = bar.fontMetrics()
    assert metrics.horizontalAdvance(f"{message} (24%)") > bar.contentsRect().width()
    shown = bar.text()
    assert shown.startswith("K = 49") and shown.endswith("… (24%)")
    assert metrics.horizontalAdvance(shown) < bar.contentsRect().width()
    assert bar.toolTip() == message


def test_a_pin_outside_the_range_is_said_when_it_is_typed(make_panel, qtbot):
    """A pinned frame outside the frames Analyze reads was refused only at Analyze: typed, it is
    kept (the range may still change) and the status line says so at once, in red."""
    panel, _host, session = make_panel()  # frames 0-300
    commit_text(qtbot, panel.pins.entry, "40, 5000")
    assert [p.frame for p in session.options.analysis.pins] == [40, 5000]
    assert panel.status.text() == ("pinned frame 5000 outside the frames Analyze reads now "
                                   "(0–300): Analyze refuses it unless the range takes it in")
    assert panel.status.property("kind") == "error"
    commit_text(qtbot, panel.pins.entry, "60, -3")  # (every pin outside is said)
    assert panel.status.text().startswith("pinned frames -3, 5000 outside the frames")


def test_cancel_stops_the_analysis_within_half_a_second(make_panel, qtbot):
    panel, _host, session = make_panel()
    started = threading.Event()

    def slow(fraction, message):
        started.set()
        threading.Event().wait(2.0)  # a stage that takes a while

    session.subscribe("analysis_progress", slow)
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    assert started.wait(10)
    clicked = time.monotonic()
    qtbot.mouseClick(panel.cancel_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.analyze_button.isEnabled(), timeout=1500)
    # well under 0.5 s on a quiet machine; the bound leaves room for a busy CI and still fails
    # if the 2 s stage were waited for
    assert time.monotonic() - clicked < 1.5
    assert "cancelled" in panel.status.text() and not panel.apply_button.isEnabled()
    qtbot.waitUntil(lambda: not panel.runner.running, timeout=30_000)
    assert session.space is None  # the abandoned work changed nothing


def test_the_graph_comes_before_the_tolerance_search_and_a_cancel_puts_it_back(make_panel,
                                                                              qtbot):
    """With the tolerance choosing K (the default), the space's graph is drawn as soon as the
    space is built, while the search (most of the wait) still runs; K requests wait for the
    search; a cancel during it puts back what the session holds (here: nothing)."""
    panel, host, session = make_panel(frames=(0, 240), options=Options())
    searching, release = threading.Event(), threading.Event()

    def hold_the_search(fraction, message):
        if message.startswith("K = ") and not release.is_set():
            searching.set()
            release.wait(30)

    session.subscribe("analysis_progress", hold_the_search)
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    try:
        assert searching.wait(60)
        qtbot.waitUntil(lambda: panel.graph.space is not None, timeout=10_000)
        assert panel.analysing and session.space is None
        assert "ready in" in panel.status.text() and "within the tolerance" in \
            panel.status.text()
        previews = len(host.previews)
        panel.request_k(5, immediately=True)
        assert len(host.previews) == previews  # nothing to preview until the search ends
        qtbot.mouseClick(panel.cancel_button, QtCore.Qt.MouseButton.LeftButton)
    finally:
        release.set()
    assert panel.graph.space is None and "cancelled" in panel.status.text()
    qtbot.waitUntil(lambda: not panel.runner.running, timeout=30_000)

    analyse(qtbot, panel)  # not held: the search runs to its end
    assert panel.graph.space is session.space and session.k == session.tolerance_k
    assert "keeps the error within the tolerance" in panel.status.text()
    # the keys as a sum an animator can check ("3528 pose + 156 corrective" beside K = 49
    # read as a wrong one)
    m = session.reduce().metrics
    channels = m.pose_keys // session.k
    said = f"({session.k} keys × {channels} channels = {m.pose_keys:,} keys"
    assert said in panel.status.text()
    assert host.previews[-1] == session.keyframes(session.k).tolist()


def test_the_search_waits_for_the_graph_to_paint(make_panel, qtbot, monkeypatch):
    """The tolerance's search starts once the space's graph has painted (Task.show_partial):
    the paint, beside the search's Python, took turns with it on the GIL and stalled the
    panel's event loop twice as long. One paint shows the new graph at its new size."""
    from sp_core.ui.worker import Task

    panel, _host, session = make_panel(frames=(0, 240), options=Options())
    analyse(qtbot, panel)  # a graph, then the status' height changes with the next analysis
    events: list[tuple[str, object]] = []
    painted = panel.graph.plot_widget.painted
    painted.disconnect(panel.graph._painted)  # (recorded first, then the graph's own)
    painted.connect(lambda: events.append(("paint", panel.graph.space)))
    painted.connect(panel.graph._painted)
    real_show, real_shown = Task.show_partial, Task.partial_shown

    def show_partial(task, result):
        real_show(task, result)
        events.append(("search", result))

    def partial_shown(task):
        events.append(("shown", None))
        real_shown(task)

    monkeypatch.setattr(Task, "show_partial", show_partial)
    monkeypatch.setattr(Task, "partial_shown", partial_shown)
    analyse(qtbot, panel)
    searched = next(i for i, (what, _) in enumerate(events) if what == "search")
    space = events[searched][1]
    assert space is session.space  # (the space the search then chose K in)
    before = [what for what, shown in events[:searched] if what == "shown"
              or shown is space]
    assert before == ["paint", "shown"]


def test_show_partial_waits_for_the_ui_thread_a_cancel_or_its_time(qtbot):
    from sp_core.ui.worker import Task

    def run(slot, wait_s=0.5, cancel_after=None, cancelled_first=False):
        returned: list[float] = []

        def work(report, token):
            if cancelled_first:
                task.cancel()
            started = time.monotonic()
            task.show_partial("drawn?")
            returned.append(time.monotonic() - started)
            return None

        class Ui(QtCore.QObject):  # a receiver of the UI thread, as the panel
            @QtCore.Slot(object)
            def on_partial(self, result: object) -> None:
                slot(task, result)

        ui = Ui()
        task = Task(work)
        task.PARTIAL_WAIT_S = wait_s
        task.partial.connect(ui.on_partial)
        task.start()
        if cancel_after is not None:
            qtbot.wait(cancel_after)
            task.cancel()
        qtbot.waitUntil(lambda: bool(returned) and not task.running, timeout=20_000)
        return returned[0]

    said: list[bool] = []

    def draw_then_say(task, result):  # a draw of 0.3 s
        QtCore.QTimer.singleShot(300, lambda: (said.append(True), task.partial_shown()))

    assert 0.29 <= run(draw_then_say, wait_s=10.0) < 5.0 and said  # waited for the UI
    assert 0.39 <= run(lambda task, result: None, wait_s=0.4) < 5.0  # a slot that never says
    assert run(lambda task, result: None, wait_s=10.0, cancel_after=200) < 5.0  # a cancel
    # cancelled before: no wait at all (the panel that would say "shown" has let go)
    assert run(lambda task, result: None, wait_s=10.0, cancelled_first=True) < 5.0


def test_apply_runs_in_a_worker_and_cancel_acts_within_half_a_second(make_panel, qtbot,
                                                                     monkeypatch):
    import sp_core.reduction as reduction_module

    panel, host, session = make_panel()
    analyse(qtbot, panel)
    settled(qtbot, panel)
    assert session.options.fit.space == "world"
    # a K of the user's (not the one the tolerance's search already fitted) and a world fit
    # made long enough to cancel on any machine: the real fit, twenty times over
    real = reduction_module.refine_world

    def long_fit(*args, **kwargs):
        for _ in range(20):
            fit = real(*args, **kwargs)
        return fit

    monkeypatch.setattr(reduction_module, "refine_world", long_fit)
    panel.k_spin.setValue(session.k + 3)
    qtbot.waitUntil(lambda: session.k == panel.k_spin.value(), timeout=30_000)
    settled(qtbot, panel)
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert panel.applying and panel.cancel_button.isEnabled()
    # the fit reports its fractions: the world fit's iterations
    qtbot.waitUntil(lambda: "world fit, iteration" in panel.progress.format(), timeout=30_000)
    assert panel.progress.maximum() == 1000 and panel.progress.value() > 0
    qtbot.wait(300)
    clicked = time.monotonic()
    qtbot.mouseClick(panel.cancel_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.applying and panel.apply_button.isEnabled(),
                    timeout=1500)
    assert time.monotonic() - clicked < 1.5  # the fit takes seconds; room for a busy CI
    # the fit itself is interrupted, not left running in the background
    qtbot.waitUntil(lambda: not panel.runner.running, timeout=2000)
    assert time.monotonic() - clicked < 2.0
    assert host.layers == [] and host.undo_chunks == []
    assert panel.status.text() == "Apply cancelled; the scene is unchanged."


# ------------------------------------------------------------------ honest numbers (23.2)
def test_the_k_shown_gets_its_real_error_in_mm(make_panel, qtbot):
    panel, _host, session = make_panel()
    analyse(qtbot, panel)
    settled(qtbot, panel)
    k = session.k
    expected = reduce(session.motion, session.keyframes(k), space="channel").metrics
    text = panel.k_box.error_label.text()
    assert text.startswith(f"K = {k}: reconstruction error mean {expected.mean_mm:.1f} mm, "
                           f"max {expected.max_mm:.1f} mm")
    assert "estimate from the fast channel fit" in text  # world fit: labelled an estimate
    assert "units (" not in panel.graph.readout.text()  # no second, different "mm"
    panel.k_spin.setValue(k + 7)
    qtbot.waitUntil(lambda: panel.k_box.error_label.text().startswith(f"K = {k + 7}: "
                                                                      "reconstruction"))
    settled(qtbot, panel)
    panel.widget("space").setCurrentText("channel")
    settled(qtbot, panel)
    shown = panel.k_box.error_label.text()
    assert "channel fit, what Apply writes" in shown
    apply(qtbot, panel)
    metrics = session.last_reduction.metrics
    assert f"mean {metrics.mean_mm:.1f} mm, max {metrics.max_mm:.1f} mm" in shown


# ------------------------------------------------------------------ the graph (23.5)
def test_graph_draws_nothing_before_data_then_the_useful_range(make_panel, qtbot):
    panel, _host, session = make_panel(width=350)
    graph = panel.graph
    assert graph.stack.currentWidget() is graph.placeholder
    assert "Press Analyze" in graph.placeholder.text()
    analyse(qtbot, panel)
    assert graph.stack.currentWidget() is graph.plot_widget
    low, high = graph.plot.vb.viewRange()[0]
    space = session.space
    # the useful range, not 2..max (here it reaches past the last cliff, K = 69 of 150)
    assert high < 0.7 * space.max_keys
    assert low <= session.suggested_k <= high and max(session.suggestions["cliffs"]) <= high
    # the slider spans the useful range too (a larger K is typed in the spin box)
    assert panel.k_slider.maximum() == graph.useful_range()[1]
    assert panel.k_spin.maximum() == space.max_keys
    assert graph.star.points()[0].pos().x() == session.suggested_k
    assert graph.star_label.toPlainText() == f"suggested K = {session.suggested_k}"
    assert "scene units" in graph.plot.getAxis("left").labelText
    assert graph.plot.getAxis("bottom").labelText == "keyframes K"
    qtbot.mouseClick(graph.all_button, QtCore.Qt.MouseButton.LeftButton)
    assert graph.plot.vb.viewRange()[0][1] >= space.max_keys
    qtbot.mouseClick(graph.reset_button, QtCore.Qt.MouseButton.LeftButton)
    assert graph.plot.vb.viewRange()[0][1] == pytest.approx(high)
    readout = graph.readout
    qtbot.wait(50)  # the layout settles
    assert readout.wordWrap() and readout.height() >= readout.heightForWidth(readout.width())


def test_a_still_or_two_frame_clip_says_why_the_graph_is_empty_and_ticks_whole_numbers(
        make_panel, qtbot, sample_clip):
    """The auditor's suspicion: a 2-frame or still clip drew an empty graph with a cost axis
    of nothing (10^-5 to 10^5) and ticks at K = 1.5, 2.5 and frames 0.1, 0.2, ..."""
    from sp_core.ui.axes import WholeNumberAxis

    axis = WholeNumberAxis("bottom")
    for low, high in ((0.0, 1.0), (0.98, 3.02), (-0.3, 0.4)):
        ticks = [v for _, values in axis.tickValues(low, high, 400) for v in values]
        assert all(float(v).is_integer() and low <= v <= high for v in ticks)
        assert set(ticks) == set(range(int(np.ceil(low)), int(np.floor(high)) + 1))
    from sp_core.ui.viewer import Timeline

    timeline = Timeline()
    qtbot.addWidget(timeline)
    assert isinstance(timeline.getPlotItem().getAxis("bottom"), WholeNumberAxis)
    many = [v for _, values in axis.tickValues(0, 2000, 400) for v in values]
    assert 0 in many and 1000 in many and len(many) > 3  # wide views keep pyqtgraph's ticks
    still = sample_clip.with_channels(np.repeat(sample_clip.channels[:1], 40, axis=0))
    for clip in (still, sample_clip.sub_range(0, 1)):
        panel, _host, session = make_panel(host=FakeHost(clip))
        analyse(qtbot, panel)
        graph = panel.graph
        assert graph.nothing.toPlainText().startswith("every K has cost 0")
        assert not graph.plot.getAxis("left").style["showValues"]
        assert isinstance(panel.graph.plot.getAxis("bottom"), WholeNumberAxis)
    panel, _host, session = make_panel()
    analyse(qtbot, panel)
    assert panel.graph.nothing.toPlainText() == ""
    assert panel.graph.plot.getAxis("left").style["showValues"]


@pytest.mark.parametrize("side", ["left", "bottom"])
def test_the_graph_grid_is_opaque_in_the_colours_the_translucent_grid_drew(qtbot, side):
    """The error graph's grid is drawn opaque (Qt's raster engine draws translucent lines
    several times slower, on the UI thread during an analysis): the same pixels as
    pyqtgraph's translucent grid over the background, where a log axis draws a decade's line
    twice (drawn opaque one after the other, the fainter hid it)."""
    import pyqtgraph as pg

    from sp_core.ui.axes import OpaqueGridAxis, WholeNumberAxis, WholeNumberGridAxis
    from sp_core.ui.graph import BACKGROUND, ErrorGraph

    def render(axis):
        widget = pg.PlotWidget(background=BACKGROUND, axisItems={side: axis})
        qtbot.addWidget(widget)
        widget.resize(420, 320)
        widget.show()
        qtbot.waitExposed(widget)
        plot = widget.getPlotItem()
        plot.showGrid(x=side == "bottom", y=side == "left", alpha=0.15)
        plot.hideAxis("bottom" if side == "left" else "left")  # (nothing under the lines)
        plot.setLogMode(y=True)
        plot.setXRange(0, 260, padding=0)
        plot.setYRange(1.4, 7.7, padding=0)  # six decades of cost, as in the sample's graph
        qtbot.wait(50)
        image = widget.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB888)
        bits = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), -1)
        kept.append(widget)
        return bits[:, :3 * image.width()].reshape(image.height(), image.width(), 3).astype(
            int), axis

    kept: list = []  # (the widgets, whose axes are asked for their lines below)
    plain, translucent = render(
        pg.AxisItem(side) if side == "left" else WholeNumberAxis(side))
    opaque_image, opaque = render(
        OpaqueGridAxis(side, background=BACKGROUND) if side == "left"
        else WholeNumberGridAxis(side, background=BACKGROUND))
    picture = QtGui.QPicture()
    painter = QtGui.QPainter(picture)
    _, ticks, _ = translucent.generateDrawSpecs(painter)
    _, drawn, _ = opaque.generateDrawSpecs(painter)
    painter.end()
    assert all(pen.color().alpha() == 255 for pen, _, _ in drawn)
    assert any(pen.color().alpha() < 255 for pen, _, _ in ticks)
    positions = {(p1.x(), p1.y(), p2.x(), p2.y()) for _, p1, p2 in ticks}
    assert len(drawn) == len(positions)  # one line where pyqtgraph drew several
    across = plain[:, 300] if side == "left" else plain[100, :]  # (inside the plot)
    background = QtGui.QColor(BACKGROUND).getRgb()[:3]
    assert (across != background).any(axis=1).sum() >= 3  # the grid was drawn
    # Qt blends in whole levels of 0-255; the composed colours are rounded once
    assert np.abs(opaque_image - plain).max() <= 2
    graph = ErrorGraph()
    qtbot.addWidget(graph)
    assert graph.plot.getAxis(side).zValue() < graph.plot.vb.zValue()  # the curve on top


def drag(qtbot, widget, start, end, steps=12):
    """A real mouse drag: press, moves with the button held, release."""
    qtbot.mousePress(widget, QtCore.Qt.MouseButton.LeftButton, pos=start)
    for t in np.linspace(0, 1, steps)[1:]:
        point = QtCore.QPoint(int(start.x() + t * (end.x() - start.x())),
                              int(start.y() + t * (end.y() - start.y())))
        qtbot.mouseMove(widget, point)
        qtbot.wait(5)
    qtbot.mouseRelease(widget, QtCore.Qt.MouseButton.LeftButton, pos=end)


def steady_view(qtbot, box, timeout=10.0):
    """Wait until the graph's view range stops changing (layout and range updates are deferred)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        qtbot.wait(60)
        now = [list(r) for r in box.viewRange()] + [box.width(), box.height()]
        if now == last:
            return
        last = now
    raise AssertionError("the graph's view kept changing")


def test_slider_drag_previews_exactly_the_keyframes(make_panel, qtbot):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    slider = panel.k_slider
    before = slider.value()
    option = QtWidgets.QStyleOptionSlider()
    slider.initStyleOption(option)
    handle = slider.style().subControlRect(QtWidgets.QStyle.ComplexControl.CC_Slider, option,
                                           QtWidgets.QStyle.SubControl.SC_SliderHandle, slider)
    start = handle.center()
    end = QtCore.QPoint(start.x() + slider.width() // 3, start.y())
    drag(qtbot, slider, start, end)
    k = slider.value()
    assert k > before + 5
    qtbot.waitUntil(lambda: session.k == k)
    assert host.previews[-1] == session.keyframes(k).tolist()
    assert panel.k_spin.value() == int(panel.k_label.text()) == k
    assert session.options.keys.keys == k  # the K the user chose is the keys option


def test_graph_marker_drag_previews_exactly_the_keyframes(make_panel, qtbot):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    graph = panel.graph
    view = graph.plot_widget
    box = graph.plot.vb

    def to_widget(k, y_fraction=0.5):
        rect = box.viewRect()
        point = box.mapViewToScene(QtCore.QPointF(k, rect.top() + y_fraction * rect.height()))
        return view.mapFromScene(point)

    steady_view(qtbot, box)  # a loaded machine may still be laying the view out
    start_k = session.k
    target = start_k + 12
    drag(qtbot, view.viewport(), to_widget(start_k), to_widget(target))
    k = panel.k_slider.value()
    assert abs(k - target) <= 1 and round(graph.marker.value()) == k
    # the throttled preview catches up with the last position of the drag
    qtbot.waitUntil(lambda: session.k == k)
    assert host.previews[-1] == session.keyframes(k).tolist()


def test_clicking_a_suggestion_sets_k(make_panel, qtbot):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    graph = panel.graph
    qtbot.wait(100)  # the view settles on the useful range
    low, high = graph.plot.vb.viewRange()[0]
    shown = [c for c in session.suggestions["cliffs"] if c != session.k and low < c < high]
    cliff = max(shown, key=lambda c: abs(c - session.k))  # clear of the star's label
    spot = [p for p in graph.suggested.points() if int(p.data()) == cliff][0]
    scene_point = graph.suggested.mapToScene(spot.pos())
    widget_point = graph.plot_widget.mapFromScene(scene_point)
    qtbot.mouseClick(graph.plot_widget.viewport(), QtCore.Qt.MouseButton.LeftButton,
                     pos=widget_point)
    qtbot.waitUntil(lambda: session.k == cliff)
    qtbot.waitUntil(lambda: host.previews[-1] == session.keyframes(cliff).tolist())


# ------------------------------------------------------------------ what Apply does (23.6)
def test_apply_and_remove_through_the_host(make_panel, qtbot):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    panel.widget("space").setCurrentText("channel")
    panel.widget("residual_layer").setChecked(True)
    panel.widget("residual_weight").setValue(0.75)
    commit_text(qtbot, panel.widget("layer"), "walkKeys")
    panel.k_spin.setValue(9)
    qtbot.waitUntil(lambda: session.k == 9)
    summary = panel.apply_box.summary.text()
    assert summary == ("Apply writes 9 keys on every animated channel into a new override "
                       "layer 'walkKeys' (unified tangents, channel fit) and the residual into "
                       "additive layer 'walkKeys_residual' at weight 0.75; the original "
                       "animation is not touched.")
    apply(qtbot, panel)
    assert host.undo_chunks == ["Salient Poses: apply 9 keys"]
    names = [layer["handle"].name for layer in host.layers]
    assert names == ["walkKeys", "walkKeys_residual"]
    curves = host.layers[0]["curves"]
    assert curves.frames.tolist() == session.keyframes(9).tolist()
    assert host.layers[1]["weight"] == 0.75
    assert "Applied 9 keys" in panel.status.text() and "mm" in panel.status.text()
    assert panel.remove_button.isEnabled()
    assert panel.k_box.error_label.text().endswith("channel fit, as applied")
    qtbot.mouseClick(panel.remove_button, QtCore.Qt.MouseButton.LeftButton)
    assert host.layers == [] and "Removed walkKeys" in panel.status.text()
    # the layers are gone: the same figures are what Apply writes (it said "as applied")
    assert panel.k_box.error_label.text().endswith("channel fit, what Apply writes")


@pytest.mark.parametrize("answer, layers", [("Replace", ["salientPoses"]),
                                            ("Add new layer", ["salientPoses",
                                                               "salientPoses2"])])
def test_a_second_apply_asks_replace_or_add(make_panel, qtbot, answer, layers):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    session.set_options(space="channel")
    apply(qtbot, panel)
    assert "; it asks first whether they replace the layers written before; " in \
        panel.apply_box.summary.text()
    asked = []

    def answer_dialog():
        box = QtWidgets.QApplication.activeModalWidget()
        asked.append(box.text())
        button = [b for b in box.buttons() if b.text() == answer][0]
        qtbot.mouseClick(button, QtCore.Qt.MouseButton.LeftButton)

    QtCore.QTimer.singleShot(100, answer_dialog)
    apply(qtbot, panel)
    assert asked == ["Apply already wrote a layer 'salientPoses'. Replace it, or add another "
                     "layer?"]
    assert [layer["handle"].name for layer in host.layers] == layers
    # the numbered layer is this apply's: the option (which the next session starts from)
    # keeps the name the user gave, and the keys JSON's options name the layer written
    assert session.options.layer.layer == "salientPoses"
    assert session.last_options.layer.layer == layers[-1]
    assert panel.binder.widget("layer").text() == "salientPoses"


def test_tooltips_and_shortcuts(make_panel, qtbot):
    panel, host, session = make_panel()
    for widget in (panel.analyze_button, panel.apply_button, panel.k_spin, panel.k_slider,
                   panel.cancel_button):
        assert widget.toolTip()
    assert "F5" in panel.analyze_button.toolTip() and "Ctrl+Return" in panel.apply_button.toolTip()
    panel.activateWindow()
    qtbot.waitUntil(panel.isActiveWindow)
    panel.k_spin.setFocus()
    qtbot.keyClick(panel.k_spin, QtCore.Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: session.space is not None and not panel.analysing, timeout=60_000)
    k = session.k
    panel.graph.setFocus()
    qtbot.keyClick(panel.graph, QtCore.Qt.Key.Key_BracketRight)
    qtbot.waitUntil(lambda: session.k == k + 1)


def test_a_host_may_delete_the_panel_while_it_works(qtbot, sample_clip):
    """A dock that deletes the panel mid-Apply must not take the running thread with it."""
    from sp_core.ui import worker

    session = Session(FakeHost(sample_clip.sub_range(0, 300)), SUGGESTED)
    panel = SalientPosesPanel(session, settings=QtCore.QSettings(
        str(QtCore.QDir.temp().filePath("sp_delete.ini")), QtCore.QSettings.Format.IniFormat))
    panel.start_analysis()
    qtbot.waitUntil(lambda: not panel.analysing, timeout=60_000)
    panel.apply()
    task = panel._applying
    assert task is not None and task.running
    panel.deleteLater()
    qtbot.wait(50)
    assert task in worker._LIVE  # still referenced: it runs to its end
    qtbot.waitUntil(lambda: not task.running, timeout=120_000)


def test_failing_host_shows_a_readable_error_and_changes_nothing(make_panel, qtbot):
    panel, host, _session = make_panel(fail_on="write_curves")
    analyse(qtbot, panel)
    panel.widget("space").setCurrentText("channel")
    apply(qtbot, panel)
    text = panel.status.text()
    assert text.startswith("Apply failed, the scene is unchanged: writing layer "
                           "'salientPoses': RuntimeError: fake host failure")
    assert "Traceback" not in text and host.layers == []
    assert panel.status.property("kind") == "error"


# ------------------------------------------------------------------ layout (23.7)
def test_usable_at_350_pixels_with_many_node_rows(make_panel, qtbot):
    panel, _host, _session = make_panel(width=350)
    assert panel.minimumSizeHint().width() <= 350
    panel.resize(350, 900)
    panel.tabs.setCurrentIndex(1)
    qtbot.wait(50)
    table = panel.node_table
    rows = table.viewport().height() // table.verticalHeader().defaultSectionSize()
    assert rows >= 10 and table.rowCount() == 38
    panel.tabs.setCurrentIndex(2)
    qtbot.wait(50)
    # the Propagate edit numbers show their values (spin boxes, not bare sliders)
    for name in ("sigma", "eigen"):
        assert isinstance(panel.widget(name), QtWidgets.QAbstractSpinBox)
        assert panel.widget(name).text()


def test_a_short_dock_scrolls_the_keyframes_page_instead_of_squeezing_it(make_panel, qtbot):
    """In a dock 700 pixels high (a laptop's Maya) every row of the Keyframes page keeps its
    height and the page scrolls; in a tall dock the graph takes the room and nothing scrolls.
    (Squeezed, the Apply summary was cut to one line and the rows over the graph overlapped.)"""
    panel, _host, _session = make_panel(width=380)
    analyse(qtbot, panel)
    settled(qtbot, panel)
    page = panel.tabs.widget(0)
    assert isinstance(page, QtWidgets.QScrollArea)
    # never narrower than its page: it does not scroll sideways, so the right side would be cut
    assert panel.minimumSizeHint().width() >= page.widget().minimumSizeHint().width()
    heights = {}
    for height in (700, 1300):
        panel.resize(380, height)
        qtbot.wait(50)
        summary = panel.apply_box.summary
        assert summary.text().startswith("Apply writes")
        assert summary.height() >= summary.heightForWidth(summary.width())
        rows = [w for w in (panel.graph.plot_widget, panel.graph.readout, panel.graph.log_box,
                            panel.k_box.k_spin, panel.k_box.error_label, panel.apply_box)
                if w.isVisible()]
        tops = [w.mapTo(page.widget(), QtCore.QPoint(0, 0)).y() for w in rows]
        bottoms = [top + w.height() for top, w in zip(tops, rows, strict=True)]
        assert all(b <= t for b, t in zip(bottoms, tops[1:], strict=False))  # no overlap
        heights[height] = (panel.graph.plot_widget.height(), page.verticalScrollBar().maximum())
    assert heights[700][1] > 0 and heights[1300][1] == 0  # scrolls only when short
    assert heights[700][0] == panel.graph.plot_widget.minimumHeight() < heights[1300][0]


def test_every_tab_scrolls_in_a_short_dock(make_panel, qtbot):
    """The Propagate edit tab was the one page outside a scroll area: its form and plot set
    the whole panel's minimum height (531 pixels), so a shorter dock cut the panel off. Every
    page now scrolls, and the panel fits a dock 300 pixels high with Apply edit reachable."""
    panel, _host, _session = make_panel(width=380)
    assert all(isinstance(panel.tabs.widget(i), QtWidgets.QScrollArea)
               for i in range(panel.tabs.count()))
    assert panel.minimumSizeHint().height() <= 300
    panel.resize(380, 300)
    panel.tabs.setCurrentIndex(2)
    qtbot.wait(50)
    page = panel.tabs.widget(2)
    assert page.verticalScrollBar().maximum() > 0
    page.ensureWidgetVisible(panel.wand.apply_button)
    qtbot.wait(50)
    button = panel.wand.apply_button
    top = button.mapTo(page.viewport(), QtCore.QPoint(0, 0)).y()
    assert 0 <= top and top + button.height() <= page.viewport().height()


def test_layered_mode_previews_labelled_keys_and_draws_both_spaces(make_panel, qtbot):
    panel, host, session = make_panel()
    panel.widget("layered").setChecked(True)
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    assert "tick the leading nodes" in panel.status.text()
    names = [panel.node_table.item(r, 0).text() for r in range(panel.node_table.rowCount())]
    panel.node_table.item(names.index("RightWrist"), 3).setCheckState(QtCore.Qt.CheckState.Checked)
    assert session.options.analysis.leading == ("RightWrist",)
    analyse(qtbot, panel)
    panel.request_k(5, immediately=True)
    chosen = session.selection(5)
    if not len(chosen.breakdowns):  # the threshold rule may add none: the panel says why
        assert "No breakdown improves on these keyposes" in panel.status.text()
    panel.widget("breakdowns").setValue(2)
    panel.request_k(5, immediately=True)
    assert host.preview_labels.count("keypose") == 5
    assert host.preview_labels.count("breakdown") == 2
    assert len(panel.graph.second_curve.getData()[0]) > 0
    assert "5 keyposes, 2 breakdowns" in panel.status.text()


# ------------------------------------------------------------------ the viewer (23.4, 23.6, 23.7)
def test_view_without_a_display_says_so_instead_of_hanging(sample_path, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([sys.executable, "-m", "sp_core.cli", "view", str(sample_path)],
                          env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("salient-poses: error: there is no display")
    assert "--screenshot view.png" in done.stderr


def test_viewer_keys_red_breakdowns_green_and_few_ghosts(qtbot, sample_clip):
    from sp_core.standalone import StandaloneHost
    from sp_core.ui.viewer import BREAKDOWN, KEY, SkeletonViewer

    host = StandaloneHost(sample_clip.sub_range(0, 300))
    viewer = SkeletonViewer(host)
    qtbot.addWidget(viewer)
    frames = list(range(0, 301, 20))  # 16 keys: all of them as ghosts would be a cloud
    labels = ["keypose" if i % 2 == 0 else "breakdown" for i in range(len(frames))]
    host.preview_keyframes(frames, labels)
    host.set_current_frame(150)
    spots = viewer.timeline.ticks.points()
    colour = {int(s.pos().x()): s.brush().color().getRgb()[:3] for s in spots}
    assert colour[0] == KEY and colour[20] == BREAKDOWN
    n_bones = int(np.count_nonzero(np.asarray(sample_clip.parents) >= 0))
    drawn = sum(len(item.getData()[0] if item.getData()[0] is not None else [])
                for item in (viewer.front.ghost_item, viewer.front.breakdown_item))
    assert drawn == 2 * n_bones * 4  # two keys before frame 150 and two after


def test_screenshot_command_saves_a_real_image(tmp_path, sample_path):
    from sp_core.ui.main_window import run_viewer

    out = tmp_path / "view.png"
    (tmp_path / "view.ini").write_text("a user's file\n")  # was the run's scratch settings
    assert run_viewer(str(sample_path), first_frame=1001, keys=20, screenshot=str(out)) == 0
    assert (tmp_path / "view.ini").read_text() == "a user's file\n"
    image = QtGui.QImage(str(out))
    assert image.width() >= 1000 and image.height() >= 600
    # not blank: the skeleton, ghosts and graph put many colours on screen
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert len(colours) > 200
    # into a folder that is not there: an error, not "Wrote" of a file never written
    from sp_core.io.atomic import OutputError

    with pytest.raises(OutputError, match="folder .*missing does not exist"):
        run_viewer(str(sample_path), screenshot=str(tmp_path / "missing" / "view.png"))
    assert not (tmp_path / "missing").exists()


def test_the_viewer_freezes_its_startup_objects_and_frees_them_on_open(monkeypatch, qtbot,
                                                                       sample_path):
    """Outside a task the automatic collector's full collections walked every object of the
    process, 130-175 ms on the UI thread in a drag of K: the viewer moves the objects of its
    startup out of the collector's reach before its event loop, after collecting (garbage
    frozen would never be freed). Opening another file unfreezes them: the window it
    replaces (its clip and panel in reference cycles) is freed (a review found it kept)."""
    import gc
    import weakref

    from sp_core.ui import main_window

    at_exec: list[tuple[int, bool]] = []  # (objects frozen, the cycle below still there)

    class Cycle:  # garbage left before the viewer starts
        def __init__(self) -> None:
            self.me = self

    def exec_(_app):
        at_exec.append((gc.get_freeze_count(), cycle() is not None))
        return 0

    monkeypatch.setattr(main_window, "has_display", lambda: True)
    monkeypatch.setattr(QtWidgets.QApplication, "exec", exec_)
    cycle = weakref.ref(Cycle())
    assert gc.get_freeze_count() == 0
    def windows():  # (those of earlier tests may still be there)
        return [window for window in QtWidgets.QApplication.topLevelWidgets()
                if isinstance(window, main_window.MainWindow)]

    earlier = windows()
    opened = []
    gc.disable()  # (only the viewer's own collection may free the cycle)
    try:
        assert main_window.run_viewer(str(sample_path)) == 0
        gc.enable()
        [first] = [window for window in windows() if window not in earlier]
        host = weakref.ref(first.host)
        opened.append(first.open(str(sample_path)))
        assert gc.get_freeze_count() == 0
        del first
        QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
        gc.collect()
        assert host() is None
    finally:
        gc.enable()
        gc.unfreeze()
        for window in windows():
            if window not in earlier:
                window.close()
    [(frozen, kept)] = at_exec
    assert frozen > 10_000 and not kept


# ------------------------------------------------------------------ Propagate edit
def test_propagate_tab_writes_the_spread_edit_into_an_additive_layer(make_panel, qtbot,
                                                                     sample_clip):
    from sp_core.falloff import pose_edit, propagate
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 300)
    panel, host, session = make_panel(host=StandaloneHost(clip))
    analyse(qtbot, panel)
    # the falloff waits for its tab: the pose graph's spectrum held the UI thread for 0.5 s
    # at the end of a 5,000-frame analysis with the tab never opened
    assert session._graph is None
    panel.tabs.setCurrentIndex(2)
    # ... and is built off the UI thread, the tab saying so meanwhile
    wand = panel.wand
    assert wand._building is not None and wand.note.text() == "Building the pose graph…"
    assert wand.weights is None and wand.curve.getData() == (None, None)
    qtbot.mouseClick(wand.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert panel.status.text() == "the falloff is still being computed (the pose graph); " \
                                  "apply the edit once it shows"
    np.testing.assert_array_equal(host.evaluated_channels(), clip.channels)
    qtbot.waitUntil(lambda: wand._building is None, timeout=10000)
    assert session._graph is not None and wand.note.text() == ""
    wand.frame_spin.setValue(150)
    wand.node_combo.setCurrentText("RightShoulder")
    wand.offsets[2].setValue(30.0)
    frames, weights = wand.curve.getData()
    assert weights[150] == 1.0 and len(frames) == 301
    panel.widget("mode").setCurrentText("global")
    start = time.perf_counter()
    panel.widget("mode").setCurrentText("local")
    wand.region[0].setValue(100)
    assert time.perf_counter() - start < 1.0  # two changes; only the falloff is re-read
    assert np.all(wand.curve.getData()[1][:100] == 0)
    qtbot.mouseClick(wand.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert "Propagated the edit at frame 150" in panel.status.text()
    expected = propagate(clip, pose_edit(clip, 150, wand.edited_pose()), wand.weights)
    np.testing.assert_allclose(host.evaluated_channels(), expected, atol=1e-9)
    assert host.layers[-1].kind == "additive"
    qtbot.mouseClick(panel.remove_button, QtCore.Qt.MouseButton.LeftButton)
    np.testing.assert_array_equal(host.evaluated_channels(), clip.channels)


def test_propagate_tab_builds_again_when_a_failed_build_is_out_of_date(make_panel, qtbot,
                                                                        sample_clip):
    """A build that fails after sigma changed under it (a refresh waits for the build to end)
    must not leave the tab saying the old settings' error: the new settings get their graph.
    And a graph built for a motion that a new analysis replaced is not kept for the new one."""
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 200)
    panel, _host, session = make_panel(host=StandaloneHost(clip))
    analyse(qtbot, panel)
    panel.tabs.setCurrentIndex(2)
    wand = panel.wand
    qtbot.waitUntil(lambda: wand._building is None, timeout=10000)
    assert wand.weights is not None
    stale = session.pose_graph_build(0.5, 8)()  # (built for this motion, these settings)
    analyse(qtbot, panel)  # a new motion
    session.keep_pose_graph(stale)
    assert session._graph is not stale
    qtbot.waitUntil(lambda: wand._building is None, timeout=10000)
    # a failure reported for settings no longer wanted: built again, no error shown
    wand._built_for = ((123.0,), session.motion)
    wand._build_failed("sigma 123 is too small for this motion")
    assert not wand.note.text().startswith("No falloff") or wand._building is not None
    qtbot.waitUntil(lambda: wand._building is None, timeout=10000)
    assert wand.note.text() == "" and wand.weights is not None
    # for the settings still wanted, the error stays
    wand._built_for = wand._wanted()
    wand._build_failed("the poses stay apart")
    assert wand.note.text() == "No falloff: the poses stay apart" and wand.weights is None


def test_propagate_tab_takes_the_edit_from_an_edited_bvh(make_panel, qtbot, tmp_path,
                                                        sample_clip):
    from sp_core.io.bvh import write_bvh
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 120)
    edited = clip.channels.copy()
    edited[60, clip.channel_names.index("Hips.Yposition")] += 3.0
    write_bvh(clip.with_channels(edited), tmp_path / "edited.bvh")
    panel, host, _session = make_panel(host=StandaloneHost(clip))
    analyse(qtbot, panel)
    panel.wand.frame_spin.setValue(60)
    panel.wand.load_edited_bvh(str(tmp_path / "edited.bvh"))
    qtbot.mouseClick(panel.wand.apply_button, QtCore.Qt.MouseButton.LeftButton)
    column = clip.channel_names.index("Hips.Yposition")
    change = host.evaluated_channels()[:, column] - clip.channels[:, column]
    assert change[60] == pytest.approx(3.0, abs=1e-5)
    np.testing.assert_allclose(change, 3.0 * panel.wand.weights, atol=1e-5)


def test_options_object_is_the_default_before_settings(make_panel):
    _panel, _host, session = make_panel()
    assert session.options == SUGGESTED  # what the fixture's session was given


def test_a_long_takes_window_is_said_in_the_status_line(make_panel, qtbot, sample_clip):
    """The analysis' notes reach the panel: with ``line-max`` a 3,600-frame take is past the
    default time budget of the exact space (takes up to about 3,100 frames stay exact), so it is
    analysed with a window, and the status line says so; with a generous budget it is exact and
    says nothing."""
    import numpy as np

    values = sample_clip.channels
    take = sample_clip.with_channels(
        np.concatenate([values, values[::-1], values, values[::-1]])[:3600])
    panel, _host, session = make_panel(host=FakeHost(take))
    session.set_options(cost="line-max")
    analyse(qtbot, panel)
    note = session.notes[0]
    assert note.startswith("long take: ") and "(max_span " in note  # the engine's field names
    # the panel says the options as its rows do
    worded = note.replace("max_span", "max span").replace("max_keys", "max keys")
    assert panel.status.text().endswith(f"Note: {worded}.")
    session.set_options(time_budget=1000.0)
    analyse(qtbot, panel)
    assert not session.notes and "Note:" not in panel.status.text()


def test_a_tolerance_and_layered_keys_are_refused_together_in_the_panel(make_panel):
    # keyposes and breakdowns have their own rules: the panel says so and keeps the options
    panel, host, session = make_panel()
    assert panel.binder.edit(tolerance="3,20")
    panel.widget("layered").setChecked(True)
    assert not session.options.analysis.layered
    assert not panel.widget("layered").isChecked()  # the editor shows the options again
    assert "tolerance does not apply with" in panel.status.text()
    assert session.options.keys.tolerance == (3.0, 20.0)


def test_an_error_names_the_options_as_the_panels_rows_do(make_panel, qtbot):
    """An analysis refused by the engine names the options to change by their labels in the
    panel ("max span", "memory (GiB)"), not by the Python API's field names."""
    panel, _host, session = make_panel()
    session.set_options(stride=10, max_span=5)
    analyse(qtbot, panel)
    assert panel.status.text() == ("max span of 5 frames is shorter than the gap between "
                                   "candidate frames 0 and 10; raise max span or lower stride")
    assert panel.option_label("memory_gib") == "memory (GiB)"
    assert panel.option_label("corrective_budget") == "corrective keys"
    assert panel.option_label("time_budget") == "time budget (s)"
    assert panel.option_label("suggested") == "suggested"  # no form row: the name in words
    # a switch is named by its row, which says what it turns on (the row said "mode")
    assert panel.option_label("layered") == "keyposes + breakdowns"
    session.set_options(stride=1, max_span=None, breakdowns=2)
    analyse(qtbot, panel)
    assert panel.status.text() == ("breakdowns applies only with keyposes + breakdowns; turn "
                                   "on keyposes + breakdowns or clear breakdowns")
    session.set_options(breakdowns=None)
    panel.show_error(CapacityError("needs 1 GB: raise memory_gib to 1.1",
                                   options=("memory_gib",)))
    assert panel.status.text() == "needs 1 GB: raise memory (GiB) to 1.1"
    # a refused value too
    assert not panel.binder.edit(memory_gib=0.0)
    assert panel.status.text() == "memory (GiB) must be a number in [0.05, 4096], got 0.0"
    # a task's worker thread gets the labels read beforehand, never the widgets
    words = panel.option_words()

    def widgets_touched(name):
        raise AssertionError(f"{name}: a widget read off the UI thread")

    panel.option_label = widgets_touched
    assert words("memory_gib") == "memory (GiB)" and words("max_span") == "max span"


# ------------------------------------------------------------------ a user audit's findings
def test_options_changed_after_analyze_are_said_and_apply_waits_for_a_new_analysis(
        make_panel, qtbot):
    """A stride (or pins) set after Analyze: Apply wrote the old keys, off the stride, without
    a word."""
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    panel.request_k(6, immediately=True, user=True)
    panel.widget("stride").setValue(4)
    assert panel.status.text() == ("stride changed since the analysis; analyse again to use it, "
                                   "or set it back")
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert not panel.applying and host.layers == []
    assert panel.status.property("kind") == "error"
    analyse(qtbot, panel)
    apply(qtbot, panel)
    assert all(f % 4 == 0 for f in host.layers[0]["curves"].frames[1:-1])


def test_the_k_controls_follow_k_wherever_it_is(make_panel, qtbot):
    """A K past the graph's useful range: the slider stayed at its end (a step left jumped
    from K = 200 to the end's K - 1) and the graph's marker was out of view; the Suggested
    button looked pressed while the tolerance had chosen K."""
    panel, _host, session = make_panel(options=Options().replace(tolerance=(3.0, 30.0),
                                                                 space="channel"))
    analyse(qtbot, panel)
    assert session.tolerance_k == session.k
    assert not panel.k_box.suggested_button.isChecked()
    panel.k_spin.setValue(140)
    qtbot.waitUntil(lambda: session.k == 140)
    assert panel.k_slider.value() == 140
    low, high = panel.graph.plot.vb.viewRange()[0]
    assert low <= 140 <= high
    panel.k_slider.setFocus()
    qtbot.keyClick(panel.k_slider, QtCore.Qt.Key.Key_Left)
    qtbot.waitUntil(lambda: session.k == 139)
    qtbot.mouseClick(panel.k_box.suggested_button, QtCore.Qt.MouseButton.LeftButton)
    assert session.k == session.suggested_k and panel.k_box.suggested_button.isChecked()
    # a K a script sets stays shown when an option changes next (the keys option of a K
    # pressed before pulled the controls back, and Apply wrote another K than shown)
    panel.request_k(30, immediately=True, user=True)
    session.set_k(20)
    session.set_options(stride=4)
    session.set_options(stride=1)
    assert session.k == 20
    assert (panel.k_spin.value(), panel.k_slider.value(), panel.k_box.k_label.text()) == \
        (20, 20, "20")


def test_the_apply_summary_says_what_apply_writes(make_panel, qtbot):
    """At a K the user chose the automatic corrective keys are not written (the summary
    promised them); in keyposes + breakdowns mode the breakdowns are keys too (it counted
    the keyposes)."""
    panel, _host, session = make_panel(options=Options().replace(tolerance=(3.0, 30.0),
                                                                 space="channel"))
    analyse(qtbot, panel)
    assert "up to 5% corrective keys (until the max error is within 30 mm)" in \
        panel.apply_box.summary.text()
    panel.request_k(session.k + 1, immediately=True, user=True)
    assert "corrective" not in panel.apply_box.summary.text()
    session.set_options(suggested=True, layered=True, leading=("RightWrist",), breakdowns=2)
    analyse(qtbot, panel)
    panel.request_k(5, immediately=True)
    assert panel.apply_box.summary.text().startswith(
        f"Apply writes {len(session.keyframes(5))} keys on every animated channel")
    assert len(session.keyframes(5)) == 7


def test_a_falloff_the_clip_cannot_have_is_said_in_its_tab_not_over_the_analysis(
        make_panel, qtbot, sample_clip):
    """A two-frame clip analyses (K = 2), but the Propagate tab's falloff needs three frames:
    its error replaced the analysis' result in the status line, in red."""
    panel, _host, session = make_panel(host=FakeHost(sample_clip.sub_range(0, 1)))
    analyse(qtbot, panel)
    assert session.k == 2
    panel.tabs.setCurrentIndex(2)
    qtbot.waitUntil(lambda: panel.wand._building is None, timeout=10000)
    assert panel.status.text().startswith("Analysed frames 0–1")
    assert panel.wand.note.text() == "No falloff: a falloff needs at least 3 frames, the range " \
                                     "has 2"
    panel.wand.apply()
    assert panel.status.text() == panel.wand.note.text()


def test_the_standalone_window_saves_where_asked_never_over_its_clip(qtbot, tmp_path,
                                                                     sample_clip):
    """Save scene as BVH over the opened clip replaced the user's mocap; a save that failed
    printed a traceback and left the status line saying all was well; the keys JSON had no
    options block (reduce --json has one)."""
    import json

    from sp_core.io.bvh import read_bvh, write_bvh
    from sp_core.standalone import StandaloneHost
    from sp_core.ui.main_window import MainWindow

    source = tmp_path / "take.bvh"
    write_bvh(sample_clip.sub_range(0, 120), source)
    original = source.read_bytes()
    (tmp_path / "link.bvh").symlink_to(source)
    settings = QtCore.QSettings(str(tmp_path / "panel.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(StandaloneHost.from_file(str(source)), settings=settings)
    qtbot.addWidget(window)
    window.session.set_options(keys=6, space="channel")
    window.session.analyze()
    window.session.apply()
    status = window.panel.status
    for path in (source, tmp_path / "link.bvh"):
        assert not window.save("scene", str(path), window.host.save_bvh)
        assert status.text() == (f"The scene was not saved: {path} is the clip this window "
                                 "opened; save under another name (the original is never "
                                 "replaced)")
        assert status.property("kind") == "error"
    assert source.read_bytes() == original
    assert not window.save("scene", str(tmp_path / "missing" / "x.bvh"), window.host.save_bvh)
    assert "folder" in status.text() and "does not exist" in status.text()
    saved = tmp_path / "reduced.bvh"
    assert window.save("scene", str(saved), window.host.save_bvh)
    assert status.text() == f"Saved the scene to {saved}." and status.property("kind") == "ok"
    np.testing.assert_allclose(read_bvh(saved).positions, window.host.evaluated_positions(),
                               atol=1e-6)
    answers = iter([str(tmp_path / "keys.json"), str(tmp_path / "residual")])
    QtWidgets.QFileDialog.getSaveFileName = staticmethod(lambda *a, **k: (next(answers), ""))
    window._save_keys()
    record = json.loads((tmp_path / "keys.json").read_text())
    assert record["options"]["keys"]["keys"] == 6 and record["options"]["fit"]["space"] == \
        "channel"
    window._save_residual()  # the name given, not residual.npy
    np.testing.assert_array_equal(np.load(tmp_path / "residual"),
                                  window.session.last_reduction.residual)


def test_the_standalone_window_shows_layers_undoes_and_opens_another_file(qtbot, tmp_path,
                                                                           sample_clip):
    """With the residual written at full weight the standalone scene gives back the original,
    and there was no way to look at (or save) the reduced motion, to undo, or to open another
    clip."""
    from sp_core.io.bvh import write_bvh
    from sp_core.standalone import StandaloneHost
    from sp_core.ui.main_window import MainWindow

    source, other = tmp_path / "take.bvh", tmp_path / "other.bvh"
    write_bvh(sample_clip.sub_range(0, 120), source)
    write_bvh(sample_clip.sub_range(200, 260), other)
    settings = QtCore.QSettings(str(tmp_path / "panel.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(StandaloneHost.from_file(str(source)), settings=settings)
    qtbot.addWidget(window)
    host, session = window.host, window.session
    session.set_options(keys=6, space="channel", residual_layer=True)
    session.analyze()
    reduction = session.apply()
    np.testing.assert_allclose(host.evaluated_channels(), host.clip.channels, atol=1e-9)
    window._fill_layers_menu()
    toggles = {a.text(): a for a in window.layers_menu.actions()}
    assert list(toggles) == ["salientPoses (override)", "salientPoses_residual (additive)"]
    assert all(a.isChecked() for a in toggles.values())
    toggles["salientPoses_residual (additive)"].setChecked(False)  # the reduced motion shows
    np.testing.assert_allclose(host.evaluated_channels(), reduction.corrected, atol=1e-9)
    window.undo()
    assert host.layers == [] and session.applied == []
    assert window.panel.status.text() == "Undone: Salient Poses: apply 6 keys."
    assert not window.panel.remove_button.isEnabled()
    window.undo()
    assert window.panel.status.text() == "Nothing to undo"
    assert window.open(str(tmp_path / "missing.bvh")) is None
    assert window.panel.status.text().startswith(f"Cannot open {tmp_path / 'missing.bvh'}")
    opened = window.open(str(other))
    qtbot.addWidget(opened)
    assert opened.host.source == str(other) and opened.host.clip.n_frames == 61
    assert not window.isVisible()
    assert opened.session.options.fit.space == "channel"  # the panel keeps its options


def test_an_estimate_that_ends_after_apply_leaves_the_figures_apply_wrote(make_panel, qtbot):
    """Apply pressed while the K's estimate ran: the estimate ended last and replaced the
    figures of what was written (12.7 / 188 mm written, 21.8 / 469 mm shown)."""
    panel, _host, session = make_panel()
    analyse(qtbot, panel)
    settled(qtbot, panel)
    k = session.k
    request = panel.estimator.request_for(k)
    estimate = reduce(session.motion, session.keyframes(k), space="channel").metrics
    apply(qtbot, panel)
    settled(qtbot, panel)
    written = panel.k_box.error_label.text()
    assert written.endswith("world fit, as applied")
    panel.estimator._done((request, estimate))  # the estimate started before Apply ends now
    assert panel.k_box.error_label.text() == written


def test_screenshot_takes_the_k_asked_or_fails_as_reduce_does(tmp_path, capsys, monkeypatch):
    """`view --keys 200 --apply` applied 120 keys (the panel's nearest K) and said nothing;
    a failed Apply exited 0 with nothing on stderr."""
    from pathlib import Path

    from sp_core.errors import SalientPosesError
    from sp_core.io.bvh import read_bvh, write_bvh
    from sp_core.ui import main_window

    windows = []

    class Kept(main_window.MainWindow):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            windows.append(self)

    monkeypatch.setattr(main_window, "MainWindow", Kept)
    path = Path(__file__).parent / "data" / "cmu_131_01_240.bvh"
    assert main_window.run_viewer(str(path), keys=200, screenshot=str(tmp_path / "many.png"),
                                  apply=True) == 0
    assert capsys.readouterr().out.strip() == f"Wrote {tmp_path / 'many.png'}"
    assert windows[0].session.k == 200
    assert windows[0].session.last_reduction.curves.n_keys == 200
    with pytest.raises(SalientPosesError, match=r"^the analysis failed: keys 241: frames 0..239 "
                                                r"hold 2 to 240 keyframes \(first and last"):
        main_window.run_viewer(str(path), keys=241, screenshot=str(tmp_path / "x.png"))
    clip = read_bvh(path)
    still = tmp_path / "still.bvh"
    write_bvh(clip.with_channels(np.repeat(clip.channels[:1], clip.n_frames, axis=0)), still)
    with pytest.raises(SalientPosesError, match="^Apply failed, the scene is unchanged: nothing "
                                                "moves in frames 0..239"):
        main_window.run_viewer(str(still), keys=4, screenshot=str(tmp_path / "still.png"),
                               apply=True)
    assert (tmp_path / "still.png").exists()  # the picture shows why


def test_before_an_analysis_only_analyze_is_pressed_and_apply_names_its_own_layers(
        make_panel, qtbot, monkeypatch):
    """A fresh panel had Apply, Remove, Cancel and the K controls enabled; "Add new layer"
    said every earlier layer was written; Replace took two undo steps."""
    panel, host, session = make_panel(options=Options().replace(keys=8))
    assert panel.analyze_button.isEnabled()
    assert not any(w.isEnabled() for w in (panel.apply_button, panel.remove_button,
                                           panel.cancel_button))
    analyse(qtbot, panel)
    apply(qtbot, panel)
    monkeypatch.setattr(panel, "ask_layer_action", lambda layer: "add")
    apply(qtbot, panel)
    assert [h.name for h in session.applied] == ["salientPoses", "salientPoses2"]
    assert " into salientPoses2: error " in panel.status.text()
    monkeypatch.setattr(panel, "ask_layer_action", lambda layer: "replace")
    chunks = len(host.undo_chunks)
    apply(qtbot, panel)
    assert len(host.undo_chunks) == chunks + 1  # remove and write: one step
    assert len(session.applied) == 1 and len(host.layers) == 1


def test_closing_during_an_analysis_ends_its_thread_instead_of_waiting_out_the_deadline(
        make_panel, qtbot):
    """The thread's quit was queued to the UI thread, which the close blocks in its wait:
    every close with a task running waited 2 s, and the thread still ran after it (at exit Qt
    aborted: "QThread: Destroyed while thread is still running")."""
    panel, _host, _session = make_panel(frames=(0, 900), options=Options())
    panel.start_analysis()
    qtbot.waitUntil(lambda: panel.progress.value() > 0, timeout=30_000)
    task = panel._analysis
    assert task is not None and task.running
    panel.close()
    assert task.thread is not None and task.thread.isFinished()


def test_the_searchs_figures_are_not_said_as_applied_nor_kept_for_other_fit_options(
        make_panel, qtbot):
    """After Analyze the tolerance search's figures said "as applied" before any Apply, and
    stayed after the corrective keys were turned off (Apply then wrote 71.6 mm, not 19.9)."""
    panel, _host, session = make_panel(options=Options())
    analyse(qtbot, panel)
    settled(qtbot, panel)
    written = f"world fit, what Apply writes; with {session.reduce().metrics.corrective_keys} " \
        "corrective keys"
    assert panel.k_box.error_label.text().endswith(written)
    session.set_options(corrective_budget="0")
    panel.estimator.request(session.k)
    assert "what Apply writes" not in panel.k_box.error_label.text()
    session.set_options(corrective_budget=None)
    panel.estimator.request(session.k)
    assert panel.k_box.error_label.text().endswith(written)


def test_fit_options_changed_during_apply_are_not_recorded_as_its_own(make_panel, qtbot):
    """Tangents switched to broken while Apply fitted unified curves: the unified curves were
    written, and the session's last options (Save keys JSON) said broken."""
    panel, _host, session = make_panel(options=Options().replace(keys=8))
    analyse(qtbot, panel)
    settled(qtbot, panel)
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    session.set_options(tangents="broken", residual_layer=True)  # while the fit runs
    qtbot.waitUntil(lambda: not panel.applying, timeout=120_000)
    assert session.last_reduction.tangents == "unified"
    assert session.last_options.fit.tangents == "unified"
    assert [h.kind for h in session.applied] == ["override"]  # no residual: not asked then
    assert (f"Changed during the fit, not in these layers: {panel.option_label('tangents')}, "
            f"{panel.option_label('residual_layer')} (") in panel.status.text()
    assert session.options.fit.tangents == "broken"  # kept for the next Apply


def test_an_option_changed_during_analyze_is_said_when_it_ends_and_unsaid_when_set_back(
        make_panel, qtbot, sample_clip):
    """The analysis ended in a green "Analysed …" with the change unsaid until Apply; set
    back, the red "changed since the analysis" stayed. In the layered mode the analysis's
    notes were replaced at once by the keyposes."""
    panel, _host, session = make_panel(frames=(0, 600), options=Options())
    panel.start_analysis()
    session.set_options(stride=2)
    qtbot.waitUntil(lambda: not panel.analysing, timeout=60_000)
    settled(qtbot, panel)
    text = panel.status.text()
    assert text.startswith("Analysed frames 0–600") and text.endswith(
        "stride changed since the analysis; analyse again to use it, or set it back")
    assert panel.status.property("kind") == "error"
    session.set_options(stride=1)
    assert panel.status.text() == "The options match the analysis again."
    still = sample_clip.sub_range(0, 59).with_channels(
        np.repeat(sample_clip.channels[:1], 60, axis=0))
    panel, _host, session = make_panel(host=FakeHost(still), options=Options().replace(
        layered=True, leading=("RightWrist",)))
    analyse(qtbot, panel)
    settled(qtbot, panel)
    text = panel.status.text()
    assert " 2 keyposes, 0 breakdowns: 0, 59. " in text and \
        text.endswith("Note: nothing moves in frames 0..59: every channel keeps one value, so "
                      "there is no key to write.")
    # ... and Apply is greyed out, saying so (the summary offered "Apply writes 2 keys" and
    # Apply then failed)
    assert not panel.apply_button.isEnabled()
    assert panel.apply_button.toolTip() == (
        "nothing to write: nothing moves in frames 0..59: every channel keeps one value, so "
        "there is no key to write")
    assert panel.apply_box.summary.text().startswith("Nothing to write: nothing moves")



def test_reviewed_a_cancel_then_a_close_ends_the_thread_and_replace_keeps_asking(
        make_panel, qtbot, sample_clip, monkeypatch):
    """A review of the fixes above: a Cancel reconnected the thread's quit queued (a close
    after it waited out 2 s and Qt could abort at exit); after a Replace, whose layer takes
    the next free name on the real hosts, the next Apply did not ask and stacked a layer."""
    panel, _host, _session = make_panel(frames=(0, 900), options=Options())
    panel.start_analysis()
    qtbot.waitUntil(lambda: panel.progress.value() > 0, timeout=30_000)
    task = panel._analysis
    panel.cancel()
    panel.close()
    assert task.thread is not None and task.thread.isFinished()
    panel, host, session = make_panel(host=StandaloneHost(sample_clip.sub_range(0, 300)),
                                      options=Options().replace(keys=8, space="channel"))
    analyse(qtbot, panel)
    apply(qtbot, panel)
    asked = []
    monkeypatch.setattr(panel, "ask_layer_action",
                        lambda layer: asked.append(layer) or "replace")
    for _ in range(2):
        apply(qtbot, panel)
    assert len(asked) == 2  # (one apply's layers only: replaced, not stacked)
    assert [h.name for h in host.layers] == [h.name for h in session.applied]
    assert len({h.kind for h in session.applied}) == len(session.applied)


def test_an_estimate_whose_result_cannot_be_placed_does_not_stop_the_next(make_panel, qtbot,
                                                                          monkeypatch):
    """A second review: an estimate's end that raised (the options naming no K: a breakdowns
    count too high) left it counted as running, and no estimate ever started again."""
    panel, _host, session = make_panel(options=Options().replace(keys=8))
    analyse(qtbot, panel)
    settled(qtbot, panel)
    estimator = panel.estimator
    request = estimator.request_for(8)
    metrics = reduce(session.motion, session.keyframes(8), space="channel").metrics

    def no_k(k=None):
        raise SelectionError("100 breakdowns with 8 keyposes is out of range")

    estimator._task = object()  # the estimate whose result arrives now
    with monkeypatch.context() as patch:
        patch.setattr(session, "labels", no_k)
        estimator._done((request, metrics))
    assert estimator._task is None
    panel.request_k(9, immediately=True)
    settled(qtbot, panel)
    assert panel.k_box.error_label.text().startswith("K = 9: reconstruction error")


def test_a_cancel_says_whether_the_kept_analysis_still_holds_and_k_waits_for_apply(
        make_panel, qtbot):
    """A second review's suspicions: a Cancel after an option changed while the cancelled
    analysis ran said only that the previous result is kept (Apply then refused it); the
    graph's K line could be dragged while Apply wrote the layers of the K pressed."""
    panel, _host, session = make_panel(frames=(0, 900), options=Options().replace(keys=8))
    analyse(qtbot, panel)
    settled(qtbot, panel)
    assert panel.graph.marker.movable
    panel.start_analysis()
    session.set_options(stride=2)
    panel.cancel()
    assert panel.status.text() == ("Analysis cancelled; the previous result is kept. stride "
                                   "changed since the analysis; analyse again to use it, or "
                                   "set it back")
    assert panel.status.property("kind") == "error"
    session.set_options(stride=1)
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert panel.applying and not panel.graph.marker.movable
    # the graph's suggestion points and the S shortcut choose no K meanwhile either (a third
    # review: they still did)
    panel.graph.k_requested.emit(13)
    panel.use_suggested_k()
    assert session.k == 8 and session.options.keys.keys == 8
    qtbot.waitUntil(lambda: not panel.applying, timeout=120_000)
    assert panel.graph.marker.movable


def test_the_cost_axis_ranges_again_after_a_graph_with_nothing_to_draw(qtbot, sample_clip):
    """A review: after a still clip's graph (every cost 0: the note, a fixed 0..1 cost axis) the
    next space's curve was drawn against that fixed axis, off the plot at both ends."""
    from sp_core.selection import SelectionSpace
    from sp_core.ui.graph import ErrorGraph

    real = SelectionSpace.from_clip(sample_clip.sub_range(0, 300), cost="line-max")
    graph = ErrorGraph()
    qtbot.addWidget(graph)
    graph.resize(500, 400)
    graph.show()
    graph.set_space(SelectionSpace(np.zeros((20, 6))), 2, [])
    graph.set_space(real, real.suggestions()["threshold"], [])
    qtbot.wait(50)
    (left, right), (low, high) = graph.plot.vb.viewRange()
    inside = (graph.curve.xData >= left) & (graph.curve.xData <= right)
    shown = np.log10(graph.curve.yData[inside])  # (the cost axis fits the K in view)
    assert len(shown) > 5 and low <= shown.min() and shown.max() <= high


def test_the_space_shown_again_keeps_its_graph_and_view(qtbot, sample_clip):
    """The space drawn while the tolerance's search ran is shown again when the analysis ends:
    the graph is left as it is (its redraw and paint were a third of the UI thread's work
    then), so a zoom made meanwhile stays; anything else to show redraws and ranges."""
    from sp_core.selection import SelectionSpace
    from sp_core.ui.graph import ErrorGraph

    space = SelectionSpace.from_clip(sample_clip.sub_range(0, 300), cost="line-max")
    s = space.suggestions()
    graph = ErrorGraph()
    qtbot.addWidget(graph)
    graph.resize(500, 400)
    graph.show()
    graph.set_space(space, s["threshold"], s["cliffs"], "line-max cost", "mm")
    useful = graph.plot.vb.viewRange()[0]
    graph.plot.setXRange(3, 9, padding=0)  # the user's zoom
    graph.set_space(space, s["threshold"], list(s["cliffs"]), "line-max cost", "mm")
    assert graph.plot.vb.viewRange()[0] == [3, 9]
    for other in ((space, s["threshold"] + 1, s["cliffs"], "line-max cost", "mm"),
                  (space, s["threshold"], s["cliffs"], "line-max cost", "cm"),
                  (SelectionSpace.from_clip(sample_clip.sub_range(0, 300), cost="line-max"),
                   s["threshold"], s["cliffs"], "line-max cost", "mm")):
        graph.plot.setXRange(3, 9, padding=0)
        graph.set_space(*other)
        assert graph.plot.vb.viewRange()[0] != [3, 9], other[1:]
    assert graph.unit == "mm" and graph.suggested_k == s["threshold"]
    assert np.allclose(graph.plot.vb.viewRange()[0], useful)


def test_garbage_is_collected_on_the_ui_thread_while_a_task_runs(qtbot):
    """Python's collector ran in whichever thread allocated, mostly a worker's: it destroyed
    a closed panel's Qt objects there, and Qt's destructor deadlocked with the UI thread (a
    panel test hung the suite). A cycle left before a task that allocates enough to trip the
    collector many times is collected on the UI thread, and the collector is on again after."""
    from sp_core.ui.worker import Task

    collected_on: list[str] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            collected_on.append(threading.current_thread().name)

    def work(report, token):
        kept = [[i] for i in range(300_000)]  # containers: the collector's counts trip
        time.sleep(0.3)
        return len(kept)

    was_enabled = __import__("gc").isenabled()
    assert was_enabled
    for _ in range(20):
        Cycle()
    done: list[int] = []
    task = Task(work)
    task.finished.connect(done.append)
    task.start()
    qtbot.waitUntil(lambda: bool(done) and not task.running, timeout=20_000)
    qtbot.waitUntil(lambda: __import__("gc").isenabled(), timeout=5_000)
    assert done == [300_000]
    assert len(collected_on) == 20
    assert set(collected_on) == {threading.main_thread().name}


# ------------------------------------------------- a review of the standalone panel in use
def test_a_replacing_apply_keeps_a_propagated_edit_and_asks_only_over_applies(
        make_panel, qtbot, monkeypatch, sample_clip):
    """After Propagate, Apply asked whether to replace "salientPosesEdit" and Replace deleted
    the artist's edit as one of Apply's layers."""
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 150)
    panel, host, session = make_panel(host=StandaloneHost(clip), options=Options().replace(
        keys=8))
    analyse(qtbot, panel)
    edited = clip.channels[60].copy()
    edited[clip.channel_names.index("RightShoulder.Zrotation")] += 30.0
    frames = np.arange(clip.n_frames)
    session.propagate_edit(60, edited, np.exp(-0.5 * ((frames - 60) / 10.0) ** 2))
    asked: list[str] = []
    monkeypatch.setattr(panel, "ask_layer_action",
                        lambda layer: asked.append(layer) or "replace")
    apply(qtbot, panel)
    assert asked == []  # (only the edit was there: nothing of Apply's to replace)
    apply(qtbot, panel)
    assert asked == ["salientPoses"]
    assert [h.name for h in host.layers] == ["salientPosesEdit", "salientPoses2"]
    assert " into salientPoses2: error " in panel.status.text()
    assert session.reduction_layers() == [host.layers[1]]


def test_the_status_says_what_is_true_after_cancel_refusal_ratio_and_undo(
        make_panel, qtbot, tmp_path, sample_path):
    """A first analysis cancelled said "the previous result is kept"; a refused value stayed
    in red over the value taken after it; a ratio beyond the space was cut to its end without
    a word (K = 75 under "ratio 1.000"); after Remove and Undo, Save keys JSON said "Apply
    first" and the bar said "removed" over the layers back."""
    from sp_core.io.bvh import read_bvh, write_bvh
    from sp_core.ui.main_window import MainWindow

    panel, _host, session = make_panel(frames=(0, 900), options=Options())
    panel.start_analysis()
    qtbot.waitUntil(lambda: panel.progress.value() > 0, timeout=30_000)
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.analysing, timeout=30_000)
    assert panel.status.text() == "Analysis cancelled."
    panel.binder.submit("corrective_budget", "-3")  # (as its field commits a value)
    assert panel.status.property("kind") == "error" and "got -3" in panel.status.text()
    panel.binder.submit("corrective_budget", "5")
    assert session.options.fit.corrective_budget == "5" and panel.status.text() == ""

    clip = read_bvh(sample_path).sub_range(0, 150)
    path = tmp_path / "short.bvh"
    write_bvh(clip, path)
    settings = QtCore.QSettings(str(tmp_path / "w.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(StandaloneHost.from_file(str(path)), settings=settings)
    qtbot.addWidget(window)
    window.panel.binder.edit(keys=10, ratio=None, suggested=False)
    analyse(qtbot, window.panel)
    window.panel.k_box.ratio_spin.setValue(1.0)
    assert window.panel.status.text() == ("ratio 1 asks for K = 151, outside the 2 to 75 keys "
                                          "this analysis offers; press Analyze to offer it")
    assert window.session.k == 10
    window.panel.binder.edit(keys=10, ratio=None, suggested=False)
    apply(qtbot, window.panel)
    reduction = window.session.last_reduction
    window.panel.remove()
    assert window.panel.progress.text() == "removed"
    window.undo()
    assert window.session.last_reduction is reduction  # (Save keys JSON saves it again)
    assert window.panel.progress.text() == "applied"
    window.undo()
    assert window.session.last_reduction is None and window.panel.progress.text() == ""


def test_propagate_tab_fades_at_a_range_inside_the_scene_and_clears_its_refusal(
        make_panel, qtbot, sample_clip):
    """Found by a review of the wand: analysing frames 100..200 of a 300-frame scene, the edit
    began at full strength on frame 100 (its layer is keyed on the range alone); a refusal on
    the status line ("outside the region") stayed red once the region was put right; offsets
    past half a turn were taken the other way round (190 as -170)."""
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 300)
    panel, host, session = make_panel(host=StandaloneHost(clip),
                                      options=SUGGESTED.replace(frame_range=(100, 200)))
    analyse(qtbot, panel)
    assert session.motion_open_ends() == (True, True)
    panel.tabs.setCurrentIndex(2)
    wand = panel.wand
    qtbot.waitUntil(lambda: wand._building is None, timeout=10000)
    wand.frame_spin.setValue(104)
    assert wand.weights[0] == 0.0 and wand.weights[4] == 1.0
    assert wand.offsets[0].maximum() == 180.0 and wand.offsets[0].minimum() == -180.0
    wand.region[0].setValue(150)  # the edited frame 104 left outside
    assert panel.status.property("kind") == "error" and "outside the region" in \
        panel.status.text()
    wand.region[0].setValue(100)
    assert wand.weights is not None and panel.status.text() == ""
