"""reduce(): the editable animation from a set of keyframes, plus the residual and its errors.

The reduction covers the frames from the first to the last keyframe. Every animated channel is
keyed at the keyframes with fitted tangents (:mod:`sp_core.fitting`); channels constant over
that range are reported, not keyed. An optional corrective stage (:mod:`sp_core.corrective`)
adds a budget of single-channel keys where the result is worst. The residual is original −
reduced − corrections on every frame and channel, so reduced + corrections + residual gives
back the original channels (to rounding).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from sp_core.clip import Clip
from sp_core.corrective import CorrectiveKeys, budget_keys, correct
from sp_core.curves import LABELS, KeyedCurves
from sp_core.errors import ClipError, ReductionError
from sp_core.fitting import (
    FIT_OBJECTIVES,
    FIT_SPACES,
    MINIMAX_ITERATIONS,
    MINIMAX_ROUNDS,
    ROUND_ITERATIONS,
    SMOOTHNESS,
    TANGENT_MODES,
    VALUE_ROUNDS,
    check_choice,
    fit_channels,
    refine_world,
)
from sp_core.gimbal import rotation_triplets
from sp_core.metrics import Metrics, measure
from sp_core.threads import single_threaded_blas


@dataclass(frozen=True)
class Reduction:
    """Result of :func:`reduce`.

    Attributes
    ----------
    curves : KeyedCurves
    reduced : (n_frames, n_channels) float64
        The curves evaluated on every frame of the range, channel units.
    residual : (n_frames, n_channels) float64
        Original − reduced − the corrections.
    frames : (n_frames,) int
        Host frames of the rows.
    metrics : Metrics
        Errors of what is written: the pose keys plus the corrective keys.
    timings : dict of str to float
        Seconds: ``channel_s``, ``world_s`` (0 in channel space), ``corrective_s``,
        ``total_s``.
    tangents, space : str
    corrections : CorrectiveKeys or None
        The corrective layer's keys (None without a corrective budget).
    pose_metrics : Metrics or None
        Errors of the pose keys alone when there are corrections.
    notes : tuple of str
        What was done differently from what was asked, and why (e.g. a world fit too large for
        this skeleton, fitted in channel space instead).
    """

    curves: KeyedCurves
    reduced: np.ndarray
    residual: np.ndarray
    frames: np.ndarray
    metrics: Metrics
    timings: dict[str, float]
    tangents: str
    space: str
    corrections: CorrectiveKeys | None = None
    pose_metrics: Metrics | None = None
    notes: tuple[str, ...] = ()

    @property
    def corrected(self) -> np.ndarray:
        """(n_frames, n_channels) float64: the pose curves plus the corrective layer."""
        if self.corrections is None:
            return self.reduced
        return self.reduced + self.corrections.dense()


#: Floating-point operations above which the world fit is not attempted; see
#: :func:`world_fit_flops`. The estimate runs at 4-6e9 a second on the project's two-core
#: machine (the sample at 46 and 200 keys, a 5,000-frame take at 250 keys), so the limit is
#: about 15-25 s of fitting.
WORLD_FIT_FLOP_LIMIT = 1e11


def world_fit_flops(clip: Clip, n_keys: int, n_frames: int, free: np.ndarray,
                    iterations: int) -> float:
    """Estimated floating-point operations of a world-space fit.

    Per iteration, the key blocks' Cholesky solves (``n_keys`` blocks of two slopes per free
    channel: ``(2 C)³ / 3`` each) and the tree kernel's per-frame normal equations (about 40
    operations for every pair of free channels on one path to the root, see
    :mod:`sp_core.tree_jacobian`). They grow with the cube and the square of the skeleton's
    channels, which is what makes a 500-joint chain impractical while any character rig is
    cheap.

    Parameters
    ----------
    clip : Clip
    n_keys, n_frames : int
    free : (n_channels,) bool
        Channels the fit moves.
    iterations : int
    """
    per_node = np.bincount(clip.channel_nodes[free], minlength=len(clip.node_names))
    above = np.zeros(len(clip.node_names))  # free channels on the path from the root
    for i, parent in enumerate(clip.parents):  # parents come before their children
        above[i] = per_node[i] + (above[parent] if parent >= 0 else 0.0)
    # each free channel pairs with those above it and the ones of its own node after it
    pairs = float(np.sum(per_node * above - per_node * (per_node - 1) / 2.0))
    blocks = n_keys * (2.0 * free.sum()) ** 3 / 3.0
    tree = n_frames * 40.0 * pairs
    return iterations * (blocks + tree)


def reduction_flops(work: Clip, n_keys: int, animated: np.ndarray, world_iterations: int,
                    key_values: str, objective: str) -> float:
    """Estimated floating-point operations of :func:`reduce`'s world fit of ``n_keys`` keys
    on ``work`` (the range from the first key to the last) with these options; above
    :data:`WORLD_FIT_FLOP_LIMIT` it fits in channel space instead."""
    # the key-value and minimax rounds are more iterations of (at most) the same size
    return world_fit_flops(work, n_keys, len(work.channels), animated, world_iterations + (
        2 * VALUE_ROUNDS * ROUND_ITERATIONS if key_values == "fitted" else 0) + (
        MINIMAX_ROUNDS * MINIMAX_ITERATIONS if objective == "minimax" else 0))


def constant_channels(values: np.ndarray) -> np.ndarray:
    """(C,) bool: channels whose values do not change over the rows (to 1e-9 relative)."""
    if len(values) == 0:
        return np.ones(values.shape[1], dtype=bool)
    spread = np.ptp(values, axis=0)
    return spread <= 1e-9 * np.maximum(1.0, np.abs(values).max(axis=0))


def _key_rows(clip: Clip, frames: Iterable[int]) -> np.ndarray:
    given = list(frames)
    try:
        whole = [isinstance(f, (int, np.integer)) or float(f) == int(f) for f in given]
    except (TypeError, ValueError, OverflowError):
        whole = [False]
    if not all(whole) or any(isinstance(f, bool) for f in given):
        bad = next((f for f, ok in zip(given, whole, strict=False) if not ok), given)
        raise ReductionError(f"keyframes must be whole frame numbers, got {bad!r}")
    keys = np.asarray(sorted({int(f) for f in given}), dtype=np.int64)
    if len(keys) == 0:
        raise ReductionError("no keyframes given")
    outside = keys[(keys < clip.first_frame) | (keys > clip.last_frame)]
    if len(outside):
        raise ReductionError(f"keyframe {int(outside[0])} is outside the clip (frames "
                             f"{clip.first_frame} to {clip.last_frame})")
    if len(keys) == 1 and clip.n_frames > 1:
        raise ReductionError("one keyframe cannot span a range; give at least the first and "
                             "last frame to reduce")
    return keys


# one BLAS thread: the same result on every machine (see sp_core.threads)
@single_threaded_blas()
def reduce(clip: Clip, frames: Iterable[int], tangents: str = "unified",
           smoothness: float = SMOOTHNESS, space: str = "world",
           world_iterations: int = 12, objective: str = "least-squares",
           labels: Mapping[int, str] | None = None,
           corrective_budget: str | int | None = None,
           corrective_stop_mm: float | None = None,
           progress: Callable[[float, str], None] | None = None,
           key_values: str = "fitted", start_only: bool = False) -> Reduction:
    """Rebuild the clip's animation from keys at ``frames`` only.

    Parameters
    ----------
    clip : Clip
    frames : iterable of int
        Host frames of the keyframes; the reduction covers the first to the last.
    tangents : {"unified", "broken", "smooth", "weighted"}
    smoothness : float
        Broken-tangent penalty of ``smooth``.
    space : {"world", "channel"}
        ``world`` (default) refines the channel fit on world joint positions.
    world_iterations : int
    objective : {"least-squares", "minimax"}
        What the world fit minimises (see :func:`sp_core.fitting.refine_world`).
    labels : mapping of int to str, optional
        ``"keypose"`` / ``"breakdown"`` per keyframe (from :mod:`sp_core.layered`); carried by
        the curves into host writes and files.
    corrective_budget : str or int, optional
        Corrective keys to spend (``N`` keys or ``"P%"`` of the original keys, see
        :mod:`sp_core.corrective`); none by default.
    corrective_stop_mm : float, optional
        Stop spending once no frame's worst joint error is above this (mm at 1.7 m).
    progress : callable, optional
        ``progress(fraction, message)`` through the world fit's iterations and the corrective
        stage (fractions of the whole reduction); it may raise to cancel.
    key_values : {"fitted", "captured"}
        Key values fitted with the tangents (least squares over every frame), or the
        captured values at the keyframes.
    start_only : bool
        With ``space="world"``: stop at the channel fit the world fit starts from (no world
        iterations; rotations fitted per channel, as the world fit starts, not on the gimbal
        metric of a channel-space reduction). The world fit never has a larger mean error,
        which makes this a cheap bound for :mod:`sp_core.tolerance`. The result says
        ``space="channel"``.

    Returns
    -------
    Reduction

    Raises
    ------
    ReductionError
        Unknown mode or space, keyframes outside the clip, non-finite channel values.
    """
    check_choice("tangent mode", tangents, TANGENT_MODES)
    check_choice("fitting space", space, FIT_SPACES)
    check_choice("fit objective", objective, FIT_OBJECTIVES)
    if isinstance(world_iterations, bool) or not isinstance(world_iterations, (int, np.integer)) \
            or world_iterations < 1:
        raise ReductionError(f"world_iterations must be a whole number >= 1, got "
                             f"{world_iterations!r}")
    if not np.isfinite(smoothness) or smoothness < 0:
        raise ReductionError(f"smoothness must be a finite number >= 0, got {smoothness}")
    keys = _key_rows(clip, frames)
    started = time.perf_counter()
    correcting = corrective_budget is not None and budget_keys(str(corrective_budget),
                                                               10**9) > 0
    # the world fit's share of the progress; the corrective stage (if any) takes the rest
    fitting_share = 0.5 if correcting else 1.0
    report = (lambda f, m: None) if progress is None else progress
    original = _spanned(clip, int(keys[0]), int(keys[-1]))
    found = original.not_a_number()
    if found is not None:  # (named as the analysis names it: which channel, which frame)
        raise ReductionError(f"{found[0]}; fix that key")
    work = original.unwrapped()
    values = work.channels
    rows = keys - original.first_frame
    animated = ~constant_channels(values)
    # channels the host leaves alone (locked): kept as captured, neither keyed nor corrected,
    # so the errors are those of what the host shows (they counted them as reduced)
    held = original.held & animated
    keyed = animated & ~held
    timings = {"channel_s": 0.0, "world_s": 0.0}
    notes: list[str] = []
    if space == "world" and len(rows) > 1:
        flops = reduction_flops(work, len(rows), animated, world_iterations, key_values,
                                objective)
        if flops > WORLD_FIT_FLOP_LIMIT:
            space = "channel"
            notes.append(f"fitted in channel space: a world fit of {int(animated.sum())} "
                         f"channels and {len(rows)} keys needs about {flops:.1e} floating-point "
                         f"operations (limit {WORLD_FIT_FLOP_LIMIT:.0e}, about 15-25 s on a "
                         "two-core machine)")
    if len(rows) == 1:  # a one-frame clip: one key, nothing to fit
        curves = KeyedCurves(list(work.channel_names), keys.copy(), values[:1].copy(),
                             np.zeros((1, values.shape[1], 2)), np.zeros((1, values.shape[1], 2)),
                             keyed, tangents)
    else:
        report(0.0, f"fitting {len(rows)} keys in channel space")
        # Channel-space results measure rotations near gimbal lock on the rotation (see
        # sp_core.gimbal). The world fit measures on poses already and, started from that fit
        # instead of the per-channel one, came out no better on the sample (mean within 1 %,
        # worst ankle 41.5 instead of 35.4 mm at K = 50, docs/quality.md), so it keeps its start.
        fit = fit_channels(values, rows, tangents, smoothness, key_values=key_values,
                           rotations=rotation_triplets(work) if space == "channel" else None)
        fit.slopes[:, :, ~animated] = 0.0
        timings["channel_s"] = fit.info["channel_s"]
        if space == "world" and start_only:
            space = "channel"
        elif space == "world" and keyed.any():
            report(0.02, f"fitting {len(rows)} keys in world space")
            fit = refine_world(work, rows, fit, tangents, smoothness,
                               iterations=world_iterations, free=keyed, held=held,
                               objective=objective,
                               progress=lambda f, m: report(0.02 + (fitting_share - 0.02) * f,
                                                            m),
                               key_values=key_values)
            timings["world_s"] = fit.info["world_s"]
        curves = fit.curves(values, rows, original.first_frame, list(work.channel_names),
                            keyed, tangents)
    if labels is not None:
        missing = [int(f) for f in keys if int(f) not in labels]
        if missing:
            raise ReductionError(f"no label for keyframe {missing[0]}")
        unknown = [(int(f), labels[int(f)]) for f in keys if labels[int(f)] not in LABELS]
        if unknown:  # (written as a plain key before: a typo lost the breakdown)
            frame, label = unknown[0]
            raise ReductionError(f"keyframe {frame} is labelled {label!r}; a label is "
                                 f"{' or '.join(map(repr, LABELS))}")
        curves = dataclasses.replace(curves, labels=[str(labels[int(f)]) for f in keys])
    reduced = curves.dense()
    reduced[:, ~animated] = values[:1, ~animated]
    reduced[:, held] = values[:, held]
    scale, unknown = _scale(clip)
    metrics = measure(original, reduced, len(keys), keyed, mm_per_unit=scale,
                      scaled=unknown is None)
    if unknown is not None:
        notes.append(f"errors in scene units, not mm: {unknown}")
    timings["corrective_s"] = 0.0
    timings["total_s"] = time.perf_counter() - started
    plain = Reduction(curves, reduced, original.channels - reduced, original.frames, metrics,
                      timings, tangents, space, notes=tuple(notes))
    return with_corrections(clip, plain, corrective_budget, corrective_stop_mm,
                            None if progress is None else
                            lambda f, m: progress(fitting_share + (1 - fitting_share) * f, m))


def _spanned(clip: Clip, first: int, last: int) -> Clip:
    """Frames ``first``..``last`` of ``clip``: the clip itself if that is all of it, so that
    what it made once (its positions, its unwrapped curves) serves every reduction of a
    tolerance's search."""
    if (first, last) == (clip.first_frame, clip.last_frame):
        return clip
    return clip.sub_range(first, last)


