"""Keyed animation curves: keys at shared frames with cubic Bézier handles, host-neutral.

Every channel of a :class:`KeyedCurves` is keyed at the same host frames. A segment between two
consecutive keys is a cubic Bézier in (frame, value) space with control points

    key_k,  key_k + out_handle_k,  key_{k+1} + in_handle_{k+1},  key_{k+1}

so handles are offsets from their key: ``out`` points forward (Δframe ≥ 0), ``in`` points back
(Δframe ≤ 0). Unweighted curves have every handle one third of its segment long in frames
(the Bézier is then a cubic Hermite and frame is linear in the curve parameter); weighted curves
may have any handle length from 0 to the whole segment, which keeps each segment a function of
time. Conversions to host tangents are in :mod:`sp_core.tangents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sp_core.errors import ReductionError

#: Entries from which :func:`solve_parameter` uses its numba kernel.
KERNEL_SIZE = 50_000


def bernstein(u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four cubic Bernstein polynomials at curve parameters ``u`` (any shape)."""
    v = 1.0 - u
    return v * v * v, 3.0 * u * v * v, 3.0 * u * u * v, u * u * u


def solve_parameter(t: np.ndarray, out_dt: np.ndarray, in_dt: np.ndarray,
                    length: np.ndarray) -> np.ndarray:
    """Curve parameter u in [0, 1] where a segment's Bézier reaches time ``t``.

    Parameters
    ----------
    t : array, frames from the segment start (0 ≤ t ≤ length)
    out_dt, in_dt : arrays broadcasting with ``t``
        Handle lengths in frames (both ≥ 0; ``in_dt`` is measured back from the segment end).
    length : array broadcasting with ``t``, frames (> 0)

    Returns
    -------
    u : array of the broadcast shape

    Notes
    -----
    x(u) = 3 a u (1-u)^2 + 3 (L - b) u^2 (1-u) + L u^3 is non-decreasing for 0 ≤ a, b ≤ L, so a
    safeguarded Newton iteration (bisection whenever a step leaves the bracket) converges; with
    one-third handles x is linear and the first step is exact.
    """
    t, a, b, L = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                       for x in (t, out_dt, in_dt, length)))
    shape = t.shape
    t, a, b, L = (np.ravel(x) for x in (t, a, b, L))
    if t.size >= KERNEL_SIZE:
        # the same iteration per entry in a numba kernel: weighted fits solve this for every
        # row and channel many times (the kernel loads only for arrays this large)
        from sp_core._fit_kernels import bezier_parameter

        # copies: numba asks a broadcast view whether it is writeable, which numpy deprecates
        return bezier_parameter(*(np.array(x, order="C") for x in (t, a, b, L))
                                ).reshape(shape)
    u = np.clip(t / L, 0.0, 1.0)
    # Only the entries still moving are iterated: a few steep weighted handles need tens of
    # bisection steps, and iterating every entry until the last one converged made this the
    # bulk of a weighted fit. An entry within tolerance still takes steps until they no longer
    # change it: near-vertical weighted segments turn a tiny time error into a visible value
    # error, so the tolerance alone is not enough.
    active = np.arange(u.size)
    lo = np.zeros_like(u)
    hi = np.ones_like(u)
    for _ in range(60):
        ua, aa, ba, la, ta = u[active], a[active], b[active], L[active], t[active]
        v = 1.0 - ua
        x = 3.0 * aa * ua * v * v + 3.0 * (la - ba) * ua * ua * v + la * ua ** 3
        miss = x - ta
        hi[active] = np.where(miss > 0, ua, hi[active])
        lo[active] = np.where(miss <= 0, ua, lo[active])
        dx = 3.0 * (aa * v * v + 2.0 * (la - aa - ba) * ua * v + ba * ua * ua)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = ua - miss / dx
        inside = np.isfinite(step) & (step > lo[active]) & (step < hi[active])
        moved = np.where(inside, step, 0.5 * (lo[active] + hi[active]))
        settled = (np.abs(miss) <= 1e-12 * la) & ((miss == 0) | (moved == ua))
        u[active] = np.where(settled, ua, moved)
        active = active[~settled]
        if not active.size:
            break
    return u.reshape(shape)


#: What a key of a layered selection is (Maya's and Blender's key types, MotionBuilder's marks).
KEYPOSE = "keypose"
BREAKDOWN = "breakdown"
LABELS = (KEYPOSE, BREAKDOWN)

