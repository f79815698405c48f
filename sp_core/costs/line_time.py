"""``line-time``: distance to the time-aligned (linear in-between) interpolation of the keys."""

from __future__ import annotations

from sp_core.costs.base import register
from sp_core.costs.line import GramLineCost


@register
class LineTime(GramLineCost):
    """Largest distance from pose k to ``pose_i + (k - i) / (j - i) * (pose_j - pose_i)``.

    This is what the animator sees with linear in-betweens: unlike ``line-max`` it also counts
    poses that lie on the line but arrive at the wrong time.
    """

    name = "line-time"
    description = "largest distance from the in-between poses to linear in-betweens of the keys"
    timed = True
