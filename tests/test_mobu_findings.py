"""Issue 18: each call form the old MotionBuilder adapter used fails against the strict fake, and
the current adapter passes the same check. (Finding 1, a clean mobupy that cannot import the
engine, is shown in tests/test_install.py, which runs a real clean interpreter before and after
the install.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from choices import SUGGESTED
from mobu_scenes import build_scene, composite, fb, model, world
from scipy.spatial.transform import Rotation

from mobu_plugin.host import SAMPLES, MobuHost
from sp_core.host import HostError
from sp_core.session import Session

NTSC = 30000 / 1001


def old_time(frame, fps):
    """The old frame → time: float seconds."""
    time = fb.FBTime()
    time.SetSecondDouble(float(frame) / fps)
    return time


def test_finding_2_startup_folder_is_a_documented_startup_path(tmp_path, monkeypatch):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "install_findings", Path(__file__).resolve().parents[1] / "install.py")
    install = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, install)
    spec.loader.exec_module(install)
    studio = tmp_path / "studio-startup"
    monkeypatch.setenv("MOTIONBUILDER_PYTHON_STARTUP", str(studio))
    monkeypatch.setenv("HOME", str(tmp_path))
    fb.reset()
    documented = fb.FBSystem().GetPythonStartupPath()
    old = tmp_path / "Documents" / "MB" / "2025" / "config" / "PythonStartup"  # the guess
    assert str(old) not in documented
    args = install.argparse.Namespace(startup_dir=None, mobu_version="2025")
    folder, mechanism = install.mobu_startup_dir(args)
    assert str(folder) in documented and "MOTIONBUILDER_PYTHON_STARTUP" in mechanism


@pytest.mark.parametrize("fps", [NTSC, 30.0, 120.0])
def test_finding_3_times_from_float_seconds_miss_the_frame(fps):
    fb.reset(fps)
    frames = range(1001, 1101)
    assert not all(old_time(f, fps).IsExactlyOnFrame() for f in frames)
    clock = MobuHost().clock()
    assert all(fb.FBTime(clock.ticks(f)).IsExactlyOnFrame() for f in frames)


def _old_key(fcurve, times, values, out_d, in_d, out_w, in_w):
    """The old write: one KeyAdd per key, break mode and both weights whatever the mode."""
    unclamped = fb.FBTangentClampMode.kFBTangentClampModeNone
    fcurve.EditBegin(len(times))
    for k, time in enumerate(times):
        i = fcurve.KeyAdd(time, values[k], fb.FBInterpolation.kFBInterpolationCubic,
                          fb.FBTangentMode.kFBTangentModeBreak)
        fcurve.KeySetTangentClampMode(i, unclamped)
        fcurve.KeySetTangentBreak(i, True)
        if k < len(times) - 1:
            fcurve.KeySetRightDerivative(i, out_d[k])
            fcurve.KeySetRightTangentWeight(i, out_w[k])
        if k > 0:
            fcurve.KeySetLeftDerivative(i, in_d[k - 1])
            fcurve.KeySetLeftTangentWeight(i, in_w[k - 1])
    fcurve.EditEnd(len(times))


def test_findings_4_and_8_old_keys_are_broken_and_one_call_per_key():
    fb.reset(30.0)
    curve = fb.FBFCurve()
    times = [fb.FBTime(fb.frame_ticks(f)) for f in (1001, 1011, 1031)]
    slopes = [30.0, -15.0]
    fb.calls.clear()
    _old_key(curve, times, [0.0, 5.0, 1.0], slopes, slopes, [1 / 3] * 2, [1 / 3] * 2)
    # a unified fit must give one slope per key (User, not broken), unweighted
    assert all(key.TangentBreak for key in curve.Keys)
    assert all(key.TangentMode == fb.FBTangentMode.kFBTangentModeBreak for key in curve.Keys)
    assert int(curve.Keys[0].TangentWeightMode) != 0
    assert fb.calls["FBFCurve.KeyAdd"] == 3 and fb.calls["FBFCurve.KeysAdd"] == 0


def test_findings_4_and_8_new_keys_follow_the_mode_in_one_call_per_curve(sample_clip):
    part, frames = build_scene(sample_clip)
    session = Session(MobuHost(), SUGGESTED)
    session.analyze()
    session.set_k(8)
    session.set_options(space="channel")
    fb.calls.clear()
    reduction = session.apply()
    keyed = int(reduction.curves.animated.sum())  # (the locked channel is kept, not keyed)
    assert fb.calls["FBFCurve.KeysAdd"] == keyed and fb.calls["FBFCurve.KeyAdd"] == 0
    layer = fb.scene.take.layers[1]
    keys = model("Hips").Rotation._nodes[layer].Nodes[0].FCurve.Keys
    assert not any(key.TangentBreak for key in keys)
    assert all(key.TangentMode == fb.FBTangentMode.kFBTangentModeUser for key in keys)
    assert all(int(key.TangentWeightMode) == 0 for key in keys)


def test_finding_5_old_reads_evaluate_the_scene_on_every_frame(sample_clip):
    part, frames = build_scene(sample_clip)
    hips = model("Hips")
    player, scene = fb.FBPlayerControl(), fb.FBSystem().Scene
    for frame in frames:  # the old read: go to each frame and evaluate the scene
        player.Goto(old_time(frame, 30.0))
        scene.Evaluate()
        hips.Rotation.Data  # noqa: B018 - the read itself
    assert fb.calls["FBScene.Evaluate"] == len(frames) > SAMPLES + 1
    fb.calls.clear()
    MobuHost().motion(["Hips"], 1001, 1061)
    assert fb.calls["FBScene.Evaluate"] == SAMPLES + 1


def test_finding_6_post_rotation_was_refused_and_is_now_read(sample_clip):
    part, frames = build_scene(sample_clip, post_rotations=True)
    chest = model("Chest")
    post = [chest.PostRotation[a] for a in range(3)]
    with pytest.raises(HostError, match="post-rotations are not supported"):
        if chest.RotationActive and np.any(np.abs(post) > 1e-9):  # the old reader
            raise HostError("reading Chest: post-rotations are not supported yet")
    motion = MobuHost().motion(["Hips"], 1001, 1061)
    np.testing.assert_allclose(motion.positions, world(motion.node_names, frames), atol=1e-9)


@pytest.mark.parametrize("form", ["per channel", "turn"])
def test_finding_6_residual_forms_against_per_layer_rotation(sample_clip, form):
    """At non-trivial poses a per-channel residual (original − reduced Euler angles) in an
    additive layer with MotionBuilder's default per-layer (quaternion) rotation mode misses the
    original pose; the turn R_reduced⁻¹ · R_original, which the adapter writes, gives it back."""
    part, frames = build_scene(sample_clip)
    elbow = model("RightElbow")
    order = fb.ORDERS[int(elbow.RotationOrder)]
    columns = ["XYZ".index(a) for a in order]
    original = composite("RightElbow", "rotation", frames)
    reduced = original + np.array([20.0, -35.0, 15.0])
    for axis in range(3):  # the base now holds the reduced motion
        fb.key_base(elbow.Rotation, axis, frames, reduced[:, axis])
    if form == "per channel":
        delta = original - reduced
    else:
        turn = (Rotation.from_euler(order, reduced[:, columns], degrees=True).inv()
                * Rotation.from_euler(order, original[:, columns], degrees=True))
        delta = np.empty_like(original)
        delta[:, columns] = turn.as_euler(order, degrees=True)
    take = fb.FBSystem().CurrentTake
    take.CreateNewLayer()
    assert int(take.GetLayer(1).LayerRotationMode) == 1  # per layer: quaternions
    take.SetCurrentLayer(1)
    node = elbow.Rotation.GetAnimationNode()
    for axis in range(3):
        node.Nodes[axis].FCurve.KeysAdd([fb.FBTime(fb.frame_ticks(f)) for f in frames],
                                        [float(v) for v in delta[:, axis]])
    got = composite("RightElbow", "rotation", frames)
    miss = (Rotation.from_euler(order, got[:, columns], degrees=True).inv()
            * Rotation.from_euler(order, original[:, columns], degrees=True)).magnitude()
    if form == "per channel":
        assert np.degrees(miss.max()) > 1.0
    else:
        assert np.degrees(miss.max()) < 1e-9


def test_finding_7_old_apply_opened_no_transaction_and_left_animation(sample_clip):
    build_scene(sample_clip)
    head = model("Head").Translation
    take = fb.FBSystem().CurrentTake
    created = []
    try:  # the old write: no undo transaction; rollback removed only the layers
        take.CreateNewLayer()
        created.append(take.GetLayerCount() - 1)
        take.SetCurrentLayer(created[-1])
        head.SetAnimated(True)
        raise RuntimeError("a failure midway")
    except RuntimeError:
        for index in reversed(created):
            take.RemoveLayer(index)
    assert fb.scene.undo == []
    assert head.IsAnimated()  # left behind: not all or nothing


def test_finding_7_new_apply_is_one_transaction_and_all_or_nothing(sample_clip, monkeypatch):
    build_scene(sample_clip)
    session = Session(MobuHost(), SUGGESTED)
    session.analyze()
    session.set_options(space="channel")
    session.apply()
    assert fb.scene.undo == [f"Salient Poses: apply {session.k} keys"]
    session.remove()
    head = model("Head").Translation
    assert not head.IsAnimated()

    def fail(self, *args):
        raise RuntimeError("a failure midway")

    monkeypatch.setattr(fb.FBFCurve, "EditEnd", fail)
    with pytest.raises(HostError):
        session.apply()
    assert fb.scene.take.GetLayerCount() == 1 and fb.scene.transaction is None
    assert not any(m.Translation.IsAnimated() for m in fb.scene.models if m.Parent)
