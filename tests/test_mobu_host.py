"""MobuHost against the strict fake ``pyfbsdk`` (tests/fake_mobu, see its FACTS.md)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from choices import SUGGESTED
from mobu_scenes import LOCKED, build_scene, composite, fb, local_turns, model, world

from mobu_plugin.host import SAMPLES, Cancelled, MobuHost
from sp_core.errors import SalientPosesError
from sp_core.host import HostError
from sp_core.session import Session

NTSC = 30000 / 1001


def _ancestors(clip, i):
    found = []
    while clip.parents[i] >= 0:
        i = int(clip.parents[i])
        found.append(i)
    return found


def _session(host, k=14, tangents="unified", residual=False):
    """An analysed session at K keys, channel-space fits."""
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(k)
    session.set_options(tangents=tangents, space="channel", residual_layer=residual)
    return session


def _applied(sample_clip, fps=30.0, tangents="unified", k=14, residual=False, **scene):
    part, frames = build_scene(sample_clip, fps, **scene)
    host = MobuHost()
    session = _session(host, k, tangents, residual)
    fb.calls.clear()
    return part, frames, host, session, session.apply()


# ----------------------------------------------------------------------------- time
@pytest.mark.parametrize("mode", sorted(fb.RATES))
def test_key_times_are_whole_frames_at_every_standard_rate(mode):
    fb.reset(mode=mode)
    clock = MobuHost().clock()
    per_frame = fb.ticks_per_frame(mode)
    assert clock.per_frame == per_frame
    for frame in (-12, 0, 1, 1001, 1043, 99_999):
        time = MobuHost().time_of(frame, clock)
        assert time.Get() == frame * per_frame and time.IsExactlyOnFrame()
        assert time.GetFrame() == frame and clock.frame(time.Get()) == frame


def test_custom_rate_rounds_each_frame_to_the_nearest_tick():
    fb.reset(47.5)
    clock = MobuHost().clock()
    assert clock.per_frame == 0 and clock.fps == 47.5
    for frame in (0, 7, 1001):
        assert clock.ticks(frame) == round(frame * fb.TICKS_PER_SECOND / 47.5)
        assert clock.frame(clock.ticks(frame)) == frame


# ----------------------------------------------------------------------------- reading
@pytest.mark.parametrize("fps", [30.0, 120.0, NTSC])
def test_motion_reads_curves_and_its_kinematics_match_the_scene(sample_clip, fps):
    part, frames = build_scene(sample_clip, fps, pre_rotations=True, post_rotations=True)
    host = MobuHost()
    assert host.playback_range() == (1001, 1061) and host.fps == pytest.approx(fps)
    motion = host.motion(host.selected_nodes(), 1001, 1061)
    assert motion.first_frame == 1001 and motion.n_frames == 61
    np.testing.assert_allclose(motion.positions, world(motion.node_names, frames), atol=1e-9)
    assert host.skipped == {"LeftWrist.Yrotation": "locked"} and host.notes == []
    assert host.current_frame() == 1001  # reading restored the current time
    # no scene evaluation per frame: SAMPLES frames plus restoring the time
    assert fb.calls["FBScene.Evaluate"] == SAMPLES + 1
    assert fb.calls["FBFCurve.Evaluate"] <= 61 * len(motion.channel_names)


def test_a_constrained_model_is_read_from_the_scene_and_apply_refuses_it(sample_clip):
    part, frames = build_scene(sample_clip)
    elbow = model("LeftElbow")
    offset = np.array([5.0, -3.0, 2.0])

    def constraint(name, ticks):  # the elbow's rotation is driven, not its curves
        if name != "Lcl Rotation":
            return None
        return np.array(elbow.Rotation._composite(ticks)) + offset

    elbow.__dict__["_driver"] = constraint
    fb.FBCharacter("Actor").ActiveInput = True
    host = MobuHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    motion = session.motion
    columns = [motion.channel_names.index(f"LeftElbow.{a}rotation") for a in "XYZ"]
    base = composite("LeftElbow", "rotation", frames)
    np.testing.assert_allclose(motion.channels[:, columns], base + offset, atol=1e-9)
    assert host.driven == {"LeftElbow": "driven"}
    # the read's notes are the analysis' (shown with it, not again after Apply)
    assert host.notes == []
    assert "LeftElbow" in session.notes[0] and "constraint" in session.notes[0]
    assert session.notes[1].startswith("Character Actor has its input active")
    np.testing.assert_allclose(motion.positions, world(motion.node_names, frames), atol=1e-9)
    with pytest.raises(SalientPosesError, match="keying LeftElbow: it is driven by a "
                                                "constraint"):
        session.apply()
    assert [layer.Name for layer in fb.scene.take.layers] == ["BaseAnimation"]


def test_a_position_constraint_on_an_unanimated_translation_is_read(sample_clip):
    part, frames = build_scene(sample_clip)
    head = model("Head")
    rest = np.array(head.Translation._static)

    def constraint(name, ticks):  # a position constraint sliding the head along x
        if name != "Lcl Translation":
            return None
        return rest + [np.sin(ticks / fb.frame_ticks(7)), 0.0, 0.0]

    head.__dict__["_driver"] = constraint
    assert not head.Translation.IsAnimated()
    host = MobuHost()
    motion = host.motion(["Hips"], 1001, 1061)
    assert host.driven == {"Head": "driven"} and "Head.Xposition" in motion.channel_names
    np.testing.assert_allclose(motion.positions, world(motion.node_names, frames), atol=1e-9)


def test_layers_already_in_the_take_are_read_as_the_scene_shows_them(sample_clip):
    part, frames = build_scene(sample_clip)
    take = fb.scene.take
    take.CreateNewLayer()
    mine = take.GetLayer(1)
    mine.Name = "cleanup"
    take.SetCurrentLayer(1)
    curve = model("Head").Rotation.GetAnimationNode().Nodes[0].FCurve
    curve.KeysAdd([fb.FBTime(fb.frame_ticks(f)) for f in (1001, 1061)], [10.0, -10.0],
                  [fb.FBInterpolation.kFBInterpolationLinear] * 2)
    take.SetCurrentLayer(0)
    host = MobuHost()
    motion = host.motion(["Hips"], 1001, 1061)
    column = motion.channel_names.index("Head.Xrotation")
    np.testing.assert_allclose(motion.channels[:, column],
                               composite("Head", "rotation", frames)[:, 0], atol=1e-9)
    assert "cleanup" in host.notes[0]


@pytest.mark.parametrize(("change", "message"), [
    ("unanimated", "reading Hips: no Translation or Rotation under it is animated"),
    ("spheric", "reading Chest.RotationOrder: spheric XYZ is not supported"),
    ("scaled", "reading Chest.Scaling: scaled joints are not supported"),
])
def test_bad_scenes_say_which_model_and_write_nothing(sample_clip, change, message):
    build_scene(sample_clip)
    if change == "unanimated":
        for m in fb.scene.models:
            m.Translation.SetAnimated(False)
            m.Rotation.SetAnimated(False)
    elif change == "spheric":
        model("Chest").RotationOrder = fb.FBModelRotationOrder.kFBSphericXYZ
    else:
        model("Chest").Scaling = fb.FBVector3d(1.0, 2.0, 1.0)
    session = Session(MobuHost(), SUGGESTED)
    with pytest.raises(SalientPosesError, match=message):
        session.analyze()
    assert fb.scene.take.GetLayerCount() == 1


def test_a_one_frame_take_is_refused_with_a_message(sample_clip):
    build_scene(sample_clip, frames=1)
    with pytest.raises(SalientPosesError,
                       match="frames 1001..1001 hold 1 frame; an analysis needs at least 2"):
        Session(MobuHost(), SUGGESTED).analyze()


# ----------------------------------------------------------------------------- writing
@pytest.mark.parametrize(("fps", "tangents"), [(30.0, "unified"), (120.0, "broken"),
                                               (NTSC, "weighted"), (30.0, "smooth")])
def test_override_layer_holds_the_reduced_curves_in_each_tangent_mode(sample_clip, fps,
                                                                      tangents):
    part, frames, host, session, reduction = _applied(sample_clip, fps, tangents,
                                                      pre_rotations=True)
    take = fb.scene.take
    assert [layer.Name for layer in take.layers] == ["BaseAnimation", "salientPoses"]
    assert take.layers[1].LayerMode == fb.FBLayerMode.kFBLayerModeOverride
    assert take.current == 0
    curves = reduction.curves
    expected = curves.evaluate(frames)
    one_slope = tangents in ("unified", "weighted")
    checked = 0
    for c, channel in enumerate(curves.channel_names):
        node, _, attribute = channel.rpartition(".")
        if not curves.animated[c]:
            continue
        axis, kind = "XYZ".index(attribute[0]), attribute[1:]
        got = composite(node, kind, frames)[:, axis]
        prop = model(node).Translation if kind == "position" else model(node).Rotation
        if (node, axis) == LOCKED and kind == "rotation":  # locked: left alone
            assert not prop._nodes[take.layers[1]].Nodes[axis].FCurve.Keys
            continue
        np.testing.assert_allclose(got, expected[:, c], atol=1e-6)
        keys = prop._nodes[take.layers[1]].Nodes[axis].FCurve.Keys
        assert [k.Time.Get() for k in keys] == [fb.frame_ticks(f) for f in curves.frames]
        for key in keys:
            assert key.Interpolation == fb.FBInterpolation.kFBInterpolationCubic
            assert key.TangentClampMode == fb.FBTangentClampMode.kFBTangentClampModeNone
            assert key.TangentBreak is (not one_slope)
            assert key.TangentMode == (fb.FBTangentMode.kFBTangentModeUser if one_slope
                                       else fb.FBTangentMode.kFBTangentModeBreak)
        weighted = [int(k.TangentWeightMode) for k in keys[:-1]]
        assert weighted == ([3] * len(weighted) if tangents == "weighted"
                            else [0] * len(weighted))
        checked += 1
    assert checked == int(curves.animated.sum())  # (the locked channel is not keyed)
    # bulk writes: one KeysAdd per curve, never one KeyAdd per key
    assert fb.calls["FBFCurve.KeysAdd"] == checked and fb.calls["FBFCurve.KeyAdd"] == 0
    assert fb.scene.undo == [f"Salient Poses: apply {session.k} keys"]
    assert fb.scene.transaction is None


@pytest.mark.parametrize("fps", [30.0, 120.0])
def test_residual_layer_restores_the_original_motion(sample_clip, fps):
    part, frames = build_scene(sample_clip, fps, post_rotations=True)
    names = list(part.node_names)
    original_positions, original_turns = world(names, frames), local_turns(names, frames)
    host = MobuHost()
    session = _session(host, k=10, residual=True)
    session.apply()
    assert fb.scene.take.layers[2].LayerMode == fb.FBLayerMode.kFBLayerModeAdditive
    assert "quaternions" in host.notes[0]
    positions, turns = world(names, frames), local_turns(names, frames)
    # exact everywhere but under the model with a locked rotation axis, which is reported
    assert host.skipped["LeftWrist.rotation residual"].startswith("inexact")
    locked = part.node_index("LeftWrist")
    below = [i for i in range(len(names)) if i == locked or locked in _ancestors(part, i)]
    free = [i for i in range(len(names)) if i not in below]
    np.testing.assert_allclose(positions[:, free], original_positions[:, free], atol=1e-6)
    np.testing.assert_allclose(turns[:, free], original_turns[:, free], atol=1e-9)
    np.testing.assert_allclose(positions[:, below], original_positions[:, below], atol=0.05)
    session.remove()
    assert [layer.Name for layer in fb.scene.take.layers] == ["BaseAnimation"]
    np.testing.assert_allclose(world(names, frames), original_positions, atol=1e-12)
    assert fb.scene.undo == ["Salient Poses: apply 10 keys", "Salient Poses: remove layers"]


def test_a_per_channel_residual_layer_gets_per_channel_differences(sample_clip):
    part, frames = build_scene(sample_clip, locked=False)
    fb.scene.layer_rotation_default = 0  # the user's new layers compose per channel (Euler)
    names = list(part.node_names)
    original = world(names, frames)
    host = MobuHost()
    _session(host, k=10, residual=True).apply()
    assert "per channel" in host.notes[0]
    np.testing.assert_allclose(world(names, frames), original, atol=1e-6)


def test_corrective_rotations_in_a_per_layer_layer_are_turns_exact_on_their_frames(
        sample_clip):
    """MotionBuilder's default layers compose rotations as quaternions: a joint's corrective
    rotation keys become the turn from the pose below to the corrected pose, on all three axes
    at the union of the joint's key frames."""
    from scipy.spatial.transform import Rotation

    part, frames = build_scene(sample_clip, locked=False)
    f0 = int(frames[0])
    host = MobuHost()
    motion = host.motion(host.selected_nodes(), f0, int(frames[-1]))
    keys = {"RightHip.Zrotation": ([f0 + 7, f0 + 12, f0 + 17], [0.0, 6.0, 0.0]),
            "RightHip.Xrotation": ([f0 + 1, f0 + 25], [-2.0, 2.0]),
            "LeftKnee.Zrotation": ([f0 + 3, f0 + 20, f0 + 30], [1.5, -4.0, 2.0]),
            "Hips.Xposition": ([f0 + 5, f0 + 9, f0 + 14], [0.0, 0.8, 0.0])}
    with host.undo_chunk("corrective"):
        handle = host.write_sparse({c: (np.array(f), np.array(v)) for c, (f, v) in keys.items()},
                                   "corrective", 1.0)
    assert "quaternions" in host.notes[0]
    layer = fb.scene.take.GetLayerByName(handle.token)
    unions = {"RightHip": [f0 + 1, f0 + 7, f0 + 12, f0 + 17, f0 + 25],
              "LeftKnee": [f0 + 3, f0 + 20, f0 + 30]}
    for name, union in unions.items():
        nodes = model(name).Rotation._nodes[layer].Nodes
        for axis in range(3):
            keyed = [k.Time.Get() / fb.frame_ticks(1) for k in nodes[axis].FCurve.Keys]
            assert keyed == union, (name, axis)
    position = model("Hips").Translation._nodes[layer].Nodes[0].FCurve.Keys
    assert [k.Value for k in position] == [0.0, 0.8, 0.0]  # translations stay per channel
    values = motion.channels.copy()
    for channel, (key_frames, key_values) in keys.items():
        values[:, motion.channel_names.index(channel)] += np.interp(frames, key_frames,
                                                                    key_values)
    shown = local_turns(list(part.node_names), frames)
    for name, union in unions.items():
        order = part.rotation_orders[part.node_index(name)]
        columns = [motion.channel_names.index(f"{name}.{a}rotation") for a in order]
        wanted = Rotation.from_euler(order, values[:, columns], degrees=True)
        got = Rotation.from_matrix(shown[:, part.node_index(name)])
        angle = np.degrees((wanted.inv() * got).magnitude())
        on_keys = np.isin(frames, union)
        assert angle[on_keys].max() < 1e-7, name
        # linear turns between the keys: close, not exact (4-6 degree corrections here)
        assert 1e-4 < angle[~on_keys].max() < 0.3, name
    # the root's world X is its Translation X: the original plus the linear keys
    np.testing.assert_allclose(world(["Hips"], frames)[:, 0, 0],
                               values[:, motion.channel_names.index("Hips.Xposition")],
                               atol=1e-9)


