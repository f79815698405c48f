"""Jobs: the one way to run work, from the command line, the panel, a host API or a batch.

A :class:`Job` is data (a motion file or "the host's scene", the options, what to do) and is
picklable and JSON-serialisable, so it can run in this process, a process pool or a Dask
worker. :func:`run_job` runs it through a :class:`sp_core.session.Session` on a host (a
:class:`sp_core.standalone.StandaloneHost` for files) and returns a :class:`Result`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sp_core.clip import Clip
from sp_core.errors import OptionError
from sp_core.host import Host, LayerHandle
from sp_core.io.atomic import OutputGuard, atomic_open, output_set, write_text
from sp_core.io.readers import read_clip
from sp_core.options import Options, applied, build, key_choice
from sp_core.reduction import Reduction, constant_channels
from sp_core.selection import SelectionSpace
from sp_core.session import CancelToken, Session

COMMANDS = ("analyze", "reduce")
#: option groups that decide a result (written into output files)
RESULT_GROUPS = ("input", "analysis", "keys", "fit")


@dataclass(frozen=True)
class Job:
    """One unit of work.

    Attributes
    ----------
    input : str
        The motion file; empty when a host provides the motion (its scene).
    options : Options
        Every option, outputs included (``options.output``).
    command : {"analyze", "reduce"}
    apply : bool
        Write the reduction into the host as layers (host jobs).
    """

    input: str
    options: Options = field(default_factory=Options)
    command: str = "reduce"
    apply: bool = False

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise OptionError(f"command must be one of {', '.join(COMMANDS)}, got "
                              f"{self.command!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "command": self.command, "apply": self.apply,
                "options": self.options.to_dict()}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Job:
        if not isinstance(record, dict) or "input" not in record:
            raise OptionError("a job record holds 'input' (the motion file; '' for a host's "
                              "scene), and 'options', 'command' and 'apply' if not the "
                              "defaults")
        return cls(str(record["input"]), build(record.get("options", {})),
                   str(record.get("command", "reduce")), bool(record.get("apply", False)))

    def outputs(self) -> list[tuple[str, str]]:
        """``(flag, path)`` of every file this job writes (``-`` is standard output)."""
        out = self.options.output
        wanted = [("--json", out.json), ("--plot", out.plot)] if self.command == "analyze" \
            else [("--json", out.json), ("--bvh", out.bvh), ("--residual", out.residual)]
        return [(flag, path) for flag, path in wanted if path and path != "-"]


@dataclass
class Result:
    """What a job did.

    Attributes
    ----------
    job : Job
    clip : dict
        ``name``, ``frames``, ``fps``, ``first_frame``, ``last_frame`` of the motion used.
    space : SelectionSpace or None
        The analysis (None when the frames were given). A ``reduce`` job's has solved the
        selection DP only up to the largest K its choice of K read; reading every K (its
        ``errors``, the suggested K) solves the rest first.
    keys : int or None
        K (keyposes in layered mode).
    frames : list of int
        Host frames of the keys.
    labels : list of str or None
        ``keypose``/``breakdown`` per key in layered mode.
    reduction : Reduction or None
    files : list of str
        Files written.
    layers : list of LayerHandle
        Layers written into the host.
    seconds : float
    notes : list of str
        What the analysis wants the user to know (e.g. the window of a long take; see
        :attr:`Session.notes`); a reduction's own notes follow them in ``reduction.notes``.
    by_tolerance : bool
        K is the tolerance's (False where the tolerance was the choice but could not be used:
        the notes say why, and K is the suggested K).
    """

    job: Job
    clip: dict[str, Any]
    space: SelectionSpace | None = None
    keys: int | None = None
    frames: list[int] = field(default_factory=list)
    labels: list[str] | None = None
    reduction: Reduction | None = None
    files: list[str] = field(default_factory=list)
    layers: list[LayerHandle] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    by_tolerance: bool = False

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (the row of a batch summary)."""
        metrics = self.reduction.metrics.record() if self.reduction is not None else None
        return {"input": self.job.input, "clip": self.clip, "keys": self.keys,
                "frames": self.frames, "labels": self.labels, "metrics": metrics,
                "files": self.files, "seconds": round(self.seconds, 3)}


# ------------------------------------------------------------------------------- inputs
def load_clip(path: str, options: Options | None = None) -> Clip:
    """Read a motion file (any registered type) with the input options."""
    options = options or Options()
    given = options.input
    return read_clip(path, first_frame=given.first_frame, take=given.take, root=given.root)


