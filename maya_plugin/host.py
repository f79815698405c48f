"""MayaHost: the Host protocol on Maya's Python API 2.0 (``maya.api.OpenMaya``, Maya 2025+).

How it talks to Maya (every call is backed in tests/fake_maya/FACTS.md):

- **Time and units, once**: frames are in the scene's UI time unit (``MTime.uiUnit()``; an
  ``MTime`` without a unit would be film, 24 fps); the API reads and writes internal units
  (cm, radians, seconds), the engine works in UI linear units and degrees. Conversions happen
  in :meth:`MayaHost._units` and nowhere else.
- **Reading**: one ``MDGContextGuard`` per frame and one ``worldMatrix[0]`` read per joint per
  frame (plus ``parentMatrix[0]`` of the roots); no time-slider scrubbing, no call per plug
  per frame. Local channels come from the matrices (``L = P⁻¹ · W``, minus the static joint
  orient), unwrapped from the plugs' own values at the first frame
  (:func:`sp_core.euler.unwrap_euler_from`). Long reads show a progress window with Esc.
- **Writing**: each layer is created with ``animLayer``, its plugs added with ``animLayer -e
  -attribute`` and keyed once with ``setKeyframe -animLayer`` (that is what creates the layer's
  curve for a plug); then the registered command ``salientPosesWriteCurves`` (plug-in file
  ``module/plug-ins/salientPoses.py``) writes every curve in bulk with ``MFnAnimCurve`` and an
  ``MAnimCurveChange``, so it is undoable. All of it runs inside one ``undoInfo`` chunk: one
  undo step, and on any failure the chunk is undone (nothing left behind). Residual and
  corrective layers are additive with per-component rotation accumulation; their curves get
  linear keys (the residual on every frame, each corrective curve on its own few frames, held
  outside them by Maya's default constant infinity).
"""

from __future__ import annotations

import contextlib
import time as _time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import SalientPosesError
from sp_core.euler import unwrap_euler_from
from sp_core.host import (
    HostError,
    LayerHandle,
    LazyModule,
    ended_at_zero,
    height_unread,
    host_step,
    muted,
    sparse_keys,
)
from sp_core.tangents import to_maya_xy

if TYPE_CHECKING:  # mypy checks every call against maya-stubs
    from maya import cmds
    from maya.api import OpenMaya as om
    from maya.api import OpenMayaAnim as oma
else:
    cmds = LazyModule("maya.cmds")
    om = LazyModule("maya.api.OpenMaya")
    oma = LazyModule("maya.api.OpenMayaAnim")

#: Maya attribute ↔ the engine's channel attribute.
ATTRIBUTES = {"translateX": "Xposition", "translateY": "Yposition", "translateZ": "Zposition",
              "rotateX": "Xrotation", "rotateY": "Yrotation", "rotateZ": "Zrotation"}
ENGINE_ATTRIBUTES = {v: k for k, v in ATTRIBUTES.items()}
#: ``rotateOrder`` enum → scipy intrinsic sequence (Maya "xyz" applies X first: R = Rz·Ry·Rx).
ROTATE_ORDERS = ("ZYX", "XZY", "YXZ", "YZX", "ZXY", "XYZ")
QUATERNION_MODES = ("quaternion", "quaternionSlerp", "quaternionSquad")
#: The plug-in file the module loads; it registers :data:`COMMAND`.
PLUGIN_FILE = Path(__file__).resolve().parent / "module" / "plug-ins" / "salientPoses.py"
COMMAND = "salientPosesWriteCurves"
#: Tangents locked (one direction for in and out) per fitting mode.
LOCKED_MODES = {"unified": True, "weighted": True, "broken": False, "smooth": False}
#: Reads slower than this (seconds) show a progress window that Esc cancels.
PROGRESS_AFTER = 1.0


class Cancelled(SalientPosesError):
    """The user pressed Esc during a long read."""


#: Transform attributes that move a node's local matrix away from T · R (column vectors, with
#: jointOrient and rotateAxis handled apart), as (attribute, what it is, components); a plain
#: transform's matrix is ``SP⁻¹·S·SH·SP·ST·RP⁻¹·RA·R·RP·RT·T`` (row vectors; transform node
#: reference), a joint's ``S·RO·R·JO·IS·T`` (joint node reference), so pivots and shear
#: concern plain transforms only. The scale pivot is harmless without a scale or shear.
PIVOT_ATTRIBUTES = (("rotatePivot", "a rotate pivot", "XYZ"),
                    ("rotatePivotTranslate", "a rotate pivot translate", "XYZ"),
                    ("scalePivotTranslate", "a scale pivot translate", "XYZ"),
                    ("shear", "a shear", ("XY", "XZ", "YZ")))


