"""Batch reduction of Maya scenes: ``mayapy -m maya_plugin.batch SCENE.ma ... --out DIR``.

Each scene is opened with ``maya.standalone`` (no UI), the hierarchies under ``--nodes`` (default:
every top-level joint) are reduced with the given options into new layers, and a copy is saved in
DIR with the same name; ``DIR/summary.csv`` gets one row per scene with the columns of
``salient-poses batch``. A scene that fails is recorded and the rest continue; the exit status is
1 if any failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sp_core.batch import add_host_batch_options, reduction_row, run_host_batch


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mayapy -m maya_plugin.batch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("scenes", nargs="+", metavar="SCENE", help=".ma or .mb files")
    add_host_batch_options(parser)
    return parser


def reduce_scene(path: str, out: Path, args: argparse.Namespace) -> dict[str, object]:
    """Open, reduce and save one scene."""
    from maya_plugin import api
    from maya_plugin.host import cmds

    cmds.file(path, open=True, force=True)
    roots = [n.strip() for n in args.nodes.split(",")] if args.nodes else None
    result = api.reduce(roots, keys=args.keys, ratio=args.ratio, tangents=args.tangents,
                        smoothness=args.smoothness, space=args.space, residual=args.residual,
                        layer=args.layer)
    target = out / Path(path).name
    cmds.file(rename=str(target))
    cmds.file(save=True, force=True,
              type="mayaBinary" if target.suffix.lower() == ".mb" else "mayaAscii")
    return reduction_row(result.reduction)


def run(argv: Sequence[str] | None = None) -> int:
    """Reduce every scene (Maya must already be initialised); returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_host_batch(args.scenes, Path(args.out),
                          lambda path, out: reduce_scene(path, out, args))


def main() -> int:
    from maya import standalone

    standalone.initialize(name="python")
    try:
        return run()
    finally:
        standalone.uninitialize()


if __name__ == "__main__":
    sys.exit(main())
