"""Batch reduction of FBX files: ``mobupy -m mobu_plugin.batch a.fbx ... --out DIR``.

Each file is opened (``FBApplication.FileOpen``), the hierarchies under ``--roots`` (default:
the scene's top-level models) are reduced into new layers of the current take, and a copy is
saved into DIR with the same name; ``DIR/summary.csv`` gets one row per file with the columns of
``salient-poses batch``. A file that fails is recorded and the rest continue; the exit status is 1
if any failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from mobu_plugin.host import MobuHost, fb
from sp_core.batch import (
    add_host_batch_options,
    host_batch_options,
    host_job,
    reduction_row,
    run_host_batch,
)
from sp_core.errors import SalientPosesError
from sp_core.jobs import run_job
from sp_core.options import Options


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mobupy -m mobu_plugin.batch", allow_abbrev=False,
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE", help=".fbx files")
    add_host_batch_options(parser)
    return parser


def reduce_file(path: str, target: Path, options: Options) -> dict[str, object]:
    """Open, reduce and save one file (its copy at ``target``; the input is never saved)."""
    application = fb.FBApplication()
    if not application.FileOpen(path, False):
        raise SalientPosesError(f"MotionBuilder could not open {path}")
    host = MobuHost()
    if options.analysis.roots is None:
        options = options.replace(
            roots=[m.LongName for m in fb.FBSystem().Scene.RootModel.Children])
    result = run_job(host_job(options), host=host)
    host.clear_preview()
    if not application.FileSave(str(target)):
        raise SalientPosesError(f"MotionBuilder could not save {target}")
    assert result.reduction is not None
    return reduction_row(result.reduction)


def run(argv: Sequence[str] | None = None) -> int:
    """Reduce every file (pyfbsdk must be usable); returns the exit status."""
    args = build_parser().parse_args(argv)
    options = host_batch_options(args)
    return run_host_batch(args.files, options,
                          lambda path, target: reduce_file(path, target, options))


def main(argv: Sequence[str] | None = None) -> int:
    """``mobupy -m mobu_plugin.batch``: check the arguments (``--help`` works anywhere), then
    start MotionBuilder's standalone Python and reduce."""
    build_parser().parse_args(argv)
    import pyfbstandalone

    pyfbstandalone.initialize()
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
