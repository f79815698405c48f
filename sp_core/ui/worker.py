"""Work off the UI thread: analyses, reductions for Apply and error estimates for the K shown.

A :class:`Task` runs one function on its own ``QThread`` and sends the result back as a queued
signal, so session state is only ever written on the UI thread. Cancel is immediate for the
panel (it stops listening and becomes idle at once); the work itself stops at its next
cancellation check (every stage of an analysis, every iteration or corrective step of a fit)
or, for an interruptible task (the fit of Apply), at the next Python instruction of the worker
thread, whichever comes first.
"""

from __future__ import annotations

import ctypes
import gc
import threading
from collections.abc import Callable
from typing import Any

from PySide6 import QtCore

from sp_core.errors import SalientPosesError, said
from sp_core.session import AnalysisCancelled, CancelToken

Work = Callable[[Callable[[float, str], None], CancelToken], Any]


class Interrupted(SalientPosesError):
    """Raised inside an interruptible task's thread by :meth:`Task.cancel`."""


def readable(exc: BaseException, name_of: Callable[[str], str] = str) -> str:
    """One line for the status bar: our errors as they are, with the options they name said as
    ``name_of(field)`` (a panel's labels), anything else as an internal one."""
    if isinstance(exc, SalientPosesError):
        return said(exc, name_of)
    return f"internal error ({type(exc).__name__}: {exc}); please report it"