#: Corrective keys a budget may leave unspent without a note (a last change may cost more
#: keys than are left).
SPARE_KEYS = 4


@single_threaded_blas()
def with_corrections(clip: Clip, reduction: Reduction, budget: str | int | None,
                     stop_mm: float | None = None,
                     progress: Callable[[float, str], None] | None = None) -> Reduction:
    """``reduction`` (of ``clip``, without corrections) with a corrective layer added.

    Parameters
    ----------
    clip : Clip
        The clip that was reduced (any range containing the reduction's).
    reduction : Reduction
    budget : str or int, optional
        ``N`` keys or ``"P%"`` of the original keys (None or 0: ``reduction`` itself).
    stop_mm : float, optional
        Stop once no frame's worst joint error is above this (mm at 1.7 m).
    progress : callable, optional
        As :func:`sp_core.corrective.correct`'s.
    """
    allowed = budget_keys(None if budget is None else str(budget),
                          reduction.metrics.original_keys)
    if allowed <= 0 or len(reduction.curves.frames) < 2:
        return reduction
    started = time.perf_counter()
    scale = _scale(clip)[0]
    frames = reduction.curves.frames
    original = _spanned(clip, int(frames[0]), int(frames[-1]))
    work = original.unwrapped()  # the values the curves were fitted on
    animated = reduction.curves.animated
    # (no millimetres, no stop in them: a tolerance's max would be read as scene units)
    stop = 0.0 if stop_mm is None or not reduction.metrics.scaled else stop_mm / scale
    corrections, correction = correct(work, reduction.reduced, frames - frames[0], animated,
                                      allowed, stop_at=stop, progress=progress)
    corrected = reduction.reduced + correction
    metrics = measure(original, corrected, len(frames), animated, mm_per_unit=scale,
                      corrective_keys=corrections.n_keys, scaled=reduction.metrics.scaled)
    timings = dict(reduction.timings)
    timings["corrective_s"] = time.perf_counter() - started
    timings["total_s"] = timings.get("total_s", 0.0) + timings["corrective_s"]
    notes = reduction.notes
    if stop <= 0.0 and corrections.n_keys < allowed - SPARE_KEYS:
        # (a budget of 100 % stopped at 2,878 keys of 6,480 without a word, taken for a cap)
        notes += (f"the corrective keys stopped at {corrections.n_keys:,} of the "
                  f"{allowed:,} the budget allows: no further key improves a frame",)
    return dataclasses.replace(reduction, residual=original.channels - corrected,
                               metrics=metrics, timings=timings, corrections=corrections,
                               pose_metrics=reduction.metrics, notes=notes)


def size_unknown(clip: Clip) -> str | None:
    """Why the character's size cannot be measured, so that its errors have no millimetres
    (a skeleton of one joint, or every node at one point), or None."""
    return _scale(clip)[1]


def _scale(clip: Clip) -> tuple[float, str | None]:
    """The whole clip's millimetres per scene unit (a sub-range has the same skeleton) and
    None; or 1 and why, when its size cannot be measured."""
    try:
        return clip.mm_per_unit(), None
    except ClipError as exc:
        return 1.0, f"the character's size cannot be measured ({exc})"
