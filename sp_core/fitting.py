"""Piecewise cubic fits with fixed key times: the tangents that make in-betweens match the motion.

Key values are the original values at the keyframes, so what is fitted is each key's tangent
slopes (and, for ``weighted``, handle lengths). A segment's curve is linear in its two keys'
slopes (see :class:`_Basis`), and only neighbouring keys share a segment, so with key times
fixed every linear fit below is a block-tridiagonal least-squares problem solved exactly
(:func:`sp_core.blocks.solve_block_tridiagonal`), vectorised over channels.

Tangent modes
    ``unified``: one slope per key (smooth curves, one-third handles). ``broken``: independent
    in and out slopes. ``smooth``: broken plus ``smoothness × (in − out)²`` at each interior key.
    ``weighted``: unified slopes with free handle lengths (0 to the whole segment).

Fitting spaces
    ``channel``: least squares on each channel's values. ``world``: starting from the channel
    fit, Gauss–Newton/Levenberg–Marquardt on the world positions of all nodes through forward
    kinematics with the analytic Jacobian (:meth:`sp_core.clip.Clip.position_jacobian`); it keeps
    the mode's constraints and never returns a fit with a larger mean joint error than its start.
    Channel values and the smooth term enter the world objective as distances (degrees × the
    node's reach, :func:`channel_distance_scale`); a small weight on channel errors (``ANCHOR``)
    stops channels that barely move the body (fingers, twists) from overshooting; it weighs a
    rotation as if it moved a point at least ``ANCHOR_REACH`` of the height away (a twist
    about a short end bone moves no joint).

Fit objectives (world space)
    ``least-squares``: the sum of squared joint errors (the lowest mean). ``minimax``: then a few
    iteratively reweighted rounds in which the worst joints weigh most, kept only while they
    lower the largest error and keep the mean within 5 % (:func:`_reweighted_rounds`).

Tangents nothing constrains (the first key's in, the last key's out, segments without
in-betweens) take the slope of the dense motion at the key: a tiny ridge term pulls every slope
towards that finite-difference slope, so the systems stay positive definite without visibly
biasing slopes that the data determines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sp_core.blocks import solve_block_tridiagonal, solve_segment_pairs
from sp_core.clip import Clip
from sp_core.curves import KERNEL_SIZE, KeyedCurves, bernstein, solve_parameter
from sp_core.errors import ClipError, ReductionError
from sp_core.gimbal import fit_metric
from sp_core.options import FIT_OBJECTIVES, FIT_SPACES, KEY_VALUES, TANGENT_MODES
from sp_core.reweighting import worst_first_weights
from sp_core.threads import single_threaded_blas

__all__ = ["FIT_OBJECTIVES", "FIT_SPACES", "KEY_VALUES", "TANGENT_MODES"]  # the schema's choices
#: Alternations of key values and tangents when key values are fitted (block coordinate
#: descent: each half-step improves one given the other), and Gauss–Newton iterations per
#: half-step. Many short rounds converge faster than a few long ones: on the sample at K = 44,
#: 6 rounds of 1 iteration lower the mean as much as 4 rounds of 2 and twice 2 of 12.
VALUE_ROUNDS = 6
ROUND_ITERATIONS = 1
#: Where key-value rounds follow, the slopes' first fit stops once an iteration lowers the
#: squared error by less than this fraction (instead of ``refine_world``'s tolerance): each
#: round fits the slopes again after moving the values, and gains far more than the first
#: fit's last iterations. On the sample at the suggested K = 14, iterations 6-12 of the first
#: fit gained 0.02-0.18 % each, the rounds' half-steps 0.5-22 %. Stopping at this fraction, the
#: sample's means at K = 6-100 in every tangent mode moved by -0.30 to +0.94 % (median 0.00 %)
#: and its maxes by -1.7 to +5.4 % (both largest at K = 8, a 50 mm mean), a 5,000-frame
#: take's means by -0.04 to +0.26 % (K = 50, 120, 249); the world fits of K ≤ 30 on the sample
#: and of K = 50 and 120 on the take took a fifth to a third less time. Where the first fit
#: settles in two or three iterations (the sample from K = 40 on), the means stay within
#: 0.01 % and the maxes within 0.05 %.
SLOPES_BEFORE_ROUNDS = 3e-3
#: Default weight of the broken-tangent penalty of ``smooth``, (value/frame)^-2 per value^2.
SMOOTHNESS = 1.0
#: Relative weight of the ridge towards finite-difference slopes (see module docstring).
RIDGE = 1e-9
#: Weight of channel errors (as distances) in the world fit, next to position errors. At 0.01
#: the fit bought position error with channels the capture holds still: on the sample at
#: K = 47 the right ankle's Z rotation swung by up to 18.5 degrees where the capture stays
#: within 1.2, the chest by 9.4, and 7 channels left the capture's range by more than 5 degrees
#: (1 with the channel fit); at 0.05, 6.4 and 0.9 degrees and 2 channels, for a pose-key mean
#: of 2.19 mm instead of 2.04 (the channel fit: 2.61). 0.1 (3.8, 0.9, 1; 2.25 mm) took the
#: mean at equal key budgets to 0.50-0.51x Blender's Decimate on the stop take (issue 22's
#: bound: 0.5x); 0.05 keeps every case within it.
ANCHOR = 0.05
#: Shortest reach the anchor weighs a rotation with, as a fraction of the character's height: a
#: joint's rotation moves the flesh around it, not only the joints below it. With the bones'
#: own reach a twist about a short end bone (a toe, a thumb, a wrist) moves no joint and cost
#: little: the world fit twisted the sample's toes by 30-73 degrees on 106 frames and its right
#: wrist on 57, and a thumb by up to 179 (frames over 30 degrees 429, against 94 for the
#: channel fit; 102 with this floor, for one key more at the default tolerance).
ANCHOR_REACH = 0.2
#: Shortest weighted handle, as a fraction of its segment.
MIN_HANDLE = 0.02
#: Most reweighted rounds of the minimax objective, and Levenberg–Marquardt iterations in each.
MINIMAX_ROUNDS = 5
MINIMAX_ITERATIONS = 3
#: Exponent and first cap of the minimax rounds' joint weights (see sp_core.reweighting);
#: a rejected round divides the cap by MINIMAX_SOFTEN for the next.
MINIMAX_POWER = 1.0
MINIMAX_CAP = 100.0
MINIMAX_SOFTEN = 4.0
#: Largest rise of the mean joint error the minimax rounds accept, a fraction of the
#: least-squares fit's mean.
MINIMAX_MEAN_BOUND = 0.05
#: The norm of the joint errors a minimax round must lower (besides not raising the max).
MINIMAX_NORM = 8.0
#: Rows (frames × nodes) per batch of the rotation-measured fit near gimbal lock.
ROTATION_BATCH_ROWS = 200_000

#: One set of curves' dense channels (F, C), world positions (F, n_nodes, 3), their misses
#: (positions minus the target) and the free channels' world axes (F, Cf, 3; None for the
#: dense Jacobian): what the world fit's objective and blocks are formed from.
_Pose = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None"]


@dataclass
class Fit:
    """Fitted tangents in the solver's own form (see :func:`fit_curves` for the curves).

    Attributes
    ----------
    slopes : (K, q, C) float64
        q = 1 (unified, weighted: one slope) or 2 (broken, smooth: in, out), value per frame.
    out_length, in_length : (K - 1, C) float64
        Handle lengths in frames of each segment's out handle (of its first key) and in handle
        (of its second key): one third of the segment unless weighted.
    info : dict
        Iterations and timings of the fit.
    key_values : (K, C) float64, optional
        Fitted key values (``key_values="fitted"``); None: the captured values at the keys.
    """

    slopes: np.ndarray
    out_length: np.ndarray
    in_length: np.ndarray
    info: dict = field(default_factory=dict)
    key_values: np.ndarray | None = None

    def copy(self) -> Fit:
        return Fit(self.slopes.copy(), self.out_length.copy(), self.in_length.copy(),
                   dict(self.info),
                   None if self.key_values is None else self.key_values.copy())

    def values_at_keys(self, values: np.ndarray, key_rows: np.ndarray) -> np.ndarray:
        """The keys' values (K, C): fitted, or read from the dense ``values`` (F, C)."""
        return values[key_rows] if self.key_values is None else self.key_values

    def basis(self, values: np.ndarray, key_rows: np.ndarray) -> _Basis:
        """The dense rows of ``values`` (F, C) as linear functions of this fit's slopes."""
        return _Basis(key_rows, values, self.out_length, self.in_length,
                      self.values_at_keys(values, key_rows))

    def curves(self, values: np.ndarray, key_rows: np.ndarray, first_frame: int,
               channel_names: list[str], animated: np.ndarray, tangents: str) -> KeyedCurves:
        """The fit as host-neutral keyed curves.

        Parameters
        ----------
        values : (F, C) float64
            The dense values the fit was made on (key values are read from it unless the
            fit has its own).
        key_rows : (K,) int
        first_frame : int
            Host frame of row 0.
        channel_names : list of str
        animated : (C,) bool
        tangents : str
        """
        q = self.slopes.shape[1]
        ins, outs = self.slopes[:, 0], self.slopes[:, q - 1]
        n_keys, n_channels = len(key_rows), values.shape[1]
        out_dt = np.empty((n_keys, n_channels))
        in_dt = np.empty((n_keys, n_channels))
        out_dt[:-1] = self.out_length
        out_dt[-1] = self.in_length[-1]  # the last key's out handle mirrors its in handle
        in_dt[1:] = self.in_length
        in_dt[0] = self.out_length[0]
        out_handles = np.stack([out_dt, out_dt * outs], axis=-1)
        in_handles = np.stack([-in_dt, -in_dt * ins], axis=-1)
        return KeyedCurves(list(channel_names), np.asarray(key_rows, dtype=np.int64) + first_frame,
                           self.values_at_keys(values, key_rows).copy(), in_handles,
                           out_handles, np.asarray(animated, dtype=bool), tangents)


