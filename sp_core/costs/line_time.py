"""``line-time``: distance to the time-aligned (linear in-between) interpolation of the keys."""

from __future__ import annotations

import numpy as np

from sp_core import _kernels
from sp_core.costs.base import Cost, register


@register
class LineTime(Cost):
    """Largest distance from pose k to ``pose_i + (k - i) / (j - i) * (pose_j - pose_i)``.

    This is what the animator sees with linear in-betweens: unlike ``line-max`` it also counts
    poses that lie on the line but arrive at the wrong time.
    """

    name = "line-time"
    description = "largest distance from the in-between poses to linear in-betweens of the keys"

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int) -> np.ndarray:
        forward, backward = _kernels.gram_bands(poses, max_gap)
        return _kernels.line_table(forward, backward, candidates, band, max_gap, True)
