"""MayaHost against the fake ``maya.cmds`` (tests/fake_maya): read, apply, compose, undo."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fake_maya"))
from maya import cmds  # noqa: E402  (the fake)

from maya_plugin.host import ROTATE_ORDERS, MayaHost, fps_from_unit  # noqa: E402
from sp_core.errors import SalientPosesError  # noqa: E402
from sp_core.session import Session  # noqa: E402

LOCKED = "LeftWrist.rotateY"


def build_scene(clip, time_unit="film", first=1001, frames=121, orients=False):
    """The sample skeleton as Maya joints keyed on every frame from ``first``."""
    cmds.reset()
    cmds.scene.time_unit = time_unit
    part = clip.sub_range(0, frames - 1)
    rng = np.random.default_rng(7)
    for i, name in enumerate(part.node_names):
        parent = part.node_names[part.parents[i]] if part.parents[i] >= 0 else None
        order = part.rotation_orders[i] or "ZYX"
        orient = tuple(rng.uniform(-40, 40, 3)) if orients and parent else (0.0, 0.0, 0.0)
        cmds.create_node(name, parent, translate=part.offsets[i], orient=orient,
                         rotate_order=ROTATE_ORDERS.index(order))
    times = np.arange(first, first + frames)
    maya_attr = {"Xposition": "translateX", "Yposition": "translateY", "Zposition": "translateZ",
                 "Xrotation": "rotateX", "Yrotation": "rotateY", "Zrotation": "rotateZ"}
    for c, channel in enumerate(part.channel_names):
        node, _, attribute = channel.rpartition(".")
        cmds.key_base(f"{node}.{maya_attr[attribute]}", times, part.channels[:, c])
    node, attr = LOCKED.split(".")
    cmds.scene.nodes[node].locked[attr] = True
    cmds.scene.playback = (float(first), float(first + frames - 1))
    cmds.scene.selection = [part.node_names[0]]
    return part, times


def composite(plugs, times):
    return np.array([[cmds.evaluate(p, float(t)) for p in plugs] for t in times])


def base_values(plugs, times):
    return np.array([[cmds.scene.curves[cmds.scene.base[p]].evaluate(float(t))
                      if p in cmds.scene.base else cmds.evaluate(p, float(t)) for p in plugs]
                     for t in times])


def test_time_units():
    assert fps_from_unit("film") == 24 and fps_from_unit("ntsc") == 30
    assert fps_from_unit("120fps") == 120
    assert fps_from_unit("29.97fps") == pytest.approx(30000 / 1001)
    with pytest.raises(SalientPosesError, match="unknown Maya time unit 'weird'"):
        fps_from_unit("weird")


@pytest.mark.parametrize("time_unit", ["film", "ntsc"])
def test_motion_matches_maya_world_positions(sample_clip, time_unit):
    part, times = build_scene(sample_clip, time_unit, orients=True)
    host = MayaHost()
    assert host.fps == fps_from_unit(time_unit)
    assert host.playback_range() == (1001, 1121)
    motion = host.motion(host.selected_nodes(), 1001, 1121)
    assert motion.first_frame == 1001 and motion.n_frames == 121
    maya = host.world_positions(motion.node_names, [1001, 1050, 1121])
    np.testing.assert_allclose(motion.positions[[0, 49, 120]], maya, atol=1e-9)
    assert host.skipped == {LOCKED: "locked"}


@pytest.mark.parametrize(("time_unit", "tangents"), [("film", "unified"), ("ntsc", "broken"),
                                                     ("film", "weighted")])
def test_apply_composes_reduced_and_original(sample_clip, time_unit, tangents):
    part, times = build_scene(sample_clip, time_unit)
    host = MayaHost()
    session = Session(host)
    session.analyze()
    session.set_k(14)
    session.reduction.tangents = tangents
    session.reduction.space = "channel"
    reduction = session.apply()
    plugs = [host.plug_for(c) for c in reduction.curves.channel_names]
    assert cmds.calls.count("openChunk") == 1 and "undo" not in cmds.calls
    override = [layer for layer in cmds.scene.layers if layer.override]
    assert len(override) == 1 and LOCKED not in override[0].curves
    written = [i for i, p in enumerate(plugs) if p in override[0].curves]
    assert len(written) == int(reduction.curves.animated.sum()) - 1  # all but the locked one
    # every frame of the composite equals the reduced curves on the written plugs...
    got = composite([plugs[i] for i in written], times)
    expected = reduction.curves.evaluate(times)[:, written]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    # ... and the original where nothing was written (locked, unanimated)
    rest = [p for p in plugs if p not in override[0].curves]
    np.testing.assert_allclose(composite(rest, times), base_values(rest, times), atol=1e-9)
    # keys only at the keyframes, in host frames
    curve = cmds.scene.curves[override[0].curves[plugs[written[0]]]]
    assert sorted(curve.keys) == [float(f) for f in session.keyframes()]


def test_residual_layer_restores_the_original_and_undo_removes_everything(sample_clip):
    part, times = build_scene(sample_clip, "ntsc")
    host = MayaHost()
    session = Session(host)
    session.analyze()
    session.set_k(10)
    session.reduction.space = "channel"
    session.reduction.residual = True
    session.apply()
    plugs = [f"{n}.{a}" for n in part.node_names for a in ("translateX", "rotateZ", "rotateY")]
    additive = [layer for layer in cmds.scene.layers if not layer.override]
    assert len(additive) == 1 and additive[0].accumulation == 0
    np.testing.assert_allclose(composite(plugs, times), base_values(plugs, times), atol=1e-9)
    cmds.undo()  # the one chunk of Apply
    assert cmds.scene.layers == []
    session.applied.clear()


def test_remove_is_one_undo_step(sample_clip):
    build_scene(sample_clip)
    session = Session(MayaHost())
    session.analyze()
    session.reduction.space = "channel"
    session.reduction.residual = True
    session.apply()
    assert len(cmds.scene.layers) == 2
    session.remove()
    assert cmds.scene.layers == []
    cmds.undo()
    assert len(cmds.scene.layers) == 2


def test_failure_midway_leaves_nothing_behind(sample_clip, monkeypatch):
    build_scene(sample_clip)
    session = Session(MayaHost())
    session.analyze()
    session.reduction.space = "channel"
    count = {"n": 0}
    real = cmds.setKeyframe

    def flaky(curve, time, value):
        count["n"] += 1
        if count["n"] == 50:
            raise RuntimeError("disk full")
        return real(curve, time, value)

    monkeypatch.setattr(cmds, "setKeyframe", flaky)
    with pytest.raises(SalientPosesError, match="keying .* in layer 'salientPoses': "
                                                "RuntimeError: disk full"):
        session.apply()
    assert cmds.scene.layers == [] and "undo" in cmds.calls


def test_quaternion_curves_are_reported_before_anything_is_written(sample_clip):
    build_scene(sample_clip)
    cmds.scene.curves[cmds.scene.base["Hips.rotateX"]].interpolation = "quaternionSlerp"
    session = Session(MayaHost())
    with pytest.raises(SalientPosesError, match="quaternion interpolation.*Hips.rotateX"):
        session.analyze()
    assert cmds.scene.layers == []


def test_selftest_passes_on_the_fake_and_fails_when_apply_is_wrong(monkeypatch):
    from maya_plugin import selftest

    cmds.reset()
    lines = []
    assert selftest.run(lines.append)
    assert lines[-1] == "Salient Poses self-test: PASS" and len(lines) == 7
    assert all(line.startswith("PASS") for line in lines[:-1])
    # a host that keys wrong values must be caught
    real = cmds.setKeyframe

    def off_by_one(curve, time, value):
        return real(curve, time, value + (0.5 if "salientPoses" in curve else 0.0))

    monkeypatch.setattr(cmds, "setKeyframe", off_by_one)
    lines.clear()
    assert not selftest.run(lines.append)
    assert any(line.startswith("FAIL  override layer alone") for line in lines)
    assert lines[-1] == "Salient Poses self-test: FAIL"


def test_api_reduces_with_cli_options(sample_clip):
    from maya_plugin import api

    build_scene(sample_clip)
    result = api.reduce(["Hips"], ratio=0.1, tangents="broken", space="channel",
                        residual=True, layer="walk")
    assert result.keys == round(0.1 * 121)
    assert [h.name for h in result.layers] == ["walk", "walk_residual"]
    api.remove(result)
    assert cmds.scene.layers == []
    with pytest.raises(TypeError, match="unknown option 'colour'"):
        api.reduce(["Hips"], colour="red")


def test_mayapy_batch_reduces_saves_and_records_failures(sample_clip, tmp_path):
    from maya_plugin import batch

    build_scene(sample_clip)
    cmds.saved["walk.ma"] = __import__("copy").deepcopy(cmds.scene)
    out = tmp_path / "out"
    code = batch.run(["walk.ma", "missing.ma", "--out", str(out), "--ratio", "0.1",
                      "--space", "channel", "--residual"])
    assert code == 1
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0] == "clip,frames,keys,mean_mm,max_mm,seconds,status"
    assert rows[1].startswith("walk.ma,121,12,") and rows[1].endswith(",ok")
    assert "failed: RuntimeError: File not found: missing.ma" in rows[2]
    saved = cmds.saved[str(out / "walk.ma")]
    assert [layer.name for layer in saved.layers] == ["salientPoses", "salientPoses_residual"]
    assert (out / "walk.ma").exists()


def test_maya_plugin_imports_outside_maya():
    import subprocess

    code = ("import sys, maya_plugin, maya_plugin.host, maya_plugin.api, maya_plugin.ui, "
            "maya_plugin.batch, maya_plugin.selftest, maya_plugin.preview; "
            "assert 'maya' not in sys.modules and 'maya.cmds' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_panel_reports_the_channels_maya_left_alone(sample_clip, qtbot, tmp_path):
    from PySide6 import QtCore

    from sp_core.ui.panel import SalientPosesPanel

    build_scene(sample_clip)
    session = Session(MayaHost())
    settings = QtCore.QSettings(str(tmp_path / "p.ini"), QtCore.QSettings.Format.IniFormat)
    panel = SalientPosesPanel(session, settings=settings)
    qtbot.addWidget(panel)
    panel.start_analysis()
    qtbot.waitUntil(lambda: not panel.analysing, timeout=60_000)
    panel.space_combo.setCurrentText("channel")
    panel.apply()
    assert "Left alone: LeftWrist.rotateY (locked)." in panel.status.text()


def test_layered_apply_writes_maya_breakdown_keys(sample_clip):
    build_scene(sample_clip)
    session = Session(MayaHost())
    session.analysis.layered = True
    session.analysis.leading = ["RightWrist", "LeftWrist"]
    session.analysis.breakdowns = 3
    session.analyze()
    session.set_k(5)
    session.reduction.space = "channel"
    reduction = session.apply()
    labels = reduction.curves.labels
    assert labels.count("keypose") == 5 and labels.count("breakdown") == 3
    breakdowns = {float(f) for f in reduction.curves.breakdown_frames}
    override = [layer for layer in cmds.scene.layers if layer.override][0]
    for curve_name in override.curves.values():
        assert cmds.scene.curves[curve_name].breakdowns == breakdowns
