"""MayaHost: the Host protocol over ``maya.cmds`` (Maya 2025+).

Facts used (../shared/reference/HOST_APIS.md):

- Times are frames in the scene's UI time unit (``currentUnit -time``); ``getAttr -time``
  evaluates in context, without scrubbing the UI. Values from ``getAttr`` are in UI units
  (degrees or radians, cm or m...), world matrices in internal cm (translation in elements
  12..14, row-vector convention).
- Apply never edits the original curves: it creates an override layer and keys the layer's own
  curve for each plug (``animLayer -findCurveForPlug``); ``setKeyframe -animLayer`` would
  back-solve the composite. Tangents are fixed, unweighted (one-third handles) unless the fit is
  weighted, with angles and weights in (frames, UI value units) from :mod:`sp_core.tangents`.
- The residual goes into an additive layer with per-component rotation accumulation, keyed on
  every frame with linear tangents, so base + override + residual is the original.
- Everything one Apply writes is inside one undo chunk; if anything fails the chunk is closed and
  undone, so nothing is left behind.

Maya's ``cmds`` is imported lazily so that ``import maya_plugin`` works outside Maya.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import SalientPosesError
from sp_core.host import HostError, LayerHandle, LazyModule, host_step
from sp_core.tangents import to_maya_angle_weight

#: Maya attribute ↔ the engine's channel attribute.
ATTRIBUTES = {"translateX": "Xposition", "translateY": "Yposition", "translateZ": "Zposition",
              "rotateX": "Xrotation", "rotateY": "Yrotation", "rotateZ": "Zrotation"}
ENGINE_ATTRIBUTES = {v: k for k, v in ATTRIBUTES.items()}
#: ``rotateOrder`` enum → the engine's Euler order (Maya "xyz" applies X first: R = Rz·Ry·Rx).
ROTATE_ORDERS = ("ZYX", "XZY", "YXZ", "YZX", "ZXY", "XYZ")
_TIME_UNITS = {"game": 15.0, "film": 24.0, "pal": 25.0, "ntsc": 30.0, "show": 48.0,
               "palf": 50.0, "ntscf": 60.0, "millisec": 1000.0, "sec": 1.0}
_NTSC = {"23.976": 24000 / 1001, "29.97": 30000 / 1001, "47.952": 48000 / 1001,
         "59.94": 60000 / 1001, "119.88": 120000 / 1001}
_CM_PER_UNIT = {"mm": 0.1, "cm": 1.0, "m": 100.0, "km": 1e5, "in": 2.54, "ft": 30.48,
                "yd": 91.44, "mi": 160934.4}
_DEGREES_PER_UNIT = {"deg": 1.0, "degree": 1.0, "rad": 180.0 / np.pi, "radian": 180.0 / np.pi,
                     "min": 1.0 / 60.0, "sec": 1.0 / 3600.0}
QUATERNION_MODES = ("quaternion", "quaternionSlerp", "quaternionSquad")


def fps_from_unit(unit: str) -> float:
    """Frames per second of a Maya time unit name (``'film'``, ``'ntsc'``, ``'120fps'``,
    ``'29.97fps'``, ``'29.97df'``...)."""
    if unit in _TIME_UNITS:
        return _TIME_UNITS[unit]
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(fps|df)", unit)
    if not match:
        raise HostError(f"reading the scene frame rate: unknown Maya time unit {unit!r}")
    return _NTSC.get(match.group(1), float(match.group(1)))


if TYPE_CHECKING:  # mypy checks every call against maya-stubs
    from maya import cmds
else:
    cmds = LazyModule("maya.cmds")


def _names(result: object) -> list[str]:
    """A cmds query result (None, one name or a list of names) as a list of names."""
    if result is None or result is False:
        return []
    if isinstance(result, str):
        return [result]
    if isinstance(result, list | tuple):
        return [str(item) for item in result]
    raise HostError(f"unexpected answer from Maya: {result!r}")


class MayaHost:
    """The current Maya scene as a Salient Poses host.

    Attributes
    ----------
    skipped : dict of str to str
        Animated plugs Apply leaves alone, with the reason (locked, not keyable).
    """

    name = "Maya"

    def __init__(self) -> None:
        self.skipped: dict[str, str] = {}
        self._preview: list[int] = []

    # ------------------------------------------------------------------ units and time
    @property
    def fps(self) -> float:
        with host_step("reading the scene frame rate"):
            return fps_from_unit(str(cmds.currentUnit(query=True, time=True)))

    def _cm_per_unit(self) -> float:
        unit = str(cmds.currentUnit(query=True, linear=True))
        if unit not in _CM_PER_UNIT:
            raise HostError(f"reading the scene units: unknown linear unit {unit!r}")
        return _CM_PER_UNIT[unit]

    def _degrees_per_unit(self) -> float:
        unit = str(cmds.currentUnit(query=True, angle=True))
        if unit not in _DEGREES_PER_UNIT:
            raise HostError(f"reading the scene units: unknown angle unit {unit!r}")
        return _DEGREES_PER_UNIT[unit]

    def playback_range(self) -> tuple[int, int]:
        with host_step("reading the playback range"):
            first = float(cmds.playbackOptions(query=True, minTime=True))
            last = float(cmds.playbackOptions(query=True, maxTime=True))
        return int(np.ceil(first - 1e-6)), int(np.floor(last + 1e-6))

    def current_frame(self) -> int:
        with host_step("reading the current frame"):
            return int(round(float(cmds.currentTime(query=True))))

    def set_current_frame(self, frame: int) -> None:
        with host_step(f"going to frame {frame}"):
            cmds.currentTime(frame)

    # ------------------------------------------------------------------ scene structure
    def selected_nodes(self) -> list[str]:
        with host_step("reading the selection"):
            return list(cmds.ls(selection=True, type="transform") or [])

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        with host_step("reading the hierarchy"):
            if not roots:
                joints = cmds.ls(type="joint") or []
                roots = [j for j in joints if not (cmds.listRelatives(j, parent=True,
                                                                      type="joint") or [])]
            result: list[tuple[str, str | None]] = []
            seen: set[str] = set()
            for root in roots:
                if not cmds.objExists(root):
                    raise HostError(f"reading the hierarchy: no node {root!r} in the scene")
                queue: list[tuple[str, str | None]] = [(root, None)]
                while queue:
                    node, parent = queue.pop(0)
                    if node in seen:
                        continue
                    seen.add(node)
                    result.append((node, parent))
                    children = cmds.listRelatives(node, children=True, type="transform") or []
                    queue.extend((child, node) for child in children)
            return result

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        scale = 1.0 / self._cm_per_unit()
        out = np.empty((len(frames), len(nodes), 3))
        for j, node in enumerate(nodes):
            with host_step(f"reading the world position of {node}"):
                for i, frame in enumerate(frames):
                    matrix = cmds.getAttr(f"{node}.worldMatrix[0]", time=frame)
                    out[i, j] = np.asarray(matrix, dtype=float)[12:15] * scale
        return out

    def _plug_state(self, plug: str) -> tuple[bool, bool, bool]:
        """(animated, keyable, locked) of a plug."""
        animated = bool(cmds.keyframe(plug, query=True, keyframeCount=True))
        keyable = bool(cmds.getAttr(plug, keyable=True))
        locked = bool(cmds.getAttr(plug, lock=True))
        return animated, keyable, locked

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        result = []
        for node in nodes:
            for attribute in ATTRIBUTES:
                plug = f"{node}.{attribute}"
                with host_step(f"reading {plug}"):
                    animated, keyable, locked = self._plug_state(plug)
                if animated and keyable and not locked:
                    result.append(plug)
                elif animated:
                    self.skipped[plug] = "locked" if locked else "not keyable"
        return result

    def channel_values(self, channels: Sequence[str], first: int, last: int) -> np.ndarray:
        frames = range(first, last + 1)
        out = np.empty((len(frames), len(channels)))
        degrees = self._degrees_per_unit()
        for c, plug in enumerate(channels):
            scale = degrees if ".rotate" in plug else 1.0
            with host_step(f"reading {plug}"):
                out[:, c] = [float(cmds.getAttr(plug, time=f)) * scale for f in frames]
        return out

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The transforms under ``roots`` with translate and rotate as channels (composite
        values, UI units, rotations in degrees), joint orients and rotate orders."""
        nodes = self.hierarchy(roots)
        names = [n for n, _ in nodes]
        index = {n: i for i, n in enumerate(names)}
        offsets, orients, channel_names, plugs = [], [], [], []
        self.skipped.clear()
        quaternion = []
        for node, _parent in nodes:
            with host_step(f"reading the transform of {node}"):
                offsets.append(np.asarray(cmds.getAttr(f"{node}.translate", time=first),
                                          dtype=float).reshape(3))
                orient = np.zeros(3)
                if cmds.objectType(node) == "joint":
                    orient = np.asarray(cmds.getAttr(f"{node}.jointOrient"),
                                        dtype=float).reshape(3) * self._degrees_per_unit()
                # jointOrient is applied X, then Y, then Z (like rotateOrder xyz)
                orients.append(Rotation.from_euler("ZYX", orient[::-1], degrees=True)
                               .as_matrix())
                order = ROTATE_ORDERS[int(cmds.getAttr(f"{node}.rotateOrder"))]
                for axis in "XYZ":
                    channel_names.append(f"{node}.{axis}position")
                    plugs.append(f"{node}.translate{axis}")
                for axis in order:
                    channel_names.append(f"{node}.{axis}rotation")
                    plugs.append(f"{node}.rotate{axis}")
                for axis in "XYZ":
                    plug = f"{node}.rotate{axis}"
                    for curve in _names(cmds.keyframe(plug, query=True, name=True)):
                        mode = str(cmds.rotationInterpolation(curve, query=True))
                        if mode in QUATERNION_MODES:
                            quaternion.append(f"{plug} ({mode})")
            for plug in plugs[-6:]:
                with host_step(f"reading {plug}"):
                    animated, keyable, locked = self._plug_state(plug)
                if animated and (locked or not keyable):
                    self.skipped[plug] = "locked" if locked else "not keyable"
        if quaternion:
            raise HostError("these rotation curves use quaternion interpolation, which ignores "
                            "per-channel tangents; set them to Euler first (Graph Editor: Curves "
                            "> Change Rotation Interp): " + ", ".join(quaternion))
        values = self.channel_values(plugs, first, last)
        parents = [index[p] if p is not None else -1 for _, p in nodes]
        return Clip(names, parents, np.array(offsets), [False] * len(names), channel_names,
                    values, self.fps, first_frame=first, name=", ".join(roots),
                    orients=np.array(orients))

    # ------------------------------------------------------------------ writing
    def _layer(self, name: str, override: bool) -> str:
        layer = str(cmds.animLayer(name, override=override))
        if not override:
            # per component (Euler) accumulation: base + residual adds channel by channel
            cmds.setAttr(f"{layer}.rotationAccumulationMode", 0)  # type: ignore[arg-type]
            # (maya-stubs types every setAttr argument as str; Maya takes the number)
        return layer

    def _layer_curve(self, layer: str, plug: str) -> str:
        cmds.animLayer(layer, edit=True, attribute=plug)
        curves = _names(cmds.animLayer(layer, query=True, findCurveForPlug=plug))
        if not curves:
            raise HostError(f"adding {plug} to layer {layer}: Maya created no curve for it")
        return str(curves[0])

    def write_curves(self, curves: KeyedCurves, layer: str) -> LayerHandle:
        degrees = self._degrees_per_unit()
        with host_step(f"creating override layer {layer!r}"):
            created = self._layer(layer, override=True)
        weighted = curves.weighted
        for c, channel in enumerate(curves.channel_names):
            plug = self.plug_for(channel)
            if not curves.animated[c] or plug in self.skipped:
                continue
            scale = 1.0 / degrees if ".rotate" in plug else 1.0
            with host_step(f"keying {plug} in layer {created!r}"):
                curve = self._layer_curve(created, plug)
                for frame, value in zip(curves.frames, curves.values[:, c], strict=True):
                    cmds.setKeyframe(curve, time=int(frame), value=float(value * scale))
                cmds.keyTangent(curve, edit=True, lock=False)
                if weighted:
                    cmds.keyTangent(curve, edit=True, weightedTangents=True)
                    cmds.keyTangent(curve, edit=True, weightLock=False)
                handles_in = curves.in_handles[:, c] * [1.0, scale]
                handles_out = curves.out_handles[:, c] * [1.0, scale]
                in_angle, in_weight = to_maya_angle_weight(handles_in, incoming=True)
                out_angle, out_weight = to_maya_angle_weight(handles_out, incoming=False)
                for k, frame in enumerate(curves.frames):
                    flags: dict[str, Any] = dict(inAngle=float(in_angle[k]),
                                                 outAngle=float(out_angle[k]))
                    if weighted:
                        flags.update(inWeight=float(in_weight[k]),
                                     outWeight=float(out_weight[k]))
                    cmds.keyTangent(curve, edit=True, time=(int(frame), int(frame)),
                                    absolute=True, inTangentType="fixed",
                                    outTangentType="fixed", **flags)
                for frame in curves.breakdown_frames:  # Maya's own breakdown keys
                    cmds.keyframe(curve, edit=True, time=(frame, frame), breakdown=True)
        return LayerHandle(created, "override", token=created)

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float) -> LayerHandle:
        degrees = self._degrees_per_unit()
        with host_step(f"creating additive layer {layer!r}"):
            created = self._layer(layer, override=False)
            cmds.animLayer(created, edit=True, weight=float(weight))
        for c, channel in enumerate(channels):
            plug = self.plug_for(channel)
            if plug in self.skipped:
                continue
            scale = 1.0 / degrees if ".rotate" in plug else 1.0
            with host_step(f"keying the residual of {plug} in layer {created!r}"):
                curve = self._layer_curve(created, plug)
                for frame, value in zip(frames, residual[:, c], strict=True):
                    cmds.setKeyframe(curve, time=int(frame), value=float(value * scale))
                cmds.keyTangent(curve, edit=True, inTangentType="linear",
                                outTangentType="linear")
        return LayerHandle(created, "additive", token=created)

    def remove_layer(self, handle: LayerHandle) -> None:
        with host_step(f"deleting layer {handle.name!r}"):
            if cmds.objExists(str(handle.token)):
                cmds.delete(str(handle.token))

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        """One undo step; if the block raises, everything it did is undone."""
        cmds.undoInfo(openChunk=True, chunkName=label)
        try:
            yield
        except BaseException:
            cmds.undoInfo(closeChunk=True)
            cmds.undo()
            raise
        else:
            cmds.undoInfo(closeChunk=True)

    # ------------------------------------------------------------------ preview
    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        """Keyframe markers on the time slider (Maya 2023+ custom drawing; nothing in batch);
        breakdowns in another colour."""
        self._preview = [int(f) for f in frames]
        from maya_plugin import preview

        preview.show(self._preview, self.fps, labels)

    def clear_preview(self) -> None:
        self._preview = []
        from maya_plugin import preview

        preview.clear()

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def plug_for(channel: str) -> str:
        """The Maya plug of an engine channel (``hips.Xrotation`` → ``hips.rotateX``)."""
        node, _, attribute = channel.rpartition(".")
        if attribute in ENGINE_ATTRIBUTES:
            return f"{node}.{ENGINE_ATTRIBUTES[attribute]}"
        raise SalientPosesError(f"channel {channel!r} is not a translate or rotate channel")
