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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sp_core.clip import Clip
from sp_core.errors import Note, OptionError, SalientPosesError, SelectionError
from sp_core.host import Host, LayerHandle, SparseLayers, host_step
from sp_core.layered import LayeredSelection, TwoPassSpace, layered_selection
from sp_core.options import (
    DEFAULT_TOLERANCE,
    InputOptions,
    Options,
    Pin,
    applied,
    build,
    coerce,
    corrective_plan,
    k_for,
    key_choice,
    max_keys_for,
    time_budget_for,
)
from sp_core.reduction import Reduction, constant_channels, reduce, size_unknown
from sp_core.selection import SelectionSpace
from sp_core.tolerance import ToleranceSearch

if TYPE_CHECKING:  # (the falloff's sparse solvers load with the magic wand's first use)
    from sp_core.falloff import PoseGraph

#: Share of an analysis' progress taken by the selection space when the tolerance's search
#: follows it (the search's fits take most of the time).
SPACE_SHARE = 0.2
#: Analysis options the session reads after the analysis (the suggested K's threshold rule,
#: a layered selection's breakdowns): changing them needs no new analysis.
READ_LIVE = frozenset({"accuracy", "significance", "breakdowns"})
#: Analysis options the spaces of keyposes + breakdowns mode do not read.
NOT_LAYERED = frozenset({"cost", "cost_options", "compose", "time_scale", "pins", "max_span",
                         "max_keys", "memory_gib", "time_budget"})
#: The input options (the rest of what shapes an analysis is its own group).
INPUT_FIELDS = frozenset(f.name for f in fields(InputOptions))
EVENTS = ("options_changed", "analysis_started", "analysis_progress", "analysis_finished",
          "analysis_failed", "analysis_cancelled", "k_changed", "applied", "removed")
#: A cached pose graph: (its settings, the motion it was built for, the graph).
GraphEntry = tuple[tuple, Clip, "PoseGraph"]


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


@dataclass(frozen=True)
class Analysis:
    """A computed analysis not yet adopted by a session (see :meth:`Session.compute_analysis`).
    """

    motion: Clip
    space: SelectionSpace
    two_pass: TwoPassSpace | None
    wanted: int | None
    automatic: LayeredSelection | None = None
    by_tolerance: bool = False
    #: what the analysis wants the user to know (see :attr:`Session.notes`)
    notes: tuple[str, ...] = ()
    #: the options it was computed with
    options: Options | None = None