class _Basis:
    """Every dense row as a linear function of its segment's two slopes.

    For rows f of segment k (keys k and k + 1): value_f = base_f + w_out_f · out_k
    + w_in_f · in_{k+1}, with Bernstein weights at the curve parameter where the Bézier reaches
    that row's frame (y control points v_k, v_k + a·out_k, v_{k+1} − b·in_{k+1}, v_{k+1}).

    Parameters
    ----------
    key_rows : (K,) int
        Rows of the keys in ``values`` (ascending, first 0, last F - 1).
    values : (F, C) float64
    out_length, in_length : (K - 1, C) float64
        Handle lengths a and b in frames.
    key_values : (K, C) float64, optional
        The keys' values v; default the dense values at the keys.
    """

    def __init__(self, key_rows: np.ndarray, values: np.ndarray, out_length: np.ndarray,
                 in_length: np.ndarray, key_values: np.ndarray | None = None) -> None:
        n_rows = values.shape[0]
        rows = np.arange(n_rows)
        self.segment = np.clip(np.searchsorted(key_rows, rows, side="right") - 1, 0,
                               len(key_rows) - 2)
        start = key_rows[self.segment]
        length = (key_rows[self.segment + 1] - start).astype(np.float64)
        u = solve_parameter((rows - start)[:, None], out_length[self.segment],
                            in_length[self.segment], length[:, None])
        self.u = u
        self.length = length[:, None]
        b0, b1, b2, b3 = bernstein(u)
        at_keys = values[key_rows] if key_values is None else key_values
        # the weights of the segment's first and second key values
        self.w_first = b0 + b1
        self.w_second = b2 + b3
        self.base = self.w_first * at_keys[self.segment] \
            + self.w_second * at_keys[self.segment + 1]
        self.w_out = b1 * out_length[self.segment]
        self.w_in = -b2 * in_length[self.segment]
        # first row of every segment, for per-segment sums (every segment owns its start row)
        self.starts = key_rows[:-1]
        # per-segment sums of the products of two weight arrays, by the arrays' ids (see
        # _normal_blocks): shared with every basis made from this one
        self.sums: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    def evaluate(self, slopes: np.ndarray, q: int) -> np.ndarray:
        """Dense values (F, C) for slopes (K, q, C)."""
        outs = slopes[:, q - 1]
        ins = slopes[:, 0]
        return self.base + self.w_out * outs[self.segment] + self.w_in * ins[self.segment + 1]

    def segment_sums(self, rows: np.ndarray) -> np.ndarray:
        """Sum of per-row arrays (F, ...) over each segment's rows: (K - 1, ...)."""
        return np.add.reduceat(rows, self.starts, axis=0)

    def _sharing(self, base: np.ndarray, w_out: np.ndarray, w_in: np.ndarray) -> _Basis:
        """A basis on the same rows and curve parameters with other base and weights (the
        Bézier parameters need not be solved again)."""
        other = object.__new__(_Basis)
        other.segment, other.u, other.length = self.segment, self.u, self.length
        other.starts, other.sums = self.starts, self.sums
        other.w_first, other.w_second = self.w_first, self.w_second
        other.base, other.w_out, other.w_in = base, w_out, w_in
        return other

    def of_key_values(self, slopes: np.ndarray, q: int) -> _Basis:
        """The same curves as a linear function of the key values, ``slopes`` (K, q, C) held.

        A key value enters its two segments exactly as a one-slope key does (weight
        B0 + B1 in the segment it starts, B2 + B3 in the one it ends), so the returned basis,
        evaluated with values (K, 1, C) as its "slopes", reuses every slope solver.
        """
        return self._sharing(self.evaluate(slopes, q) - self.base, self.w_first, self.w_second)

    def with_key_values(self, key_values: np.ndarray) -> _Basis:
        """This basis for other key values (K, C): the same as building it anew with them."""
        return self._sharing(self.w_first * key_values[self.segment]
                             + self.w_second * key_values[self.segment + 1],
                             self.w_out, self.w_in)


def difference_slopes(values: np.ndarray, key_rows: np.ndarray) -> np.ndarray:
    """Slopes of the dense motion at the keys by central differences: (K, C), value per frame.

    This is the published plug-in's tangent rule, used as the ridge target and as the
    quality baseline.
    """
    if values.shape[0] < 2:
        return np.zeros((len(key_rows), values.shape[1]))
    return np.gradient(values, axis=0)[key_rows]


