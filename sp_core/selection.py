"""The selection space: optimal keyframes for every keyframe count K, from one dynamic programme.

For a range of frames, a cost table and a composition (``max``: minimise the largest segment
cost, as the published Maya tool; ``sum``: minimise the sum, the paper's equation), the DP finds
for every K from the minimum to ``max_keys`` the selection of K frames that is optimal among all
selections containing the first and last frame and every pin, with interior keys only on
candidate frames and no gap longer than ``max_span``. Lookups afterwards are array reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numba
import numpy as np

from sp_core import _kernels
from sp_core.clip import Clip
from sp_core.costs import Cost, get_cost
from sp_core.errors import CapacityError, SelectionError
from sp_core.poses import pose_matrix

COMPOSITIONS = ("max", "sum")
#: Default memory allowed for one analysis (tables, Gram bands, DP arrays), bytes.
DEFAULT_MEMORY_LIMIT = 2 * 1024**3
#: Threshold rule defaults. The thesis uses 20 % for its coarse first layer; applied to a whole
#: clip as one layer that keeps only 3 keys of an 8 s walk, so whole-clip analyses use 5 %,
#: which lands next to the first clear cliffs of real clips (docs/selection.md).
ACCURACY = 0.05
SIGNIFICANCE = 0.1


class SelectionSpace:
    """Optimal selections for every keyframe count over a range of poses.

    Parameters
    ----------
    poses : (n_frames, n_dims) float64
        One row per frame of the range (see :func:`sp_core.poses.pose_matrix`).
    first_frame : int, optional
        Host frame number of row 0.
    cost : str or Cost, optional
        ``"line-max"`` (default), ``"line-time"``, ``"line-sse"`` or a cost object.
    cost_options : mapping, optional
        Options of a cost given by name.
    compose : {"max", "sum"}, optional
    pins : iterable of int, optional
        Host frames that must be keyframes.
    stride : int, optional
        Interior keys only on host frames divisible by ``stride`` (e.g. 4 on 120 fps mocap keeps
        keys on 30 fps frames). The first and last frame are always candidates.
    candidates : iterable of int, optional
        Explicit interior candidate host frames (instead of ``stride``).
    max_span : int, optional
        Longest allowed gap between consecutive keyframes, in frames.
    max_keys : int, optional
        Largest K solved (default half the candidates; clamped to the number of candidates).
    memory_limit : int, optional
        Bytes an analysis may use before :class:`CapacityError` is raised.
    progress : callable, optional
        ``progress(fraction, message)`` before the cost table and before the selection; it may
        raise (e.g. to cancel), which aborts the analysis.

    Raises
    ------
    SelectionError
        Non-finite poses, fewer than 2 frames, pins outside the range or off the candidates, a
        ``max_span`` no selection can meet, bad options.
    CapacityError
        When the tables would not fit in ``memory_limit``.
    OptionError
        Unknown cost or cost option.
    """

    def __init__(
        self,
        poses: np.ndarray,
        first_frame: int = 0,
        cost: str | Cost = "line-max",
        cost_options: Mapping[str, Any] | None = None,
        compose: str = "max",
        pins: Iterable[int] = (),
        stride: int = 1,
        candidates: Iterable[int] | None = None,
        max_span: int | None = None,
        max_keys: int | None = None,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        progress: Callable[[float, str], None] | None = None,
    ) -> None:
        report = progress or (lambda fraction, message: None)
        poses = np.asarray(poses, dtype=np.float64)
        if poses.ndim != 2:
            raise SelectionError(f"poses must be a (n_frames, n_dims) array, got {poses.shape}")
        n = poses.shape[0]
        if n < 2:
            raise SelectionError(f"an analysis needs at least 2 frames, the range has {n}; "
                                 "choose a longer range")
        bad = ~np.isfinite(poses)
        if bad.any():
            row = int(np.argwhere(bad)[0, 0])
            raise SelectionError(f"pose data is not finite (NaN or infinity) at frame "
                                 f"{first_frame + row}; fix or exclude that frame")
        if compose not in COMPOSITIONS:
            raise SelectionError(f"compose must be 'max' or 'sum', got {compose!r}")
        self.first_frame = int(first_frame)
        self.last_frame = self.first_frame + n - 1
        self.n_frames = n
        self.compose = compose
        self.cost = get_cost(cost, **dict(cost_options or {}))

        self._candidates, self._pins = self._candidate_indices(pins, stride, candidates)
        m = len(self._candidates)
        gaps = np.diff(self._candidates)
        self.max_span = n - 1 if max_span is None else int(max_span)
        if self.max_span < 1:
            raise SelectionError(f"max_span must be at least 1 frame, got {max_span}")
        if gaps.max() > self.max_span:
            at = int(np.argmax(gaps))
            raise SelectionError(
                f"max_span of {self.max_span} frames is shorter than the gap between candidate "
                f"frames {self.first_frame + self._candidates[at]} and "
                f"{self.first_frame + self._candidates[at + 1]}; raise max_span or lower stride")
        # band: the most candidate steps one segment can span
        reach = np.searchsorted(self._candidates, self._candidates + self.max_span, side="right")
        band = int((reach - np.arange(m)).max()) - 1

        wanted = m // 2 if max_keys is None else int(max_keys)
        self.max_keys = min(max(wanted, 2), m)
        self._check_capacity(n, poses.shape[1], m, band, memory_limit)

        # costs are translation invariant; centring keeps Gram-based sums well conditioned
        centred = np.ascontiguousarray(poses - poses.mean(axis=0))
        report(0.05, f"{self.cost.name} table, {m} candidate frames")
        lowest = self._lowest_previous(band)
        t0 = time.perf_counter()
        self._table = self.cost.table(centred, self._candidates, band, self.max_span, lowest)
        t1 = time.perf_counter()
        report(0.6, f"optimal selections for K up to {self.max_keys}")
        error, self._previous = _kernels.select(self._table, lowest, self.max_keys,
                                                compose == "sum", 4 * numba.get_num_threads())
        t2 = time.perf_counter()
        self.timings = {"table_s": t1 - t0, "select_s": t2 - t1}
        self._errors = error[:, m - 1].copy()
        feasible = np.flatnonzero(np.isfinite(self._errors))
        if len(feasible) == 0:
            raise SelectionError(f"no selection of at most {self.max_keys} keys meets max_span "
                                 f"{self.max_span} with these pins; raise max_keys or max_span")
        self.min_keys = int(feasible[0])
        self._poses = centred
        self._diameter: float | None = None

    # ------------------------------------------------------------------------- construction
    @classmethod
    def from_clip(
        cls,
        clip: Clip,
        pose: str = "positions",
        nodes: Sequence[str] | None = None,
        weights: Mapping[str, float] | None = None,
        time_scale: float = 0.0,
        frame_range: tuple[int, int] | None = None,
        **options: Any,
    ) -> SelectionSpace:
        """Analyse a clip: build its pose matrix (see :func:`pose_matrix`) and solve.

        ``frame_range`` is inclusive host frames (default the whole clip); other keyword
        arguments are those of :class:`SelectionSpace`.
        """
        if frame_range is not None:
            start, end = frame_range
            if end < start or start < clip.first_frame or end > clip.last_frame:
                raise SelectionError(f"frame range {start}:{end} is not inside clip {clip.name!r}"
                                     f" (frames {clip.first_frame}..{clip.last_frame})")
        if options.get("progress"):
            options["progress"](0.0, "poses")
        poses = pose_matrix(clip, pose, nodes, weights, time_scale, frame_range)
        first = clip.first_frame if frame_range is None else frame_range[0]
        return cls(poses, first_frame=first, **options)

    def _candidate_indices(self, pins: Iterable[int], stride: int,
                           candidates: Iterable[int] | None) -> tuple[np.ndarray, np.ndarray]:
        n, first = self.n_frames, self.first_frame
        if candidates is not None:
            frames = np.asarray(sorted(set(int(c) for c in candidates)), dtype=np.int64)
            outside = frames[(frames < first) | (frames > self.last_frame)]
            if len(outside):
                raise SelectionError(f"candidate frame {outside[0]} is outside the range "
                                     f"{first}..{self.last_frame}")
            rows = frames - first
        else:
            if int(stride) != stride or stride < 1:
                raise SelectionError(f"stride must be a whole number >= 1, got {stride!r}")
            frames = np.arange(first, first + n)
            rows = np.flatnonzero(frames % int(stride) == 0)
        rows = np.union1d(rows, [0, n - 1]).astype(np.int64)
        pin_rows = []
        for p in sorted(set(pins)):
            if int(p) != p or not first <= p <= self.last_frame:
                raise SelectionError(f"pinned frame {p} is outside the range "
                                     f"{first}..{self.last_frame}")
            row = int(p) - first
            if row not in rows:
                raise SelectionError(f"pinned frame {p} is not a candidate frame (stride "
                                     f"{stride}); pin a candidate frame or add it to candidates")
            if 0 < row < n - 1:
                pin_rows.append(int(np.searchsorted(rows, row)))
        return rows, np.asarray(pin_rows, dtype=np.int64)

    def _lowest_previous(self, band: int) -> np.ndarray:
        """For every candidate, the earliest candidate that may be the key before it."""
        m = len(self._candidates)
        lowest = np.maximum(np.arange(m) - band, 0)
        # a segment may not jump over a pin: the previous key is at or after the last pin
        for pin in self._pins:
            lowest[pin + 1:] = np.maximum(lowest[pin + 1:], pin)
        return lowest.astype(np.int64)

    def _check_capacity(self, n: int, dims: int, m: int, band: int, limit: int) -> None:
        parts = {
            "error table": 8 * m * (band + 1),
            "Gram bands": 16 * n * (self.max_span + 1),
            "selection arrays": 12 * (self.max_keys + 1) * m,
            "poses": 16 * n * dims,
        }
        total = sum(parts.values())
        if total > limit:
            detail = ", ".join(f"{k} {v / 1e6:,.0f} MB" for k, v in parts.items())
            raise CapacityError(
                f"analysing {n:,} frames ({m:,} candidates, spans up to {self.max_span:,} "
                f"frames, up to {self.max_keys:,} keys) needs {total / 1e9:.2f} GB ({detail}), "
                f"more than the limit of {limit / 1e9:.2f} GB. Use a stride (e.g. 4), a max_span "
                f"(e.g. 2 s of frames), fewer max_keys or a shorter range, or raise the limit")

    # ----------------------------------------------------------------------------- lookups
    @property
    def candidates(self) -> np.ndarray:
        """(n_candidates,) int64 host frames that may be keyframes."""
        return self._candidates + self.first_frame

    @property
    def pins(self) -> np.ndarray:
        """Interior pinned host frames (the first and last frame are always keys)."""
        return self._candidates[self._pins] + self.first_frame

    @property
    def key_counts(self) -> np.ndarray:
        """(n,) int64: every K from :attr:`min_keys` to :attr:`max_keys`."""
        return np.arange(self.min_keys, self.max_keys + 1)

    @property
    def errors(self) -> np.ndarray:
        """(n,) float64: ``error(K)`` for every K of :attr:`key_counts` (inf where infeasible)."""
        return self._errors[self.min_keys:self.max_keys + 1].copy()

    def _check_k(self, keys: int) -> int:
        if isinstance(keys, bool) or not isinstance(keys, (int, np.integer)):
            raise SelectionError(f"K must be a whole number, got {keys!r}")
        if not self.min_keys <= keys <= self.max_keys:
            raise SelectionError(f"K = {keys} is out of range: this analysis has selections of "
                                 f"{self.min_keys} to {self.max_keys} keys")
        return int(keys)

    def error(self, keys: int) -> float:
        """Composed cost of the optimal selection of ``keys`` keyframes (pose units)."""
        return float(self._errors[self._check_k(keys)])

    def keyframes(self, keys: int) -> np.ndarray:
        """(keys,) int64: the optimal keyframes as ascending host frames."""
        keys = self._check_k(keys)
        if not np.isfinite(self._errors[keys]):
            raise SelectionError(f"no selection of exactly {keys} keys meets the constraints "
                                 "(max_span, pins); choose another K")
        out = np.empty(keys, dtype=np.int64)
        b = len(self._candidates) - 1
        for slot in range(keys - 1, -1, -1):
            out[slot] = self._candidates[b]
            b = int(self._previous[slot + 1, b])
        return out + self.first_frame

    def segment_costs(self, frames: Sequence[int]) -> np.ndarray:
        """(len(frames) - 1,) float64: the table cost of each consecutive pair of key frames."""
        rows = np.searchsorted(self._candidates, np.asarray(frames) - self.first_frame)
        d = rows[1:] - rows[:-1]
        return self._table[rows[1:], d]

    # --------------------------------------------------------------------------- suggestions
    @property
    def diameter(self) -> float:
        """Largest distance between two poses of the range (pose units; candidates only when the
        range has more than 4,000 candidate frames, to stay fast)."""
        if self._diameter is None:
            rows = self._candidates
            if len(rows) > 4000:
                rows = rows[:: -(-len(rows) // 4000)]
            p = self._poses[rows]
            sq = np.einsum("ij,ij->i", p, p)
            best = 0.0
            for s in range(0, len(p), 1024):
                block = sq[s:s + 1024, None] + sq[None, :] - 2.0 * p[s:s + 1024] @ p.T
                best = max(best, float(block.max()))
            self._diameter = float(np.sqrt(max(best, 0.0)))
        return self._diameter

    def normalised_errors(self) -> np.ndarray:
        """:attr:`errors` divided by :attr:`diameter` (``line-sse``: by diameter² × frames)."""
        scale = self.diameter
        if self.cost.name == "line-sse":
            scale = scale * scale * self.n_frames
        return self.errors / scale if scale > 0 else np.zeros_like(self.errors)

    def threshold_choice(self, accuracy: float = ACCURACY,
                         significance: float = SIGNIFICANCE) -> int:
        """The thesis' automatic choice of K.

        Drop every K whose normalised error is above ``accuracy``; keep those that improve on
        K - 1 by at least ``significance`` (as a fraction of K - 1's error; the smallest K counts
        as significant); return the smallest K left. If every K is above ``accuracy``, the K
        with the lowest error; if none is significant, the smallest accurate K.
        """
        e = self.normalised_errors()
        accurate = e <= accuracy
        if not accurate.any():
            return int(self.key_counts[int(np.argmin(e))])
        significant = np.ones(len(e), dtype=bool)
        significant[1:] = e[1:] <= (1.0 - significance) * e[:-1]
        chosen = np.flatnonzero(accurate & significant)
        index = chosen[0] if len(chosen) else np.flatnonzero(accurate)[0]
        return int(self.key_counts[index])

    def cliffs(self, count: int = 5, window: int = 5, ratio: float = 2.0) -> list[int]:
        """Key counts just after a sharp drop of the error (the paper's sweet spots).

        K is a cliff when going from K - 1 to K cuts the error by at least 10 % and by at least
        ``ratio`` times the average cut of the ``window`` steps on either side (measured in log
        error, so the test is the same at every scale), and by more than either neighbour.

        Returns
        -------
        list of int
            Up to ``count`` K values, strongest first.
        """
        e = self.errors
        finite = np.isfinite(e)
        if finite.sum() < 3:
            return []
        floor = max(float(e[finite].max()) * 1e-9, 1e-300)
        log_e = np.log(np.maximum(np.where(finite, e, e[finite].max()), floor))
        drop = np.concatenate([[0.0], log_e[:-1] - log_e[1:]])  # drop[i]: from K_i - 1 to K_i
        scores = []
        for i in range(1, len(e)):
            if drop[i] < np.log(1 / 0.9) or e[i - 1] <= floor:
                continue
            around = np.concatenate([drop[max(1, i - window):i], drop[i + 1:i + 1 + window]])
            base = float(np.mean(np.maximum(around, 0.0))) if len(around) else 0.0
            neighbours = [drop[j] for j in (i - 1, i + 1) if 1 <= j < len(e)]
            if drop[i] >= ratio * base and all(drop[i] > x for x in neighbours):
                scores.append((drop[i] / max(base, 1e-12), int(self.key_counts[i])))
        scores.sort(reverse=True)
        return [k for _, k in scores[:count]]

    def suggestions(self, accuracy: float = ACCURACY,
                    significance: float = SIGNIFICANCE) -> dict[str, Any]:
        """``{"cliffs": [...], "threshold": K}`` as in the ``analyze`` JSON."""
        return {"cliffs": sorted(self.cliffs()),
                "threshold": self.threshold_choice(accuracy, significance)}

    def __repr__(self) -> str:
        return (f"SelectionSpace(frames {self.first_frame}..{self.last_frame}, {self.cost.name}, "
                f"compose={self.compose}, K {self.min_keys}..{self.max_keys})")
