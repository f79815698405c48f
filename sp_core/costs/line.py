"""Shared machinery of the costs that compare in-between poses with a line through the keys."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from sp_core import _kernels
from sp_core.costs.base import Cost


class GramLineCost(Cost):
    """A line cost computed from Gram bands (see :func:`sp_core._kernels.line_table`).

    Subclasses choose the distance with :attr:`timed`: False for the perpendicular distance to
    the line, True for the distance to the time-aligned point on it.
    """

    timed: ClassVar[bool] = False

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int) -> np.ndarray:
        forward, backward = _kernels.gram_bands(poses, max_gap)
        return _kernels.line_table(forward, backward, candidates, band, max_gap, self.timed)