def check_choice(what: str, value: str, choices: Sequence[str]) -> None:
    """Refuse ``value`` unless it is one of ``choices`` (``what`` names it in the message)."""
    if value not in choices:
        raise ReductionError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def _check(values: np.ndarray, key_rows: np.ndarray, tangents: str) -> None:
    check_choice("tangent mode", tangents, TANGENT_MODES)
    if not np.all(np.isfinite(values)):
        raise ReductionError("channel values contain NaN or infinity; clean the motion first")
    if len(key_rows) < 2 or key_rows[0] != 0 or key_rows[-1] != values.shape[0] - 1 \
            or np.any(np.diff(key_rows) <= 0):
        raise ReductionError("keys must be strictly increasing rows, the first and last row "
                             "of the range included")


def _mode_width(tangents: str) -> int:
    return 2 if tangents in ("broken", "smooth") else 1


def _normal_blocks(basis: _Basis, residual: np.ndarray, q: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel normal equations of the channel-space fit: (C, K, q, q), (C, K-1, q, q),
    (C, K, q) for residual = values - base."""
    n_keys = len(basis.starts) + 1
    n_channels = residual.shape[1]
    # the weights' own sums are the same for every basis that shares the weights (a fit's
    # rounds of key values and slopes change only the residual): made once for all of them
    known = basis.sums.get((id(basis.w_out), id(basis.w_in)))  # (w_out, w_in, oo, ii, oi)
    if residual.size >= KERNEL_SIZE:
        # the same sums in one pass over the rows (numba, loaded only for arrays this large):
        # on long takes five (F, C) products and their sums were 4-6 % of a default reduce
        from sp_core._fit_kernels import segment_normal_sums

        oo, ii, oi, ro, ri = segment_normal_sums(
            *(np.ascontiguousarray(a, dtype=np.float64)
              for a in (basis.w_out, basis.w_in, residual)),
            np.ascontiguousarray(basis.starts, dtype=np.int64), known is None)
    else:
        if known is None:
            oo = basis.segment_sums(basis.w_out * basis.w_out)
            ii = basis.segment_sums(basis.w_in * basis.w_in)
            oi = basis.segment_sums(basis.w_out * basis.w_in)
        ro = basis.segment_sums(basis.w_out * residual)
        ri = basis.segment_sums(basis.w_in * residual)
    if known is None:  # (the weights kept with their sums: their ids stay theirs)
        basis.sums[id(basis.w_out), id(basis.w_in)] = (basis.w_out, basis.w_in, oo, ii, oi)
    else:
        oo, ii, oi = known[2:]
    diagonal = np.zeros((n_channels, n_keys, q, q))
    upper = np.zeros((n_channels, n_keys - 1, q, q))
    rhs = np.zeros((n_channels, n_keys, q))
    diagonal[:, :-1, q - 1, q - 1] += oo.T
    diagonal[:, 1:, 0, 0] += ii.T
    upper[:, :, q - 1, 0] += oi.T
    rhs[:, :-1, q - 1] += ro.T
    rhs[:, 1:, 0] += ri.T
    return diagonal, upper, rhs


def _add_penalties(diagonal: np.ndarray, rhs: np.ndarray, target: np.ndarray, q: int,
                   smoothness: float, scale: np.ndarray) -> None:
    """Add the smooth term (interior keys) and the ridge towards ``target`` (..., K, q).

    ``scale`` (broadcasting to (..., 1)) sets the ridge relative to the data's own weights.
    """
    if q == 2 and smoothness > 0:
        pair = smoothness * np.array([[1.0, -1.0], [-1.0, 1.0]])
        diagonal[..., 1:-1, :, :] += pair
    ridge = RIDGE * scale
    eye = np.eye(q)
    diagonal += ridge[..., None, None] * eye
    rhs += ridge[..., None] * target


def _solve_channel(basis: _Basis, values: np.ndarray, target: np.ndarray, q: int,
                   smoothness: float) -> np.ndarray:
    """Exact channel-space slopes (K, q, C) for a fixed basis."""
    diagonal, upper, rhs = _normal_blocks(basis, values - basis.base, q)
    scale = np.maximum(np.trace(diagonal, axis1=-2, axis2=-1).mean(axis=1), 1e-12)
    _add_penalties(diagonal, rhs, np.moveaxis(target, -1, 0), q, smoothness, scale[:, None])
    if q == 2 and not smoothness:
        # broken: nothing ties a key's in and out slopes, a 2 x 2 system per segment
        slopes = solve_segment_pairs(diagonal, upper, rhs)
    else:
        slopes = solve_block_tridiagonal(diagonal, upper, rhs)  # (C, K, q)
    return np.moveaxis(slopes, 0, -1)


def _rotation_metrics(values: np.ndarray, rotations: Sequence[tuple[str, np.ndarray]] | None
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(columns, (F, 3, 3) metric) of the rotations that come near gimbal lock."""
    metrics = []
    for order, columns in rotations or ():
        columns = np.asarray(columns, dtype=np.int64)
        metric = fit_metric(order, values[:, columns])
        if metric is not None:
            metrics.append((columns, metric))
    return metrics


def _solve_rotations(basis: _Basis, values: np.ndarray, target: np.ndarray, q: int,
                     smoothness: float, slopes: np.ndarray,
                     metrics: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Replace the slopes of three-channel rotations by the fit measured with their metric.

    Near gimbal lock a node's channel errors misjudge how far it turns (see
    :mod:`sp_core.gimbal`), so its three channels are fitted together, minimising
    sum over rows of rᵀ W r (r the node's three channel errors, W the row's metric). The normal
    equations stay block tridiagonal with 3 q unknowns per key (index j * 3 + c for slope j of
    channel c); the ridge is the per-channel one, the smooth term's kink is measured with the
    metric at its key.

    Parameters
    ----------
    basis : _Basis
    values : (F, C) float64
    target : (K, q, C) float64
        Ridge targets.
    q : int
    smoothness : float
    slopes : (K, q, C) float64
        The per-channel solution (modified in place and returned).
    metrics : sequence of ((3,) int columns, (F, 3, 3) metric)
    """
    # a few nodes at a time bound the (nodes, F, 3, 3) temporaries on long takes
    batch = max(1, int(ROTATION_BATCH_ROWS // max(values.shape[0], 1)))
    for first in range(0, len(metrics), batch):
        _solve_rotation_batch(basis, values, target, q, smoothness, slopes,
                              metrics[first:first + batch])
    return slopes


def _solve_rotation_batch(basis: _Basis, values: np.ndarray, target: np.ndarray, q: int,
                          smoothness: float, slopes: np.ndarray,
                          metrics: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
    """:func:`_solve_rotations` for some of the nodes, into ``slopes``."""
    n_keys = len(basis.starts) + 1
    columns = np.stack([cols for cols, _ in metrics])  # (T, 3)
    weight = np.stack([w for _, w in metrics])  # (T, F, 3, 3)
    residual = np.moveaxis((values - basis.base)[:, columns], 1, 0)  # (T, F, 3)
    w_out = np.moveaxis(basis.w_out[:, columns], 1, 0)
    w_in = np.moveaxis(basis.w_in[:, columns], 1, 0)

    def sums(a: np.ndarray) -> np.ndarray:  # (T, F, ...) -> (T, K - 1, ...)
        return np.add.reduceat(a, basis.starts, axis=1)

    oo = sums(w_out[..., :, None] * weight * w_out[..., None, :])
    ii = sums(w_in[..., :, None] * weight * w_in[..., None, :])
    oi = sums(w_out[..., :, None] * weight * w_in[..., None, :])
    pulled = np.einsum("tfcd,tfd->tfc", weight, residual)
    ro = sums(w_out * pulled)
    ri = sums(w_in * pulled)
    n = len(columns)
    size = 3 * q
    out, inn = slice(3 * (q - 1), 3 * q), slice(0, 3)
    diagonal = np.zeros((n, n_keys, size, size))
    upper = np.zeros((n, n_keys - 1, size, size))
    rhs = np.zeros((n, n_keys, size))
    diagonal[:, :-1, out, out] += oo
    diagonal[:, 1:, inn, inn] += ii
    upper[:, :, out, inn] += oi
    rhs[:, :-1, out] += ro
    rhs[:, 1:, inn] += ri
    idx = np.arange(3)
    if q == 2 and smoothness > 0:
        # the kink (in - out) measured like the errors it trades against: with the metric at
        # the key, so turning both swinging angles at a key near the lock is no kink at all
        bend = smoothness * weight[:, basis.starts[1:]]  # (T, K - 2, 3, 3)
        inner = diagonal[:, 1:-1]
        inner[..., :3, :3] += bend
        inner[..., 3:, 3:] += bend
        inner[..., :3, 3:] -= bend
        inner[..., 3:, :3] -= bend
    # the ridge as in _add_penalties: relative to each channel's own weights
    own = np.stack([diagonal[..., j * 3 + idx, j * 3 + idx] for j in range(q)], axis=-1)
    scale = np.maximum(own.sum(axis=-1).mean(axis=1), 1e-12)  # (T, 3)
    ridge = RIDGE * np.tile(scale, q)  # (T, 3 q), index j * 3 + c
    diagonal[..., np.arange(size), np.arange(size)] += ridge[:, None, :]
    aims = np.moveaxis(target[:, :, columns], 2, 0).reshape(n, n_keys, size)
    rhs += ridge[:, None, :] * aims
    solved = solve_block_tridiagonal(diagonal, upper, rhs).reshape(n, n_keys, q, 3)
    slopes[:, :, columns] = np.moveaxis(solved, 0, 2)


def _target(values: np.ndarray, key_rows: np.ndarray, q: int) -> np.ndarray:
    return np.repeat(difference_slopes(values, key_rows)[:, None, :], q, axis=1)


def _third_lengths(key_rows: np.ndarray, n_channels: int) -> tuple[np.ndarray, np.ndarray]:
    third = np.repeat((np.diff(key_rows) / 3.0)[:, None], n_channels, axis=1)
    return third, third.copy()


def fit_channels(values: np.ndarray, key_rows: np.ndarray, tangents: str = "unified",
                 smoothness: float = SMOOTHNESS, rounds: int = 8,
                 key_values: str = "captured",
                 rotations: Sequence[tuple[str, np.ndarray]] | None = None) -> Fit:
    """Channel-space fit: every channel's own least squares.

    With ``rotations``, the three channels of a node that comes near gimbal lock are fitted
    together, their errors measured as the angle the node turns by near the lock
    (:mod:`sp_core.gimbal`); far from it nothing changes.

    Parameters
    ----------
    values : (F, C) float64
        Dense channel values over the range (rotations unwrapped), channel units.
    key_rows : (K,) int
        Rows of the keys, first 0 and last F - 1.
    tangents : {"unified", "broken", "smooth", "weighted"}
    smoothness : float
        Weight of the broken-tangent penalty of ``smooth``.
    rounds : int
        ``weighted`` only: rounds of alternating slope and handle-length updates.
    key_values : {"captured", "fitted"}
        Keys hold the values at their rows, or values fitted with the slopes.
    rotations : sequence of (str, (3,) int), optional
        Nodes with three rotation channels: intrinsic order and columns in that order
        (:func:`sp_core.gimbal.rotation_triplets`). Default: every channel alone.

    Returns
    -------
    Fit
    """
    key_rows = np.asarray(key_rows, dtype=np.int64)
    _check(values, key_rows, tangents)
    check_choice("key values", key_values, KEY_VALUES)
    t0 = time.perf_counter()
    q = _mode_width(tangents)
    target = _target(values, key_rows, q)
    out_length, in_length = _third_lengths(key_rows, values.shape[1])
    basis = _Basis(key_rows, values, out_length, in_length)
    lam = smoothness if tangents == "smooth" else 0
    metrics = _rotation_metrics(values, rotations)
    slopes = _solve_channel(basis, values, target, q, lam)
    slopes = _solve_rotations(basis, values, target, q, lam, slopes, metrics)
    fit = Fit(slopes, out_length, in_length)
    if tangents == "weighted":
        fit = _fit_lengths(values, key_rows, fit, target, rounds, metrics)
    if key_values == "fitted":
        # (weighted tangents' handle lengths moved: their basis is made anew)
        fit = _fit_values_channel(values, key_rows, fit, target, q, lam, metrics,
                                  None if tangents == "weighted" else basis)
    _tidy_ends(fit, q)
    fit.info["channel_s"] = time.perf_counter() - t0
    return fit


def _fit_values_channel(values: np.ndarray, key_rows: np.ndarray, fit: Fit, target: np.ndarray,
                        q: int, smoothness: float,
                        metrics: Sequence[tuple[np.ndarray, np.ndarray]] = (),
                        basis: _Basis | None = None) -> Fit:
    """Alternate exact key values (slopes held) and exact slopes (values held), per channel
    (rotations near gimbal lock, ``metrics``: per node, measured on the rotation, see
    :func:`_solve_rotations`).

    Each half-step is the least-squares optimum given the other, so the squared error never
    rises; the ridge pulls key values towards the captured ones only where nothing else
    decides them. ``basis``, optional, is ``fit.basis(values, key_rows)`` if the caller has it
    (a tenth of a channel fit to make again).
    """
    captured = values[key_rows][:, None, :]
    slopes, at_keys = fit.slopes, fit.values_at_keys(values, key_rows)
    if basis is None:
        basis = fit.basis(values, key_rows)
    for _ in range(VALUE_ROUNDS):
        of_values = basis.of_key_values(slopes, q)
        solved = _solve_channel(of_values, values, captured, 1, 0.0)
        at_keys = _solve_rotations(of_values, values, captured, 1, 0.0, solved,
                                   metrics)[:, 0, :]
        basis = basis.with_key_values(at_keys)
        slopes = _solve_rotations(basis, values, target, q, smoothness,
                                  _solve_channel(basis, values, target, q, smoothness), metrics)
    return Fit(slopes, fit.out_length, fit.in_length, fit.info, at_keys)


def _tidy_ends(fit: Fit, q: int) -> None:
    """The first key's in slope and the last key's out slope shape nothing: mirror the other."""
    if q == 2:
        fit.slopes[0, 0] = fit.slopes[0, 1]
        fit.slopes[-1, 1] = fit.slopes[-1, 0]


def _segment_errors(basis: _Basis, values: np.ndarray, slopes: np.ndarray, q: int) -> np.ndarray:
    """Sum of squared channel errors per segment and channel: (K - 1, C)."""
    miss = basis.evaluate(slopes, q) - values
    return basis.segment_sums(miss * miss)


def _fit_lengths(values: np.ndarray, key_rows: np.ndarray, fit: Fit, target: np.ndarray,
                 rounds: int, metrics: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> Fit:
    """``weighted``: alternate exact slopes (lengths fixed) and damped Gauss–Newton steps on
    each segment's two handle lengths (slopes fixed; segments and channels are independent).

    Every accepted change lowers the channel's squared error, so the result is never worse than
    the one-third-handle (unified) start. Rotations near gimbal lock (``metrics``, see
    :func:`_solve_rotations`) are the exception: their slopes are always the exact fit in their
    metric for the current lengths, which their channel errors cannot judge; their lengths
    still move only when their channel errors drop.
    """
    lengths = np.diff(key_rows).astype(np.float64)[:, None]
    low = MIN_HANDLE * lengths
    damping = np.full(fit.out_length.shape, 1e-3)
    basis = _Basis(key_rows, values, fit.out_length, fit.in_length)
    errors = _segment_errors(basis, values, fit.slopes, 1)
    for _ in range(rounds):
        # lengths: Gauss–Newton on (a, b) per segment and channel; dy/da = B1 (out − y'),
        # dy/db = −B2 (in − y'), y' the curve's slope in value per frame at that row
        outs = fit.slopes[:-1, 0][basis.segment]
        ins = fit.slopes[1:, 0][basis.segment]
        miss = basis.evaluate(fit.slopes, 1) - values
        slope = _curve_slope(basis, key_rows, fit, values)
        _, b1, b2, _ = bernstein(basis.u)
        ja = b1 * (outs - slope)
        jb = -b2 * (ins - slope)
        haa = basis.segment_sums(ja * ja)
        hbb = basis.segment_sums(jb * jb)
        hab = basis.segment_sums(ja * jb)
        ga = basis.segment_sums(ja * miss)
        gb = basis.segment_sums(jb * miss)
        for _attempt in range(4):
            daa = haa * (1 + damping) + 1e-12
            dbb = hbb * (1 + damping) + 1e-12
            det = daa * dbb - hab * hab
            step_a = -(dbb * ga - hab * gb) / det
            step_b = -(daa * gb - hab * ga) / det
            trial = Fit(fit.slopes, np.clip(fit.out_length + step_a, low, lengths),
                        np.clip(fit.in_length + step_b, low, lengths))
            trial_basis = _Basis(key_rows, values, trial.out_length, trial.in_length)
            trial_errors = _segment_errors(trial_basis, values, fit.slopes, 1)
            better = trial_errors < errors
            fit.out_length = np.where(better, trial.out_length, fit.out_length)
            fit.in_length = np.where(better, trial.in_length, fit.in_length)
            errors = np.where(better, trial_errors, errors)
            damping = np.where(better, damping * 0.3, damping * 10)
            if better.mean() > 0.5:
                break
        # slopes: exact for the new lengths; keep them per channel only if better
        basis = _Basis(key_rows, values, fit.out_length, fit.in_length)
        slopes = _solve_channel(basis, values, target, 1, 0.0)
        slopes = _solve_rotations(basis, values, target, 1, 0.0, slopes, metrics)
        new_errors = _segment_errors(basis, values, slopes, 1)
        better = new_errors.sum(axis=0) <= errors.sum(axis=0)
        for columns, _ in metrics:
            # Exact in their metric for these lengths, which channel errors cannot judge. Judging
            # the lengths with the metric too was measured (benchmarks/bench_reduction.py): means
            # 1-5 % lower on 3 of its 4 cases, but the thumb's max error at 110 keys on the
            # 1,100-frame clip 36 mm instead of 19 mm; the lengths stay judged per channel.
            better[columns] = True
        fit.slopes = np.where(better[None, None, :], slopes, fit.slopes)
        errors = np.where(better[None, :], new_errors, errors)
    fit.info["weighted_rounds"] = rounds
    return fit


def _curve_slope(basis: _Basis, key_rows: np.ndarray, fit: Fit,
                 values: np.ndarray) -> np.ndarray:
    """dvalue/dframe of the current (unified-slope) curves at every row: (F, C)."""
    seg = basis.segment
    u = basis.u
    v = 1.0 - u
    length = basis.length
    a = fit.out_length[seg]
    b = fit.in_length[seg]
    v0 = values[key_rows[seg]]
    v1 = values[key_rows[seg + 1]]
    y1 = v0 + a * fit.slopes[:-1, 0][seg]
    y2 = v1 - b * fit.slopes[1:, 0][seg]
    dx = 3.0 * (a * v * v + 2.0 * (length - a - b) * u * v + b * u * u)
    dy = 3.0 * ((y1 - v0) * v * v + 2.0 * (y2 - y1) * u * v + (v1 - y2) * u * u)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(dx > 1e-12, dy / dx, 0.0)


# ----------------------------------------------------------------------------- world space
def joint_errors(clip: Clip, channels: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Distances (F, n_nodes) between the nodes posed by ``channels`` and ``reference``."""
    return np.linalg.norm(clip.forward_kinematics(channels) - reference, axis=-1)


def refine_world(clip: Clip, key_rows: np.ndarray, fit: Fit, tangents: str,
                 smoothness: float = SMOOTHNESS, iterations: int = 12,
                 tolerance: float = 1e-4, free: np.ndarray | None = None,
                 anchor: float = ANCHOR, jacobian: str = "tree",
                 progress: Callable[[float, str], None] | None = None,
                 key_values: str = "captured",
                 objective: str = "least-squares", held: np.ndarray | None = None) -> Fit:
    """Refine a channel-space fit to minimise the world position error of every node.

    Parameters
    ----------
    clip : Clip
        The range being reduced (channels unwrapped); its FK is the target.
    key_rows : (K,) int
    fit : Fit
        The channel-space start (not modified).
    tangents : str
        The mode's constraints are kept: unified stays unified, weighted keeps its lengths.
    smoothness : float
    iterations : int
        Most Levenberg–Marquardt iterations.
    tolerance : float
        Stop when an accepted step lowers the squared error by less than this fraction (the
        slopes' first fit before key-value rounds: at least :data:`SLOPES_BEFORE_ROUNDS`).
    free : (C,) bool, optional
        Channels whose slopes may change (default all); constant channels stay flat.
    held : (C,) bool, optional
        Channels the host keeps as captured (not free): the fit's poses take their captured
        values on every frame, as the scene will show them, not their fitted curves.
    anchor : float
        Weight of the channel-value error (as distance, see :func:`channel_distance_scale`)
        next to the world position error.
    jacobian : {"tree", "dense"}
        How the Gauss–Newton blocks are formed: from the skeleton's tree structure
        (:mod:`sp_core.tree_jacobian`, the default) or from the dense position Jacobian (the
        slow reference the tests compare against). Both give the same blocks to rounding.
    progress : callable, optional
        ``progress(fraction, message)`` before every iteration (fraction of the whole fit);
        it may raise (a cancellation), which abandons the fit.
    key_values : {"captured", "fitted"}
        ``fitted``: after the slopes, alternate world fits of the key values (slopes held)
        and of the slopes (values held), :data:`VALUE_ROUNDS` times :data:`ROUND_ITERATIONS`
        iterations. Otherwise the key values stay those of ``fit``.
    objective : {"least-squares", "minimax"}
        ``minimax``: after the least-squares iterations (and key-value rounds), up to
        :data:`MINIMAX_ROUNDS` rounds reweighted towards the worst joints
        (:func:`_reweighted_rounds`).

    Returns
    -------
    Fit
        Never has a larger mean joint error than ``fit`` (least-squares); with ``minimax``,
        never a larger max joint error than the least-squares result nor a mean more than
        :data:`MINIMAX_MEAN_BOUND` above it (``info["minimax_rounds"]``: rounds kept).
    """
    t0 = time.perf_counter()
    check_choice("key values", key_values, KEY_VALUES)
    values = clip.channels
    key_rows = np.asarray(key_rows, dtype=np.int64)
    q = _mode_width(tangents)
    lam = smoothness if tangents == "smooth" else 0.0
    start_basis = basis = fit.basis(values, key_rows)
    reference = clip.positions
    columns = np.flatnonzero(np.ones(values.shape[1], bool) if free is None else free)
    n_keys = len(key_rows)
    # ridge target per key, laid out like the flattened unknowns: in slopes, then out slopes
    target = _target(values, key_rows, q)[:, :, columns].reshape(n_keys, -1)
    # The anchor: channel errors converted to distances (degrees x reach, at least
    # ANCHOR_REACH of the height) and weighted by `anchor`. Without it, channels that barely
    # move any node (fingers, twist) are free to overshoot wildly, which no animator wants to
    # edit.
    distance = channel_distance_scale(clip)[columns] ** 2
    weight = anchor * channel_distance_scale(clip, ANCHOR_REACH)[columns] ** 2
    # the smooth term is measured like the errors it trades against: slopes as distances
    bend = lam * distance

    def channel_blocks(basis: _Basis, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The free channels' channel-space normal blocks for ``basis`` (the anchor term)."""
        diagonal, upper, rhs = _normal_blocks(basis, values - basis.base, q)
        return diagonal[columns], upper[columns], rhs[columns]

    c_diag, c_upper, c_rhs = channel_blocks(basis, q)
    if jacobian == "tree":
        from sp_core.tree_jacobian import (
            TreeLayout,
            pose,
            solve_key_blocks,
            solve_segment_blocks,
            world_normal_blocks,
        )

        layout = TreeLayout.of(clip, columns)
        # every iteration's blocks overwrite the previous ones of their width (an iteration
        # is done with its blocks before the next forms them)
        buffers: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

        def kinematics(channels: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
            return pose(clip, layout, channels)

        def blocks(basis: _Basis, q: int, channels: np.ndarray, positions: np.ndarray,
                   miss: np.ndarray, axes: np.ndarray | None,
                   node_weight: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            assert axes is not None
            buffers[q] = world_normal_blocks(layout, basis.starts, basis.w_out, basis.w_in,
                                             positions, miss, axes, q, node_weight,
                                             buffers.get(q))
            return buffers[q]

        def solve(diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray,
                  shift: np.ndarray, q: int) -> np.ndarray:
            # only the (out, in) quadrant of an off-diagonal block is ever nonzero
            n = len(columns)
            coupling = upper[:, (q - 1) * n:, :n]
            if q == 2 and not lam:
                # broken: no term ties a key's in and out slopes, the segments are apart
                return solve_segment_blocks(diagonal, coupling, rhs, shift)
            return solve_key_blocks(diagonal, coupling, rhs, q, shift)
    elif jacobian == "dense":
        def kinematics(channels: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
            return clip.forward_kinematics(channels), None

        def blocks(basis: _Basis, q: int, channels: np.ndarray, positions: np.ndarray,
                   miss: np.ndarray, axes: np.ndarray | None,
                   node_weight: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return _world_normal_blocks(clip, basis, channels, miss, q, columns, node_weight)

        def solve(diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray,
                  shift: np.ndarray, q: int) -> np.ndarray:
            damped = diagonal.copy()
            np.einsum("kii->ki", damped)[...] += shift
            return solve_block_tridiagonal(damped, upper, rhs)
    else:
        raise ReductionError(f"unknown jacobian {jacobian!r}; choose tree or dense")
    if held is not None and held.any():
        kinematics = _holding(kinematics, held, values[:, held])
    check_choice("fit objective", objective, FIT_OBJECTIVES)
    minimax = objective == "minimax"
    rounds = VALUE_ROUNDS if key_values == "fitted" else 0
    # progress in iterations: the slopes' first fit, the key-value rounds' half-steps, then
    # the minimax rounds
    after_values = iterations + 2 * rounds * ROUND_ITERATIONS
    budget = after_values + (MINIMAX_ROUNDS * MINIMAX_ITERATIONS if minimax else 0)
    report = progress or (lambda fraction, message: None)

    def stage(first: float, length: float, what: str = "") -> Callable[[float, str], None]:
        return lambda f, m: report((first + f * length) / budget, what or m)

    def pose_of(slopes: np.ndarray) -> _Pose:
        # the current basis: the key-value rounds replace it
        channels = basis.evaluate(slopes, q)
        positions, axes = kinematics(channels)
        return channels, positions, positions - reference, axes

    def errors_of(slopes: np.ndarray) -> np.ndarray:
        return np.linalg.norm(pose_of(slopes)[2], axis=-1)

    # the block solves are small (q C unknowns per key): BLAS threads only spin against each
    # other and against the tree kernel's threads (see sp_core.threads)
    with single_threaded_blas():
        start_pose = pose_of(fit.slopes)
        # each half-step starts from the curves the one before ended with: their pose is
        # passed on instead of computed again
        result, done, posed = _world_iterations(
            clip, basis, fit, q, lam, columns, target, weight, bend,
            (c_diag, c_upper, c_rhs), kinematics, blocks, solve, iterations,
            max(tolerance, SLOPES_BEFORE_ROUNDS) if rounds else tolerance,
            stage(0, iterations), pose=start_pose)
        at_keys = fit.values_at_keys(values, key_rows)
        captured = values[key_rows][:, columns]
        for r in range(rounds):
            # key values, slopes held: the same solver with the values as one-slope keys
            of_values = basis.of_key_values(result.slopes, q)
            v_fit, v_done, posed = _world_iterations(
                clip, of_values, Fit(at_keys[:, None, :].copy(), fit.out_length,
                                     fit.in_length), 1, 0.0, columns, captured, weight,
                np.zeros_like(bend), channel_blocks(of_values, 1), kinematics, blocks,
                solve, ROUND_ITERATIONS, tolerance,
                stage(iterations + 2 * r * ROUND_ITERATIONS, ROUND_ITERATIONS,
                      f"world fit of the key values, round {r + 1} of {rounds}"), pose=posed)
            at_keys = v_fit.slopes[:, 0, :]
            basis = basis.with_key_values(at_keys)
            c_diag, c_upper, c_rhs = channel_blocks(basis, q)
            result, s_done, posed = _world_iterations(
                clip, basis, result, q, lam, columns, target, weight, bend,
                (c_diag, c_upper, c_rhs), kinematics, blocks, solve, ROUND_ITERATIONS,
                tolerance, stage(iterations + (2 * r + 1) * ROUND_ITERATIONS, ROUND_ITERATIONS,
                                 f"world fit of the tangents, round {r + 1} of {rounds}"),
                pose=posed)
            done += v_done + s_done
        if rounds:
            result.key_values = at_keys
        _tidy_ends(result, q)  # (slopes that shape nothing: the pose stays the fit's)
        errors = np.linalg.norm(posed[2], axis=-1)
        start_errors = np.linalg.norm(start_pose[2], axis=-1)
        if errors.mean() > start_errors.mean():
            result, basis = fit.copy(), start_basis
            c_diag, c_upper, c_rhs = channel_blocks(basis, q)
            errors = start_errors
        if minimax:
            result, errors, kept = _reweighted_rounds(
                lambda start, joint_weight, r: _world_iterations(
                    clip, basis, start, q, lam, columns, target, weight, bend,
                    (c_diag, c_upper, c_rhs), kinematics, blocks, solve, MINIMAX_ITERATIONS,
                    tolerance,
                    stage(after_values + r * MINIMAX_ITERATIONS, MINIMAX_ITERATIONS),
                    joint_weight, f"minimax round {r + 1} of at most {MINIMAX_ROUNDS}")[0],
                errors_of, result, errors, q)
            result.info["minimax_rounds"] = kept
    result.info["world_iterations"] = done
    result.info["world_s"] = time.perf_counter() - t0
    return result


def _reweighted_rounds(refit: Callable[[Fit, np.ndarray, int], Fit],
                       errors_of: Callable[[np.ndarray], np.ndarray], fit: Fit,
                       errors: np.ndarray, q: int) -> tuple[Fit, np.ndarray, int]:
    """Iteratively reweighted rounds after the least-squares fit: (fit, errors, rounds kept).

    Each round weighs every joint on every frame by its current error
    (:func:`sp_core.reweighting.worst_first_weights`: ``1 + min(e / ē, cap)``, normalised to a
    mean of 1) and refits the weighted squared errors from the current fit
    (``refit(start, weights, round)``). The fixed point of such rounds minimises a norm of the
    errors above 2 (Σ e² + Σ e³ / ē for power 1), which leans towards the worst joints.

    A round is kept only when the largest joint error does not grow, the
    :data:`MINIMAX_NORM`-norm of the joint errors falls, and the mean joint error stays within
    :data:`MINIMAX_MEAN_BOUND` of the least-squares fit's; the refit is also tried half-way
    (slopes halfway between the two fits). A rejected round softens the weights (a lower cap)
    for the next; the rounds stop when the cap falls below 1.

    Parameters
    ----------
    refit : callable
    errors_of : callable
        ``errors_of(slopes)``: joint errors (F, n_nodes), scene units.
    fit : Fit
        The least-squares fit.
    errors : (F, n_nodes) float64
        Its joint errors.
    q : int
    """
    if not errors.size or errors.max() <= 0.0:
        return fit, errors, 0  # nothing to lean towards
    ceiling = (1.0 + MINIMAX_MEAN_BOUND) * float(errors.mean())

    def norm(e: np.ndarray) -> float:
        scale = max(float(e.max()), 1e-300)  # (e / scale)^8 stays finite
        return scale * float(np.mean((e / scale) ** MINIMAX_NORM)) ** (1.0 / MINIMAX_NORM)

    kept = 0
    cap = MINIMAX_CAP
    for r in range(MINIMAX_ROUNDS):
        weights = worst_first_weights(errors, MINIMAX_POWER, cap)
        trial = refit(fit, weights / weights.mean(), r)
        _tidy_ends(trial, q)
        accepted = False
        for part in (1.0, 0.5):
            slopes = trial.slopes if part == 1.0 else \
                fit.slopes + part * (trial.slopes - fit.slopes)
            new = errors_of(slopes)
            if new.max() <= errors.max() and norm(new) < norm(errors) \
                    and new.mean() <= ceiling:
                fit = Fit(slopes, fit.out_length, fit.in_length, dict(fit.info), fit.key_values)
                errors, accepted = new, True
                break
        if accepted:
            kept += 1
        else:
            cap /= MINIMAX_SOFTEN
            if cap < 1.0:
                break
    return fit, errors, kept


def _holding(kinematics: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]],
             held: np.ndarray, captured: np.ndarray
             ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]]:
    """``kinematics`` of channel values whose ``held`` columns (C,) bool are ``captured``
    (F, H) on every frame (the channels are the fit's own array: it is changed in place)."""
    def holding(channels: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        channels[:, held] = captured
        return kinematics(channels)
    return holding


def _world_iterations(clip: Clip, basis: _Basis, fit: Fit, q: int, lam: float,
                      columns: np.ndarray, target: np.ndarray, weight: np.ndarray,
                      bend: np.ndarray, channel_blocks: tuple[np.ndarray, np.ndarray, np.ndarray],
                      kinematics: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]],
                      blocks: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]],
                      solve: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int],
                                      np.ndarray],
                      iterations: int, tolerance: float,
                      progress: Callable[[float, str], None] | None = None,
                      node_weight: np.ndarray | None = None, label: str = "world fit",
                      pose: _Pose | None = None) -> tuple[Fit, int, _Pose]:
    """The Levenberg–Marquardt loop of :func:`refine_world`: (refined fit, iterations run,
    its pose).

    ``kinematics(channels)`` gives positions and what ``blocks`` needs besides them (the
    channels' world axes for the tree blocks); ``blocks(basis, q, channels, positions, miss,
    axes, node_weight)`` the Gauss–Newton normal equations; ``solve(diagonal, upper, rhs,
    shift, q)`` their solution with ``shift`` (K, q C) added to the diagonal (the damping).
    The unknowns are ``fit.slopes`` (K, q, C) as ``basis`` sees them: slopes, or key values
    (q = 1) through :meth:`_Basis.of_key_values`. ``node_weight`` (F, n_nodes), optional,
    weighs every node's squared position error on every frame (the channel anchor, ridge and
    smooth terms are not weighted); ``label`` starts the progress messages. ``pose``, optional,
    is ``fit``'s pose if the caller has it (the previous half-step's result: the same curves),
    which saves the forward kinematics of the start.
    """
    values = clip.channels
    reference = clip.positions
    n_keys, n_channels = len(basis.starts) + 1, len(columns)
    c_diag, c_upper, c_rhs = channel_blocks

    def objective(slopes: np.ndarray, known: _Pose | None = None) -> tuple[float, tuple]:
        if known is None:
            channels = basis.evaluate(slopes, q)
            positions, axes = kinematics(channels)
            miss = positions - reference
        else:
            channels, positions, miss, axes = known
        squared = miss * miss
        total = float(np.sum(squared if node_weight is None
                             else node_weight * np.sum(squared, axis=-1)))
        drift = (channels - values)[:, columns]
        total += float(np.sum(weight * np.sum(drift * drift, axis=0)))
        if lam:
            bent = slopes[1:-1, 0, columns] - slopes[1:-1, 1, columns]
            total += float(np.sum(bend * bent * bent))
        return total, (channels, positions, miss, axes, node_weight)

    slopes = fit.slopes.copy()
    current, state = objective(slopes, pose)
    history = [current]
    damping = 1e-3
    done = 0
    report = progress or (lambda fraction, message: None)
    for iteration in range(1, iterations + 1):
        here = ((iteration - 1) / iterations,
                f"{label}, iteration {iteration} of at most {iterations}")
        report(*here)
        done = iteration
        diagonal, upper, rhs = blocks(basis, q, *state)
        # penalties act on each key's flattened block: in slopes, then out slopes
        flat = slopes[:, :, columns].reshape(n_keys, q * n_channels)
        scale = max(float(np.trace(diagonal, axis1=-2, axis2=-1).mean()) / (q * n_channels),
                    1e-12)
        if lam:
            # bend x (in - out)^2 per channel: only the diagonals of a key's four quadrants
            idx = np.arange(n_channels)
            inner = diagonal[1:-1]
            inner[:, idx, idx] += bend
            inner[:, n_channels + idx, n_channels + idx] += bend
            inner[:, idx, n_channels + idx] -= bend
            inner[:, n_channels + idx, idx] -= bend
            bent = flat[1:-1, :n_channels] - flat[1:-1, n_channels:]
            rhs[1:-1, :n_channels] -= bend * bent
            rhs[1:-1, n_channels:] += bend * bent
        ridge = RIDGE * scale
        np.einsum("kii->ki", diagonal)[...] += ridge
        rhs -= ridge * (flat - target)
        _add_channel_term(diagonal, upper, rhs, c_diag, c_upper, c_rhs, weight,
                          slopes[:, :, columns])
        accepted = False
        # Marquardt's scaling: damping times the diagonal, which the solver adds to its copy
        leading = np.einsum("kii->ki", diagonal).copy()
        for attempt in range(6):
            if attempt:  # a rejected step: check in again
                report(*here)
            step = solve(diagonal, upper, rhs, damping * leading, q)
            trial = slopes.copy()
            trial[:, :, columns] += step.reshape(n_keys, q, n_channels)
            value, trial_state = objective(trial)
            if value < current:
                gain = (current - value) / max(current, 1e-300)
                slopes, current, state = trial, value, trial_state
                history.append(current)
                damping = max(damping * 0.3, 1e-9)
                accepted = True
                break
            damping *= 10.0
        if not accepted or gain < tolerance:
            break
    info = dict(fit.info, world_objective=history)
    return Fit(slopes, fit.out_length, fit.in_length, info, fit.key_values), done, state[:4]