def test_failure_midway_removes_every_layer_and_animation_it_made(sample_clip, monkeypatch):
    build_scene(sample_clip)
    head = model("Head").Translation
    assert not head.IsAnimated()
    session = Session(MobuHost(), SUGGESTED)
    session.analyze()
    session.set_options(space="channel", residual_layer=True)
    calls = {"n": 0}
    real = fb.FBFCurve.KeysAdd

    def flaky(self, *args):
        calls["n"] += 1
        if calls["n"] == 120:  # partway through the residual layer
            raise RuntimeError("out of memory")
        return real(self, *args)

    monkeypatch.setattr(fb.FBFCurve, "KeysAdd", flaky)
    with pytest.raises(SalientPosesError, match="RuntimeError: out of memory"):
        session.apply()
    assert [layer.Name for layer in fb.scene.take.layers] == ["BaseAnimation"]
    assert session.applied == [] and fb.scene.transaction is None
    assert not head.IsAnimated()
    assert all(not m.Translation.IsAnimated() for m in fb.scene.models if m.Parent)


def test_a_locked_layer_refuses_keys_and_nothing_is_left(sample_clip, monkeypatch):
    build_scene(sample_clip)
    session = Session(MobuHost(), SUGGESTED)
    session.analyze()
    real = fb.FBTake.CreateNewLayer

    def locked_layer(self):
        real(self)
        self.layers[-1].Lock = True

    monkeypatch.setattr(fb.FBTake, "CreateNewLayer", locked_layer)
    with pytest.raises(SalientPosesError, match="MotionBuilder refused the keys"):
        session.apply()
    assert fb.scene.take.GetLayerCount() == 1


