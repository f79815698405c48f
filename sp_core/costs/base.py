"""The Cost interface, option declarations and the registry of costs by name.

A cost says how badly two frames describe the poses between them when they are consecutive
keyframes. The selection (dynamic programme) only ever sees the table a cost returns, so a new
cost is a small class registered here; the panel renders its options from their declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sp_core.errors import OptionError


@dataclass(frozen=True)
class Option:
    """One declared option of a cost (rendered by the panel, validated here).

    Attributes
    ----------
    name : str
    type : type
        ``float``, ``int``, ``bool`` or ``str``.
    default : Any
    minimum, maximum : float, optional
        Inclusive bounds for numbers.
    choices : tuple, optional
        Allowed values for strings.
    help : str
        One line for tooltips and ``--help``.
    """

    name: str
    type: type
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    help: str = ""

    def validate(self, value: Any) -> Any:
        """Return ``value`` converted to the option's type, or raise :class:`OptionError`."""
        try:
            converted = self.type(value)
        except (TypeError, ValueError):
            raise OptionError(f"option {self.name!r} must be {self.type.__name__}, "
                              f"got {value!r}") from None
        if self.choices is not None and converted not in self.choices:
            raise OptionError(f"option {self.name!r} must be one of {list(self.choices)}, "
                              f"got {value!r}")
        if self.minimum is not None and converted < self.minimum or \
                self.maximum is not None and converted > self.maximum:
            raise OptionError(f"option {self.name!r} must be in [{self.minimum}, {self.maximum}], "
                              f"got {value!r}")
        return converted


class Cost:
    """Base class of keyframe-pair costs.

    Subclasses set :attr:`name`, :attr:`description`, :attr:`options` and implement
    :meth:`table`.

    Parameters
    ----------
    **values
        Option values by name; unknown names raise :class:`OptionError`.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    #: The table is in squared pose units (a sum of squared distances), not in pose units.
    squared: ClassVar[bool] = False
    #: Inner-loop steps of :meth:`row_work` per second on the reference two-core machine
    #: (``benchmarks/bench_selection.py``): the analysis plans its window with it.
    steps_per_second: ClassVar[float] = 1e9
    #: What :meth:`extra_bytes` counts, for messages about memory.
    buffers: ClassVar[str] = "cost buffers"

    def __init__(self, **values: Any) -> None:
        declared = {o.name: o for o in self.options}
        unknown = set(values) - set(declared)
        if unknown:
            known = ", ".join(declared) or "none"
            raise OptionError(f"cost {self.name!r} has no option {sorted(unknown)[0]!r} "
                              f"(its options: {known})")
        self.values = {n: o.validate(values.get(n, o.default)) for n, o in declared.items()}

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None,
              progress: Callable[[float], None] | None = None) -> np.ndarray:
        """The all-pairs cost table over candidate frames, banded and indexed by the later frame.

        Parameters
        ----------
        poses : (n_frames, n_dims) float64, pose units
            Every frame of the range (costs measure every frame, keys only fall on candidates).
        candidates : (n_candidates,) int64
            Ascending frame indices (rows of ``poses``) that may be keyframes.
        band : int
            Largest number of candidate steps between consecutive keyframes.
        max_gap : int
            Largest number of frames between consecutive keyframes.
        lowest : (n_candidates,) int64, optional
            The earliest candidate that may precede each candidate (a pin lies between it and
            any earlier one): a cost may skip such pairs and leave them ``inf``, the selection
            never uses them.
        progress : callable, optional
            ``progress(fraction)`` between blocks of rows (see :func:`fill_in_blocks`); it may
            raise to abort.

        Returns
        -------
        (n_candidates, band + 1) float64, pose units
            ``table[b, d]`` is the cost of keys ``candidates[b - d]`` and ``candidates[b]``;
            ``table[b, 0] = 0`` and ``inf`` where the pair does not exist or is too far apart.
        """
        raise NotImplementedError

    def row_work(self, n: int, dims: int, candidates: np.ndarray, band: int, max_gap: int,
                 lowest: np.ndarray | None = None) -> np.ndarray:
        """(n_candidates,) float64: estimated inner-loop steps of each row of :meth:`table`
        (for progress and for the time estimate that plans long takes); default one step
        per pair."""
        return np.minimum(np.arange(len(candidates)), band).astype(np.float64) + 1.0

    def extra_bytes(self, n: int, dims: int, max_gap: int) -> int:
        """Bytes :meth:`table` allocates besides the table itself (default none)."""
        return 0

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"{type(self).__name__}({args})"


#: Estimated inner-loop steps of one kernel call between progress reports (about 0.1 s on
#: two cores): short enough that a cancel acts at once, long enough that calls cost nothing.
BLOCK_WORK = 2e8


def empty_table(m: int, band: int) -> np.ndarray:
    """(m, band + 1) float64 of inf, for a cost's kernels to fill block by block."""
    return np.full((m, band + 1), np.inf)


def fill_in_blocks(work: np.ndarray, fill: Callable[[int, int], None],
                   progress: Callable[[float], None] | None = None,
                   per_block: float = BLOCK_WORK) -> None:
    """Call ``fill(first, stop)`` on consecutive blocks of rows with about ``per_block`` work
    each, and ``progress(done)`` (a fraction of the estimated work) after each block.

    Parameters
    ----------
    work : (m,) float64
        Estimated work of each row (any unit proportional to time).
    fill : callable
        Fills rows ``first .. stop - 1`` (releases the GIL for long blocks).
    progress : callable, optional
        May raise to abort between blocks.
    per_block : float
    """
    m = len(work)
    cumulative = np.cumsum(np.asarray(work, dtype=np.float64))
    total = float(cumulative[-1]) if m else 0.0
    pieces = max(1, int(np.ceil(total / per_block)))
    inner = np.searchsorted(cumulative, np.arange(1, pieces) * (total / pieces), side="left")
    edges = np.unique(np.concatenate([[0], inner + 1, [m]]).clip(0, m))
    for first, stop in zip(edges[:-1], edges[1:], strict=True):
        fill(int(first), int(stop))
        if progress is not None:
            progress(float(cumulative[stop - 1]) / total if total > 0 else 1.0)


_REGISTRY: dict[str, type[Cost]] = {}


def register(cls: type[Cost]) -> type[Cost]:
    """Class decorator adding a cost to the registry under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def available_costs() -> dict[str, type[Cost]]:
    """Registered costs by name."""
    return dict(_REGISTRY)


def get_cost(cost: str | Cost, **options: Any) -> Cost:
    """A cost instance from a registered name (with options) or an instance (returned as is)."""
    if isinstance(cost, Cost):
        if options:
            raise OptionError("give options either to the cost object or by name, not both")
        return cost
    if cost not in _REGISTRY:
        raise OptionError(f"unknown cost {cost!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[cost](**options)
