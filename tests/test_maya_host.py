"""MayaHost against the strict fake ``maya`` package (tests/fake_maya, see its FACTS.md)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fake_maya"))
from choices import SUGGESTED
from maya import cmds, testing  # noqa: E402  (the fake)
from maya._scene import STATE  # noqa: E402
from maya_scenes import LOCKED, build_scene, ui_composite  # noqa: E402

from maya_plugin.host import LOCKED_MODES, MayaHost  # noqa: E402
from sp_core.errors import OptionError, SalientPosesError  # noqa: E402
from sp_core.session import Session  # noqa: E402


def layer(override: bool):
    return next(la for la in STATE.scene.layers if la.override == override)


@pytest.mark.parametrize(("time_unit", "fps"), [("film", 24), ("ntsc", 30), ("pal", 25),
                                                ("ntscf", 60), ("120fps", 120),
                                                ("29.97fps", 30000 / 1001)])
def test_frame_rate_and_range_in_the_scene_time_unit(sample_clip, time_unit, fps):
    build_scene(sample_clip, time_unit, frames=20)
    host = MayaHost()
    assert host.fps == pytest.approx(fps)
    assert host.playback_range() == (1001, 1020)
    host.set_current_frame(1010)
    assert host.current_frame() == 1010 and STATE.scene.time == 1010


@pytest.mark.parametrize(("time_unit", "linear_unit"), [("film", "cm"), ("ntsc", "m")])
def test_motion_reproduces_the_channels_and_maya_world_positions(sample_clip, time_unit,
                                                                  linear_unit):
    part, times = build_scene(sample_clip, time_unit, orients=True, linear_unit=linear_unit)
    host = MayaHost()
    motion = host.motion(host.selected_nodes(), 1001, 1121)
    assert motion.first_frame == 1001 and motion.n_frames == 121
    assert motion.fps == pytest.approx(host.fps)
    plugs = [host.plug_for(c) for c in motion.channel_names]
    np.testing.assert_allclose(motion.channels, ui_composite(plugs, times), atol=1e-7)
    maya = host.world_positions(motion.node_names, [1001, 1050, 1121])
    np.testing.assert_allclose(motion.positions[[0, 49, 120]], maya, atol=1e-7)
    assert host.skipped == {LOCKED: "locked"}


def test_reading_makes_no_call_per_plug_per_frame(sample_clip):
    part, times = build_scene(sample_clip, frames=50)
    host = MayaHost()
    host.motion(host.selected_nodes(), 1001, 1050)
    joints = len(part.node_names)
    assert STATE.calls["MDGContextGuard"] == 50 + 1  # one per frame + one for the start values
    # + the root's parentMatrix on every frame, + each joint's offsetParentMatrix once
    assert STATE.calls["MPlug.asMObject"] == 50 * (joints + 1) + joints
    assert STATE.calls["MPlug.asDouble"] <= joints * 12  # static reads, once per joint
    assert STATE.calls["cmds.getAttr"] == 0


@pytest.mark.parametrize(("time_unit", "tangents"), [("film", "unified"), ("ntsc", "broken"),
                                                     ("film", "weighted"), ("pal", "smooth")])
def test_apply_composes_reduced_curves_with_the_locks_of_the_mode(sample_clip, time_unit,
                                                                   tangents):
    part, times = build_scene(sample_clip, time_unit)
    host = MayaHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(14)
    session.set_options(tangents=tangents, space="channel")
    reduction = session.apply()
    assert len(STATE.undo_queue) == 1 and not STATE.unrecorded_api_edits
    override = layer(True)
    plugs = [host.plug_for(c) for c in reduction.curves.channel_names]
    written = [i for i, p in enumerate(plugs) if p in override.curves]
    assert LOCKED not in override.curves
    # every keyed channel; the locked one is kept as captured, not keyed (nor counted)
    assert not reduction.curves.animated[plugs.index(LOCKED)]
    assert len(written) == int(reduction.curves.animated.sum())
    got = ui_composite([plugs[i] for i in written], times)
    expected = reduction.curves.evaluate(times)[:, written]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    rest = [p for p in plugs if p not in override.curves and p in STATE.scene.inputs]
    assert LOCKED in rest
    base = [STATE.scene.curves[STATE.scene.inputs[p]].evaluate(times / STATE.scene.fps)
            for p in rest]
    np.testing.assert_allclose(testing.composite(rest, times), np.stack(base, axis=1),
                               atol=1e-12)
    for i in written:
        curve = STATE.scene.curves[override.curves[plugs[i]]]
        frames = np.round(curve.times * STATE.scene.fps)
        assert frames.tolist() == [float(f) for f in session.keyframes()]
        assert curve.tangents_locked.all() == LOCKED_MODES[tangents]
        assert not curve.tangents_locked.any() or LOCKED_MODES[tangents]
        assert curve.weighted == (tangents == "weighted")


def test_residual_layer_restores_the_original_and_undo_removes_everything(sample_clip):
    part, times = build_scene(sample_clip, "ntsc")
    original = {p: STATE.scene.curves[c].copy() for p, c in STATE.scene.inputs.items()}
    host = MayaHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(10)
    session.set_options(space="channel", residual_layer=True)
    session.apply()
    additive = layer(False)
    assert additive.accumulation == 0
    plugs = [p for p in original if p != LOCKED]  # (not the layer's weight Apply keyed)
    expected = np.stack([original[p].evaluate(times / 30.0) for p in plugs], axis=1)
    np.testing.assert_allclose(testing.composite(plugs, times), expected, atol=1e-9)
    cmds.undo()  # the one chunk of Apply
    assert STATE.scene.layers == [] and set(STATE.scene.curves) == {
        STATE.scene.inputs[p] for p in STATE.scene.inputs}
    np.testing.assert_allclose(testing.composite(plugs, times), expected, atol=1e-12)
    session.applied.clear()


def test_corrective_keys_are_linear_keys_written_by_the_undoable_command(sample_clip):
    build_scene(sample_clip)
    host = MayaHost()
    keys = {"Hips.Xposition": (np.array([1005, 1009]), np.array([0.0, 0.8])),
            "LeftKnee.Xrotation": (np.array([1012]), np.array([3.0]))}
    cmds.undoInfo(openChunk=True, chunkName="corrective")
    handle = host.write_sparse(keys, "corrective", 1.0)
    cmds.undoInfo(closeChunk=True)
    assert not STATE.unrecorded_api_edits  # every curve edit is in the command's change cache
    layer = next(la for la in STATE.scene.layers if la.name == handle.token)
    assert (layer.override, layer.accumulation) == (False, 0)
    assert sorted(layer.curves) == ["Hips.translateX", "LeftKnee.rotateX"]
    hips = STATE.scene.curves[layer.curves["Hips.translateX"]]
    knee = STATE.scene.curves[layer.curves["LeftKnee.rotateX"]]
    np.testing.assert_allclose(hips.times * STATE.scene.fps, [1005, 1009])
    assert set(hips.in_type) | set(hips.out_type) == {2}  # kTangentLinear
    np.testing.assert_allclose(knee.values, [np.radians(3.0)])  # radians inside Maya
    cmds.undo()
    assert [la.name for la in STATE.scene.layers] == []


def test_analysing_again_after_apply_reads_the_motion_under_its_layers(sample_clip):
    """The plugs are driven by the layers' blend nodes now; the read mutes this tool's layers
    (an Analyze after Apply analysed the reduction) and turns them back on."""
    part, times = build_scene(sample_clip, frames=60)
    host = MayaHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    before = session.motion
    session.set_k(6)
    session.set_options(space="channel")
    session.apply()
    plugs = [host.plug_for(c) for c in before.channel_names]
    shown = ui_composite(plugs, times)
    assert np.abs(shown - before.channels).max() > 0.1  # (the reduction plays)
    motion = host.motion(["Hips"], 1001, 1060)
    assert motion.channel_names == before.channel_names
    np.testing.assert_allclose(motion.channels, before.channels, atol=1e-7)
    np.testing.assert_array_equal(ui_composite(plugs, times), shown)
    assert not any(layer.mute for layer in STATE.scene.layers)
    assert host.skipped == {LOCKED: "locked"}


def test_a_reopened_panel_reads_the_motion_under_the_layers_an_earlier_one_wrote(sample_clip):
    """The layers are known to every MayaHost of the Maya session: a panel closed and opened
    again (a new host) or the TD API read the motion, not the reduction."""
    build_scene(sample_clip, frames=60)
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    before = session.motion
    session.set_k(6)
    session.set_options(space="channel")
    session.apply()
    again = MayaHost().motion(["Hips"], 1001, 1060)
    np.testing.assert_allclose(again.channels, before.channels, atol=1e-7)


def test_remove_is_one_undo_step(sample_clip):
    build_scene(sample_clip)
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    session.set_options(space="channel", residual_layer=True)
    session.apply()
    assert len(STATE.scene.layers) == 2
    session.remove()
    assert STATE.scene.layers == []
    cmds.undo()
    assert len(STATE.scene.layers) == 2


def test_failure_midway_leaves_nothing_behind(sample_clip, monkeypatch):
    build_scene(sample_clip)
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    session.set_options(space="channel")
    from maya.api import OpenMayaAnim

    count = {"n": 0}
    real = OpenMayaAnim.MFnAnimCurve.addKeysWithTangents

    def flaky(self, *args, **kwargs):
        count["n"] += 1
        if count["n"] == 20:
            raise RuntimeError("(kFailure): disk full")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(OpenMayaAnim.MFnAnimCurve, "addKeysWithTangents", flaky)
    with pytest.raises(SalientPosesError, match=r"writing the curves of layer 'salientPoses'.*"
                                                r"disk full"):
        session.apply()
    assert STATE.scene.layers == [] and STATE.undo_queue == []
    assert all(not name.endswith("_inputB") for name in STATE.scene.curves)


def test_a_failure_before_any_change_leaves_the_users_undo_queue_alone(sample_clip,
                                                                      monkeypatch):
    build_scene(sample_clip, frames=30)
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    cmds.select("LeftKnee")  # the user's last undoable action
    queue = list(STATE.undo_queue)
    monkeypatch.setattr(MayaHost, "_plugs_to_write", lambda *a: (_ for _ in ()).throw(
        SalientPosesError("nothing to write")))
    with pytest.raises(SalientPosesError, match="nothing to write"):
        session.apply()
    assert STATE.undo_queue == queue and STATE.scene.selection == ["LeftKnee"]


def test_quaternion_curves_are_reported_before_anything_is_written(sample_clip):
    build_scene(sample_clip)
    STATE.scene.curves[STATE.scene.inputs["Hips.rotateX"]].interpolation = "quaternionSlerp"
    session = Session(MayaHost(), SUGGESTED)
    with pytest.raises(SalientPosesError, match=r"quaternion interpolation.*Hips\.rotateX "
                                                r"\(quaternionSlerp\)"):
        session.analyze()
    assert STATE.scene.layers == []


def test_driven_channels_are_named_and_left_alone(sample_clip):
    build_scene(sample_clip)
    testing.create_node("Hips_parentConstraint1", "Hips", type="parentConstraint")
    STATE.scene.inputs["LeftKnee.rotateZ"] = "Hips_parentConstraint1"
    host = MayaHost()
    host.motion(["Hips"], 1001, 1010)
    assert host.skipped["LeftKnee.rotateZ"] == ("driven by Hips_parentConstraint1 "
                                             "(parentConstraint)")


def test_channels_driven_through_their_compound_are_left_alone(sample_clip):
    """``decomposeMatrix.outputRotate → LeftKnee.rotate`` drives rotateX, Y and Z, which are no
    destinations themselves: they were taken for free channels and keyed in a layer the
    connection overrides."""
    build_scene(sample_clip)
    testing.create_node("LeftKnee_decompose", type="decomposeMatrix")
    for axis in "XYZ":  # (the children's own curves give way to the compound's connection)
        STATE.scene.inputs.pop(f"LeftKnee.rotate{axis}")
    STATE.scene.inputs["LeftKnee.rotate"] = "LeftKnee_decompose"
    host = MayaHost()
    host.motion(["Hips"], 1001, 1010)
    assert {p: host.skipped.get(p) for p in ("LeftKnee.rotateX", "LeftKnee.rotateZ")} == {
        p: "driven by LeftKnee_decompose (decomposeMatrix)"
        for p in ("LeftKnee.rotateX", "LeftKnee.rotateZ")}


def test_bad_selections_and_nan_keys_give_one_clear_message(sample_clip):
    build_scene(sample_clip, frames=20)
    host = MayaHost()
    with pytest.raises(SalientPosesError, match="no node 'nobody' in the scene"):
        host.motion(["nobody"], 1001, 1020)
    curve = STATE.scene.curves[STATE.scene.inputs["LeftKnee.rotateX"]]
    curve.values[5] = np.nan
    STATE.touch()
    with pytest.raises(SalientPosesError, match=r"LeftKnee.* is not a number at frame 100[56] "):
        host.motion(["Hips"], 1001, 1020)


def test_a_joint_selected_with_one_below_it_is_read_as_one_limb(sample_clip):
    build_scene(sample_clip, frames=20)
    for roots in (["Hips", "LeftWrist"], ["LeftWrist", "Hips"]):
        assert MayaHost().motion(roots, 1001, 1020).root_names == ["Hips"]


def test_a_limb_is_measured_at_the_whole_skeletons_height_or_says_why_not(sample_clip):
    build_scene(sample_clip, frames=20)
    host = MayaHost()
    whole = host.motion(["Hips"], 1001, 1020)
    limb = host.motion(["RightShoulder"], 1001, 1020)
    assert limb.height() == pytest.approx(whole.height()) and host.notes == []
    # a joint the limb's analysis never reads refuses to be read: the limb's own height, said
    cmds.setAttr("LeftWrist.rotateAxisX", 10.0)
    limb = host.motion(["RightShoulder"], 1001, 1020)
    assert limb.height() < whole.height() / 2
    assert host.notes == ["the whole skeleton's height could not be read (LeftWrist has a "
                          "rotate axis (rotateAxis); zero it or leave the node out of the "
                          "analysis): errors are scaled to the selection's own height, so "
                          "their millimetres are larger than the body's"]


def test_a_scene_without_joints_and_a_one_frame_range(sample_clip):
    testing.reset()
    testing.create_node("camera1", type="transform")
    with pytest.raises(SalientPosesError, match="nothing to analyse: select a joint"):
        MayaHost().motion([], 1, 10)
    build_scene(sample_clip, frames=5)
    motion = MayaHost().motion(["Hips"], 1003, 1003)
    assert motion.n_frames == 1 and motion.first_frame == 1003
    plugs = [MayaHost.plug_for(c) for c in motion.channel_names]
    np.testing.assert_allclose(motion.channels, ui_composite(plugs, [1003]), atol=1e-7)


def test_long_reads_show_a_progress_window_that_esc_cancels(sample_clip, monkeypatch):
    from maya_plugin import host as host_module

    build_scene(sample_clip, frames=30)
    STATE.batch = False
    monkeypatch.setattr(host_module, "PROGRESS_AFTER", 0.0)
    STATE.ui["cancel_at"] = 50  # the user presses Esc when half way
    with pytest.raises(SalientPosesError, match="cancelled"):
        MayaHost().motion(["Hips"], 1001, 1030)
    assert STATE.ui["progress_windows"] == 1 and STATE.ui["progress"] is None


def test_layered_apply_writes_maya_breakdown_keys(sample_clip):
    build_scene(sample_clip)
    session = Session(MayaHost(), SUGGESTED)
    session.set_options(layered=True, leading=["RightWrist", "LeftWrist"], breakdowns=3)
    session.analyze()
    session.set_k(5)
    session.set_options(space="channel")
    reduction = session.apply()
    labels = reduction.curves.labels
    assert labels.count("keypose") == 5 and labels.count("breakdown") == 3
    breakdowns = [f in reduction.curves.breakdown_frames for f in reduction.curves.frames]
    for name in layer(True).curves.values():
        assert STATE.scene.curves[name].breakdown.tolist() == breakdowns


def test_preview_draws_flags_on_the_time_slider_singleton(sample_clip):
    build_scene(sample_clip, frames=20)
    STATE.batch = False
    host = MayaHost()
    host.preview_keyframes([1001, 1010, 1020], ["keypose", "breakdown", "keypose"])
    from maya.api.OpenMayaUI import MTimeSliderCustomDrawManager

    contexts = MTimeSliderCustomDrawManager().contexts
    (primitives,) = contexts.values()
    assert [p.startTime.value for p in primitives] == [1001, 1010, 1020]
    assert primitives[1].tooltip == "Salient Poses breakdown 1010"
    host.clear_preview()
    assert list(contexts.values()) == [[]]


def test_api_reduces_with_cli_options(sample_clip):
    from maya_plugin import api

    build_scene(sample_clip)
    result = api.reduce(["Hips"], ratio=0.1, tangents="broken", space="channel",
                        residual_layer=True, layer="walk")
    assert result.keys == round(0.1 * 121)
    assert [h.name for h in result.layers] == ["walk", "walk_residual"]
    api.remove(result)
    assert STATE.scene.layers == []
    with pytest.raises(OptionError, match="unknown option 'colour'"):
        api.reduce(["Hips"], colour="red")


def test_mayapy_batch_reduces_saves_and_records_failures(sample_clip, tmp_path):
    from maya_plugin import batch

    build_scene(sample_clip)
    saved = STATE.scene.snapshot()
    saved.curves = {k: v.copy() for k, v in saved.curves.items()}
    STATE.saved["walk.ma"] = saved
    out = tmp_path / "out"
    code = batch.run(["walk.ma", "missing.ma", "--out", str(out), "--ratio", "0.1",
                      "--space", "channel", "--residual-layer"])
    assert code == 1
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0] == ("clip,frames,keys,pose_keys,corrective_keys,total_keys,mean_mm,max_mm,"
                       "seconds,status,notes")
    assert rows[1].startswith("walk.ma,121,12,") and rows[1].endswith(",ok,")
    assert "File not found: missing.ma" in rows[2]
    written = STATE.saved[str(out / "walk.ma")]
    assert [la.name for la in written.layers] == ["salientPoses", "salientPoses_residual"]
    assert (out / "walk.ma").exists()


def test_mayapy_batch_saves_a_still_scene_without_a_layer_and_says_why(sample_clip, tmp_path):
    """A scene in which nothing moves (a T-pose take) failed the in-host batch, which the
    standalone batch reports as ok with 2 keys: both now say ok, with the reason no key was
    needed in the notes; the in-host copy is saved with no layer."""
    from maya_plugin import batch

    still = sample_clip.with_channels(np.repeat(sample_clip.channels[:1], sample_clip.n_frames,
                                                axis=0))
    build_scene(still)
    STATE.saved["still.ma"] = STATE.scene.snapshot()
    out = tmp_path / "out"
    assert batch.run(["still.ma", "--out", str(out)]) == 0
    row = json.loads((out / "summary.json").read_text())["rows"][0]
    assert row["status"] == "ok" and row["keys"] == 2
    assert row["notes"] == ("nothing moves in frames 1001..1121: every channel keeps one value, "
                            "so there is no key to write")
    assert STATE.saved[str(out / "still.ma")].layers == []


def test_maya_plugin_imports_outside_maya():
    import subprocess

    code = ("import sys, maya_plugin, maya_plugin.host, maya_plugin.api, maya_plugin.ui, "
            "maya_plugin.batch, maya_plugin.selftest, maya_plugin.preview; "
            "assert 'maya' not in sys.modules and 'maya.cmds' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_selftest_passes_on_the_fake_and_fails_when_apply_is_wrong(monkeypatch):
    from maya_plugin import command, selftest

    testing.reset("film")
    lines = []
    assert selftest.run(lines.append), "\n".join(lines)
    assert lines[-1] == "Salient Poses self-test: PASS"
    assert all(line.startswith(("PASS", "Maya", "      ")) for line in lines[:-1])
    real = command.write_curve

    def off(job, unit, change):  # a host that keys wrong values must be caught
        job = dict(job, values=job["values"] + 0.01)
        return real(job, unit, change)

    monkeypatch.setattr(command, "write_curve", off)
    monkeypatch.setattr(selftest, "MODES", ("unified",))
    testing.reset("film")
    lines.clear()
    assert not selftest.run(lines.append)
    assert any(line.startswith("FAIL") for line in lines)
    assert lines[-1] == "Salient Poses self-test: FAIL"
    # an override layer over a part of the take that is not limited to it must be caught
    monkeypatch.setattr(command, "write_curve", real)
    monkeypatch.setattr(MayaHost, "_weight_on_range", staticmethod(lambda *args: 0))
    testing.reset("film")
    lines.clear()
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 2 and "apply to frames 10-39" in failed[0], "\n".join(lines)
    assert "apply replacing it" in failed[1]  # (a part of the take too)


def test_selftest_catches_corrections_written_on_every_frame(monkeypatch):
    from maya_plugin import selftest

    def dense(self, keys, layer, weight):  # the same motion, a key on every frame
        frames = np.arange(selftest.FIRST, selftest.FIRST + selftest.FRAMES)
        values = np.column_stack([np.interp(frames, f, v) for f, v in keys.values()])
        return self.write_residual(list(keys), frames, values, layer, weight)

    monkeypatch.setattr(selftest, "MODES", ("unified",))
    monkeypatch.setattr(MayaHost, "write_sparse", dense)
    testing.reset("film")
    lines: list[str] = []
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and "corrective curves hold" in failed[0], failed


def test_panel_reports_the_channels_maya_left_alone(sample_clip, qtbot, tmp_path):
    from PySide6 import QtCore

    from sp_core.ui.panel import SalientPosesPanel

    build_scene(sample_clip)
    session = Session(MayaHost(), SUGGESTED)
    settings = QtCore.QSettings(str(tmp_path / "p.ini"), QtCore.QSettings.Format.IniFormat)
    panel = SalientPosesPanel(session, settings=settings)
    qtbot.addWidget(panel)
    panel.start_analysis()
    qtbot.waitUntil(lambda: not panel.analysing, timeout=60_000)
    session.set_options(space="channel")
    panel.apply()  # fits in a worker, writes on this thread
    qtbot.waitUntil(lambda: not panel.applying, timeout=60_000)
    assert "Left alone: LeftWrist.rotateY (locked)." in panel.status.text()


@pytest.mark.parametrize("batch", [False, True])
def test_module_user_setup_loads_the_plugin_and_adds_the_menu(batch):
    from maya_plugin import ui
    from maya_plugin.host import COMMAND, PLUGIN_FILE

    testing.reset(batch=batch)
    user_setup = PLUGIN_FILE.parents[1] / "scripts" / "userSetup.py"
    exec(compile(user_setup.read_text(), str(user_setup), "exec"), {})  # what Maya does
    assert cmds.pluginInfo(str(PLUGIN_FILE), query=True, loaded=True)
    assert callable(getattr(cmds, COMMAND))
    items = STATE.ui["menus"].get(ui.MENU, {}).get("items")
    assert items == (None if batch else ["Open Panel", "Reduce Selection with Last Settings",
                                          "-", "Run Self-Test (new scene)", "Help"])


def test_reduce_with_last_settings_uses_what_the_panel_saved(sample_clip, tmp_path, monkeypatch):
    """The menu's "Reduce Selection with Last Settings" read QSettings keys the panel never
    writes (it keeps one JSON record), so it always reduced with the defaults."""
    from PySide6 import QtCore

    from maya_plugin import api, ui
    from sp_core.options import Options
    from sp_core.ui import settings

    stored = QtCore.QSettings(str(tmp_path / "panel.ini"), QtCore.QSettings.Format.IniFormat)
    monkeypatch.setattr(settings, "panel_settings", lambda: stored)
    assert ui.last_settings() == {}
    settings.save_options(stored, Options().replace(
        tangents="broken", stride=2, residual_layer=True, roots=["Hips"], keys=5))
    # what belongs to one scene (roots, K) is not carried over
    assert ui.last_settings() == {"tangents": "broken", "stride": 2, "residual_layer": True}
    build_scene(sample_clip, frames=60)
    result = api.reduce(["Hips"], **ui.last_settings())
    assert [handle.kind for handle in result.layers] == ["override", "additive"]
    keys = result.reduction.curves.frames
    assert len(keys) > 2 and all(f % 2 == 0 for f in keys[1:-1])
    # a ratio comes back (the default tolerance, restored after it, undid it); keyposes +
    # breakdowns goes with its leading nodes, which belong to one scene and are not saved: the
    # menu reduces without that mode (it refused every time)
    settings.save_options(stored, Options().replace(ratio=0.1, layered=True, leading=("Head",),
                                                    breakdowns=2))
    assert ui.last_settings() == {"ratio": 0.1}
    assert api.reduce(["Hips"], **ui.last_settings()).keys == 6  # round(0.1 × 60)
    # a value the panel keeps greyed (smoothness after going back to unified) is not given to
    # the API, which refuses it given, as a command line does (the menu failed on it)
    settings.save_options(stored, Options().replace(tangents="smooth", smoothness=0.5)
                          .replace(tangents="unified", space="channel"))
    assert ui.last_settings() == {"space": "channel"}


@pytest.mark.parametrize("attribute, value, what", [
    ("rotatePivotX", 10.0, "a rotate pivot (rotatePivot); zero it"),
    ("rotatePivotTranslateY", 1.0, "a rotate pivot translate (rotatePivotTranslate); zero it"),
    ("scalePivotTranslateZ", 1.0, "a scale pivot translate (scalePivotTranslate); zero it"),
    ("shearXY", 0.5, "a shear (shear); zero it"),
])
def test_a_transform_whose_pivot_or_shear_moves_its_matrix_is_refused(sample_clip, attribute,
                                                                     value, what):
    """A plain transform's matrix has pivots and a shear besides translate and rotate
    (transform node reference): read as translate and rotate, its keys would move it (a rotate
    pivot of 10 cm and rotateZ 90 read as translate (10, 10, 0)). It is refused, naming it."""
    build_scene(sample_clip, frames=20)
    STATE.scene.nodes["Hips"].type = "transform"
    host = MayaHost()
    host.motion(["Hips"], 1001, 1020)  # no pivot: read
    cmds.setAttr(f"Hips.{attribute}", value)
    with pytest.raises(SalientPosesError, match=f"^{re.escape(f'Hips has {what}')} or leave "
                                                "the node out of the analysis$"):
        host.motion(["Hips"], 1001, 1020)


def test_a_scale_pivot_is_refused_only_with_a_scale(sample_clip):
    build_scene(sample_clip, frames=20)
    STATE.scene.nodes["Hips"].type = "transform"
    host = MayaHost()
    cmds.setAttr("Hips.scalePivotX", 5.0)
    host.motion(["Hips"], 1001, 1020)  # SP⁻¹ · SP: no effect without a scale or shear
    cmds.setAttr("Hips.scaleY", 2.0)
    with pytest.raises(SalientPosesError, match=r"^Hips has a scale pivot \(scalePivot\) and a "
                                                r"scale; zero the pivot or leave the node out"):
        host.motion(["Hips"], 1001, 1020)


def test_a_joints_rotate_pivot_is_not_in_its_matrix(sample_clip):
    """A joint's matrix is S · RO · R · JO · IS · T (joint node reference): no pivot."""
    build_scene(sample_clip, frames=20)
    cmds.setAttr("Hips.rotatePivotX", 10.0)
    assert MayaHost().motion(["Hips"], 1001, 1020).n_frames == 20


