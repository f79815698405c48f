"""``salient-poses view``: the standalone main window (viewer + docked panel)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from sp_core.errors import SalientPosesError
from sp_core.io.keys import write_reduction_json
from sp_core.reduction import Reduction
from sp_core.session import Session
from sp_core.standalone import StandaloneHost
from sp_core.ui.app import ensure_qapp
from sp_core.ui.panel import SalientPosesPanel
from sp_core.ui.viewer import SkeletonViewer


class MainWindow(QtWidgets.QMainWindow):
    """The skeleton viewer with the panel docked on the right, and a File menu to save."""

    def __init__(self, host: StandaloneHost, settings: QtCore.QSettings | None = None) -> None:
        super().__init__()
        self.host = host
        self.session = Session(host)
        self.setWindowTitle(f"Salient Poses — {host.source}")
        self.viewer = SkeletonViewer(host)
        self.setCentralWidget(self.viewer)
        self.panel = SalientPosesPanel(self.session, settings=settings)
        dock = QtWidgets.QDockWidget("Salient Poses", self)
        dock.setObjectName("salientPosesDock")
        dock.setWidget(self.panel)
        dock.setFeatures(QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(QtCore.Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.resizeDocks([dock], [380], QtCore.Qt.Orientation.Horizontal)
        menu = self.menuBar().addMenu("&File")
        save_keys = QtGui.QAction("Save keys JSON…", self)
        save_keys.triggered.connect(self._save_keys)
        save_bvh = QtGui.QAction("Save scene as BVH…", self)
        save_bvh.triggered.connect(self._save_bvh)
        save_residual = QtGui.QAction("Save residual (.npy)…", self)
        save_residual.triggered.connect(self._save_residual)
        menu.addAction(save_keys)
        menu.addAction(save_bvh)
        menu.addAction(save_residual)

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.panel.shutdown()  # a docked child gets no close event of its own
        super().closeEvent(event)

    def _save_keys(self) -> None:
        self._save_reduction("keys", "keys.json", "JSON (*.json)", lambda reduction, path:
                             write_reduction_json(reduction, path, self.host.source,
                                                  self.host.fps))

    def _save_residual(self) -> None:
        self._save_reduction("residual", "residual.npy", "NumPy (*.npy)",
                             lambda reduction, path: np.save(path, reduction.residual))

    def _save_reduction(self, what: str, default: str, pattern: str,
                        write: Callable[[Reduction, str], None]) -> None:
        """Ask where, then write part of the last applied reduction."""
        reduction = self.session.last_reduction
        if reduction is None:
            self.panel.show_error(f"Apply first: there is no {what} to save")
            return
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, f"Save {what}", default, pattern)
        if path:
            write(reduction, path)

    def _save_bvh(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save scene", "scene.bvh",
                                                        "BVH (*.bvh)")
        if path:
            self.host.save_bvh(path)


class NoDisplayError(SalientPosesError):
    """The viewer was asked for a window where there is no display."""


#: Qt platforms that draw nowhere a user can see.
HEADLESS_PLATFORMS = ("offscreen", "minimal")


def has_display() -> bool:
    """True when windows appear on a screen (Qt's platform is not a headless one)."""
    return QtGui.QGuiApplication.platformName() not in HEADLESS_PLATFORMS


def wait_for_analysis(window: MainWindow, timeout: float = 120.0) -> None:
    """Process events until the panel's analysis, Apply and error estimate end (scripted
    runs)."""
    app = ensure_qapp()
    deadline = time.monotonic() + timeout
    while not window.panel.settled and time.monotonic() < deadline:
        app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
        time.sleep(0.005)
    app.processEvents()


def run_viewer(path: str, first_frame: int | None = None, keys: int | None = None,
               screenshot: str | None = None, apply: bool = False,
               timeout: float = 600.0) -> int:
    """Open the viewer on a BVH; with ``screenshot``, analyse, set K, save the window and exit.

    Returns the process exit status.

    Raises
    ------
    NoDisplayError
        No screenshot was asked for and there is no display (instead of a window nobody sees).
    """
    app = ensure_qapp()
    if screenshot is None and not has_display():
        raise NoDisplayError(
            "there is no display to open the viewer on (no DISPLAY or WAYLAND_DISPLAY; Qt "
            f"platform '{QtGui.QGuiApplication.platformName()}'). Save a picture instead: "
            f"salient-poses view {path} --screenshot view.png (analyses, sets K, saves the "
            "window as a PNG and exits), or log in with a display (ssh -X, VNC)")
    host = StandaloneHost.from_file(path, first_frame=first_frame)
    settings = None
    if screenshot:  # a scripted run must not depend on (or change) the user's saved options
        settings = QtCore.QSettings(str(Path(screenshot).with_suffix(".ini")),
                                    QtCore.QSettings.Format.IniFormat)
    window = MainWindow(host, settings=settings)
    window.resize(1400, 950)
    window.show()
    if screenshot or keys is not None:
        window.panel.start_analysis()
        wait_for_analysis(window, timeout)
        if window.session.space is None:
            raise SalientPosesError(f"the analysis failed: {window.panel.status.text()}")
        if keys is not None:
            window.panel.request_k(keys, immediately=True, user=True)
        if apply:
            window.panel.apply()
        wait_for_analysis(window, timeout)  # Apply and the error estimate of K
        middle = host.preview[len(host.preview) // 2] if host.preview else host.clip.first_frame
        host.set_current_frame(middle)
    if screenshot:
        app.processEvents()
        window.grab().save(screenshot)
        window.close()  # saves the panel's settings: into the scratch file removed next
        Path(screenshot).with_suffix(".ini").unlink(missing_ok=True)
        return 0
    return app.exec()
