"""Skeleton viewer of the standalone mode: front and side views, ghosts, time line, playback."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from sp_core.standalone import StandaloneHost
from sp_core.ui.axes import WholeNumberAxis

ORIGINAL = (150, 150, 150)
SCENE = (111, 168, 220)
# Maya's time-slider colours: red keys, green breakdowns
KEY = (224, 68, 62)
BREAKDOWN = (106, 196, 106)
GHOST = (*KEY, 110)
GHOST_BREAKDOWN = (*BREAKDOWN, 110)
#: Ghosts drawn on each side of the current frame: all keys at once turn into a cloud.
GHOSTS_EACH_SIDE = 2


def nearest_keys(frames: list[int], current: int, each_side: int = GHOSTS_EACH_SIDE
                 ) -> list[int]:
    """Indices of the ``each_side`` keys before the current frame, the key on it, and the
    ``each_side`` keys after it."""
    ordered = sorted(range(len(frames)), key=lambda i: frames[i])
    before = [i for i in ordered if frames[i] < current][-each_side:]
    after = [i for i in ordered if frames[i] > current][:each_side]
    at = [i for i in ordered if frames[i] == current]
    return before + at + after


def bone_segments(positions: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """(2 * n_bones, 2) points, child then parent, for ``connect="pairs"`` drawing.

    positions : (n_nodes, 2) projected positions of one pose.
    """
    children = np.flatnonzero(parents >= 0)
    pairs = np.empty((2 * len(children), 2))
    pairs[0::2] = positions[children]
    pairs[1::2] = positions[parents[children]]
    return pairs


class SkeletonView(pg.PlotWidget):
    """One orthographic view (two world axes) of the skeleton."""

    def __init__(self, title: str, axes: tuple[int, int]) -> None:
        super().__init__(background="#1e1f22")
        self.axes = axes
        self.setAspectLocked(True)
        self.showGrid(x=True, y=True, alpha=0.1)
        self.setTitle(title, color="#bbbbbb", size="10pt")
        self.setMenuEnabled(False)
        self.hideButtons()
        self.ghost_item = self.plot([], [], connect="pairs", pen=pg.mkPen(GHOST, width=1.5))
        self.breakdown_item = self.plot([], [], connect="pairs",
                                        pen=pg.mkPen(GHOST_BREAKDOWN, width=1.5))
        self.original_item = self.plot([], [], connect="pairs", pen=pg.mkPen(ORIGINAL, width=2))
        self.pose_item = self.plot([], [], connect="pairs", pen=pg.mkPen(SCENE, width=3),
                               symbol="o", symbolSize=4, symbolBrush=SCENE, symbolPen=None)

    def project(self, positions: np.ndarray) -> np.ndarray:
        return positions[..., list(self.axes)]


class Timeline(pg.PlotWidget):
    """Frames on x; keyframe ticks; the current frame as a draggable line.

    Signals
    -------
    frame_requested(int)
    """

    frame_requested = QtCore.Signal(int)

    def __init__(self) -> None:
        super().__init__(background="#1e1f22", axisItems={"bottom": WholeNumberAxis("bottom")})
        self.setMaximumHeight(70)
        self.setMouseEnabled(x=False, y=False)
        self.setMenuEnabled(False)
        self.hideButtons()
        self.getPlotItem().hideAxis("left")
        self.setYRange(0, 1, padding=0)
        self.ticks = pg.ScatterPlotItem(symbol="s", size=9, brush=pg.mkBrush(KEY),
                                        pen=pg.mkPen(None))
        self.addItem(self.ticks)
        self.cursor = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen("#e06666", width=2))
        self.cursor.sigDragged.connect(lambda: self.frame_requested.emit(
            int(round(self.cursor.value()))))
        self.addItem(self.cursor)

    def set_range(self, first: int, last: int) -> None:
        self.setXRange(first, last, padding=0.01)
        self.cursor.setBounds((first, last))

    def set_keys(self, frames: list[int], labels: list[str] | None = None) -> None:
        """Keyframe ticks: keys as red squares, breakdowns as smaller green diamonds."""
        if labels is None:
            self.ticks.setData(frames, [0.5] * len(frames))
            return
        spots = [{"pos": (f, 0.5), "symbol": "d" if label == "breakdown" else "s",
                  "size": 8 if label == "breakdown" else 10,
                  "brush": pg.mkBrush(BREAKDOWN if label == "breakdown" else KEY)}
                 for f, label in zip(frames, labels, strict=True)]
        self.ticks.setData(spots=spots)


class SkeletonViewer(QtWidgets.QWidget):
    """Front and side views of a standalone host's scene, its time line and playback.

    Shows the scene (all layers applied) in blue, ghosts at the previewed keyframes, and — once a
    layer is applied — the original motion in grey underneath.
    """

    def __init__(self, host: StandaloneHost, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = host
        clip = host.clip
        self.parents = np.asarray(clip.parents)
        self.front = SkeletonView("front (X, Y)", (0, 1))
        self.side = SkeletonView("side (Z, Y)", (2, 1))
        self.timeline = Timeline()
        self.timeline.set_range(clip.first_frame, clip.last_frame)
        self.timeline.frame_requested.connect(host.set_current_frame)
        self.play_button = QtWidgets.QPushButton("Play")
        self.play_button.setCheckable(True)
        self.play_button.toggled.connect(self._toggle_play)
        self.frame_label = QtWidgets.QLabel()
        self.ghost_box = QtWidgets.QCheckBox("ghosts at the nearest keys")
        self.ghost_box.setChecked(True)
        self.ghost_box.toggled.connect(lambda _on: self._draw_ghosts())
        views = QtWidgets.QHBoxLayout()
        views.addWidget(self.front, 1)
        views.addWidget(self.side, 1)
        controls = QtWidgets.QHBoxLayout()
        controls.addWidget(self.play_button)
        controls.addWidget(self.frame_label)
        controls.addStretch(1)
        controls.addWidget(self.ghost_box)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(views, 1)
        layout.addWidget(self.timeline)
        layout.addLayout(controls)
        self._timer = QtCore.QTimer(self)
        self._timer.setInterval(max(1, int(1000 / clip.fps)))
        self._timer.timeout.connect(self._step)
        self._positions = host.evaluated_positions()
        self._fit_views()
        host.listeners.append(self._on_host_event)
        self._draw_frame()
        self._draw_ghosts()

    def _fit_views(self) -> None:
        everything = self.host.clip.positions.reshape(-1, 3)
        low, high = everything.min(axis=0), everything.max(axis=0)
        for view in (self.front, self.side):
            a, b = view.axes
            view.setXRange(low[a], high[a], padding=0.08)
            view.setYRange(low[b], high[b], padding=0.08)

    def _on_host_event(self, event: str) -> None:
        if event == "layers":
            self._positions = self.host.evaluated_positions()
            self._draw_frame()
            self._draw_ghosts()
        elif event == "preview":
            self._draw_ghosts()
        elif event == "frame":
            self._draw_frame()
            self._draw_ghosts(ticks=False)  # the ghosts follow the current frame

    def _row(self) -> int:
        return self.host.clip.frame_index(self.host.current_frame())

    def _draw_frame(self) -> None:
        row = self._row()
        layered = bool(self.host.layers)
        for view in (self.front, self.side):
            pose = view.project(self._positions[row])
            view.pose_item.setData(*bone_segments(pose, self.parents).T)
            if layered:
                original = view.project(self.host.clip.positions[row])
                view.original_item.setData(*bone_segments(original, self.parents).T)
            else:
                view.original_item.setData([], [])
        frame = self.host.current_frame()
        self.timeline.cursor.setValue(frame)
        self.frame_label.setText(f"frame {frame}")

    def _draw_ghosts(self, ticks: bool = True) -> None:
        """Ghost poses at the keys nearest the current frame (all of them are a cloud)."""
        frames = list(self.host.preview)
        labels = self.host.preview_labels
        if ticks:
            self.timeline.set_keys(frames, labels)
        near = nearest_keys(frames, self.host.current_frame())
        breakdown = [labels is not None and labels[i] == "breakdown" for i in range(len(frames))]
        for view in (self.front, self.side):
            for item, wanted in ((view.ghost_item, False), (view.breakdown_item, True)):
                chosen = [frames[i] for i in near if breakdown[i] == wanted]
                if not chosen or not self.ghost_box.isChecked():
                    item.setData([], [])
                    continue
                rows = [self.host.clip.frame_index(f) for f in chosen]
                poses = view.project(self._positions[rows])
                segments = np.concatenate([bone_segments(p, self.parents) for p in poses])
                item.setData(*segments.T)

    def _toggle_play(self, playing: bool) -> None:
        self.play_button.setText("Pause" if playing else "Play")
        if playing:
            self._timer.start()
        else:
            self._timer.stop()

    def _step(self) -> None:
        frame = self.host.current_frame() + 1
        if frame > self.host.clip.last_frame:
            frame = self.host.clip.first_frame
        self.host.set_current_frame(frame)
