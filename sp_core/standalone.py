"""StandaloneHost: a BVH clip as the host (the embedded default, no application needed).

Layers live in memory: an override layer replaces the keyed channels over its frames with the
curves' values; an additive layer adds ``weight × residual``. :meth:`StandaloneHost.evaluated`
gives what the viewer shows. The original clip is never modified.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import ClipError
from sp_core.host import HostError, LayerHandle, sparse_keys
from sp_core.io.bvh import write_bvh
from sp_core.io.readers import read_clip


@dataclass
class _Layer:
    handle: LayerHandle
    columns: np.ndarray  # channel indices in the clip
    rows: np.ndarray  # row indices in the clip
    values: np.ndarray  # (len(rows), len(columns))
    weight: float = 1.0
    curves: KeyedCurves | None = None
    muted: bool = False  # left out of what the scene shows (a view setting, like a mute)
    edit: bool = False  # a propagated edit: the artist's, which reads of the motion include


class StandaloneHost:
    """A clip in memory behaving like an application scene.

    Parameters
    ----------
    clip : Clip
    source : str, optional
        Where the clip came from (shown in the window title and saved files).

    Attributes
    ----------
    preview : list of int
        Frames of the current keyframe preview (the viewer draws them).
    listeners : list of callables
        Called with an event name (``"frame"``, ``"preview"``, ``"layers"``) when the scene
        changes, so a viewer can redraw.
    """

    name = "Standalone"

    def __init__(self, clip: Clip, source: str = "", first_frame: int | None = None) -> None:
        self.clip = clip
        self.source = source or clip.name
        #: the ``first_frame`` input option ``clip`` was read with (None: the file's own, when
        #: :meth:`from_file` read it; :attr:`read_from_file` says whether it is known)
        self.read_first_frame = first_frame
        self.read_from_file = first_frame is not None  # (a clip read at a given first frame)
        self.preview: list[int] = []
        self.preview_labels: list[str] | None = None
        self.listeners: list[Callable[[str], None]] = []
        self._frame = clip.first_frame
        self._layers: list[_Layer] = []
        self._undo: list[tuple[str, list[_Layer]]] = []
        #: layer name -> channel -> (host frames, values) of the keys :meth:`write_sparse` wrote
        self.sparse_keys: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        self._selection: list[str] = list(clip.root_names)

    @classmethod
    def from_file(cls, path: str | Path, first_frame: int | None = None) -> StandaloneHost:
        host = cls(read_clip(path, first_frame=first_frame), source=str(path),
                   first_frame=first_frame)
        host.read_from_file = True
        return host

    # ------------------------------------------------------------------ scene queries
    @property
    def fps(self) -> float:
        return self.clip.fps

    def playback_range(self) -> tuple[int, int]:
        return self.clip.first_frame, self.clip.last_frame

    def current_frame(self) -> int:
        return self._frame

    def set_current_frame(self, frame: int) -> None:
        self._frame = int(min(max(frame, self.clip.first_frame), self.clip.last_frame))
        self._notify("frame")

    def selected_nodes(self) -> list[str]:
        return list(self._selection)

    def select(self, nodes: Sequence[str]) -> None:
        for node in nodes:
            self.clip.node_index(node)  # raises with suggestions for unknown names
        self._selection = list(nodes)

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        wanted = {self.clip.node_index(r) for r in roots}
        result = []
        inside: set[int] = set()
        for i, name in enumerate(self.clip.node_names):
            p = int(self.clip.parents[i])
            if i in wanted or p in inside:
                inside.add(i)
                result.append((name, self.clip.node_names[p] if p >= 0 else None))
        return result

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        rows = [self.clip.frame_index(int(f)) for f in frames]
        index = [self.clip.node_index(n) for n in nodes]
        return self.evaluated_positions()[np.ix_(rows, index)]

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        wanted = set(nodes)
        spread = np.ptp(self.clip.channels, axis=0) if self.clip.n_frames else \
            np.zeros(self.clip.n_channels)
        return [c for c, s in zip(self.clip.channel_names, spread, strict=True)
                if c.rpartition(".")[0] in wanted and s > 0]

    def channel_values(self, channels: Sequence[str], first: int, last: int,
                       beneath: bool = False) -> np.ndarray:
        columns = [self._column(c) for c in channels]
        # the rows asked for only (a pose read is one frame of what may be a long take)
        values = self.evaluated_channels(not beneath, self.clip.frame_index(first),
                                         self.clip.frame_index(last) + 1)
        return values[:, columns]

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The clip under ``roots`` over the range with the propagated edits (not muted) on
        it; the reduction layers are left out."""
        self.hierarchy(roots)  # its message for an unknown root
        clip = self.clip
        if any(layer.edit and not layer.muted for layer in self._layers):
            clip = clip.with_channels(self.evaluated_channels(False))
        return clip.subtrees(roots or self.clip.root_names).sub_range(first, last)

    # ------------------------------------------------------------------ layers
    def write_curves(self, curves: KeyedCurves, layer: str,
                     replacing: Sequence[LayerHandle] = ()) -> LayerHandle:
        # (replacing: the clip's layers are kept apart from it; nothing reads through them)
        first, last = int(curves.frames[0]), int(curves.frames[-1])
        rows = np.arange(self.clip.frame_index(first), self.clip.frame_index(last) + 1)
        keep = np.flatnonzero(curves.animated)
        columns = np.array([self._column(curves.channel_names[c]) for c in keep], dtype=int)
        values = curves.dense()[:, keep]
        handle = LayerHandle(self._unique(layer), "override", token=object())
        self._layers.append(_Layer(handle, columns, rows, values, curves=curves))
        self._notify("layers")
        return handle

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float, edit: bool = False) -> LayerHandle:
        rows = np.array([self.clip.frame_index(int(f)) for f in frames], dtype=int)
        columns = np.array([self._column(c) for c in channels], dtype=int)
        handle = LayerHandle(self._unique(layer), "additive", token=object())
        self._layers.append(_Layer(handle, columns, rows, np.asarray(residual, float),
                                   weight=float(weight), edit=edit))
        self._notify("layers")
        return handle

    def write_sparse(self, keys: Mapping[str, tuple[np.ndarray, np.ndarray]], layer: str,
                     weight: float) -> LayerHandle:
        """Linear keys per channel in an additive layer (see :class:`sp_core.host.SparseLayers`);
        evaluated on every frame of the clip."""
        sparse = sparse_keys(keys)
        names = list(sparse)
        columns = np.array([self._column(n) for n in names], dtype=int)
        rows = np.arange(self.clip.n_frames)
        values = np.zeros((len(rows), len(names)))
        for i, name in enumerate(names):
            values[:, i] = np.interp(self.clip.frames, *sparse[name])
        handle = LayerHandle(self._unique(layer), "additive", token=object())
        self._layers.append(_Layer(handle, columns, rows, values, weight=float(weight)))
        self.sparse_keys[handle.name] = sparse
        self._notify("layers")
        return handle

    def remove_layer(self, handle: LayerHandle) -> None:
        try:
            layer = self._layer(handle)
        except HostError:  # an undo took it away: removed already (the Host contract)
            return
        # (by identity: a layer's == would compare its arrays)
        self._layers = [kept for kept in self._layers if kept is not layer]
        self._notify("layers")

    @property
    def layers(self) -> list[LayerHandle]:
        return [layer.handle for layer in self._layers]

    def _layer(self, handle: LayerHandle) -> _Layer:
        for layer in self._layers:
            if layer.handle.token is handle.token:
                return layer
        raise HostError(f"no layer {handle.name!r}")

    def set_muted(self, handle: LayerHandle, muted: bool) -> None:
        """Leave a layer out of what the scene shows (and :meth:`save_bvh` writes), or take it
        in again: the standalone window's layer toggles (a residual layer at full weight gives
        back the original; muted, the reduced motion shows)."""
        self._layer(handle).muted = bool(muted)
        self._notify("layers")

    def is_muted(self, handle: LayerHandle) -> bool:
        return self._layer(handle).muted

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        """All-or-nothing: if the block fails, the layers are as before it; if it succeeds,
        :meth:`undo` takes it back as one step."""
        saved = copy.copy(self._layers)
        try:
            yield
        except BaseException:
            self._layers = saved
            self._notify("layers")
            raise
        self._undo.append((label, saved))

    def undo(self) -> str:
        """Take back the last undo chunk; returns its label."""
        if not self._undo:
            raise HostError("nothing to undo")
        label, self._layers = self._undo.pop()
        self._notify("layers")
        return label

    # ------------------------------------------------------------------ preview
    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        self.preview = [int(f) for f in frames]
        self.preview_labels = list(labels) if labels is not None else None
        self._notify("preview")

    def clear_preview(self) -> None:
        self.preview = []
        self.preview_labels = None
        self._notify("preview")

    def show_ghosts(self, frames: Sequence[int]) -> None:
        self.preview_keyframes(frames)

    # ------------------------------------------------------------------ results
    def evaluated_channels(self, reductions: bool = True, start: int = 0,
                           stop: int | None = None) -> np.ndarray:
        """(stop - start, n_channels): rows start..stop - 1 (default all) of the clip with every
        layer not muted applied (what the scene shows); without ``reductions``, the propagated
        edits' layers only."""
        values = self.clip.channels[start:stop].copy()
        stop = start + len(values)
        for layer in self._layers:
            if layer.muted or not (reductions or layer.edit):
                continue
            inside = (layer.rows >= start) & (layer.rows < stop)
            block = np.ix_(layer.rows[inside] - start, layer.columns)
            if layer.handle.kind == "override":
                values[block] = layer.values[inside]
            else:
                values[block] += layer.weight * layer.values[inside]
        return values

    def evaluated_positions(self) -> np.ndarray:
        """(n_frames, n_nodes, 3) world positions of :meth:`evaluated_channels`."""
        if not self._layers:
            return self.clip.positions
        return self.clip.forward_kinematics(self.evaluated_channels())

    def save_bvh(self, path: str | Path) -> None:
        """Write the evaluated scene (every layer not muted applied) as a BVH."""
        write_bvh(self.clip.with_channels(self.evaluated_channels()), path)

    # ------------------------------------------------------------------ helpers
    def _column(self, channel: str) -> int:
        try:
            return self.clip.channel_names.index(channel)
        except ValueError:
            raise ClipError(f"no channel {channel!r} in {self.source}") from None

    def _unique(self, name: str) -> str:
        taken = {layer.handle.name for layer in self._layers}
        unique, n = name, 2
        while unique in taken:
            unique = f"{name}{n}"
            n += 1
        return unique

    def _notify(self, event: str) -> None:
        for listener in list(self.listeners):
            listener(event)
