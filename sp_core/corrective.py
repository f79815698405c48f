"""Sparse corrective keys: a small key budget spent where the pose-key fit is worst.

Pose keys sit on the same frames on every channel, so a one-frame jump of a thumb or a fast
knee between two keyposes stays off until the next keypose, while a per-curve decimation would
put a key there. The corrective stage keeps the pose keys as they are and adds a few keys on
individual channels, written into an additive layer (linear interpolation, zero away from the
corrected moments), chosen greedily where the remaining world-space joint error is largest.

The correction of a channel is the linear interpolation of its *knots* (corrective keys with
values) and of the pose keys (value 0, unless a knot sits on one: with captured key values the
pose curves hit the original there, with fitted ones they may miss it a little). What a host
layer needs is the knots plus the zero keys of the pose keys next to a knot; those are the
keys counted against the budget. A knot whose value is zero (one that closes a correction)
and a zero key next to no other knot change nothing the host shows, and are not written
(:meth:`_Channel.needed`).

Greedy step
    Take the worst frame not yet given up (largest joint error over all nodes), the worst node
    in it and the channels that move it; rank the channels by how much a one-dimensional
    Gauss–Newton step at that frame would lower the frame's squared error, and try, on the best
    few, knot patterns (the frame; the frame and its two neighbours; every other frame) with two
    values each (the channel's exact residual, the Gauss–Newton value). The best few together,
    with a few channels below the worst node that can compensate, give a joint step per
    pattern: a Gauss–Newton step on their amplitudes, undamped and damped
    (:data:`JOINT_DAMPING`). A candidate is accepted only when no frame it touches gets a
    larger worst-node or mean-node error than the pose-key result had (so the stage never
    makes a frame worse) and it lowers the sum of squared worst-node errors; the best gain per
    key wins. Nor may a candidate turn a joint (or move a translation channel) from one frame
    to the next faster than the capture does around there, or than it did before
    (:mod:`sp_core.speed_limits`): a joint's position is not bought with a pop of the joints
    above it. A frame no candidate improves is given up.

Rounds
    After the greedy search the polish refits every knot value together (under the same
    checks). When a tolerance's
    max is to be met and frames stay above it, the greedy search starts again from what the
    polish left, with no frame given up, then the polish again, while a round lowers the
    largest error (:data:`CYCLES` rounds at most). A reduction that meets the max after the
    first round is what one round gives; so is one spending a budget with no max to meet.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sp_core.clip import Clip
from sp_core.errors import ReductionError
from sp_core.reweighting import worst_first_weights
from sp_core.speed_limits import SpeedLimits, end_to_end
from sp_core.tree_jacobian import TreeLayout, pose

if TYPE_CHECKING:
    from scipy import sparse

#: Channels tried per greedy step (the best by their Gauss–Newton gain at the worst frame).
CHANNELS_TRIED = 8
#: Channels below the worst joint added to the joint step (they compensate a fix above it).
HELPERS_TRIED = 4
#: Levenberg–Marquardt damping of the joint step (its normal matrix's diagonal times 1 + d),
#: each giving its own candidates. The undamped step of a dozen channels that move the same
#: node often overshoots (on the sample at K = 30 it took the right knee at a pose key from
#: 51.8 to 56.6-88.5 mm); the damped ones are shorter and turn towards the gradient. With
#: 0.1 and 1 besides 0, the sample's reductions at K = 28-62 met a 20 mm max at 33 K instead
#: of 29.
JOINT_DAMPING = (0.0, 0.1, 1.0)
#: Half-widths of the hat-shaped corrections tried, frames.
WIDTHS = (1, 2, 4, 8, 16)
#: Rounds of the joint knot-value refit after the greedy search (see :func:`_polish`).
POLISH_ROUNDS = 3
#: Rounds of greedy search and polish at most: while frames stay above the tolerance's max
#: (``stop_at``) and the last round lowered the largest error, the greedy search starts again
#: from what the polish left, with no frame given up (the polish moves every knot, which makes
#: frames the greedy search gave up fixable again: of the 11 K from 28 to 62 whose reduction
#: of the sample missed 20 mm after one round, 5 met it, K = 38 after the third; measured
#: before the damped joint steps).
CYCLES = 5
#: Forward-difference step of the Jacobian columns (degrees or scene units).
STEP = 1e-4
#: Slack of the "never worse" check, relative to the clip's size (rounding of FK).
SLACK = 1e-9


@dataclass(frozen=True)
class CorrectiveKeys:
    """Per-channel linear corrective keys of an additive layer.

    Attributes
    ----------
    channel_names : list of str
        Every channel of the reduction, in its order.
    first_frame : int
        Host frame of row 0 of the reduced range.
    n_frames : int
        Frames of the reduced range.
    keys : dict of int to (frames, values)
        Channel index → host frames (ascending int64) and values (channel units) of the keys
        a host writes; linear interpolation between them, constant (zero) outside.
    """

    channel_names: list[str]
    first_frame: int
    n_frames: int
    keys: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def n_keys(self) -> int:
        """Keys written over all channels (zero keys included)."""
        return int(sum(len(f) for f, _ in self.keys.values()))

    def dense(self) -> np.ndarray:
        """(n_frames, n_channels) float64: the correction on every frame of the range."""
        out = np.zeros((self.n_frames, len(self.channel_names)))
        frames = np.arange(self.first_frame, self.first_frame + self.n_frames)
        for c, (key_frames, values) in self.keys.items():
            out[:, c] = np.interp(frames, key_frames, values, left=values[0], right=values[-1])
        return out

    def host_keys(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The keys as a host's sparse layer gets them: channel name → (host frames (n,)
        float64, values (n,) float64), by channel order.

        A host holds a curve's first and last value outside its keys, and a correction is
        not zero at the range's first or last frame where a knot sits there: held, it changed
        the animation before or after the analysed range (Blender: 35 mm at every later frame
        of the sample). Such a channel gets a key of that value at the range's end (if it
        has none there) and a zero key one frame outside it, so the layer is the correction
        on every frame of the range (:meth:`dense`) and zero on every frame outside it.
        """
        first, last = self.first_frame, self.first_frame + self.n_frames - 1
        out = {}
        for c in sorted(self.keys):
            frames, values = (np.asarray(a, dtype=np.float64) for a in self.keys[c])
            if values[0] != 0.0:
                start = [] if frames[0] == first else [float(first)]
                frames = np.concatenate([[first - 1.0], start, frames])
                values = np.concatenate([[0.0], [values[0]] * len(start), values])
            if values[-1] != 0.0:
                end = [] if frames[-1] == last else [float(last)]
                frames = np.concatenate([frames, end, [last + 1.0]])
                values = np.concatenate([values, [values[-1]] * len(end), [0.0]])
            out[self.channel_names[c]] = (frames, values)
        return out

    def record(self) -> list[dict]:
        """JSON-ready: ``[{"name", "keys": [[frame, value], ...]}]`` by channel order."""
        return [{"name": self.channel_names[c],
                 "keys": [[int(f), float(v)] for f, v in zip(*self.keys[c], strict=True)]}
                for c in sorted(self.keys)]


