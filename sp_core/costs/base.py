"""The Cost interface, option declarations and the registry of costs by name.

A cost says how badly two frames describe the poses between them when they are consecutive
keyframes. The selection (dynamic programme) only ever sees the table a cost returns, so a new
cost is a small class registered here; the panel renders its options from their declarations.
"""

from __future__ import annotations

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

    def __init__(self, **values: Any) -> None:
        declared = {o.name: o for o in self.options}
        unknown = set(values) - set(declared)
        if unknown:
            known = ", ".join(declared) or "none"
            raise OptionError(f"cost {self.name!r} has no option {sorted(unknown)[0]!r} "
                              f"(its options: {known})")
        self.values = {n: o.validate(values.get(n, o.default)) for n, o in declared.items()}

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None) -> np.ndarray:
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

        Returns
        -------
        (n_candidates, band + 1) float64, pose units
            ``table[b, d]`` is the cost of keys ``candidates[b - d]`` and ``candidates[b]``;
            ``table[b, 0] = 0`` and ``inf`` where the pair does not exist or is too far apart.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"{type(self).__name__}({args})"


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
