"""Batch reduction of Maya scenes: ``mayapy -m maya_plugin.batch SCENE.ma ... --out DIR``.

Each scene is opened with ``maya.standalone`` (no UI), the hierarchies under ``--nodes`` (default:
every top-level joint) are reduced with the given options into new layers, and a copy is saved in
DIR with the same name; ``DIR/summary.csv`` gets one row per scene with the columns of
``salient-poses batch``. A scene that fails is recorded and the rest continue; the exit status is
1 if any failed.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sp_core.batch import SUMMARY_FIELDS
from sp_core.errors import SalientPosesError
from sp_core.fitting import FIT_SPACES, SMOOTHNESS, TANGENT_MODES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mayapy -m maya_plugin.batch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("scenes", nargs="+", metavar="SCENE", help=".ma or .mb files")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--keys", type=int, metavar="K")
    which.add_argument("--ratio", type=float, metavar="R")
    which.add_argument("--suggested", action="store_true", help="the default")
    parser.add_argument("--nodes", metavar="N1,N2,..",
                        help="roots of the hierarchies to reduce (default: top-level joints)")
    parser.add_argument("--tangents", choices=TANGENT_MODES, default="unified")
    parser.add_argument("--smoothness", type=float, default=SMOOTHNESS)
    parser.add_argument("--space", choices=FIT_SPACES, default="world")
    parser.add_argument("--residual", action="store_true", help="also write the residual layer")
    parser.add_argument("--layer", default="salientPoses", help="name of the new layer")
    return parser


def reduce_scene(path: str, out: Path, args: argparse.Namespace) -> dict[str, object]:
    """Open, reduce and save one scene; never raises (failures become the status)."""
    from maya_plugin import api
    from maya_plugin.host import cmds

    started = time.perf_counter()
    row: dict[str, object] = {"clip": path, "status": "ok"}
    try:
        cmds.file(path, open=True, force=True)
        roots = [n.strip() for n in args.nodes.split(",")] if args.nodes else None
        result = api.reduce(roots, keys=args.keys, ratio=args.ratio, tangents=args.tangents,
                            smoothness=args.smoothness, space=args.space,
                            residual=args.residual, layer=args.layer)
        target = out / Path(path).name
        cmds.file(rename=str(target))
        cmds.file(save=True, force=True,
                  type="mayaBinary" if target.suffix.lower() == ".mb" else "mayaAscii")
        row.update(frames=result.space.n_frames, keys=result.keys,
                   mean_mm=f"{result.reduction.metrics.mean_mm:.4f}",
                   max_mm=f"{result.reduction.metrics.max_mm:.4f}")
    except SalientPosesError as exc:
        row["status"] = f"failed: {exc}"
    except Exception as exc:  # noqa: BLE001 - one bad scene must not stop the batch
        row["status"] = f"failed: {type(exc).__name__}: {exc}"
    row["seconds"] = f"{time.perf_counter() - started:.3f}"
    return row


def run(argv: Sequence[str] | None = None) -> int:
    """Reduce every scene (Maya must already be initialised); returns the exit status."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, path in enumerate(args.scenes, 1):
        row = reduce_scene(path, out, args)
        rows.append(row)
        print(f"[{i}/{len(args.scenes)}] {path}: {row['status']}", flush=True)
    with open(out / "summary.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_FIELDS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"{len(rows) - failed} of {len(rows)} scenes reduced; summary in {out / 'summary.csv'}")
    return 1 if failed else 0


def main() -> int:
    from maya import standalone

    standalone.initialize(name="python")
    try:
        return run()
    finally:
        standalone.uninitialize()


if __name__ == "__main__":
    sys.exit(main())
