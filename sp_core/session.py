"""The session: everything the panel shows and does, without Qt (usable from scripts and batch).

A :class:`Session` holds a host, the analysis options, the selection space, the current K, the
reduction options and what was applied. Views subscribe to its events::

    session = Session(host)
    session.subscribe("k_changed", lambda k, frames: ...)
    session.analyze()                 # in the caller's thread; progress and cancel optional
    session.set_k(session.suggested_k)  # previews the keyframes in the host
    session.apply()                   # one undo step in the host
    session.remove()

Events and their arguments: ``analysis_started()``, ``analysis_progress(fraction, message)``,
``analysis_finished(space)``, ``analysis_failed(error)``, ``analysis_cancelled()``,
``k_changed(k, frames)``, ``applied(handles, reduction)`` (reduction None for a propagated
edit), ``removed(handles)``. Callbacks run in
the thread that caused the event (the analysis worker for the analysis events).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sp_core.clip import Clip
from sp_core.errors import SalientPosesError, SelectionError
from sp_core.falloff import EIGEN, PoseGraph, pose_edit, propagate, wand_poses
from sp_core.fitting import SMOOTHNESS
from sp_core.host import Host, LayerHandle, host_step
from sp_core.layered import LayeredSelection, TwoPassSpace
from sp_core.reduction import Reduction, reduce
from sp_core.selection import SelectionSpace

EVENTS = ("analysis_started", "analysis_progress", "analysis_finished", "analysis_failed",
          "analysis_cancelled", "k_changed", "applied", "removed")


class AnalysisCancelled(SalientPosesError):
    """The analysis was cancelled by the user."""


class CancelToken:
    """Shared between the thread that cancels and the analysis that checks."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`AnalysisCancelled` if cancelled."""
        if self._event.is_set():
            raise AnalysisCancelled("analysis cancelled")


@dataclass
class Pin:
    """A frame that must be a keyframe, with an optional name and note."""

    frame: int
    name: str = ""
    note: str = ""


@dataclass
class AnalysisOptions:
    """What to analyse and how (see :class:`sp_core.selection.SelectionSpace`).

    ``roots`` are the nodes whose hierarchies are analysed (None: the host's selection, or its
    whole scene when nothing is selected); ``nodes`` the nodes whose poses count (None: all
    under the roots) with per-node ``weights``; ``frame_range`` None means the host's playback
    range. With ``layered``, K counts keyposes chosen on the ``leading`` nodes and
    ``breakdowns`` more keys (None: the breakdown space's threshold rule) are chosen with the
    keyposes pinned (:class:`sp_core.layered.TwoPassSpace`).
    """

    roots: list[str] | None = None
    nodes: list[str] | None = None
    weights: dict[str, float] = field(default_factory=dict)
    pose: str = "positions"
    cost: str = "line-max"
    cost_options: dict[str, Any] = field(default_factory=dict)
    compose: str = "max"
    frame_range: tuple[int, int] | None = None
    pins: list[Pin] = field(default_factory=list)
    stride: int = 1
    max_span: int | None = None
    max_keys: int | None = None
    time_scale: float = 0.0
    layered: bool = False
    leading: list[str] = field(default_factory=list)
    breakdowns: int | None = None


@dataclass
class ReductionOptions:
    """How Apply rebuilds the animation (see :func:`sp_core.reduction.reduce`)."""

    tangents: str = "unified"
    smoothness: float = SMOOTHNESS
    space: str = "world"
    layer: str = "salientPoses"
    residual: bool = False
    residual_weight: float = 1.0


