"""Batch reduction of Maya scenes: ``mayapy /path/to/checkout/maya_plugin/batch.py SCENE.ma ...
--out DIR`` (or ``mayapy -m maya_plugin.batch`` with the checkout on ``PYTHONPATH``).

Each scene is opened with ``maya.standalone`` (no UI), the hierarchies under ``--roots``
(default: every top-level joint) are reduced with the given options (the flags are generated
from :mod:`sp_core.options`) into new layers, and a copy is saved in DIR with the same name;
``DIR/summary.csv`` gets one row per scene with the columns of ``salient-poses batch``. A scene
that fails is recorded and the rest continue; the exit status is 1 if any failed.

Only the standard library is imported at module level: Maya is started
(:func:`maya_plugin.mayapy.bootstrap`) before the engine and ``maya.cmds`` are imported.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sp_core.options import Options


def build_parser() -> argparse.ArgumentParser:
    from sp_core.batch import add_host_batch_options

    parser = argparse.ArgumentParser(prog="mayapy maya_plugin/batch.py", allow_abbrev=False,
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("scenes", nargs="+", metavar="SCENE", help=".ma or .mb files")
    add_host_batch_options(parser)
    return parser


def reduce_scene(path: str, target: Path, options: Options) -> dict[str, object]:
    """Open, reduce and save one scene (its copy at ``target``; the input is never saved)."""
    from maya import cmds

    from maya_plugin.host import MayaHost
    from sp_core.batch import host_job, reduction_row
    from sp_core.jobs import run_job

    cmds.file(path, open=True, force=True)
    result = run_job(host_job(options), host=MayaHost())
    cmds.file(rename=str(target))
    cmds.file(save=True, force=True,
              type="mayaBinary" if target.suffix.lower() == ".mb" else "mayaAscii")
    assert result.reduction is not None
    return reduction_row(result.reduction)


def run(argv: Sequence[str] | None = None) -> int:
    """Reduce every scene (Maya must already be initialised); returns the exit status."""
    from sp_core.batch import host_batch_options, run_host_batch

    args = build_parser().parse_args(argv)
    options = host_batch_options(args)
    return run_host_batch(args.scenes, options,
                          lambda path, target: reduce_scene(path, target, options))


def main() -> int:
    from maya_plugin.mayapy import bootstrap

    bootstrap()
    from maya import standalone

    try:
        return run()
    finally:
        standalone.uninitialize()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for maya_plugin.mayapy
    sys.exit(main())