def channel_distance_scale(clip: Clip, floor: float = 0.0) -> np.ndarray:
    """(C,) scene units per channel unit: the node's rest reach per degree for rotations
    (the arc its subtree sweeps; at least ``floor`` × the character's height, when it has
    one), 1 for translations."""
    from sp_core.poses import node_reach

    reach = node_reach(clip)[clip.channel_nodes]
    if floor > 0:
        try:
            reach = np.maximum(reach, floor * clip.height())
        except ClipError:  # (one joint: no body to measure)
            pass
    return np.where(clip.is_rotation_channel(), reach * np.pi / 180.0, 1.0)


def _add_channel_term(diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray,
                      c_diag: np.ndarray, c_upper: np.ndarray, c_rhs: np.ndarray,
                      weight: np.ndarray, slopes: np.ndarray) -> None:
    """Add weight_c x (channel c's squared error) to the world normal equations.

    ``c_*`` are the per-channel blocks (C, K, q, q), (C, K-1, q, q), (C, K, q) of the channel
    fit; ``slopes`` (K, q, C) the current slopes (the term is quadratic, so its Gauss–Newton
    step is exact). World blocks index a key's unknowns as j * C + c.
    """
    n_channels = len(weight)
    q = c_diag.shape[-1]
    idx = np.arange(n_channels)
    theta = np.moveaxis(slopes, -1, 0)  # (C, K, q)
    product = (c_diag @ theta[..., None])[..., 0]
    product[:, :-1] += (c_upper @ theta[:, 1:, :, None])[..., 0]
    product[:, 1:] += (np.swapaxes(c_upper, -1, -2) @ theta[:, :-1, :, None])[..., 0]
    gradient = weight[:, None, None] * (product - c_rhs)  # (C, K, q)
    for j1 in range(q):
        rhs[:, j1 * n_channels + idx] -= gradient[:, :, j1].T
        for j2 in range(q):
            diagonal[:, j1 * n_channels + idx, j2 * n_channels + idx] += \
                (weight[:, None] * c_diag[:, :, j1, j2]).T
            upper[:, j1 * n_channels + idx, j2 * n_channels + idx] += \
                (weight[:, None] * c_upper[:, :, j1, j2]).T


