"""The smallest K whose reduction keeps the joint error within a tolerance (the default K).

What K buys is mostly the *mean* error: the corrective keys (:mod:`sp_core.corrective`) bring the
worst frames down to the tolerance's max for a few keys, but lower the mean only a little. So the
search spends its fits where they are cheap:

1. a bisection with the channel fit (milliseconds per K), pose keys alone: the world fit never
   has a larger mean than the channel fit it starts from, so the K found there bounds the
   answer from above;
2. a bisection with the real fit (the world fit, tenths of a second) below that bound, pose keys
   alone, on the mean (and on the max too when no corrective keys may be spent);
3. that K checked with the corrective keys (seconds), raised until it meets the tolerance;
4. one or two smaller K tried with the corrective keys, where the mean the pose keys leave,
   lowered as much as the corrective keys lowered it at the K found, is within the tolerance.

Every K returned was checked with exactly the reduction :func:`sp_core.reduction.reduce` gives
(so it meets the tolerance); a smaller K might too, since the error of the fitted curves falls
with K closely but not strictly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sp_core.clip import Clip
from sp_core.errors import SelectionError
from sp_core.options import FitOptions
from sp_core.reduction import Reduction, reduce, with_corrections
from sp_core.selection import SelectionSpace

#: Shares of the search's progress: the channel bisection, the fitted bisection, the checks.
STAGES = (0.05, 0.35, 0.60)
#: Smaller K tried with the corrective keys after the first K that meets the tolerance.
TRIES_BELOW = 2


class ToleranceSearch:
    """One search over the K of ``space`` for ``motion``.

    Parameters
    ----------
    space : SelectionSpace
    motion : Clip
        The analysed range.
    fit : FitOptions
        Tangents, smoothness, fitting space and iterations of the reduction.
    budget : str, optional
        Corrective budget (``N`` keys or ``"P%"``; None: pose keys only).
    report : callable, optional
        ``report(fraction, message)`` with the fraction of the search done; it may raise (a
        cancellation), which abandons the search.

    Attributes
    ----------
    fitted : dict of tuple of int to Reduction
        The reductions checked against the tolerance that are exactly what
        :func:`~sp_core.reduction.reduce` gives with these options (by keyframes), for a
        caller to reuse.
    """

    def __init__(self, space: SelectionSpace, motion: Clip, fit: FitOptions,
                 budget: str | None = None,
                 report: Callable[[float, str], None] | None = None) -> None:
        self.space, self.motion, self.fit, self.budget = space, motion, fit, budget
        self.report = report or (lambda fraction, message: None)
        self.fitted: dict[tuple[int, ...], Reduction] = {}
        self._pose: dict[tuple[int, str], tuple[float, float]] = {}
        self._full: dict[int, tuple[float, float]] = {}
        self._last: tuple[int, Reduction] | None = None  # the latest pose-key world fit
        self._fraction = 0.0
        self._message = "choosing K"
        self.tolerance = (math.inf, math.inf)

    # ------------------------------------------------------------------ fits
    def _progress(self, fraction: float, message: str | None = None) -> None:
        self._fraction = max(self._fraction, fraction)
        self._message = message or self._message
        self.report(self._fraction, self._message)

    def _reduce(self, k: int, fit_space: str,
                progress: Callable[[float, str], None] | None = None) -> Reduction:
        fit = self.fit
        return reduce(self.motion, self.space.keyframes(k), tangents=fit.tangents,
                      smoothness=fit.smoothness, space=fit_space,
                      world_iterations=fit.world_iterations, objective=fit.objective,
                      progress=progress, key_values=fit.key_values)

    def pose_error(self, k: int, fit_space: str) -> tuple[float, float]:
        """(mean, max) mm of the pose keys alone at ``k`` with the fit in ``fit_space``."""
        if (k, fit_space) not in self._pose:
            # the bar moves by the bisection's steps; the messages (and cancel checks) by the
            # fit's iterations
            plain = self._reduce(k, fit_space,
                                 lambda f, m: self._progress(self._fraction, f"K = {k}: {m}"))
            metrics = plain.metrics
            self._pose[k, fit_space] = (metrics.mean_mm, metrics.max_mm)
            if fit_space == self.fit.space:
                self._last = (k, plain)  # error() checks it next, and keeps what it checks
            self._progress(self._fraction, f"K = {k}: pose keys alone mean {metrics.mean_mm:.2f}"
                                           f" mm, max {metrics.max_mm:.1f} mm ({fit_space} fit)")
        return self._pose[k, fit_space]

    def error(self, k: int, start: float, stop: float) -> tuple[float, float]:
        """(mean, max) mm at ``k`` of the reduction the tolerance would write (pose keys and,
        where the pose keys miss the max, corrective keys); progress from ``start`` to
        ``stop``."""
        if k in self._full:
            return self._full[k]
        mean_mm, max_mm = self.tolerance
        plain = self._last[1] if self._last is not None and self._last[0] == k else None
        if plain is None:
            plain = self._reduce(k, self.fit.space,
                                 lambda f, m: self._progress(start + 0.3 * (stop - start) * f,
                                                             f"K = {k}: {m}"))
        metrics = plain.metrics
        self._pose.setdefault((k, self.fit.space), (metrics.mean_mm, metrics.max_mm))
        if self.budget:  # (no corrective key where the pose keys already meet the max)
            plain = with_corrections(
                self.motion, plain, self.budget, max_mm,
                lambda f, m: self._progress(start + (stop - start) * (0.3 + 0.7 * f),
                                            f"K = {k}: {m}"))
            metrics = plain.metrics
        self.fitted[_frames(plain)] = plain  # exactly what reduce() gives at this K
        self._full[k] = (metrics.mean_mm, metrics.max_mm)
        self._progress(stop, f"K = {k}: mean {metrics.mean_mm:.2f} mm, max "
                             f"{metrics.max_mm:.1f} mm ({self.fit.space} fit, {metrics.keys} "
                             "keys)")
        return self._full[k]

    def meets(self, k: int, start: float, stop: float) -> bool:
        mean, worst = self.error(k, start, stop)
        return mean <= self.tolerance[0] and worst <= self.tolerance[1]

    # ------------------------------------------------------------------ search
    def _bisect(self, low: int, high: int, good: Callable[[int], bool], start: float,
                stop: float) -> int:
        """The smallest K in [low, high] for which ``good`` holds, assuming it holds at
        ``high`` and from some K on (progress from ``start`` to ``stop``)."""
        steps = max(1, math.ceil(math.log2(high - low + 1)))
        done = 0
        while low < high:
            middle = (low + high) // 2
            if good(middle):
                high = middle
            else:
                low = middle + 1
            done += 1
            self._progress(start + (stop - start) * min(done / steps, 1.0))
        return high

    def smallest_k(self, mean_mm: float, max_mm: float) -> int:
        """The smallest K within mean ``mean_mm`` and max ``max_mm`` (mm at 1.7 m) found by
        the stages of the module docstring.

        Raises
        ------
        SelectionError
            Even the largest K of the space misses the tolerance (the message gives its
            error).
        """
        self.tolerance = (mean_mm, max_mm)
        space, fit = self.space, self.fit
        low, high = space.min_keys, space.max_keys
        corrected = bool(self.budget)  # the corrective keys see to the max

        def pose_ok(k: int, fit_space: str) -> bool:
            mean, worst = self.pose_error(k, fit_space)
            return mean <= mean_mm and (corrected or worst <= max_mm)

        one, two, _three = STAGES
        bound = high
        if fit.space == "world" and pose_ok(high, "channel"):
            bound = self._bisect(low, high, lambda k: pose_ok(k, "channel"), 0.0, one)
        self._progress(one, f"K at most {bound} (channel fit)")
        if pose_ok(bound, fit.space):
            k = self._bisect(low, bound, lambda k: pose_ok(k, fit.space), one, one + two)
        else:
            k = bound
        self._progress(one + two, f"checking K = {k} with the {fit.space} fit")
        checks = 0

        def span() -> tuple[float, float]:
            # each check takes half of what is left of the progress bar
            nonlocal checks
            left = 1.0 - (one + two)
            start = one + two + left * (1.0 - 0.5 ** checks)
            checks += 1
            return start, one + two + left * (1.0 - 0.5 ** checks)

        while not self.meets(k, *span()):
            mean, worst = self._full[k]
            if k == high:
                raise SelectionError(
                    f"no K up to {high} keeps the error within mean {mean_mm:g} mm and max "
                    f"{max_mm:g} mm (K = {high} gives mean {mean:.2f} mm, max {worst:.1f} mm"
                    f" with the {fit.space} fit); raise --max-keys or loosen --tolerance")
            # a near miss of the max (the corrective keys gave up on a frame or two) is
            # often met by the next K; a far one needs more keys
            near = mean <= mean_mm and worst <= 1.1 * max_mm
            k = min(high, k + (1 if near else max(1, k // 10)))
        if corrected:
            k = self._below(k, low, span)
        self._progress(1.0, f"K = {k}")
        return k

    def _below(self, k: int, low: int, span: Callable[[], tuple[float, float]]) -> int:
        """Stage 4: smaller K whose pose-key mean, lowered by the corrective keys' share at
        ``k``, is within the tolerance, checked with the corrective keys (at most
        :data:`TRIES_BELOW` checks; K already found to miss are skipped)."""
        mean_mm = self.tolerance[0]
        for _ in range(TRIES_BELOW):
            pose_mean = self.pose_error(k, self.fit.space)[0]
            lowered = self._full[k][0] / pose_mean if pose_mean > 0 else 1.0
            if lowered >= 1.0 or k <= low:
                return k

            def expected(j: int, lowered: float = lowered) -> bool:
                return self.pose_error(j, self.fit.space)[0] * lowered <= mean_mm

            if not expected(k - 1):
                return k
            # gallop down from k - 1 (the answer is usually a K or two below), then bisect
            good, step = k - 1, 1
            while good - step >= low and expected(good - step):
                good, step = good - step, 2 * step
            first = self._bisect(max(low, good - step + 1), good, expected, self._fraction,
                                 self._fraction)
            untried = [j for j in range(first, k) if j not in self._full]
            if not untried:
                return k
            if self.meets(untried[0], *span()):
                k = untried[0]
        return k


def _frames(reduction: Reduction) -> tuple[int, ...]:
    """The keyframes of ``reduction`` (host frames), as the session keys its fits."""
    return tuple(int(f) for f in reduction.curves.frames)