def test_a_node_with_an_offset_parent_matrix_or_not_inheriting_its_parent_is_refused(
        sample_clip):
    build_scene(sample_clip, frames=20)
    host = MayaHost()
    offset = np.eye(4)
    offset[3, :3] = (0.0, 5.0, 0.0)  # (row vectors: the translation is the last row)
    cmds.setAttr("LeftKnee.offsetParentMatrix", offset.ravel().tolist(), type="matrix")
    with pytest.raises(SalientPosesError, match=r"^LeftKnee has an offset parent matrix "
                                                r"\(offsetParentMatrix\); bake it into its "
                                                r"channels or leave the node out"):
        host.motion(["Hips"], 1001, 1020)
    cmds.setAttr("LeftKnee.offsetParentMatrix", np.eye(4).ravel().tolist(), type="matrix")
    host.motion(["Hips"], 1001, 1020)
    cmds.setAttr("LeftKnee.inheritsTransform", False)
    with pytest.raises(SalientPosesError, match=r"^LeftKnee does not inherit its parent's "
                                                r"transform \(inheritsTransform is off\); turn "
                                                r"it on or leave the node out"):
        host.motion(["Hips"], 1001, 1020)


def test_a_second_apply_names_its_layer_apart_and_a_failed_one_undoes_only_itself(
        sample_clip, monkeypatch):
    """A layer name in use gets the next free one (``objExists``), and a layer the host
    refuses to create leaves the user's last undo step alone (nothing of Apply to undo)."""
    build_scene(sample_clip, frames=40)
    host = MayaHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(6)
    session.apply()
    session.apply(name="salientPoses")
    session.apply(name="salientPoses2")  # (the panel's "Add new layer" name, taken)
    assert [la.name for la in STATE.scene.layers] == ["salientPoses", "salientPoses2",
                                                      "salientPoses3"]
    cmds.setAttr("LeftKnee.rotateAxisY", 0.0)  # the user's last step before a failed Apply
    steps = len(STATE.undo_queue)
    monkeypatch.setattr(cmds, "animLayer", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("animLayer: refused")))
    with pytest.raises(SalientPosesError, match="refused"):
        session.apply(name="salientPoses")
    assert len(STATE.undo_queue) == steps and [la.name for la in STATE.scene.layers] == [
        "salientPoses", "salientPoses2", "salientPoses3"]


