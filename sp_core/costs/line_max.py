"""``line-max``: the paper's cost, the largest distance from a pose to the line through the keys."""

from __future__ import annotations

import numpy as np

from sp_core import _kernels
from sp_core.costs.base import Cost, register


@register
class LineMax(Cost):
    """Largest perpendicular distance from pose k (i < k < j) to the line through poses i and j.

    Where poses i and j coincide the line degenerates to a point and the distance to that point
    is used.
    """

    name = "line-max"
    description = "largest distance from the in-between poses to the line through the two keys"

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int) -> np.ndarray:
        forward, backward = _kernels.gram_bands(poses, max_gap)
        return _kernels.line_table(forward, backward, candidates, band, max_gap, False)
