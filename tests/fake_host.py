"""FakeHost: a Host that records every call, rolls back failed undo chunks and can fail."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.host import LayerHandle


class FakeHost:
    """Scene = a clip; layers = a list; every call is appended to ``calls``.

    ``fail_on`` names a method that raises ``RuntimeError("fake host failure")``.
    """

    name = "Fake"

    def __init__(self, clip: Clip, fail_on: str | None = None) -> None:
        self.clip = clip
        self.fail_on = fail_on
        self.calls: list[tuple] = []
        self.previews: list[list[int]] = []
        self.layers: list[dict] = []
        self.undo_chunks: list[str] = []
        self.open_chunks = 0
        self.frame = clip.first_frame

    def _call(self, method: str, *args: object) -> None:
        self.calls.append((method, *args))
        if method == self.fail_on:
            raise RuntimeError("fake host failure")

    @property
    def fps(self) -> float:
        return self.clip.fps

    def playback_range(self) -> tuple[int, int]:
        self._call("playback_range")
        return self.clip.first_frame, self.clip.last_frame

    def current_frame(self) -> int:
        return self.frame

    def set_current_frame(self, frame: int) -> None:
        self.frame = frame

    def selected_nodes(self) -> list[str]:
        self._call("selected_nodes")
        return [self.clip.node_names[0]]

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        names = self.clip.node_names
        return [(n, names[p] if p >= 0 else None) for n, p in zip(names, self.clip.parents,
                                                                   strict=True)]

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        rows = [self.clip.frame_index(f) for f in frames]
        return self.clip.positions[np.ix_(rows, [self.clip.node_index(n) for n in nodes])]

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        return list(self.clip.channel_names)

    def channel_values(self, channels: Sequence[str], first: int, last: int,
                       beneath: bool = False) -> np.ndarray:
        columns = [self.clip.channel_names.index(c) for c in channels]
        return self.clip.sub_range(first, last).channels[:, columns]

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        self._call("motion", tuple(roots), first, last)
        return self.clip.sub_range(first, last)

    def write_curves(self, curves: KeyedCurves, layer: str,
                     replacing: Sequence[LayerHandle] = ()) -> LayerHandle:
        self._call("write_curves", curves, layer)
        handle = LayerHandle(layer, "override", token=object())
        self.layers.append({"handle": handle, "curves": curves, "chunk": self.open_chunks})
        return handle

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float, edit: bool = False) -> LayerHandle:
        self._call("write_residual", list(channels), frames, residual, layer, weight)
        handle = LayerHandle(layer, "additive", token=object())
        self.layers.append({"handle": handle, "residual": residual, "weight": weight,
                            "channels": list(channels), "chunk": self.open_chunks})
        return handle

    def remove_layer(self, handle: LayerHandle) -> None:
        self._call("remove_layer", handle)
        self.layers = [layer for layer in self.layers if layer["handle"].token is not
                       handle.token]

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        self.undo_chunks.append(label)
        saved = list(self.layers)
        self.open_chunks += 1
        try:
            yield
        except BaseException:
            self.layers = saved
            raise
        finally:
            self.open_chunks -= 1

    def preview_keyframes(self, frames: Sequence[int], labels=None) -> None:
        self._call("preview_keyframes", list(frames))
        self.previews.append(list(frames))
        self.preview_labels = None if labels is None else list(labels)

    def clear_preview(self) -> None:
        self._call("clear_preview")
