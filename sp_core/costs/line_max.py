"""``line-max``: the paper's cost, the largest distance from a pose to the line through the keys."""

from __future__ import annotations

from sp_core.costs.base import register
from sp_core.costs.line import GramLineCost


@register
class LineMax(GramLineCost):
    """Largest perpendicular distance from pose k (i < k < j) to the line through poses i and j.

    Where poses i and j coincide the line degenerates to a point and the distance to that point
    is used.
    """

    name = "line-max"
    description = "largest distance from the in-between poses to the line through the two keys"
    timed = False
