"""``line-sse``: the thesis' robust variant, a sum of squared time-aligned distances."""

from __future__ import annotations

import numpy as np

from sp_core import _kernels
from sp_core.costs.base import Cost, register


@register
class LineSSE(Cost):
    """Sum over i < k < j of the squared distance from pose k to the linear in-between.

    Computed in O(n_pairs × n_dims) from prefix sums of the poses, not by visiting every frame
    of every pair. The table is in squared pose units.
    """

    name = "line-sse"
    description = "sum of squared distances from the in-between poses to linear in-betweens"

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None) -> np.ndarray:
        return _kernels.sse_table(poses, candidates, band, max_gap)