def budget_keys(budget: str | None, original_keys: int) -> int:
    """Keys a budget option (``"300"`` keys or ``"2%"`` of the original keys) allows.

    Raises
    ------
    ReductionError
        Not a whole number of keys >= 0 nor a percentage in [0, 100] (from a script: the
        command line's schema refuses these first; ``"abc"`` met float's ValueError, ``-5``
        and ``"150%"`` were taken).
    """
    if budget is None:
        return 0
    text = str(budget).strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if 0.0 <= share <= 100.0:
                return int(round(share / 100.0 * original_keys))
        elif int(text) >= 0:
            return int(text)
    except ValueError:
        pass
    raise ReductionError(f"corrective_budget must be a whole number of keys >= 0 or a "
                         f"percentage in [0, 100] such as 2%, got {budget!r}")


def _with_neighbours(marked: np.ndarray) -> np.ndarray:
    """(n,) bool: ``marked`` (n,) bool and the entries next to a marked one."""
    near = marked.copy()
    near[1:] |= marked[:-1]
    near[:-1] |= marked[1:]
    return near


class _Channel:
    """Knots of one channel and the keys they cost.

    The rows of the current knots' points and the keys they write are kept (the greedy
    search asks for them for every candidate): rows change only when knots are set, the
    points' values also through :meth:`add`.
    """

    def __init__(self, anchors: np.ndarray) -> None:
        self.anchors = anchors
        self.knots = {}

    @property
    def knots(self) -> dict[int, float]:
        """Row → value of every knot (rows change only by setting, values by :meth:`add`)."""
        return self._knots

    @knots.setter
    def knots(self, knots: dict[int, float]) -> None:
        self._knots = knots
        # the current points, ascending, as the greedy step's hats read them
        # (:func:`sp_core._fit_kernels.corrective_hats`): rows, values, which are knots
        self.point_rows, self.point_values, self.point_knots = self._points(knots)
        # and the rows as a list, which a greedy step bisects for every channel that moves
        # the worst joint (numpy's calls on a few rows cost more than the search)
        self.rows: list[int] = self.point_rows.tolist()
        # rows of the keys written, ascending (a candidate counts those on its rows)
        self.written_rows = self.point_rows[_with_neighbours(self.point_knots)]
        self.written_count = len(self.written_rows)

    def add(self, row: int, change: float) -> None:
        """Add ``change`` to the value of the knot on ``row``."""
        self._knots[row] += change
        self.point_values[bisect_left(self.rows, row)] = self._knots[row]

    def _points(self, knots: dict[int, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        at = np.fromiter(knots, dtype=np.int64, count=len(knots))
        rows = np.union1d(self.anchors, at)
        values = np.zeros(len(rows))
        is_knot = np.zeros(len(rows), dtype=bool)
        places = np.searchsorted(rows, at)
        values[places] = np.fromiter(knots.values(), dtype=np.float64, count=len(knots))
        is_knot[places] = True
        return rows, values, is_knot

    def points(self, knots: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values of the anchors (0) and knots, ascending."""
        return self._points(knots)[:2]

    def written(self, knots: dict[int, float]) -> np.ndarray:
        """Rows of the keys a host writes: the knots and the anchors next to one."""
        rows, _values, is_knot = self._points(knots)
        return rows[_with_neighbours(is_knot)]

    def needed(self, knots: dict[int, float]) -> np.ndarray:
        """Rows of the keys a host needs to show the correction: the knots whose value is not
        zero and the points next to one (the rest lie on a zero stretch between two of
        these, or beyond the first or last of them, where the host holds a zero key's value).
        """
        rows, values = self.points(knots)
        return rows[_with_neighbours(values != 0.0)]

    def span(self, new_rows: Sequence[int]) -> tuple[int, int]:
        """Rows lo..hi (inclusive) whose correction changes when ``new_rows`` get knots."""
        rows = self.rows
        first, last = min(new_rows), max(new_rows)
        before = bisect_left(rows, first) - 1
        after = bisect_right(rows, last)
        # a knot on the first or last key changes the correction up to the range's end
        lo = rows[before] if before >= 0 else first
        hi = rows[after] if after < len(rows) else last
        return int(lo), int(hi)


def correct(clip: Clip, reduced: np.ndarray, key_rows: np.ndarray, animated: np.ndarray,
            budget: int, stop_at: float = 0.0, polish: int = POLISH_ROUNDS,
            progress: Callable[[float, str], None] | None = None
            ) -> tuple[CorrectiveKeys, np.ndarray]:
    """Spend up to ``budget`` corrective keys on the worst moments of a pose-key reduction.

    Parameters
    ----------
    clip : Clip
        The reduced range (channels unwrapped as fitted); its positions are the target.
    reduced : (n_frames, n_channels) float64
        The pose-key curves on every frame.
    key_rows : (K,) int
        Rows of the pose keys (where a correction is zero unless a knot is put there).
    animated : (n_channels,) bool
        Channels that may get keys.
    budget : int
        Most keys written (zero keys of the layer included).
    stop_at : float
        Stop once no frame's worst-node error is above this (scene units; a tolerance met);
        while frames stay above it, further rounds of the greedy search and the polish
        (module docstring).
    polish : int
        Rounds of the joint refit of every knot value after the greedy search (0: none).
    progress : callable, optional
        ``progress(fraction, message)`` at every greedy step and polish round; the fraction is
        the share of the initial excess error over ``stop_at`` removed or given up (or of the
        budget spent, if more). It may raise (a cancellation), which abandons the stage.

    Returns
    -------
    keys : CorrectiveKeys
    correction : (n_frames, n_channels) float64
        The correction on every frame (reduced + correction is the corrected motion).
    """
    n_frames, n_channels = reduced.shape
    correction = np.zeros_like(reduced)
    result = CorrectiveKeys(list(clip.channel_names), int(clip.first_frame), n_frames)
    if budget <= 0 or n_frames < 3 or not animated.any():
        return result, correction
    target = clip.positions
    residual = clip.channels - reduced
    # reduced + correction, kept up to date with every change (a step reads blocks of it
    # from all over the take: formed anew, its rows cost more than the step's own work);
    # the sum, not a copy, so that its zeros are the sum's (+0.0 where reduced has -0.0)
    current = reduced + correction
    anchors = np.unique(np.asarray(key_rows, dtype=np.int64))
    channels = {c: _Channel(anchors) for c in np.flatnonzero(animated)}
    fk = _Kinematics(clip, reduced)
    errors = np.linalg.norm(fk.positions - target, axis=-1)
    base_max, base_mean = errors.max(axis=1), errors.mean(axis=1)
    slack = SLACK * max(float(np.ptp(target)), 1.0)
    frame_max = base_max.copy()
    given_up = np.zeros(n_frames, dtype=bool)
    movers = _movers(clip, animated)
    limits = SpeedLimits(clip)
    used = 0
    steps = 0
    floor = max(slack, stop_at)
    # the progress: the mean of the shares of the excess over the floor and of the frames
    # over it that are gone. The excess alone ran ahead (the worst frames go first: 0.88 at
    # half the time of a 5,000-frame take's greedy search), the frames alone lagged (0.34)
    initial = float(np.sum(np.clip(frame_max - floor, 0.0, None)))
    initial_frames = int(np.count_nonzero(frame_max > floor))
    share = 0.85 if polish else 1.0  # of the progress; the rest is the polish
    done = 0.0
    reached = 0.0

    def report(fraction: float, message: str) -> None:
        # (a later round's greedy search starts below where the last polish ended)
        nonlocal reached
        reached = max(reached, fraction)
        if progress is not None:
            progress(reached, message)

    largest = float(frame_max.max())
    for cycle in range(CYCLES):
        if cycle:  # what the polish left: every row, nothing given up
            if not polish:  # (the same search again would give the same frames up)
                break
            current[:] = reduced + correction
            fk.update(current, 0)
            errors[:] = np.linalg.norm(fk.positions - target, axis=-1)
            frame_max = errors.max(axis=1)
            top = float(frame_max.max())
            if stop_at <= 0 or top <= floor or top >= largest - slack:
                break
            largest = top
            given_up[:] = False
        while used < budget and steps < 20 * budget + 100:
            steps += 1
            open_max = np.where(given_up, -1.0, frame_max)
            if progress is not None:
                left = float(np.sum(np.clip(open_max - floor, 0.0, None)))
                frames = int(np.count_nonzero(open_max > floor))
                gone = 1.0 - 0.5 * (left / initial + frames / initial_frames) \
                    if initial > 0 else 1.0
                done = max(done, gone, used / budget)
                report(share * done, f"corrective keys: {used} of at most {budget}"
                                     + (f" (round {cycle + 1})" if cycle else ""))
            worst = int(np.argmax(open_max))
            if open_max[worst] <= floor:
                break
            node = int(np.argmax(errors[worst]))
            best = _best_candidate(clip, fk, reduced, correction, current, residual, target,
                                   channels, movers[node], worst, errors, base_max, base_mean,
                                   slack, budget - used, limits)
            if best is None:
                given_up[worst] = True
                continue
            changes, lo, hi, new_errors, cost = best
            for c, knots, c_lo, c_hi, column in changes:
                channels[c].knots = knots
                correction[c_lo:c_hi + 1, c] = column
                current[c_lo:c_hi + 1, c] = reduced[c_lo:c_hi + 1, c] + column
            # (rows lo..hi only: the greedy search takes hundreds of steps on a long take)
            fk.update(current[lo:hi + 1], lo, np.array([change[0] for change in changes]))
            errors[lo:hi + 1] = new_errors
            frame_max[lo:hi + 1] = new_errors.max(axis=1)
            used += cost
            given_up[lo:hi + 1] = False  # what changed may now be fixable
        if polish:
            _polish(clip, fk, reduced, correction, errors, channels, base_max, base_mean, slack,
                    limits, polish,
                    None if progress is None else
                    lambda f, m: report(share + (1.0 - share) * f, m))
    for c, state in channels.items():
        rows = state.needed(state.knots)
        if len(rows):
            result.keys[int(c)] = (rows + clip.first_frame, correction[rows, c].copy())
    return result, result.dense()


class _Kinematics:
    """The greedy search's forward kinematics (numba, one pass over the chain).

    ``fk(channels (F, C)) -> positions (F, n_nodes, 3)`` computes everything. :meth:`patched`
    computes blocks of rows of the current motion with a few channels changed: it keeps the
    current motion's single-axis matrices, world positions and world rotations, and redoes
    only the subtree below the topmost changed node, with new matrices for the changed
    channels only (:mod:`sp_core._fit_kernels`). On the hundreds of candidate rows of a
    greedy step, where one channel (or a few on one chain) differs, the whole chain and the
    matrices of every channel (scipy) cost most of the stage.

    Parameters
    ----------
    clip : Clip
    current : (F, C) float64
        The motion the kept transforms are of (:meth:`update` follows its changes).
    """

    def __init__(self, clip: Clip, current: np.ndarray) -> None:
        self.clip = clip
        self.rotation = clip.is_rotation_channel()
        subtrees = clip._subtrees()  # sorted: a node, then its descendants (parents first)
        self.sub_ptr = np.concatenate([[0], np.cumsum([len(t) for t in subtrees])]
                                      ).astype(np.int64)
        self.sub_nodes = np.concatenate(subtrees).astype(np.int64)
        # ancestors[n, a]: a is n or above it; the deepest common one roots a change
        self.ancestors = np.zeros((clip.n_nodes, clip.n_nodes), dtype=bool)
        for a, below in enumerate(subtrees):
            self.ancestors[below, a] = True
        self.depth = self.ancestors.sum(axis=1)
        # the skeleton as both kernels take it, after their per-call arrays
        chain = clip.chain()
        self.skeleton = (chain.offsets, chain.parents, chain.translation, chain.rot_ptr,
                         chain.rot_chan, chain.rot_slot, chain.orients, chain.oriented)
        self.turns = clip.axis_rotations(current)
        self.positions, self.world = self._chain(current, self.turns)

    def _chain(self, channels: np.ndarray, turns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from sp_core._fit_kernels import chain_world

        return chain_world(np.ascontiguousarray(channels), turns, *self.skeleton)

    def __call__(self, channels: np.ndarray) -> np.ndarray:
        return self.clip.forward_kinematics(channels)

    def update(self, rows: np.ndarray, lo: int, columns: np.ndarray | None = None) -> None:
        """The current motion changed on rows lo..lo + len(rows) - 1: they are now ``rows``
        (n, C); ``columns``, optional: the only channels that changed there (the other
        channels' matrices are kept: making all of them again cost more than the chain)."""
        hi = lo + len(rows)
        if columns is None:
            self.turns[lo:hi] = self.clip.axis_rotations(rows)
        else:
            turning = np.asarray(columns, dtype=np.int64)
            turning = turning[self.rotation[turning]]
            n = len(rows)
            self.turns[lo:hi, self.clip.rotation_slot[turning]] = self.clip.channel_turns(
                rows[:, turning].T.reshape(-1), np.repeat(turning, n)
            ).reshape(len(turning), n, 3, 3).transpose(1, 0, 2, 3)
        self.positions[lo:hi], self.world[lo:hi] = self._chain(rows, self.turns[lo:hi])

    def root(self, columns: np.ndarray) -> int:
        """The deepest node above (or at) every node that ``columns`` move."""
        common = np.all(self.ancestors[self.clip.channel_nodes[columns]], axis=0)
        return int(np.argmax(np.where(common, self.depth, -1)))

    def patched(self, channels: np.ndarray, base: np.ndarray, rows: np.ndarray,
                columns: np.ndarray, roots: np.ndarray, turns: np.ndarray | None = None
                ) -> np.ndarray:
        """Positions (B, n_nodes, 3) of ``channels`` (B, C), which are rows ``base`` (B,) of
        the current motion except channel ``columns[i]`` on row ``rows[i]`` of the block;
        ``roots`` (B,) is the topmost node those changes move on each row (-1: none).
        ``turns`` (len(rows), 3, 3), optional: the changed rotation channels' matrices
        (:meth:`~sp_core.clip.Clip.channel_turns`; made here if not given)."""
        from sp_core._fit_kernels import subtree_positions

        return subtree_positions(
            *self._patches(channels, base, rows, columns, roots, turns), self.turns,
            self.positions, self.world, self.sub_ptr, self.sub_nodes, *self.skeleton)

    def patched_errors(self, channels: np.ndarray, base: np.ndarray, rows: np.ndarray,
                       columns: np.ndarray, roots: np.ndarray, turns: np.ndarray,
                       errors: np.ndarray, target: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The nodes' distances (B, n_nodes) to ``target`` (F, n_nodes, 3) of
        :meth:`patched`'s rows, with each row's worst and mean (B,): the numbers of
        ``np.linalg.norm`` to the bit. ``errors`` (F, n_nodes) are the current motion's
        distances, which the nodes outside a row's moved subtree keep (they must be the norms
        of the kept positions to the bit, as :func:`correct` keeps them)."""
        from sp_core._fit_kernels import subtree_errors

        return subtree_errors(
            *self._patches(channels, base, rows, columns, roots, turns), self.turns,
            self.positions, self.world, errors, target, self.sub_ptr, self.sub_nodes,
            *self.skeleton)

    def _patches(self, channels: np.ndarray, base: np.ndarray, rows: np.ndarray,
                 columns: np.ndarray, roots: np.ndarray, turns: np.ndarray | None
                 ) -> tuple[np.ndarray, ...]:
        """The subtree kernels' first arguments: the rows, their frames and roots, and
        their changed rotation channels by row (CSR) with those channels' matrices."""
        turning = self.rotation[columns]
        rows, columns = rows[turning], columns[turning]
        order = np.argsort(rows, kind="stable")
        rows, columns = rows[order], columns[order]
        turns = self.clip.channel_turns(channels[rows, columns], columns) if turns is None \
            else turns[turning][order]
        patch_ptr = np.searchsorted(rows, np.arange(len(base) + 1)).astype(np.int64)
        return (np.ascontiguousarray(channels), np.asarray(base, dtype=np.int64),
                np.asarray(roots, dtype=np.int64), patch_ptr, columns.astype(np.int64), turns)


def _polish(clip: Clip, fk: _Kinematics, reduced: np.ndarray,
            correction: np.ndarray, errors: np.ndarray,
            channels: dict[int, _Channel], base_max: np.ndarray, base_mean: np.ndarray,
            slack: float, limits: SpeedLimits, rounds: int,
            progress: Callable[[float, str], None] | None = None) -> None:
    """Refit every knot value together (knot frames fixed): reweighted Gauss–Newton on the
    world positions, frames weighted by how bad they are so the worst frames count most.

    A round is kept only when no frame becomes worse than the pose keys alone, no joint or
    translation channel steps faster than ``limits`` allow, and neither the largest nor
    the mean joint error grows (the step is halved up to four times before giving
    up). ``correction`` and the knots are updated in place; ``errors`` (F, n_nodes) are the
    nodes' distances with ``correction`` as it comes (the greedy search's, the same numbers
    as the whole chain's forward kinematics gives).
    """
    from scipy import sparse

    # the unknowns (channel, knot row), a channel's knots in turn, and the hat function of
    # each over the rows (linear interpolation of the knot points), laid end to end in their
    # order: knot j's on hat_rows[starts[j]:starts[j + 1]] (one array for all, so that a
    # round's Jacobian, trials and checks take each channel or all knots at once: a long
    # take has thousands of knots)
    unknowns: list[tuple[int, int]] = []
    pieces: list[tuple[np.ndarray, np.ndarray]] = []
    spans: list[tuple[int, int, int]] = []  # (channel, first knot, end knot) among unknowns
    for c, state in channels.items():
        if not state.knots:
            continue
        points, _ = state.points(state.knots)
        spans.append((int(c), len(unknowns), len(unknowns) + len(state.knots)))
        for r in sorted(state.knots):
            unknowns.append((c, r))
            i = int(np.searchsorted(points, r))
            # a knot on the first or last row has no point beyond it: its hat ends at that row
            lo = int(points[i - 1]) if i > 0 else r - 1
            hi = int(points[i + 1]) if i + 1 < len(points) else r + 1
            rows = np.arange(lo + 1, hi)
            pieces.append((rows, np.interp(rows, [lo, r, hi], [0.0, 1.0, 0.0])))
    if not unknowns:
        return
    n_frames = reduced.shape[0]
    target = clip.positions.reshape(n_frames, -1)
    lengths = np.array([len(rows) for rows, _h in pieces])
    starts = np.concatenate([[0], np.cumsum(lengths)])
    hat_rows = np.concatenate([rows for rows, _h in pieces])
    hat_values = np.concatenate([h for _rows, h in pieces])
    columns = np.array([c for c, _ in unknowns])
    hat_columns = np.repeat(columns, lengths)
    hat_owner = np.repeat(np.arange(len(unknowns)), lengths)
    # (channel, first row, end row) of each channel's knots' hats
    groups = [(c, int(starts[j]), int(starts[k])) for c, j, k in spans]
    # the Jacobian columns of the knots' channels on their hats' rows only, from the world
    # axes of those channels (a dense position Jacobian of a long take is gigabytes)
    layout = TreeLayout.of(clip, np.unique(columns))
    below = clip._subtrees()

    def errors_of(corr: np.ndarray, rows: np.ndarray) -> np.ndarray:
        # (rows only: a trial changes the rows of its hats, on a long take a fraction of it)
        moved = fk(reduced[rows] + corr[rows])
        return np.linalg.norm(moved - clip.positions[rows], axis=-1)

    current = errors
    # the rows some hat covers, and where each sits among them: the Jacobian and the misses
    # are needed there only (the sparse products read nothing else)
    covered = np.unique(hat_rows)
    # the knots' channels, and where each hat's sits among them (the speed checks)
    knotted = np.unique(columns)
    hat_place = np.searchsorted(knotted, hat_columns)
    place = np.zeros(n_frames, dtype=np.int64)
    place[covered] = np.arange(len(covered))
    for done in range(rounds):
        if progress is not None:
            progress(done / rounds, f"refitting {len(unknowns)} corrective keys together")
        fast_rows = limits.rows_checker(reduced, correction, knotted)
        positions, axes = pose(clip, layout, reduced[covered] + correction[covered])
        miss = np.zeros_like(target)
        miss[covered] = positions.reshape(len(covered), -1) - target[covered]
        frame_max = current.max(axis=1)
        weight = worst_first_weights(frame_max, 4.0)
        data, row_index, col_index = [], [], []
        width = miss.shape[1]
        for c, first, end in groups:  # a channel's knots at once: their hats' rows in turn
            rows = hat_rows[first:end]
            column = jacobian_column(clip, layout, below, positions, axes, c, place[rows])
            block = column.reshape(len(rows), -1) \
                * (hat_values[first:end] * np.sqrt(weight[rows]))[:, None]
            data.append(block.reshape(-1))
            row_index.append((rows[:, None] * width + np.arange(width)).reshape(-1))
            col_index.append(np.repeat(hat_owner[first:end], width))
        a = sparse.csr_matrix((np.concatenate(data), (np.concatenate(row_index),
                                                      np.concatenate(col_index))),
                              shape=(n_frames * width, len(unknowns)))
        rhs = -(a.T @ (miss * np.sqrt(weight)[:, None]).reshape(-1))
        step = _damped_step(a, rhs)
        if step is None:
            return
        # knots whose change makes some frame worse than the pose keys are left out of the
        # step (frames where the correction already sits at that bound leave no room), and
        # the step is halved while the largest or the mean error would grow
        active = np.ones(len(unknowns), dtype=bool)
        accepted = False
        for _attempt in range(8):
            if progress is not None:
                progress(done / rounds, f"refitting {len(unknowns)} corrective keys together")
            trial = correction.copy()
            on = np.repeat(active, lengths)
            # (in the unknowns' order where hats overlap: as one knot after another)
            np.add.at(trial, (hat_rows[on], hat_columns[on]),
                      np.repeat(step, lengths)[on] * hat_values[on])
            changed = np.zeros(n_frames, dtype=bool)
            changed[hat_rows[on]] = True
            new = current.copy()
            new[changed] = errors_of(trial, changed)
            bad = (new.max(axis=1) > base_max + slack) | (new.mean(axis=1) > base_mean + slack)
            fast = fast_rows(trial)
            if bad.any() or fast.any():
                touching = np.logical_or.reduceat(bad[hat_rows] | fast[hat_rows, hat_place],
                                                  starts[:-1])
                if not (touching & active).any():
                    break
                active &= ~touching
                continue
            if new.max() <= current.max() and new.mean() <= current.mean():
                correction[:] = trial
                current = new
                accepted = True
                break
            step = step * 0.5
        if not accepted:
            return
        step = np.where(active, step, 0.0)
        for (c, r), d in zip(unknowns, step, strict=True):
            channels[c].add(r, float(d))


def _damped_step(a: sparse.csr_matrix, rhs: np.ndarray) -> np.ndarray | None:
    """The polish's Gauss–Newton step: ``(aᵀ a + μ I)⁻¹ rhs`` with μ a thousandth of the mean
    of ``aᵀ a``'s diagonal; None where that matrix is singular.

    Parameters
    ----------
    a : (rows, n) sparse matrix
        The weighted Jacobian of the knot values (each column nonzero on its hat's rows only).
    rhs : (n,) float64

    Returns
    -------
    (n,) float64 or None

    Two knots are coupled only where their hats share rows, so ``aᵀ a`` is sparse, and it is
    symmetric positive definite: it is factored sparse, in a symmetric fill-reducing order
    without pivoting. Dense, the factorisation was cubic in the knots and the matrix
    quadratic in memory (5,562 knots at 36,000 frames: 3.2-3.7 s a round, 250 MB a copy).
    """
    from scipy import sparse
    from scipy.sparse.linalg import splu

    normal = (a.T @ a).tocsc()
    ridge = 1e-3 * float(np.mean(normal.diagonal()))
    damped = (normal + ridge * sparse.identity(normal.shape[0], format="csc")).tocsc()
    try:
        step = splu(damped, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                    options={"SymmetricMode": True}).solve(rhs)
    except RuntimeError:  # exactly singular
        return None
    return step if np.all(np.isfinite(step)) else None


def jacobian_column(clip: Clip, layout: TreeLayout, below: list[np.ndarray],
                    positions: np.ndarray, axes: np.ndarray, channel: int,
                    rows: np.ndarray) -> np.ndarray:
    """(len(rows), n_nodes, 3): d positions / d ``channel`` on ``rows`` (scene units per channel
    unit, per degree for rotations), as :meth:`Clip.position_jacobian` gives it.

    ``positions`` and ``axes`` are :func:`sp_core.tree_jacobian.pose`'s for ``layout``, which
    must hold ``channel``; ``below`` is the clip's subtrees (``Clip._subtrees``). A rotation
    turns the nodes below its own about its world axis, a translation moves them along it.
    """
    node = int(clip.channel_nodes[channel])
    nodes = below[node]
    axis = axes[rows, layout.slot[channel]]  # (rows, 3)
    out = np.zeros((len(rows), clip.n_nodes, 3))
    if clip.rotation_slot[channel] >= 0:  # a rotation
        arms = positions[rows][:, nodes] - positions[rows, node][:, None, :]
        out[:, nodes] = np.cross(axis[:, None, :], arms)
    else:
        out[:, nodes] = axis[:, None, :]
    return out


def _movers(clip: Clip, animated: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """For every node, the animated channels that move it (its own and its ancestors') and
    those of the nodes below it (which can bring back what a fix above moves too far: an elbow
    fixed at the shoulder moves the hand)."""
    by_node = [np.flatnonzero(animated & (clip.channel_nodes == i)) for i in range(clip.n_nodes)]
    below = [subtree[subtree != i] for i, subtree in enumerate(clip._subtrees())]
    out = []
    for i in range(clip.n_nodes):
        chain: list[int] = []
        j = i
        while j >= 0:
            chain.extend(by_node[j].tolist())
            j = int(clip.parents[j])
        under = [c for n in below[i] for c in by_node[n].tolist()]
        out.append((np.asarray(chain, dtype=np.int64), np.asarray(under, dtype=np.int64)))
    return out


def _best_candidate(clip: Clip, fk: _Kinematics, reduced: np.ndarray,
                    correction: np.ndarray, current: np.ndarray,
                    residual: np.ndarray, target: np.ndarray, channels: dict[int, _Channel],
                    movers_of: tuple[np.ndarray, np.ndarray], worst: int, errors: np.ndarray,
                    base_max: np.ndarray,
                    base_mean: np.ndarray, slack: float, left: int,
                    limits: SpeedLimits):  # noqa: ANN202
    """The best accepted candidate at frame ``worst`` (None if none improves it):
    ``(changes, lo, hi, new errors (hi - lo + 1, n_nodes), cost)``, each change ``(channel,
    knots, lo, hi, column)``; ``current`` is ``reduced + correction``, ``limits``
    the capture's."""
    from sp_core._fit_kernels import (
        block_sums,
        corrective_hats,
        hat_sums,
        hat_windows,
        joint_normals,
    )

    n_frames = reduced.shape[0]
    above, under = movers_of
    movers = np.concatenate([above, under])
    if not len(movers):
        return None
    # the Jacobian over the frames any candidate can touch: between the points around `worst`
    spans = [channels[int(c)].span([worst]) for c in movers]
    lo_j = max(min(s[0] for s in spans), worst - 2 * max(WIDTHS), 0)
    hi_j = min(max(s[1] for s in spans), worst + 2 * max(WIDTHS), n_frames - 1)
    # rank the channels by their Gauss-Newton gain at the worst frame (forward differences)
    probe = np.repeat(current[worst:worst + 1], len(movers) + 1, axis=0)
    probe[np.arange(1, len(movers) + 1), movers] += STEP
    mover_nodes = clip.channel_nodes[movers]
    probed = fk.patched(probe, np.full(len(probe), worst), np.arange(1, len(movers) + 1),
                        movers, np.concatenate([[-1], mover_nodes])
                        ).reshape(len(movers) + 1, -1)
    miss_at = probed[0] - target[worst].reshape(-1)
    jac_at = ((probed[1:] - probed[0]) / STEP).T  # (3 n_nodes, movers)
    norm_at = np.einsum("nc,nc->c", jac_at, jac_at)
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(norm_at > 0, (miss_at @ jac_at) ** 2 / norm_at, 0.0)
    # single channels from above the worst joint; the joint step may also use a few below it
    ranked = np.argsort(-gain[:len(above)])[:CHANNELS_TRIED]
    helpers = len(above) + np.argsort(-gain[len(above):])[:HELPERS_TRIED]
    tried = np.concatenate([ranked, helpers])
    # the ranked channels' Jacobian columns over the window by forward differences: one FK
    # call instead of the full Jacobian of every channel on every row
    window = current[lo_j:hi_j + 1]
    rows_w = hi_j - lo_j + 1
    stacked = np.repeat(window[None], len(tried) + 1, axis=0)
    for i, m in enumerate(tried):
        stacked[i + 1, :, movers[m]] += STEP
    block_rows = np.arange(rows_w, (len(tried) + 1) * rows_w)
    moved = fk.patched(stacked.reshape(-1, clip.n_channels),
                       np.tile(np.arange(lo_j, hi_j + 1), len(tried) + 1), block_rows,
                       np.repeat(movers[tried], rows_w),
                       np.repeat(np.concatenate([[-1], mover_nodes[tried]]), rows_w)
                       ).reshape(len(tried) + 1, rows_w, -1)
    miss = moved[0] - target[lo_j:hi_j + 1].reshape(rows_w, -1)
    # (rows, 3 n_nodes, tried channels), and per row and tried channel the Gauss-Newton sums
    jac = np.ascontiguousarray(np.moveaxis((moved[1:] - moved[0]) / STEP, 0, -1))
    grad = np.einsum("fn,fnc->fc", miss, jac)
    norm = np.einsum("fnc,fnc->fc", jac, jac)
    # every shape of a change at `worst` on each tried channel (a ramp, then a hat of each
    # width) in one kernel call: its change per unit on the rows it reaches and its key cost
    # (hat h = t * slots + s is shape s of tried channel t). Made one by one in Python, the
    # forty shapes of a step cost more than the kernels of the step
    tried_channels = movers[tried]
    states = [channels[int(c)] for c in tried_channels]
    n_shapes, shape_of, closing, hat_lo, hat_hi, hat_cost, hat_ptr, hats = corrective_hats(
        *_laid_end_to_end(states), correction, tried_channels, worst,
        np.array(WIDTHS, dtype=np.int64))
    slots = shape_of.shape[1]
    closing = closing.reshape(-1, 2)
    hat_lo, hat_hi, hat_cost = hat_lo.reshape(-1), hat_hi.reshape(-1), hat_cost.reshape(-1)
    # the ranked channels' shapes within the budget (a channel's in turn), each with the
    # correction at `worst` made the residual's, and with its Gauss-Newton step from the
    # Jacobian's rows
    single_t, single_s = np.nonzero((np.arange(slots) < n_shapes[:len(ranked), None])
                                    & (hat_cost.reshape(-1, slots)[:len(ranked)] <= left))
    single = single_t * slots + single_s
    inside = np.maximum(hat_lo[single], lo_j)
    squares, gradients = hat_sums(hats, hat_ptr[single] + inside - hat_lo[single],
                                  np.minimum(hat_hi[single], hi_j) - inside + 1,
                                  inside - lo_j, single_t, norm, grad)
    single_channels = tried_channels[single_t]
    with np.errstate(divide="ignore", invalid="ignore"):
        deltas = np.stack([residual[worst, single_channels] - correction[worst, single_channels],
                           np.where(squares > 0, -gradients / squares, np.nan)], axis=1)
    good = (np.isfinite(deltas) & (deltas != 0)).reshape(-1)
    single_hats = np.repeat(single, 2)[good]
    # every candidate's rows lo..hi, topmost moved node, key cost and number of changes, and
    # every change's hat, channel and amplitude, in the candidates' order
    lo_of = [hat_lo[single_hats]]
    hi_of = [hat_hi[single_hats]]
    top_of = [clip.channel_nodes[tried_channels[single_hats // slots]]]
    cost_of = [hat_cost[single_hats]]
    changes_of = [np.ones(len(single_hats), dtype=np.int64)]
    change_hat = [single_hats]
    change_delta = [deltas.reshape(-1)[good]]
    # the tried channels together, a width at a time (a shoulder fix with the wrist
    # compensating): one Gauss-Newton step on their amplitudes, every width's normal
    # equations in one kernel call (the einsums of the weighted columns, to the bit)
    together = np.arange(len(tried))[:, None] * slots + shape_of  # (T, W + 1) hats
    width_cost = hat_cost[together].sum(axis=0)
    widths = np.flatnonzero(width_cost <= left) if len(tried) >= 2 else np.zeros(0, np.int64)
    joint = np.ascontiguousarray(together[:, widths].T)  # (widths, T)
    normals, gradients = joint_normals(
        jac, miss, hat_windows(hats, hat_ptr, hat_lo, hat_hi, joint, lo_j, hi_j))
    diagonal = np.arange(len(tried))
    normals[:, diagonal, diagonal] += 1e-9 * np.trace(normals, axis1=1, axis2=2)[:, None]
    # (every joint step changes the same channels: one topmost node for all)
    joint_top = fk.root(tried_channels) if len(joint) else -1
    for damping in JOINT_DAMPING:
        damped = normals.copy()
        damped[:, diagonal, diagonal] *= 1.0 + damping
        solved = _solve_each(damped, gradients)
        # (every width's step at once, in the widths' order: one by one in Python, the
        # appends of a step's eighteen joint candidates cost more than their solves)
        ok = np.flatnonzero(np.all(np.isfinite(solved), axis=1))
        lo_of.append(hat_lo[joint[ok]].min(axis=1))
        hi_of.append(hat_hi[joint[ok]].max(axis=1))
        top_of.append(np.full(len(ok), joint_top))
        cost_of.append(width_cost[widths[ok]])
        changes_of.append(np.full(len(ok), len(tried)))
        change_hat.append(joint[ok].reshape(-1))
        change_delta.append(solved[ok].reshape(-1))
    lo_all, hi_all = np.concatenate(lo_of), np.concatenate(hi_of)
    n_candidates = len(lo_all)
    if not n_candidates:
        return None
    # every candidate's rows in one batch of patched forward kinematics, then the checks and
    # scores of all of them at once (a Python loop over a hundred candidates a step cost more
    # than the kinematics): the candidates' rows lie end to end in one block
    changes = np.concatenate(changes_of)
    change_hats = np.concatenate(change_hat)
    deltas_all = np.concatenate(change_delta)
    lengths = hi_all - lo_all + 1
    offsets = np.cumsum(lengths) - lengths
    owner = np.repeat(np.arange(n_candidates), changes)
    in_take = hat_lo[change_hats]  # each change's first row in the take, and in the block
    in_block = offsets[owner] + in_take - lo_all[owner]
    counts = hat_hi[change_hats] - in_take + 1
    change_channels = tried_channels[change_hats // slots]
    rows = end_to_end(lo_all, lengths)
    starts = np.cumsum(counts) - counts  # each change's first value among all of them
    patch_rows = end_to_end(in_block, counts)
    patch_columns = np.repeat(change_channels, counts)
    take_rows = end_to_end(in_take, counts)
    # (each change's column as correction[lo:hi + 1, c] + delta * hat, to the bit)
    values = correction[take_rows, patch_columns] \
        + np.repeat(deltas_all, counts) * hats[end_to_end(hat_ptr[change_hats], counts)]
    new = reduced[take_rows, patch_columns] + values
    # the changed channels' matrices once, for the kinematics and the speed checks. A hat is
    # zero on most of its rows (a closing knot keeps the line to the point beyond it): the
    # values it leaves keep their matrices, and only the rows a change moves get forward
    # kinematics and distances; the others keep the current ones, which are the same
    # numbers (0.6 of the rows; with their kinematics, a tenth of the corrective stage)
    changed = new != current[take_rows, patch_columns]
    turns = np.empty((len(new), 3, 3))  # (the changed values' only: no check reads others)
    turns[changed] = clip.channel_turns(new[changed], patch_columns[changed])
    moves = np.zeros(len(rows), dtype=bool)
    moves[patch_rows[changed]] = True
    live = np.flatnonzero(moves)
    place = np.cumsum(moves) - 1  # a moved row's place among the moved rows
    block = current[rows[live]]
    on_live = moves[patch_rows]
    block[place[patch_rows[on_live]], patch_columns[on_live]] = new[on_live]
    moved_live, max_live, mean_live = fk.patched_errors(
        block, rows[live], place[patch_rows[changed]], patch_columns[changed],
        np.repeat(np.concatenate(top_of), lengths)[live], turns[changed], errors, target)
    # every row's worst (as it is, or moved) and whether it is worse than the pose keys'
    # result, from the current errors of the frames the candidates span
    first, last = int(lo_all.min()), int(hi_all.max())
    near = errors[first:last + 1]
    near_max = near.max(axis=1)
    current_max = near_max[rows - first]
    moved_max = current_max.copy()
    moved_max[live] = max_live
    row_worse = ((near_max > base_max[first:last + 1] + slack)
                 | (near.mean(axis=1) > base_mean[first:last + 1] + slack))[rows - first]
    row_worse[live] = (max_live > base_max[rows[live]] + slack) \
        | (mean_live > base_mean[rows[live]] + slack)
    worse = np.logical_or.reduceat(row_worse, offsets)
    worse |= limits.changes_too_fast(reduced, current, fk.turns, owner, in_take, counts,
                                     change_channels, values, turns, changed, n_candidates)
    at_worst = offsets + worst - lo_all
    kept = np.flatnonzero(~worse & (moved_max[at_worst] < current_max[at_worst]))
    # the best gain per key (the first of equals; none that gains nothing)
    costs = np.concatenate(cost_of)
    scores = block_sums(current_max ** 2 - moved_max ** 2, offsets, lengths, kept) \
        / np.maximum(costs[kept], 0.5)
    scores = np.where(scores > 0.0, scores, 0.0)
    if not len(kept) or scores.max() <= 0.0:
        return None
    best = int(kept[np.argmax(scores)])
    lo, hi, offset = int(lo_all[best]), int(hi_all[best]), offsets[best]
    new_errors = errors[lo:hi + 1].copy()
    its = live[(live >= offset) & (live <= offset + hi - lo)]
    new_errors[its - offset] = moved_live[place[its]]
    # the winner's changes, each with the channel's knots and its own laid over them
    out = []
    first_change = int(np.cumsum(changes)[best] - changes[best])
    for j in range(first_change, first_change + int(changes[best])):
        c, h = int(change_channels[j]), int(change_hats[j])
        knots = {**channels[c].knots,
                 **{int(r): float(correction[r, c]) for r in closing[h] if r >= 0},
                 worst: float(correction[worst, c]) + float(deltas_all[j])}
        out.append((c, knots, int(hat_lo[h]), int(hat_hi[h]),
                    values[starts[j]:starts[j] + counts[j]]))
    return out, lo, hi, new_errors, int(costs[best])


def _laid_end_to_end(states: list[_Channel]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      np.ndarray, np.ndarray, np.ndarray]:
    """The channels' points (rows, values, knot marks) and written keys laid end to end, each
    with its pointers, as :func:`sp_core._fit_kernels.corrective_hats` takes them."""
    return (np.concatenate([state.point_rows for state in states]),
            np.concatenate([state.point_values for state in states]),
            np.concatenate([state.point_knots for state in states]),
            np.cumsum([0] + [len(state.rows) for state in states], dtype=np.int64),
            np.concatenate([state.written_rows for state in states]),
            np.cumsum([0] + [state.written_count for state in states], dtype=np.int64))


def _solve_each(normals: np.ndarray, gradients: np.ndarray) -> np.ndarray:
    """The joint steps' amplitudes (W, S), ``-normal⁻¹ gradient`` of every width (``normals``
    (W, S, S), ``gradients`` (W, S)), NaN where the normal matrix is singular: one LAPACK
    call for the stack (the same ``gesv`` per matrix, so the same numbers as one by one)
    unless one of them is singular."""
    try:
        return -np.linalg.solve(normals, gradients[..., None])[..., 0]
    except np.linalg.LinAlgError:
        pass
    out = np.full(gradients.shape, np.nan)
    for w, (normal, gradient) in enumerate(zip(normals, gradients, strict=True)):
        try:
            out[w] = -np.linalg.solve(normal, gradient)
        except np.linalg.LinAlgError:
            pass
    return out
