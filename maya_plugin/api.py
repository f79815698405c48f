"""Python API for TDs inside Maya: analyse and reduce nodes with the options of the CLI.

Example (Script Editor)::

    from maya_plugin import api
    space = api.analyse(["hips"], cost="line-max", stride=1)
    result = api.reduce(["hips"], ratio=0.05, tangents="unified", residual_layer=True)
    result.layers        # the layers created (one undo step; api.remove(result) deletes them)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from maya_plugin.host import MayaHost
from sp_core.jobs import Job, Result, run_job
from sp_core.options import Options, host_fields, keyword_options
from sp_core.selection import SelectionSpace
from sp_core.session import Session

#: Keyword options of :func:`analyse` and :func:`reduce`: every option that reaches the hosts
#: (declared in :mod:`sp_core.options`).
OPTIONS = host_fields()


def options_for(roots: Sequence[str] | None = None, **options: Any) -> Options:
    """Checked options (:class:`sp_core.errors.OptionError` names a bad or unknown one)."""
    if roots:
        options["roots"] = list(roots)
    return keyword_options(**options)


def session_for(roots: Sequence[str] | None = None, **options: Any) -> Session:
    """A session over the current scene with the given options (see :data:`OPTIONS`)."""
    return Session(MayaHost(), options_for(roots, **options))


def analyse(roots: Sequence[str] | None = None, **options: Any) -> SelectionSpace:
    """The selection space of the hierarchies under ``roots`` (default: the selection)."""
    return session_for(roots, **options).analyze()


def reduce(roots: Sequence[str] | None = None, **options: Any) -> Result:
    """Analyse, choose K (``keys``, ``ratio``, ``frames`` or the suggested K) and apply.

    Everything written is one undo step; the original curves are untouched. The result's
    ``layers`` are the layers made (:func:`remove` deletes them).
    """
    return run_job(Job("", options_for(roots, **options), "reduce", apply=True), host=MayaHost())


def remove(result: Result) -> None:
    """Delete the layers a :func:`reduce` call created (one undo step)."""
    host = MayaHost()
    with host.undo_chunk("Salient Poses: remove layers"):
        for handle in reversed(result.layers):
            host.remove_layer(handle)
