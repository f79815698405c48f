"""The PySide6 panel over a FakeHost (pytest-qt, offscreen): worker, drags, clicks, Apply."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fake_host import FakeHost

pytest.importorskip("pytestqt")
from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402

from sp_core.session import Session  # noqa: E402
from sp_core.ui.panel import SalientPosesPanel  # noqa: E402


@pytest.fixture()
def make_panel(qtbot, tmp_path, sample_clip):
    def make(fail_on=None, frames=(0, 300)):
        host = FakeHost(sample_clip.sub_range(*frames), fail_on=fail_on)
        session = Session(host)
        settings = QtCore.QSettings(str(tmp_path / "panel.ini"), QtCore.QSettings.Format.IniFormat)
        panel = SalientPosesPanel(session, settings=settings)
        qtbot.addWidget(panel)
        panel.resize(480, 1000)
        panel.show()
        qtbot.waitExposed(panel)
        return panel, host, session
    return make


def analyse(qtbot, panel):
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.analysing, timeout=60_000)


def test_analysis_runs_in_a_worker_and_reports_progress(make_panel, qtbot):
    panel, host, session = make_panel()
    threads, fractions = set(), []

    def progress(fraction, message):
        threads.add(threading.get_ident())
        fractions.append(fraction)

    session.subscribe("analysis_progress", progress)
    analyse(qtbot, panel)
    assert threads and threading.get_ident() not in threads
    assert fractions == sorted(fractions) and panel.progress.value() == 1000
    assert panel.k_slider.value() == session.suggested_k == session.k
    assert host.previews[-1] == session.keyframes(session.k).tolist()
    assert "Suggested K" in panel.status.text()


def test_cancel_stops_the_analysis(make_panel, qtbot):
    panel, _host, session = make_panel()
    started = threading.Event()

    def slow(fraction, message):
        started.set()
        threading.Event().wait(0.2)  # each stage takes a while

    session.subscribe("analysis_progress", slow)
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    assert started.wait(10)
    qtbot.mouseClick(panel.cancel_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.analysing, timeout=30_000)
    assert session.space is None
    assert "cancelled" in panel.status.text()
    assert panel.analyze_button.isEnabled() and not panel.apply_button.isEnabled()


def drag(qtbot, widget, start, end, steps=12):
    """A real mouse drag: press, moves with the button held, release."""
    qtbot.mousePress(widget, QtCore.Qt.MouseButton.LeftButton, pos=start)
    for t in np.linspace(0, 1, steps)[1:]:
        point = QtCore.QPoint(int(start.x() + t * (end.x() - start.x())),
                              int(start.y() + t * (end.y() - start.y())))
        qtbot.mouseMove(widget, point)
        qtbot.wait(5)
    qtbot.mouseRelease(widget, QtCore.Qt.MouseButton.LeftButton, pos=end)


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

    start_k = session.k
    target = start_k + 40
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
    cliff = [c for c in session.suggestions["cliffs"] if c != session.k][0]
    spot = [p for p in graph.suggested.points() if int(p.data()) == cliff][0]
    scene_point = graph.suggested.mapToScene(spot.pos())
    widget_point = graph.plot_widget.mapFromScene(scene_point)
    qtbot.mouseClick(graph.plot_widget.viewport(), QtCore.Qt.MouseButton.LeftButton,
                     pos=widget_point)
    qtbot.waitUntil(lambda: session.k == cliff)
    qtbot.waitUntil(lambda: host.previews[-1] == session.keyframes(cliff).tolist())


def test_apply_and_remove_through_the_host(make_panel, qtbot):
    panel, host, session = make_panel()
    analyse(qtbot, panel)
    panel.space_combo.setCurrentText("channel")
    panel.residual_box.setChecked(True)
    panel.residual_spin.setValue(0.75)
    panel.layer_edit.setText("walkKeys")
    panel.k_spin.setValue(9)
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert host.undo_chunks == ["Salient Poses: apply 9 keys"]
    names = [layer["handle"].name for layer in host.layers]
    assert names == ["walkKeys", "walkKeys_residual"]
    curves = host.layers[0]["curves"]
    assert curves.frames.tolist() == session.keyframes(9).tolist()
    assert host.layers[1]["weight"] == 0.75
    assert "Applied 9 keys" in panel.status.text() and "mm" in panel.status.text()
    assert panel.remove_button.isEnabled()
    qtbot.mouseClick(panel.remove_button, QtCore.Qt.MouseButton.LeftButton)
    assert host.layers == [] and "Removed walkKeys" in panel.status.text()


def test_failing_host_shows_a_readable_error_and_changes_nothing(make_panel, qtbot):
    panel, host, _session = make_panel(fail_on="write_curves")
    analyse(qtbot, panel)
    panel.space_combo.setCurrentText("channel")
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    text = panel.status.text()
    assert text.startswith("Apply failed, the scene is unchanged: writing layer "
                           "'salientPoses': RuntimeError: fake host failure")
    assert "Traceback" not in text and host.layers == []
    assert panel.status.property("kind") == "error"


def test_options_persist_between_sessions(make_panel, qtbot):
    panel, _host, _session = make_panel()
    panel.tangent_combo.setCurrentText("broken")
    panel.stride_spin.setValue(3)
    panel.close()
    again, _host, _session = make_panel()
    assert again.tangent_combo.currentText() == "broken" and again.stride_spin.value() == 3


def test_screenshot_command_saves_a_real_image(tmp_path, sample_path):
    from sp_core.ui.main_window import run_viewer

    out = tmp_path / "view.png"
    assert run_viewer(str(sample_path), first_frame=1001, keys=20, screenshot=str(out)) == 0
    image = QtGui.QImage(str(out))
    assert image.width() >= 1000 and image.height() >= 600
    # not blank: the skeleton, ghosts and graph put many colours on screen
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert len(colours) > 200



def test_layered_mode_previews_labelled_keys_and_draws_both_spaces(make_panel, qtbot):
    panel, host, session = make_panel()
    panel.layered_box.setChecked(True)
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    assert "select the rows of the leading part" in panel.status.text()
    row = [panel.node_table.item(r, 0).text() for r in range(panel.node_table.rowCount())
           ].index("RightWrist")
    panel.node_table.selectRow(row)
    panel.breakdown_spin.setValue(2)
    analyse(qtbot, panel)
    assert session.analysis.leading == ["RightWrist"]
    panel.request_k(5, immediately=True)
    assert host.preview_labels.count("keypose") == 5
    assert host.preview_labels.count("breakdown") == 2
    assert len(panel.graph.second_curve.getData()[0]) > 0
    assert "5 keyposes, 2 breakdowns" in panel.status.text()


def test_propagate_tab_writes_the_spread_edit_into_an_additive_layer(qtbot, tmp_path,
                                                                     sample_clip):
    from sp_core.falloff import pose_edit, propagate
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 300)
    host = StandaloneHost(clip)
    session = Session(host)
    settings = QtCore.QSettings(str(tmp_path / "p.ini"), QtCore.QSettings.Format.IniFormat)
    panel = SalientPosesPanel(session, settings=settings)
    qtbot.addWidget(panel)
    analyse(qtbot, panel)
    wand = panel.wand
    wand.frame_spin.setValue(150)
    wand.node_combo.setCurrentText("RightShoulder")
    wand.offsets[2].setValue(30.0)
    frames, weights = wand.curve.getData()
    assert weights[150] == 1.0 and len(frames) == 301
    wand.mode_combo.setCurrentText("global")
    import time

    start = time.perf_counter()
    wand.mode_combo.setCurrentText("local")
    wand.region[0].setValue(100)
    assert time.perf_counter() - start < 0.1  # two changes; only the falloff is re-read
    assert np.all(wand.curve.getData()[1][:100] == 0)
    qtbot.mouseClick(wand.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert "Propagated the edit at frame 150" in panel.status.text()
    expected = propagate(clip, pose_edit(clip, 150, wand.edited_pose()), wand.weights)
    np.testing.assert_allclose(host.evaluated_channels(), expected, atol=1e-9)
    assert host.layers[-1].kind == "additive"
    qtbot.mouseClick(panel.remove_button, QtCore.Qt.MouseButton.LeftButton)
    np.testing.assert_array_equal(host.evaluated_channels(), clip.channels)


def test_propagate_tab_takes_the_edit_from_an_edited_bvh(qtbot, tmp_path, sample_clip):
    from sp_core.io.bvh import write_bvh
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, 120)
    edited = clip.channels.copy()
    edited[60, clip.channel_names.index("Hips.Yposition")] += 3.0
    write_bvh(clip.with_channels(edited), tmp_path / "edited.bvh")
    host = StandaloneHost(clip)
    session = Session(host)
    panel = SalientPosesPanel(session, settings=QtCore.QSettings(
        str(tmp_path / "p.ini"), QtCore.QSettings.Format.IniFormat))
    qtbot.addWidget(panel)
    analyse(qtbot, panel)
    panel.wand.frame_spin.setValue(60)
    panel.wand.load_edited_bvh(str(tmp_path / "edited.bvh"))
    qtbot.mouseClick(panel.wand.apply_button, QtCore.Qt.MouseButton.LeftButton)
    column = clip.channel_names.index("Hips.Yposition")
    change = host.evaluated_channels()[:, column] - clip.channels[:, column]
    assert change[60] == pytest.approx(3.0, abs=1e-5)
    np.testing.assert_allclose(change, 3.0 * panel.wand.weights, atol=1e-5)
