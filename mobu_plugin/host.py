"""MobuHost: the Host protocol over ``pyfbsdk`` (MotionBuilder 2025+).

Facts used (../shared/reference/HOST_APIS.md):

- Times are built from seconds (``FBTime.SetSecondDouble(frame / fps)``) so any rate works,
  including non-integer ones; frames stay absolute (a take at 1001 works).
- Values are read by going to each frame and evaluating the scene (``FBPlayerControl.Goto`` +
  ``FBScene.Evaluate``): local ``Translation``/``Rotation`` (degrees) and world positions
  (``GetVector(..., kModelTranslation, True)``); the current time is restored afterwards.
- FCurve keys: cubic interpolation, break tangent mode, clamping off, derivatives in value per
  second, tangent weights as fractions of the segment.
- Layers: MotionBuilder composes layer rotations as quaternions ("per layer"); the mode is read
  only from Python. An additive layer therefore cannot hold ``original − reduced`` Euler angles;
  it holds the rotation that turns the reduced pose into the original one (R_reduced⁻¹ ·
  R_original, as Euler angles in the node's order), which composes exactly at weight 100.
  Translations are per channel.
- There is no scripting undo for layer creation we rely on: "undo" is removing the created
  layers, which :meth:`MobuHost.undo_chunk` does when anything in the block fails.

``pyfbsdk`` is imported lazily so that ``import mobu_plugin`` works outside MotionBuilder.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import SalientPosesError
from sp_core.host import HostError, LayerHandle, LazyModule, host_step
from sp_core.tangents import to_mobu

if TYPE_CHECKING:  # mypy checks every call against motionbuilder-stubs
    import pyfbsdk as fb
else:
    fb = LazyModule("pyfbsdk")

#: ``FBModelRotationOrder`` value → the engine's Euler order (MotionBuilder "XYZ" rotates X
#: first: R = Rz·Ry·Rx).
ROTATE_ORDERS = {0: "ZYX", 1: "YZX", 2: "XZY", 3: "ZXY", 4: "YXZ", 5: "XYZ"}
PROPERTIES = {"position": "Translation", "rotation": "Rotation"}
MARK = "SalientPoses"
MARK_COLOURS = {"keypose": (0.96, 0.70, 0.42), "breakdown": (0.43, 0.66, 0.86)}


class MobuHost:
    """The current MotionBuilder scene (current take) as a Salient Poses host.

    Attributes
    ----------
    skipped : dict of str to str
        Animated channels Apply leaves alone, with the reason (locked).
    """

    name = "MotionBuilder"

    def __init__(self) -> None:
        self.skipped: dict[str, str] = {}
        self._read: tuple[int, dict[str, np.ndarray]] = (0, {})
        self._created: list[str] = []
        self.notes: list[str] = []

    # ------------------------------------------------------------------ time
    @property
    def fps(self) -> float:
        with host_step("reading the transport frame rate"):
            return float(fb.FBPlayerControl().GetTransportFpsValue())

    def time_of(self, frame: float) -> Any:
        """An ``FBTime`` for a (possibly fractional) frame at the transport rate."""
        time = fb.FBTime()
        time.SetSecondDouble(float(frame) / self.fps)
        return time

    def _frame(self, time: Any) -> int:
        return int(round(time.GetSecondDouble() * self.fps))

    def playback_range(self) -> tuple[int, int]:
        with host_step("reading the take's time span"):
            span = fb.FBSystem().CurrentTake.LocalTimeSpan
            return self._frame(span.GetStart()), self._frame(span.GetStop())

    def current_frame(self) -> int:
        with host_step("reading the current time"):
            return self._frame(fb.FBSystem().LocalTime)

    def set_current_frame(self, frame: int) -> None:
        with host_step(f"going to frame {frame}"):
            fb.FBPlayerControl().Goto(self.time_of(frame))

    # ------------------------------------------------------------------ scene structure
    def _model(self, name: str) -> Any:
        model = fb.FBFindModelByLabelName(name)
        if model is None:
            raise HostError(f"finding model {name!r}: not in the scene")
        return model

    def selected_nodes(self) -> list[str]:
        with host_step("reading the selection"):
            models = fb.FBModelList()
            fb.FBGetSelectedModels(models)
            return [m.LongName for m in models]

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        with host_step("reading the hierarchy"):
            if not roots:
                roots = [m.LongName for m in fb.FBSystem().Scene.RootModel.Children]
            result: list[tuple[str, str | None]] = []
            for root in roots:
                queue: list[tuple[Any, str | None]] = [(self._model(root), None)]
                while queue:
                    model, parent = queue.pop(0)
                    result.append((model.LongName, parent))
                    queue.extend((child, model.LongName) for child in model.Children)
            return result

    @contextmanager
    def _frames(self, frames: Sequence[int]) -> Iterator[Iterator[int]]:
        """Go to each frame and evaluate the scene; restore the current time afterwards."""
        player = fb.FBPlayerControl()
        scene = fb.FBSystem().Scene
        start = fb.FBSystem().LocalTime

        def visit() -> Iterator[int]:
            for frame in frames:
                player.Goto(self.time_of(frame))
                scene.Evaluate()
                yield frame

        try:
            yield visit()
        finally:
            player.Goto(start)
            scene.Evaluate()

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        models = [self._model(n) for n in nodes]
        out = np.empty((len(frames), len(nodes), 3))
        vector = fb.FBVector3d()
        with host_step("reading world positions"), self._frames(frames) as visit:
            for i, _frame in enumerate(visit):
                for j, model in enumerate(models):
                    model.GetVector(vector, fb.FBModelTransformationType.kModelTranslation,
                                    True)
                    out[i, j] = [vector[0], vector[1], vector[2]]
        return out

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        result: list[str] = []
        for node in nodes:
            model = self._model(node)
            for kind, prop_name in PROPERTIES.items():
                prop = getattr(model, prop_name)
                if prop.IsAnimated():
                    result.extend(f"{node}.{axis}{kind}" for axis in "XYZ")
        return result

    def channel_values(self, channels: Sequence[str], first: int, last: int) -> np.ndarray:
        targets = []
        for channel in channels:
            node, _, attribute = channel.rpartition(".")
            axis, kind = "XYZ".index(attribute[0]), attribute[1:]
            targets.append((getattr(self._model(node), PROPERTIES[kind]), axis))
        frames = list(range(first, last + 1))
        out = np.empty((len(frames), len(channels)))
        with host_step("reading channel values"), self._frames(frames) as visit:
            for i, _frame in enumerate(visit):
                for c, (prop, axis) in enumerate(targets):
                    out[i, c] = prop.Data[axis]
        return out

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The models under ``roots``: Translation and Rotation (degrees) as channels,
        rotation orders and pre-rotations."""
        nodes = self.hierarchy(roots)
        names = [n for n, _ in nodes]
        index = {n: i for i, n in enumerate(names)}
        offsets, orients, channel_names = [], [], []
        self.skipped.clear()
        for node in names:
            with host_step(f"reading the transform of {node}"):
                model = self._model(node)
                offsets.append([model.Translation.Data[a] for a in range(3)])
                pre = np.zeros(3)
                if model.RotationActive:
                    pre = np.array([model.PreRotation[a] for a in range(3)])
                    post = np.array([model.PostRotation[a] for a in range(3)])
                    if np.any(np.abs(post) > 1e-9):
                        raise HostError(f"reading {node}: post-rotations are not supported "
                                        "yet; zero PostRotation or turn RotationActive off")
                orients.append(Rotation.from_euler("ZYX", pre[::-1], degrees=True)
                               .as_matrix())
                order = ROTATE_ORDERS.get(int(model.RotationOrder))
                if order is None:
                    raise HostError(f"reading {node}: spheric rotation order is not supported")
                channel_names += [f"{node}.{a}position" for a in "XYZ"]
                channel_names += [f"{node}.{a}rotation" for a in order]
                for kind, prop_name in PROPERTIES.items():
                    prop = getattr(model, prop_name)
                    for a in range(3):
                        if prop.IsAnimated() and (prop.IsLocked() or prop.IsMemberLocked(a)):
                            self.skipped[f"{node}.{'XYZ'[a]}{kind}"] = "locked"
        values = self.channel_values(channel_names, first, last)
        # the residual's rotations need these values once our layers change the composite
        self._read = (first, dict(zip(channel_names, values.T, strict=True)))
        parents = [index[p] if p is not None else -1 for _, p in nodes]
        return Clip(names, parents, np.array(offsets), [False] * len(names), channel_names,
                    values, self.fps, first_frame=first, name=", ".join(roots),
                    orients=np.array(orients))

    # ------------------------------------------------------------------ layers
    def _new_layer(self, name: str, mode: Any) -> tuple[Any, int]:
        take = fb.FBSystem().CurrentTake
        take.CreateNewLayer()
        index = take.GetLayerCount() - 1
        layer = take.GetLayer(index)
        layer.Name = name
        layer.LayerMode = mode
        self._created.append(name)
        return layer, index

    def _curve(self, node: str, kind: str, axis: int) -> Any:
        prop = getattr(self._model(node), PROPERTIES[kind])
        prop.SetAnimated(True)
        return prop.GetAnimationNode().Nodes[axis].FCurve

    @staticmethod
    def _split(channel: str) -> tuple[str, str, int]:
        node, _, attribute = channel.rpartition(".")
        return node, attribute[1:], "XYZ".index(attribute[0])

    def write_curves(self, curves: KeyedCurves, layer: str) -> LayerHandle:
        take = fb.FBSystem().CurrentTake
        fps = self.fps
        with host_step(f"creating override layer {layer!r}"):
            created, index = self._new_layer(layer, fb.FBLayerMode.kFBLayerModeOverride)
            take.SetCurrentLayer(index)
        spans = np.diff(curves.frames).astype(float)
        try:
            for c, channel in enumerate(curves.channel_names):
                if not curves.animated[c] or channel in self.skipped:
                    continue
                node, kind, axis = self._split(channel)
                with host_step(f"keying {channel} in layer {layer!r}"):
                    fcurve = self._curve(node, kind, axis)
                    # out handle of key k lies in segment k; in handle of key k in segment k-1
                    out_d, out_w = to_mobu(curves.out_handles[:-1, c], spans, fps)
                    in_d, in_w = to_mobu(curves.in_handles[1:, c], spans, fps)
                    unclamped = fb.FBTangentClampMode.kFBTangentClampModeNone
                    fcurve.EditBegin(curves.n_keys)
                    for k, frame in enumerate(curves.frames):
                        i = fcurve.KeyAdd(self.time_of(frame), float(curves.values[k, c]),
                                          fb.FBInterpolation.kFBInterpolationCubic,
                                          fb.FBTangentMode.kFBTangentModeBreak)
                        fcurve.KeySetTangentClampMode(i, unclamped)
                        fcurve.KeySetTangentBreak(i, True)
                        if k < curves.n_keys - 1:
                            fcurve.KeySetRightDerivative(i, float(out_d[k]))
                            fcurve.KeySetRightTangentWeight(i, float(out_w[k]))
                        if k > 0:
                            fcurve.KeySetLeftDerivative(i, float(in_d[k - 1]))
                            fcurve.KeySetLeftTangentWeight(i, float(in_w[k - 1]))
                    fcurve.EditEnd(curves.n_keys)
        finally:
            take.SetCurrentLayer(0)
        return LayerHandle(created.Name, "override", token=created.Name)

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float) -> LayerHandle:
        """Translations: original − reduced. Rotations: the per-frame rotation from the reduced
        pose to the original one (layers compose rotations as quaternions)."""
        take = fb.FBSystem().CurrentTake
        first, last = int(frames[0]), int(frames[-1])
        columns = {c: i for i, c in enumerate(channels)}
        self.notes = ["MotionBuilder composes layer rotations as quaternions, so the residual "
                      "layer holds each joint's turn from the reduced to the original pose "
                      "(exact at weight 100), not per-channel differences."]
        with host_step(f"creating additive layer {layer!r}"):
            created, index = self._new_layer(layer, fb.FBLayerMode.kFBLayerModeAdditive)
            created.Weight = 100.0 * float(weight)
            take.SetCurrentLayer(index)
        try:
            values = dict(zip(channels, residual.T, strict=True))
            nodes = sorted({self._split(c)[0] for c in channels})
            for node in nodes:
                rotations = [c for c in channels if c.startswith(node + ".")
                             and c.endswith("rotation")]
                if rotations:
                    values.update(self._rotation_residual(node, rotations, columns, residual,
                                                          first, last))
            for channel, curve_values in values.items():
                if channel in self.skipped:
                    continue
                node, kind, axis = self._split(channel)
                with host_step(f"keying the residual of {channel} in layer {layer!r}"):
                    fcurve = self._curve(node, kind, axis)
                    fcurve.EditBegin(len(frames))
                    for frame, value in zip(frames, curve_values, strict=True):
                        fcurve.KeyAdd(self.time_of(frame), float(value),
                                      fb.FBInterpolation.kFBInterpolationLinear)
                    fcurve.EditEnd(len(frames))
        finally:
            take.SetCurrentLayer(0)
        return LayerHandle(created.Name, "additive", token=created.Name)

    def _rotation_residual(self, node: str, rotations: list[str], columns: dict[str, int],
                           residual: np.ndarray, first: int, last: int
                           ) -> dict[str, np.ndarray]:
        """Euler angles (node order) of R_reduced⁻¹ · R_original on every frame."""
        model = self._model(node)
        order = ROTATE_ORDERS[int(model.RotationOrder)]
        every = [f"{node}.{a}rotation" for a in order]
        start, read = self._read
        if any(c not in read for c in every) or first < start \
                or last - start >= len(read[every[0]]):
            raise HostError(f"writing the residual of {node}: its motion over frames "
                            f"{first}..{last} was not read by this host")
        original = np.column_stack([read[c][first - start:last - start + 1] for c in every])
        delta = np.zeros_like(original)  # original − what the layers below now hold
        for j, channel in enumerate(every):
            if channel in columns and channel not in self.skipped:
                delta[:, j] = residual[:, columns[channel]]
        if any(c in self.skipped for c in every):
            # the turn needs all three angles; a locked axis cannot take its share
            self.skipped[f"{node}.rotation residual"] = "inexact: a rotation axis is locked"
        reduced = Rotation.from_euler(order, original - delta, degrees=True)
        turn = reduced.inv() * Rotation.from_euler(order, original, degrees=True)
        angles = turn.as_euler(order, degrees=True)
        return {channel: angles[:, j] for j, channel in enumerate(every)}

    def remove_layer(self, handle: LayerHandle) -> None:
        take = fb.FBSystem().CurrentTake
        with host_step(f"removing layer {handle.name!r}"):
            for index in range(take.GetLayerCount() - 1, 0, -1):
                if take.GetLayer(index).Name == handle.token:
                    take.RemoveLayer(index)
                    return
            raise HostError(f"removing layer {handle.name!r}: it is no longer in the take")

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        """If the block fails, every layer it created is removed again (all or nothing)."""
        self._created = []
        try:
            yield
        except BaseException:
            for name in reversed(self._created):
                try:
                    self.remove_layer(LayerHandle(name, "", token=name))
                except SalientPosesError:
                    pass
            raise
        finally:
            self._created = []

    # ------------------------------------------------------------------ preview
    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        """Time marks on the take's timeline (replacing earlier ones), named "SalientPoses" or,
        for layered selections, "SalientPoses keypose" / "SalientPoses breakdown" and coloured
        (MotionBuilder has no breakdown keys)."""
        self.clear_preview()
        take = fb.FBSystem().CurrentTake
        with host_step("adding time marks"):
            for i, frame in enumerate(frames):
                index = take.AddTimeMark(self.time_of(frame))
                label = labels[i] if labels is not None else None
                take.SetTimeMarkName(index, f"{MARK} {label}" if label else MARK)
                if label in MARK_COLOURS:
                    take.SetTimeMarkColor(index, fb.FBColor(*MARK_COLOURS[label]))

    def clear_preview(self) -> None:
        take = fb.FBSystem().CurrentTake
        with host_step("removing time marks"):
            for index in range(take.GetTimeMarkCount() - 1, -1, -1):
                name = take.GetTimeMarkName(index)
                if name == MARK or name.startswith(MARK + " "):
                    take.DeleteTimeMark(index)
