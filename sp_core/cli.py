"""The ``salient-poses`` command line.

Every command has ``--help``. Problems with the input (a malformed file, a bad option) end with
exit status 2 and one line on stderr; ``--debug`` shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sp_core.clip import Clip
from sp_core.errors import SalientPosesError
from sp_core.io.bvh import read_bvh

PROG = "salient-poses"
SAMPLE_CLIP = Path(__file__).resolve().parents[1] / "examples" / "cmu_131_01.bvh"


class UsageError(SalientPosesError):
    """A bad command-line request (missing sample, unwritable output...)."""


def load_clip(path: str, first_frame: int = 0) -> Clip:
    """Read a motion file for a command (BVH today; the format is chosen by extension)."""
    if Path(path).suffix.lower() != ".bvh":
        raise UsageError(f"{path}: unsupported file type {Path(path).suffix or '(none)'!r}; "
                         "salient-poses reads .bvh files")
    return read_bvh(path, first_frame=first_frame)


def clip_info(clip: Clip, source: str) -> dict[str, Any]:
    """The ``info`` JSON record of a clip (schema in docs/formats.md)."""
    try:
        height: float | None = clip.height()
    except SalientPosesError:
        height = None
    return {
        "clip": source,
        "frames": clip.n_frames,
        "fps": clip.fps,
        "frame_time": clip.frame_time,
        "first_frame": clip.first_frame,
        "last_frame": clip.last_frame,
        "duration_s": clip.duration,
        "nodes": clip.node_names,
        "parents": [int(p) for p in clip.parents],
        "end_sites": clip.end_site_names,
        "channels": clip.channel_names,
        "height": height,
    }


def format_summary(clip: Clip, source: str, tree: bool = False) -> str:
    """A readable multi-line summary of a clip for the terminal."""
    rotations = int(clip.is_rotation_channel().sum())
    lines = [
        f"Clip       {clip.name}  ({source})",
        f"Frames     {clip.n_frames}  (frames {clip.first_frame}..{clip.last_frame}) at "
        f"{clip.fps:g} fps, frame time {clip.frame_time:.7g} s, {clip.duration:.3f} s",
        f"Nodes      {clip.n_nodes}  ({len(clip.joint_names)} joints + "
        f"{len(clip.end_site_names)} End Sites), root{'s' if len(clip.root_names) > 1 else ''}: "
        f"{', '.join(clip.root_names)}",
        f"Channels   {clip.n_channels}  ({clip.n_channels - rotations} position, "
        f"{rotations} rotation in degrees)",
    ]
    try:
        lines.append(f"Height     {clip.height():.4g} scene units (rest pose, Y up); errors in mm "
                     f"use {clip.mm_per_unit():.4g} mm per unit (character scaled to 1.7 m)")
    except SalientPosesError as exc:
        lines.append(f"Height     unknown: {exc}")
    if tree:
        lines.append("Hierarchy")
        depth = np.zeros(clip.n_nodes, dtype=int)
        for i, p in enumerate(clip.parents):
            depth[i] = depth[p] + 1 if p >= 0 else 0
            if clip.end_sites[i]:
                label = "(End Site)"
            else:
                attrs = [clip.channel_names[c].rpartition(".")[2] for c in range(clip.n_channels)
                         if clip.channel_nodes[c] == i]
                label = " ".join(attrs) if attrs else "(no channels)"
            lines.append(f"  {'  ' * depth[i]}{clip.node_names[i]}  {label}")
    return "\n".join(lines)


def _write_json(record: dict[str, Any], target: str) -> None:
    text = json.dumps(record, indent=2) + "\n"
    if target == "-":
        sys.stdout.write(text)
    else:
        _output_path(target).write_text(text)


def _output_path(target: str) -> Path:
    path = Path(target)
    if not path.parent.exists():
        raise UsageError(f"cannot write {target}: folder {path.parent} does not exist")
    return path


# ------------------------------------------------------------------------------------ commands
def cmd_info(args: argparse.Namespace) -> int:
    clip = load_clip(args.clip, first_frame=args.first_frame)
    if args.json != "-":
        print(format_summary(clip, args.clip, tree=args.tree))
    if args.json:
        _write_json(clip_info(clip, args.clip), args.json)
    if args.positions:
        np.save(_output_path(args.positions), clip.positions)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if not SAMPLE_CLIP.exists():
        raise UsageError(f"the sample clip {SAMPLE_CLIP} is missing; run from a checkout of "
                         "Salient Poses (it ships in examples/)")
    clip = load_clip(str(SAMPLE_CLIP))
    print("Salient Poses demo: the bundled sample clip (CMU mocap, subject 131, trial 1)\n")
    print(format_summary(clip, str(SAMPLE_CLIP.relative_to(SAMPLE_CLIP.parents[1]))))
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true",
                        help="show the full traceback when something fails")
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common],
        description="Salient Poses: optimal keyframe selection and reduction for motion capture.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", parents=[common], help="summarise a motion clip",
                          description="Print a summary of a motion clip; optionally save it as "
                                      "JSON and its world positions as a .npy array.")
    info.add_argument("clip", metavar="CLIP", help="a .bvh file")
    info.add_argument("--json", metavar="OUT",
                      help="write the summary as JSON to OUT ('-' for standard output)")
    info.add_argument("--positions", metavar="OUT.npy",
                      help="save world positions (n_frames, n_nodes, 3), scene units, nodes in "
                           "hierarchy order with End Sites")
    info.add_argument("--first-frame", type=int, default=0, metavar="N",
                      help="host frame number of the first frame (default 0)")
    info.add_argument("--tree", action="store_true", help="also print the hierarchy")
    info.set_defaults(func=cmd_info)

    demo = sub.add_parser("demo", parents=[common], help="run the demo on the bundled sample clip",
                          description="Load the bundled sample clip and print its summary.")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``salient-poses``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (SalientPosesError, OSError) as exc:
        if args.debug:
            raise
        message = (str(exc) if isinstance(exc, SalientPosesError)
                   else f"{exc.strerror}: {exc.filename}")
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last line of defence: never a bare traceback
        if args.debug:
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc} "
              "(run again with --debug for the traceback and report it)", file=sys.stderr)
        traceback.clear_frames(exc.__traceback__)
        return 1


if __name__ == "__main__":
    sys.exit(main())