def _refuse_offsets(name: str, fn: Any, joint: bool) -> None:
    """Refuse a node whose local matrix is not its translate and rotate (with its joint
    orient): the analysis reads the channels from the local matrix and Apply keys them, so a
    pivot, a shear, an offset parent matrix (Maya 2020+) or a node that does not inherit its
    parent's transform would key other values than the ones it has (the node jumps)."""
    def values(attribute: str, components: Sequence[str]) -> np.ndarray:
        return np.array([fn.findPlug(f"{attribute}{c}", False).asDouble() for c in components])

    if not joint:
        for attribute, what, components in PIVOT_ATTRIBUTES:
            if np.any(np.abs(values(attribute, components)) > 1e-9):
                raise HostError(f"{name} has {what} ({attribute}); zero it or leave the node "
                                "out of the analysis")
        scaled = np.any(np.abs(values("scale", "XYZ") - 1.0) > 1e-9)
        if scaled and np.any(np.abs(values("scalePivot", "XYZ")) > 1e-9):
            raise HostError(f"{name} has a scale pivot (scalePivot) and a scale; zero the pivot "
                            "or leave the node out of the analysis")
    if not fn.findPlug("inheritsTransform", False).asBool():
        raise HostError(f"{name} does not inherit its parent's transform (inheritsTransform is "
                        "off); turn it on or leave the node out of the analysis")
    if fn.hasAttribute("offsetParentMatrix"):
        offset = om.MFnMatrixData(fn.findPlug("offsetParentMatrix", False).asMObject()).matrix()
        if np.any(np.abs(np.array(tuple(offset)) - np.eye(4).ravel()) > 1e-9):
            raise HostError(f"{name} has an offset parent matrix (offsetParentMatrix); bake it "
                            "into its channels or leave the node out of the analysis")


#: The preference of the rotation interpolation of new curves (Preferences > Animation >
#: Rotation Interpolation, New Curve Default; 1: Independent Euler), which scripted keys
#: follow too (Epic's ART exporter sets it around a scripted bake).
NEW_CURVE_ROTATION = "rotationInterpolationDefault"


@contextmanager
def option_var(name: str, value: int) -> Iterator[None]:
    """The optionVar (preference) ``name`` is ``value`` inside the block and as it was after
    (removed if it did not exist)."""
    saved = cmds.optionVar(query=name) if cmds.optionVar(exists=name) else None
    cmds.optionVar(intValue=(name, value))
    try:
        yield
    finally:
        if saved is None:
            cmds.optionVar(remove=name)
        else:
            cmds.optionVar(intValue=(name, int(cast(int, saved))))


def _euler_curves() -> contextlib.AbstractContextManager[None]:
    """Curves created in the block have independent Euler rotation interpolation whatever the
    user's New Curve Default (a quaternion default would not follow the per-channel tangents);
    the preference is put back after."""
    return option_var(NEW_CURVE_ROTATION, 1)


def _set_mute(layer: str, on: bool) -> None:
    try:
        cmds.animLayer(layer, edit=True, mute=on)
    except RuntimeError:  # (gone while muted: nothing to turn back on)
        if on:
            raise


def _free_name(name: str) -> str:
    """``name``, or the first free one with its trailing number raised, as Maya numbers names
    (``salientPoses2``, ``salientPoses3``…; whether ``animLayer`` renames a new layer whose
    name is taken or refuses it is not documented)."""
    stem = name.rstrip("0123456789")
    number = int(name[len(stem):] or 1)
    unique = name
    while cmds.objExists(unique):
        number += 1
        unique = f"{stem}{number}"
    return unique


def _rotation_mode(curve: str) -> str:
    """A rotate curve's rotation interpolation (``none``: independent Euler), asked one curve
    per query: the only form documented by use (animx), whatever Maya answers for several."""
    return next(iter(_names(cmds.rotationInterpolation(curve, query=True, convert=True))), "")


def _names(result: object) -> list[str]:
    """A cmds query result (None, one name or a list of names) as a list of names."""
    if result is None or result is False:
        return []
    if isinstance(result, str):
        return [result]
    if isinstance(result, list | tuple):
        return [str(item) for item in result]
    raise HostError(f"unexpected answer from Maya: {result!r}")