class Session:
    """State and actions of one Salient Poses panel.

    Parameters
    ----------
    host : Host
    """

    def __init__(self, host: Host) -> None:
        self.host = host
        self.analysis = AnalysisOptions()
        self.reduction = ReductionOptions()
        self.space: SelectionSpace | None = None
        self.motion: Clip | None = None
        self.k: int | None = None
        self.applied: list[LayerHandle] = []
        self.two_pass: TwoPassSpace | None = None
        self._graph: tuple[tuple, Clip, PoseGraph] | None = None
        self.last_reduction: Reduction | None = None
        self._subscribers: dict[str, list[Callable[..., None]]] = {e: [] for e in EVENTS}

    # ------------------------------------------------------------------ events
    def subscribe(self, event: str, callback: Callable[..., None]) -> Callable[[], None]:
        """Call ``callback(*args)`` on ``event``; returns a function that unsubscribes."""
        if event not in self._subscribers:
            raise ValueError(f"unknown event {event!r}; events are {', '.join(EVENTS)}")
        self._subscribers[event].append(callback)
        return lambda: self._subscribers[event].remove(callback)

    def _emit(self, event: str, *args: Any) -> None:
        for callback in list(self._subscribers[event]):
            callback(*args)

    # ------------------------------------------------------------------ analysis
    def roots(self) -> list[str]:
        """The hierarchies to analyse: the option, else the host selection, else everything."""
        if self.analysis.roots:
            return list(self.analysis.roots)
        with host_step("reading the selection"):
            selected = self.host.selected_nodes()
        if selected:
            return selected
        with host_step("reading the scene's root nodes"):
            everything = self.host.hierarchy([])
        return [name for name, parent in everything if parent is None]

    def frame_range(self) -> tuple[int, int]:
        if self.analysis.frame_range is not None:
            return self.analysis.frame_range
        with host_step("reading the playback range"):
            return self.host.playback_range()

    def read_motion(self) -> Clip:
        """The motion to analyse, read from the host (call from the host's main thread)."""
        first, last = self.frame_range()
        if last <= first:
            raise SelectionError(f"the range {first}..{last} has fewer than 2 frames; "
                                 "choose a longer range")
        roots = self.roots()
        with host_step(f"reading the motion of {', '.join(roots)} over frames {first}..{last}"):
            return self.host.motion(roots, first, last)

    def analyze(self, progress: Callable[[float, str], None] | None = None,
                cancel: CancelToken | None = None, motion: Clip | None = None
                ) -> SelectionSpace:
        """Build the selection space (in the caller's thread).

        The current K is kept (clamped) or set to the suggested K; call :meth:`set_k` to
        preview it in the host.

        Parameters
        ----------
        progress : callable, optional
            ``progress(fraction, message)``; also emitted as ``analysis_progress``.
        cancel : CancelToken, optional
            Checked between stages; a cancelled analysis raises :class:`AnalysisCancelled` and
            leaves the previous space in place.
        motion : Clip, optional
            Motion read beforehand with :meth:`read_motion` (hosts whose API must be called
            from their main thread, while the analysis runs in a worker); default: read now.
        """
        token = cancel or CancelToken()

        def report(fraction: float, message: str) -> None:
            token.check()
            if progress is not None:
                progress(fraction, message)
            self._emit("analysis_progress", fraction, message)

        self._emit("analysis_started")
        try:
            options = self.analysis
            if motion is None:
                report(0.0, "reading the motion from " + self.host.name)
                motion = self.read_motion()
            report(0.02, "poses")
            two_pass = None
            if options.layered:
                report(0.05, f"keypose space of {', '.join(options.leading) or '?'}")
                two_pass = TwoPassSpace(motion, options.leading, nodes=options.nodes,
                                        weights=options.weights or None, stride=options.stride,
                                        pose=options.pose)
                space = two_pass.keyposes
            else:
                space = SelectionSpace.from_clip(
                    motion, pose=options.pose, nodes=options.nodes,
                    weights=options.weights or None, time_scale=options.time_scale,
                    cost=options.cost, cost_options=options.cost_options,
                    compose=options.compose, pins=[p.frame for p in options.pins],
                    stride=options.stride, max_span=options.max_span,
                    max_keys=options.max_keys,
                    progress=lambda f, m: report(0.05 + 0.95 * f, m))
            token.check()
        except AnalysisCancelled:
            self._emit("analysis_cancelled")
            raise
        except Exception as exc:
            self._emit("analysis_failed", exc)
            raise
        self.motion, self.space, self.two_pass = motion, space, two_pass
        wanted = self.suggested_k if self.k is None else self.k
        self.k = int(min(max(wanted, space.min_keys), space.max_keys))
        if progress is not None:
            progress(1.0, "done")
        self._emit("analysis_finished", space)
        return space

    @property
    def suggestions(self) -> dict[str, Any]:
        return self._require_space().suggestions()

    @property
    def suggested_k(self) -> int:
        return int(self.suggestions["threshold"])

    def keyframes(self, k: int | None = None) -> np.ndarray:
        """Host frames of the optimal selection with ``k`` (default the current K) keys; in
        layered mode K keyposes plus their breakdowns."""
        space = self._require_space()
        k = self.k if k is None else k
        if self.two_pass is not None:
            return self.selection(k).frames
        return space.keyframes(k)

    def selection(self, k: int | None = None) -> LayeredSelection | None:
        """Layered mode: the labelled keyframes for ``k`` keyposes (None in plain mode)."""
        if self.two_pass is None:
            return None
        k = self.k if k is None else k
        assert k is not None
        extra = self.analysis.breakdowns
        return self.two_pass.selection(k, None if extra is None else k + extra)

    def labels(self, k: int | None = None) -> dict[int, str] | None:
        chosen = self.selection(k)
        if chosen is None:
            return None
        return {int(f): label for f, label in zip(chosen.frames, chosen.labels, strict=True)}

    def set_k(self, k: int | None = None) -> int:
        """Choose K (clamped to the space; default the current K) and preview its keyframes
        in the host; returns K."""
        space = self._require_space()
        k = int(min(max(int(self.k if k is None else k), space.min_keys), space.max_keys))
        self.k = k
        frames = self.keyframes(k)
        labels = self.labels(k)
        with host_step("previewing keyframes"):
            if labels is None:
                self.host.preview_keyframes(frames.tolist())
            else:
                self.host.preview_keyframes(frames.tolist(), [labels[int(f)] for f in frames])
        self._emit("k_changed", k, frames)
        return k

    def _require_space(self) -> SelectionSpace:
        if self.space is None:
            raise SelectionError("analyse first: there is no selection space yet")
        return self.space

    # ------------------------------------------------------------------ apply / remove
    def apply(self) -> Reduction:
        """Reduce at the current K and write it into the host: one undo step, all or nothing."""
        self._require_space()
        assert self.motion is not None and self.k is not None
        options = self.reduction
        reduction = reduce(self.motion, self.keyframes(self.k), tangents=options.tangents,
                           smoothness=options.smoothness, space=options.space,
                           labels=self.labels(self.k))
        handles: list[LayerHandle] = []
        with host_step("opening an undo chunk"):
            chunk = self.host.undo_chunk(f"Salient Poses: apply {self.k} keys")
        with chunk:
            with host_step(f"writing layer {options.layer!r}"):
                handles.append(self.host.write_curves(reduction.curves, options.layer))
            if options.residual:
                animated = reduction.curves.animated
                names = [n for n, a in zip(reduction.curves.channel_names, animated, strict=True)
                         if a]
                with host_step(f"writing the residual layer {options.layer + '_residual'!r}"):
                    handles.append(self.host.write_residual(
                        names, reduction.frames, reduction.residual[:, animated],
                        options.layer + "_residual", options.residual_weight))
        self.applied.extend(handles)
        self.last_reduction = reduction
        self._emit("applied", handles, reduction)
        return reduction

    def remove(self) -> list[LayerHandle]:
        """Take every applied layer away again (one undo step)."""
        handles = list(self.applied)
        if not handles:
            return []
        with host_step("opening an undo chunk"):
            chunk = self.host.undo_chunk("Salient Poses: remove layers")
        with chunk:
            for handle in reversed(handles):
                with host_step(f"removing layer {handle.name!r}"):
                    self.host.remove_layer(handle)
        self.applied.clear()
        self._emit("removed", handles)
        return handles

    # ------------------------------------------------------------------ magic wand
    def pose_graph(self, sigma: float | None = None, eigen: int = EIGEN) -> PoseGraph:
        """The analysed motion's pose graph (cached per sigma and eigen count)."""
        if self.motion is None:
            raise SelectionError("analyse first: the falloff needs the motion")
        key = (sigma, int(eigen))
        if self._graph is None or self._graph[0] != key or self._graph[1] is not self.motion:
            graph = PoseGraph(wand_poses(self.motion, self.analysis.pose, self.analysis.nodes,
                                         self.analysis.weights or None),
                              first_frame=self.motion.first_frame, sigma=sigma, eigen=eigen)
            self._graph = (key, self.motion, graph)
        return self._graph[2]

    def host_pose(self, frame: int) -> np.ndarray:
        """The host's current channel values at ``frame`` (an edit the artist posed there)."""
        assert self.motion is not None
        with host_step(f"reading the pose at frame {frame}"):
            return self.host.channel_values(self.motion.channel_names, frame, frame)[0]

    def propagate_edit(self, frame: int, edited: np.ndarray, weights: np.ndarray,
                       layer: str = "salientPosesEdit") -> LayerHandle:
        """Write ``edited`` (the pose at ``frame``) spread with ``weights`` into a new additive
        layer (propagated − original per channel; one undo step, removable with
        :meth:`remove`)."""
        if self.motion is None:
            raise SelectionError("analyse first: the edit is relative to the analysed motion")
        motion = self.motion
        channels = propagate(motion, pose_edit(motion, frame, edited), weights)
        delta = channels - motion.channels
        moved = np.flatnonzero(np.abs(delta).max(axis=0) > 0)
        if not len(moved):
            raise SelectionError("the edit changes nothing: pose the character at the edited "
                                 "frame first")
        names = [motion.channel_names[c] for c in moved]
        with host_step("opening an undo chunk"):
            chunk = self.host.undo_chunk("Salient Poses: propagate edit")
        with chunk, host_step(f"writing the edit layer {layer!r}"):
            handle = self.host.write_residual(names, motion.frames, delta[:, moved], layer, 1.0)
        self.applied.append(handle)
        self._emit("applied", [handle], None)
        return handle

    # ------------------------------------------------------------------ pins
    def export_pins(self, path: str | Path) -> None:
        """Write the pins as JSON: ``{"pins": [{"frame", "name", "note"}, ...]}``."""
        Path(path).write_text(json.dumps({"pins": [asdict(p) for p in self.analysis.pins]},
                                         indent=1) + "\n")

    def import_pins(self, path: str | Path) -> list[Pin]:
        """Replace the pins with those in a JSON file written by :meth:`export_pins`."""
        try:
            record = json.loads(Path(path).read_text())
            pins = [Pin(int(p["frame"]), str(p.get("name", "")), str(p.get("note", "")))
                    for p in record["pins"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SelectionError(f"cannot read pins from {path}: expected "
                                 f'{{"pins": [{{"frame": N, "name": "", "note": ""}}]}} '
                                 f"({type(exc).__name__}: {exc})") from None
        self.analysis.pins = sorted(pins, key=lambda p: p.frame)
        return self.analysis.pins
