"""Plot axes of whole numbers: key counts and frames are never fractional.

pyqtgraph spaces ticks by powers of ten and halves of them, so a view of a few frames or key
counts (a 2-frame clip: 0 to 1) read 0.1, 0.2, ... or 1.5, 2.5: frames that do not exist.
"""

from __future__ import annotations

import math

import pyqtgraph as pg


class WholeNumberAxis(pg.AxisItem):
    """An axis whose ticks fall on whole numbers only (at least one apart)."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802
        """pyqtgraph's levels of ticks without those under one apart (or off whole numbers);
        a view narrower than pyqtgraph's finest whole level gets the whole numbers in it."""
        levels = [(spacing, [v for v in values if float(v).is_integer()])
                  for spacing, values in super().tickValues(minVal, maxVal, size)
                  if spacing >= 1]
        if not levels:
            low, high = sorted((minVal, maxVal))
            levels = [(1.0, [float(v) for v in range(math.ceil(low), math.floor(high) + 1)])]
        return levels
