"""Python API for TDs inside Maya: analyse and reduce nodes with the options of the CLI.

Example (Script Editor)::

    from maya_plugin import api
    space = api.analyse(["hips"], cost="line-max", stride=1)
    result = api.reduce(["hips"], ratio=0.05, tangents="unified", residual=True)
    result.layers        # the layers created (one undo step; api.remove(result) deletes them)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from maya_plugin.host import MayaHost
from sp_core.host import LayerHandle
from sp_core.reduction import Reduction
from sp_core.selection import SelectionSpace
from sp_core.session import Pin, Session

_ANALYSIS = ("nodes", "weights", "pose", "cost", "cost_options", "compose", "frame_range",
             "stride", "max_span", "max_keys", "time_scale")
_REDUCTION = ("tangents", "smoothness", "space", "layer", "residual", "residual_weight")


@dataclass
class Result:
    """What :func:`reduce` did: the selection space, K, the reduction and the layers made."""

    space: SelectionSpace
    keys: int
    reduction: Reduction
    layers: list[LayerHandle]
    session: Session


def session_for(roots: Sequence[str] | None = None, pins: Sequence[int] = (),
                **options: Any) -> Session:
    """A session over the current scene with the given options.

    ``roots``: the hierarchies to analyse (default: the selection). Other keywords are the
    fields of :class:`sp_core.session.AnalysisOptions` and :class:`ReductionOptions`.
    """
    session = Session(MayaHost())
    session.analysis.roots = list(roots) if roots else None
    session.analysis.pins = [Pin(int(f)) for f in pins]
    for key, value in options.items():
        if key in _ANALYSIS:
            setattr(session.analysis, key, value)
        elif key in _REDUCTION:
            setattr(session.reduction, key, value)
        else:
            raise TypeError(f"unknown option {key!r}; analysis options: {', '.join(_ANALYSIS)};"
                            f" reduction options: {', '.join(_REDUCTION)}")
    return session


def analyse(roots: Sequence[str] | None = None, **options: Any) -> SelectionSpace:
    """The selection space of the hierarchies under ``roots`` (default: the selection)."""
    return session_for(roots, **options).analyze()


def reduce(roots: Sequence[str] | None = None, keys: int | None = None,
           ratio: float | None = None, **options: Any) -> Result:
    """Analyse, choose K (``keys``, ``ratio`` of the frames, or the suggested K) and apply.

    Everything written is one undo step; the original curves are untouched.
    """
    session = session_for(roots, **options)
    space = session.analyze()
    if keys is None and ratio is not None:
        keys = max(2, round(ratio * space.n_frames))
    k = session.set_k(session.suggested_k if keys is None else keys)
    reduction = session.apply()
    return Result(space, k, reduction, list(session.applied), session)


def remove(result: Result) -> None:
    """Delete the layers a :func:`reduce` call created (one undo step)."""
    result.session.remove()