def guard_outputs(job: Job, overwrite: bool | None = None, label: str | None = None,
                  inputs: Sequence[str] = ()) -> OutputGuard:
    """Check every output of ``job`` before any work (see :class:`OutputGuard`); messages name
    each by its flag, or by ``label`` (a batch's take, whose outputs no flag names).
    ``inputs``: files the job reads besides its input (a preset)."""
    guard = OutputGuard([*([job.input] if job.input else []), *inputs],
                        job.options.output.overwrite if overwrite is None else overwrite)
    for flag, path in job.outputs():
        guard.claim(path, label or flag)
    return guard


# ------------------------------------------------------------------------------- running
#: Shares of a reduce's progress bar taken by the analysis: when the tolerance chooses K its
#: search fits the reduction it returns, otherwise the fit that follows takes most of the bar.
ANALYSIS_SHARE = {"tolerance": 0.95, "other": 0.4}


def run_job(job: Job, host: Host | None = None, clip: Clip | None = None,
            progress: Callable[[float, str], None] | None = None,
            cancel: CancelToken | None = None) -> Result:
    """Run ``job``: read, analyse, choose K, reduce, write its files and (``apply``) layers.

    Parameters
    ----------
    job : Job
    host : Host, optional
        The application whose scene is the input (default: the job's file in a
        :class:`StandaloneHost`).
    clip : Clip, optional
        The job's file already read (saves reading it twice).
    progress, cancel
        As in :meth:`Session.analyze`.

    Raises
    ------
    SalientPosesError
        Bad input, options or outputs; outputs are checked before any work and written
        atomically, inputs are never written.
    """
    started = time.perf_counter()
    guard_outputs(job)
    if host is None:
        from sp_core.standalone import StandaloneHost

        clip = clip if clip is not None else load_clip(job.input, job.options)
        host = StandaloneHost(clip, source=job.input)
    session = Session(host, job.options)
    keys = job.options.keys
    result = Result(job, {})
    labels: dict[int, str] | None = None
    step = progress
    share = ANALYSIS_SHARE["tolerance" if key_choice(job.options) == "tolerance" else "other"]
    if progress is not None and job.command == "reduce":
        def step(fraction: float, message: str) -> None:
            progress(share * fraction, message)
    if keys.frames is None:
        # a reduction reads the K it tries and writes only the chosen one: the selection DP
        # runs that far only (on a long take a fraction of it), not for every K
        session.analyze(progress=step, cancel=cancel, choose=job.command == "reduce",
                        whole_space=job.command != "reduce")
        result.space, result.keys = session.space, session.k
        result.by_tolerance = session.tolerance_k is not None
        result.frames = [int(f) for f in session.keyframes()]
        result.notes = list(session.notes)
        labels = session.labels()
        result.labels = None if labels is None else [labels[f] for f in result.frames]
    else:
        result.frames = list(keys.frames)
    if session.motion is None:  # given frames: read here, and what the host said on reading
        session.motion = session.read_motion()
        result.notes = list(session.reading_notes)
    motion = session.motion
    result.clip = {"name": motion.name, "frames": motion.n_frames, "fps": motion.fps,
                   "first_frame": motion.first_frame, "last_frame": motion.last_frame}
    if job.command == "reduce":
        if progress is not None:
            progress(share, f"fitting curves through {len(result.frames)} keys "
                            f"({job.options.fit.space} space)")
        top = 0.9 if job.apply else 0.99

        def fitted(fraction: float, message: str) -> None:
            if cancel is not None:
                cancel.check()
            if progress is not None:
                progress(share + (top - share) * fraction, message)
        result.reduction = session.reduce(frames=result.frames, labels=labels,
                                          progress=fitted)
        if result.notes:  # the analysis' notes travel with the reduction into its outputs
            result.reduction = dataclasses.replace(
                result.reduction, notes=(*result.notes, *result.reduction.notes))
        # a scene in which nothing moves has no key to write: its analysis' note says so, and
        # an in-host batch saves the scene as it is rather than fail it (one whose moving
        # channels are all locked is refused by apply(), which says so)
        if job.apply and not constant_channels(motion.channels).all():
            if progress is not None:
                progress(0.9, f"writing layer {job.options.layer.layer!r}")
            session.apply(result.reduction)
            result.layers = list(session.applied)
    result.files = write_outputs(result, motion)
    if progress is not None:
        progress(1.0, "done")
    result.seconds = time.perf_counter() - started
    return result


