"""Batch reduction of FBX files: ``mobupy -m mobu_plugin.batch a.fbx ... --out DIR``.

Each file is opened (``FBApplication.FileOpen``), the hierarchies under ``--nodes`` (default:
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
from sp_core.batch import add_host_batch_options, reduction_row, run_host_batch
from sp_core.errors import SalientPosesError
from sp_core.session import Session


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mobupy -m mobu_plugin.batch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE", help=".fbx files")
    add_host_batch_options(parser)
    return parser


def reduce_file(path: str, out: Path, args: argparse.Namespace) -> dict[str, object]:
    """Open, reduce and save one file."""
    application = fb.FBApplication()
    if not application.FileOpen(path, False):
        raise SalientPosesError(f"MotionBuilder could not open {path}")
    host = MobuHost()
    session = Session(host)
    session.analysis.roots = ([n.strip() for n in args.nodes.split(",")] if args.nodes else
                              [m.LongName for m in fb.FBSystem().Scene.RootModel.Children])
    for key in ("tangents", "smoothness", "space", "residual", "layer"):
        setattr(session.reduction, key, getattr(args, key))
    space = session.analyze()
    keys = args.keys
    if keys is None and args.ratio is not None:
        keys = max(2, round(args.ratio * space.n_frames))
    session.set_k(session.suggested_k if keys is None else keys)
    reduction = session.apply()
    host.clear_preview()
    target = out / Path(path).name
    if not application.FileSave(str(target)):
        raise SalientPosesError(f"MotionBuilder could not save {target}")
    return reduction_row(reduction)


def run(argv: Sequence[str] | None = None) -> int:
    """Reduce every file (pyfbsdk must be usable); returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_host_batch(args.files, Path(args.out),
                          lambda path, out: reduce_file(path, out, args))


def main() -> int:
    import pyfbstandalone

    pyfbstandalone.initialize()
    return run()


if __name__ == "__main__":
    sys.exit(main())
