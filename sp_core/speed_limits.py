"""How fast the corrective keys may move the skeleton from one frame to the next.

The corrective stage (:mod:`sp_core.corrective`) checks positions only: without a limit it
buys a joint's position with a pop of the joints above it (on the sample's default reduction
the chest turned 8.2 degrees in one frame to bring an elbow in, where the capture's chest turns
0.56 degrees a frame at most). A correction may move a joint no faster than the capture moves
it anywhere, or, near the capture's own fast moments, :data:`SPEED_MARGIN` times its fastest
step within :data:`SPEED_REACH` frames; or as fast as it moved before the change (the pose
keys' own curve may be faster than the capture).

A joint's speed is the angle its local rotation turns through from a frame to the next (the
rotation from one to the other, whatever the axis), not the steps of its rotation channels: the
same turn is split into channels differently by every host, and a limit per channel followed
the split. Blender's pose bones rotate about the bone's own rest axes (Euler XYZ) where the
sample's BVH rotates about the parent's (Euler ZYX); with limits per channel the corrective
keys held Blender's right elbow at 27 mm at K = 49 where the BVH's reached 20, and Blender's
default K was 57 (Analyze 6.8 s) instead of 49 (now 49 on both, Blender's Analyze 4.1 s). The
angle between two rotation
matrices ``a`` and ``b`` follows from their distance ``d² = |a - b|²`` (Frobenius):
``d² = 8 sin²(angle / 2)``, which does not depend on constant rotations before or after the
channels' (a joint orient, a bone's rest axes) and keeps its precision at small angles.
Translation channels (a root's location) keep a limit per channel, in scene units a frame.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sp_core.clip import Clip

#: Times the capture's fastest step within :data:`SPEED_REACH` frames a correction may step
#: (or as fast as the capture's fastest step on that joint or channel anywhere, if more). The
#: limit of the capture's own speed anywhere keeps small corrections possible where the
#: capture is still: with twice the local speed alone, a 5,000-frame take needed K = 281
#: instead of 249 to meet the default tolerance and the 90-frame stop take at 20 % keys kept
#: a 9.4 mm error (1.34x Decimate's max).
SPEED_MARGIN = 2.0
#: Frames each side of a step over which the capture's fastest step is taken (its own flips
#: and snaps, a frame or two long, may be followed).
SPEED_REACH = 2
#: Frames whose joint rotations are formed at once (a long take's matrices of every channel
#: would be gigabytes).
BLOCK = 4096


def step_limits(steps: np.ndarray) -> np.ndarray:
    """(F - 1, n) float64: the largest step a correction may give at each of the capture's
    ``steps`` (F - 1, n), non-negative (the module docstring's rule)."""
    from scipy.ndimage import maximum_filter1d

    if not len(steps):
        return steps
    local = maximum_filter1d(steps, 2 * SPEED_REACH + 1, axis=0, mode="nearest")
    return np.maximum(SPEED_MARGIN * local, steps.max(axis=0))


def joint_rotations(clip: Clip, channels: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """(n, len(nodes), 3, 3) float64: each node's rotation by its rotation channels (the product
    of their single-axis matrices in listed order, as the forward kinematics forms it) on rows
    ``channels`` (n, C)."""
    owned = [clip._rotation_index[node] for node in nodes]
    columns = np.concatenate(owned) if owned else np.zeros(0, dtype=np.int64)
    # (the nodes' channels only: a polish round asks on most of the take's rows)
    turns = clip.channel_turns(np.asarray(channels)[:, columns].reshape(-1),
                               np.tile(columns, len(channels))
                               ).reshape(len(channels), len(columns), 3, 3)
    out = np.empty((len(channels), len(nodes), 3, 3))
    at = 0
    for j, own in enumerate(owned):
        rotation = turns[:, at]
        for k in range(at + 1, at + len(own)):
            rotation = rotation @ turns[:, k]
        out[:, j] = rotation
        at += len(own)
    return out


def step_distances(rotations: np.ndarray) -> np.ndarray:
    """(n - 1, m) float64: ``|R[f + 1] - R[f]|²`` of rotations (n, m, 3, 3), the squared
    distance ``8 sin²(angle / 2)`` of each step (module docstring)."""
    return distances(rotations[:-1], rotations[1:])


def distances(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """(n, m) float64: ``|after - before|²`` of rotations (n, m, 3, 3) paired row by row, the
    squared distance of the step from each ``before`` to its ``after``."""
    difference = after - before
    return np.einsum("fnij,fnij->fn", difference, difference)


def angle_of(distance: np.ndarray) -> np.ndarray:
    """Degrees turned by steps of squared distance ``distance`` (:func:`step_distances`)."""
    return np.degrees(2.0 * np.arcsin(np.minimum(np.sqrt(distance / 8.0), 1.0)))


def distance_of(degrees: np.ndarray) -> np.ndarray:
    """The squared distance of steps of ``degrees`` (at most 180: no turn is farther)."""
    return 8.0 * np.sin(np.radians(np.minimum(degrees, 180.0)) / 2.0) ** 2


def faster(after: np.ndarray, before: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """Where steps ``after`` are faster than both ``limits`` and the steps ``before`` (any
    matching shapes of step sizes or squared distances; a relative 1e-9 and an absolute
    1e-12 of rounding allowed)."""
    return np.abs(after) > np.maximum(np.abs(before), limits) * (1.0 + 1e-9) + 1e-12


class SpeedLimits:
    """The limits of one capture: per joint for rotation, per channel for translation.

    Parameters
    ----------
    clip : Clip
        The capture (channels unwrapped: a wrap is no step; the joints' rotations do not
        depend on it).

    Attributes
    ----------
    rotation : (C,) bool
        Rotation channels (checked by their joint).
    channel : (F - 1, C) float64
        Largest step of each channel, channel units a frame (used for translation channels).
    joint : (F - 1, N) float64
        Largest squared distance of each node's rotation step (nodes without rotation
        channels: infinite).
    """

    def __init__(self, clip: Clip) -> None:
        self.clip = clip
        channels = clip.channels
        n_frames = len(channels)
        self.rotation = clip.is_rotation_channel()
        self.channel = step_limits(np.abs(np.diff(channels, axis=0)))
        self.turning = np.unique(clip.channel_nodes[self.rotation]).astype(np.int64)
        degrees = np.zeros((max(n_frames - 1, 0), len(self.turning)))
        for lo in range(0, n_frames - 1, BLOCK):  # (steps lo..hi - 1 need rows lo..hi)
            hi = min(lo + BLOCK, n_frames - 1)
            degrees[lo:hi] = angle_of(step_distances(
                joint_rotations(clip, channels[lo:hi + 1], self.turning)))
        self.joint = np.full((max(n_frames - 1, 0), clip.n_nodes), np.inf)
        self.joint[:, self.turning] = distance_of(step_limits(degrees))
        # each node's rotation slots in product order (CSR), for the kernel
        slots = [clip.rotation_slot[clip._rotation_index[n]] for n in range(clip.n_nodes)]
        self.node_ptr = np.concatenate([[0], np.cumsum([len(s) for s in slots])]
                                       ).astype(np.int64)
        self.node_slots = np.concatenate(slots).astype(np.int64) if slots else \
            np.zeros(0, dtype=np.int64)

    def changes_too_fast(self, reduced: np.ndarray, current: np.ndarray,
                         kept_turns: np.ndarray, owner: np.ndarray, first: np.ndarray,
                         counts: np.ndarray, columns: np.ndarray, values: np.ndarray,
                         turns: np.ndarray, changed: np.ndarray, n_owners: int) -> np.ndarray:
        """(n_owners,) bool: which candidates' changes step too fast (the module docstring).

        Change i of candidate ``owner[i]`` gives channel ``columns[i]`` the correction
        ``values`` (its ``counts[i]`` values in turn, all changes' laid end to end) on rows
        ``first[i]`` on. A candidate's changes of one joint's channels are checked together.

        Parameters
        ----------
        reduced, current : (F, C) float64
            The pose keys' curves, and those plus the correction before the changes.
        kept_turns : (F, R, 3, 3) float64
            ``current``'s single-axis matrices (:meth:`~sp_core.clip.Clip.axis_rotations`).
        owner, first, counts, columns : (n,) int
        values : (counts.sum(),) float64
        turns : (counts.sum(), 3, 3) float64
            The matrices of the rotation channels' new values (``reduced`` plus ``values``;
            :meth:`~sp_core.clip.Clip.channel_turns`) where ``changed``; not read elsewhere
            (the kept matrices are used there), nor for translation channels.
        changed : (counts.sum(),) bool
            Which new values differ from ``current``'s.
        n_owners : int
        """
        out = np.zeros(n_owners, dtype=bool)
        if not len(first):
            return out
        starts = np.cumsum(counts) - counts
        turning = self.rotation[columns]
        moving = np.flatnonzero(~turning)
        if len(moving):
            fast = _channel_changes_too_fast(reduced, current, self.channel, first[moving],
                                             counts[moving], columns[moving],
                                             values[end_to_end(starts[moving], counts[moving])])
            out[owner[moving[fast]]] = True
        turned = np.flatnonzero(turning)
        if len(turned):
            from sp_core._fit_kernels import joint_steps_too_fast

            nodes = self.clip.channel_nodes[columns[turned]]
            order = turned[np.lexsort((nodes, owner[turned]))]  # by candidate, then joint
            key = owner[order] * self.clip.n_nodes + self.clip.channel_nodes[columns[order]]
            group_start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            # (each change's matrices read where they lie among all of them: gathered in the
            # candidates' order, they were copied once more on every greedy step)
            fast = joint_steps_too_fast(
                np.append(group_start, len(order)).astype(np.int64),
                self.clip.channel_nodes[columns[order[group_start]]].astype(np.int64),
                first[order].astype(np.int64), counts[order].astype(np.int64),
                self.clip.rotation_slot[columns[order]].astype(np.int64),
                starts[order].astype(np.int64), np.ascontiguousarray(turns, dtype=np.float64),
                changed, kept_turns, self.node_ptr, self.node_slots, self.joint)
            out[owner[order[group_start[fast]]]] = True
        return out

    def rows_checker(self, reduced: np.ndarray, before: np.ndarray, columns: np.ndarray
                     ) -> Callable[[np.ndarray], np.ndarray]:
        """A check of new corrections against correction ``before`` (the polish's trials):
        ``fast_rows(after)`` is (F, len(columns)) bool, the rows on either side of a step where
        correction ``after`` (F, C) moves channel ``columns[j]`` (a translation) or its joint
        (a rotation) faster than the limits allow and than ``before`` did.

        ``before``'s joint rotations and steps are formed here once; each check forms
        ``after``'s joint rotations on the rows where it differs only (a round of the polish
        tries several steps from one correction; formed anew on every row each time, they
        took 40 % of a 5,000-frame take's corrective stage).

        Parameters
        ----------
        reduced, before : (F, C) float64
            The pose keys' curves and the correction the new ones are checked against (not
            changed while the check is used).
        columns : (n,) int
            The channels asked about (a rotation channel is fast where its joint is).
        """
        n_frames = len(reduced)
        moving = np.flatnonzero(~self.rotation[columns])
        turning = np.flatnonzero(self.rotation[columns])
        nodes, place = np.unique(self.clip.channel_nodes[columns[turning]], return_inverse=True)
        kept = joint_rotations(self.clip, reduced + before, nodes) if n_frames >= 2 else None
        kept_steps = step_distances(kept) if kept is not None else None
        watched = columns[turning]
        shifted = columns[moving]
        was = np.diff(reduced[:, shifted] + before[:, shifted], axis=0)

        def fast_rows(after: np.ndarray) -> np.ndarray:
            rows = np.zeros((n_frames, len(columns)), dtype=bool)
            if n_frames < 2 or not len(columns):
                return rows
            fast = np.zeros((n_frames - 1, len(columns)), dtype=bool)
            if len(moving):
                fast[:, moving] = faster(np.diff(reduced[:, shifted] + after[:, shifted], axis=0),
                                         was, self.channel[:, shifted])
            changed = np.flatnonzero(np.any(after[:, watched] != before[:, watched], axis=1))
            if len(turning) and len(changed):
                # the steps into and out of every changed row, and the rows they join
                steps = np.union1d(changed[changed > 0] - 1, changed[changed < n_frames - 1])
                joined = np.union1d(steps, steps + 1)
                turned = kept[joined]
                new = np.isin(joined, changed)
                turned[new] = joint_rotations(self.clip, reduced[joined[new]]
                                              + after[joined[new]], nodes)
                first = np.searchsorted(joined, steps)
                moved = distances(turned[first], turned[first + 1])
                fast[steps[:, None], turning] = faster(
                    moved, kept_steps[steps], self.joint[steps[:, None], nodes])[:, place]
            rows[:-1] |= fast
            rows[1:] |= fast
            return rows

        return fast_rows


def end_to_end(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The ranges ``starts[i]:starts[i] + counts[i]`` laid end to end, (counts.sum(),) int
    (the rows or values of many changes at once, without a loop over them)."""
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(int(ends[-1]) if len(ends)
                                                                  else 0)


def _channel_changes_too_fast(reduced: np.ndarray, current: np.ndarray, limits: np.ndarray,
                              first: np.ndarray, counts: np.ndarray, columns: np.ndarray,
                              values: np.ndarray) -> np.ndarray:
    """(n,) bool: which of n changes of single channels step faster than ``limits`` (F - 1, C)
    allow and than they stepped before (arguments as :meth:`SpeedLimits.changes_too_fast`'s).
    """
    n_frames = reduced.shape[0]
    lo = np.maximum(first - 1, 0)
    hi = np.minimum(first + counts, n_frames - 1)
    spans = hi - lo + 1
    begins = np.cumsum(spans) - spans
    rows = end_to_end(lo, spans)
    cols = np.repeat(columns, spans)
    before = current[rows, cols]
    after = before.copy()
    inner = end_to_end(begins + first - lo, counts)
    after[inner] = reduced[rows[inner], cols[inner]] + values
    # (a span's last row may be the range's: its step, to the next span, is no step)
    fast = faster(np.diff(after), np.diff(before),
                  limits[np.minimum(rows[:-1], n_frames - 2), cols[:-1]])
    fast[begins[1:] - 1] = False  # (the step from one change's rows to the next's)
    return np.logical_or.reduceat(np.append(fast, False), begins)
