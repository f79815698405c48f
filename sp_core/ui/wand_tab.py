"""The panel's "Propagate edit" tab: the magic wand (see :mod:`sp_core.falloff`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtGui, QtWidgets

from sp_core.errors import SalientPosesError
from sp_core.options import Options
from sp_core.session import GraphEntry
from sp_core.ui.analysis_box import form_layout
from sp_core.ui.axes import WholeNumberAxis
from sp_core.ui.bindings import Binder
from sp_core.ui.worker import Task, TaskRunner, readable


class PropagateTab(QtWidgets.QWidget):
    """Pose one frame, see the falloff over the timeline, write the edit into an additive layer.

    The edited pose is either the host's current pose at the frame (posed by hand, e.g. on a
    layer in Maya) or the analysed pose plus typed rotation offsets for one node (standalone).
    Changing the region or the mode only re-reads the falloff (well under 50 ms); sigma and the
    eigen count rebuild the pose graph. Every number shows its value (spin boxes, not bare
    sliders).
    """

    def __init__(self, binder: Binder, status: Callable[..., None], runner: TaskRunner,
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = binder.session
        self.status = status
        self.runner = runner
        self._building: Task | None = None  # the pose graph's build, off the UI thread
        self._quiet = False  # the refresh that waits for that build is quiet
        self._built_for: tuple[tuple, object] = ((), None)  # (that build's _wanted)
        form = form_layout(None)
        self.frame_spin = QtWidgets.QSpinBox()
        self.frame_spin.setRange(-10**7, 10**7)
        current = QtWidgets.QToolButton()
        current.setText("current frame")
        current.clicked.connect(lambda: self.frame_spin.setValue(
            self.session.host.current_frame()))
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.frame_spin)
        row.addWidget(current)
        form.addRow("edited frame", row)
        self.source = QtWidgets.QComboBox()
        self.source.addItems(["typed offsets", "the host's pose at that frame",
                              "that frame of an edited BVH…"])
        self.source.activated.connect(self._source_chosen)
        form.addRow("edit", self.source)
        self.edited_clip = None
        self.edited_path = ""
        self._falloff_error = False  # (the status line holds a falloff's refusal)
        self.node_combo = QtWidgets.QComboBox()
        self.offsets = [QtWidgets.QDoubleSpinBox() for _ in range(3)]
        offsets = QtWidgets.QHBoxLayout()
        for axis, box in zip("XYZ", self.offsets, strict=True):
            # the edit is the pose it leads to, spread as the shortest turn to it: 190 went
            # the other way (-170) and 360 changed nothing (the command line refuses them)
            box.setRange(-180.0, 180.0)
            box.setToolTip("degrees, -180 to 180: the edit is the pose it leads to, spread "
                           "over the motion as the shortest turn to it")
            box.setDecimals(1)
            box.setSuffix("°")
            box.setPrefix(f"{axis} ")
            box.setMinimumWidth(40)
            offsets.addWidget(box, 1)
        form.addRow("node", self.node_combo)
        form.addRow("rotate", offsets)
        # sigma, eigenpairs and reach are options (sp_core.options.WandOptions), bound here
        self.sigma_spin = binder.generate("sigma", empty="adapted to the motion")
        form.addRow("sigma", self.sigma_spin)
        self.eigen_spin = binder.generate("eigen")
        form.addRow("eigenpairs", self.eigen_spin)
        self.mode_combo = binder.generate("mode")
        form.addRow("reach", self.mode_combo)
        self.region = [QtWidgets.QSpinBox(), QtWidgets.QSpinBox()]
        region = QtWidgets.QHBoxLayout()
        for box in self.region:
            box.setRange(-10**7, 10**7)
            region.addWidget(box)
        form.addRow("region", region)
        self.plot = pg.PlotWidget(background="#26282b",
                                  axisItems={"bottom": WholeNumberAxis("bottom")})
        self.plot.setMinimumHeight(140)
        self.plot.setLabel("bottom", "frame")
        self.plot.setLabel("left", "share of the edit")  # the falloff: 1 at the posed frame
        self.plot.setYRange(0, 1.05)
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#93c47d", width=2))
        self.marker = pg.InfiniteLine(angle=90, pen=pg.mkPen("#e06666", width=2))
        self.plot.addItem(self.marker)
        # why there is no falloff for the analysed motion (said here, not in the panel's
        # status line, which the analysis' own result holds)
        self.note = QtWidgets.QLabel("")
        self.note.setWordWrap(True)
        self.note.setObjectName("wandNote")
        self.apply_button = QtWidgets.QPushButton("Apply edit to a new layer")
        self.apply_button.clicked.connect(self.apply)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.note)
        layout.addWidget(self.apply_button)
        for signal in (self.frame_spin.valueChanged, self.region[0].valueChanged,
                       self.region[1].valueChanged):
            signal.connect(self.refresh)
        # the falloff follows the options, however they were changed
        self._unsubscribe = self.session.subscribe("options_changed", self._options_changed)
        self._wand = self.session.options.wand
        self.weights: np.ndarray | None = None
        self._stale = False  # a refresh waits for the tab to be shown

    def on_analysed(self) -> None:
        """Fill the node list and the frame from the analysed motion."""
        motion = self.session.motion
        if motion is None:
            return
        self.node_combo.clear()
        self.node_combo.addItems([n for i, n in enumerate(motion.node_names)
                                  if len(motion._rotation_index[i]) == 3])
        for box, value in ((self.frame_spin, self.session.host.current_frame()),
                           (self.region[0], motion.first_frame),
                           (self.region[1], motion.last_frame)):
            box.blockSignals(True)
            box.setRange(motion.first_frame, motion.last_frame)
            box.setValue(min(max(value, motion.first_frame), motion.last_frame))
            box.blockSignals(False)
        self.refresh(quiet=True)

    def _options_changed(self, options: Options) -> None:
        if options.wand != self._wand:
            self._wand = options.wand
            self.refresh()

    def refresh(self, *_args: object, quiet: bool = False, hidden: bool = False) -> None:
        """The falloff of the options, frame and region; why not, in the tab's note and (unless
        ``quiet``: after an analysis, whose result the status line holds) the status line.
        Left for when the tab is shown unless it is shown or ``hidden`` asks for it now."""
        if self.session.motion is None:
            return
        if not (hidden or self.isVisible()):
            # done when the tab is shown: the pose graph's spectrum held the UI thread for
            # 0.5 s at the end of every analysis of a 5,000-frame take, tab open or not
            self._stale = True
            return
        self._stale = False
        if self._building is not None:  # its end refreshes again, with what is set then
            self._quiet = self._quiet and quiet
            return
        try:
            wand = self.session.options.wand
            build = self.session.pose_graph_build(wand.sigma, wand.eigen)
            if build is not None and not hidden:
                self._build(build, quiet)
                return
            graph = self.session.pose_graph(wand.sigma, wand.eigen)
            frame = self.frame_spin.value()
            region = (self.region[0].value(), self.region[1].value())
            self.weights = graph.weights(frame, region=region, mode=wand.mode,
                                         open_ends=self.session.motion_open_ends())
        except Exception as exc:  # noqa: BLE001 - shown in the tab (and the status line)
            self._no_falloff(readable(exc), quiet)
            return
        self.note.setText("")
        if self._falloff_error:  # (the red line said why there was none: there is one now)
            self._falloff_error = False
            self.status("")
        self.curve.setData(self.session.motion.frames, self.weights)
        self.marker.setValue(frame)

    def _build(self, build: Callable[[], GraphEntry], quiet: bool) -> None:
        """Build the pose graph on a worker thread, then refresh (its spectrum held the UI
        thread for 0.6 s when the tab was first shown after a 5,000-frame analysis)."""
        task = Task(lambda _report, _token: build())
        # bound methods of this UI-thread object: Qt queues the calls to the UI thread
        task.finished.connect(self._built)
        task.failed.connect(self._build_failed)
        task.cancelled.connect(self._build_failed)
        self._building, self._quiet = self.runner.start(task), quiet
        self._built_for = self._wanted()
        if self._building is None:  # the panel is closing
            return
        self.weights = None
        self.curve.setData([], [])
        self.note.setText("Building the pose graph…")

    def _built(self, entry: GraphEntry) -> None:
        self._building = None
        self.session.keep_pose_graph(entry)
        self.refresh(quiet=self._quiet)

    def _build_failed(self, message: str = "cancelled") -> None:
        self._building = None
        if message != "cancelled" and self.session.motion is not None:
            (key, motion), (built_key, built_motion) = self._wanted(), self._built_for
            if key != built_key or motion is not built_motion:
                # the settings or the motion changed while it ran: their graph, not its error
                self.refresh(quiet=self._quiet)
                return
        self._no_falloff(message, self._quiet)

    def _wanted(self) -> tuple[tuple, object]:
        """What the graph is built for now (:meth:`Session.pose_graph_key`)."""
        wand = self.session.options.wand
        return self.session.pose_graph_key(wand.sigma, wand.eigen)

    def _no_falloff(self, message: str, quiet: bool) -> None:
        self.weights = None
        self.curve.setData([], [])
        self.note.setText(f"No falloff: {message}")
        if not quiet:
            self.status(message, error=True)
            self._falloff_error = True

    def showEvent(self, event: QtGui.QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._stale:
            self.refresh(quiet=True)

    def _source_chosen(self, index: int) -> None:
        if index != 2:
            return
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Edited BVH", "", "BVH (*.bvh)")
        if path:
            self.load_edited_bvh(path)

    def load_edited_bvh(self, path: str) -> None:
        """Use a BVH with the same channels (the pose edited elsewhere) as the edit."""
        from sp_core.io.bvh import read_bvh

        motion = self.session.motion
        try:
            clip = read_bvh(path, first_frame=motion.first_frame if motion else 0)
        except (SalientPosesError, OSError) as exc:
            self.status(f"cannot use {path}: {exc}", error=True)
            return
        if motion is not None:
            from sp_core.falloff import edited_frame

            try:  # (a frame of it is taken at Apply; checked now: channels and skeleton)
                edited_frame(motion, clip, clip.first_frame, path)
            except SalientPosesError as exc:
                self.status(f"cannot use {path}: {exc}", error=True)
                return
        self.edited_clip, self.edited_path = clip, path
        self.source.setCurrentIndex(2)
        self.status(f"The edit is frame {self.frame_spin.value()} of {path}.")

    def edited_pose(self) -> np.ndarray:
        motion = self.session.motion
        assert motion is not None
        frame = self.frame_spin.value()
        if self.source.currentIndex() == 1:
            return self.session.host_pose(frame)
        if self.source.currentIndex() == 2:
            if self.edited_clip is None:
                raise SalientPosesError("choose the edited BVH first")
            from sp_core.falloff import edited_frame

            return edited_frame(motion, self.edited_clip, frame, self.edited_path)
        edited = motion.channels[motion.frame_index(frame)].copy()
        node = motion.node_index(self.node_combo.currentText())
        order = motion.rotation_orders[node]
        for axis, box in zip("XYZ", self.offsets, strict=True):
            edited[motion._rotation_index[node][order.index(axis)]] += box.value()
        return edited

    def apply(self) -> None:
        if self.session.motion is None:
            self.status("analyse first", error=True)
            return
        if self._building is not None:
            self.status("the falloff is still being computed (the pose graph); apply the edit "
                        "once it shows", error=True)
            return
        if self._stale:  # (a script's Apply, the tab not shown yet)
            self.refresh(quiet=True, hidden=True)
        if self.weights is None:
            self.status(self.note.text() or "analyse first", error=True)
            return
        try:
            edited = self.edited_pose()
            handle = self.session.propagate_edit(self.frame_spin.value(), edited, self.weights,
                                                 typed=self.source.currentIndex() == 0)
        except SalientPosesError as exc:
            self.status(f"Propagate failed, the scene is unchanged: {exc}", error=True)
            return
        except Exception as exc:  # noqa: BLE001 - never a traceback in the panel
            self.status(f"Propagate failed, the scene is unchanged: internal error "
                        f"({type(exc).__name__}: {exc}); please report it", error=True)
            return
        reached = int(np.count_nonzero(self.weights > 0.5))
        self.status(f"Propagated the edit at frame {self.frame_spin.value()} into "
                    f"{handle.name} (weight > 0.5 on {reached} frames).")