def _world_normal_blocks(clip: Clip, basis: _Basis, channels: np.ndarray, miss: np.ndarray,
                         q: int, columns: np.ndarray, node_weight: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss–Newton normal equations for the slopes in world space.

    Per row f the position Jacobian J_f (3 n_nodes × C) gives G_f = J_fᵀ J_f and g_f = J_fᵀ r_f;
    a slope of channel c moves only channel c's values, scaled by the basis weights, so the key
    blocks are segment sums of w_c G_f[c, c'] w_c' (blocks of size q C, key order in, out).
    ``node_weight`` (F, n_nodes), optional, weighs every node's squared error on every row
    (J_f's three rows of node n and r_f's are scaled by its square root).
    """
    n_rows = channels.shape[0]
    n_channels = len(columns)
    n_keys = len(basis.starts) + 1
    size = q * n_channels
    # Products run over all channels (indexing the big Jacobian would copy it); fixed channels
    # get zero weight and their rows and columns are dropped from the small results.
    fixed = np.ones(channels.shape[1], dtype=bool)
    fixed[columns] = False
    w_out = np.where(fixed, 0.0, basis.w_out)
    w_in = np.where(fixed, 0.0, basis.w_in)
    root = None if node_weight is None else np.repeat(np.sqrt(node_weight), 3, axis=1)
    if root is not None:
        miss = miss * np.sqrt(node_weight)[:, :, None]
    pick = np.ix_(columns, columns)
    diagonal = np.zeros((n_keys, size, size))
    upper = np.zeros((n_keys - 1, size, size))
    rhs = np.zeros((n_keys, size))
    o = slice((q - 1) * n_channels, q * n_channels)
    i = slice(0, n_channels)
    # whole segments at a time, about 2e7 Jacobian entries per batch
    per_row = clip.n_nodes * 3 * n_channels
    first = 0
    while first < n_keys - 1:
        last = first + 1
        while last < n_keys - 1 and (basis.starts[last] + 1 - basis.starts[first]) * per_row < 2e7:
            last += 1
        lo = basis.starts[first]
        hi = basis.starts[last] if last < n_keys - 1 else n_rows
        _, jac = clip.position_jacobian(channels[lo:hi])
        jac = jac.reshape(hi - lo, -1, channels.shape[1])
        if root is not None:
            jac = jac * root[lo:hi, :, None]
        grad = np.einsum("fnc,fn->fc", jac, miss[lo:hi].reshape(hi - lo, -1))
        # J_f diag(w_f) stacked over a segment's rows: its Gram matrix is the block
        jo = jac * w_out[lo:hi, None, :]
        ji = jac * w_in[lo:hi, None, :]
        for k in range(first, last):
            r0 = basis.starts[k] - lo
            r1 = (basis.starts[k + 1] if k + 1 < n_keys - 1 else n_rows) - lo
            ao = jo[r0:r1].reshape(-1, jac.shape[2])
            ai = ji[r0:r1].reshape(-1, jac.shape[2])
            diagonal[k, o, o] += (ao.T @ ao)[pick]
            diagonal[k + 1, i, i] += (ai.T @ ai)[pick]
            upper[k, o, i] += (ao.T @ ai)[pick]
            rhs[k, o] -= np.einsum("fc,fc->c", w_out[lo + r0:lo + r1], grad[r0:r1])[columns]
            rhs[k + 1, i] -= np.einsum("fc,fc->c", w_in[lo + r0:lo + r1], grad[r0:r1])[columns]
        first = last
    return diagonal, upper, rhs
