"""Run a session's analysis in a worker thread so the host UI never freezes."""

from __future__ import annotations

from PySide6 import QtCore

from sp_core.clip import Clip
from sp_core.session import AnalysisCancelled, CancelToken, Session


class AnalysisWorker(QtCore.QObject):
    """Runs :meth:`Session.analyze` on a ``QThread``; results come back as queued signals.

    Signals
    -------
    progress(float, str), finished(object), failed(str), cancelled()
    """

    progress = QtCore.Signal(float, str)
    finished = QtCore.Signal(object)
    failed = QtCore.Signal(str)
    cancelled = QtCore.Signal()

    def __init__(self, session: Session, motion: Clip) -> None:
        super().__init__()
        self.session = session
        self.motion = motion
        self.token = CancelToken()

    @QtCore.Slot()
    def run(self) -> None:
        try:
            space = self.session.analyze(progress=self.progress.emit, cancel=self.token,
                                         motion=self.motion)
        except AnalysisCancelled:
            self.cancelled.emit()
        except Exception as exc:  # noqa: BLE001 - shown in the status line, never a traceback
            self.failed.emit(_readable(exc))
        else:
            self.finished.emit(space)


def _readable(exc: BaseException) -> str:
    from sp_core.errors import SalientPosesError

    if isinstance(exc, SalientPosesError):
        return str(exc)
    return f"internal error ({type(exc).__name__}: {exc}); please report it"


def start_analysis(session: Session, parent: QtCore.QObject) -> tuple[QtCore.QThread,
                                                                       AnalysisWorker]:
    """Read the motion here (host APIs belong to the main thread), then analyse it on a new
    thread; the thread quits when the worker is done."""
    motion = session.read_motion()
    thread = QtCore.QThread(parent)
    worker = AnalysisWorker(session, motion)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    for signal in (worker.finished, worker.failed, worker.cancelled):
        signal.connect(thread.quit)
    # No worker.deleteLater here: Python owns the worker, and a deferred Qt delete of an object
    # Python also deletes crashed the cancel path. The caller drops its reference once the
    # thread has finished.
    thread.start()
    return thread, worker
