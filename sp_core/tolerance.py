"""The smallest K whose reduction keeps the joint error within a tolerance (the default K).

What K buys is mostly the *mean* error: the corrective keys (:mod:`sp_core.corrective`) bring the
worst frames down to the tolerance's max for a few keys, but lower the mean only a little. So the
search spends its fits where they are cheap:

1. a search with the channel fit the world fit starts from (a twentieth of a world fit),
   pose keys alone: the world fit never has a larger mean than its start, so the K found
   there bounds the answer from above. A bound is all stage 2 needs, so this search ends at
   a K that meets once the power law through its latest two tries puts the tolerance there
   or above, without fitting the K below it that the law foresees missing (the sample at
   2 mm: K = 53 met, and 52, which missed, is no longer fitted);
2. a search with the real fit (the world fit, tenths of a second) below that bound, pose keys
   alone, on the mean (and on the max too when no corrective keys may be spent).

   With corrective keys (the default) both searches try where the fits predict the mean is
   met instead of bisecting: the mean falls about as a power law of K, so each next try is
   where the power law through the latest two tries meets the tolerance; the real fit's
   first try is where the start fits' power law meets it over :data:`RATIO_PRIOR` (the
   real fit's mean is 0.63-0.89 of its start's on the shared takes), or where it meets the
   tolerance itself if :func:`~sp_core.reduction.reduce` would skip the world fit there (a
   long take past its flops limit: the real fit is then a channel fit, whose mean is about
   its start's). A bracket of a K that meets and one that misses is kept, and halved when
   the predictions stop narrowing it.
   On the sample (default tolerance) this takes 3 start fits and 1 world fit instead of a
   bisection's 10 and 6, and stage 2 returns what a bisection returns: a K that meets the
   mean above one that misses (from K = 200 on, one that misses within 1 % below it:
   :data:`PRECISION`). Without corrective keys the max decides too, which follows no power
   law: both are bisections;
3. that K checked with the corrective keys (seconds), raised until it meets the tolerance (by
   one K at a time while the mean is met, at first, and where the mean is missed as far as
   the power law puts it, a tenth at most; by a tenth after that). While the mean is met, a
   K is stepped over, not checked, when its keys around a frame that missed the max are
   the keys that frame had when it missed
   (:meth:`ToleranceSearch.repeats_miss`). The corrective keys gave that frame up for what
   the keys around it leave there, and they give it up again. A 10,000-frame take (the
   sample played forwards and backwards) missed 20 mm by 0.59 mm at the same elbow pose for
   eleven K in a row, 20.59 mm each time, at a world fit and a corrective stage (9 s) each:
   every fix that lowered that frame turned a joint faster than the capture does there;
   the K below it is checked first when its pose keys miss the mean by at most
   :data:`NEAR_MISS`. With corrective keys such a near miss is checked as soon as stage 2
   fits it, and if it meets, stage 2 ends there: the fits that would close the bracket above
   it are spared (a 5,000-frame take: a world fit and a corrective stage). So it does where
   it meets the mean and misses the max, if the K above it is foreseen to miss there too:
   stage 3 steps over those K from it (the 10,000-frame take: two world fits, 10 s). Stage
   2's K is stepped over in the same way when a near miss it checked missed the max with the
   same keys around;
4. the K below it tried with the corrective keys, down to :data:`TRIES_BELOW` below it, where
   the mean its pose keys leave, lowered as much as the corrective keys lowered it at the K
   above, is within the tolerance: first the lowest of them whose pose keys the search
   fitted already (on a long take stage 2 stops up to 1 % below K, so that K costs a
   corrective stage instead of a world fit and a corrective stage for every K between),
   then one at a time from the top while they meet, fitting none whose pose-key mean the
   power law through the K above foresees missing by more than :data:`FORESIGHT` and
   checking none foreseen to miss the max (:meth:`ToleranceSearch.repeats_miss`). From
   K = 200 on, only the first: the others are within :data:`PRECISION` of K, which stage 2
   does not tell apart either, for a world fit each (a 10,000-frame take: 6.8 s, then a
   corrective stage of 4.9 s that found 477 missing the max by 0.003 mm).

Every K returned was checked with exactly the reduction :func:`sp_core.reduction.reduce` gives
(so it meets the tolerance); a smaller K might too, since the error of the fitted curves falls
with K closely but not strictly.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from sp_core import reduction as reduction_module
from sp_core.clip import Clip
from sp_core.corrective import budget_keys
from sp_core.errors import SelectionError
from sp_core.fitting import joint_errors
from sp_core.options import FitOptions
from sp_core.reduction import Reduction, constant_channels, reduce, with_corrections
from sp_core.selection import SelectionSpace

#: Shares of the search's progress: the channel bisection, the fitted search, the checks.
STAGES = (0.05, 0.35, 0.60)
#: What each check leaves of the checks' share of the progress for the checks after it.
CHECK_REST = 0.15
#: Tries of a predicted search (stages 1 and 2) that its share of the progress is cut into.
GUIDED_TRIES = 3
#: The fit stages 1 and 2 bound and predict with: the channel fit the world fit starts from
#: (:func:`~sp_core.reduction.reduce`'s ``start_only``).
START = "start"
#: The real fit's mean over its start's, assumed before the first real fit: 0.71-0.89 on the
#: shared takes near their default K with the world fit's anchor at 0.05 (0.63-0.89 at 0.01,
#: with a prior of 0.75, which put the sample's first try at K = 47, two below its K now).
RATIO_PRIOR = 0.82
#: d log(mean) / d log(K) of the real fit assumed while one K is fitted (the mean falls about
#: as K^-2 near the default K on the shared takes); measured ones are kept within
#: [2, 1/4] times it.
SLOPE_PRIOR = -2.0
#: How far below the first K that meets the tolerance smaller K are tried with the corrective
#: keys.
TRIES_BELOW = 2
#: Steps shorter than a tenth of K in a row in stage 3 (one K above a K whose reduction meets
#: the mean but misses the max by more than 10 %, or as far as the power law puts a missed
#: mean) before raising K by a tenth.
STEPS_ABOVE = 3
#: Frames on each side of a frame that missed the max whose keys :meth:`ToleranceSearch.
#: repeats_miss` compares (the corrective keys' widest hat reaches 16 frames and a candidate
#: is checked on every frame it touches), and keys beyond those on each side (the fitted
#: curve there depends on the keys' values and slopes, which the neighbouring segments share).
MISS_FRAMES = 32
MISS_KEYS = 2
#: Share of its corrective budget a check may spend for its misses to be taken as given up
#: (:meth:`ToleranceSearch.repeats_miss`): above it the budget may be what stopped them.
MISS_BUDGET = 0.9
#: Frames missed a check keeps (its worst): one frame foreseen to miss again is enough to step
#: over a K, and a check that missed on thousands of frames would otherwise be compared frame
#: by frame for every K stepped over.
MISS_KEPT = 16
#: A K whose pose keys miss the mean by at most this fraction is checked with the corrective
#: keys first (before the smallest K whose pose keys meet it): the corrective keys lowered
#: the mean by 2-4 % on the shared takes, so such a K often meets the tolerance, and checking
#: it first saves the larger K's check (a corrective stage, seconds).
NEAR_MISS = 0.03
#: The predicted searches (stages 1 and 2) stop once their bracket is at most this share of
#: K wide (and one K below 200): on a long take the last fits there decide between K that
#: differ by under 1 %, which no animator would notice, for a fit each (seconds on a take of
#: thousands of frames: a 5,000-frame take's stage 2 needed 4 world fits, now 3, and its
#: checks one corrective stage fewer; same K).
PRECISION = 0.01
#: Stage 4 fits no K whose pose-key mean, as the power law of :data:`SLOPE_PRIOR` through the
#: K above it foresees it and lowered by the corrective keys' share there, misses the
#: tolerance by more than this fraction: that law over-predicted the K below's mean by 1.0 %
#: at most on the shared takes (four takes at tolerances of 1 to 4 mm), and each such world
#: fit only found the K missing (on the sample at the default tolerance: K = 48, foreseen
#: 1.2 % over, fitted 0.4 % over, a quarter of the default reduce's time).
FORESIGHT = 0.01
#: Pose-key reductions in the real fit kept for the checks (the latest ones: the checks
#: follow the search closely; each holds two dense (frames, channels) arrays).
KEPT_FITS = 4


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
        self._kept: OrderedDict[int, Reduction] = OrderedDict()  # latest real pose-key fits
        # each check that missed the max with budget to spare: the keys around each frame it
        # missed on (see repeats_miss)
        self._misses: list[list[tuple[int, tuple[int, ...]]]] = []
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
        start = fit_space == START
        if k > self.space.solved:  # a space solved on demand: its DP runs up to k first
            self._progress(self._fraction, f"K = {k}: optimal keyframes (selections up to "
                                           f"K = {k:,})")
        return reduce(self.motion, self.space.keyframes(k), tangents=fit.tangents,
                      smoothness=fit.smoothness, space=fit.space if start else fit_space,
                      world_iterations=fit.world_iterations, objective=fit.objective,
                      progress=progress, key_values=fit.key_values, start_only=start)

    def skips_world_fit(self, k: int) -> bool:
        """Whether :func:`~sp_core.reduction.reduce` would fit ``k`` keys of the analysed range
        in channel space instead of world space (its flops limit; a long take)."""
        fit = self.fit
        motion = self.motion
        return fit.space == "world" and bool(reduction_module.reduction_flops(
            motion, k, ~constant_channels(motion.channels), fit.world_iterations,
            fit.key_values, fit.objective) > reduction_module.WORLD_FIT_FLOP_LIMIT)

    def pose_error(self, k: int, fit_space: str, start: float | None = None,
                   stop: float | None = None) -> tuple[float, float]:
        """(mean, max) mm of the pose keys alone at ``k`` with the fit in ``fit_space``; a fit
        moves the progress from ``start`` to ``stop`` if they are given (else only its
        messages and cancel checks go on while the bar stays)."""
        if (k, fit_space) not in self._pose:
            low = self._fraction if start is None else start
            high = low if stop is None else stop
            plain = self._reduce(k, fit_space,
                                 lambda f, m: self._progress(low + (high - low) * f,
                                                             f"K = {k}: {m}"))
            metrics = plain.metrics
            self._pose[k, fit_space] = (metrics.mean_mm, metrics.max_mm)
            if fit_space == self.fit.space:  # error() may check it next
                self._kept[k] = plain
                while len(self._kept) > KEPT_FITS:
                    self._kept.popitem(last=False)
            label = "channel" if fit_space == START else fit_space
            self._progress(self._fraction, f"K = {k}: pose keys alone mean {metrics.mean_mm:.2f}"
                                           f" mm, max {metrics.max_mm:.1f} mm ({label} fit)")
        return self._pose[k, fit_space]

    def error(self, k: int, start: float, stop: float) -> tuple[float, float]:
        """(mean, max) mm at ``k`` of the reduction the tolerance would write (pose keys and,
        where the pose keys miss the max, corrective keys); progress from ``start`` to
        ``stop``."""
        if k in self._full:
            return self._full[k]
        mean_mm, max_mm = self.tolerance
        plain = self._kept.get(k)
        if plain is None:
            plain = self._reduce(k, self.fit.space,
                                 lambda f, m: self._progress(start + 0.3 * (stop - start) * f,
                                                             f"K = {k}: {m}"))
            start += 0.3 * (stop - start)  # the rest is the corrective keys'
        # (stage 2 fitted the pose keys already: the corrective keys take the whole span, and
        # the bar no longer jumped by the fit that was not run)
        metrics = plain.metrics
        self._pose.setdefault((k, self.fit.space), (metrics.mean_mm, metrics.max_mm))
        if self.budget:  # (no corrective key where the pose keys already meet the max)
            plain = with_corrections(
                self.motion, plain, self.budget, max_mm,
                lambda f, m: self._progress(start + (stop - start) * f, f"K = {k}: {m}"))
            metrics = plain.metrics
        self.fitted[_frames(plain)] = plain  # exactly what reduce() gives at this K
        self._full[k] = (metrics.mean_mm, metrics.max_mm)
        if self.budget and metrics.max_mm > max_mm and metrics.corrective_keys <= MISS_BUDGET \
                * budget_keys(self.budget, metrics.original_keys):
            self._misses.append(_keys_around(plain.curves.frames, self._missed(plain)))
        self._progress(stop, f"K = {k}: mean {metrics.mean_mm:.2f} mm, max "
                             f"{metrics.max_mm:.1f} mm ({self.fit.space} fit, {metrics.keys} "
                             "keys)")
        return self._full[k]

    def _missed(self, reduction: Reduction) -> list[int]:
        """The frames (host frames) on which ``reduction``'s worst joint misses the
        tolerance's max, the worst first, :data:`MISS_KEPT` at most."""
        metrics = reduction.metrics
        frames = reduction.frames
        rows = frames - self.motion.first_frame
        worst = joint_errors(self.motion, reduction.corrected,
                             self.motion.positions[rows]).max(axis=1)
        scale = metrics.max_mm / metrics.max if metrics.max > 0 else 0.0
        over = np.flatnonzero(worst * scale > self.tolerance[1])
        over = over[np.argsort(-worst[over], kind="stable")[:MISS_KEPT]]
        return [int(f) for f in frames[over]]

    def repeats_miss(self, k: int) -> bool:
        """Whether a check already made misses the max on a frame around which ``k``'s keys
        are the same (every key within :data:`MISS_FRAMES` of it and :data:`MISS_KEYS` beyond),
        so that ``k`` is foreseen to miss it too.

        The corrective keys give a frame up when no fix they try there is accepted (on the
        10,000-frame take of the module docstring, every fix that lowered its worst frame
        turned a joint faster than the capture does). What they try depends on the curves
        around the frame, and the keys around it decide those curves. Keys farther away
        change the world fit there by less than the checks can tell apart: that take missed
        by 20.59 mm at the same pose from K = 500 to 510 while the keys elsewhere changed. A
        check that spent more than :data:`MISS_BUDGET` of its budget is not used, because the
        budget may be what stopped it.
        """
        if not self._misses:
            return False
        keys = np.asarray(self.space.keyframes(k))
        return any(around == _keys_near(keys, frame) for missed in self._misses
                   for frame, around in missed)

    def _over_repeats(self, k: int, high: int, most: int) -> int:
        """The first K from ``k`` on that :meth:`repeats_miss` does not foresee missing, at
        most ``most`` above ``k`` and at most ``high``."""
        j = k
        while j - k < most and j < high and self.repeats_miss(j):
            j += 1
        return j

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

    def _guided(self, low: int, high: int, fit_space: str, first: int, start: float,
                stop: float, settles: Callable[[int], bool] | None = None, bound: bool = False
                ) -> tuple[int, list[int]]:
        """The smallest K in [low, high] whose pose-key mean with the fit in ``fit_space`` is
        within the tolerance, given that it is at ``high``, found by trying ``first``, then
        where a power law through the latest two K tried puts the tolerance (see the module
        docstring); the K returned meets the mean and ``K - 1`` (if at least ``low``) does
        not, as a bisection's would (or, from K = 200 on, a K within :data:`PRECISION` of K
        below it does not). ``settles(k)``, optional, is asked of every K that misses: if it
        holds, the search ends there and returns that K. ``bound``: a bound is all that is
        wanted (stage 1), so the search also ends at the K that meets once the power law puts
        the tolerance there or above (the try one K below it is foreseen to miss). Returns
        that K and the K tried, in order."""
        mean_mm = self.tolerance[0]

        def mean(j: int, step: int | None = None) -> float:
            # the fit of try `step` moves the bar through that try's share of it
            if step is None:
                return self.pose_error(j, fit_space)[0]
            share = (stop - start) / max(steps, step + 1)
            return self.pose_error(j, fit_space, start + share * step,
                                   start + share * (step + 1))[0]

        passed, failed = high, low - 1  # the bracket: holds at `passed`, not at `failed`
        # the bar's steps: the tries a search usually takes, not a bisection's (with those,
        # the two world fits of a 5,000-frame take's stage 2 moved it through 2 of 9 steps,
        # and it jumped over the rest when the stage ended)
        steps = max(1, min(math.ceil(math.log2(high - low + 1)), GUIDED_TRIES))
        edge = 0  # tries in a row that moved the bracket by one K only
        tried: list[int] = []
        guess = first
        while passed - failed > resolution(passed):
            k = min(max(guess, failed + 1), passed - 1)
            width = passed - failed
            if mean(k, len(tried)) <= mean_mm:
                passed = k
            else:
                failed = k
            tried.append(k)
            if failed == k and settles is not None and settles(k):
                return k, tried
            edge = edge + 1 if passed - failed == width - 1 else 0
            self._progress(start + (stop - start) * min(len(tried) / steps, 1.0))
            if edge >= 2:  # the predictions creep: halve the bracket instead
                guess = (failed + 1 + passed) // 2
            else:
                guess = power_law([(j, mean(j)) for j in tried[-2:]], mean_mm)
                if bound and guess >= passed:
                    break
        return passed, tried

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
        bound, bounded = high, False
        guided = corrected and fit.space == "world"  # the mean alone, which power laws follow
        first = high
        if guided:
            bound, tried = self._guided(low, high, START, round(math.sqrt(low * high)), 0.0,
                                        one, bound=True)
            # (the search assumed the start fit meets the mean at `high`: true unless it
            # ended there)
            bounded = bound < high or pose_ok(high, START)
            if tried:
                # the real fit's first try: where the start fits' power law puts the
                # tolerance over the typical ratio (the widest pair of start fits tried);
                # where the world fit would be skipped there (a long take past the flops
                # limit) the real fit is a channel fit, whose mean is about its start's
                # (72,000 frames: 1.987 mm at K = 3,875, the start fit 1.984 at 3,876)
                ends = sorted({tried[0], tried[-1], bound})
                points = [(j, self.pose_error(j, START)[0]) for j in (ends[0], ends[-1])]
                first = power_law(points, mean_mm)
                if not self.skips_world_fit(first):
                    first = power_law(points, mean_mm / RATIO_PRIOR)
        elif fit.space == "world" and pose_ok(high, START):
            bound = self._bisect(low, high, lambda k: pose_ok(k, START), 0.0, one)
        self._progress(one, f"K at most {bound} (channel fit)")
        checks = 0
        base = one + two  # where the checks' share of the bar starts

        def span() -> tuple[float, float]:
            # each check takes 85 % of what is left of the progress bar: the first
            # is often the last (with half, the bar jumped from 0.7 to the end after the one
            # corrective stage of a 5,000-frame take, the slowest part of its search); a near
            # miss checked in stage 2 starts where the bar is (it jumped over the rest of
            # stage 2's share first)
            nonlocal checks, base
            if not checks:
                base = min(base, self._fraction)
            left = 1.0 - base
            start = base + left * (1.0 - CHECK_REST ** checks)
            checks += 1
            return start, base + left * (1.0 - CHECK_REST ** checks)

        def near_miss(j: int, mean_only: bool = False) -> bool:
            # pose keys (fitted) that miss the mean by at most NEAR_MISS, which the corrective
            # keys often make up for: checked as soon as stage 2 fits them, a K that meets
            # spares the fits that would close the bracket above it (seconds each on a long
            # take); stage 3 asks it of the K below the one stage 2 found. Stage 2 also ends
            # at one whose corrective keys meet the mean and miss the max where the K above
            # it is foreseen to miss there too (`mean_only`; see repeats_miss): stage 3 steps
            # over those from it for free (the 10,000-frame take: 500 met the mean and missed
            # the max, and the world fits of 517 and 503, 10 s, only led stage 3 to 503, its
            # keys around the missed frame still 500's). Where nothing above is foreseen,
            # the bracket's fits go on: stage 3 checks the K they find first, not every K
            # between.
            if self.pose_error(j, fit.space)[0] > mean_mm * (1.0 + NEAR_MISS):
                return False
            mean, worst = self.error(j, *span())
            return mean <= mean_mm and (worst <= max_mm or mean_only and j + 1 < high
                                        and self.repeats_miss(j + 1))

        if guided and (bounded or pose_ok(bound, fit.space)):
            k, _ = self._guided(low, bound, fit.space, first, one, one + two,
                                lambda j: near_miss(j, mean_only=True))
        elif not pose_ok(bound, fit.space):
            k = bound
        else:  # the max too: the channel fit's means predict nothing of it
            k = self._bisect(low, bound, lambda k: pose_ok(k, fit.space), one, one + two)
        self._progress(one + two, f"checking K = {k} with the {fit.space} fit")
        if corrected and k > low and (k - 1, fit.space) in self._pose and near_miss(k - 1):
            k -= 1  # the corrective keys made up the pose keys' near miss of the mean
        if corrected and self._misses and k not in self._full \
                and self.pose_error(k, fit.space)[0] <= mean_mm:
            # stage 2's K, unchecked, with the mean met by its pose keys: over the K foreseen
            # to miss where a near miss checked in stage 2 missed the max (and the mean, so
            # that stage 2 went on), as after a check below (the 10,000-frame take, before
            # stage 2 ended at such near misses: K = 500 missed on frame 808, stage 2 ended
            # at 503, whose keys around 808 were 500's, and its corrective stage, 9 s,
            # missed there by the same 20.63 mm)
            k = self._over_repeats(k, high, max(1, k // 10))
        # steps of one K in a row (the first from a K that stage 2 checked is the step its
        # bracket's fits would have made: not counted)
        single = -1 if k in self._full else 0
        while not self.meets(k, *span()):
            mean, worst = self._full[k]
            if k == high:
                raise SelectionError(
                    f"no K up to {high} keeps the error within mean {mean_mm:g} mm and max "
                    f"{max_mm:g} mm (K = {high} gives mean {mean:.2f} mm, max {worst:.2f} mm"
                    f" with the {fit.space} fit"
                    f"{' and its corrective keys' if corrected else ''}); raise max_keys or "
                    "loosen tolerance",
                    options=("max_keys", "tolerance"))
            # with the mean met, the max is a frame or two the corrective keys gave up on,
            # which the next K's keys often reach (a 5,000-frame take: 23.7 mm at K = 234,
            # 21.0 at 235, 19.9 at 236), so the next few K come first; a missed mean is as
            # many K away as the power law puts it (a 10,000-frame take's mean missed by 0.4 %
            # at K = 383 is one K away, not a tenth); a max still missed after those needs a
            # tenth more keys
            tenth = max(1, k // 10)
            if single >= STEPS_ABOVE and not (mean <= mean_mm and worst <= 1.1 * max_mm):
                step = tenth
            elif mean > mean_mm:
                step = min(tenth, max(1, power_law([(k, mean)], mean_mm) - k))
            else:
                # over the K foreseen to miss where this one missed (see repeats_miss)
                step = self._over_repeats(k + 1, high, tenth - 1) - k
            single = single + 1 if step < tenth else 0
            k = min(high, k + step)
        if corrected:
            k = self._below(k, low, span)
        self._progress(1.0, f"K = {k}")
        return k

    def _below(self, k: int, low: int, span: Callable[[], tuple[float, float]]) -> int:
        """Stage 4: a smaller K than ``k`` (which meets the tolerance) that meets it too, down
        to :data:`TRIES_BELOW` below ``k``; else ``k``.

        A K is checked with the corrective keys only where its pose-key mean, lowered by the
        corrective keys' share at the K above it (at ``k`` for the first check), is within the
        tolerance. The lowest K whose pose keys were fitted already is checked first: it
        needs no world fit, and if it meets, the K between need none either. Then, below
        K = 200 (where :func:`resolution` is one K), the K below ``k`` (or below the K that
        met) one at a time while they meet; a K already found to miss ends the walk, and so
        does one whose pose keys are not fitted yet that :meth:`_foreseen` (lowered by that
        share) puts more than :data:`FORESIGHT` past the tolerance.
        """
        mean_mm = self.tolerance[0]
        space = self.fit.space
        floor = max(low, k - TRIES_BELOW)

        def lowered(j: int) -> float:
            # what the corrective keys multiplied the pose keys' mean by at j (1 or more:
            # they did not lower it)
            pose_mean = self.pose_error(j, space)[0]
            return self._full[j][0] / pose_mean if pose_mean > 0 else 1.0

        def predicted(j: int, share: float) -> bool:
            # j's pose-key mean, lowered by that share, within the tolerance (fits j)
            return self.pose_error(j, space)[0] * share <= mean_mm

        share = lowered(k)
        fitted = [j for j in range(floor, k) if (j, space) in self._pose
                  and j not in self._full and predicted(j, share) and not self.repeats_miss(j)]
        long_take = resolution(k) > 1
        if share < 1.0 and fitted and self.meets(fitted[0], *span()):
            k = fitted[0]
        if long_take:
            return k
        while k > floor:
            share, below = lowered(k), k - 1
            if share >= 1.0 or below in self._full:
                return k
            if (below, space) not in self._pose and self._foreseen(below, k) * share \
                    > mean_mm * (1.0 + FORESIGHT):
                return k  # its world fit would only say it misses
            if not predicted(below, share) or self.repeats_miss(below):
                return k
            if not self.meets(below, *span()):
                return k
            k = below
        return k

    def _foreseen(self, j: int, k: int) -> float:
        """The pose-key mean at ``j`` (not fitted) the power law of :data:`SLOPE_PRIOR` puts
        through the real fit's mean at ``k`` (fitted)."""
        return self.pose_error(k, self.fit.space)[0] * (j / k) ** SLOPE_PRIOR


def resolution(k: int) -> int:
    """How close below ``k`` a K that misses must be for a predicted search to stop at ``k``
    (see :data:`PRECISION`)."""
    return max(1, int(PRECISION * k))


def power_law(points: list[tuple[int, float]], target: float) -> int:
    """The smallest K at which a power law through ``points`` ((K, mean) pairs, the last one
    or two used; one: with the exponent :data:`SLOPE_PRIOR`) falls to ``target``."""
    k, mean = points[-1]
    if mean <= 0 or target <= 0:
        return k
    slope = SLOPE_PRIOR
    if len(points) > 1 and points[-2][0] != k and points[-2][1] > 0:
        other_k, other = points[-2]
        slope = math.log(mean / other) / math.log(k / other_k)
    slope = min(max(slope, SLOPE_PRIOR * 2.0), SLOPE_PRIOR / 4.0)  # a falling error
    return math.ceil(k * (target / mean) ** (1.0 / slope) - 1e-9)


def _keys_near(keys: np.ndarray, frame: int) -> tuple[int, ...]:
    """The keys (sorted frames) within :data:`MISS_FRAMES` of ``frame`` and the
    :data:`MISS_KEYS` beyond them on each side."""
    first = int(np.searchsorted(keys, frame - MISS_FRAMES)) - MISS_KEYS
    last = int(np.searchsorted(keys, frame + MISS_FRAMES, side="right")) + MISS_KEYS
    return tuple(int(f) for f in keys[max(first, 0):last])


def _keys_around(keys: np.ndarray, frames: list[int]) -> list[tuple[int, tuple[int, ...]]]:
    """Each of ``frames`` with its :func:`_keys_near` among ``keys`` (a check's keys and the
    frames it missed on)."""
    keys = np.asarray(keys)
    return [(f, _keys_near(keys, f)) for f in frames]


def _frames(reduction: Reduction) -> tuple[int, ...]:
    """The keyframes of ``reduction`` (host frames), as the session keys its fits."""
    return tuple(int(f) for f in reduction.curves.frames)
