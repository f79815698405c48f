"""``salient-poses view``: the standalone main window (viewer + docked panel)."""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from sp_core.errors import SalientPosesError
from sp_core.host import LayerHandle
from sp_core.io.atomic import OutputError, OutputGuard, atomic_open
from sp_core.jobs import write_keys_json
from sp_core.options import Options
from sp_core.reduction import Reduction
from sp_core.session import Session
from sp_core.standalone import StandaloneHost
from sp_core.ui.app import ensure_qapp, save_grab
from sp_core.ui.panel import SalientPosesPanel
from sp_core.ui.viewer import SkeletonViewer

#: windows opened from another's File menu (Qt does not keep a parentless window alive)
_OPEN: set[MainWindow] = set()


#: Applies whose reductions the window keeps for File > Save after an undo brings them back.
REMEMBERED_APPLIES = 8


class MainWindow(QtWidgets.QMainWindow):
    """The skeleton viewer with the panel docked on the right, and a File menu to save."""

    def __init__(self, host: StandaloneHost, settings: QtCore.QSettings | None = None) -> None:
        super().__init__()
        self.host = host
        self.session = Session(host)
        #: every Apply's layers with its reduction and options, latest last: an undo that
        #: brings an Apply's layers back brings back what File > Save writes of them
        self._written: list[tuple[list[LayerHandle], Reduction, Options]] = []
        self.session.subscribe("applied", self._remember_applied)
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
        # F5, [ and ] also with the viewer's timeline in focus: the window has no other keys
        self.panel.set_shortcut_context(QtCore.Qt.ShortcutContext.WindowShortcut)
        self.resizeDocks([dock], [380], QtCore.Qt.Orientation.Horizontal)
        self.settings = settings
        menu = self.menuBar().addMenu("&File")
        self._action(menu, "Open…", self._open, QtGui.QKeySequence.StandardKey.Open)
        menu.addSeparator()
        self._action(menu, "Save keys JSON…", self._save_keys)
        self._action(menu, "Save scene as BVH…", self._save_bvh,
                     QtGui.QKeySequence.StandardKey.Save)
        self._action(menu, "Save residual (.npy)…", self._save_residual)
        edit = self.menuBar().addMenu("&Edit")
        self.undo_action = self._action(edit, "Undo", self.undo,
                                        QtGui.QKeySequence.StandardKey.Undo)
        #: what the scene shows: a toggle per layer Apply wrote (filled as the menu opens)
        self.layers_menu = self.menuBar().addMenu("&Layers")
        self.layers_menu.aboutToShow.connect(self._fill_layers_menu)

    def _action(self, menu: QtWidgets.QMenu, text: str, slot: Callable[[], object],
                shortcut: QtGui.QKeySequence.StandardKey | None = None) -> QtGui.QAction:
        action = QtGui.QAction(text, self)
        action.triggered.connect(lambda _checked=False: slot())
        if shortcut is not None:
            action.setShortcut(shortcut)
        menu.addAction(action)
        return action

    # ------------------------------------------------------------------ open, undo, layers
    def _open(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Open motion", str(Path(self.host.source).parent), "Motion (*.bvh *.fbx)")
        if path:
            self.open(path)

    def open(self, path: str) -> MainWindow | None:
        """Open ``path`` in a new window in this one's place (the panel keeps its options);
        this window stays, with a red status line, if the file cannot be read."""
        if self.panel.busy:
            self.panel.show_error("Cancel or wait for the work in progress before opening "
                                  "another file")
            return None
        try:
            host = StandaloneHost.from_file(path)
        except (SalientPosesError, OSError) as exc:
            self.panel.show_error(f"Cannot open {path}: {exc}")
            return None
        self.panel.shutdown()  # (saves the options the new window's panel starts from)
        window = MainWindow(host, settings=self.settings)
        window.resize(self.size())
        window.show()
        _OPEN.add(window)
        # this window goes once Qt is done with the menu action that called this (its menus'
        # actions hold it: without the delete, every Open kept a clip and its analysis)
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        self.close()
        _OPEN.discard(self)
        # (the window of the startup was frozen out of the collector's reach, see run_viewer:
        # its clip and panel, in reference cycles, are freed only by the collector)
        gc.unfreeze()
        return window

    def undo(self) -> None:
        """Take back the last Apply, Remove or propagated edit (one step each)."""
        if self.panel.busy:
            self.panel.show_error("Cancel or wait for the work in progress before undoing")
            return
        try:
            label = self.host.undo()
        except SalientPosesError as exc:
            self.panel.show_error(str(exc).capitalize())
            return
        # every layer of the standalone scene is one this window wrote; what was applied last
        # may be what was undone, so it is not there to save any more, unless the undo
        # brought an Apply's layers back (an undone Remove: Save said "Apply first")
        self.session.applied[:] = self.host.layers
        self.session.edits[:] = [h for h in self.session.edits if h in self.host.layers]
        back = [(reduction, options) for handles, reduction, options in self._written
                if handles and all(h in self.host.layers for h in handles)]
        self.session.last_reduction, self.session.last_options = back[-1] if back \
            else (None, None)
        self.panel.show_status(f"Undone: {label}.", ok=True)
        self.panel.refresh_layers()

    def _remember_applied(self, handles: list[LayerHandle], reduction: Reduction | None
                          ) -> None:
        if reduction is not None and self.session.last_options is not None:
            self._written.append((list(handles), reduction, self.session.last_options))
            # (a long take's reduction holds arrays of every frame: the last few Applies,
            # which an undo or two may bring back)
            del self._written[:-REMEMBERED_APPLIES]

    def _fill_layers_menu(self) -> None:
        self.layers_menu.clear()
        for handle in self.host.layers:
            action = self.layers_menu.addAction(f"{handle.name} ({handle.kind})")
            action.setCheckable(True)
            action.setChecked(not self.host.is_muted(handle))
            action.toggled.connect(
                lambda shown, handle=handle: self.host.set_muted(handle, not shown))
        if not self.host.layers:
            self.layers_menu.addAction("(no layers: Apply writes them)").setEnabled(False)

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.panel.shutdown()  # a docked child gets no close event of its own
        super().closeEvent(event)

    def _save_keys(self) -> None:
        def write(reduction: Reduction, options: Options, path: str) -> None:
            write_keys_json(reduction, self.host.source, self.host.fps, options, path)
        self._save_reduction("keys JSON", "keys.json", "JSON (*.json)", write)

    def _save_residual(self) -> None:
        def write(reduction: Reduction, _options: Options, path: str) -> None:
            with atomic_open(path, "wb") as handle:  # (np.save would add .npy to the name)
                np.save(handle, reduction.residual)
        self._save_reduction("residual", "residual.npy", "NumPy (*.npy)", write)

    def _save_reduction(self, what: str, default: str, pattern: str,
                        write: Callable[[Reduction, Options, str], None]) -> None:
        """Ask where, then write part of the last applied reduction (with the options it was
        made with)."""
        reduction, options = self.session.last_reduction, self.session.last_options
        if reduction is None or options is None:
            self.panel.show_error(f"Apply first: there is no {what} to save")
            return
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, f"Save {what}", default, pattern)
        if path:
            self.save(what, path, lambda target: write(reduction, options, target))

    def _save_bvh(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save scene", "scene.bvh",
                                                        "BVH (*.bvh)")
        if path:
            self.save("scene", path, self.host.save_bvh)

    def save(self, what: str, path: str, write: Callable[[str], None]) -> bool:
        """Write ``what`` to ``path`` with ``write(path)``; the status line says where, or why
        not. The clip this window opened is never replaced (by its path, a symlink or a hard
        link); another existing file is (the file dialog asked first)."""
        guard = OutputGuard([self.host.source], overwrite=True)
        try:
            if guard.is_input(path):
                raise OutputError(f"{path} is the clip this window opened; save under another "
                                  "name (the original is never replaced)")
            guard.claim(path, what)
            write(path)
        except (SalientPosesError, OSError) as exc:
            self.panel.show_error(f"The {what} was not saved: {exc}")
            return False
        self.panel.show_status(f"Saved the {what} to {path}.", ok=True)
        return True


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


