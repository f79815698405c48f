"""``curve-max`` and ``curve-sse``: what cubic in-betweens cannot reproduce (the thesis'
breakdown objective, and its sum of squares)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sp_core.costs.base import Cost, empty_table, fill_in_blocks, register


@register
class CurveMax(Cost):
    """Largest distance from the poses between two keys to the cubic through the two keys' poses
    whose end tangents best fit those poses (least squares, as the reduction fits tangents).

    Low where smooth curve in-betweens already reproduce the motion, high where a breakdown is
    needed. O(span × n_dims) per pair: give whole clips a ``max_span`` (pairs separated by a pin
    are skipped).
    """

    name = "curve-max"
    description = "largest distance from the in-between poses to a fitted cubic between the keys"
    #: sum the squared distances instead of taking the largest (:class:`CurveSSE`)
    total = False
    steps_per_second = 1.0e9

    def row_work(self, n: int, dims: int, candidates: np.ndarray, band: int, max_gap: int,
                 lowest: np.ndarray | None = None) -> np.ndarray:
        # rows are the later key: its partners times their span, two passes of O(n_dims)
        m = len(candidates)
        first = np.arange(m) - band if lowest is None else np.maximum(lowest,
                                                                      np.arange(m) - band)
        first = np.maximum(first, 0)
        spans = np.minimum(candidates - candidates[first], max_gap)
        return ((np.arange(m) - first) * (spans / 2.0 + 1.0) + 1.0) * 2.0 * dims

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None,
              progress: Callable[[float], None] | None = None) -> np.ndarray:
        # the expensive cost: skip pairs a pin separates (with keyposes pinned, this makes a
        # breakdown space cost the sum over keypose intervals instead of the whole band)
        candidates = np.ascontiguousarray(candidates, dtype=np.int64)
        m = len(candidates)
        if lowest is None:
            lowest = np.zeros(m, dtype=np.int64)
        lowest = np.ascontiguousarray(lowest, dtype=np.int64)
        table = empty_table(m, band)
        work = self.row_work(*poses.shape, candidates, band, max_gap, lowest)

        from sp_core import _kernels

        def fill(first: int, stop: int) -> None:
            _kernels.curve_rows(poses, candidates, band, max_gap, lowest, table, first, stop,
                                self.total)
        fill_in_blocks(work, fill, progress)
        return table


@register
class CurveSSE(CurveMax):
    """Sum of squared distances from the poses between two keys to the least-squares cubic of
    :class:`CurveMax`, in squared pose units: a keyframe pair scored by the error of the curve
    the reduction will fit, which the mean error follows (``docs/quality.md`` measures it
    against the line costs).
    """

    name = "curve-sse"
    squared = True
    description = "sum of squared distances from the in-between poses to a fitted cubic"
    total = True
