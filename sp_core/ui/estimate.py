"""The real reconstruction error of the K shown, computed off the UI thread.

For every K the panel shows, a channel-space reduction at that K's keyframes (tens of ms on
the sample clip, the fast fit of ``--space channel``) gives the mean and max joint error in
mm. With the world fit (the default of Apply, seconds to a minute) the figure is labelled as
the channel-fit estimate: the world fit starts from it and never has a larger mean error.
After Apply the exact figures of what was written are shown for that K.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6 import QtCore

from sp_core.errors import SalientPosesError
from sp_core.metrics import Metrics
from sp_core.options import FitOptions
from sp_core.reduction import reduce
from sp_core.session import Session
from sp_core.ui.worker import Task, TaskRunner

#: Quiet time after the last K change before an estimate starts, ms (scrubbing stays smooth).
DEBOUNCE_MS = 120


@dataclass(frozen=True)
class Request:
    """What one estimate depends on (frames, labels and the fitting options)."""

    k: int
    frames: tuple[int, ...]
    labels: tuple[tuple[int, str], ...] | None
    tangents: str
    smoothness: float
    key_values: str
    motion_id: int


def describe(k: int, metrics: Metrics, how: str) -> str:
    """One line: K's mean and max joint error in mm, where the max is, and how it was got."""
    return (f"K = {k}: reconstruction error {metrics.said(1, 1)} ({metrics.worst_node}, "
            f"frame {metrics.worst_frame}) — {how}")


class ErrorEstimator(QtCore.QObject):
    """Estimates the error of the current K; emits ``ready(k, text)`` on the UI thread."""

    ready = QtCore.Signal(int, str)

    def __init__(self, session: Session, runner: TaskRunner) -> None:
        super().__init__(runner)
        self.session = session
        self.runner = runner
        self.cache: dict[Request, Metrics] = {}
        # the exact figures of fits Apply writes (or wrote): by request, every fit option and
        # the corrective plan, with how they are known
        self.exact: dict[tuple[Request, FitOptions, tuple[str | None, float | None]],
                         tuple[Metrics, str]] = {}
        self._task: Task | None = None
        self._pending: Request | None = None
        self._running: Request | None = None
        self._timer = QtCore.QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._start)

    def stop(self) -> None:
        """Start no more estimates (the panel closes)."""
        self._timer.stop()
        self._pending = None

    @property
    def idle(self) -> bool:
        """No estimate runs or waits."""
        return self._pending is None and not self._timer.isActive() and self._task is None

    def request_for(self, k: int) -> Request | None:
        session = self.session
        if session.space is None or session.motion is None:
            return None
        labels = session.labels(k)
        fit = session.options.fit
        return Request(k, tuple(int(f) for f in session.keyframes(k)),
                       None if labels is None else tuple(sorted(labels.items())),
                       fit.tangents, fit.smoothness, fit.key_values, id(session.motion))

    def request(self, k: int) -> None:
        """Show K's error now if known, else start (after a short quiet time) its estimate."""
        wanted = self.request_for(k)
        if wanted is None:
            return
        exact = self._exact(wanted)
        if exact is not None:
            self.ready.emit(k, exact)
            return
        if wanted in self.cache:
            self.ready.emit(k, self._text(wanted, self.cache[wanted]))
            return
        self._pending = wanted
        self.ready.emit(k, f"K = {k}: measuring the reconstruction error…")
        self._timer.start()

    def remember(self, k: int, metrics: Metrics, how: str) -> None:
        """The exact figures of the reduction at ``k`` with the current options (``how``: "as
        applied", or "what Apply writes" for one fitted before it)."""
        wanted = self.request_for(k)
        if wanted is not None:
            self.exact[self._exact_key(wanted)] = (metrics, how)

    def unapplied(self) -> None:
        """The layers are gone: figures known "as applied" are what Apply writes again (the
        readout said "as applied" after Remove)."""
        self.exact = {key: (metrics, "what Apply writes" if how == "as applied" else how)
                      for key, (metrics, how) in self.exact.items()}

    def _exact_key(self, request: Request
                   ) -> tuple[Request, FitOptions, tuple[str | None, float | None]]:
        return (request, self.session.options.fit,
                self.session.corrective_plan(list(request.frames)))

    def _exact(self, request: Request) -> str | None:
        """The line of ``request``'s exact figures, if known with the current options."""
        known = self.exact.get(self._exact_key(request))
        if known is None:
            return None
        metrics, how = known
        return describe(request.k, metrics, f"{self.session.options.fit.space} fit, {how}"
                        + self._keys(request, metrics))

    def _text(self, request: Request, metrics: Metrics) -> str:
        keys = self._keys(request, metrics)
        if self.session.options.fit.space == "channel":
            return describe(request.k, metrics, "channel fit, what Apply writes" + keys)
        return describe(request.k, metrics, "estimate from the fast channel fit; Apply's "
                        "world fit starts from it and lowers the mean" + keys)

    def _keys(self, request: Request, metrics: Metrics) -> str:
        said = self.session.keys_said(metrics.corrective_keys, list(request.frames))
        return f"; {said}" if said else ""

    def _start(self) -> None:
        if self._pending is None or self._task is not None:
            # the running estimate picks the pending one up when it ends: when its result is
            # taken here (its thread may have ended before: a later start would run beside it,
            # and the earlier result's end cleared the later task)
            return
        request, self._pending = self._pending, None
        motion = self.session.motion
        assert motion is not None

        def work(_report: object, _token: object) -> tuple[Request, Metrics]:
            labels = None if request.labels is None else dict(request.labels)
            return request, reduce(motion, request.frames, tangents=request.tangents,
                                   smoothness=request.smoothness, space="channel",
                                   labels=labels, key_values=request.key_values).metrics

        task = Task(work)
        # bound methods of this UI-thread object: Qt queues the call to the UI thread (a
        # lambda would run in the worker)
        task.finished.connect(self._done)
        task.failed.connect(self._failed)
        task.cancelled.connect(self._cancelled)
        self._running = request
        self._task = self.runner.start(task)

    def _done(self, result: tuple[Request, Metrics]) -> None:
        self._task = None  # (first: whatever follows, the next estimate may start)
        request, metrics = result
        self.cache[request] = metrics
        try:
            current = self.request_for(self.session.k) if self.session.k is not None else None
        except SalientPosesError:  # the options name no K now (a breakdowns count too high)
            current = None
        if current == request:
            # an Apply that ended while this estimate ran has the exact figures: they stay
            exact = self._exact(request)
            self.ready.emit(request.k, self._text(request, metrics) if exact is None else exact)
        if self._pending is not None:
            self._start()

    def _failed(self, message: str) -> None:
        self._task = None
        request = self._running
        self.ready.emit(request.k, f"K = {request.k}: the error cannot be measured: {message}")
        if self._pending is not None:
            self._start()

    def _cancelled(self) -> None:
        self._task = None  # (the panel closed: nothing starts again)
