"""Forward kinematics against an independent 4x4-matrix implementation, and the Euler filter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from sp_core.euler import euler_matrices, flip_triplet, unwrap_euler

from reference_fk import world_positions
from strategies import clips

ORDERS = ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]


def test_fk_matches_matrix_reference_on_sample_clip(sample_clip):
    frames = np.r_[0:5, 300:305, sample_clip.n_frames - 5:sample_clip.n_frames]
    expected = world_positions(sample_clip.node_names, sample_clip.parents, sample_clip.offsets,
                               sample_clip.channel_names, sample_clip.raw_channels[frames])
    np.testing.assert_allclose(sample_clip.positions[frames], expected, atol=1e-9)


def test_sample_clip_positions_are_plausible(sample_clip):
    # CMU is Y up: the head is above the hips, feet near the floor, all in one height
    pos = sample_clip.positions
    head = sample_clip.node_index("Head")
    hips = sample_clip.node_index("Hips")
    assert np.all(pos[:, head, 1] > pos[:, hips, 1])
    assert pos[:, :, 1].min() > -1.0
    assert pos.shape == (994, 38, 3)


@settings(max_examples=60, deadline=None)
@given(clips(max_frames=4))
def test_fk_matches_matrix_reference_on_generated_skeletons(clip):
    expected = world_positions(clip.node_names, clip.parents, clip.offsets, clip.channel_names,
                               clip.channels)
    np.testing.assert_allclose(clip.positions, expected, atol=1e-8)


@pytest.mark.parametrize("order", ORDERS + [o.lower() for o in ORDERS])
def test_flip_triplet_is_the_same_rotation(order):
    angles = np.random.default_rng(1).uniform(-400, 400, size=(50, 3))
    a = Rotation.from_euler(order, angles, degrees=True).as_matrix()
    b = Rotation.from_euler(order, flip_triplet(angles), degrees=True).as_matrix()
    np.testing.assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_unwrap_removes_jumps_and_keeps_rotations(order):
    rng = np.random.default_rng(7)
    # a smooth rotation path through gimbal-flip territory, then wrapped and randomly flipped
    t = np.linspace(0, 1, 400)[:, None]
    smooth = np.hstack([400 * t - 100, 170 * np.sin(6 * t), -300 * t])
    smooth += rng.normal(0, 0.3, (400, 3))
    raw = Rotation.from_euler(order, smooth, degrees=True).as_euler(order, degrees=True)
    flip = rng.random(400) < 0.3
    raw[flip] = (flip_triplet(raw[flip]) + 180) % 360 - 180
    out = unwrap_euler(raw)
    assert np.all(np.abs(np.diff(out, axis=0)) < 30)
    np.testing.assert_allclose(Rotation.from_euler(order, out, degrees=True).as_matrix(),
                               Rotation.from_euler(order, raw, degrees=True).as_matrix(), atol=1e-9)
    np.testing.assert_array_equal(out[0], raw[0])
    np.testing.assert_allclose(unwrap_euler(out), out)  # idempotent


@given(st.lists(st.floats(-1000, 1000), min_size=2, max_size=30), st.integers(1, 2))
def test_unwrap_of_one_or_two_angles_only_shifts_by_turns(values, width):
    raw = np.array(values)[:, None].repeat(width, axis=1)
    out = unwrap_euler(raw)
    turns = (out - raw) / 360.0
    np.testing.assert_allclose(turns, np.round(turns), atol=1e-9)
    assert np.all(np.abs(np.diff(out, axis=0)) <= 180 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(clips(max_frames=8, min_frames=2))
def test_unwrapping_a_clip_keeps_world_positions(clip):
    unwrapped = clip.unwrapped()
    np.testing.assert_allclose(unwrapped.positions, clip.positions, atol=1e-8)
    rot = clip.is_rotation_channel()
    assert np.all(np.abs(np.diff(unwrapped.channels[:, rot], axis=0)) <= 180 + 1e-9)
    np.testing.assert_array_equal(unwrapped.raw_channels, clip.channels)
    # positions are its own channels' (reused from the clip only when nothing wrapped)
    assert np.array_equal(unwrapped.positions,
                          unwrapped.forward_kinematics(unwrapped.channels))


@pytest.mark.parametrize("order", ORDERS + ["Z", "XY", "YX"])
def test_euler_matrices_equal_scipy_from_euler(order):
    angles = np.random.default_rng(3).uniform(-360, 360, size=(40, len(order)))
    np.testing.assert_allclose(euler_matrices(order, angles),
                               Rotation.from_euler(order, angles, degrees=True).as_matrix(),
                               atol=1e-12)


def _oriented_chain(rng):
    """Three bones with rest orientations and locations in their rest frames (Blender's model),
    plus their positions from an independent chain of 4x4 matrices."""
    from sp_core.clip import Clip

    orients = Rotation.random(3, random_state=3).as_matrix()
    offsets = rng.uniform(-2, 2, (3, 3))
    names = ["root", "spine", "head"]
    channels = [f"{n}.{a}position" for n in names[:2] for a in "XYZ"]
    channels += [f"{n}.{a}rotation" for n in names for a in "ZYX"]
    values = rng.uniform(-1, 1, (5, len(channels))) * ([1.0] * 6 + [60.0] * 9)
    clip = Clip(names, [-1, 0, 1], offsets, [False] * 3, channels, values, 30.0,
                orients=orients, translation_space="oriented")
    expected = np.empty((5, 3, 3))
    for f in range(5):
        world = np.eye(4)
        for i in range(len(names)):
            rest = np.eye(4)
            rest[:3, :3], rest[:3, 3] = orients[i], offsets[i]
            move = np.eye(4)
            if i < 2:
                move[:3, 3] = values[f, 3 * i:3 * i + 3]
            turn = np.eye(4)
            turn[:3, :3] = Rotation.from_euler("ZYX", values[f, 6 + 3 * i:9 + 3 * i],
                                               degrees=True).as_matrix()
            world = world @ rest @ move @ turn
            expected[f, i] = world[:3, 3]
    return clip, values, expected


def test_oriented_translations_follow_blenders_bone_model():
    clip, _values, expected = _oriented_chain(np.random.default_rng(5))
    np.testing.assert_allclose(clip.positions, expected, atol=1e-12)


def test_position_jacobian_of_oriented_translations_matches_finite_differences():
    clip, values, _expected = _oriented_chain(np.random.default_rng(6))
    positions, jacobian = clip.position_jacobian(values)
    step = 1e-6
    for c in range(clip.n_channels):
        moved = values.copy()
        moved[:, c] += step
        numeric = (clip.forward_kinematics(moved) - positions) / step
        np.testing.assert_allclose(jacobian[..., c], numeric, atol=1e-4)
