"""Frame weights that make the worst frames count most in a least-squares refit.

A least-squares fit minimises the sum of squared errors, so a few bad frames weigh little next
to hundreds of good ones and the largest error is left where it falls. Iteratively reweighted
least squares moves that objective towards the worst frame: each round weighs every frame by
its own current error raised to a power, so a refit with those weights minimises (to first
order) Σ e^(2 + power), an L_p norm whose p grows with the power and tends to the maximum.
Both refits that use it, the world fit of the pose keys (:func:`sp_core.fitting.refine_world`)
and the corrective keys' polish (:mod:`sp_core.corrective`), take their weights from here.
"""

from __future__ import annotations

import numpy as np

#: Exponent of the relative frame error in :func:`worst_first_weights`.
POWER = 4.0


def worst_first_weights(errors: np.ndarray, power: float = POWER,
                        cap: float | None = None) -> np.ndarray:
    """``1 + (e / mean e)^power`` per frame: ordinary frames weigh about 1, the worst most.

    Parameters
    ----------
    errors : (F,) or (F, n_nodes) float64
        Each frame's error (e.g. its worst joint's distance) or each joint's on each frame,
        any unit (only ratios to their mean matter).
    power : float
        How sharply the weight grows with the error (4: twice the mean error weighs 17).
    cap : float, optional
        Largest weight (before the 1 is added): without one, a frame at 10× the mean outweighs
        ten thousand ordinary frames, and a refit bends the whole motion for it.

    Returns
    -------
    weights : float64, the shape of ``errors``
        At least 1.
    """
    errors = np.asarray(errors, dtype=np.float64)
    relative = (errors / max(float(errors.mean()) if errors.size else 0.0, 1e-300)) ** power
    if cap is not None:
        relative = np.minimum(relative, cap)
    return 1.0 + relative
