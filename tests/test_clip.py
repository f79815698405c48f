"""The Clip model: caching, sub-clips, height and its own validation."""

from __future__ import annotations

import numpy as np
import pytest

from sp_core.clip import Clip
from sp_core.errors import ClipError


def test_positions_are_cached_and_recomputed_when_channels_change(sample_clip):
    clip = sample_clip.with_channels(sample_clip.channels)
    first = clip.positions
    assert clip.positions is first
    with pytest.raises(ValueError):
        clip.channels[0, 0] = 1.0  # read-only: in-place edits cannot leave a stale cache
    moved = clip.channels.copy()
    moved[:, 0] += 10.0  # Hips.Xposition
    clip.channels = moved
    np.testing.assert_allclose(clip.positions[..., 0], first[..., 0] + 10.0, atol=1e-9)
    with pytest.raises(ClipError, match="has 994"):
        clip.channels = moved[:5]


def test_forward_kinematics_of_values_of_another_layout_is_refused(sample_clip):
    """The kernel reads a row by the clip's channel indices: values of another width are
    refused before it runs (it would read past the row), frames of any count are not."""
    with pytest.raises(ClipError, match=r"channel values must have shape \(n_frames, 96\), "
                                        r"got \(3, 95\)"):
        sample_clip.forward_kinematics(sample_clip.channels[:3, :95])
    assert sample_clip.forward_kinematics(sample_clip.channels[:0]).shape == (0, 38, 3)


def test_sub_range_shares_memory_and_keeps_host_frames(sample_clip):
    sample_clip.positions  # noqa: B018 - fill the cache so the sub-clip can slice it
    sub = sample_clip.sub_range(100, 199)
    assert sub.first_frame == 100 and sub.last_frame == 199 and sub.n_frames == 100
    assert np.shares_memory(sub.channels, sample_clip.channels)
    assert np.shares_memory(sub.positions, sample_clip.positions)
    np.testing.assert_array_equal(sub.positions, sample_clip.positions[100:200])
    late = sample_clip.with_channels(sample_clip.channels).sub_range(900, 993)
    assert late.with_channels(late.channels).first_frame == 900
    with pytest.raises(ClipError, match="outside clip"):
        sample_clip.sub_range(900, 1000)
    with pytest.raises(ClipError, match="empty frame range 50:40"):
        sample_clip.sub_range(50, 40)


def test_sub_range_of_a_clip_starting_at_1001(sample_clip):
    clip = sample_clip.with_channels(sample_clip.channels)
    clip.first_frame = 1001
    sub = clip.sub_range(1001, 1010)
    np.testing.assert_array_equal(sub.channels, sample_clip.channels[:10])
    assert clip.frame_index(1994) == 993


def test_sub_nodes_keeps_ancestors_and_end_sites(sample_clip):
    sub = sample_clip.sub_nodes(["LFingers", "Head"])
    assert sub.node_names[0] == "Hips" and "lhand" in sub.node_names
    assert {"LFingers_end", "Head_end"} <= set(sub.end_site_names)
    assert "RightHip" not in sub.node_names
    assert set(sub.end_site_names) <= set(sample_clip.end_site_names)
    for name in sub.node_names:
        np.testing.assert_allclose(sub.positions[:, sub.node_index(name)],
                                   sample_clip.positions[:, sample_clip.node_index(name)],
                                   atol=1e-9)
    assert sub.n_channels == sum(len(sample_clip.node_channels(n)) for n in sub.node_names)


def test_subtrees_read_a_limb_in_its_parents_frame_at_the_bodys_scale(sample_clip):
    limb = sample_clip.subtrees(["LeftShoulder"])
    inside = [sample_clip.node_index(n) for n in limb.node_names]
    assert limb.root_names == ["LeftShoulder"]
    assert "LeftCollar" not in limb.node_names and "LFingers_end" in limb.node_names
    assert limb.channel_names == [c for c in sample_clip.channel_names
                                  if sample_clip.node_index(c.rpartition(".")[0]) in inside]
    # a rigid change of frame: the same distances as in the world
    def spans(points):
        return np.linalg.norm(points[:, :, None] - points[:, None], axis=-1)
    np.testing.assert_allclose(spans(limb.positions), spans(sample_clip.positions[:, inside]),
                               atol=1e-9)
    assert limb.height() == sample_clip.height() == limb.sub_range(10, 20).height()
    assert limb.mm_per_unit() == sample_clip.mm_per_unit()
    assert sample_clip._derived(character_height=None).height() == sample_clip.height()
    with pytest.raises(ClipError, match="character height must be a positive number of scene "
                                        "units, got 0.0"):
        sample_clip._derived(character_height=0.0)


