"""A plain cubic Bézier evaluator for tests and fakes (written out, no engine code)."""

from __future__ import annotations

import numpy as np


def bezier_at(points, t: float) -> float:
    """Value of the Bézier through four (time, value) points at time ``t``, by bisection on
    the time polynomial (monotone for the handles hosts accept)."""
    p = np.asarray(points, dtype=float)
    lo, hi = 0.0, 1.0
    for _ in range(80):
        u = 0.5 * (lo + hi)
        x = ((1 - u)**3 * p[0, 0] + 3 * u * (1 - u)**2 * p[1, 0] + 3 * u**2 * (1 - u) * p[2, 0]
             + u**3 * p[3, 0])
        lo, hi = (u, hi) if x < t else (lo, u)
    u = 0.5 * (lo + hi)
    return float((1 - u)**3 * p[0, 1] + 3 * u * (1 - u)**2 * p[1, 1]
                 + 3 * u**2 * (1 - u) * p[2, 1] + u**3 * p[3, 1])
