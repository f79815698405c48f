"""The selection space: optimal keyframes for every keyframe count K, from one dynamic programme.

For a range of frames, a cost table and a composition (``max``: minimise the largest segment
cost, as the published Maya tool; ``sum``: minimise the sum, the paper's equation), the DP finds
for every K from the minimum to ``max_keys`` the selection of K frames that is optimal among all
selections containing the first and last frame and every pin, with interior keys only on
candidate frames and no gap longer than ``max_span``. Lookups afterwards are array reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numba
import numpy as np

from sp_core import _kernels
from sp_core.clip import Clip
from sp_core.costs import Cost, get_cost
from sp_core.costs.base import fill_in_blocks
from sp_core.errors import CapacityError, Note, SelectionError
from sp_core.options import COMPOSITIONS
from sp_core.poses import pose_matrix

#: Default memory allowed for one analysis (tables, Gram bands, DP arrays), bytes.
DEFAULT_MEMORY_LIMIT = 2 * 1024**3
#: Steps of the selection DP (one composition of a previous key) per second on the reference
#: two-core machine, idle: the time estimate that plans long takes (measured 5.3-6.9e9 with the
#: kernels of 2026-11-23 from 1,100 to 10,000 frames, ``benchmarks/bench_long_takes.py``; the
#: estimate stays on the slow side of that). Per cell add :data:`CELL_STEPS` for the reductions
#: around the inner loop.
SELECT_STEPS_PER_SECOND = 5.0e9
CELL_STEPS = 30
#: Tiles a take's candidates must fill for the DP to be solved tile by tile
#: (:func:`_kernels.select_tiles`; fewer, and the two threads would share too few tiles).
TILED_DP_TILES = 8
#: Estimated DP steps per kernel call between progress reports (about 0.05 s on two idle cores).
SELECT_BLOCK = 3.0e8
#: Shortest window the automatic plan keeps (frames; 2 s at 120 fps, 8 s at 30 fps): when
#: every K cannot be solved with at least this window, K is capped instead.
SHORTEST_WINDOW = 240
#: Share of the candidates the automatic plan keeps as K when it must cap K: the widest window
#: that fits K up to a key every 10 frames, then K raised as far as that window allows. (The
#: threshold rule and the default tolerance choose K of 1.5 % and 5.5 % of the sample's frames.)
USEFUL_KEYS = 0.1
#: Threshold rule defaults. The thesis uses 20 % for its coarse first layer; applied to a whole
#: clip as one layer that keeps only 3 keys of an 8 s walk, so whole-clip analyses use 5 %,
#: which lands next to the first clear cliffs of real clips (docs/selection.md).
ACCURACY = 0.05
SIGNIFICANCE = 0.1


def _size(count: int) -> str:
    """Bytes in words: ``2.47 GB``, ``72.0 MB``."""
    return f"{count / 1e9:.2f} GB" if count >= 1e8 else f"{count / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    """Seconds in words: ``0.012 s``, ``4.0 s``, ``132 s``."""
    if seconds < 1:
        return f"{seconds:.2g} s"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:,.0f} s"


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
        Longest allowed gap between consecutive keyframes, in frames (default none, or the
        automatic window of a long take).
    max_keys : int, optional
        Largest K solved (default half the candidates, or fewer for a long take; clamped to the
        number of candidates).
    holds : int, optional
        A K the space must offer when ``max_keys`` is left to the plan (a space shown whole
        with a K asked for: the panel's graph): if a long take's automatic window would leave
        it out, the space is planned as with ``max_keys = holds`` instead, as a command line
        asking for that K plans it.
    memory_limit : int, optional
        Bytes the tables and DP arrays may use.
    time_budget : float, optional
        Seconds the table and the DP may take by the time estimate (steps per second of the
        reference two-core machine); default no limit.
    progress : callable, optional
        ``progress(fraction, message)`` between blocks of the cost table and of the
        selection (about every 0.1 s); it may raise (e.g. to cancel), which aborts the
        analysis.
    on_demand : callable, optional
        Solve the DP for a K only when it is first asked for (:meth:`error`,
        :meth:`keyframes`; :attr:`errors` and what derives from it ask for every K), calling
        ``on_demand()`` between blocks of it (it may raise to cancel: the K solved so far stay
        solved). For callers that read a few K only (a reduction at the K the tolerance's
        search tries): the DP of each K costs about the same, so a 5,000-frame take whose
        search reaches K = 300 solves an eighth of it. The results are the same as solving
        every K at once. Default: every K now.
    timed : bool
        The poses' last column is time (``time_scale``): :attr:`diameter`, the scale of the
        threshold rule and the cliffs, leaves it out. Time grows with the take's length, not
        with its motion; in the diameter it made every error look small (``--time-scale 100``
        put the suggested K at 2 instead of 5, 35 mm mean).

    Notes
    -----
    When the exact space (every span, K up to the default ``max_keys``) would not fit
    ``memory_limit`` or ``time_budget``, the analysis is planned with a window: ``max_span``
    becomes the longest gap that fits (at least :data:`SHORTEST_WINDOW` frames, else K is
    capped instead), so every selection is optimal among those whose keys are at most that
    far apart. :attr:`notes` says so. A ``max_span`` or ``max_keys`` given explicitly is kept.

    Raises
    ------
    SelectionError
        Non-finite poses, fewer than 2 frames, pins outside the range or off the candidates, a
        ``max_span`` no selection can meet, bad options.
    CapacityError
        When even the windowed plan would not fit ``memory_limit`` or ``time_budget`` (the
        message gives what it needs and the option that makes it fit).
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
        time_budget: float | None = None,
        progress: Callable[[float, str], None] | None = None,
        on_demand: Callable[[], None] | None = None,
        holds: int | None = None,
        timed: bool = False,
    ) -> None:
        report = progress or (lambda fraction, message: None)
        self._timed = bool(timed)
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
            raise SelectionError(f"compose must be 'max' or 'sum', got {compose!r}",
                                 options=("compose",))
        self.first_frame = int(first_frame)
        self.last_frame = self.first_frame + n - 1
        self.n_frames = n
        self.compose = compose
        self.cost = get_cost(cost, **dict(cost_options or {}))

        self._candidates, self._pins = self._candidate_indices(pins, stride, candidates)
        m = len(self._candidates)
        gaps = np.diff(self._candidates)
        if max_span is not None:
            if int(max_span) < 1:
                raise SelectionError(f"max_span must be at least 1 frame, got {max_span}",
                                     options=("max_span",))
            if gaps.max() > int(max_span):
                at = int(np.argmax(gaps))
                raise SelectionError(
                    f"max_span of {int(max_span)} frames is shorter than the gap between "
                    f"candidate frames {self.first_frame + self._candidates[at]} and "
                    f"{self.first_frame + self._candidates[at + 1]}; raise max_span or lower "
                    "stride", options=("max_span", "stride"))
        #: what the user should know about this analysis (e.g. the window of a long take)
        self.notes: list[Note] = []
        span = None if max_span is None else int(max_span)
        self.max_span, self.max_keys = self._plan(
            poses.shape[1], span, None if max_keys is None else int(max_keys),
            int(memory_limit), time_budget)
        if max_keys is None and holds is not None \
                and not self._fewest_keys(self.max_span) <= holds <= self.max_keys:
            # planned before the table is built, so the space is built once (its notes say
            # the plan it has)
            self.notes.clear()
            self.max_span, self.max_keys = self._plan(poses.shape[1], span, int(holds),
                                                      int(memory_limit), time_budget)
        band = self._band(self.max_span)

        # costs are translation invariant; centring keeps Gram-based sums well conditioned
        centred = np.ascontiguousarray(poses - poses.mean(axis=0))
        lowest = self._lowest_previous(band)
        table_s = self._table_seconds(poses.shape[1], self.max_span, band)
        select_s = float(self._select_steps(band, self.max_keys).sum()) \
            / SELECT_STEPS_PER_SECOND
        #: seconds the table and the DP should take on the reference two-core machine (the
        #: estimate that planned the analysis; compare with :attr:`timings`)
        self.estimated_s = table_s + select_s
        share = 0.05 + 0.9 * table_s / max(table_s + select_s, 1e-12)
        message = f"{self.cost.name} table, {m} candidate frames"
        report(0.05, message)
        t0 = time.perf_counter()
        self._table = self.cost.table(centred, self._candidates, band, self.max_span, lowest,
                                      progress=lambda f: report(0.05 + (share - 0.05) * f,
                                                                message))
        t1 = time.perf_counter()
        self._start_select(band, lowest, compose == "sum")
        self._on_demand = on_demand
        self._solving = threading.Lock()
        if on_demand is None:
            self._solve_to(self.max_keys, lambda f, text: report(share + (0.95 - share) * f,
                                                                 text))
        else:  # up to the smallest feasible K (doubling: the DP of a K costs about the same)
            while not np.isfinite(self._errors[:self._solved + 1]).any() \
                    and self._solved < self.max_keys:
                self._solve_to(min(2 * self._solved, self.max_keys), lambda f, text: on_demand())
        t2 = time.perf_counter()
        self.timings = {"table_s": t1 - t0, "select_s": t2 - t1}
        feasible = np.flatnonzero(np.isfinite(self._errors[:self._solved + 1]))
        if len(feasible) == 0:  # (said with what made it so: a span asked for, pins)
            spanned = self.max_span < self.n_frames - 1
            pinned = len(self._pins)
            rules = ([f"keys at most max_span {self.max_span} frames apart"] if spanned else []) \
                + ([f"the {pinned} pinned frames"] if pinned else [])
            fewest = self._fewest_keys(self.max_span)
            # (how many it takes: raising K to the cap given said it was out of range)
            needs = f" (they need at least {fewest} keys)" \
                if len(self._candidates) >= fewest > self.max_keys else ""
            raise SelectionError(f"no selection of at most {self.max_keys} keys has "
                                 f"{' and '.join(rules) or 'the first and last frames'}{needs}; "
                                 f"raise max_keys{' or max_span' if spanned else ''}",
                                 options=("max_keys", "max_span") if spanned else ("max_keys",))
        self.min_keys = int(feasible[0])
        self._poses = centred
        self._diameter: float | None = None

    def _start_select(self, band: int, lowest: np.ndarray, use_sum: bool) -> None:
        """Allocate the DP's arrays (nothing solved yet): ``error[K, last]`` for every K (inf
        where none or not solved yet), the back-pointer offsets (see
        :func:`_kernels.select_rows`; zero pages until their K is solved) and the two rows of
        errors the recursion carries from one K to the next."""
        m = len(self._candidates)
        narrow = np.uint8 if band <= 0xFF else np.uint16 if band <= 0xFFFF else np.int32
        # by max, a bound on each block of previous keys lets a cell skip most of them
        floors = np.empty((m, 0), dtype=np.int64) if use_sum \
            else _kernels.block_floors(self._table)
        # a long take with a narrow band is solved a tile of candidates and a batch of key
        # counts at a time (:func:`_kernels.select_tiles`: its rows stay in the caches);
        # a short one in sweeps of every candidate, which both threads share
        tile = max(_kernels.DP_TILE, band)
        tiled = m >= TILED_DP_TILES * tile
        self._dp = (floors, lowest, use_sum, self._select_steps(band, self.max_keys),
                    tile if tiled else 0)
        self._rows = np.full((_kernels.DP_TILE_KEYS + 1 if tiled else 2, m), np.inf)
        self._rows[1, 0] = 0.0  # one key: only the first candidate
        self._errors = np.full(self.max_keys + 1, np.inf)
        self._back = np.zeros((self.max_keys + 1, m), dtype=narrow)
        self._solved = 1  # the largest K solved

    def _solve_to(self, keys: int, report: Callable[[float, str], None]) -> None:
        """Run the DP up to ``keys`` key counts (from the last K solved), a few key counts per
        kernel call, with ``report(fraction, message)`` between calls."""
        floors, lowest, use_sum, steps, tile = self._dp
        threads = numba.get_num_threads()
        message = f"optimal selections for K up to {keys:,}"
        first = self._solved + 1
        report(0.0, message)

        def solve(start: int, stop: int) -> None:  # indices of the K to solve from `first`
            keys, stop = first + start, first + stop
            while keys < stop:  # again from where a worker stopped waiting (a busy machine)
                if tile:
                    batches = -(-(stop - keys) // _kernels.DP_TILE_KEYS)
                    keys = _kernels.select_tiles(
                        self._table, floors, lowest, keys, stop, use_sum, tile, threads,
                        _kernels.DP_PATIENCE, self._rows, self._errors, self._back,
                        np.full(-(-len(self._candidates) // tile), keys - 1, dtype=np.int64),
                        np.zeros(batches + 1, dtype=np.int64),
                        np.zeros(batches + 1, dtype=np.int64))
                    continue
                keys = _kernels.select_rows(
                    self._table, floors, lowest, keys, stop, use_sum, 2 * threads, threads,
                    _kernels.DP_PATIENCE, self._rows, self._errors, self._back,
                    np.zeros(stop - keys + 1, dtype=np.int64),
                    np.zeros(stop - keys + 1, dtype=np.int64))
            self._solved = stop - 1
        fill_in_blocks(steps[first - 2:keys - 1], solve, lambda f: report(f, message),
                       per_block=SELECT_BLOCK)

    def _need(self, keys: int) -> None:
        """Solve the DP up to ``keys`` if it was left to be solved on demand."""
        if keys <= self._solved or self._on_demand is None:
            return
        hook = self._on_demand
        with self._solving:  # one thread extends the DP, the others then find it solved
            if keys <= self._solved:
                return
            t = time.perf_counter()
            try:
                self._solve_to(keys, lambda f, text: hook())
            finally:
                self.timings["select_s"] += time.perf_counter() - t

    # ------------------------------------------------------------------------------ planning
    def _band(self, span: int) -> int:
        """The most candidate steps one segment of at most ``span`` frames can take."""
        c = self._candidates
        reach = np.searchsorted(c, c + span, side="right")
        return int((reach - np.arange(len(c))).max()) - 1

    def _select_steps(self, band: int, max_keys: int) -> np.ndarray:
        """(max_keys - 1,) float64: estimated DP steps of each K from 2 to ``max_keys``."""
        m = len(self._candidates)
        keys = np.arange(2, max_keys + 1, dtype=np.float64)
        cells = m - keys + 1  # candidates b >= K - 1; cell b composes min(band, b - K + 2)
        inside = np.minimum(cells, band)
        return inside * (inside + 1) / 2 + (cells - inside) * band + CELL_STEPS * cells

    def _table_seconds(self, dims: int, span: int, band: int) -> float:
        work = self.cost.row_work(self.n_frames, dims, self._candidates, band, span)
        return float(work.sum()) / self.cost.steps_per_second

    def _needs(self, dims: int, span: int, max_keys: int) -> tuple[dict[str, int], float]:
        """Bytes by part and estimated seconds of an analysis with this span and K."""
        n, m = self.n_frames, len(self._candidates)
        band = self._band(span)
        pointer = 1 if band <= 0xFF else 2 if band <= 0xFFFF else 4
        parts = {
            "error table": 8 * m * (band + 1) + (
                0 if self.compose == "sum" else 8 * m * -(-band // _kernels.FLOOR_BLOCK)),
            self.cost.buffers: self.cost.extra_bytes(n, dims, span),
            "selection arrays": pointer * (max_keys + 1) * m + 16 * m + 8 * (max_keys + 1),
            "poses": 16 * n * dims,
        }
        seconds = self._table_seconds(dims, span, band) \
            + float(self._select_steps(band, max_keys).sum()) / SELECT_STEPS_PER_SECOND
        return parts, seconds

    def _fewest_keys(self, span: int) -> int:
        """Fewest keys any selection with gaps of at most ``span`` frames needs (greedy: the
        farthest candidate in reach, stopping at every pin); ``m + 1`` if none exists."""
        c = self._candidates
        m = len(c)
        reach = np.searchsorted(c, c + span, side="right") - 1
        pins = iter(sorted(int(p) for p in self._pins))
        pin = next(pins, m)
        count, b = 1, 0
        while b < m - 1:
            while pin <= b:
                pin = next(pins, m)
            step = min(int(reach[b]), pin)
            if step <= b:
                return m + 1
            b, count = step, count + 1
        return count

    def _plan(self, dims: int, span: int | None, keys: int | None, limit: int,
              budget: float | None) -> tuple[int, int]:
        """``(max_span, max_keys)``: the exact space when it fits ``limit`` bytes and
        ``budget`` seconds, else a window (and a cap of K) that does; notes say which."""
        n, m = self.n_frames, len(self._candidates)
        shortest = int(np.diff(self._candidates).max())
        default_keys = min(max(m // 2, 2), m)

        def clamp(k: int) -> int:
            return min(max(k, 2), m)

        def fits(s: int, k: int) -> bool:
            parts, seconds = self._needs(dims, s, k)
            return sum(parts.values()) <= limit and (budget is None or seconds <= budget)

        def largest(test: Callable[[int], bool], low: int, high: int) -> int | None:
            """The largest x in [low, high] passing ``test`` (true below some x, false
            above)."""
            if high < low or not test(low):
                return None
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if test(middle) else (low, middle - 1)
            return low

        exact_span = n - 1 if span is None else span
        exact_keys = clamp(default_keys if keys is None else keys)
        if fits(exact_span, exact_keys):
            return exact_span, exact_keys
        if span is not None and keys is not None:
            parts, _ = self._needs(dims, span, exact_keys)
            if sum(parts.values()) <= limit:
                return span, exact_keys  # over the time estimate only: as the user asked
            self._refuse(dims, span, exact_keys, limit, budget, "")
        if span is None and keys is not None:
            # the widest window that fits and still holds a selection of max_keys keys
            low = shortest  # raised to the shortest window a selection of K keys can span
            if self._fewest_keys(low) > exact_keys:
                low = n - 1 - (largest(lambda t: self._fewest_keys(n - 1 - t) <= exact_keys,
                                       0, n - 1 - shortest) or 0)
            window = largest(lambda s: fits(s, exact_keys), low, n - 1)
            if window is None:
                self._refuse(dims, low, exact_keys, limit, budget, "max_span")
            self._note(window, None, dims, exact_span, exact_keys, limit, budget)
            return window, exact_keys
        if span is None:
            floor = max(shortest, min(SHORTEST_WINDOW, n - 1))
            window = largest(lambda s: fits(s, exact_keys), shortest, n - 1)
            if window is not None and window >= floor:
                self._note(window, None, dims, exact_span, exact_keys, limit, budget)
                return window, exact_keys
            # every K does not fit a useful window: give up the densest K first
            useful = clamp(int(np.ceil(USEFUL_KEYS * m)))
            window = largest(lambda s: fits(s, useful), shortest, n - 1)
            span = window if window is not None and window >= floor else floor
            automatic_span = True
        else:
            automatic_span = False
        fewest = self._fewest_keys(span)
        capped = largest(lambda k: fits(span, k), min(fewest, m), exact_keys)
        if capped is None:
            self._refuse(dims, span, min(fewest, m), limit, budget,
                         "max_span" if automatic_span else "")
        self._note(span if automatic_span else None, capped, dims, exact_span, exact_keys,
                   limit, budget)
        return span, capped

    def _note(self, window: int | None, capped: int | None, dims: int, exact_span: int,
              exact_keys: int, limit: int, budget: float | None) -> None:
        parts, seconds = self._needs(dims, exact_span, exact_keys)
        need = sum(parts.values())
        why = []
        if need > limit:
            why.append(f"{_size(need)} (limit {_size(limit)})")
        if budget is not None and seconds > budget:
            why.append(f"about {_duration(seconds)} (time budget {_duration(budget)})")
        text = "long take: "
        if window is not None:
            text += (f"keys at most {window:,} frames apart (max_span {window}): each selection is "
                     f"the best with no gap over {window:,} frames, exact for spans <= "
                     f"{window:,}; K from {self._fewest_keys(window):,}")
        if capped is not None:
            text += ("; " if window is not None else "") + f"K up to {capped:,} (max_keys)"
        self.notes.append(Note(text + f"; the exact space of K up to {exact_keys:,}"
                               + ("" if exact_span < self.n_frames - 1 else " and every span")
                               + f" would need {' and '.join(why)}",
                               options=("max_span", "max_keys")))

    def _refuse(self, dims: int, span: int, keys: int, limit: int, budget: float | None,
                fix: str) -> None:
        n, m = self.n_frames, len(self._candidates)
        parts, seconds = self._needs(dims, span, keys)
        total = sum(parts.values())
        detail = ", ".join(f"{k} {_size(v)}" for k, v in parts.items() if v)
        over = []
        if total > limit:
            over.append(f"needs {_size(total)} ({detail}), more than the limit of "
                        f"{_size(limit)}: raise memory_gib to "
                        f"{np.ceil(total / 1024**3 * 10) / 10:g}")
        if budget is not None and seconds > budget:
            over.append(f"takes about {_duration(seconds)}, more than the time budget of "
                        f"{_duration(budget)}: raise time_budget to "
                        f"{np.ceil(seconds * 10) / 10:g}")
        # the values as an option takes them (no thousands separators): flags on a command line
        smallest = f" even with the smallest plan (max_span {span}, max_keys {keys})" \
            if fix else f" (max_span {span}, max_keys {keys})"
        raise CapacityError(
            f"analysing {n:,} frames ({m:,} candidates){smallest} {'; and '.join(over)}; or "
            f"set stride (e.g. 4){', a smaller max_span' if not fix else ''}, fewer max_keys "
            "or a shorter range",
            options=("memory_gib", "time_budget", "max_span", "max_keys", "stride"))

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
        return cls(poses, first_frame=first, timed=bool(time_scale), **options)

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
                raise SelectionError(f"stride must be a whole number >= 1, got {stride!r}",
                                     options=("stride",))
            frames = np.arange(first, first + n)
            rows = np.flatnonzero(frames % int(stride) == 0)
        rows = np.union1d(rows, [0, n - 1]).astype(np.int64)
        pin_rows = []
        for p in sorted(set(pins)):
            if int(p) != p:
                raise SelectionError(f"pinned frame {p} is not a whole frame number")
            if not first <= p <= self.last_frame:
                raise SelectionError(f"pinned frame {p} is outside the range "
                                     f"{first}..{self.last_frame}")
            row = int(p) - first
            if row not in rows and candidates is not None:
                raise SelectionError(f"pinned frame {p} is not one of the candidate frames; pin "
                                     "one of them or add it to candidates")
            if row not in rows:
                # (the fronts have no candidates of their own: they offer the stride, and the
                # nearest frames it keeps)
                at = int(np.searchsorted(rows, row))
                near = " or ".join(str(int(rows[i]) + first) for i in (at - 1, at))
                raise SelectionError(f"pinned frame {p} is not a candidate frame at stride "
                                     f"{stride} (frames divisible by {stride}, the first and the "
                                     f"last); pin {near}, or lower stride (1 makes every frame "
                                     "a candidate)", options=("stride",))
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
    def solved(self) -> int:
        """The largest K whose selection is solved: :attr:`max_keys`, unless the space was
        built ``on_demand`` and nothing has asked for it yet (reading a K above solves up to
        it first)."""
        return self._solved

    @property
    def key_counts(self) -> np.ndarray:
        """(n,) int64: every K from :attr:`min_keys` to :attr:`max_keys`."""
        return np.arange(self.min_keys, self.max_keys + 1)

    @property
    def errors(self) -> np.ndarray:
        """(n,) float64: ``error(K)`` for every K of :attr:`key_counts` (inf where infeasible)."""
        self._need(self.max_keys)
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
        keys = self._check_k(keys)
        self._need(keys)
        return float(self._errors[keys])

    def keyframes(self, keys: int) -> np.ndarray:
        """(keys,) int64: the optimal keyframes as ascending host frames."""
        keys = self._check_k(keys)
        self._need(keys)
        if not np.isfinite(self._errors[keys]):
            raise SelectionError(f"no selection of exactly {keys} keys meets the constraints "
                                 "(max_span, pins); choose another K",
                                 options=("max_span", "pins"))
        out = np.empty(keys, dtype=np.int64)
        b = len(self._candidates) - 1
        for slot in range(keys - 1, 0, -1):
            out[slot] = self._candidates[b]
            b -= int(self._back[slot + 1, b])
        out[0] = self._candidates[b]
        return out + self.first_frame

    def segment_costs(self, frames: Sequence[int]) -> np.ndarray:
        """(len(frames) - 1,) float64: the table cost of each consecutive pair of key frames."""
        rows = np.searchsorted(self._candidates, np.asarray(frames) - self.first_frame)
        d = rows[1:] - rows[:-1]
        return self._table[rows[1:], d]

    # --------------------------------------------------------------------------- suggestions
    @property
    def still(self) -> bool:
        """Whether the poses (the time column of a timed cost aside) are the same on every
        frame: then every selection costs nothing and any K and keys are as good as another
        (nodes that do not move, or weights of 0). The same kinematics give the same
        positions to the bit, so equal is exact here."""
        p = self._poses[:, :-1] if self._timed else self._poses
        return bool(p.size == 0 or np.ptp(p, axis=0).max() == 0.0)

    @property
    def diameter(self) -> float:
        """Largest distance between two poses of the range (pose units; candidates only when the
        range has more than 4,000 candidate frames, to stay fast)."""
        if self._diameter is None:
            rows = self._candidates
            if len(rows) > 4000:
                rows = rows[:: -(-len(rows) // 4000)]
            p = self._poses[rows][:, :-1] if self._timed else self._poses[rows]
            sq = np.einsum("ij,ij->i", p, p)
            best = 0.0
            for s in range(0, len(p), 1024):
                block = sq[s:s + 1024, None] + sq[None, :] - 2.0 * p[s:s + 1024] @ p.T
                best = max(best, float(block.max()))
            self._diameter = float(np.sqrt(max(best, 0.0)))
        return self._diameter

    def normalised_errors(self) -> np.ndarray:
        """:attr:`errors` as a fraction of :attr:`diameter`.

        Costs in squared units (sums of squared distances) become distances first: composed
        by ``max``, sqrt(error × K / frames), the root mean square of the worst segment were
        it of average length, which tracks ``line-max`` on real clips (the threshold rule's
        5 % picks K = 14, 5 and 8 on the sample and its walk and stop takes, against 15, 5
        and 9); composed by ``sum``, error / (diameter² × frames), the mean square fraction
        the layered mode's keypose threshold is tuned on.
        """
        if self.diameter <= 0:
            return np.zeros_like(self.errors)
        if not self.cost.squared:
            return self.errors / self.diameter
        if self.compose == "sum":
            return self.errors / (self.diameter ** 2 * self.n_frames)
        return np.sqrt(np.maximum(self.errors, 0.0) * self.key_counts / self.n_frames) \
            / self.diameter

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
        error, so the test is the same at every scale), and by more than either neighbour. The
        error is the normalised one (:meth:`normalised_errors`): a distance, also for costs in
        squared units, whose raw drops would be twice as steep and find "cliffs" in the noise
        of large K.

        Returns
        -------
        list of int
            Up to ``count`` K values, strongest first.
        """
        e = self.normalised_errors()
        finite = np.isfinite(e)
        if finite.sum() < 3:
            return []
        floor = max(float(e[finite].max()) * 1e-9, 1e-300)
        log_e = np.log(np.maximum(np.where(finite, e, e[finite].max()), floor))
        drop = np.concatenate([[0.0], log_e[:-1] - log_e[1:]])  # drop[i]: from K_i - 1 to K_i
        # the cheap tests for every K at once (a loop over the K of a long take held the UI
        # thread for 0.15 s), the window's mean for the few K left
        tried = ~(drop[1:] < np.log(1 / 0.9)) & ~(e[:-1] <= floor)
        tried[1:] &= drop[2:] > drop[1:-1]  # above the neighbour before...
        tried[:-1] &= drop[1:-1] > drop[2:]  # ...and the one after
        scores = []
        for i in np.flatnonzero(tried) + 1:
            around = np.concatenate([drop[max(1, i - window):i], drop[i + 1:i + 1 + window]])
            base = float(np.mean(np.maximum(around, 0.0))) if len(around) else 0.0
            if drop[i] >= ratio * base:
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