def test_esc_cancels_a_long_apply_and_leaves_nothing(sample_clip):
    build_scene(sample_clip)
    host = MobuHost()
    host.progress_after = 0.0
    session = Session(host, SUGGESTED)
    session.analyze()
    fb.scene.cancel_at = 50
    with pytest.raises(Cancelled, match="cancelled"):
        session.apply()
    assert fb.scene.take.GetLayerCount() == 1
    assert fb.scene.progress and all(record["done"] for record in fb.scene.progress)


def test_esc_cancels_a_long_read_and_restores_the_time(sample_clip):
    build_scene(sample_clip)
    host = MobuHost()
    host.progress_after = 0.0
    fb.scene.cancel_at = 30
    with pytest.raises(Cancelled, match="reading curves: cancelled"):
        host.motion(["Hips"], 1001, 1061)
    with pytest.raises(Cancelled, match="reading world positions: cancelled"):
        host.world_positions(["Hips"], list(range(1001, 1062)))
    assert host.current_frame() == 1001 and fb.scene.evaluated == fb.frame_ticks(1001)
    assert fb.scene.take.current == 0


# ----------------------------------------------------------------------------- preview
def test_preview_uses_named_time_marks_and_clears_them(sample_clip):
    build_scene(sample_clip)
    fb.scene.take.AddTimeMark(fb.FBTime(fb.frame_ticks(1010)))  # the user's own mark stays
    host = MobuHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_k(6)
    marks = fb.scene.take.marks
    ours = [m["time"].Get() for m in marks if m["name"] == "SalientPoses"]
    assert ours == [fb.frame_ticks(f) for f in session.keyframes(6)] and len(marks) == 7
    session.set_k(9)
    assert len([m for m in fb.scene.take.marks if m["name"] == "SalientPoses"]) == 9
    host.clear_preview()
    assert [(m["time"].Get(), m["name"]) for m in fb.scene.take.marks] == \
        [(fb.frame_ticks(1010), "")]


