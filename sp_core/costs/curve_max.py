"""``curve-max``: what cubic in-betweens cannot reproduce (the thesis' breakdown objective)."""

from __future__ import annotations

import numpy as np

from sp_core import _kernels
from sp_core.costs.base import Cost, register


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

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None) -> np.ndarray:
        # the expensive cost: skip pairs a pin separates (with keyposes pinned, this makes a
        # breakdown space cost the sum over keypose intervals instead of the whole band)
        if lowest is None:
            lowest = np.zeros(len(candidates), dtype=np.int64)
        return _kernels.curve_table(poses, candidates, band, max_gap,
                                    np.asarray(lowest, dtype=np.int64))