@dataclass(frozen=True)
class KeyedCurves:
    """Keys on shared frames for a set of channels, with Bézier handles.

    Attributes
    ----------
    channel_names : list of str, length C
    frames : (K,) int64
        Host frames of the keys, ascending (K ≥ 2, or 1 for a one-frame clip).
    values : (K, C) float64
        Key values, channel units (degrees for rotations, unwrapped).
    in_handles, out_handles : (K, C, 2) float64
        (Δframe, Δvalue) from each key to its in / out control point.
    animated : (C,) bool
        False for channels constant over the range: they are reported, not keyed, and evaluate
        to their constant value.
    tangents : str
        The tangent mode the handles were fitted with.
    labels : list of str, optional
        Per key, ``"keypose"`` or ``"breakdown"`` (:data:`LABELS`) when the keys come from a
        layered selection.
    """

    channel_names: list[str]
    frames: np.ndarray
    values: np.ndarray
    in_handles: np.ndarray
    out_handles: np.ndarray
    animated: np.ndarray
    tangents: str = "unified"
    labels: list[str] | None = None

    def __post_init__(self) -> None:
        k = len(self.frames)
        c = len(self.channel_names)
        if self.values.shape != (k, c) or self.in_handles.shape != (k, c, 2) \
                or self.out_handles.shape != (k, c, 2) or self.animated.shape != (c,):
            raise ReductionError(f"inconsistent keyed curves: {k} keys × {c} channels, values "
                                 f"{self.values.shape}, handles {self.in_handles.shape} / "
                                 f"{self.out_handles.shape}, animated {self.animated.shape}")
        if k and np.any(np.diff(self.frames) <= 0):
            raise ReductionError("key frames must be strictly increasing")
        if self.labels is not None and len(self.labels) != k:
            raise ReductionError(f"{len(self.labels)} labels for {k} keys")

    @property
    def breakdown_frames(self) -> list[int]:
        """Host frames of the keys labelled ``breakdown`` (empty without labels)."""
        if self.labels is None:
            return []
        return [int(f) for f, label in zip(self.frames, self.labels, strict=True)
                if label == "breakdown"]

    @property
    def n_keys(self) -> int:
        return len(self.frames)

    @property
    def k(self) -> int:
        """K, as every front counts it: the keyframes, or a layered selection's keyposes."""
        return self.n_keys if self.labels is None else self.labels.count(KEYPOSE)

    @property
    def n_channels(self) -> int:
        return len(self.channel_names)

    @property
    def weighted(self) -> bool:
        """True when some handle is not one third of its segment (needs weighted tangents)."""
        lengths = np.diff(self.frames).astype(np.float64)[:, None]
        return bool(np.any(np.abs(self.out_handles[:-1, :, 0] - lengths / 3) > 1e-9 * lengths)
                    or np.any(np.abs(self.in_handles[1:, :, 0] + lengths / 3) > 1e-9 * lengths))

    def slopes(self) -> tuple[np.ndarray, np.ndarray]:
        """In and out slopes of every key, value units per frame: two (K, C) arrays."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ins = np.where(self.in_handles[..., 0] != 0,
                           self.in_handles[..., 1] / self.in_handles[..., 0], 0.0)
            outs = np.where(self.out_handles[..., 0] != 0,
                            self.out_handles[..., 1] / self.out_handles[..., 0], 0.0)
        return ins, outs

    def evaluate(self, frames: Sequence[float] | np.ndarray,
                 channels: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Curve values at any (fractional) host frames; outside the keys they hold flat.

        Parameters
        ----------
        frames : (n,) float
        channels : (c,) int, optional
            Which channels (default all).

        Returns
        -------
        (n, c) float64
        """
        frames = np.asarray(frames, dtype=np.float64).reshape(-1)
        cols = np.arange(self.n_channels) if channels is None else np.asarray(channels)
        values = self.values[:, cols]
        if self.n_keys == 1:
            return np.repeat(values, len(frames), axis=0)
        keys = self.frames.astype(np.float64)
        t = np.clip(frames, keys[0], keys[-1])
        seg = np.clip(np.searchsorted(keys, t, side="right") - 1, 0, self.n_keys - 2)
        start = keys[seg][:, None]
        length = (keys[seg + 1] - keys[seg])[:, None]
        out_h = self.out_handles[seg][:, cols]
        in_h = self.in_handles[seg + 1][:, cols]
        u = solve_parameter(t[:, None] - start, out_h[..., 0], -in_h[..., 0], length)
        b0, b1, b2, b3 = bernstein(u)
        v0 = values[seg]
        v1 = values[seg + 1]
        return b0 * v0 + b1 * (v0 + out_h[..., 1]) + b2 * (v1 + in_h[..., 1]) + b3 * v1

    def dense(self, frames: np.ndarray | None = None) -> np.ndarray:
        """Values on every host frame from the first to the last key: (n, C) float64."""
        if frames is None:
            frames = np.arange(self.frames[0], self.frames[-1] + 1)
        return self.evaluate(frames)
