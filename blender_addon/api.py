"""Python API for Blender scripts: analyse and reduce the active armature with the CLI's options.

Example (Blender's Python console, or ``python`` with ``bpy`` installed)::

    from blender_addon import api
    space = api.analyse(cost="line-max")
    result = api.reduce(ratio=0.05, tangents="unified", residual_layer=True)
    result.layers        # the NLA tracks made (one undo step; api.remove(result) deletes them)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blender_addon.host import BlenderHost
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


def analyse(roots: Sequence[str] | None = None, armature: str | None = None,
            **options: Any) -> SelectionSpace:
    """The selection space of the bones under ``roots`` (default: the armature's roots)."""
    return Session(BlenderHost(armature), options_for(roots, **options)).analyze()


def reduce(roots: Sequence[str] | None = None, armature: str | None = None,
           **options: Any) -> Result:
    """Analyse, choose K (``keys``, ``ratio``, ``frames`` or the suggested K) and apply.

    Everything written is one undo step; the original action is untouched (it is moved onto
    an NLA track of its own, below the new ones). The result's ``layers`` are the tracks made.
    """
    job = Job("", options_for(roots, **options), "reduce", apply=True)
    return run_job(job, host=BlenderHost(armature))


def remove(result: Result, armature: str | None = None) -> None:
    """Delete the tracks a :func:`reduce` call made (one undo step)."""
    host = BlenderHost(armature)
    with host.undo_chunk("Salient Poses: remove layers"):
        for handle in reversed(result.layers):
            host.remove_layer(handle)