def _without_offscreen_noise(kind: QtCore.QtMsgType, context: QtCore.QMessageLogContext,
                             message: str) -> None:
    """Qt's messages on stderr, as Qt prints them, but the offscreen platform's
    "does not support propagateSizeHints()"."""
    if "propagateSizeHints" not in message:
        sys.stderr.write(message + "\n")


def _freeze_startup() -> None:
    """Move the objects made so far (modules, the window: about 115,000) out of the cyclic
    collector's reach, its garbage collected first (garbage frozen is never freed).

    The panel's own collector holds the automatic one off only while a task runs; outside,
    a full collection walked every object of the process on the UI thread, the largest hitch
    of a drag of K: 174 ms after an Analyze of a 5,000-frame take on the CI machine kind, 55 ms
    with the startup's objects frozen (the 52,000 left are what the first Analyze loaded:
    numba's typing tables, modules imported lazily). An analysis' data are not frozen: in a
    reference cycle they would never be freed. Opening another file unfreezes them all
    (:meth:`MainWindow.open`), so the window it replaces can be freed.
    """
    gc.collect()
    gc.freeze()


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
    scratch = None
    if screenshot:
        # the offscreen platform warns of a window feature it lacks, twice per run, on a
        # command whose stderr a script reads for errors
        previous = QtCore.qInstallMessageHandler(_without_offscreen_noise)
        # a scripted run must not depend on (or change) the user's saved options
        # (in a folder of its own: next to the picture it replaced a user's OUT.ini)
        scratch = tempfile.TemporaryDirectory(prefix="salient-poses-view-")
        settings = QtCore.QSettings(str(Path(scratch.name) / "panel.ini"),
                                    QtCore.QSettings.Format.IniFormat)
    window: MainWindow | None = None
    failed = ""
    try:
        window = MainWindow(host, settings=settings)
        window.resize(1400, 950)
        window.show()
        if not screenshot:
            _freeze_startup()
        if screenshot or keys is not None:
            if keys is not None:  # the K asked for (as choosing it in the panel sets it): the
                # analysis solves up to it, as reduce's does (the panel took the nearest K)
                window.panel.binder.edit(keys=keys, ratio=None, suggested=False)
            window.panel.start_analysis()
            wait_for_analysis(window, timeout)
            if window.session.space is None:
                raise SalientPosesError(f"the analysis failed: {window.panel.status.text()}")
            if keys is not None:
                window.panel.request_k(keys, immediately=True, user=True)
            if apply:
                window.panel.apply()
            wait_for_analysis(window, timeout)  # Apply and the error estimate of K
            if apply and not window.session.applied:
                said = window.panel.status.text()
                failed = said if said.startswith("Apply failed") else f"Apply failed: {said}"
            middle = host.preview[len(host.preview) // 2] if host.preview \
                else host.clip.first_frame
            host.set_current_frame(middle)
        if screenshot:
            app.processEvents()
            save_grab(window, screenshot)  # (a failed Apply too: the picture shows why)
            print(f"Wrote {screenshot}")
    finally:
        if screenshot:  # (whatever failed: a caller in this process keeps its Qt state)
            if window is not None:
                window.close()  # saves the panel's settings: into the scratch folder removed
            assert scratch is not None
            scratch.cleanup()
            QtCore.qInstallMessageHandler(previous)
    if failed:
        raise SalientPosesError(failed)
    return 0 if screenshot else app.exec()
