"""Speed limits of the corrective keys: per joint rotation, whatever the channels' Euler order;
the candidates' kernel and the polish's rows against plain references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from sp_core.corrective import _Kinematics
from sp_core.io.bvh import parse_bvh
from sp_core.speed_limits import SpeedLimits

from reference_speed import capture_limits, joint_angles

FIRST, LAST = 700, 899  # the sample's fast arm and thumb moments


def reordered(path, order: str):
    """The sample with every joint's rotation channels in Euler ``order`` (e.g. "XYZ") instead
    of ZYX, the motion the same: a host that splits the same turns into other channels."""
    lines = path.read_text().splitlines()
    motion = lines.index("MOTION")
    groups = []  # (first column, listed axes) of each joint's rotation channels
    column = 0
    for i, line in enumerate(lines[:motion]):
        words = line.split()
        if words[:1] == ["CHANNELS"]:
            names = words[2:]
            turns = [j for j, n in enumerate(names) if n.endswith("rotation")]
            if turns:
                groups.append((column + turns[0], "".join(names[j][0] for j in turns)))
                names[turns[0]:turns[-1] + 1] = [f"{a}rotation" for a in order]
                lines[i] = line[:line.index("CHANNELS")] + " ".join(words[:2] + names)
            column += len(names)
    values = np.array([[float(v) for v in line.split()] for line in lines[motion + 3:]
                       if line.strip()])
    for start, axes in groups:
        turn = Rotation.from_euler(axes, values[:, start:start + 3], degrees=True)
        values[:, start:start + 3] = turn.as_euler(order, degrees=True)
    body = [" ".join(f"{v:.12f}" for v in row) for row in values]
    return parse_bvh("\n".join(lines[:motion + 3] + body) + "\n")


@pytest.fixture(scope="module")
def part(sample_clip):
    return sample_clip.sub_range(FIRST, LAST)


def test_the_joint_limits_are_the_capture_joints_own_whatever_the_euler_order(sample_path):
    """The same motion with XYZ channels: the same joint limits (in degrees, as a plain
    scipy reference computes them), where limits per channel differ by tens of degrees."""
    zyx = parse_bvh(sample_path.read_text()).sub_range(FIRST, LAST)
    xyz = reordered(sample_path, "XYZ").sub_range(FIRST, LAST)
    np.testing.assert_allclose(xyz.positions, zyx.positions, atol=1e-6)
    limits = [SpeedLimits(clip.unwrapped()) for clip in (zyx, xyz)]
    # (no turn is farther than 180 degrees: a limit past it allows any)
    expected = np.minimum(capture_limits(joint_angles(zyx, zyx.unwrapped().channels)), 180.0)
    turning = limits[0].turning
    for found in limits:
        degrees = np.degrees(2.0 * np.arcsin(np.sqrt(found.joint[:, turning] / 8.0)))
        np.testing.assert_allclose(degrees, expected[:, turning], rtol=1e-6, atol=1e-6)
    per_channel = [found.channel[:, found.rotation] for found in limits]
    assert np.abs(per_channel[0] - per_channel[1]).max() > 10.0


def reference_too_fast(part, limits, current, reduced, changes):
    """Plain reference: a candidate (a list of (channel, first row, values)) is too fast where,
    from the row before its changes to the row after, a joint it turns (scipy angles) or a
    translation channel it moves steps faster than the limit and than before."""
    capture = part.unwrapped().channels
    joint_limit = capture_limits(joint_angles(part, capture))
    channel_limit = capture_limits(np.abs(np.diff(capture, axis=0)))
    after = current.copy()
    lo, hi = len(current), 0
    for c, first, values in changes:
        after[first:first + len(values), c] = reduced[first:first + len(values), c] + values
        lo, hi = min(lo, first - 1), max(hi, first + len(values))
    lo, hi = max(lo, 0), min(hi, len(current) - 1)
    rows = slice(lo, hi + 1)
    angles_after = joint_angles(part, after[rows])
    angles_before = joint_angles(part, current[rows])
    for c, first, values in changes:
        if part.is_rotation_channel()[c]:
            node = part.channel_nodes[c]
            bound = np.maximum(angles_before[:, node], joint_limit[lo:hi, node])
            if np.any(angles_after[:, node] > bound * (1 + 1e-9) + 1e-3):
                return True
        else:
            a, b = max(first - 1, 0), min(first + len(values), len(current) - 1)
            step_after = np.abs(np.diff(after[a:b + 1, c]))
            step_before = np.abs(np.diff(current[a:b + 1, c]))
            if np.any(step_after > np.maximum(step_before, channel_limit[a:b, c])
                      * (1 + 1e-9) + 1e-9):
                return True
    return False


def test_candidates_too_fast_match_a_plain_reference(part):
    """Random candidates of one to four changes (some on the same joint, some translations,
    some tiny, some a pop): the kernel's verdicts are the reference's."""
    rng = np.random.default_rng(7)
    clip = part.unwrapped()
    limits = SpeedLimits(clip)
    reduced = clip.channels + rng.normal(0.0, 0.3, clip.channels.shape)
    current = reduced + np.where(rng.random(clip.channels.shape) < 0.1, 0.2, 0.0)
    fk = _Kinematics(clip, current)
    arm = [c for c, name in enumerate(clip.channel_names)
           if name.split(".")[0] in ("RightShoulder", "RightElbow", "Hips")]
    candidates = []
    for _ in range(300):
        changes = []
        for _ in range(rng.integers(1, 5)):
            c = int(rng.choice(arm))
            first = int(rng.integers(0, clip.n_frames - 8))
            length = int(rng.integers(1, 8))
            scale = float(rng.choice([1e-4, 0.05, 1.0, 20.0]))
            # (some rows keep the current value, as most rows of a hat do)
            kept = rng.random(length) < 0.3
            changes.append((c, first, current[first:first + length, c] - reduced[
                first:first + length, c] + np.where(kept, 0.0, scale * rng.normal(size=length))))
        candidates.append(changes)
    owner = np.repeat(np.arange(len(candidates)), [len(ch) for ch in candidates])
    flat = [change for changes in candidates for change in changes]
    first = np.array([f for _c, f, _v in flat])
    counts = np.array([len(v) for _c, _f, v in flat])
    columns = np.array([c for c, _f, _v in flat])
    values = np.concatenate([v for _c, _f, v in flat])
    rows = np.repeat(first, counts) + np.arange(counts.sum()) \
        - np.repeat(np.cumsum(counts) - counts, counts)
    cols = np.repeat(columns, counts)
    new = reduced[rows, cols] + values
    changed = new != current[rows, cols]
    # the matrices of the changed values only: the others must not be read
    turns = np.full((len(new), 3, 3), np.nan)
    turns[changed] = clip.channel_turns(new[changed], cols[changed])
    found = limits.changes_too_fast(reduced, current, fk.turns, owner, first, counts, columns,
                                    values, turns, changed, len(candidates))
    expected = [reference_too_fast(clip, limits, current, reduced, changes)
                for changes in candidates]
    assert 50 < sum(expected) < 250  # both verdicts are tested
    assert found.tolist() == expected


def test_the_polish_rows_follow_the_joints(part):
    """A trial correction that turns the right elbow by 30 degrees on one frame: both rows
    around each of its two steps are fast for every channel of that joint, and nothing else
    is; a correction of a thousandth of a degree is fast nowhere."""
    clip = part.unwrapped()
    limits = SpeedLimits(clip)
    reduced = clip.channels.copy()
    before = np.zeros_like(reduced)
    elbow = [c for c, name in enumerate(clip.channel_names)
             if name.startswith("RightElbow.") and name.endswith("rotation")]
    columns = np.array(elbow + [0, 1])  # and the root's translation
    for size, rows in ((30.0, [99, 100, 101]), (1e-3, [])):
        after = before.copy()
        after[100, elbow[1]] = size
        fast = limits.rows_checker(reduced, before, columns)(after)
        expected = np.zeros_like(fast)
        expected[rows, :len(elbow)] = True
        assert (fast == expected).all()


def test_the_polish_rows_match_a_plain_reference(part):
    """Trials that change a few rows of several channels (translations too) from a correction
    that is not zero: the rows the check marks are those around every step where a joint (by
    scipy's angles) or a translation channel goes faster than the limit and than before."""
    rng = np.random.default_rng(11)
    clip = part.unwrapped()
    limits = SpeedLimits(clip)
    capture = clip.channels
    joint_limit = capture_limits(joint_angles(clip, capture))
    channel_limit = capture_limits(np.abs(np.diff(capture, axis=0)))
    reduced = capture + rng.normal(0.0, 0.2, capture.shape)
    columns = np.array([c for c, name in enumerate(clip.channel_names)
                        if name.split(".")[0] in ("Hips", "RightShoulder", "RightElbow",
                                                  "LeftKnee")])
    before = np.zeros_like(reduced)
    before[50:60, columns] = rng.normal(0.0, 0.5, (10, len(columns)))
    check = limits.rows_checker(reduced, before, columns)
    marked = 0
    for _ in range(20):
        after = before.copy()
        for c in rng.choice(columns, 3):
            rows = rng.integers(0, clip.n_frames, 4)
            after[rows, c] += rng.choice([1e-3, 0.5, 5.0, 40.0]) * rng.normal(size=4)
        found = check(after)
        angles_after = joint_angles(clip, reduced + after)
        angles_before = joint_angles(clip, reduced + before)
        expected = np.zeros_like(found)
        for j, c in enumerate(columns):
            if clip.is_rotation_channel()[c]:
                node = clip.channel_nodes[c]
                fast = angles_after[:, node] > np.maximum(angles_before[:, node],
                                                          joint_limit[:, node]) * (1 + 1e-9) + 1e-3
            else:
                fast = np.abs(np.diff(reduced[:, c] + after[:, c])) > np.maximum(
                    np.abs(np.diff(reduced[:, c] + before[:, c])), channel_limit[:, c]) \
                    * (1 + 1e-9) + 1e-12
            expected[:-1, j] |= fast
            expected[1:, j] |= fast
        assert (found == expected).all()
        marked += int(found.any())
    assert 5 < marked < 20  # trials that pass and trials that do not