def write_outputs(result: Result, motion: Clip | None) -> list[str]:
    """Write the files ``result.job`` asks for (atomically, and as one set: all of them
    replace the old ones at the end, see :func:`~sp_core.io.atomic.output_set`); returns their
    paths. ``motion`` is the reduced motion (None for an analysis)."""
    with output_set():
        return _write_outputs(result, motion)


def _write_outputs(result: Result, motion: Clip | None) -> list[str]:
    job, out = result.job, result.job.options.output
    written = []
    if job.command == "analyze":
        if out.json and result.space is not None:
            _json(space_record(result), out.json)
            written.append(out.json)
        return [w for w in written if w != "-"]
    reduction = result.reduction
    assert reduction is not None and motion is not None
    if out.json:
        write_keys_json(reduction, job.input, motion.fps, job.options, out.json)
        written.append(out.json)
    if out.bvh:
        from sp_core.io.keys import write_reduced_bvh

        write_reduced_bvh(motion, reduction, out.bvh)
        written.append(out.bvh)
    if out.residual:
        with atomic_open(out.residual, "wb") as handle:
            np.save(handle, reduction.residual)
        written.append(out.residual)
    return [w for w in written if w != "-"]


def reduction_file_record(reduction: Reduction, source: str, fps: float, options: Options
                          ) -> dict[str, Any]:
    """The ``reduce --json`` record (schema in docs/formats.md), which the panel's *Save keys
    JSON* writes too: the keys, errors and the options that made them.

    What it holds depends only on the input and the options, so runs compare byte for byte: no
    timings (the terminal and batch summaries have them), no output paths.
    """
    from sp_core.io.keys import reduction_record

    record = reduction_record(reduction, source, fps)
    del record["timings"]
    # (values the other options leave nothing to do are their defaults: the block is a
    # preset giving the same result, also when a script's options held such values)
    record["options"] = applied(options).to_dict(RESULT_GROUPS)
    return record


def write_keys_json(reduction: Reduction, source: str, fps: float, options: Options,
                    target: str) -> None:
    """Write :func:`reduction_file_record` to ``target`` (atomically; ``-`` is stdout): the
    ``reduce --json`` file and the panel's *Save keys JSON*."""
    _json(reduction_file_record(reduction, source, fps, options), target, indent=1)


def _json(record: dict[str, Any], target: str, indent: int = 2) -> None:
    text = json.dumps(record, indent=indent) + "\n"
    if target == "-":
        import sys

        sys.stdout.write(text)
    else:
        write_text(target, text)


def automatic_layers(result: Result) -> bool:
    """Whether ``result``'s keyposes and breakdowns are the automatic three-layer choice (the
    layered mode with no K asked for), which is then its suggested K."""
    return result.labels is not None and key_choice(result.job.options) == "suggested"


def suggested_record(result: Result) -> dict[str, Any]:
    """The space's suggestions (threshold rule and cliffs); in the layered mode's automatic
    choice the suggested K (``threshold``) is its keyposes, as everywhere else (the panel, the
    Blender sidebar, ``--suggested``), and the keypose space's own rule is
    ``space_threshold``."""
    space = result.space
    assert space is not None
    analysis = result.job.options.analysis
    found = space.suggestions(analysis.accuracy, analysis.significance)
    if automatic_layers(result):
        found = {**found, "threshold": result.keys, "space_threshold": found["threshold"]}
    return found


def space_record(result: Result) -> dict[str, Any]:
    """The ``analyze`` JSON record (schema in docs/formats.md)."""
    space = result.space
    assert space is not None
    job = result.job
    errors = space.errors
    record = {
        "clip": job.input,
        "fps": result.clip["fps"],
        "first_frame": space.first_frame,
        "last_frame": space.last_frame,
        "cost": space.cost.name,
        "compose": space.compose,
        "max_keys": space.max_keys,
        "options": applied(job.options).to_dict(RESULT_GROUPS),
        "timings": {k: round(v, 6) for k, v in space.timings.items()},
        "space": [{"keys": int(k), "error": float(e) if np.isfinite(e) else None,
                   "frames": space.keyframes(int(k)).tolist() if np.isfinite(e) else None}
                  for k, e in zip(space.key_counts, errors, strict=True)],
        "suggested": suggested_record(result),
        "notes": list(result.notes),
    }
    if result.labels is not None:
        record["layered"] = {"keys": result.keys, "frames": result.frames,
                             "labels": result.labels}
    return record
