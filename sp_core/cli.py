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
from sp_core.costs import available_costs
from sp_core.errors import SalientPosesError
from sp_core.fitting import FIT_SPACES, SMOOTHNESS, TANGENT_MODES
from sp_core.io.bvh import read_bvh
from sp_core.io.keys import reduction_record, write_reduced_bvh, write_reduction_json
from sp_core.layered import KEYPOSE_ACCURACY, LayeredSelection, layered_selection
from sp_core.poses import POSE_SPACES
from sp_core.reduction import Reduction, reduce
from sp_core.selection import COMPOSITIONS, SIGNIFICANCE, SelectionSpace

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


# ------------------------------------------------------------------------- option parsing
def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--nodes needs at least one node name")
    return names


def _frames(text: str | None, option: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(f) for f in text.split(",") if f.strip()]
    except ValueError:
        raise UsageError(f"{option} takes whole frame numbers separated by commas, got "
                         f"{text!r}") from None


def _weights(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    weights = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise UsageError(f"--weights takes NODE=WEIGHT pairs separated by commas, got "
                             f"{item!r}")
    return weights


def _range(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    start, sep, end = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(start), int(end)
    except ValueError:
        raise UsageError(f"--range takes START:END host frames, got {text!r}") from None


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """The options of an analysis, shared by ``analyze`` and the commands built on it."""
    group = parser.add_argument_group("analysis")
    group.add_argument("--pose", choices=POSE_SPACES, default="positions",
                       help="pose space: world positions (default) or channel values")
    group.add_argument("--nodes", metavar="N1,N2,..", help="nodes that count (default all)")
    group.add_argument("--weights", metavar="N=W,..", help="per-node weights (default 1)")
    group.add_argument("--cost", choices=sorted(available_costs()), default="line-max")
    group.add_argument("--compose", choices=COMPOSITIONS, default="max",
                       help="minimise the largest segment cost (max) or their sum (sum)")
    group.add_argument("--time-scale", type=float, default=0.0, metavar="S",
                       help="add a time coordinate: S scene units per frame (default 0)")
    group.add_argument("--range", metavar="START:END", help="host frames, inclusive")
    group.add_argument("--pins", metavar="F,F,..", help="frames that must be keyframes")
    group.add_argument("--stride", type=int, default=1, metavar="S",
                       help="interior keys only on frames divisible by S (default 1)")
    group.add_argument("--max-span", type=int, metavar="F",
                       help="longest gap between keyframes, frames")
    group.add_argument("--max-keys", type=int, metavar="K",
                       help="largest K solved (default half the candidate frames)")
    group.add_argument("--first-frame", type=int, default=0, metavar="N",
                       help="host frame number of the clip's first frame (default 0)")


def add_layered_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("keyposes and breakdowns")
    group.add_argument("--layered", action="store_true",
                       help="label keys as keyposes and breakdowns (three layers on --leading)")
    group.add_argument("--leading", metavar="N1,N2,..",
                       help="nodes of the leading part (e.g. RightWrist for a throw)")
    group.add_argument("--accuracy", type=float, default=KEYPOSE_ACCURACY, metavar="A",
                       help=f"threshold of the keypose and breakdown layers (default "
                            f"{KEYPOSE_ACCURACY})")
    group.add_argument("--significance", type=float, default=SIGNIFICANCE, metavar="S",
                       help=f"least improvement of one more key (default {SIGNIFICANCE})")


def layered_from_args(clip: Clip, args: argparse.Namespace) -> LayeredSelection:
    leading = _names(args.leading)
    if not leading:
        raise UsageError("--layered needs --leading with the nodes of the leading part")
    return layered_selection(clip, leading, nodes=_names(args.nodes),
                             weights=_weights(args.weights), frame_range=_range(args.range),
                             stride=args.stride, keypose_accuracy=args.accuracy,
                             breakdown_accuracy=args.accuracy, significance=args.significance,
                             pose=args.pose)


def _layered_summary(chosen: LayeredSelection) -> str:
    return "\n".join([
        f"Keyposes   {len(chosen.keyposes)}: {', '.join(map(str, chosen.keyposes))}",
        f"Breakdowns {len(chosen.breakdowns)}: {', '.join(map(str, chosen.breakdowns))}",
    ])


def analyse(args: argparse.Namespace) -> tuple[Clip, SelectionSpace]:
    """Load the clip named in ``args`` and build its selection space."""
    clip = load_clip(args.clip, first_frame=args.first_frame)
    space = SelectionSpace.from_clip(
        clip, pose=args.pose, nodes=_names(args.nodes), weights=_weights(args.weights),
        time_scale=args.time_scale, frame_range=_range(args.range), cost=args.cost,
        compose=args.compose, pins=_frames(args.pins, "--pins"), stride=args.stride,
        max_span=args.max_span, max_keys=args.max_keys)
    return clip, space


def space_record(clip: Clip, space: SelectionSpace, source: str,
                 options: dict[str, Any]) -> dict[str, Any]:
    """The ``analyze`` JSON record (schema in docs/formats.md)."""
    errors = space.errors
    return {
        "clip": source,
        "fps": clip.fps,
        "first_frame": space.first_frame,
        "last_frame": space.last_frame,
        "cost": space.cost.name,
        "compose": space.compose,
        "options": options,
        "timings": {k: round(v, 6) for k, v in space.timings.items()},
        "space": [{"keys": int(k), "error": float(e) if np.isfinite(e) else None,
                   "frames": space.keyframes(int(k)).tolist() if np.isfinite(e) else None}
                  for k, e in zip(space.key_counts, errors, strict=True)],
        "suggested": space.suggestions(),
    }


def _save_plot(space: SelectionSpace, target: str, log: bool, title: str) -> None:
    try:
        from sp_core.ui.error_plot import save_error_plot
    except ImportError as exc:
        raise UsageError(f"--plot needs the ui extra (PySide6, pyqtgraph): {exc}") from None
    save_error_plot(space, _output_path(target), log=log, title=title)


def _space_summary(clip: Clip, space: SelectionSpace) -> str:
    s = space.suggestions()
    k = s["threshold"]
    share = space.normalised_errors()[k - space.min_keys]
    return "\n".join([
        f"Analysis   {space.cost.name}, compose={space.compose}, frames "
        f"{space.first_frame}..{space.last_frame}, {len(space.candidates)} candidates, "
        f"K {space.min_keys}..{space.max_keys}",
        f"Time       table {space.timings['table_s']:.3f} s, selection "
        f"{space.timings['select_s']:.3f} s",
        f"Suggested  threshold rule K = {k}: error {space.error(k):.4g} pose units ("
        f"{100 * share:.1f} % of the largest pose distance), keys "
        f"{', '.join(map(str, space.keyframes(k)))}",
        f"           cliffs at K = {', '.join(map(str, s['cliffs'])) or 'none'}",
    ])


def add_reduce_options(parser: argparse.ArgumentParser) -> None:
    """How many keys and how to fit them, shared by ``reduce`` and ``batch``."""
    group = parser.add_argument_group("keyframes (default: --suggested)")
    which = group.add_mutually_exclusive_group()
    which.add_argument("--keys", type=int, metavar="K", help="the optimal K keyframes")
    which.add_argument("--ratio", type=float, metavar="R",
                       help="K = round(R × frames of the range), e.g. 0.05")
    which.add_argument("--suggested", action="store_true",
                       help="the suggested K of the threshold rule (the default)")
    which.add_argument("--frames", metavar="F,F,..",
                       help="these host frames (no analysis); the first and last bound the range")
    fit = parser.add_argument_group("fitting")
    fit.add_argument("--tangents", choices=TANGENT_MODES, default="unified")
    fit.add_argument("--smoothness", type=float, default=SMOOTHNESS, metavar="X",
                     help=f"broken-tangent penalty of --tangents smooth (default {SMOOTHNESS})")
    fit.add_argument("--space", choices=FIT_SPACES, default="world",
                     help="fit world joint positions (default) or channel values (fast)")


def _range_frames(clip: Clip, args: argparse.Namespace) -> int:
    bounds = _range(args.range)
    if bounds is None:
        return clip.n_frames
    return bounds[1] - bounds[0] + 1


def reduce_from_args(args: argparse.Namespace, path: str
                     ) -> tuple[Clip, Reduction, SelectionSpace | None]:
    """Load ``path``, choose the keyframes the options ask for and reduce."""
    clip = load_clip(path, first_frame=args.first_frame)
    space = None
    labels = None
    if getattr(args, "layered", False):
        chosen = layered_from_args(clip, args)
        frames = chosen.frames.tolist()
        labels = dict(zip(frames, chosen.labels, strict=True))
    elif args.frames:
        frames = _frames(args.frames, "--frames")
    else:
        wanted = None
        if args.keys is not None:
            wanted = args.keys
        elif args.ratio is not None:
            if not 0 < args.ratio <= 1:
                raise UsageError(f"--ratio must be in (0, 1], got {args.ratio}")
            wanted = max(2, round(args.ratio * _range_frames(clip, args)))
        if wanted is not None and (args.max_keys is None or args.max_keys < wanted):
            args.max_keys = wanted
        space = SelectionSpace.from_clip(
            clip, pose=args.pose, nodes=_names(args.nodes), weights=_weights(args.weights),
            time_scale=args.time_scale, frame_range=_range(args.range), cost=args.cost,
            compose=args.compose, pins=_frames(args.pins, "--pins"), stride=args.stride,
            max_span=args.max_span, max_keys=args.max_keys)
        if wanted is None:
            wanted = space.suggestions()["threshold"]
        wanted = min(max(wanted, space.min_keys), space.max_keys)
        frames = space.keyframes(wanted).tolist()
    reduction = reduce(clip, frames, tangents=args.tangents, smoothness=args.smoothness,
                       space=args.space, labels=labels)
    return clip, reduction, space


def _reduction_summary(clip: Clip, reduction: Reduction) -> str:
    m = reduction.metrics
    t = reduction.timings
    return "\n".join([
        f"Reduction  {len(reduction.curves.frames)} keys ({m.keys} on "
        f"{int(reduction.curves.animated.sum())} animated channels, original {m.original_keys}), "
        f"tangents {reduction.tangents}, {reduction.space} space",
        f"Error      mean {m.mean_mm:.2f} mm, max {m.max_mm:.2f} mm (character scaled to 1.7 m; "
        f"{m.mean:.4g} / {m.max:.4g} scene units), worst {m.worst_node} at frame "
        f"{m.worst_frame}",
        f"Time       channel fit {t['channel_s']:.3f} s, world refinement {t['world_s']:.2f} s",
    ])


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


def cmd_analyze(args: argparse.Namespace) -> int:
    clip, space = analyse(args)
    options = {k: getattr(args, k) for k in ("pose", "nodes", "weights", "time_scale", "range",
                                             "pins", "stride", "max_span", "max_keys")}
    options["max_keys"] = space.max_keys
    chosen = layered_from_args(clip, args) if args.layered else None
    if args.json != "-":
        print(_space_summary(clip, space))
        if chosen is not None:
            print(_layered_summary(chosen))
    if args.json:
        record = space_record(clip, space, args.clip, options)
        if chosen is not None:
            record["layered"] = chosen.record()
        _write_json(record, args.json)
    if args.plot:
        _save_plot(space, args.plot, log=not args.linear, title=f"{clip.name}: {space.cost.name}"
                   f", compose={space.compose}")
    return 0


def cmd_reduce(args: argparse.Namespace) -> int:
    clip, reduction, _ = reduce_from_args(args, args.clip)
    if args.json != "-":
        print(_reduction_summary(clip, reduction))
    if args.json:
        if args.json == "-":
            _write_json(reduction_record(reduction, args.clip, clip.fps), "-")
        else:
            write_reduction_json(reduction, _output_path(args.json), args.clip, clip.fps)
    if args.bvh:
        write_reduced_bvh(clip, reduction, _output_path(args.bvh))
    if args.residual:
        np.save(_output_path(args.residual), reduction.residual)
    return 0


def cmd_batch(args: argparse.Namespace) -> int:
    from sp_core.batch import run_batch
    return run_batch(args)


def _edited_pose(clip: Clip, args: argparse.Namespace) -> np.ndarray:
    """The edited channel values at ``--frame``: offsets from ``--edit`` or a frame of
    ``--edited-bvh``."""
    edited = clip.channels[clip.frame_index(args.frame)].copy()
    if args.edit:
        try:
            record = json.loads(Path(args.edit).read_text())
            offsets = record["offsets"]
            for channel, value in offsets.items():
                edited[clip.channel_names.index(channel)] += float(value)
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
            raise UsageError(f"{args.edit}: expected {{\"offsets\": {{\"Node.Xrotation\": "
                             f"degrees, ...}}}} with channels of the clip ({exc})") from None
        return edited
    other = load_clip(args.edited_bvh, first_frame=args.first_frame)
    if other.channel_names != clip.channel_names:
        raise UsageError(f"{args.edited_bvh} has other channels than {args.clip}")
    return other.raw_channels[other.frame_index(args.frame)]


def cmd_propagate(args: argparse.Namespace) -> int:
    from sp_core.falloff import PoseGraph, pose_edit, propagate, wand_poses

    clip = load_clip(args.clip, first_frame=args.first_frame)
    edited = _edited_pose(clip, args)
    graph = PoseGraph(wand_poses(clip, args.pose, _names(args.nodes)),
                      first_frame=clip.first_frame, sigma=args.sigma, eigen=args.eigen,
                      time_scale=args.time_scale)
    weights = graph.weights(args.frame, region=_range(args.range), mode=args.mode)
    channels = propagate(clip, pose_edit(clip, args.frame, edited), weights)
    from sp_core.io.bvh import write_bvh

    write_bvh(clip.with_channels(channels), _output_path(args.bvh))
    if args.weights:
        rows = "\n".join(f"{f},{w:.6f}" for f, w in zip(clip.frames, weights, strict=True))
        _output_path(args.weights).write_text("frame,weight\n" + rows + "\n")
    reached = clip.frames[weights > 0.5]
    print(f"Propagated the edit at frame {args.frame} ({args.mode}, sigma {graph.sigma:.4g}, "
          f"{graph.eigen} eigenpairs): weight > 0.5 on {len(reached)} frames"
          + (f" ({reached[0]}..{reached[-1]})" if len(reached) else "") + f"; wrote {args.bvh}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    try:
        from sp_core.ui.main_window import run_viewer
    except ImportError as exc:
        raise UsageError(f"view needs the ui extra (PySide6, pyqtgraph): {exc}") from None
    if args.screenshot:
        _output_path(args.screenshot)
    return run_viewer(args.clip, first_frame=args.first_frame, keys=args.keys,
                      screenshot=args.screenshot, apply=args.apply)


def cmd_demo(args: argparse.Namespace) -> int:
    if not SAMPLE_CLIP.exists():
        raise UsageError(f"the sample clip {SAMPLE_CLIP} is missing; run from a checkout of "
                         "Salient Poses (it ships in examples/)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = str(SAMPLE_CLIP.relative_to(SAMPLE_CLIP.parents[1]))
    clip = load_clip(str(SAMPLE_CLIP))
    print("Salient Poses demo: the bundled sample clip (CMU mocap, subject 131, trial 1)\n")
    print(format_summary(clip, source))
    space = SelectionSpace.from_clip(clip)
    print(_space_summary(clip, space))
    options = {"pose": "positions", "stride": 1, "max_keys": space.max_keys}
    _write_json(space_record(clip, space, source, options), str(out / "analysis.json"))
    _save_plot(space, str(out / "error_vs_k.png"), log=True,
               title=f"{clip.name}: line-max, compose=max")
    keys = space.suggestions()["threshold"]
    print(f"\nReducing to the suggested K = {keys} (unified tangents, world-space fit)...")
    reduction = reduce(clip, space.keyframes(keys))
    print(_reduction_summary(clip, reduction))
    write_reduction_json(reduction, out / "reduced_keys.json", source, clip.fps)
    write_reduced_bvh(clip, reduction, out / "reduced.bvh")
    try:
        from sp_core.ui.curve_plot import save_curve_plot
    except ImportError as exc:
        raise UsageError(f"the demo's plots need the ui extra (PySide6, pyqtgraph): {exc}") \
            from None
    save_curve_plot(clip, reduction, out / "before_after.png")
    written = ", ".join(str(out / name) for name in (
        "analysis.json", "error_vs_k.png", "reduced_keys.json", "reduced.bvh",
        "before_after.png"))
    print(f"\nWrote {written}")
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

    analyze = sub.add_parser(
        "analyze", parents=[common], help="optimal keyframes for every K",
        description="Build the selection space of a clip: the optimal keyframes and their error "
                    "for every keyframe count K, with suggested K values.")
    analyze.add_argument("clip", metavar="CLIP", help="a .bvh file")
    add_selection_options(analyze)
    add_layered_options(analyze)
    output = analyze.add_argument_group("output")
    output.add_argument("--json", metavar="OUT", help="write the space as JSON ('-': stdout)")
    output.add_argument("--plot", metavar="OUT.png", help="save the error-against-K graph")
    output.add_argument("--linear", action="store_true", help="linear error axis in --plot")
    analyze.set_defaults(func=cmd_analyze)

    reduce_cmd = sub.add_parser(
        "reduce", parents=[common], help="rebuild a clip from its keyframes",
        description="Choose keyframes (the optimal K, a ratio, the suggested K or given frames), "
                    "fit tangents and write the keyed curves, the reduced motion and the "
                    "residual.")
    reduce_cmd.add_argument("clip", metavar="CLIP", help="a .bvh file")
    add_reduce_options(reduce_cmd)
    add_selection_options(reduce_cmd)
    add_layered_options(reduce_cmd)
    output = reduce_cmd.add_argument_group("output")
    output.add_argument("--json", metavar="OUT", help="keys, tangents and metrics as JSON "
                                                      "('-': stdout)")
    output.add_argument("--bvh", metavar="OUT.bvh", help="the reduced motion on every frame")
    output.add_argument("--residual", metavar="OUT.npy",
                        help="original − reduced channel values (n_frames, n_channels)")
    reduce_cmd.set_defaults(func=cmd_reduce)

    batch = sub.add_parser(
        "batch", parents=[common], help="reduce many clips",
        description="Reduce every clip into DIR (keys JSON and reduced BVH per clip) and write "
                    "DIR/summary.csv. A clip that fails is recorded and the rest continue; the "
                    "exit status is 1 if any failed.")
    batch.add_argument("inputs", nargs="+", metavar="INPUT", help=".bvh files or folders")
    batch.add_argument("--out", required=True, metavar="DIR", help="output folder")
    batch.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes (default: one per core)")
    add_reduce_options(batch)
    add_selection_options(batch)
    batch.set_defaults(func=cmd_batch)

    view = sub.add_parser(
        "view", parents=[common], help="open the viewer and the panel on a clip",
        description="The standalone Salient Poses window: a skeleton viewer with the panel "
                    "docked beside it. With --screenshot it analyses, sets K, saves the window "
                    "as a PNG and exits (works without a display).")
    view.add_argument("clip", metavar="CLIP", help="a .bvh file")
    view.add_argument("--first-frame", type=int, default=0, metavar="N",
                      help="host frame number of the first frame (default 0)")
    view.add_argument("--keys", type=int, metavar="K", help="analyse and set K")
    view.add_argument("--apply", action="store_true", help="also Apply (with --keys)")
    view.add_argument("--screenshot", metavar="OUT.png", help="save the window and exit")
    view.set_defaults(func=cmd_view)

    wand = sub.add_parser(
        "propagate", parents=[common], help="spread a pose edit over the motion (magic wand)",
        description="Apply an edit made at one frame to the whole motion with a falloff from "
                    "the pose graph's Green's function: it follows the motion, and in global "
                    "mode reaches every similar pose.")
    wand.add_argument("clip", metavar="CLIP", help="a .bvh file")
    wand.add_argument("--frame", type=int, required=True, metavar="F", help="the edited frame")
    edit = wand.add_mutually_exclusive_group(required=True)
    edit.add_argument("--edit", metavar="EDIT.json",
                      help='{"offsets": {"Node.Zrotation": 20, ...}} added at --frame')
    edit.add_argument("--edited-bvh", metavar="E.bvh", help="the edited pose is its --frame")
    wand.add_argument("--sigma", type=float, metavar="S",
                      help="kernel width, pose units (default: adapted to the motion)")
    wand.add_argument("--eigen", type=int, default=12, metavar="M",
                      help="eigenpairs of the Green's function (default 12)")
    wand.add_argument("--mode", choices=("local", "global"), default="local")
    wand.add_argument("--range", metavar="A:B", help="host frames the edit may reach")
    wand.add_argument("--pose", choices=POSE_SPACES, default="positions")
    wand.add_argument("--nodes", metavar="N1,N2,..", help="nodes that define pose similarity")
    wand.add_argument("--time-scale", type=float, default=0.0, metavar="T",
                      help="temporal term: scene units per frame (default 0)")
    wand.add_argument("--first-frame", type=int, default=0, metavar="N")
    wand.add_argument("--bvh", required=True, metavar="OUT.bvh", help="the edited motion")
    wand.add_argument("--weights", metavar="OUT.csv", help="frame,weight per host frame")
    wand.set_defaults(func=cmd_propagate)

    demo = sub.add_parser("demo", parents=[common], help="run the demo on the bundled sample clip",
                          description="Analyse the bundled sample clip: print its summary and "
                                      "suggested keyframes, write the JSON and the graph.")
    demo.add_argument("--out", default="demo_out", metavar="DIR",
                      help="folder for the outputs (default demo_out)")
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