def test_a_failed_apply_with_undo_off_leaves_nothing_and_undo_off(sample_clip, monkeypatch):
    """Undo turned off (``undoInfo -state 0``, a script's or a batch's choice): the roll back
    of a failed Apply is an undo, so undo is on for Apply's chunk and off again after."""
    build_scene(sample_clip, frames=40)
    host = MayaHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(6)
    cmds.undoInfo(state=False)

    def fail(jobs):
        raise RuntimeError("salientPosesWriteCurves: out of memory")

    monkeypatch.setattr(host, "_write", fail)
    with pytest.raises(SalientPosesError, match="out of memory"):
        session.apply()
    assert STATE.scene.layers == [] and not STATE.undo_on
    assert all(not node.type.startswith("animBlendNode") for node in STATE.scene.nodes.values())
    # a successful Apply with undo off leaves undo off and nothing on its queue (its chunk
    # stayed there, turned off without a flush)
    monkeypatch.undo()
    session.apply()
    assert STATE.scene.layers and not STATE.undo_on and not STATE.undo_queue


def test_layer_curves_are_euler_whatever_the_new_curve_preference(sample_clip):
    """A user's New Curve Default of quaternion slerp (optionVar rotationInterpolationDefault
    3) would make the layer's rotate curves quaternion ones, which ignore the tangents
    written: they are made independent Euler, and the preference is put back."""
    build_scene(sample_clip, frames=40)
    cmds.optionVar(intValue=("rotationInterpolationDefault", 3))
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    session.set_k(6)
    session.apply()
    layer = STATE.scene.layers[0]
    rotate = [c for p, c in layer.curves.items() if ".rotate" in p]
    assert rotate and {STATE.scene.curves[c].interpolation for c in rotate} == {"none"}
    assert cmds.optionVar(query="rotationInterpolationDefault") == 3