def test_layered_preview_names_and_colours_time_marks(sample_clip):
    build_scene(sample_clip)
    session = Session(MobuHost(), SUGGESTED)
    session.set_options(layered=True, leading=["RightWrist"], breakdowns=2)
    session.analyze()
    session.set_k(4)
    names = [m["name"] for m in fb.scene.take.marks]
    assert names.count("SalientPoses keypose") == 4
    assert names.count("SalientPoses breakdown") == 2
    assert len({m["color"] for m in fb.scene.take.marks}) == 2
    MobuHost().clear_preview()
    assert fb.scene.take.marks == []


# ----------------------------------------------------------------------------- packaging
def test_mobu_plugin_imports_outside_motionbuilder():
    code = ("import sys, mobu_plugin, mobu_plugin.host, mobu_plugin.ui, mobu_plugin.batch, "
            "mobu_plugin.selftest, mobu_plugin.startup; "
            "assert 'pyfbsdk' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_selftest_passes_on_the_fake_and_catches_a_wrong_residual(monkeypatch):
    from mobu_plugin import selftest

    monkeypatch.setattr(selftest, "FRAMES", 30)  # the fake evaluates curves in Python
    fb.reset(24.0)
    lines = []
    assert selftest.run(lines.append), lines
    assert lines[-1] == "Salient Poses self-test: PASS"
    assert fb.FBPlayerControl().GetTransportFpsValue() == 30.0
    assert any(line.startswith("PASS  apply weighted") for line in lines)
    assert any(line.startswith("PASS  undo") for line in lines)
    assert any(line.startswith("PASS  corrective keys") for line in lines)
    assert any(line.startswith("PASS  a part of the take") for line in lines)
    real = MobuHost._rotation_residual

    def wrong(self, *args):
        angles = real(self, *args)
        return {channel: values + 1.0 for channel, values in angles.items()}

    monkeypatch.setattr(MobuHost, "_rotation_residual", wrong)
    fb.reset(30.0)
    lines.clear()
    assert not selftest.run(lines.append)
    assert any(line.startswith("FAIL  residual") for line in lines)


def test_selftest_catches_an_override_layer_that_holds_its_ends_outside_a_part(monkeypatch):
    """The adapter before it keyed the take outside a part: the layer's curves held the
    range's end poses there, over the motion."""
    from mobu_plugin import selftest

    monkeypatch.setattr(selftest, "FRAMES", 30)
    monkeypatch.setattr(selftest, "TANGENTS", ("unified",))
    spans: list[tuple[int, int]] = []

    def only_the_range(self):  # (write_curves then sees no frame outside the range)
        return spans[-1]

    real = MobuHost.write_curves

    def without_outside_keys(self, curves, layer, replacing=()):
        spans.append((int(curves.frames[0]), int(curves.frames[-1])))
        return real(self, curves, layer, replacing)

    monkeypatch.setattr(MobuHost, "write_curves", without_outside_keys)
    original = MobuHost.playback_range
    monkeypatch.setattr(MobuHost, "playback_range",
                        lambda self: only_the_range(self) if spans else original(self))
    fb.reset(30.0)
    lines: list[str] = []
    assert not selftest.run(lines.append)
    assert any(line.startswith("FAIL  a part of the take") for line in lines), lines


def test_selftest_catches_corrections_keyed_as_plain_euler_offsets(monkeypatch):
    from mobu_plugin import selftest

    monkeypatch.setattr(selftest, "FRAMES", 30)
    monkeypatch.setattr(selftest, "TANGENTS", ("unified",))
    # a writer that adds the Euler corrections to a per layer (quaternion) layer as they are
    monkeypatch.setattr(MobuHost, "_turn_keys", lambda self, sparse: sparse)
    fb.reset(30.0)
    lines: list[str] = []
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and "off its corrected rotation" in failed[0], failed


def test_mobupy_batch_reduces_saves_and_records_failures(sample_clip, tmp_path):
    from mobu_plugin import batch

    build_scene(sample_clip, frames=41)
    fb.saved.clear()
    fb.saved["walk.fbx"] = copy.deepcopy(fb.scene)
    out = tmp_path / "out"
    code = batch.run(["walk.fbx", "missing.fbx", "--out", str(out), "--keys", "6",
                      "--space", "channel"])
    assert code == 1
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[1].startswith("walk.fbx,41,6,") and rows[1].endswith(",ok,")
    assert "failed: MotionBuilder could not open missing.fbx" in rows[2]
    saved = fb.saved[str(out / "walk.fbx")]
    assert [layer.Name for layer in saved.take.layers] == ["BaseAnimation", "salientPoses"]
    assert not saved.take.marks  # the preview is cleared before saving


def test_reading_an_unknown_model_is_a_host_error():
    fb.reset()
    with pytest.raises(HostError, match="finding model 'Nobody': not in the scene"):
        MobuHost().hierarchy(["Nobody"])


def test_the_fake_refuses_wrong_call_forms_as_pyfbsdk_does():
    fb.reset()
    curve = fb.FBFCurve()
    time = fb.FBTime(fb.frame_ticks(1001))
    with pytest.raises(TypeError):  # parameters are positional-only
        curve.KeyAdd(Time=time, Value=1.0)
    with pytest.raises(fb.ArgumentError):  # a plain int is not an FBInterpolation
        curve.KeyAdd(time, 1.0, 2)
    with pytest.raises(fb.ArgumentError):  # ticks are integers
        fb.FBTime(1001 / 30)
    with pytest.raises(fb.ArgumentError):  # lists, not tuples
        curve.KeysAdd((time,), (1.0,))
    skeleton = fb.FBModelSkeleton("Hips")
    with pytest.raises(AttributeError):
        skeleton.RotationActiv = True
    with pytest.raises(fb.ArgumentError):
        skeleton.RotationOrder = 2
    with pytest.raises(TypeError):
        fb.FBVector3d(1, 2, 3)[0:2]
    with pytest.raises(RuntimeError):  # Percent only between ProgressBegin and ProgressDone
        fb.FBProgress().Percent = 10
    # GetMatrix fills an FBMatrix given positionally (a limb's parent frame is read so)
    whole = fb.FBModelTransformationType.kModelTransformation
    with pytest.raises(fb.ArgumentError):  # not a numpy array or a list
        skeleton.GetMatrix(np.eye(4), whole, True)
    with pytest.raises(fb.ArgumentError):  # the kind is an enumeration, not an int
        skeleton.GetMatrix(fb.FBMatrix(), 0, True)
    with pytest.raises(TypeError):  # parameters are positional-only
        skeleton.GetMatrix(Matrix=fb.FBMatrix(), What=whole)
    assert skeleton.Translation.GetAnimationNode() is None  # not animated yet
    take = fb.scene.take
    take.CreateNewLayer()
    with pytest.raises(AttributeError):  # a layer's switch is Mute (read and write)
        take.GetLayer(1).Muted = True
    with pytest.raises(TypeError):  # AddTimeMark(Time): no name argument
        take.AddTimeMark(time, "SalientPoses")
    assert take.AddTimeMark(time) == 0 and take.AddTimeMark(time) == -1  # one mark a time
    with pytest.raises(IndexError):  # (-1 would name the last mark of a Python list)
        take.SetTimeMarkName(-1, "SalientPoses")
    with pytest.raises(fb.ArgumentError):  # a model, not its name
        fb.FBUndoManager().TransactionAddModelTRS("Hips")


def test_a_limb_with_a_selected_descendant_and_under_a_scaled_parent(sample_clip):
    """A model selected with one below it is one limb, in either order (the second order
    raised an IndexError, the first split the wrist off as a limb of its own); a limb under a
    scaled parent is refused as a whole scaled skeleton is (its inverted parent matrix took
    the scale out, and the errors came out halved without a word)."""
    build_scene(sample_clip)
    for roots in (["Hips", "LeftWrist"], ["LeftWrist", "Hips"]):
        assert MobuHost().motion(roots, 1001, 1061).root_names == ["Hips"]
    assert MobuHost().motion(["LeftWrist", "LeftElbow"], 1001, 1061).root_names == [
        "LeftElbow"]
    model("RightCollar").Scaling = fb.FBVector3d(2.0, 2.0, 2.0)
    with pytest.raises(HostError, match=r"reading RightShoulder: its world position differs "
                                        r"from this tool's forward kinematics"):
        MobuHost().motion(["RightShoulder"], 1001, 1061)


def test_a_readings_notes_reach_a_job_that_is_given_its_frames(sample_clip):
    """A reduction at given frames (--frames, a batch) reads the motion itself: the host's
    note on a constrained model was taken from the host and then lost."""
    from sp_core.jobs import Job, run_job
    from sp_core.options import Options

    build_scene(sample_clip)
    elbow = model("LeftElbow")

    def constraint(name, ticks):
        if name != "Lcl Rotation":
            return None
        return np.array(elbow.Rotation._composite(ticks)) + 5.0

    elbow.__dict__["_driver"] = constraint
    result = run_job(Job("", Options().replace(frames=(1001, 1030, 1061)), "reduce",
                         apply=False), host=MobuHost())
    assert any("LeftElbow" in note and "constraint" in note for note in result.notes)
    assert result.notes[0] in result.reduction.notes


def test_a_still_axis_of_a_keyed_rotation_gets_one_key_of_its_value(sample_clip):
    """What an override layer shows on an axis whose curve has no key is not documented (the
    FBX SDK evaluates a curve without keys to its default value): every unlocked axis of a
    property the layer animates is keyed, a still one with one key of its value."""
    c = sample_clip.channel_names.index("LeftKnee.Yrotation")
    channels = sample_clip.channels.copy()
    channels[:, c] = 15.0
    part, frames, host, session, reduction = _applied(sample_clip.with_channels(channels))
    knee = model("LeftKnee").Rotation._nodes[fb.scene.take.layers[1]].Nodes
    assert [k.Value for k in knee[1].FCurve.Keys] == [pytest.approx(15.0)]
    assert len(knee[0].FCurve.Keys) == len(knee[2].FCurve.Keys) == session.k
    np.testing.assert_allclose(composite("LeftKnee", "rotation", frames)[:, 1], 15.0,
                               atol=1e-9)
    undone = fb.scene.undo[-1]
    assert undone == f"Salient Poses: apply {session.k} keys"
    # each property the layer animates puts its model on the undo stack (Autodesk's sample)
    curves = reduction.curves
    keyed = {(ch.rpartition(".")[0], ch.rpartition(".")[2][1:])
             for c, ch in enumerate(curves.channel_names) if curves.animated[c]}
    assert fb.calls["FBUndoManager.TransactionAddModelTRS"] == len(keyed)


def test_preview_keeps_a_users_mark_on_a_keyframe(sample_clip):
    """``AddTimeMark`` refuses a time that has a mark (-1): the user's mark stays as it is and
    the other keyframes are marked."""
    build_scene(sample_clip)
    host = MobuHost()
    session = Session(host, SUGGESTED)
    session.analyze()
    first = int(session.keyframes(6)[1])
    host.clear_preview()
    fb.scene.take.AddTimeMark(fb.FBTime(fb.frame_ticks(first)))
    session.set_k(6)
    marks = fb.scene.take.marks
    assert [m["name"] for m in marks if m["time"].Get() == fb.frame_ticks(first)] == [""]
    ours = [m["time"].Get() for m in marks if m["name"] == "SalientPoses"]
    assert ours == [fb.frame_ticks(f) for f in session.keyframes(6) if f != first]


def test_a_range_past_the_takes_end_leaves_the_takes_motion_before_it():
    """A range that runs past the take's last frame: the override layer is keyed on the
    take's frames before the range (what the scene shows there) and none after it, and the
    take plays its motion there. (The frames read are clamped to the take's span, so a range
    wholly outside the take does not read more rows than it keys either.)"""
    from host_contract import FIRST, FRAMES, MobuScene

    from sp_core.options import Options

    scene = MobuScene()
    scene.build()
    nodes = [m.Name for m in scene.fb.scene.models]
    frames = np.arange(FIRST, FIRST + FRAMES)
    original = scene.positions(nodes, frames)
    session = Session(scene.host, Options().replace(frame_range=(FIRST + 30, FIRST + 49)))
    session.analyze()
    session.set_k(4)
    session.set_options(space="channel", residual_layer=False)
    session.apply()
    shown = scene.positions(nodes, frames)
    assert np.abs(shown[:30] - original[:30]).max() < 1e-6


def test_selftest_catches_reads_through_the_tools_own_layers(monkeypatch):
    """The adapter before it read the motion through its own layers (an Analyze after Apply
    analysed the reduction) and keyed what the scene showed outside a range with the layers
    it replaced still on (the first reduction stayed there after they were removed)."""
    from contextlib import nullcontext

    from mobu_plugin import selftest

    monkeypatch.setattr(selftest, "FRAMES", 30)
    monkeypatch.setattr(selftest, "TANGENTS", ("unified",))
    monkeypatch.setattr(MobuHost, "_without", lambda self, names: nullcontext())
    fb.reset(30.0)
    lines: list[str] = []
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and "apply replacing it" in failed[0], "\n".join(lines)


@pytest.mark.parametrize("tangents", ["unified", "broken"])
def test_a_part_of_the_take_ends_with_a_line_to_the_next_frame(sample_clip, tangents):
    """Between the range's last frame and the next one (the first key outside it) the layer
    plays a line, as between the frame before the range and its first key: the range's last
    key was cubic, with a right slope nothing set (a bump between the frames, which only a
    sub-frame evaluation such as motion blur shows)."""
    build_scene(sample_clip)
    first, last = 1011, 1040
    session = Session(MobuHost(), SUGGESTED.replace(frame_range=(first, last)))
    session.analyze()
    session.set_k(6)
    session.set_options(tangents=tangents, space="channel")
    session.apply()
    prop = model("Hips").Translation
    for a, b in ((first - 1, first), (last, last + 1)):
        ends = [np.array(prop._composite(fb.frame_ticks(f))) for f in (a, b)]
        for u in (0.25, 0.5, 0.75):
            ticks = round(fb.frame_ticks(a) + u * (fb.frame_ticks(b) - fb.frame_ticks(a)))
            np.testing.assert_allclose(prop._composite(ticks),
                                       (1 - u) * ends[0] + u * ends[1], atol=1e-9)
    assert np.abs(ends[1] - ends[0]).max() > 1e-3  # (a segment that moves)


def test_selftest_catches_a_replacing_apply_that_reads_through_the_layers_it_replaces(
        monkeypatch):
    """The adapter before it keyed what the scene showed outside a replacing Apply's range
    with the replaced layers on: their reduction stayed there once they were removed."""
    from mobu_plugin import selftest

    monkeypatch.setattr(selftest, "FRAMES", 30)
    monkeypatch.setattr(selftest, "TANGENTS", ("unified",))
    real = MobuHost.write_curves
    monkeypatch.setattr(MobuHost, "write_curves",
                        lambda self, curves, layer, replacing=(): real(self, curves, layer))
    fb.reset(30.0)
    lines: list[str] = []
    assert not selftest.run(lines.append)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and "apply replacing it" in failed[0], "\n".join(lines)
    assert "outside its frames moved" in failed[0]
