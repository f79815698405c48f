"""MobuHost against the fake ``pyfbsdk`` (tests/fake_mobu): read, apply, compose, remove."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

sys.path.insert(0, str(Path(__file__).parent / "fake_mobu"))
import pyfbsdk as fb  # noqa: E402  (the fake)

from mobu_plugin.host import ROTATE_ORDERS, MobuHost  # noqa: E402
from sp_core.errors import SalientPosesError  # noqa: E402
from sp_core.session import Session  # noqa: E402

ORDER_INDEX = {v: k for k, v in ROTATE_ORDERS.items()}
LOCKED = ("LeftWrist", 1)  # LeftWrist Rotation Y


def build_scene(clip, fps=30.0, first=1001, frames=61, pre_rotations=False):
    fb.reset(fps)
    part = clip.sub_range(0, frames - 1)
    rng = np.random.default_rng(3)
    models = {}
    for i, name in enumerate(part.node_names):
        parent = models.get(part.node_names[part.parents[i]]) if part.parents[i] >= 0 else None
        pre = tuple(rng.uniform(-30, 30, 3)) if pre_rotations and parent else (0.0, 0.0, 0.0)
        models[name] = fb.FBModel(name, parent, translation=part.offsets[i],
                                  rotation_order=ORDER_INDEX[part.rotation_orders[i] or "ZYX"],
                                  pre_rotation=pre)
    times = (first + np.arange(frames)) / fps
    for c, channel in enumerate(part.channel_names):
        node, _, attribute = channel.rpartition(".")
        prop = models[node].Translation if attribute.endswith("position") else \
            models[node].Rotation
        fb.key_base(prop, "XYZ".index(attribute[0]), times, part.channels[:, c])
    models[LOCKED[0]].Rotation.member_locked[LOCKED[1]] = True
    fb.scene.take.LocalTimeSpan = fb._Span(first / fps, (first + frames - 1) / fps)
    fb.scene.selection = [part.node_names[0]]
    fb.scene.time = first / fps
    return part, first + np.arange(frames)


def _ancestors(clip, i):
    found = []
    while clip.parents[i] >= 0:
        i = int(clip.parents[i])
        found.append(i)
    return found


def evaluate_all(host, names, frames):
    """World positions and local rotation matrices of every model on every frame."""
    positions = host.world_positions(names, frames)
    turns = np.array([[fb.scene.models[n].local(f / host.fps)[:3, :3] for n in names]
                      for f in frames])
    return positions, turns


@pytest.mark.parametrize("fps", [30.0, 120.0])
def test_motion_matches_world_positions(sample_clip, fps):
    part, frames = build_scene(sample_clip, fps, pre_rotations=True)
    host = MobuHost()
    assert host.playback_range() == (1001, 1061) and host.fps == fps
    motion = host.motion(host.selected_nodes(), 1001, 1061)
    assert motion.first_frame == 1001 and motion.n_frames == 61
    np.testing.assert_allclose(motion.positions[[0, 30, 60]],
                               host.world_positions(motion.node_names, [1001, 1031, 1061]),
                               atol=1e-9)
    assert host.skipped == {"LeftWrist.Yrotation": "locked"}
    assert host.current_frame() == 1001  # reading restored the current time


@pytest.mark.parametrize(("fps", "tangents"), [(30.0, "unified"), (120.0, "broken"),
                                               (30.0, "weighted")])
def test_override_layer_holds_the_reduced_curves(sample_clip, fps, tangents):
    part, frames = build_scene(sample_clip, fps)
    host = MobuHost()
    session = Session(host)
    session.analyze()
    session.set_k(14)
    session.reduction.tangents = tangents
    session.reduction.space = "channel"
    reduction = session.apply()
    take = fb.scene.take
    assert [layer.Name for layer in take.layers] == ["BaseAnimation", "salientPoses"]
    assert take.layers[1].LayerMode == fb.FBLayerMode.kFBLayerModeOverride
    assert take.current == 0
    curves = reduction.curves
    expected = curves.evaluate(frames)
    checked = 0
    for c, channel in enumerate(curves.channel_names):
        node, _, attribute = channel.rpartition(".")
        if not curves.animated[c]:
            continue
        axis = "XYZ".index(attribute[0])
        prop = fb.scene.models[node].Translation if attribute.endswith("position") else \
            fb.scene.models[node].Rotation
        got = np.array([prop.composite(f / fps)[axis] for f in frames])
        if (node, axis) == LOCKED and attribute.endswith("rotation"):
            base = np.array([prop.layer_values(0, f / fps)[axis] for f in frames])
            np.testing.assert_allclose(got, base, atol=1e-9)  # locked: left alone
            assert 1 not in prop.nodes or not prop.nodes[1].Nodes[axis].FCurve.keys
            continue
        np.testing.assert_allclose(got, expected[:, c], atol=1e-6)
        keyed = prop.nodes[1].Nodes[axis].FCurve
        assert len(keyed.keys) == len(curves.frames)
        checked += 1
    assert checked == int(curves.animated.sum()) - 1


@pytest.mark.parametrize("fps", [30.0, 120.0])
def test_residual_layer_restores_the_original_motion(sample_clip, fps):
    part, frames = build_scene(sample_clip, fps)
    host = MobuHost()
    names = list(part.node_names)
    original_positions, original_turns = evaluate_all(host, names, frames)
    session = Session(host)
    session.analyze()
    session.set_k(10)
    session.reduction.space = "channel"
    session.reduction.residual = True
    session.apply()
    assert fb.scene.take.layers[2].LayerMode == fb.FBLayerMode.kFBLayerModeAdditive
    assert "quaternions" in host.notes[0]
    positions, turns = evaluate_all(host, names, frames)
    # exact everywhere but under the node with a locked rotation axis, which is reported
    assert host.skipped["LeftWrist.rotation residual"].startswith("inexact")
    locked = part.node_index("LeftWrist")
    below = [i for i in range(len(names)) if i == locked or locked in _ancestors(part, i)]
    free = [i for i in range(len(names)) if i not in below]
    np.testing.assert_allclose(positions[:, free], original_positions[:, free], atol=1e-6)
    np.testing.assert_allclose(turns[:, free], original_turns[:, free], atol=1e-9)
    np.testing.assert_allclose(positions[:, below], original_positions[:, below], atol=0.05)
    session.remove()
    assert [layer.Name for layer in fb.scene.take.layers] == ["BaseAnimation"]
    positions, _ = evaluate_all(host, names, frames)
    np.testing.assert_allclose(positions, original_positions, atol=1e-12)


def test_failure_midway_leaves_no_layer(sample_clip, monkeypatch):
    build_scene(sample_clip)
    session = Session(MobuHost())
    session.analyze()
    session.reduction.space = "channel"
    session.reduction.residual = True
    calls = {"n": 0}
    real = fb.FBFCurve.KeyAdd

    def flaky(self, *args):
        calls["n"] += 1
        if calls["n"] == 300:  # partway through writing the layers
            raise RuntimeError("out of memory")
        return real(self, *args)

    monkeypatch.setattr(fb.FBFCurve, "KeyAdd", flaky)
    with pytest.raises(SalientPosesError, match="RuntimeError: out of memory"):
        session.apply()
    assert [layer.Name for layer in fb.scene.take.layers] == ["BaseAnimation"]
    assert session.applied == []


def test_preview_uses_named_time_marks_and_clears_them(sample_clip):
    build_scene(sample_clip)
    fb.scene.take.AddTimeMark(fb.FBTime(1010 / 30))  # the user's own mark stays
    host = MobuHost()
    session = Session(host)
    session.analyze()
    session.set_k(6)
    marks = fb.scene.take.marks
    ours = [round(t * 30) for t, name in marks if name == "SalientPoses"]
    assert ours == session.keyframes(6).tolist() and len(marks) == 7
    session.set_k(9)
    assert len([m for m in fb.scene.take.marks if m[1] == "SalientPoses"]) == 9
    host.clear_preview()
    assert fb.scene.take.marks == [(1010 / 30, "")]


def test_mobu_plugin_imports_outside_motionbuilder():
    import subprocess

    code = ("import sys, mobu_plugin, mobu_plugin.host, mobu_plugin.ui, mobu_plugin.batch, "
            "mobu_plugin.selftest, mobu_plugin.startup; "
            "assert 'pyfbsdk' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_rotation_residual_is_the_turn_from_reduced_to_original():
    order = "ZXY"
    original = np.array([[10.0, 80.0, -30.0], [170.0, -5.0, 20.0]])
    reduced = original - np.array([[3.0, -2.0, 1.0], [-40.0, 10.0, 5.0]])
    turn = (Rotation.from_euler(order, reduced, degrees=True).inv()
            * Rotation.from_euler(order, original, degrees=True))
    composed = Rotation.from_euler(order, reduced, degrees=True) * turn
    np.testing.assert_allclose(composed.as_matrix(),
                               Rotation.from_euler(order, original, degrees=True).as_matrix(),
                               atol=1e-12)


def test_selftest_passes_on_the_fake_and_catches_a_wrong_residual(monkeypatch):
    from mobu_plugin import selftest

    monkeypatch.setattr(selftest, "FRAMES", 40)  # the fake evaluates curves in Python
    fb.reset(30.0)
    lines = []
    assert selftest.run(lines.append), lines
    assert lines[-1] == "Salient Poses self-test: PASS" and len(lines) == 7
    real = MobuHost._rotation_residual

    def wrong(self, *args):
        angles = real(self, *args)
        return {channel: values + 1.0 for channel, values in angles.items()}

    monkeypatch.setattr(MobuHost, "_rotation_residual", wrong)
    fb.reset(30.0)
    lines.clear()
    assert not selftest.run(lines.append)
    assert any(line.startswith("FAIL  base + override + residual") for line in lines)


def test_mobupy_batch_reduces_saves_and_records_failures(sample_clip, tmp_path):
    import copy

    from mobu_plugin import batch

    build_scene(sample_clip, frames=41)
    fb.saved.clear()
    fb.saved["walk.fbx"] = copy.deepcopy(fb.scene)
    out = tmp_path / "out"
    code = batch.run(["walk.fbx", "missing.fbx", "--out", str(out), "--keys", "6",
                      "--space", "channel"])
    assert code == 1
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[1].startswith("walk.fbx,41,6,") and rows[1].endswith(",ok")
    assert "failed: MotionBuilder could not open missing.fbx" in rows[2]
    saved = fb.saved[str(out / "walk.fbx")]
    assert [layer.Name for layer in saved.take.layers] == ["BaseAnimation", "salientPoses"]
    assert not saved.take.marks  # the preview is cleared before saving


def test_layered_preview_names_and_colours_time_marks(sample_clip):
    build_scene(sample_clip)
    session = Session(MobuHost())
    session.analysis.layered = True
    session.analysis.leading = ["RightWrist"]
    session.analysis.breakdowns = 2
    session.analyze()
    session.set_k(4)
    names = [name for _t, name in fb.scene.take.marks]
    assert names.count("SalientPoses keypose") == 4
    assert names.count("SalientPoses breakdown") == 2
    colours = set(fb.scene.take.colours.values())
    assert len(colours) == 2
    MobuHost().clear_preview()
    assert fb.scene.take.marks == []