class _Progress:
    """A progress window (interactive Maya only) that appears once a read has taken more than
    :data:`PROGRESS_AFTER` seconds; Esc cancels."""

    def __init__(self, title: str, total: int) -> None:
        self.title, self.total = title, max(total, 1)
        self.start = _time.perf_counter()
        self.shown = False
        self.interactive = not cmds.about(batch=True)
        self.every = max(1, self.total // 200)  # at most ~200 updates (and Esc checks)

    def step(self, done: int) -> None:
        if not self.interactive or done % self.every:
            return
        percent = int(100 * done / self.total)
        if not self.shown:
            if _time.perf_counter() - self.start < PROGRESS_AFTER:
                return
            cmds.progressWindow(title="Salient Poses", progress=percent, status=self.title,
                                isInterruptable=True)
            self.shown = True
        else:
            cmds.progressWindow(edit=True, progress=percent)
        if cmds.progressWindow(query=True, isCancelled=True):
            self.close()
            raise Cancelled(f"{self.title}: cancelled (Esc); nothing was changed")

    def close(self) -> None:
        if self.shown:
            cmds.progressWindow(endProgress=True)
            self.shown = False


class MayaHost:
    """The current Maya scene as a Salient Poses host.

    Attributes
    ----------
    skipped : dict of str to str
        Animated plugs Apply leaves alone, with the reason (locked, not keyable, driven).
    notes : list of str
        What the last write wants the user to know.
    """

    name = "Maya"
    #: The names of the reduction layers written in this Maya session, by any MayaHost (the
    #: panel's, a reopened panel's, the TD API's): an Analyze reads the motion under them.
    _made: ClassVar[set[str]] = set()

    def __init__(self) -> None:
        self.skipped: dict[str, str] = {}
        self.notes: list[str] = []
        self._preview: list[int] = []
        self._changed = False  # something undoable happened inside the open undo chunk

    # ------------------------------------------------------------------ units and time
    @staticmethod
    def _units() -> tuple[int, float, float]:
        """(UI time unit, frames per second, cm per UI linear unit) — read once per call."""
        unit = om.MTime.uiUnit()
        fps = om.MTime(1.0, om.MTime.kSeconds).asUnits(unit)
        cm = om.MDistance(1.0, om.MDistance.uiUnit()).asUnits(om.MDistance.kCentimeters)
        return unit, float(fps), float(cm)

    @property
    def fps(self) -> float:
        with host_step("reading the scene frame rate"):
            return self._units()[1]

    def playback_range(self) -> tuple[int, int]:
        with host_step("reading the playback range"):
            unit = om.MTime.uiUnit()
            first = oma.MAnimControl.minTime().asUnits(unit)
            last = oma.MAnimControl.maxTime().asUnits(unit)
        return int(np.ceil(first - 1e-6)), int(np.floor(last + 1e-6))

    def current_frame(self) -> int:
        with host_step("reading the current frame"):
            return int(round(oma.MAnimControl.currentTime().asUnits(om.MTime.uiUnit())))

    def set_current_frame(self, frame: int) -> None:
        with host_step(f"going to frame {frame}"):
            oma.MAnimControl.setCurrentTime(om.MTime(float(frame), om.MTime.uiUnit()))

    # ------------------------------------------------------------------ scene structure
    @staticmethod
    def _object(name: str) -> Any:
        selection = om.MSelectionList()
        try:
            selection.add(name)
        except RuntimeError as exc:
            raise HostError(f"no node {name!r} in the scene") from exc
        return selection.getDependNode(0)

    def _plug(self, node: str, attribute: str) -> Any:
        return om.MFnDependencyNode(self._object(node)).findPlug(attribute, False)

    def selected_nodes(self) -> list[str]:
        with host_step("reading the selection"):
            selection = om.MGlobal.getActiveSelectionList()
            result = []
            for i in range(selection.length()):
                obj = selection.getDependNode(i)
                if obj.hasFn(om.MFn.kTransform):
                    result.append(om.MFnDagNode(obj).partialPathName())
            return result

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        with host_step("reading the hierarchy"):
            if not roots:
                joints = [str(j) for j in cmds.ls(type="joint") or []]
                roots = [j for j in joints if not self._joint_parent(j)]
            listed = {om.MFnDagNode(self._object(root)).partialPathName() for root in roots}
            result: list[tuple[str, str | None]] = []
            seen: set[str] = set()
            for root in roots:
                if self._under(root, listed):  # read with the selected node above it
                    continue
                queue: list[tuple[Any, str | None]] = [(self._object(root), None)]
                while queue:
                    obj, parent = queue.pop(0)
                    dag = om.MFnDagNode(obj)
                    name = dag.partialPathName()
                    if name in seen:
                        continue
                    seen.add(name)
                    result.append((name, parent))
                    for i in range(dag.childCount()):
                        child = dag.child(i)
                        if child.hasFn(om.MFn.kTransform):
                            queue.append((child, name))
            return result

    def _under(self, name: str, listed: set[str]) -> bool:
        """Whether a transform above node ``name`` is one of ``listed``."""
        dag = om.MFnDagNode(self._object(name))
        while dag.parentCount() > 0 and dag.parent(0).hasFn(om.MFn.kTransform):
            dag = om.MFnDagNode(dag.parent(0))
            if dag.partialPathName() in listed:
                return True
        return False

    def _joint_parent(self, name: str) -> bool:
        dag = om.MFnDagNode(self._object(name))
        return dag.parentCount() > 0 and dag.parent(0).hasFn(om.MFn.kJoint)

    # ------------------------------------------------------------------ reading
    def _matrices(self, plugs: Sequence[tuple[str, Any]], frames: Sequence[int],
                  what: str) -> np.ndarray:
        """(n_frames, n_plugs, 4, 4) row-vector matrices of matrix plugs, one DG context per
        frame (internal cm)."""
        from maya.api.MDGContextGuard import MDGContextGuard

        unit = om.MTime.uiUnit()
        out = np.empty((len(frames), len(plugs), 16))
        progress = _Progress(what, len(frames))
        try:
            for i, frame in enumerate(frames):
                with MDGContextGuard(om.MDGContext(om.MTime(float(frame), unit))):
                    for j, (_name, plug) in enumerate(plugs):
                        out[i, j] = tuple(om.MFnMatrixData(plug.asMObject()).matrix())
                progress.step(i + 1)
        finally:
            progress.close()
        bad = ~np.isfinite(out).all(axis=2)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise HostError(f"{what}: {plugs[j][0]} is not a number at frame {frames[i]} "
                            "(NaN keys?); fix the animation and try again")
        return out.reshape(len(frames), len(plugs), 4, 4)

    def _world_plugs(self, nodes: Sequence[str]) -> list[tuple[str, Any]]:
        return [(node, self._plug(node, "worldMatrix").elementByLogicalIndex(0))
                for node in nodes]

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        with host_step("reading world positions"):
            _unit, _fps, cm = self._units()
            matrices = self._matrices(self._world_plugs(nodes), frames,
                                      "reading world positions")
        return matrices[:, :, 3, :3] / cm

    def _plug_state(self, node: str, attribute: str) -> tuple[bool, str | None, str | None]:
        """(animated, reason to leave it alone or None, driving anim curve or None)."""
        plug = self._plug(node, attribute)
        animated = bool(oma.MAnimUtil.isAnimated(plug))
        curve = None
        reason = None
        driven = plug
        if not plug.isDestination and plug.isChild and plug.parent().isDestination:
            # a connection into the compound (decomposeMatrix.outputRotate → rotate) drives
            # every child, which is no destination itself (Autodesk's Render Setup code
            # checks the parent the same way)
            driven = plug.parent()
        if driven.isDestination:
            source = driven.source()
            kind = om.MFnDependencyNode(source.node()).typeName
            if kind.startswith("animCurve"):
                curve = om.MFnDependencyNode(source.node()).name()
            elif not kind.startswith("animBlendNode"):
                animated = True
                reason = f"driven by {om.MFnDependencyNode(source.node()).name()} ({kind})"
        if reason is None and plug.isLocked:
            reason = "locked"
        elif reason is None and not plug.isKeyable:
            reason = "not keyable"
        return animated, reason, curve

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        result = []
        for node in nodes:
            for attribute in ATTRIBUTES:
                plug = f"{node}.{attribute}"
                with host_step(f"reading {plug}"):
                    animated, reason, _curve = self._plug_state(node, attribute)
                if animated and reason is None:
                    result.append(plug)
                elif animated and reason is not None:
                    self.skipped[plug] = reason
        return result

    def _local(self, nodes: Sequence[tuple[str, str | None]], first: int, last: int
               ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
        """Local channels of ``nodes`` (node, parent among ``nodes`` or None) over the range.

        Returns
        -------
        translate, rotate : (n_frames, n_nodes, 3) float64
            UI linear units; degrees about X, Y, Z.
        orders : list of str
            Each node's scipy rotation sequence.
        orients : (n_nodes, 3, 3) float64
            Joint orients (identity for plain transforms).
        """
        from maya.api.MDGContextGuard import MDGContextGuard

        unit, _fps, cm = self._units()
        names = [n for n, _ in nodes]
        index = {n: i for i, n in enumerate(names)}
        orders, orients, start = [], [], []
        with MDGContextGuard(om.MDGContext(om.MTime(float(first), unit))):
            for name in names:
                with host_step(f"reading the transform of {name}"):
                    fn = om.MFnDependencyNode(self._object(name))
                    orders.append(ROTATE_ORDERS[fn.findPlug("rotateOrder", False).asInt()])
                    angles = [fn.findPlug(f"jointOrient{a}", False).asDouble()
                              if self._object(name).hasFn(om.MFn.kJoint) else 0.0
                              for a in "XYZ"]
                    axis = [fn.findPlug(f"rotateAxis{a}", False).asDouble() for a in "XYZ"]
                    if np.any(np.abs(axis) > 1e-12):
                        raise HostError(f"{name} has a rotate axis (rotateAxis); zero it or "
                                        "leave the node out of the analysis")
                    _refuse_offsets(name, fn, self._object(name).hasFn(om.MFn.kJoint))
                    # jointOrient applies X, then Y, then Z (like rotateOrder xyz)
                    orients.append(Rotation.from_euler("ZYX", angles[::-1]).as_matrix())
                    start.append([np.degrees(fn.findPlug(f"rotate{a}", False).asDouble())
                                  for a in "XYZ"])
        roots = [n for n, p in nodes if p is None]
        plugs = self._world_plugs(names) + [
            (f"{n} (parent)", self._plug(n, "parentMatrix").elementByLogicalIndex(0))
            for n in roots]
        frames = list(range(first, last + 1))
        matrices = np.swapaxes(self._matrices(plugs, frames, "reading the animation"), 2, 3)
        world = matrices[:, :len(names)]  # column-vector convention from here on
        parent_world = np.empty_like(world)
        for j, (name, parent) in enumerate(nodes):
            parent_world[:, j] = (world[:, index[parent]] if parent is not None
                                  else matrices[:, len(names) + roots.index(name)])
        local = np.linalg.solve(parent_world, world)
        translate = local[:, :, :3, 3] / cm
        rotation = local[:, :, :3, :3]
        rotation = rotation / np.linalg.norm(rotation, axis=2, keepdims=True)  # drop scale
        rotate = np.empty((len(frames), len(names), 3))
        for j, order in enumerate(orders):
            own = np.swapaxes(orients[j], 0, 1) @ rotation[:, j]
            sequence = Rotation.from_matrix(own).as_euler(order, degrees=True)
            axes = ["XYZ".index(a) for a in order]
            unwrapped = unwrap_euler_from(sequence, np.asarray(start[j])[axes])
            rotate[:, j, axes] = unwrapped
        return translate, rotate, orders, np.array(orients)

    def channel_values(self, channels: Sequence[str], first: int, last: int,
                       beneath: bool = False) -> np.ndarray:
        """Accepts engine names (``hips.Xrotation``) or plugs (``hips.rotateX``)."""
        if beneath:
            with self._without_made():
                return self.channel_values(channels, first, last)
        wanted = []
        for channel in channels:
            node, _, attribute = channel.rpartition(".")
            wanted.append((node, ATTRIBUTES.get(attribute, attribute)))
        nodes = list(dict.fromkeys(node for node, _ in wanted))
        with host_step(f"reading {len(channels)} channels"):
            # each node read with its own parentMatrix: exact whatever the hierarchy
            translate, rotate, _orders, _orients = self._local([(n, None) for n in nodes],
                                                               first, last)
        out = np.empty((last - first + 1, len(channels)))
        for c, (node, attribute) in enumerate(wanted):
            axis = "XYZ".index(attribute[0])
            source = translate if attribute.endswith("position") else rotate
            out[:, c] = source[:, nodes.index(node), axis]
        return out

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The transforms under ``roots`` with translate and rotate as channels (composite
        values without the reduction layers written in this Maya session, UI units, rotations
        in degrees), joint orients and rotate orders."""
        with self._without_made():
            return self._motion(roots, first, last)

    @contextmanager
    def _without_made(self) -> Iterator[None]:
        """The reduction layers of :attr:`_made` that play muted for the block, then on: an
        Analyze after Apply analyses the motion, not its reduction. The switches stay off the
        undo queue (undo suspended without flushing it): reading is no step to undo."""
        layers = set(cmds.ls(type="animLayer") or [])  # (a name reused by another node: not)
        made = [name for name in sorted(self._made & layers)
                if not cmds.animLayer(name, query=True, mute=True)]
        if not made:
            yield
            return
        on = bool(cmds.undoInfo(query=True, state=True))
        if on:
            cmds.undoInfo(stateWithoutFlush=False)
        try:
            with muted(made, _set_mute):
                yield
        finally:  # undo back on whatever turning a layer back on raised
            if on:
                cmds.undoInfo(stateWithoutFlush=True)

    def _motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        nodes = self.hierarchy(roots)
        if not nodes:
            raise HostError("nothing to analyse: select a joint (or the root of a skeleton)")
        names = [n for n, _ in nodes]
        index = {n: i for i, n in enumerate(names)}
        self.skipped.clear()
        self.notes = []
        rotate_curves: dict[str, str] = {}
        held = []  # the channels of the plugs Apply leaves alone (locked, driven)
        for node in names:
            for attribute in ATTRIBUTES:
                with host_step(f"reading {node}.{attribute}"):
                    animated, reason, curve = self._plug_state(node, attribute)
                if animated and reason is not None:
                    self.skipped[f"{node}.{attribute}"] = reason
                    held.append(f"{node}.{ATTRIBUTES[attribute]}")
                if curve is not None and attribute.startswith("rotate"):
                    rotate_curves[curve] = f"{node}.{attribute}"
        if rotate_curves:
            with host_step("reading the rotation interpolation of the rotate curves"):
                modes = [_rotation_mode(curve) for curve in rotate_curves]
            quaternion = [f"{plug} ({mode})" for plug, mode in zip(rotate_curves.values(),
                                                                   modes, strict=True)
                          if mode in QUATERNION_MODES]
            if quaternion:
                raise HostError("these rotation curves use quaternion interpolation, which "
                                "does not follow each channel's own curve; set them to Euler "
                                "first (Graph Editor: Curves > Change Rotation Interp): "
                                + ", ".join(quaternion))
        with host_step("reading the animation"):
            translate, rotate, orders, orients = self._local(nodes, first, last)
            _unit, fps, _cm = self._units()
        channel_names, columns = [], []
        for j, node in enumerate(names):
            for axis in "XYZ":
                channel_names.append(f"{node}.{axis}position")
                columns.append(translate[:, j, "XYZ".index(axis)])
            for axis in orders[j]:
                channel_names.append(f"{node}.{axis}rotation")
                columns.append(rotate[:, j, "XYZ".index(axis)])
        parents = [index[p] if p is not None else -1 for _, p in nodes]
        return Clip(names, parents, translate[0], [False] * len(names), channel_names,
                    np.stack(columns, axis=1), fps, first_frame=first, name=", ".join(roots),
                    orients=orients, character_height=self._character_height(nodes, first),
                    held_channels=held)

    def _character_height(self, nodes: Sequence[tuple[str, str | None]], first: int
                          ) -> float | None:
        """The height of the whole skeleton a selected joint is part of (scene units, measured
        as a clip of it measures it), so that a limb's errors are in the body's millimetres;
        None when every root is a skeleton's top (the clip is the whole skeleton)."""
        tops: list[str] = []
        for name, parent in nodes:
            if parent is not None:
                continue
            dag = om.MFnDagNode(self._object(name))
            while dag.parentCount() > 0 and dag.parent(0).hasFn(om.MFn.kJoint):
                dag = om.MFnDagNode(dag.parent(0))
            tops.append(dag.partialPathName())
        if tops == [n for n, p in nodes if p is None]:
            return None
        try:  # a joint the analysis does not read may have what it refuses (a rotate axis)
            whole = self.hierarchy(list(dict.fromkeys(tops)))
            translate, _rotate, _orders, orients = self._local(whole, first, first)
            index = {n: i for i, (n, _) in enumerate(whole)}
            return Clip([n for n, _ in whole],
                        [index[p] if p is not None else -1 for _, p in whole],
                        translate[0], [False] * len(whole), [], np.zeros((1, 0)),
                        24.0, orients=orients).height()  # (any rate: a rest height)
        except SalientPosesError as exc:
            self.notes.append(height_unread(exc))
            return None

    # ------------------------------------------------------------------ writing
    def _ensure_plugin(self) -> None:
        if not cmds.pluginInfo(str(PLUGIN_FILE), query=True, loaded=True):
            cmds.loadPlugin(str(PLUGIN_FILE), quiet=True)

    def _layer_curves(self, layer: str, plugs: list[str], first: float | Sequence[float]
                      ) -> list[str]:
        """Add ``plugs`` to ``layer`` and key each once on it, at ``first`` (one time for all,
        or one per plug: a time the plug's own keys start at, so the key is replaced whatever
        ``addKeys`` does with existing keys): that creates the layer's own curve for the plug,
        which ``findCurveForPlug`` then returns."""
        cmds.animLayer(layer, edit=True, attribute=plugs)
        times = [float(first)] * len(plugs) if isinstance(first, float | int) \
            else [float(t) for t in first]
        with _euler_curves():
            for time in sorted(set(times)):
                # maya-stubs types -time as int; Maya takes any time in the UI unit
                cmds.setKeyframe(*[p for p, t in zip(plugs, times, strict=True) if t == time],
                                 animLayer=layer, time=time)  # type: ignore[arg-type]
        curves = []
        for plug in plugs:
            found = _names(cmds.animLayer(layer, query=True, findCurveForPlug=plug))
            if not found:
                raise HostError(f"keying {plug} in layer {layer}: Maya created no curve for it")
            curves.append(found[0])
        for plug, curve in zip(plugs, curves, strict=True):
            if ".rotate" in plug:
                mode = _rotation_mode(curve)
                if mode in QUATERNION_MODES:
                    raise HostError(f"keying {plug} in layer {layer}: Maya made its curve "
                                    f"{curve} with {mode} interpolation, which does not "
                                    "follow the per-channel tangents written")
        return curves

    def _write(self, jobs: list[dict[str, Any]]) -> None:
        """Run the undoable plug-in command on prepared curve data."""
        from maya_plugin import command

        self._ensure_plugin()
        command.PENDING[:] = jobs
        try:
            getattr(cmds, COMMAND)()
        finally:
            command.PENDING.clear()

    def _plugs_to_write(self, channels: Sequence[str], animated: np.ndarray | None
                        ) -> list[tuple[int, str]]:
        result = []
        for c, channel in enumerate(channels):
            plug = self.plug_for(channel) if channel.rpartition(".")[2] in ENGINE_ATTRIBUTES \
                else channel
            if (animated is None or animated[c]) and plug not in self.skipped:
                result.append((c, plug))
        if not result:
            raise HostError("nothing to write: every animated channel is locked, driven or "
                            "not keyable")
        return result

    def write_curves(self, curves: KeyedCurves, layer: str,
                     replacing: Sequence[LayerHandle] = ()) -> LayerHandle:
        # (replacing: nothing is read; outside the range the weight lets the layers below play)
        _unit, fps, cm = self._units()
        targets = self._plugs_to_write(curves.channel_names, curves.animated)
        self.notes = []  # (this Apply's)
        with host_step(f"creating override layer {layer!r}"):
            # passthrough (Maya's default, said anyway): at weight 0 the layers below play,
            # which the weight keyed to the range relies on (without it the layer is opaque)
            created = str(cmds.animLayer(_free_name(layer), override=True, passthrough=True))
            self._changed = True  # (after: undoing an empty chunk undoes the user's last step)
            self._made.add(created)
        with host_step(f"creating the curves of layer {created!r}"):
            names = self._layer_curves(created, [p for _, p in targets],
                                       float(curves.frames[0]))
        locked = LOCKED_MODES.get(curves.tangents, False)
        weighted = curves.weighted
        breakdowns = [k for k, f in enumerate(curves.frames) if int(f) in
                      set(curves.breakdown_frames)]
        jobs = []
        for (c, plug), name in zip(targets, names, strict=True):
            scale = np.pi / 180.0 if ".rotate" in plug else cm  # engine units -> internal
            handles_in = curves.in_handles[:, c] * [1.0, scale]
            handles_out = curves.out_handles[:, c] * [1.0, scale]
            xy_in = to_maya_xy(handles_in, fps, incoming=True)
            xy_out = to_maya_xy(handles_out, fps, incoming=False)
            jobs.append({"curve": name, "plug": plug, "frames": curves.frames.astype(float),
                         "values": curves.values[:, c] * scale, "tangents": "fixed",
                         "in_xy": xy_in, "out_xy": xy_out, "locked": locked,
                         "weighted": weighted, "breakdowns": breakdowns})
        with host_step(f"writing the curves of layer {created!r}"):
            self._write(jobs)
        # (the keys span the analysed range: its first and last frames are always keys)
        first, last = float(curves.frames[0]), float(curves.frames[-1])
        with host_step(f"keying the weight of layer {created!r} to frames {first:g}-{last:g}"):
            keyed = self._weight_on_range(created, first, last)
        if keyed < 4:
            # (the layer is right on the range: said, not failed)
            self.notes.append(
                f"Maya set {keyed} of the 4 keys that limit the weight of layer {created} to "
                f"frames {first:g}-{last:g} (a locked BaseAnimation layer, or keying into selected "
                "layers only, can refuse them): outside those frames the layer shows their "
                "end poses; key its weight to 0 there yourself.")
        return LayerHandle(created, "override", token=created)

    @staticmethod
    def _weight_on_range(layer: str, first: float, last: float) -> int:
        """Key the override layer's weight 1 on ``first``..``last`` and 0 outside, stepped;
        returns how many of the 4 keys Maya set. Its curves hold their end keys' values
        outside the keys, which the layer would show over the motion before and after an
        analysed part of the take; at weight 0 an override layer with passthrough lets the
        layers below it play. (Between ``last`` and ``last + 1`` the layer still holds its
        end: whole frames are exact.)"""
        keyed = 0
        for time, weight in ((first - 1.0, 0.0), (first, 1.0), (last, 1.0), (last + 1.0, 0.0)):
            try:
                # maya-stubs types -time as int; Maya takes any time in the UI unit
                keyed += int(cmds.setKeyframe(
                    layer, attribute="weight", time=time,  # type: ignore[arg-type]
                    value=weight, outTangentType="step") or 0)
            except RuntimeError:  # (what Maya raises for a command that failed)
                pass
        return keyed

    def _additive_layer(self, layer: str, weight: float, edit: bool = False) -> str:
        """A new additive layer that accumulates rotations per component (Euler); ``edit``:
        the artist's (reads of the motion include it)."""
        with host_step(f"creating additive layer {layer!r}"):
            created = str(cmds.animLayer(_free_name(layer), override=False))
            self._changed = True
            if not edit:
                self._made.add(created)
            # per component (Euler) accumulation, set before the layer gets content
            cmds.setAttr(f"{created}.rotationAccumulationMode", 0)  # type: ignore[arg-type]
            # (maya-stubs types every setAttr value as str; Maya takes the number)
            cmds.animLayer(created, edit=True, weight=float(weight))
        return created

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float, edit: bool = False) -> LayerHandle:
        _unit, _fps, cm = self._units()
        targets = self._plugs_to_write(channels, None)
        created = self._additive_layer(layer, weight, edit)
        with host_step(f"creating the curves of layer {created!r}"):
            names = self._layer_curves(created, [p for _, p in targets], float(frames[0]))
        frames, residual = ended_at_zero(frames, residual)  # (nothing outside the range)
        jobs = []
        for (c, plug), name in zip(targets, names, strict=True):
            scale = np.pi / 180.0 if ".rotate" in plug else cm
            jobs.append({"curve": name, "plug": plug, "frames": frames,
                         "values": residual[:, c] * scale, "tangents": "linear"})
        with host_step(f"writing the residual curves of layer {created!r}"):
            self._write(jobs)
        return LayerHandle(created, "additive", token=created)

    def write_sparse(self, keys: Mapping[str, tuple[np.ndarray, np.ndarray]], layer: str,
                     weight: float) -> LayerHandle:
        """Each channel's few keys (host frames, engine units) as linear keys of its own curve
        in a new additive layer; Maya's curves hold their end values outside the keys
        (constant pre/post infinity is the default)."""
        _unit, _fps, cm = self._units()
        sparse = sparse_keys(keys)
        channels = list(sparse)
        targets = self._plugs_to_write(channels, None)
        created = self._additive_layer(layer, weight)
        with host_step(f"creating the curves of layer {created!r}"):
            names = self._layer_curves(created, [p for _, p in targets],
                                       [float(sparse[channels[c]][0][0]) for c, _ in targets])
        jobs = []
        for (c, plug), name in zip(targets, names, strict=True):
            scale = np.pi / 180.0 if ".rotate" in plug else cm
            frames, values = sparse[channels[c]]
            jobs.append({"curve": name, "plug": plug, "frames": frames,
                         "values": values * scale, "tangents": "linear"})
        with host_step(f"writing the corrective curves of layer {created!r}"):
            self._write(jobs)
        return LayerHandle(created, "additive", token=created)

    def remove_layer(self, handle: LayerHandle) -> None:
        with host_step(f"deleting layer {handle.name!r}"):
            if cmds.objExists(str(handle.token)):
                # the curve of the weight keyed to the range goes with the layer (only an
                # animation curve: whatever else a user wired to the weight stays)
                curves = cmds.listConnections(f"{handle.token}.weight", source=True,
                                              destination=False, type="animCurve") or []
                if curves:
                    cmds.delete(*curves)
                cmds.delete(str(handle.token))
                self._changed = True

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        """One undo step; if the block raises, everything it did is undone (and only that: an
        empty chunk is not undone, which would undo the user's previous action)."""
        self._changed = False
        # with undo off (a script's or a batch's choice) the roll back below would undo
        # nothing and leave half an Apply: undo is on for the chunk, the queue kept as it is
        off = not cmds.undoInfo(query=True, state=True)
        if off:
            cmds.undoInfo(stateWithoutFlush=True)
        try:
            cmds.undoInfo(openChunk=True, chunkName=label)
            try:
                yield
            except BaseException:
                cmds.undoInfo(closeChunk=True)
                if self._changed:
                    cmds.undo()
                raise
            else:
                cmds.undoInfo(closeChunk=True)
        finally:
            if off:
                # off as the script left it, the way Maya turns it off: with the queue
                # flushed (the chunk stayed on it, holding the curves' old values, until a
                # file was opened: memory a batch with undo off did not expect to spend)
                cmds.undoInfo(state=False)

    # ------------------------------------------------------------------ preview
    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        """Keyframe markers on the time slider (Maya 2023+ custom drawing; nothing in batch);
        breakdowns in another colour."""
        self._preview = [int(f) for f in frames]
        from maya_plugin import preview

        preview.show(self._preview, labels)

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
