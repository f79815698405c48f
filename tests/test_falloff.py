"""Magic wand: data-driven falloff and edit propagation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from sp_core.errors import SelectionError
from sp_core.falloff import PoseGraph, pose_edit, propagate
from sp_core.poses import pose_matrix

PERIOD = 60


@pytest.fixture(scope="module")
def cyclic(sample_clip):
    """Four identical cycles of a periodic motion on the sample skeleton."""
    n = 4 * PERIOD
    rng = np.random.default_rng(0)
    rotation = sample_clip.is_rotation_channel()
    amplitude = rng.normal(0, 15, sample_clip.n_channels) * rotation
    phase = rng.uniform(0, 2 * np.pi, sample_clip.n_channels)
    t = 2 * np.pi * np.arange(n)[:, None] / PERIOD
    return sample_clip.with_channels(sample_clip.channels[0] + amplitude * np.sin(t + phase))


def test_global_reaches_every_step_local_only_its_own(cyclic):
    graph = PoseGraph(pose_matrix(cyclic))
    frame = 70
    others = [frame - PERIOD, frame + PERIOD, frame + 2 * PERIOD]
    assert min(graph.weights(frame, mode="global")[others]) >= 0.8
    assert max(graph.weights(frame, mode="local")[others]) < 0.2
    local = graph.weights(frame, mode="local")
    assert local[frame] == 1.0 and local[frame - 3] > 0.5 and local[frame + 3] > 0.5


def test_falloff_is_round_at_the_edit_unlike_nearest_distance(cyclic):
    poses = pose_matrix(cyclic)
    frame = 70
    w = PoseGraph(poses).weights(frame, mode="local")
    steepest = np.abs(np.diff(w)).max()
    at_edit = max(abs(w[frame] - w[frame - 1]), abs(w[frame + 1] - w[frame]))
    assert at_edit < 0.35 * steepest  # the top is rounded
    distance = np.linalg.norm(poses - poses[frame], axis=1)
    near = 1 - distance / distance[frame - 15:frame + 16].max()
    steepest = np.abs(np.diff(near[frame - 15:frame + 16])).max()
    at_edit = max(abs(near[frame] - near[frame - 1]), abs(near[frame + 1] - near[frame]))
    assert at_edit > 0.7 * steepest  # a nearest-distance falloff has a corner there


def test_zero_edit_and_full_weight(sample_clip):
    clip = sample_clip.sub_range(0, 200)
    nothing = pose_edit(clip, 100, clip.channels[100])
    np.testing.assert_allclose(propagate(clip, nothing, np.ones(clip.n_frames)), clip.channels,
                               atol=1e-9)
    edited = clip.channels[100].copy()
    hips_x = clip.channel_names.index("Hips.Xposition")
    edited[hips_x] += 5.0
    wrist = clip.node_index("RightWrist")
    columns = clip._rotation_index[wrist]
    order = clip.rotation_orders[wrist]
    turn = Rotation.from_euler("y", 25, degrees=True)
    edited[columns] = (turn * Rotation.from_euler(order, edited[columns], degrees=True)
                       ).as_euler(order, degrees=True)
    out = propagate(clip, pose_edit(clip, 100, edited), np.ones(clip.n_frames))
    np.testing.assert_allclose(out[:, hips_x] - clip.channels[:, hips_x], 5.0)  # constant offset
    expected = turn * Rotation.from_euler(order, clip.channels[:, columns], degrees=True)
    got = Rotation.from_euler(order, out[:, columns], degrees=True)
    assert np.allclose((got * expected.inv()).magnitude(), 0.0, atol=1e-9)
    assert np.abs(np.diff(out[:, columns], axis=0)).max() < 30  # no flips
    np.testing.assert_allclose(out[100, columns] % 360, edited[columns] % 360, atol=1e-6)


def test_propagated_edit_has_no_euler_flips(sample_clip):
    clip = sample_clip.sub_range(300, 500)
    edited = clip.channels[100].copy()
    spine = clip.node_index("Chest")
    edited[clip._rotation_index[spine]] += [80, -70, 120]
    weights = PoseGraph(pose_matrix(clip), first_frame=300).weights(400, mode="local")
    out = propagate(clip, pose_edit(clip, 400, edited), weights)
    jumps = np.abs(np.diff(out, axis=0)).max(axis=0)
    originals = np.abs(np.diff(clip.channels, axis=0)).max(axis=0)
    assert np.all(jumps <= originals + 20)


def test_spline_sanity_case():
    # a 5-key spline of one channel with flat tangents: editing the middle key moves frames
    # 24..72; the falloff reaches about the same stretch (measured: 31..62)
    keys = np.array([0, 24, 48, 72, 96])
    values = np.array([0.0, 30.0, -20.0, 40.0, 10.0])
    frames = np.arange(97)
    curve = np.interp(frames, keys, values)  # then eased
    for k in range(4):
        a, b = keys[k], keys[k + 1]
        u = (frames[a:b + 1] - a) / (b - a)
        curve[a:b + 1] = values[k] + (values[k + 1] - values[k]) * (3 * u**2 - 2 * u**3)
    weights = PoseGraph(curve[:, None]).weights(48, mode="local")
    reach = np.flatnonzero(weights > 0.05)
    assert abs(reach[0] - 24) <= 12 and abs(reach[-1] - 72) <= 12


def test_bad_input(sample_clip):
    graph = PoseGraph(pose_matrix(sample_clip.sub_range(0, 50)))
    with pytest.raises(SelectionError, match="mode must be 'local' or 'global'"):
        graph.weights(10, mode="everywhere")
    with pytest.raises(SelectionError, match="frame 99 is outside the analysed frames 0..50"):
        graph.weights(99)
    with pytest.raises(SelectionError, match="at least 3 frames"):
        PoseGraph(np.zeros((2, 3)))
    clip = sample_clip.sub_range(0, 10)
    with pytest.raises(SelectionError, match="the edited pose must be 96 finite channel values"):
        pose_edit(clip, 5, np.full(96, np.nan))
    edited = clip.channels[5].copy()
    edited[7] = np.inf  # (it said "got shape (96,)" of 96 values)
    with pytest.raises(SelectionError, match="^the edited pose must be 96 finite channel values; "
                                             f"{clip.channel_names[7]} is not a number$"):
        pose_edit(clip, 5, edited)
    with pytest.raises(SelectionError, match=r"got shape \(95,\)"):
        pose_edit(clip, 5, edited[:95])


def test_long_clips_use_a_sparse_graph(monkeypatch):
    from sp_core import falloff

    monkeypatch.setattr(falloff, "DENSE_LIMIT", 100)
    t = np.linspace(0, 8 * np.pi, 400)
    poses = np.column_stack([np.sin(t), np.cos(t), 0.01 * t])
    weights = PoseGraph(poses).weights(50, mode="global")
    assert weights[50] == 1.0 and weights[50 + 100] > 0.5  # one loop later, a similar pose


def test_a_loop_played_over_and_over_holds_together_in_the_sparse_graph(monkeypatch,
                                                                         sample_clip):
    """A stride of the walk played 40 times exactly: every pose's nearest NEIGHBOURS poses are
    its own copies, and the sparse graph fell into one piece per pose of the stride ("the
    poses of this motion stay apart even at sigma ...; give a larger sigma", which no sigma
    mended). Each frame is joined to the next as well: the edit reaches the same phase of
    every loop in global mode and stays in its own loop in local mode, as on the dense graph
    of four loops (test_a_looped_real_walk_cycle)."""
    from sp_core import falloff
    from sp_core.falloff import wand_poses

    stride = wand_poses(sample_clip.sub_range(600, 627))  # 28 distinct poses
    poses = np.concatenate([stride] * 40)
    monkeypatch.setattr(falloff, "DENSE_LIMIT", 500)
    graph = PoseGraph(poses)
    frame = 14 + 20 * len(stride)
    everywhere = graph.weights(frame, mode="global")
    copies = frame % len(stride) + len(stride) * np.arange(40)
    assert min(everywhere[copies]) >= 0.8
    local = graph.weights(frame, mode="local")
    assert local[frame] == 1.0 and max(local[copies[copies != frame]]) < 0.2


def test_propagate_command(sample_path, tmp_path, capsys):
    from sp_core.cli import main
    from sp_core.io.bvh import read_bvh

    edit = tmp_path / "edit.json"
    edit.write_text('{"offsets": {"Hips.Yposition": 2.0}}')
    out, weights = tmp_path / "out.bvh", tmp_path / "w.csv"
    assert main(["propagate", str(sample_path), "--frame", "1400", "--first-frame", "1001",
                 "--edit", str(edit), "--range", "1300:1500", "--bvh", str(out),
                 "--falloff", str(weights)]) == 0
    assert "Propagated the edit at frame 1400 (local" in capsys.readouterr().out
    rows = weights.read_text().splitlines()
    assert rows[0] == "frame,weight" and rows[1].startswith("1001,") and len(rows) == 995
    table = np.array([[float(x) for x in r.split(",")] for r in rows[1:]])
    assert table[399, 1] == 1.0 and np.all(table[table[:, 0] < 1300, 1] == 0)
    original, edited = read_bvh(sample_path), read_bvh(out)
    column = original.channel_names.index("Hips.Yposition")
    np.testing.assert_allclose(edited.channels[:, column] - original.channels[:, column],
                               2.0 * table[:, 1], atol=2e-6)
    bad = tmp_path / "bad.json"
    bad.write_text('{"offsets": {"Nope.Xrotation": 1}}')
    assert main(["propagate", str(sample_path), "--frame", "10", "--edit", str(bad),
                 "--bvh", str(tmp_path / "other.bvh")]) == 2
    assert f"{bad}: offsets: 'Nope.Xrotation' is not a channel of {sample_path} (no node " \
        "'Nope';" in capsys.readouterr().err


def test_a_looped_real_walk_cycle(sample_clip):
    # one stride of the sample's walk (frames 600-732, found as the closest repeat of frame 620)
    # looped four times: the wand, on root-relative positions, reaches the same phase of every
    # loop in global mode and stays in its own loop in local mode
    from sp_core.falloff import wand_poses

    stride = sample_clip.sub_range(600, 732)
    poses = np.concatenate([wand_poses(stride)] * 4)
    graph = PoseGraph(poses)
    length = stride.n_frames
    frame = 20
    later = [frame + k * length for k in (1, 2, 3)]
    assert min(graph.weights(frame, mode="global")[later]) >= 0.8
    assert max(graph.weights(frame, mode="local")[later]) < 0.2


@pytest.mark.parametrize("mode", ["local", "global"])
def test_a_still_take_takes_the_edit_in_full_on_every_frame(mode):
    """Every frame the same pose: each is the edited pose. The graph's eigenvectors past the
    first span a degenerate space (any basis), so the falloff read from them was noise
    (0.3-0.6 from one frame to the next: a pop of 12 degrees a frame for a 20-degree edit)."""
    poses = np.tile(np.linspace(-1.0, 2.0, 12), (90, 1))
    graph = PoseGraph(poses, first_frame=1001)
    np.testing.assert_array_equal(graph.weights(1050, mode=mode), np.ones(90))
    region = graph.weights(1050, region=(1040, 1060), mode=mode)
    # full on the region's middle, faded in and out over its edges (no pop there either)
    assert region[44:55].min() == 1.0 and region[39] == region[59] == 0.0
    assert np.all(np.diff(region[39:45]) > 0) and np.all(np.diff(region[54:60]) < 0)
    assert np.count_nonzero(region) == 19


def test_an_audit_of_the_wand(sample_clip, sample_path, tmp_path, capsys):
    """An audit's findings: a sigma far under the poses' distances spread noise scaled to
    [0, 1] over the whole clip (weight 1 at both ends); a region made the edit pop in at its
    edge (0 on one frame, 1 on the next: a 30-degree step); the panel's falloff left out the
    time scale; an edit of nothing was written;
    weights of the wrong length met scipy's broadcasting error."""
    from sp_core.cli import main
    from sp_core.falloff import clip_graph
    from sp_core.options import Options
    from sp_core.session import Session
    from sp_core.standalone import StandaloneHost

    poses = pose_matrix(sample_clip)
    with pytest.raises(SelectionError, match=r"^sigma 0.1 is too small for this motion: no "
                                             r"pose is within reach of another.*raise sigma, "
                                             r"or leave it unset to let it adapt to the motion$"):
        PoseGraph(poses, sigma=0.1)
    graph = PoseGraph(poses)
    for region in ((380, 700), (300, 440), (0, 500), (350, 993)):
        weights = graph.weights(400, region=region, mode="global")
        lo, hi = region
        assert weights[400] == 1.0 and np.all(weights[:lo] == 0) and np.all(weights[hi + 1:] == 0)
        for edge in (lo, hi):
            if edge not in (0, 993, 400):
                assert weights[edge] == 0.0  # the edit fades in and out inside the region
        assert np.abs(np.diff(weights)).max() < 0.35  # no pop (1.0 in one frame before)
    # a region that starts on the edited frame starts with it in full (it cannot fade)
    assert graph.weights(400, region=(400, 993), mode="global")[400] == 1.0
    free = graph.weights(400, mode="global")
    assert free[0] > 0 or free[993] > 0 or np.count_nonzero(free) > 100  # the clip's ends: no fade
    # every front's falloff from the same options
    options = Options().replace(time_scale=0.1, weights=(("RightWrist", 3.0),))
    session = Session(StandaloneHost(sample_clip), options.replace(suggested=True))
    session.analyze()
    expected = clip_graph(sample_clip, "positions", None, {"RightWrist": 3.0}, 0.1)
    np.testing.assert_allclose(session.pose_graph().weights(400), expected.weights(400),
                               atol=1e-9)
    assert not np.allclose(expected.weights(400), graph.weights(400), atol=1e-3)
    csv = tmp_path / "w.csv"
    edit = tmp_path / "edit.json"
    edit.write_text('{"offsets": {"Hips.Yposition": 2.0}}')
    assert main(["propagate", str(sample_path), "--frame", "400", "--edit", str(edit),
                 "--time-scale", "0.1", "--bvh", str(tmp_path / "o.bvh"), "--falloff",
                 str(csv)]) == 0
    written = np.loadtxt(csv, delimiter=",", skiprows=1)[:, 1]
    timed = clip_graph(sample_clip, time_scale=0.1)
    np.testing.assert_allclose(written, timed.weights(400), atol=1e-6)
    edit.write_text('{"offsets": {}}')
    assert main(["propagate", str(sample_path), "--frame", "400", "--edit", str(edit),
                 "--bvh", str(tmp_path / "none.bvh")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "the edit changes nothing at frame 400: give offsets in --edit or another pose in "
        "--edited-bvh")
    assert not (tmp_path / "none.bvh").exists()
    # a whole turn is no edit either, in the panel's session too (it comes back from the
    # rotations 1e-14 off, which was written as a layer of rounding)
    turned = sample_clip.channels[400].copy()
    turned[sample_clip.channel_names.index("RightShoulder.Zrotation")] += 360.0
    session.analyze()
    with pytest.raises(SelectionError, match="^the edit changes nothing: pose the character"):
        session.propagate_edit(400, turned, session.pose_graph().weights(400))
    change = pose_edit(sample_clip, 400, sample_clip.channels[400] + 1.0)
    with pytest.raises(SelectionError, match=r"^the falloff must be 994 finite weights, one per "
                                             r"frame of the motion, got shape \(10,\)$"):
        propagate(sample_clip, change, np.ones(10))


def test_a_long_hold_gets_a_falloff_at_the_adapted_sigma(sample_clip):
    """A review: most frames holding one pose (to within noise) made the adapted sigma that
    noise, and the falloff was refused at its own default ("raise sigma (this motion's own is
    0.02248) or leave it unset"): an adapted sigma grows until the graph holds together."""
    from sp_core.falloff import clip_graph

    rng = np.random.default_rng(0)
    channels = sample_clip.channels.copy()
    channels[:600] = channels[600] + rng.normal(0.0, 0.01, channels[:600].shape)
    held = sample_clip.with_channels(channels)
    graph = clip_graph(held)
    assert graph.laplacian_values[1] >= 1e-10
    weights = graph.weights(800)
    assert weights[800] == 1.0 and 0 < np.count_nonzero(weights > 0.5) < 400
    # a second review: on a long take (the sparse graph) ARPACK failed to converge on the
    # graph in pieces, after 50 s, with its own exception; the pieces are found first
    from sp_core import falloff

    original = falloff.DENSE_LIMIT
    falloff.DENSE_LIMIT = 500
    try:
        sparse = clip_graph(held)
    finally:
        falloff.DENSE_LIMIT = original
    assert sparse.laplacian_values[1] >= 1e-10 and sparse.weights(800)[800] == 1.0


# ------------------------------------------------------------ found by a review of the wand
def test_frames_the_falloff_does_not_reach_keep_their_values_and_the_edit_its_offsets(
        sample_clip):
    """Unwrapped from the first frame, the edited Hips took the other Euler triplet where
    they pass a near gimbal lock and kept it to the end of the take: 194 frames of weight 0
    changed by 180 degrees on every channel, and the edited frame showed (-162, 98.6,
    -176.3) for typed offsets of (18, 8.6, 3.7)."""
    from sp_core.falloff import clip_graph

    clip, frame = sample_clip, 469
    edited = clip.channels[frame].copy()
    for axis, offset in (("Z", 18.0), ("Y", 8.6), ("X", 3.7)):
        edited[clip.channel_names.index(f"Hips.{axis}rotation")] += offset
    weights = clip_graph(clip).weights(frame, mode="local")  # (as the command's)
    out = propagate(clip, pose_edit(clip, frame, edited, typed=True), weights)
    untouched = weights == 0
    assert untouched.sum() > 400
    assert np.array_equal(out[untouched], clip.channels[untouched])
    np.testing.assert_allclose(out[frame], edited, atol=1e-9)


def test_a_large_typed_edit_of_a_still_joint_is_smooth(sample_clip):
    """(114.4, 65.6, 102.8) on a joint that never turns: the triplet nearest the original's
    is the other one of that pose, and the curves jumped between the two."""
    clip = sample_clip
    joint = clip.node_index("LHipJoint")
    columns = clip._rotation_index[joint]
    assert np.ptp(clip.channels[:, columns]) == 0.0
    edited = clip.channels[147].copy()
    edited[columns] += [114.4, 65.6, 102.8]
    weights = PoseGraph(pose_matrix(clip)).weights(147, mode="local")
    out = propagate(clip, pose_edit(clip, 147, edited, typed=True), weights)
    assert np.abs(np.diff(out[:, columns], axis=0)).max() < 10.0
    np.testing.assert_allclose(out[147, columns], edited[columns], atol=1e-9)


def test_an_edited_file_is_read_as_the_clip_is(sample_clip, sample_path, tmp_path, capsys):
    """The clip's own pose from a file that writes a one-channel joint's angle wrapped past
    180 degrees spun it by 360 × the falloff; a BVH written from an FBX take (its joint orients
    folded into the rotation channels) moved the joints by the character's height; and the
    edited file was numbered as a BVH, not as the clip (an FBX take from frame 1)."""
    from sp_core.cli import main
    from sp_core.falloff import edited_frame
    from sp_core.io.bvh import write_bvh
    from sp_core.io.readers import read_clip

    clip = sample_clip
    wrapped = clip.with_channels(np.where(clip.is_rotation_channel(),
                                          (clip.channels + 180.0) % 360.0 - 180.0 + 360.0,
                                          clip.channels))
    values = edited_frame(clip, wrapped, 100, "wrapped.bvh")
    np.testing.assert_allclose(values, clip.channels[100], atol=1e-9)
    fbx = Path(__file__).parent / "data" / "cmu_131_01_240.fbx"
    take = read_clip(fbx)
    exported = tmp_path / "exported.bvh"
    write_bvh(take, exported)
    args = ["propagate", str(fbx), "--frame", str(take.first_frame + 50), "--edited-bvh",
            str(exported), "--bvh", str(tmp_path / "out.bvh")]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"salient-poses: error: {exported} has the motion's channels on another skeleton "
        "(other joint offsets or joint orients: a BVH written from an FBX take folds the joint "
        "orients into its rotation channels), so its values are not an edit of the motion's; "
        "edit the take in its own format, or give the change as offsets\n")
    assert not (tmp_path / "out.bvh").exists()
    # the edited file numbered as the clip: frame 1001 of a clip given --first-frame 1001
    edited = tmp_path / "edited.bvh"
    posed = clip.channels.copy()
    posed[200:, clip.channel_names.index("RightShoulder.Zrotation")] += 25.0
    write_bvh(clip.with_channels(posed), edited)
    assert main(["propagate", str(sample_path), "--first-frame", "1001", "--frame", "1201",
                 "--edited-bvh", str(edited), "--bvh", str(tmp_path / "moved.bvh")]) == 0
    moved = read_clip(tmp_path / "moved.bvh", first_frame=1001)
    column = clip.channel_names.index("RightShoulder.Zrotation")
    assert moved.channels[200, column] == pytest.approx(clip.channels[200, column] + 25.0)


def test_a_range_inside_the_scene_fades_out_at_its_ends(sample_clip):
    """A panel analysing frames 1200..1600 of a longer take: the edit's layer, keyed on the
    range alone, started at full strength (+28.6 degrees) on its first frame."""
    clip = sample_clip.sub_range(200, 600)
    graph = PoseGraph(pose_matrix(clip), first_frame=200)
    closed = graph.weights(210, mode="local")
    assert closed[0] > 0.9
    opened = graph.weights(210, mode="local", open_ends=(True, True))
    assert opened[0] == 0.0 and opened[10] == 1.0
    assert np.abs(np.diff(opened)).max() < 0.35
