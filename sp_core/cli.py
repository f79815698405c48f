"""The ``salient-poses`` command line, generated from the options schema (:mod:`sp_core.options`).

Every command has ``--help``. Problems with the input (a malformed file, a bad option, an output
that would replace an input or an existing file) end with exit status 2 and one line on stderr,
before any work starts; ``--debug`` shows the full traceback instead. Outputs are written
atomically and inputs never (see docs/guide.md, "Your files are safe").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sp_core import version
from sp_core.errors import OptionError, SalientPosesError, said
from sp_core.io.atomic import (
    OutputError,
    OutputGuard,
    atomic_open,
    output_set,
    sigint_handler,
    write_text,
)
from sp_core.options import (
    CLI,
    Options,
    add_arguments,
    command_line_options,
    field_specs,
    flag_of,
)

# The engine (scipy, numba and the modules that run them: about 0.8 s of a fresh process on
# a two-core machine) is imported by the commands that run it, not with the parser: --help,
# --version and a mistyped flag answer in about 0.3 s (numpy comes with the cost registry
# the parser reads for --cost).
if TYPE_CHECKING:
    import numpy as np

    from sp_core.clip import Clip
    from sp_core.jobs import Job, Result

PROG = "salient-poses"
SAMPLE_CLIP = Path(__file__).resolve().parents[1] / "examples" / "cmu_131_01.bvh"


class UsageError(SalientPosesError):
    """A bad command-line request (missing sample, no display...)."""


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
        "last_frame": clip.last_frame if clip.n_frames else None,  # (no frame: not -1)
        "duration_s": clip.duration,
        "nodes": clip.node_names,
        "parents": [int(p) for p in clip.parents],
        "end_sites": clip.end_site_names,
        "channels": clip.channel_names,
        "height": height,
        "units": clip.units,
        "up_axis": clip.up_axis,
    }


def format_summary(clip: Clip, source: str, tree: bool = False) -> str:
    """A readable multi-line summary of a clip for the terminal."""
    rotations = int(clip.is_rotation_channel().sum())
    # (a file of no frames is a skeleton alone: "frames 0..-1" read as a range)
    span = f"frames {clip.first_frame}..{clip.last_frame}" if clip.n_frames else \
        "no motion: the skeleton alone"
    lines = [
        f"Clip       {clip.name}  ({source})",
        f"Frames     {clip.n_frames}  ({span}) at "
        f"{clip.fps:g} fps, frame time {clip.frame_time:.7g} s, {clip.duration:.3f} s",
        f"Nodes      {clip.n_nodes}  ({len(clip.joint_names)} joints + "
        f"{len(clip.end_site_names)} End Sites), root{'s' if len(clip.root_names) > 1 else ''}: "
        f"{', '.join(clip.root_names)}",
        f"Channels   {clip.n_channels}  ({clip.n_channels - rotations} position, "
        f"{rotations} rotation in degrees)",
    ]
    try:
        lines.append(f"Height     {clip.height():.4g} {clip.units or 'scene units'} (rest pose, "
                     f"{clip.up_axis.upper()} up); errors in mm "
                     f"use {clip.mm_per_unit():.4g} mm per unit (character scaled to 1.7 m)")
    except SalientPosesError as exc:
        lines.append(f"Height     unknown: {exc}")
    if tree:
        lines.append("Hierarchy")
        depth = [0] * clip.n_nodes
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


# ---------------------------------------------------------------------- options per command
def _cli_fields(group: str) -> list[str]:
    return [n for n, (g, spec) in field_specs().items() if g == group and CLI in spec.fronts]


ANALYSIS = _cli_fields("analysis")
KEYS = _cli_fields("keys")
FIT = _cli_fields("fit")
INPUT = _cli_fields("input")
COMMAND_OPTIONS: dict[str, list[str]] = {
    "info": [*INPUT, "json", "positions", "tree", "overwrite"],
    "analyze": [*INPUT, *ANALYSIS, "json", "plot", "linear", "overwrite"],
    "reduce": [*INPUT, *ANALYSIS, *KEYS, *FIT, "json", "bvh", "residual", "overwrite"],
    "batch": [*INPUT, *ANALYSIS, *KEYS, *FIT, "out", "workers", "scheduler", "json_log",
              "overwrite"],
    "view": [*INPUT, "keys", "apply", "screenshot", "overwrite"],
    "propagate": [*INPUT, "frame", "edit", "edited_bvh", "sigma", "eigen", "mode",
                  "frame_range", "pose", "nodes", "time_scale", "bvh", "falloff", "overwrite"],
    "demo": ["demo_out", "overwrite"],
}
REQUIRED = {"batch": ["out"], "propagate": ["frame", "bvh"]}


def options_from(args: argparse.Namespace) -> Options:
    """The options of a parsed command line: defaults, then ``--preset``, then the flags
    (:func:`~sp_core.options.command_line_options`)."""
    preset = getattr(args, "preset", None)
    # (as the schema's paths: an unset variable is not "no preset", nor the current folder)
    if preset == "":
        raise OptionError("--preset must be a file name, got an empty path")
    if getattr(args, "clip", None) == "" or "" in getattr(args, "inputs", ()):
        what = "CLIP must be a file name" if args.command != "batch" \
            else "INPUT must be a file or folder name"
        raise OptionError(f"{what}, got an empty path")
    options = command_line_options(args, COMMAND_OPTIONS[args.command], preset)
    if preset:  # the preset is an input too: no output may replace it
        guard = OutputGuard([preset])
        for name, value in options.to_dict(["output"])["output"].items():
            if isinstance(value, str) and value != "-" and guard.is_input(value):
                raise OutputError(f"{flag_of(name)} {value} is the preset of this command; "
                                  "refusing to overwrite it (choose another file name)")
    return options


# ---------------------------------------------------------------------------- summaries
def _space_summary(result: Result) -> str:
    from sp_core.jobs import automatic_layers
    from sp_core.poses import error_unit

    space = result.space
    assert space is not None
    options = result.job.options.analysis
    s = space.suggestions(options.accuracy, options.significance)
    k = s["threshold"]
    share = space.normalised_errors()[k - space.min_keys]
    # layered: the suggestion is the automatic three-layer choice below (what --suggested
    # writes) when no K was asked for; the keypose space's own threshold rule is said as such
    automatic = automatic_layers(result)
    rule = "the keypose space's threshold rule" if result.labels is not None \
        else "threshold rule"
    return "\n".join([
        f"Analysis   {space.cost.name}, compose={space.compose}, frames "
        f"{space.first_frame}..{space.last_frame}, {len(space.candidates)} candidates, "
        f"K {space.min_keys}..{space.max_keys}",
        f"Time       table {space.timings['table_s']:.3f} s, selection "
        f"{space.timings['select_s']:.3f} s (estimate for two idle cores "
        f"{space.estimated_s:.2f} s)",
        *([f"Suggested  the three-layer rule's {result.keys} keyposes (below; "
           "--suggested writes them)"] if automatic else []),
        f"{'           ' if automatic else 'Suggested  '}{rule} K = {k}: pose error "
        f"{space.error(k):.4g} "
        f"{error_unit(options.pose, space.cost.squared)} ("
        f"{100 * share:.1f} % of the largest pose distance), keys "
        f"{', '.join(map(str, space.keyframes(k)))}",
        f"           cliffs at K = {', '.join(map(str, s['cliffs'])) or 'none'}",
    ] + [f"Note       {said(note, flag_of)}" for note in result.notes])


def _layered_summary(result: Result) -> str:
    labels = result.labels or []
    keyposes = [f for f, label in zip(result.frames, labels, strict=True) if label == "keypose"]
    breakdowns = [f for f, label in zip(result.frames, labels, strict=True)
                  if label != "keypose"]
    return "\n".join([
        f"Keyposes   {len(keyposes)}: {', '.join(map(str, keyposes))}",
        f"Breakdowns {len(breakdowns)}: {', '.join(map(str, breakdowns))}",
    ])


def _choice_summary(result: Result) -> str:
    keys = result.job.options.keys
    n = result.clip["frames"]
    if result.labels is not None:  # layered: K counts the keyposes, breakdowns come on top
        breakdowns = sum(label != "keypose" for label in result.labels)
        how = ("as asked" if keys.keys is not None
               else f"ratio {keys.ratio:g} of {n} frames" if keys.ratio is not None
               else "the threshold rule")
        return (f"Keys       {len(result.labels) - breakdowns} keyposes ({how}) and "
                f"{breakdowns} breakdowns (--layered)")
    if keys.frames is not None:
        return f"Keys       the {len(result.frames)} frames given"
    if keys.keys is not None:
        return f"Keys       K = {result.keys} as asked"
    if keys.ratio is not None:
        return f"Keys       ratio {keys.ratio:g} of {n} frames: K = {result.keys}"
    if result.by_tolerance and keys.tolerance is not None:
        return (f"Keys       the smallest K within mean {keys.tolerance[0]:g} mm and max "
                f"{keys.tolerance[1]:g} mm: K = {result.keys}")
    return f"Keys       the suggested K = {result.keys} (threshold rule)"


def _reduction_summary(result: Result) -> str:
    reduction = result.reduction
    assert reduction is not None
    m = reduction.metrics
    t = reduction.timings
    lines = [
        _choice_summary(result),
        f"Reduction  {len(reduction.curves.frames)} keys ({m.pose_keys} pose keys on "
        f"{int(reduction.curves.animated.sum())} animated channels, original {m.original_keys}), "
        f"tangents {reduction.tangents}, {reduction.space} space",
    ]
    if reduction.pose_metrics is not None:
        p = reduction.pose_metrics
        lines.append(f"Corrective {m.corrective_keys} corrective keys: {m.keys} keys in total "
                     f"({100.0 * m.keys / max(m.original_keys, 1):.1f} % of the original); pose "
                     f"keys alone {p.said()}")
    scaled = (f"{m.said()} (character scaled to 1.7 m; {m.mean:.4g} / {m.max:.4g} scene units)"
              if m.scaled else f"{m.said()} (no mm: see the note)")
    return "\n".join(lines + [
        f"Error      {scaled}, worst {m.worst_node} at frame {m.worst_frame}",
        f"Time       channel fit {t['channel_s']:.3f} s, world refinement {t['world_s']:.2f} s"
        + (f", corrective keys {t['corrective_s']:.2f} s" if t.get("corrective_s") else ""),
    ] + [f"Note       {said(note, flag_of)}" for note in reduction.notes])


def _save_plot(space: Any, target: str, log: bool, title: str, unit: str,
               suggestions: dict[str, Any] | None = None) -> None:
    """The error graph as a PNG, written atomically (rendered beside it, then renamed)."""
    try:
        from sp_core.ui.error_plot import save_error_plot
    except ImportError as exc:
        raise UsageError(f"--plot needs the ui extra (PySide6, pyqtgraph): {exc}") from None
    target_path = Path(target)
    # (rendered in the system's temporary folder: a kill there leaves nothing beside the
    # user's files, where no later run would have removed it)
    handle, name = tempfile.mkstemp(suffix=".png", prefix="salient-poses-plot-")
    os.close(handle)
    rendered = Path(name)
    try:
        save_error_plot(space, rendered, log=log, title=title, unit=unit,
                        suggestions=suggestions)
        with atomic_open(target_path, "wb") as handle:
            handle.write(rendered.read_bytes())
    finally:
        rendered.unlink(missing_ok=True)


def _outputs_note(job: Job, flags: str) -> None:
    """What was written (on stderr when stdout carries the JSON), or how to write it."""
    written = [path for _, path in job.outputs()]
    if written:
        print(f"Wrote {', '.join(written)}",
              file=sys.stderr if job.options.output.json == "-" else sys.stdout)
    elif job.options.output.json != "-":
        print(f"Nothing written: add {flags} to save the result.")


# ------------------------------------------------------------------------------------ commands
def cmd_info(args: argparse.Namespace, options: Options) -> int:
    import numpy as np

    from sp_core.jobs import load_clip

    out = options.output
    guard = OutputGuard([args.clip], out.overwrite)
    for flag, path in (("--json", out.json), ("--positions", out.positions)):
        if path and path != "-":
            guard.claim(path, flag)
    clip = load_clip(args.clip, options)
    if out.json != "-":
        print(format_summary(clip, args.clip, tree=out.tree))
    with output_set():  # (both files new, or both old)
        if out.json:
            text = json.dumps(clip_info(clip, args.clip), indent=2) + "\n"
            sys.stdout.write(text) if out.json == "-" else write_text(out.json, text)
        if out.positions:
            with atomic_open(out.positions, "wb") as handle:
                np.save(handle, clip.positions)
    written = [path for path in (out.json, out.positions) if path and path != "-"]
    if written:  # (said as the other commands say it)
        print(f"Wrote {', '.join(written)}", file=sys.stderr if out.json == "-" else sys.stdout)
    return 0


class TerminalProgress:
    """A progress bar on stderr for a job's steps when stderr is a terminal (quiet on a pipe).

    It appears once the job has run for ``delay`` seconds, so quick runs print nothing extra,
    and a clock thread keeps its elapsed time moving between reports.
    """

    delay = 1.0

    def __init__(self, label: str) -> None:
        self.bar: Any = None
        self.message = label
        self.lock = threading.Lock()
        self.stop = threading.Event()
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.started = time.monotonic()
            self.bar = tqdm(total=1000, delay=1e9, file=sys.stderr, dynamic_ncols=True,
                            leave=False, desc=label,
                            bar_format="{desc}: {percentage:3.0f}% |{bar}| {elapsed}")
            threading.Thread(target=self._clock, daemon=True, name="progress").start()

    def __call__(self, fraction: float, message: str) -> None:
        if self.bar is None:
            return
        with self.lock:
            self.bar.n = round(1000 * min(max(fraction, 0.0), 1.0))
            changed, self.message = message != self.message, message
        if changed:  # every step's name shows, however short the step
            self._draw()

    def _draw(self) -> None:
        with self.lock:
            if time.monotonic() - self.started >= self.delay and not self.stop.is_set():
                self.bar.set_description_str(self.message, refresh=False)
                self.bar.refresh()

    def _clock(self) -> None:
        while not self.stop.wait(0.25):
            self._draw()

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.stop.set()
            with self.lock:
                self.bar.clear()  # tqdm clears only bars it drew itself
                self.bar.close()


def cmd_analyze(args: argparse.Namespace, options: Options) -> int:
    from sp_core.jobs import Job, guard_outputs, run_job, suggested_record, write_outputs
    from sp_core.poses import error_unit

    job = Job(args.clip, options, "analyze")
    guard_outputs(job)
    if options.output.plot:
        _plot_available()
    # the JSON is written with the plot, as one set (write_outputs alone renamed it before the
    # plot was drawn: Ctrl-C then left a new JSON beside an old plot)
    with TerminalProgress("analysing") as progress:
        result = run_job(Job(args.clip, options.replace(json=None), "analyze"),
                         progress=progress)
    result.job = job
    assert result.space is not None
    if options.output.json != "-":
        print(_space_summary(result))
        if result.labels is not None:
            print(_layered_summary(result))
    with output_set():
        result.files = write_outputs(result, None)
        if options.output.plot:
            _save_plot(result.space, options.output.plot, log=not options.output.linear,
                       title=f"{result.clip['name']}: {result.space.cost.name}, compose="
                             f"{result.space.compose}",
                       unit=error_unit(options.analysis.pose, result.space.cost.squared),
                       suggestions=suggested_record(result))
    _outputs_note(job, "--json or --plot")
    return 0


def _plot_available() -> None:
    try:
        import sp_core.ui.error_plot  # noqa: F401 - the ui extra is installed
    except ImportError as exc:
        raise UsageError(f"--plot needs the ui extra (PySide6, pyqtgraph): {exc}") from None


def cmd_reduce(args: argparse.Namespace, options: Options) -> int:
    from sp_core.jobs import Job, guard_outputs, run_job

    job = Job(args.clip, options, "reduce")
    guard_outputs(job)
    with TerminalProgress("reducing") as progress:
        result = run_job(job, progress=progress)
    if options.output.json != "-":
        print(_reduction_summary(result))
    _outputs_note(job, "--json, --bvh or --residual")
    return 0


def cmd_batch(args: argparse.Namespace, options: Options) -> int:
    from sp_core.batch import run_batch

    return run_batch(args.inputs, options, getattr(args, "preset", None))


def _edit_offsets(path: str, clip: Clip, source: str) -> np.ndarray:
    """The offsets of an ``--edit`` file, one per channel of ``clip`` (zero where none is
    given).

    Raises
    ------
    UsageError
        The file cannot be read or is not ``{"offsets": {"Node.Attribute": number, ...}}`` with
        channels of the clip; the message names the file and the channel or value at fault
        (it showed Python's own words: "'NoNode.Zrotation' is not in list").
    """
    import numpy as np

    from sp_core.clip import LARGEST_VALUE

    shape = '{"offsets": {"Node.Xrotation": degrees, ...}}'
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}); expected {shape}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not JSON (not UTF-8 text); expected {shape}") from None
    offsets = record.get("offsets") if isinstance(record, dict) else None
    if not isinstance(offsets, dict):
        raise UsageError(f"{path}: expected {shape}")
    column = {name: i for i, name in enumerate(clip.channel_names)}
    added = np.zeros(clip.n_channels)
    for channel, value in offsets.items():
        if channel not in column:
            node = channel.rpartition(".")[0]
            own = [name.rpartition(".")[2] for name in clip.channel_names
                   if name.rpartition(".")[0] == node]
            known = (f"node {node} has {', '.join(own)}" if own
                     else f"no node {node!r}" if node
                     else "channels are Node.Attribute")
            raise UsageError(f"{path}: offsets: {channel!r} is not a channel of {source} "
                             f"({known}; `{PROG} info {source} --tree` lists them)")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not np.isfinite(value):
            raise UsageError(f"{path}: offsets: {channel} must be a number (degrees, scene "
                             f"units for a position), got {json.dumps(value)}")
        c = column[channel]
        if abs(value) > LARGEST_VALUE:  # (it was blamed on the clip, "a corrupt file?")
            raise UsageError(f"{path}: offsets: {channel} is {value:g}, beyond "
                             f"±{LARGEST_VALUE:g}")
        turned = clip._rotation_index[clip.channel_nodes[c]]
        if len(turned) == 3 and c in turned and abs(value) > 180.0:
            # a joint's three rotations are edited as the pose they lead to, spread as the
            # shortest turn to it: 190 went the other way (-170), 360 changed nothing
            shortest = (float(value) + 180.0) % 360.0 - 180.0
            raise UsageError(f"{path}: offsets: {channel} is {value:g} degrees, more than half "
                             "a turn: the edit is the pose it leads to, spread over the motion "
                             f"as the shortest turn to it ({shortest:g} degrees here); give "
                             "-180 to 180")
        added[c] += float(value)
    return added


def _edited_pose(clip: Clip, args: argparse.Namespace, options: Options) -> np.ndarray:
    """The edited channel values at ``--frame``: offsets from ``--edit`` or a frame of
    ``--edited-bvh``."""
    from sp_core.jobs import load_clip

    wand = options.wand
    if (wand.edit is None) == (wand.edited_bvh is None):
        raise UsageError("give the edit with exactly one of --edit or --edited-bvh")
    edited = clip.channels[clip.frame_index(wand.frame)].copy()
    if wand.edit:
        edited += _edit_offsets(wand.edit, clip, args.clip)
        return edited
    from sp_core.falloff import edited_frame

    # numbered as the clip is (an FBX take from frame 1 against a BVH's 0 took the frame
    # before the one asked for)
    other = load_clip(wand.edited_bvh, options.replace(first_frame=clip.first_frame))
    return edited_frame(clip, other, wand.frame, wand.edited_bvh)


def cmd_propagate(args: argparse.Namespace, options: Options) -> int:
    from sp_core.falloff import clip_graph, moved_channels, pose_edit, propagate
    from sp_core.io.bvh import write_bvh
    from sp_core.jobs import load_clip

    out, wand, analysis = options.output, options.wand, options.analysis
    inputs = [args.clip] + [p for p in (wand.edit, wand.edited_bvh) if p]
    guard = OutputGuard(inputs, out.overwrite)
    assert out.bvh is not None and wand.frame is not None
    guard.claim(out.bvh, "--bvh")
    if out.falloff:
        guard.claim(out.falloff, "--falloff")
    clip = load_clip(args.clip, options)
    edited = _edited_pose(clip, args, options)
    nodes = list(analysis.nodes) if analysis.nodes else None
    graph = clip_graph(clip, analysis.pose, nodes, dict(analysis.weights) or None,
                       analysis.time_scale, wand.sigma, wand.eigen)
    weights = graph.weights(wand.frame, region=analysis.frame_range, mode=wand.mode)
    channels = propagate(clip, pose_edit(clip, wand.frame, edited, typed=bool(wand.edit)),
                         weights)
    if not len(moved_channels(clip, channels)):  # (the panel refuses it too)
        raise UsageError(f"the edit changes nothing at frame {wand.frame}: give offsets in "
                         f"{flag_of('edit')} or another pose in {flag_of('edited_bvh')}")
    with output_set():  # (the edited take and its weights new together, or both old)
        write_bvh(clip.with_channels(channels), out.bvh)
        if out.falloff:
            rows = "\n".join(f"{f},{w:.6f}" for f, w in zip(clip.frames, weights, strict=True))
            write_text(out.falloff, "frame,weight\n" + rows + "\n")
    reached = clip.frames[weights > 0.5]
    print(f"Propagated the edit at frame {wand.frame} ({wand.mode}, sigma {graph.sigma:.4g}, "
          f"{graph.eigen} eigenpairs): weight > 0.5 on {len(reached)} frames"
          + (f" ({reached[0]}..{reached[-1]})" if len(reached) else "") + f"; wrote {out.bvh}"
          + (f", {out.falloff}" if out.falloff else ""))
    return 0


def cmd_view(args: argparse.Namespace, options: Options) -> int:
    # the engine first: a broken numba or scipy is not a missing ui extra
    from sp_core.jobs import load_clip

    try:
        from sp_core.ui.main_window import run_viewer
    except ImportError as exc:
        raise UsageError(f"view needs the ui extra (PySide6, pyqtgraph): {exc}") from None
    out = options.output
    if out.screenshot:
        OutputGuard([args.clip], out.overwrite).claim(out.screenshot, "--screenshot")
    if out.apply and options.keys.keys is None:
        raise UsageError("--apply needs --keys (the K to apply)")
    clip = load_clip(args.clip, options)
    if clip.n_frames < 2:
        raise UsageError(f"{args.clip} holds {clip.n_frames} frame"
                         f"{'s' if clip.n_frames != 1 else ''}; the viewer needs at least 2")
    return run_viewer(args.clip, first_frame=options.input.first_frame, keys=options.keys.keys,
                      screenshot=out.screenshot, apply=out.apply)


#: The files the demo writes into its ``--out`` folder.
DEMO_FILES = ("analysis.json", "error_vs_k.png", "reduced_keys.json", "reduced.bvh",
              "before_after.png")
#: The demo's record of what it wrote (SHA-256 of each file), in its ``--out`` folder: a file
#: that still matches is its own, to rewrite on the next run without ``--overwrite``.
DEMO_RECORD = ".salient-poses-demo.json"


def _digest(path: Path) -> str | None:
    """SHA-256 of the file at ``path`` (the batch manifest's checksum; None if it cannot be
    read)."""
    from sp_core.batch.manifest import checksum

    try:
        return checksum(path)
    except OSError:
        return None


def _demo_record(out: Path) -> dict[str, str]:
    """The demo's record in ``out`` (empty when missing or unreadable: then no file there is
    taken for the demo's)."""
    try:
        record = json.loads((out / DEMO_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    return {k: v for k, v in files.items() if isinstance(v, str)} \
        if isinstance(files, dict) else {}


def _guard_demo_outputs(out: Path, overwrite: bool) -> None:
    """Refuse, before any work, an existing file in ``out`` that the demo would replace and
    did not write itself (its content no longer what the demo's record says), unless
    ``overwrite``: ``demo --out DIR`` replaced the user's own DIR/reduced.bvh."""
    record = _demo_record(out)
    inputs = [str(SAMPLE_CLIP)]
    own, others = OutputGuard(inputs, overwrite=True), OutputGuard(inputs, overwrite)
    for name in DEMO_FILES:
        path = out / name
        ours = name in record and record[name] == _digest(path)
        (own if ours else others).claim(path, "the demo's output")


def _remember_demo_file(out: Path, name: str) -> None:
    """Add ``out/name``, just written, to the demo's record (one at a time: a run stopped
    half-way still knows the files it wrote)."""
    record = _demo_record(out)
    record[name] = _digest(out / name) or ""
    write_text(out / DEMO_RECORD, json.dumps({"files": record}, indent=1) + "\n")


def cmd_demo(args: argparse.Namespace, options: Options) -> int:
    if not SAMPLE_CLIP.exists():
        raise UsageError(f"the sample clip {SAMPLE_CLIP} is missing; run from a checkout of "
                         "Salient Poses (it ships in examples/)")
    # the engine first: a broken numba or scipy is not a missing ui extra
    from sp_core.jobs import Job, load_clip, run_job
    from sp_core.poses import error_unit

    try:
        from sp_core.ui.curve_plot import save_curve_plot
    except ImportError as exc:
        raise UsageError(f"the demo's plots need the ui extra (PySide6, pyqtgraph): {exc}") \
            from None
    out = Path(options.output.demo_out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make --out {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK):  # (up front: the demo's files are written after its work)
        raise UsageError(f"cannot write in --out {out}: the folder is not writable")
    _guard_demo_outputs(out, options.output.overwrite)
    source = str(SAMPLE_CLIP.relative_to(SAMPLE_CLIP.parents[1]))
    clip = load_clip(str(SAMPLE_CLIP))
    print("Salient Poses demo: the bundled sample clip (CMU mocap, subject 131, trial 1)\n")
    print(format_summary(clip, source))
    # (the outputs were checked above: the jobs may replace them)
    analysed = run_job(Job(str(SAMPLE_CLIP), options.replace(
        json=str(out / "analysis.json"), overwrite=True), "analyze"), clip=clip)
    _remember_demo_file(out, "analysis.json")
    print(_space_summary(analysed))
    assert analysed.space is not None
    _save_plot(analysed.space, str(out / "error_vs_k.png"), log=True,
               title=f"{clip.name}: {analysed.space.cost.name}, "
                     f"compose={analysed.space.compose}",
               unit=error_unit(options.analysis.pose, analysed.space.cost.squared))
    _remember_demo_file(out, "error_vs_k.png")
    print("\nReducing to the smallest K within the default tolerance (unified tangents, "
          "world-space fit, corrective keys where needed)...")
    reduced = run_job(Job(str(SAMPLE_CLIP), options.replace(
        json=str(out / "reduced_keys.json"),
        bvh=str(out / "reduced.bvh"), overwrite=True), "reduce"), clip=clip)
    for name in ("reduced_keys.json", "reduced.bvh"):
        _remember_demo_file(out, name)
    print(_reduction_summary(reduced))
    assert reduced.reduction is not None
    save_curve_plot(clip, reduced.reduction, out / "before_after.png")
    _remember_demo_file(out, "before_after.png")
    written = ", ".join(str(out / name) for name in DEMO_FILES)
    print(f"\nWrote {written}")
    return 0


# ------------------------------------------------------------------------------------ parser
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2), like every other error of the tool, and
    no abbreviated flags: ``--tol`` was taken as ``--tolerance`` and ``batch --json OUT`` as
    ``--json-log`` (then OUT was an "unrecognized argument"), and a flag added later would turn
    a working abbreviation into an error or into another flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


DESCRIPTIONS = {
    "info": ("summarise a motion clip", "Print a summary of a motion clip; optionally save it "
             "as JSON and its world positions as a .npy array."),
    "analyze": ("optimal keyframes for every K", "Build the selection space of a clip: the "
                "optimal keyframes and their error for every keyframe count K, with suggested "
                "K values."),
    "reduce": ("rebuild a clip from its keyframes", "Choose keyframes (the optimal K, a ratio, "
               "the suggested K or given frames), fit tangents and write the keyed curves, the "
               "reduced motion and the residual."),
    "batch": ("reduce many clips", "Reduce every clip into DIR (keys JSON and reduced BVH per "
              "clip) and write DIR/summary.csv. A clip that fails is recorded and the rest "
              "continue; the exit status is 1 if any failed. Ctrl-C stops at once and writes "
              "the summary of what finished."),
    "view": ("open the viewer and the panel on a clip", "The standalone Salient Poses window: "
             "a skeleton viewer with the panel docked beside it. With --screenshot it "
             "analyses, sets K, saves the window as a PNG and exits (works without a "
             "display)."),
    "propagate": ("spread a pose edit over the motion (magic wand)", "Apply an edit made at "
                  "one frame to the whole motion with a falloff from the pose graph's Green's "
                  "function: it follows the motion, and in global mode reaches every similar "
                  "pose."),
    "demo": ("run the demo on the bundled sample clip", "Analyse and reduce the bundled sample "
             "clip: print its summary and suggested keyframes, write the JSON, the graph and "
             "the reduction."),
}
COMMANDS: dict[str, Callable[[argparse.Namespace, Options], int]] = {
    "info": cmd_info, "analyze": cmd_analyze, "reduce": cmd_reduce, "batch": cmd_batch,
    "view": cmd_view, "propagate": cmd_propagate, "demo": cmd_demo,
}


def build_parser() -> argparse.ArgumentParser:
    def debug_flag(default: object) -> argparse.ArgumentParser:
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument("--debug", action="store_true", default=default,
                            help="show the full traceback when something fails")
        return common

    # before or after the command; the command's own default would undo one given before it
    common = debug_flag(argparse.SUPPRESS)
    parser = _Parser(
        prog=PROG, parents=[debug_flag(False)],
        description="Salient Poses: optimal keyframe selection and reduction for motion capture.")
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=_Parser)
    for name, (short, long) in DESCRIPTIONS.items():
        command = sub.add_parser(name, parents=[common], help=short, description=long)
        if name == "batch":
            command.add_argument("inputs", nargs="+", metavar="INPUT",
                                 help="motion files (.bvh, .fbx) or folders of them")
        elif name != "demo":
            command.add_argument("clip", metavar="CLIP", help="a motion file (.bvh or .fbx)")
        if name not in ("demo", "view", "info"):
            command.add_argument("--preset", metavar="FILE.toml",
                                 help="options from a TOML or JSON preset (flags override it)")
        add_arguments(command, COMMAND_OPTIONS[name], required=REQUIRED.get(name, ()))
    return parser


#: A negative frame, range or list of frames (``-5``, ``-5:20``, ``-10,0,30``).
NEGATIVE_LIST = re.compile(r"^-\d[\d.]*([:,]-?\d[\d.]*)*$")


def _joined_negatives(argv: Sequence[str]) -> list[str]:
    """``--range -5:20`` as ``--range=-5:20``: argparse takes a value that starts with '-' for
    an option unless it is a plain negative number, and frames before 0 (pre-roll) are real
    (ranges, pins and key frames that start below zero)."""
    joined: list[str] = []
    for word in argv:
        if joined and NEGATIVE_LIST.match(word) and joined[-1].startswith("--") \
                and "=" not in joined[-1]:
            joined[-1] = f"{joined[-1]}={word}"
        else:
            joined.append(word)
    return joined


def _unrecognized(command: str, extra: Sequence[str]) -> str:
    """The error for words no flag of ``command`` takes; a flag of other commands is said to
    be theirs (``batch --json``: batch writes each clip's JSON into ``--out``)."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    flag = next((word.partition("=")[0] for word in extra if word.startswith("--")), None)
    owners = [name for name, names in COMMAND_OPTIONS.items()
              if flag in {flag_of(n) for n in names}]
    if flag and owners:
        message += f"; {flag} is an option of {', '.join(owners)}, not of {command}"
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``salient-poses``; returns the exit status."""
    for stream in (sys.stdout, sys.stderr):
        # a joint name the console cannot show (a Windows console's cp1252) is escaped: the
        # summary printed after the files were written failed the command with them written
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    parser = build_parser()
    args, extra = parser.parse_known_args(
        _joined_negatives(sys.argv[1:] if argv is None else argv))
    if extra:
        parser.error(_unrecognized(args.command, extra))
    func = COMMANDS[args.command]
    try:
        options = options_from(args)
        if args.command in ("batch", "view"):  # they handle Ctrl-C themselves
            return func(args, options)
        with sigint_handler(signal.SIG_DFL):  # Ctrl-C ends the command at once
            return func(args, options)
    except BrokenPipeError:
        # the reader of stdout went away (`| head`): stop quietly, and send what Python still
        # flushes at exit nowhere (the recipe of Python's signal module documentation)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (SalientPosesError, OSError) as exc:
        if args.debug:
            raise
        print(f"{PROG}: error: {said(exc, flag_of)}", file=sys.stderr)
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


def run() -> NoReturn:
    """The ``salient-poses`` command: :func:`main`, then the end of the process.

    Once a command has run a kernel, the interpreter's own teardown (freeing every module and
    numba's compiled code, which the system reclaims at once anyway) took 0.13 s of every
    command, 0.075 s after the imports alone. So the exit handlers run (temporary folders,
    logging, the process pool's children), the output is flushed, and the process ends with
    the command's status. Not so where Qt is loaded (``view``: its objects are torn down in
    order) or a thread of the command still runs (it is waited for, as at any exit).
    """
    status = main()
    if "PySide6" in sys.modules or any(
            not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(status)
    import atexit

    atexit._run_exitfuncs()  # what the interpreter's exit runs first (CPython)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
