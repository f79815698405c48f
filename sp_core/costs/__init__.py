"""Keyframe-pair costs, registered by name (see :mod:`sp_core.costs.base`).

The cost modules import the numba kernels in the methods that run them: the command line's
parser reads this registry for ``--cost``'s choices, and ``--help`` need not load numba.
"""

from sp_core.costs import curve_max, line_max, line_sse, line_time  # noqa: F401 - registers
from sp_core.costs.base import Cost, Option, available_costs, get_cost, register

__all__ = ["Cost", "Option", "available_costs", "get_cost", "register"]