def test_selftest_passes_for_a_user_whose_new_curves_are_quaternion():
    """The self-test's scene was keyed with the user's New Curve Default: quaternion curves,
    which the analysis refuses, so it failed for the very users its quaternion step is for."""
    from maya_plugin import selftest

    testing.reset("film")
    cmds.optionVar(intValue=("rotationInterpolationDefault", 3))
    lines = []
    assert selftest.run(lines.append), "\n".join(lines)
    assert cmds.optionVar(query="rotationInterpolationDefault") == 3


def test_a_weight_maya_refuses_to_key_is_said_after_apply(sample_clip, monkeypatch):
    """Maya may refuse the keys that limit the override layer's weight to the range (a locked
    BaseAnimation layer, keying into selected layers only: neither is modelled by the fake,
    so the refusal is forced here): Apply still writes the layer, right on the range, and its
    report says what is not done and what to do."""
    from sp_core.host import write_report

    build_scene(sample_clip, "ntsc")
    real = cmds.setKeyframe

    def refusing(*objects, attribute=None, **flags):
        if attribute == "weight":
            raise RuntimeError("setKeyframe: the layer is locked")  # (Maya's RuntimeError)
        return real(*objects, **flags)
    monkeypatch.setattr(cmds, "setKeyframe", refusing)
    host = MayaHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(8)
    session.set_options(space="channel", residual_layer=False)
    session.apply()
    first, last = session.motion.first_frame, session.motion.last_frame
    assert write_report(host)[1:] == [  # (after the locked channel's "Left alone")
        f"Maya set 0 of the 4 keys that limit the weight of layer salientPoses to frames "
        f"{first}-{last} (a locked BaseAnimation layer, or keying into selected layers only, "
        "can refuse them): outside those frames the layer shows their end poses; key its "
        "weight to 0 there yourself."]
    assert [h.kind for h in session.applied] == ["override"]


def test_selftest_catches_reads_through_the_tools_own_layers(monkeypatch):
    """The adapter before it read the motion through its own layers: an Analyze after Apply
    analysed the reduction. Muting them with undo recording, a user's next undo after an
    Analyze unmuted a layer instead of taking the Apply back."""
    from contextlib import contextmanager, nullcontext

    from maya import cmds

    from maya_plugin import selftest

    monkeypatch.setattr(selftest, "MODES", ("unified",))
    monkeypatch.setattr(MayaHost, "_without_made", lambda self: nullcontext())
    testing.reset("film")
    lines: list[str] = []
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and "apply replacing it" in failed[0], "\n".join(lines)

    @contextmanager
    def recorded(self):  # (the undo queue not suspended)
        made = sorted(self._made & set(cmds.ls(type="animLayer")))
        for name in made:
            cmds.animLayer(name, edit=True, mute=True)
        yield
        for name in made:
            cmds.animLayer(name, edit=True, mute=False)

    monkeypatch.setattr(MayaHost, "_without_made", recorded)
    testing.reset("film")
    lines.clear()
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    # (the steps after it find the layer that undo left behind)
    assert failed and "one undo" in failed[0], "\n".join(lines)