def test_height_of_sample_and_mm_scale(sample_clip):
    # rest pose of the CMU skeleton: toe tip to head top along Y
    rest = sample_clip.rest_positions()
    assert sample_clip.height() == pytest.approx(np.ptp(rest[:, 1]))
    assert 20 < sample_clip.height() < 30
    assert sample_clip.mm_per_unit() == pytest.approx(1700 / sample_clip.height())
    with pytest.raises(ClipError, match="up axis"):
        sample_clip.height("w")


def test_height_of_degenerate_skeletons():
    flat = Clip(["a", "b"], [-1, 0], [[0, 0, 0], [3, 0, 0]], [False, False], [], np.zeros((2, 0)),
                fps=24)
    assert flat.height() == 3.0  # no Y extent: falls back to the largest rest extent
    point = Clip(["a"], [-1], [[0, 0, 0]], [False], [], np.zeros((2, 0)), fps=24)
    with pytest.raises(ClipError, match="has one joint, no body"):
        point.height()
    # one joint and its End Site: the End Site's offset is no body's size
    tip = Clip(["a", "a_end"], [-1, 0], [[0, 0, 0], [0, 5, 0]], [False, True], [],
               np.zeros((2, 0)), fps=24)
    with pytest.raises(ClipError, match="has one joint, no body"):
        tip.height()
    assert tip._derived(character_height=2.0).height() == 2.0  # a host's measure of the body
    still = Clip(["a", "b"], [-1, 0], [[0, 0, 0], [0, 0, 0]], [False, False], [],
                 np.zeros((2, 0)), fps=24)
    with pytest.raises(ClipError, match="no measurable size"):
        still.height()
    moving = Clip(["a", "b"], [-1, 0], [[0, 0, 0], [0, 0, 0]], [False, False],
                  ["b.Xposition"], [[0.0], [2.0]], fps=24)
    assert moving.height() == 2.0  # one point at rest: the largest extent of a frame's pose


def test_rotations_that_turn_no_node_are_found(sample_clip):
    """A spinning prop without an End Site was reduced to two keys, 71 degrees off, with a
    "max 0" error: its rotation moves no position, so neither the selection nor the errors see
    it."""
    spin = np.column_stack([np.linspace(0, 3, 5), 40 * np.sin(np.arange(5.0))])
    prop = Clip(["prop"], [-1], [[0, 0, 0]], [False], ["prop.Xposition", "prop.Zrotation"],
                spin, fps=30)
    assert prop.unseen_rotations() == ["prop.Zrotation"]
    tipped = Clip(["prop", "prop_end"], [-1, 0], [[0, 0, 0], [0, 1, 0]], [False, True],
                  ["prop.Xposition", "prop.Zrotation"], spin, fps=30)
    assert tipped.unseen_rotations() == []
    # an End Site at the joint's own point (offsets of zero) measures nothing either
    flat = Clip(["prop", "prop_end"], [-1, 0], [[0, 0, 0], [0, 0, 0]], [False, True],
                ["prop.Xposition", "prop.Zrotation"], spin, fps=30)
    assert flat.unseen_rotations() == ["prop.Zrotation"]
    assert sample_clip.unseen_rotations() == []


@pytest.mark.parametrize("kwargs, message", [
    (dict(parents=[1, -1]), "hierarchy order"),
    (dict(channel_names=["c.Xposition"]), "names no node"),
    (dict(channel_names=["b.Scale"]), "unknown attribute 'Scale'"),
    (dict(channel_names=["a.Xrotation", "a.Xrotation"]), "listed twice"),
    (dict(node_names=["a", "a"]), "used twice"),
    (dict(fps=0.0), "positive number"),
    (dict(first_frame=1.5), "integer frame number"),
])
def test_clip_validation(kwargs, message):
    base = dict(node_names=["a", "b"], parents=[-1, 0], offsets=np.zeros((2, 3)),
                end_sites=[False, False], channel_names=["a.Xrotation"], channels=np.zeros((3, 1)),
                fps=30.0)
    base.update(kwargs)
    base["channels"] = np.zeros((3, len(base["channel_names"])))
    with pytest.raises(ClipError, match=message):
        Clip(**base)


def test_unknown_node_suggests_close_names(sample_clip):
    with pytest.raises(ClipError, match="did you mean LeftWrist"):
        sample_clip.node_index("LeftWirst")