def _raise_in_thread(ident: int, exc_type: type[BaseException] | None) -> None:
    """Deliver ``exc_type`` to Python thread ``ident`` at its next instruction (None clears a
    pending one); CPython's documented ``PyThreadState_SetAsyncExc``."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exc_type) if exc_type is not None else None)


class Task(QtCore.QObject):
    """``work(report, token)`` on a worker thread; a failure's message says the options it
    names as ``name_of(field)`` (:func:`readable`).

    Signals
    -------
    progress(float, str), finished(object), failed(str), cancelled(); partial(object): a
    result on the way that the work chose to show early (it emits it itself, or hands it
    over with :meth:`show_partial`)
    """

    #: How long :meth:`show_partial` waits at most for the UI thread to have drawn the result
    #: (a UI thread busy elsewhere, or a slot that never says so, costs the work no more).
    PARTIAL_WAIT_S = 0.5

    progress = QtCore.Signal(float, str)
    partial = QtCore.Signal(object)
    finished = QtCore.Signal(object)
    failed = QtCore.Signal(str)
    cancelled = QtCore.Signal()

    def __init__(self, work: Work, interruptible: bool = False,
                 name_of: Callable[[str], str] = str) -> None:
        super().__init__()
        self.work = work
        self.interruptible = interruptible
        self.name_of = name_of  # how a failure's message says the options it names
        self.token = CancelToken()
        self.thread: QtCore.QThread | None = None
        self._lock = threading.Lock()
        self._ident: int | None = None
        self._shown = threading.Event()

    def start(self) -> Task:
        """Run on a new thread (which quits when the work ends)."""
        # No parent: a dock that deletes the panel must not delete a running thread with it
        # (Qt aborts); the thread lives in _LIVE until it has finished.
        self.thread = QtCore.QThread()
        self.moveToThread(self.thread)
        self.thread.started.connect(self.run)
        self.quit_on_end()
        # No deleteLater on the task: Python owns it (a deferred Qt delete of an object Python
        # also deletes crashed the cancel path); _LIVE drops it once the thread finished.
        _LIVE[:] = [t for t in _LIVE if t.running]
        _LIVE.append(self)
        _COLLECTOR.hold()
        self.thread.start()
        return self

    def quit_on_end(self) -> None:
        """End the thread when the work ends, however it ends (a caller that disconnected the
        signals connects this again)."""
        assert self.thread is not None
        for signal in (self.finished, self.failed, self.cancelled):
            # direct: the thread's own event loop is told to end from the thread itself (quit
            # is thread-safe). Queued to the UI thread, the quit waited for its event loop,
            # which a close blocks in TaskRunner.close's wait: every close with a task running
            # waited out the deadline, and at exit the thread was destroyed still running
            # (Qt aborts the process)
            signal.connect(self.thread.quit, QtCore.Qt.ConnectionType.DirectConnection)

    @property
    def running(self) -> bool:
        return self.thread is not None and not self.thread.isFinished()

    def show_partial(self, result: Any) -> None:
        """Emit ``partial(result)`` from the work's thread and wait until the UI thread has
        drawn it (its slot calls :meth:`partial_shown`), a cancel, or :attr:`PARTIAL_WAIT_S`.

        Drawing a result (the selection space's graph: axes, curves and labels laid out by
        pyqtgraph) is tens of milliseconds of Python on the UI thread. Beside a work that runs
        Python too (the tolerance's search starts with its fits' set-up), the two threads
        took turns on the GIL and the draw stalled the panel's event loop about twice as long
        (up to 113 ms over a 5,000-frame Analyze on the 2-core CI host, 42-65 ms with the
        wait). Waiting for the draw costs the work that time, once.
        """
        self._shown.clear()
        if self.token.cancelled:  # (cancelled before the clear: its set is undone)
            return
        self.partial.emit(result)
        self._shown.wait(self.PARTIAL_WAIT_S)

    def partial_shown(self) -> None:
        """Called by the UI thread once it has drawn the result of :meth:`show_partial`."""
        self._shown.set()

    def cancel(self) -> None:
        """Ask the work to stop (and interrupt it if it is interruptible)."""
        self.token.cancel()
        self._shown.set()  # (a work waiting for a draw the panel no longer makes)
        if self.interruptible:
            with self._lock:
                if self._ident is not None:
                    _raise_in_thread(self._ident, Interrupted)

    @QtCore.Slot()
    def run(self) -> None:
        try:
            self._run()
        except Interrupted:  # arrived between the work's end and the guard below
            self.cancelled.emit()

    def _run(self) -> None:
        with self._lock:
            self._ident = threading.get_ident()
        try:
            result = self.work(self.progress.emit, self.token)
        except (AnalysisCancelled, Interrupted):
            outcome: tuple[Any, ...] = (self.cancelled,)
        except Exception as exc:  # noqa: BLE001 - shown in the status line, never a traceback
            outcome = (self.failed, readable(exc, self.name_of))
        else:
            outcome = (self.cancelled,) if self.token.cancelled else (self.finished, result)
        finally:
            with self._lock:
                if self._ident is not None:
                    _raise_in_thread(self._ident, None)  # drop an interruption not yet raised
                self._ident = None
        signal, *args = outcome
        signal.emit(*args)


#: Every task whose thread may still run (pruned when the next one starts).
_LIVE: list[Task] = []


class _UiThreadCollector:
    """Python's cyclic garbage collection on the UI thread only, while tasks run.

    The collector runs in whichever thread allocates when its counts trip, and a worker
    allocates the most: it then destroyed Qt objects of a closed panel (or a finished test's)
    on the worker thread, where Qt's destructor waited for a lock the UI thread held while it
    waited for the worker's GIL: the whole application hung (a panel test, once in a suite
    run). So while a task runs the automatic collector is off, and a timer on the UI thread
    collects the young generations every second (under a millisecond with the panel loaded);
    when the last task has ended they are collected once more there and the collector's state
    is put back as it was (a host that turned it off keeps it off). The whole heap is not
    collected then: that took 45 ms with the panel alone, a hitch that grows with a host's
    heap, and with no task running none of this tool's threads is left to collect in.
    """

    INTERVAL_MS = 1000

    def __init__(self) -> None:
        self._timer: QtCore.QTimer | None = None
        self._was_enabled = False

    def hold(self) -> None:
        """Called on the UI thread as a task starts."""
        if self._timer is not None:
            return
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QtCore.QTimer()
        self._timer.timeout.connect(self._tick)
        self._timer.start(self.INTERVAL_MS)

    def _tick(self) -> None:
        if any(task.running for task in _LIVE):
            gc.collect(1)  # (young garbage; the old generation waits for the end)
        else:
            self.release()

    def release(self) -> None:
        """Stop holding (on the UI thread, no task running): the young generations collected
        here, and the collector as it was."""
        if self._timer is None:
            return
        self._timer.stop()
        self._timer = None
        gc.collect(1)
        if self._was_enabled:
            gc.enable()


_COLLECTOR = _UiThreadCollector()


class TaskRunner(QtCore.QObject):
    """Starts the tasks of one widget; cancels them and stops starting new ones on close."""

    def __init__(self, parent: QtCore.QObject) -> None:
        super().__init__(parent)
        self._alive: list[Task] = []
        self.closed = False

    def start(self, task: Task) -> Task | None:
        """Start ``task``; None once the runner is closed."""
        if self.closed:
            return None
        self._alive = [t for t in self._alive if t.running]
        self._alive.append(task)
        return task.start()

    @property
    def running(self) -> bool:
        return any(t.running for t in self._alive)

    def close(self, milliseconds: int = 2000) -> None:
        """Cancel everything, start nothing more, and wait a while for the threads (a thread
        still busy after that runs to its end on its own)."""
        self.closed = True
        for task in self._alive:
            task.cancel()
        deadline = QtCore.QDeadlineTimer(milliseconds)
        for task in self._alive:
            if task.thread is not None:
                task.thread.wait(deadline)
        self._alive = []