class Session:
    """State and actions of one Salient Poses panel, script or job.

    The options object (:class:`sp_core.options.Options`, frozen) is the single source of
    truth: views bind to it and change it through :meth:`set_options`, which checks every value
    and emits ``options_changed(options)``.

    Parameters
    ----------
    host : Host
    options : Options, optional
        Default: every option at its declared default.
    """

    def __init__(self, host: Host, options: Options | None = None) -> None:
        self.host = host
        self.options = options or Options()
        if getattr(host, "read_from_file", False):  # a standalone host that read its file
            # the file was read with it (None: its own first frame): what the outputs'
            # options blocks record, so that as a preset they give the same frames (they said
            # null of a file read from 1001, or 1001 of one read from 0)
            self.options = self.options.replace(first_frame=host.read_first_frame)
        self.space: SelectionSpace | None = None
        self.motion: Clip | None = None
        self.k: int | None = None
        self.applied: list[LayerHandle] = []
        #: the layers of :attr:`applied` that :meth:`propagate_edit` wrote (the artist's: a
        #: replacing Apply keeps them, where it had deleted them as its own)
        self.edits: list[LayerHandle] = []
        self.two_pass: TwoPassSpace | None = None
        # layered mode with no K asked for: the three-layer rules' keyposes and breakdowns,
        # the selection at the default K (see :meth:`selection`)
        self.automatic: LayeredSelection | None = None
        #: the K the tolerance's search chose (None when something else chose K): only its
        #: reduction gets the automatic corrective keys, not one at a K the user picked
        self.tolerance_k: int | None = None
        self._graph: GraphEntry | None = None
        # (motion, what nothing_to_write says of it): a panel asks on every K change
        self._still: tuple[Clip, str | None] | None = None
        self.last_reduction: Reduction | None = None
        #: the options :attr:`last_reduction` was made and applied with
        self.last_options: Options | None = None
        #: the options the adopted analysis was computed with
        self.analysed: Options | None = None
        #: things the adopted analysis wants the user to know (e.g. a long take's window, a
        #: tolerance out of reach)
        self.notes: list[str] = []
        #: what the host said when it last read the motion (a constraint it evaluated...):
        #: the next analysis' notes start with these
        self.reading_notes: list[str] = []
        self._read_motion: Clip | None = None
        # the host's digest of the keys it read, where it keeps one (motion_digest): taken
        # with the motion read and kept with the analysis of it, compared before Apply
        self._read_digest: str | None = None
        self.analysed_digest: str | None = None
        #: reductions the tolerance search fitted with the session's options, by
        #: (motion, frames, options): reduce() returns them instead of fitting again
        self._fitted: dict[tuple, Reduction] = {}
        self._subscribers: dict[str, list[Callable[..., None]]] = {e: [] for e in EVENTS}

    # ------------------------------------------------------------------ options
    @property
    def analysis(self):  # noqa: ANN201 - AnalysisOptions, read-only view
        """The analysis options (frozen; change them with :meth:`set_options`)."""
        return self.options.analysis

    def set_options(self, labels: Mapping[str, str] | None = None, **changes: Any) -> Options:
        """Change options by field name (checked; :class:`OptionError` on a bad value, naming
        each option as ``labels`` does, by its field name without) and emit
        ``options_changed``.

        A K given (``keys``) that the analysis holds becomes the current K (:meth:`set_k`), as
        a K picked in the panel becomes the option: a script's ``set_options(keys=20)`` after
        :meth:`analyze` kept the K the analysis chose, and wrote its keys beside ``keys: 20``.
        """
        self.options = build(changes, base=self.options, labels=labels)
        k = self.options.keys.keys
        if changes.get("keys") is not None and k is not None and k != self.k \
                and self.space is not None and self.space.min_keys <= k <= self.space.max_keys:
            self.set_k(k)
        self._emit("options_changed", self.options)
        return self.options

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
        """Host frames to read: the chosen frames' bounds, the option, else the playback
        range."""
        frames = self.options.keys.frames
        if frames is not None:
            return frames[0], frames[-1]
        if self.analysis.frame_range is not None:
            return self.analysis.frame_range
        with host_step("reading the playback range"):
            return self.host.playback_range()

    def read_motion(self) -> Clip:
        """The motion to analyse, read from the host (call from the host's main thread)."""
        first, last = self.frame_range()
        if last <= first:
            count = max(last - first + 1, 0)
            where = getattr(self.host, "source", "") or f"the {self.host.name} scene"
            held = (f"frames {first}..{last} hold {count} frame{'s' if count != 1 else ''}"
                    if count else "there are no frames")  # (not "frames 0..-1 hold 0")
            raise SelectionError(f"{where}: {held}; an analysis needs at least 2: choose a "
                                 "longer range or another clip")
        roots = self.roots()
        with host_step(f"reading the motion of {', '.join(roots)} over frames {first}..{last}"):
            motion = self.host.motion(roots, first, last)
        # a host's notes are on its last read or write (HostNotes): the read's go with the
        # analysis, taken here so that the report after Apply does not say them again
        told = getattr(self.host, "notes", None)
        self.reading_notes = list(told or ())
        self._read_motion = motion  # the motion those notes are about
        digest = getattr(self.host, "motion_digest", None)
        self._read_digest = digest() if callable(digest) else None
        if told:
            told.clear()
        return motion

    def requested_k(self, motion: Clip, options: Options | None = None) -> int | None:
        """The K the options (default the session's) ask for on ``motion`` (None: the
        suggested K); see :func:`sp_core.options.k_for`."""
        return k_for(options or self.options, motion.first_frame, motion.last_frame)

    def analyze(self, progress: Callable[[float, str], None] | None = None,
                cancel: CancelToken | None = None, motion: Clip | None = None,
                choose: bool = True, whole_space: bool = True, graph: bool = False
                ) -> SelectionSpace:
        """Build the selection space (in the caller's thread) and make it the session's.

        K becomes the K the options ask for (``keys``/``ratio``), else the current K if the new
        space has it, else the suggested K; call :meth:`set_k` to preview it in the host.

        Parameters
        ----------
        progress : callable, optional
            ``progress(fraction, message)``; also emitted as ``analysis_progress``.
        cancel : CancelToken, optional
            Checked at every progress step (blocks of the table and selection, iterations of
            the search's fits); a cancelled analysis raises :class:`AnalysisCancelled` and
            leaves the previous space in place.
        motion : Clip, optional
            Motion read beforehand with :meth:`read_motion` (hosts whose API must be called
            from their main thread, while the analysis runs in a worker); default: read now.
        choose : bool
            Run the tolerance's search for K when the tolerance chooses it (False: the
            analysis alone, K the suggested K; for ``analyze`` jobs, which fit nothing).
        whole_space : bool
            Solve the selection DP for every K now (True), or only for the K the caller and
            the search ask for (False, ``on_demand`` of
            :class:`~sp_core.selection.SelectionSpace`, checking ``cancel``): for callers
            that use the chosen K only, such as the ``reduce`` job; reading the whole space
            later (its graph, the suggested K) solves the rest then.
        graph : bool
            The space is browsed whole (a panel's graph, a sidebar's K): a K the options ask
            for does not cap it (:meth:`compute_analysis`).
        """
        return self.adopt_analysis(self.compute_analysis(progress, cancel, motion, choose,
                                                         whole_space=whole_space,
                                                         graph=graph))

    def compute_analysis(self, progress: Callable[[float, str], None] | None = None,
                         cancel: CancelToken | None = None, motion: Clip | None = None,
                         choose: bool = True,
                         space_ready: Callable[[SelectionSpace], None] | None = None,
                         whole_space: bool = True, options: Options | None = None,
                         graph: bool = False) -> Analysis:
        """The analysis of :meth:`analyze` without changing the session (a worker thread runs
        this; the UI thread then calls :meth:`adopt_analysis`).

        ``space_ready(space)``, optional, is called with the selection space as soon as it is
        built when the tolerance's search for K follows (which takes most of the wait: the
        panel draws the space's graph meanwhile). ``options``: those to analyse with (default
        the session's; a panel passes those of the moment Analyze was pressed, which a change
        while the worker runs does not mix with). ``graph``: the space is shown whole (a
        panel's graph), so a K asked for does not cap it (:func:`~sp_core.options.max_keys_for`).
        """
        token = cancel or CancelToken()

        def report(fraction: float, message: str) -> None:
            token.check()
            if progress is not None:
                progress(fraction, message)
            self._emit("analysis_progress", fraction, message)

        self._emit("analysis_started")
        made_with = options or self.options
        try:
            options = made_with.analysis
            # (checked here, not as the options are set: a panel ticks the mode before the
            # nodes or the count)
            if options.layered and not options.leading:
                raise SelectionError("layered needs leading: the nodes whose extremes are the "
                                     "keyposes (e.g. the hands of a gesture)",
                                     options=("layered", "leading"))
            if options.breakdowns is not None and not options.layered:
                raise SelectionError("breakdowns applies only with layered; turn on layered or "
                                     "clear breakdowns", options=("breakdowns", "layered"))
            if motion is None:
                report(0.0, "reading the motion from " + self.host.name)
                motion = self.read_motion()
            # what the host said when it read this motion (taken now: in a worker thread the
            # UI thread may read again before the analysis ends)
            reading_notes = list(self.reading_notes) if motion is self._read_motion else []
            wanted = self.requested_k(motion, made_with)
            searching = wanted is None and choose and key_choice(made_with) == "tolerance"
            unscaled = size_unknown(motion) if searching else None
            if unscaled is not None:
                # a tolerance in mm means nothing without the character's size: the default
                # one gives way to the threshold rule (said in the notes), one asked for fails
                if made_with.keys.tolerance != DEFAULT_TOLERANCE:
                    raise SelectionError(f"{unscaled}, so a tolerance in mm cannot be judged; "
                                         "choose K with keys, ratio or suggested",
                                         options=("tolerance", "keys", "ratio", "suggested"))
                searching = False
            # the share of the bar the selection space takes (the tolerance's search, with its
            # fits, takes the rest)
            share = SPACE_SHARE if searching else 1.0
            report(0.02, "poses")
            whole = (motion.first_frame, motion.last_frame) if graph else None
            weights = dict(options.weights) or None

            def two_passes(max_keys: int | None, holds: int | None = None) -> TwoPassSpace:
                return TwoPassSpace(motion, options.leading, nodes=options.nodes,
                                    weights=weights, stride=options.stride, pose=options.pose,
                                    max_keys=max_keys, holds=holds)

            # a space shown whole (graph) keeps its default K unless a long take's window
            # would leave out the K asked for (max_keys_for)
            max_keys = max_keys_for(made_with, wanted, whole)
            holds = wanted if whole is not None else None
            two_pass: TwoPassSpace | None = None
            if options.layered:
                report(0.05, f"keypose space of {', '.join(options.leading) or '?'}")
                two_pass = two_passes(max_keys, holds)
                space = two_pass.keyposes
            else:
                space = SelectionSpace.from_clip(
                    motion, pose=options.pose, nodes=options.nodes, weights=weights,
                    time_scale=options.time_scale, cost=options.cost,
                    cost_options=dict(options.cost_options), compose=options.compose,
                    pins=[p.frame for p in options.pins], stride=options.stride,
                    max_span=options.max_span, max_keys=max_keys, holds=holds,
                    memory_limit=int(options.memory_gib * 1024**3),
                    time_budget=time_budget_for(made_with, motion.n_frames),
                    progress=lambda f, m: report(0.05 + (share - 0.05) * f, m),
                    on_demand=None if whole_space else token.check)
            notes = [*reading_notes, *space.notes]  # e.g. a long take's window
            if unscaled is not None:
                notes.append(f"{unscaled}: K is the suggested K, not the default tolerance's")
            moving = ~constant_channels(motion.channels)
            if not moving.any():
                notes.append(_still(motion.first_frame, motion.last_frame))
            elif space.still:  # (it chose K = 32 of 150 frames, and said nothing)
                notes.append(Note(
                    f"the poses the keys are chosen by do not change in frames "
                    f"{motion.first_frame}..{motion.last_frame}: the nodes measured do not "
                    "move (or their weights are 0), so every selection fits them alike and K "
                    "and its keys are arbitrary; measure nodes that move", options=(
                        "nodes", "weights")))
            else:
                unseen = _unseen(motion, moving)
                if unseen:
                    notes.append(unseen)
            token.check()
        except AnalysisCancelled:
            self._emit("analysis_cancelled")
            raise
        except Exception as exc:
            self._emit("analysis_failed", exc)
            raise
        by_tolerance = False
        if searching:
            assert made_with.keys.tolerance is not None
            if space_ready is not None:
                # measured here, on the work's thread: the graph's suggestions normalise by it
                # (0.1-0.3 s for a 5,000-frame take, which held a panel's UI thread)
                space.diameter  # noqa: B018 - a cached property, computed now
                space_ready(space)
            try:
                wanted = self.smallest_k_within(
                    *made_with.keys.tolerance, space=space, motion=motion,
                    report=lambda f, m: report(share + (0.99 - share) * f, m),
                    options=made_with)
                by_tolerance = True
            except AnalysisCancelled:
                self._emit("analysis_cancelled")
                raise
            except SelectionError as exc:
                if made_with.keys.tolerance != DEFAULT_TOLERANCE:
                    raise
                # the default tolerance out of reach: the threshold rule, as said in the notes
                # (with what keeps it out of reach: a max_keys or weights of the user's, as
                # often as the take itself)
                notes.append(Note("the default tolerance cannot be met, so K is the suggested "
                                  f"K: {exc}", options=exc.options))
                wanted = int(space.suggestions(options.accuracy,
                                               options.significance)["threshold"])
        automatic = None
        if two_pass is not None and wanted is None and options.breakdowns is None:
            report(0.99, "keyposes and breakdowns by the three-layer rules")
            automatic = self.automatic_selection(motion, made_with)
            wanted = len(automatic.keyposes)
            if wanted > space.max_keys:  # a take of a few frames: its rules keyed them all
                two_pass = two_passes(wanted)
                space = two_pass.keyposes
        if progress is not None:
            progress(1.0, "done")
        return Analysis(motion, space, two_pass, wanted, automatic, by_tolerance, tuple(notes),
                        made_with)

    def adopt_analysis(self, analysis: Analysis) -> SelectionSpace:
        """Make a computed analysis the session's (K as in :meth:`analyze`); emits
        ``analysis_finished``."""
        space, wanted = analysis.space, analysis.wanted
        if wanted is None:
            keep = self.k is not None and space.min_keys <= self.k <= space.max_keys
            # (accuracy and significance are read live: the graph's suggestion is of now)
            wanted = self.k if keep else int(space.suggestions(
                self.analysis.accuracy, self.analysis.significance)["threshold"])
        if not space.min_keys <= wanted <= space.max_keys:
            raise SelectionError(f"K = {wanted} is out of range: this analysis has selections "
                                 f"of {space.min_keys} to {space.max_keys} keys")
        self.motion, self.space, self.two_pass = analysis.motion, space, analysis.two_pass
        self.automatic = analysis.automatic
        self.analysed = analysis.options
        self.notes = list(analysis.notes)
        self.tolerance_k = int(wanted) if analysis.by_tolerance else None
        self.analysed_digest = self._read_digest if analysis.motion is self._read_motion \
            else None
        self.k = int(wanted)
        self._emit("analysis_finished", space)
        return space

    def changed_since_analysis(self, options: Options | None = None) -> tuple[str, ...]:
        """The options (field names; of ``options``, default the session's) changed since the
        analysis in a way only a new analysis takes in: the input and analysis options that
        made the selection space, and the tolerance when it chooses K (it chose K when the
        analysis ran). Empty before any analysis.

        Not counted: the options read afterwards (:data:`READ_LIVE`; in keyposes + breakdowns
        mode the accuracy and significance do count when the analysis made its automatic
        three-layer choice with them); in keyposes + breakdowns mode, those its spaces do not
        use (:data:`NOT_LAYERED`); a pin's name or
        note; a frame range naming the frames analysed; more memory or time for an analysis
        that needed no window.
        """
        made, now = self.analysed, options or self.options
        if made is None or self.space is None or self.motion is None:
            return ()
        ignored = set(READ_LIVE)
        if made.analysis.layered and now.analysis.layered:
            ignored |= NOT_LAYERED
            if self.automatic is not None:
                # the three-layer choice the analysis made (and suggests) is of the accuracy
                # and significance of then: other ones choose other keyposes (seconds of work)
                ignored -= {"accuracy", "significance"}
        changed = [f.name for group in ("input", "analysis")
                   for f in fields(getattr(now, group)) if f.name not in ignored
                   and self._analysed_as(f.name, made) != self._analysed_as(f.name, now)]
        if key_choice(now) == "tolerance" and (key_choice(made) != "tolerance"
                                               or made.keys.tolerance != now.keys.tolerance):
            changed.append("tolerance")
        asked = now.keys.keys
        if asked is not None and not self.space.min_keys <= asked <= self.space.max_keys:
            changed.append("keys")  # a K this analysis does not hold (within it, K follows)
        return tuple(changed)

    def _analysed_as(self, name: str, options: Options) -> Any:
        """What option ``name`` of ``options`` makes of the analysis (see
        :meth:`changed_since_analysis`)."""
        assert self.motion is not None and self.analysed is not None
        value = getattr(options.input if name in INPUT_FIELDS else options.analysis, name)
        if name == "pins":
            return tuple(pin.frame for pin in value)
        if name == "frame_range":
            analysed = self.motion.first_frame, self.motion.last_frame  # the frames it read
            if options is self.analysed or (value is None
                                            and self.analysed.analysis.frame_range is None):
                return analysed  # (the scene's range moved: not an option the user changed)
            if value is None:  # a range cleared: the next analysis reads the scene's
                try:
                    return tuple(int(f) for f in self.host.playback_range())
                except Exception:  # noqa: BLE001 - a host that cannot say: taken as changed
                    return None
            return value
        if name in ("memory_gib", "time_budget") and self.space is not None \
                and not self.space.notes:
            def budget(of: Options) -> float:
                return (of.analysis.memory_gib if name == "memory_gib"
                        else time_budget_for(of, self.motion.n_frames))
            # exact (no window, nothing capped): any budget at least as large gives it again
            return "enough" if budget(options) >= budget(self.analysed) else budget(options)
        return value

    def nothing_to_write(self) -> str | None:
        """Why Apply has nothing to write on the analysed motion (nothing in it moves), or
        None: a panel says it and greys Apply out (it offered "Apply writes 2 keys" and then
        failed)."""
        motion = self.motion
        if motion is None:
            return None
        if self._still is None or self._still[0] is not motion:
            # (asked once per motion: 15 ms on a 50,000-frame take, twice a K change)
            self._still = (motion, _still(motion.first_frame, motion.last_frame)
                           if constant_channels(motion.channels).all() else None)
        return self._still[1]

    def check_analysis_current(self, options: Options | None = None) -> None:
        """Refuse to go on with an analysis the options (default the session's) no longer
        describe.

        Raises
        ------
        SelectionError
            Options changed since the analysis (:meth:`changed_since_analysis`); the message
            names them. Or the keys the host read were edited since (hosts that keep a
            ``motion_digest()`` of them): a reduction of the motion before the edit would hide
            the edit under its layer.
        """
        if self.analysed_digest is not None and self.motion is not None:
            with host_step("checking the animation against the analysis"):
                now = self.host.motion_digest()  # type: ignore[attr-defined]
            if now != self.analysed_digest:
                raise SelectionError(f"the animation of {self.motion.name} changed since the "
                                     "analysis (keys edited, or another action played); "
                                     "analyse again")
        changed = self.changed_since_analysis(options)
        if changed:
            them = "it" if len(changed) == 1 else "them"
            raise SelectionError(
                f"{', '.join(changed)} changed since the analysis; analyse again to use {them}, "
                f"or set {them} back", options=changed)

    def smallest_k_within(self, mean_mm: float, max_mm: float,
                          report: Callable[[float, str], None] | None = None,
                          space: SelectionSpace | None = None, motion: Clip | None = None,
                          options: Options | None = None) -> int:
        """The smallest K whose reduction (with the fitting options and the corrective keys of
        :func:`sp_core.options.corrective_plan`) keeps the mean and max joint error within
        ``mean_mm`` and ``max_mm`` (character scaled to 1.7 m); see
        :mod:`sp_core.tolerance` for how it is searched. The reductions it checked are kept
        for :meth:`reduce`.

        ``space``, ``motion`` and ``options`` default to the session's (an analysis being
        computed passes its own, before the session adopts it); ``report(fraction,
        message)`` gets the share of the search done.

        Raises
        ------
        SelectionError
            Even the largest K of the space misses the tolerance (the message gives its error).
        """
        space = space or self._require_space()
        motion = motion or self.motion
        assert motion is not None
        options = options or self.options
        budget, _ = corrective_plan(options)
        self._fitted.clear()
        search = ToleranceSearch(space, motion, options.fit, budget, report)
        k = search.smallest_k(mean_mm, max_mm)
        for frames, reduction in search.fitted.items():
            self._fitted[self._fit_key(motion, frames, options)] = reduction
        return k

    @property
    def suggestions(self) -> dict[str, Any]:
        """The space's suggestions (:meth:`SelectionSpace.suggestions`) at the options'
        accuracy and significance; in keyposes + breakdowns mode the suggested K
        (``threshold``) is the keyposes of the analysis' automatic three-layer choice, which
        Analyze starts at and ``reduce --layered --suggested`` writes (the keypose space's own
        threshold rule chose 10 keyposes on the sample against its 16)."""
        options = self.analysis
        found = self._require_space().suggestions(options.accuracy, options.significance)
        if self.automatic is not None and self.two_pass is not None:
            found = {**found, "threshold": len(self.automatic.keyposes)}
        return found

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
        if self.automatic is not None and extra is None and k == len(self.automatic.keyposes) \
                and self._automatic_current():
            return self.automatic
        return self.two_pass.selection(k, None if extra is None else k + extra,
                                       accuracy=self.analysis.accuracy)

    def _automatic_current(self) -> bool:
        """Whether the analysis' automatic selection is made with the accuracy and significance
        of now (both read live: after a change it is not what these options give; the rules
        for K keyposes at the options' accuracy are, as on a command line)."""
        made, now = self.analysed, self.analysis
        return made is not None and (made.analysis.accuracy, made.analysis.significance) \
            == (now.accuracy, now.significance)

    def automatic_selection(self, motion: Clip | None = None, options: Options | None = None
                            ) -> LayeredSelection:
        """Layered mode without a K: keyposes and breakdowns chosen by the three-layer
        threshold rules (:func:`sp_core.layered.layered_selection`) at the options' accuracy
        and significance (of ``motion``, default the session's; ``options``, default the
        session's)."""
        motion = motion or self.motion
        if motion is None:
            raise SelectionError("analyse first: there is no motion yet")
        options = (options or self.options).analysis
        return layered_selection(motion, options.leading, nodes=options.nodes,
                                 weights=dict(options.weights) or None, stride=options.stride,
                                 keypose_accuracy=options.accuracy,
                                 breakdown_accuracy=options.accuracy,
                                 significance=options.significance, pose=options.pose)

    def labels(self, k: int | None = None) -> dict[int, str] | None:
        chosen = self.selection(k)
        if chosen is None:
            return None
        return {int(f): label for f, label in zip(chosen.frames, chosen.labels, strict=True)}

    def set_k(self, k: int | None = None) -> int:
        """Choose K (default the current K) and preview its keyframes in the host; returns K.

        Raises
        ------
        OptionError
            K is not a whole number inside the space (the message gives its range).
        """
        space = self._require_space()
        k = coerce("keys", self.k if k is None else k, "K")
        if not space.min_keys <= k <= space.max_keys:
            raise OptionError(f"K must be a whole number in [{space.min_keys}, "
                              f"{space.max_keys}] for this analysis, got {k}")
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
    def reduce(self, frames: Sequence[int] | None = None,
               labels: dict[int, str] | None = None,
               progress: Callable[[float, str], None] | None = None,
               options: Options | None = None) -> Reduction:
        """The reduction at the current K (or at ``frames``) with the fitting options
        (``options``', default the session's: a panel's worker fits with those of the moment
        Apply was pressed); writes nothing. ``progress(fraction, message)`` follows the fit
        (see :func:`sp_core.reduction.reduce`) and may raise to cancel it."""
        options = options or self.options
        if frames is None:
            self._require_space()
            assert self.motion is not None and self.k is not None
            # the analysis' K must be what the options describe (apply checks the same; a
            # script's reduce() returned the old keys under the new options)
            self.check_analysis_current(options)
            frames, labels = self.keyframes(self.k), self.labels(self.k)
        elif self.motion is None:
            self.motion = self.read_motion()
        fit = options.fit
        budget, stop = self.corrective_plan(frames, options)
        # (the search fitted its K with the options' budget: nothing to reuse where it is
        # dropped)
        if labels is None and (budget is not None or corrective_plan(options)[0] is None):
            known = self._fitted.get(self._fit_key(self.motion, frames, options))
            if known is not None:
                return known
        return reduce(self.motion, frames, tangents=fit.tangents, smoothness=fit.smoothness,
                      space=fit.space, world_iterations=fit.world_iterations,
                      objective=fit.objective, labels=labels,
                      corrective_budget=budget, corrective_stop_mm=stop, progress=progress,
                      key_values=fit.key_values)

    def corrective_plan(self, frames: Sequence[int] | None = None,
                        options: Options | None = None) -> tuple[str | None, float | None]:
        """The corrective budget and the max error (mm) at which it stops that :meth:`reduce`
        spends at ``frames`` (default the current K's) with ``options`` (default the
        session's): :func:`sp_core.options.corrective_plan`, except that the automatic budget
        serves the tolerance's K only: at another K (a user's choice in the panel or the API)
        the pose keys are what was asked for."""
        options = options or self.options
        budget, stop = corrective_plan(options)
        if budget is None or options.fit.corrective_budget is not None:
            return budget, stop
        if frames is None and self.space is not None and self.k is not None:
            frames = self.keyframes(self.k)
        if (self.tolerance_k is None or self.space is None or frames is None
                or [int(f) for f in frames] != self.keyframes(self.tolerance_k).tolist()):
            return None, None
        return budget, stop

    def keys_said(self, corrective_keys: int, frames: Sequence[int] | None = None) -> str:
        """A readout's words on the keys of the reduction at ``frames`` (default the current
        K's) that has ``corrective_keys``: how many corrective keys are in, or, where the
        automatic budget serves the tolerance's K only (:meth:`corrective_plan`), that these
        are the pose keys alone (more keys than the tolerance's K showed a larger max, and
        nothing said why); else empty."""
        if corrective_keys:
            return f"with {corrective_keys} corrective keys"
        if self.tolerance_k is not None and corrective_plan(self.options)[0] is not None \
                and self.corrective_plan(frames)[0] is None:
            return (f"pose keys alone (the corrective keys are the tolerance's, at K = "
                    f"{self.tolerance_k})")
        return ""

    def known_reduction(self, frames: Sequence[int] | None = None) -> Reduction | None:
        """The reduction :meth:`reduce` would give at ``frames`` (default the current K's) if
        the tolerance's search already fitted it with the current options, else None."""
        if self.motion is None:
            return None
        if frames is None:
            if self.k is None or self.space is None or self.two_pass is not None:
                return None
            frames = self.keyframes(self.k)
        return self._fitted.get(self._fit_key(self.motion, frames))

    def _fit_key(self, motion: Clip, frames: Sequence[int], options: Options | None = None
                 ) -> tuple:
        options = options or self.options
        budget, stop = corrective_plan(options)
        return (motion, tuple(int(f) for f in frames), options.fit, budget, stop)

    def apply(self, reduction: Reduction | None = None, name: str | None = None,
              replace: bool = False, options: Options | None = None) -> Reduction:
        """Write a reduction (default :meth:`reduce` at the current K) into the host: one undo
        step, all or nothing.

        ``name`` names the layer of this apply (default the layer option, which stays as it is:
        the panel's "Add new layer" numbers one apply's layer, not the next session's);
        ``last_options`` records the name written. ``replace``: the layers applied before are
        removed in the same undo step, after the new ones are written (a failed write leaves
        them as they were; one undo brings them back; a new layer takes the next free name
        while they are still there). ``options``: those ``reduction`` was made with (default
        the session's; the panel's, as they were when Apply was pressed: what an output
        records of this apply, and its layers).
        """
        options = options or self.options
        self.check_analysis_current(options)
        reduction = reduction or self.reduce(options=options)
        if not reduction.curves.animated.any():
            motion = self.motion
            held = [] if motion is None else [  # (not "nothing moves": what moves is locked)
                motion.channel_names[c] for c in
                np.flatnonzero(motion.held & ~constant_channels(motion.channels))]
            if held:
                raise SelectionError(f"nothing to write: every channel that moves is left "
                                     f"alone ({', '.join(held[:6])}"
                                     f"{', ...' if len(held) > 6 else ''}: locked or driven)")
            raise SelectionError(_still(int(reduction.frames[0]), int(reduction.frames[-1])))
        options = options if name is None else options.replace(layer=name)
        layer = options.layer
        handles: list[LayerHandle] = []
        removed = self.reduction_layers() if replace else []
        with host_step("opening an undo chunk"):
            chunk = self.host.undo_chunk(f"Salient Poses: apply {len(reduction.frames)} keys"
                                         if self.k is None else
                                         f"Salient Poses: apply {self.k} keys")
        with chunk:
            with host_step(f"writing layer {layer.layer!r}"):
                handles.append(self.host.write_curves(reduction.curves, layer.layer,
                                                      replacing=removed))
            if reduction.corrections is not None and reduction.corrections.keys:
                handles.append(self._write_corrections(reduction, layer.layer + "_corrective"))
            if layer.residual_layer:
                animated = reduction.curves.animated
                names = [n for n, a in zip(reduction.curves.channel_names, animated, strict=True)
                         if a]
                name = layer.layer + "_residual"
                with host_step(f"writing the residual layer {name!r}"):
                    handles.append(self.host.write_residual(
                        names, reduction.frames, reduction.residual[:, animated], name,
                        layer.residual_weight))
            # last: a failed write is rolled back by every host, but only some bring a
            # removed layer back (MotionBuilder's and Blender's roll back what they made)
            self._remove_layers(removed)
        if removed:
            self.applied[:] = [h for h in self.applied if h not in removed]
            self._emit("removed", removed)
        self.applied.extend(handles)
        # (an output's options block: a value greyed in the panel, that did not apply, is
        # recorded as its default, so the block is a preset that gives this result)
        self.last_reduction, self.last_options = reduction, self._as_written(applied(options),
                                                                              reduction)
        self._emit("applied", handles, reduction)
        return reduction

    def _as_written(self, options: Options, reduction: Reduction) -> Options:
        """``options`` with the K ``reduction`` was written at (``keys``), unless their own
        rule is known to give that K on a fresh analysis: the K they ask for, the tolerance
        search this analysis ran, its automatic three-layer choice, or the threshold rule of a
        space no K capped. A K picked with :meth:`set_k`, or the panel's *Suggested* beside a
        keys option picked before, was recorded as the other K (``keys: 30`` of 25 keys
        written). (A corrective stop taken from the tolerance at such a K cannot be said
        beside ``keys``: the block then spends the budget without it.)"""
        if self.motion is None or self.space is None or options.keys.frames is not None:
            return options
        written = reduction.curves.k
        choice = key_choice(options)
        made = self.analysed
        if choice in ("keys", "ratio"):
            kept = self.requested_k(self.motion, options) == written
        elif choice == "tolerance" and self.tolerance_k is not None:
            kept = self.tolerance_k == written
        elif self.two_pass is not None:  # (the layered mode's rule: its automatic choice)
            kept = self.automatic is not None and self._automatic_current() \
                and len(self.automatic.keyposes) == written
        else:  # the threshold rule, of a space as a fresh analysis builds it
            analysis = options.analysis
            kept = made is not None and self.requested_k(self.motion, made) is None \
                and int(self.space.suggestions(analysis.accuracy,
                                               analysis.significance)["threshold"]) == written
        return options if kept else options.replace(keys=written, ratio=None, suggested=False)

    def _write_corrections(self, reduction: Reduction, name: str) -> LayerHandle:
        """The corrective keys as an additive layer: sparse where the host can, else their
        values on every frame of the range (same motion, more keys)."""
        corrections = reduction.corrections
        assert corrections is not None
        names = [corrections.channel_names[c] for c in sorted(corrections.keys)]
        with host_step(f"writing the corrective layer {name!r}"):
            if isinstance(self.host, SparseLayers):  # (zero outside the range)
                return self.host.write_sparse(corrections.host_keys(), name, 1.0)
            dense = corrections.dense()[:, sorted(corrections.keys)]
            return self.host.write_residual(names, reduction.frames, dense, name, 1.0)

    def remove(self) -> list[LayerHandle]:
        """Take every applied layer away again (one undo step)."""
        handles = list(self.applied)
        if not handles:
            return []
        with host_step("opening an undo chunk"):
            chunk = self.host.undo_chunk("Salient Poses: remove layers")
        with chunk:
            self._remove_layers(handles)
        self.applied.clear()
        self.edits.clear()
        self._emit("removed", handles)
        return handles

    def reduction_layers(self) -> list[LayerHandle]:
        """The layers of :attr:`applied` that an Apply wrote (a propagated edit's aside)."""
        return [h for h in self.applied if h not in self.edits]

    def _remove_layers(self, handles: list[LayerHandle]) -> None:
        """Remove ``handles``' layers from the host, the latest first (inside an undo chunk)."""
        for handle in reversed(handles):
            with host_step(f"removing layer {handle.name!r}"):
                self.host.remove_layer(handle)

    # ------------------------------------------------------------------ magic wand
    def motion_open_ends(self) -> tuple[bool, bool]:
        """Whether the scene goes on before and after the analysed motion (an analysis range
        inside the host's playback range): an edit's falloff fades out at such an end
        (:meth:`sp_core.falloff.PoseGraph.weights`), or its layer, keyed on the range alone,
        started at full strength on the range's first frame."""
        motion = self.motion
        if motion is None:
            return False, False
        with host_step("reading the playback range"):
            first, last = self.host.playback_range()
        return motion.first_frame > first, motion.last_frame < last

    def pose_graph(self, sigma: float | None = None, eigen: int | None = None) -> PoseGraph:
        """The analysed motion's pose graph (cached per sigma and eigen count)."""
        build = self.pose_graph_build(sigma, eigen)
        if build is not None:
            self.keep_pose_graph(build())
        assert self._graph is not None
        return self._graph[2]

    def pose_graph_build(self, sigma: float | None = None, eigen: int | None = None
                         ) -> Callable[[], GraphEntry] | None:
        """None if :meth:`pose_graph` has the graph for ``sigma`` and ``eigen`` cached; else the
        work that builds it, for :meth:`keep_pose_graph`.

        The work reads nothing of the session when it runs, so a panel runs it on a worker
        thread (its spectrum takes 0.6 s on a 5,000-frame take) while an analysis or a new
        clip may replace the motion: its entry names the motion it was built for, and a
        later :meth:`pose_graph` of another motion does not take it.
        """
        key, motion = self.pose_graph_key(sigma, eigen)
        if self._graph is not None and self._graph[0] == key and self._graph[1] is motion:
            return None
        sigma, eigen, pose, nodes, weights, time_scale = key

        def build() -> GraphEntry:
            from sp_core.falloff import clip_graph

            return key, motion, clip_graph(motion, pose, nodes, dict(weights) or None,
                                           time_scale, sigma, eigen)
        return build

    def pose_graph_key(self, sigma: float | None = None, eigen: int | None = None
                       ) -> tuple[tuple, Clip]:
        """What the pose graph of ``sigma`` and ``eigen`` is built from: its settings (sigma,
        eigen count and the analysis' pose options) and the motion; two graphs are the same
        when both settings are equal and the motion is the same object."""
        if self.motion is None:
            raise SelectionError("analyse first: the falloff needs the motion")
        eigen = self.options.wand.eigen if eigen is None else coerce("eigen", eigen)
        a = self.analysis
        return (coerce("sigma", sigma), int(eigen), a.pose, a.nodes, a.weights,
                a.time_scale), self.motion

    def keep_pose_graph(self, entry: GraphEntry) -> None:
        """Cache what a :meth:`pose_graph_build` work returned (on the thread that owns the
        session), unless the motion it was built for has been replaced since."""
        if entry[1] is self.motion:
            self._graph = entry

    def host_pose(self, frame: int) -> np.ndarray:
        """The host's current channel values at ``frame`` (an edit the artist posed there)."""
        assert self.motion is not None
        with host_step(f"reading the pose at frame {frame}"):
            # under the reduction layers, as the motion was read: through them the pose
            # differed from the motion by the reduction's error, which was taken for an edit
            return self.host.channel_values(self.motion.channel_names, frame, frame,
                                            beneath=True)[0]

    def propagate_edit(self, frame: int, edited: np.ndarray, weights: np.ndarray,
                       layer: str = "salientPosesEdit", typed: bool = False) -> LayerHandle:
        """Write ``edited`` (the pose at ``frame``) spread with ``weights`` into a new additive
        layer (propagated − original per channel; one undo step, removable with
        :meth:`remove`). ``typed``: ``edited`` is the motion's pose plus typed offsets
        (:func:`sp_core.falloff.pose_edit`)."""
        if self.motion is None:
            raise SelectionError("analyse first: the edit is relative to the analysed motion")
        from sp_core.falloff import moved_channels, pose_edit, propagate

        motion = self.motion
        channels = propagate(motion, pose_edit(motion, frame, edited, typed), weights)
        delta = channels - motion.channels
        moved = moved_channels(motion, channels)
        if not len(moved):
            raise SelectionError("the edit changes nothing: pose the character at the edited "
                                 "frame first")
        names = [motion.channel_names[c] for c in moved]
        with host_step("opening an undo chunk"):
            chunk = self.host.undo_chunk("Salient Poses: propagate edit")
        with chunk, host_step(f"writing the edit layer {layer!r}"):
            handle = self.host.write_residual(names, motion.frames, delta[:, moved], layer, 1.0,
                                              edit=True)
        self.applied.append(handle)
        self.edits.append(handle)
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
        self.set_options(pins=pins)
        return list(self.analysis.pins)


def _unseen(motion: Clip, moving: np.ndarray) -> str | None:
    """What to say of the moving (``moving`` (C,) bool) rotation channels that turn no node
    (None: there are none; :meth:`sp_core.clip.Clip.unseen_rotations`)."""
    names = set(np.asarray(motion.channel_names)[moving])
    unseen = [c for c in motion.unseen_rotations() if c in names]
    if not unseen:
        return None
    nodes = list(dict.fromkeys(c.rpartition(".")[0] for c in unseen))
    shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
    return (f"the rotation of {shown} turns no joint or End Site (none below it, or all at "
            "its point): the keys are not chosen for it and the errors do not measure it; "
            "give it an End Site or a child joint to measure it")


def _still(first: int, last: int) -> str:
    """What to say of host frames ``first..last`` in which nothing moves."""
    return (f"nothing moves in frames {first}..{last}: every channel keeps one value, so there "
            "is no key to write")
