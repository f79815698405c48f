"""Fake ``maya.cmds``: the subset MayaHost uses, with Maya's documented semantics.

Scene state lives in :data:`scene` (reset with :func:`reset`). What is modelled, from Autodesk's
documentation and ../shared/reference/HOST_APIS.md:

- transforms and joints with translate, rotate (any rotateOrder), jointOrient; world matrices
  as Maya returns them (row-vector convention, translation in elements 12..14, internal cm);
- anim curves keyed in frames of the UI time unit; fixed tangents given as angle (degrees) and
  weight in (frames, value) units; unweighted curves are Hermite on tan(angle), weighted curves
  Bézier with handle = weight · (cos, sin); linear tangents; constant before and after the keys;
- animation layers: override (result = (1 - w) · below + w · layer) and additive
  (result = below + w · layer, per component), evaluated in creation order over the base curve;
- ``getAttr -time`` evaluates the composite; ``keyable`` and ``lock`` flags;
- undo chunks: ``undo()`` restores the scene as it was when the last closed chunk opened.
"""

from __future__ import annotations

import copy
from builtins import open as builtins_open
from dataclasses import dataclass, field

import numpy as np
from reference_bezier import bezier_at
from scipy.spatial.transform import Rotation

ORDERS = ("ZYX", "XZY", "YXZ", "YZX", "ZXY", "XYZ")  # rotateOrder enum -> column-vector order
_AXES = "XYZ"


@dataclass
class Curve:
    keys: dict[float, float] = field(default_factory=dict)
    in_angle: dict[float, float] = field(default_factory=dict)
    out_angle: dict[float, float] = field(default_factory=dict)
    in_weight: dict[float, float] = field(default_factory=dict)
    out_weight: dict[float, float] = field(default_factory=dict)
    linear: bool = True
    weighted: bool = False
    interpolation: str = "euler"
    breakdowns: set = field(default_factory=set)

    def evaluate(self, t: float) -> float:
        times = sorted(self.keys)
        if t <= times[0]:
            return self.keys[times[0]]
        if t >= times[-1]:
            return self.keys[times[-1]]
        k = int(np.searchsorted(times, t, side="right")) - 1
        t0, t1 = times[k], times[k + 1]
        v0, v1 = self.keys[t0], self.keys[t1]
        span = t1 - t0
        if self.linear:
            return v0 + (v1 - v0) * (t - t0) / span
        a0, a1 = np.radians(self.out_angle[t0]), np.radians(self.in_angle[t1])
        if not self.weighted:  # Hermite on the slopes, handles one third of the span
            u = (t - t0) / span
            m0, m1 = np.tan(a0) * span, np.tan(a1) * span
            return float((2 * u**3 - 3 * u**2 + 1) * v0 + (u**3 - 2 * u**2 + u) * m0
                         + (-2 * u**3 + 3 * u**2) * v1 + (u**3 - u**2) * m1)
        w0, w1 = self.out_weight[t0], self.in_weight[t1]
        return bezier_at([[t0, v0], [t0 + w0 * np.cos(a0), v0 + w0 * np.sin(a0)],
                          [t1 - w1 * np.cos(a1), v1 - w1 * np.sin(a1)], [t1, v1]], t)


@dataclass
class Node:
    parent: str | None
    kind: str
    values: dict[str, float]
    keyable: dict[str, bool] = field(default_factory=dict)
    locked: dict[str, bool] = field(default_factory=dict)
    orient: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotate_order: int = 0


@dataclass
class Layer:
    name: str
    override: bool
    weight: float = 1.0
    accumulation: int = 0
    mute: bool = False
    curves: dict[str, str] = field(default_factory=dict)  # plug -> curve name


@dataclass
class Scene:
    time_unit: str = "film"
    linear_unit: str = "cm"
    angle_unit: str = "deg"
    playback: tuple[float, float] = (1.0, 24.0)
    time: float = 1.0
    selection: list[str] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    curves: dict[str, Curve] = field(default_factory=dict)
    base: dict[str, str] = field(default_factory=dict)  # plug -> base curve
    layers: list[Layer] = field(default_factory=list)


scene = Scene()
_undo: list[Scene] = []
_open: list[Scene] = []
calls: list[str] = []


def reset() -> None:
    global scene
    scene = Scene()
    saved.clear()
    _undo.clear()
    _open.clear()
    calls.clear()


# ------------------------------------------------------------------------- building scenes
def create_node(name: str, parent: str | None = None, kind: str = "joint",
                translate=(0.0, 0.0, 0.0), rotate=(0.0, 0.0, 0.0), orient=(0.0, 0.0, 0.0),
                rotate_order: int = 0) -> None:
    values = {f"translate{a}": float(v) for a, v in zip(_AXES, translate, strict=True)}
    values.update({f"rotate{a}": float(v) for a, v in zip(_AXES, rotate, strict=True)})
    scene.nodes[name] = Node(parent, kind, values, orient=tuple(orient),
                             rotate_order=rotate_order)


def key_base(plug: str, frames, values) -> None:
    """Key the base animation of a plug (linear tangents, like dense mocap)."""
    name = f"{plug.replace('.', '_')}_base"
    scene.curves[name] = Curve(keys={float(f): float(v) for f, v in zip(frames, values,
                                                                        strict=True)})
    scene.base[plug] = name


def evaluate(plug: str, t: float) -> float:
    """The composite value of a plug at time t (base, then every layer in order)."""
    node, attribute = plug.split(".")
    value = (scene.curves[scene.base[plug]].evaluate(t) if plug in scene.base
             else scene.nodes[node].values[attribute])
    for layer in scene.layers:
        if plug not in layer.curves or layer.mute:
            continue
        curve = scene.curves[layer.curves[plug]]
        if not curve.keys:
            continue
        mine = curve.evaluate(t)
        value = ((1 - layer.weight) * value + layer.weight * mine if layer.override
                 else value + layer.weight * mine)
    return value


def _local(node_name: str, t: float) -> np.ndarray:
    node = scene.nodes[node_name]
    degrees = 180 / np.pi if scene.angle_unit == "rad" else 1.0
    angles = {a: evaluate(f"{node_name}.rotate{a}", t) * degrees for a in _AXES}
    order = ORDERS[node.rotate_order]
    rotate = Rotation.from_euler(order, [angles[a] for a in order], degrees=True).as_matrix()
    orient = Rotation.from_euler("ZYX", list(node.orient)[::-1], degrees=True).as_matrix()
    matrix = np.eye(4)
    matrix[:3, :3] = orient @ rotate
    matrix[:3, 3] = [evaluate(f"{node_name}.translate{a}", t) for a in _AXES]
    return matrix


def world_matrix(node_name: str, t: float) -> np.ndarray:
    """Column-vector world matrix (internal cm)."""
    matrix = _local(node_name, t)
    parent = scene.nodes[node_name].parent
    return matrix if parent is None else world_matrix(parent, t) @ matrix


# ------------------------------------------------------------------------- cmds
def currentUnit(query: bool = False, time=False, linear=False, angle=False) -> str:  # noqa: N802
    if not query:
        if isinstance(time, str):
            scene.time_unit = time
        return ""
    return scene.time_unit if time else scene.linear_unit if linear else scene.angle_unit


def playbackOptions(query: bool = False, minTime=False, maxTime=False) -> float:  # noqa: N802, N803
    if not query:
        scene.playback = (float(minTime), float(maxTime))
        return 0.0
    return scene.playback[0] if minTime else scene.playback[1]


saved: dict[str, Scene] = {}  # "files" on the fake disk
_name: list[str] = [""]


def file(path: str | None = None, newFile: bool = False, force: bool = False,  # noqa: A001, N803
         open: bool = False, rename: str | None = None, save: bool = False,  # noqa: A002
         type: str | None = None) -> str:  # noqa: A002
    global scene
    if newFile:
        scene = Scene()
    elif open:
        if path not in saved:
            raise RuntimeError(f"File not found: {path}")
        scene = copy.deepcopy(saved[path])
        _name[0] = str(path)
    elif rename is not None:
        _name[0] = rename
    elif save:
        saved[_name[0]] = copy.deepcopy(scene)
        with builtins_open(_name[0], "w") as handle:  # a marker file on the real disk
            handle.write(f"// fake {type} scene\n")
    return _name[0]


def select(*names: str, clear: bool = False) -> None:
    scene.selection = [] if clear else list(names)


def joint(name: str, position=(0.0, 0.0, 0.0), relative: bool = False) -> str:
    create_node(name, None, translate=position)
    return name


def parent(child: str, new_parent: str, relative: bool = False) -> list[str]:
    scene.nodes[child].parent = new_parent
    return [child]


def currentTime(value: float | None = None, query: bool = False) -> float:  # noqa: N802
    if not query and value is not None:
        scene.time = float(value)
    return scene.time


def about(batch: bool = False) -> bool:
    return True


def objExists(name: str) -> bool:  # noqa: N802
    return name in scene.nodes or any(layer.name == name for layer in scene.layers)


def objectType(name: str) -> str:  # noqa: N802
    return scene.nodes[name].kind


def ls(selection: bool = False, type: str | None = None) -> list[str]:  # noqa: A002
    if type == "animLayer":
        return [layer.name for layer in scene.layers]
    names = scene.selection if selection else list(scene.nodes)
    return [n for n in names if type in (None, "transform") or scene.nodes[n].kind == type]


def listRelatives(node: str, parent: bool = False, children: bool = False,  # noqa: N802
                  type: str | None = None) -> list[str] | None:  # noqa: A002
    if parent:
        p = scene.nodes[node].parent
        ok = p is not None and type in (None, "transform", scene.nodes[p].kind)
        return [p] if ok else None
    found = [n for n, v in scene.nodes.items() if v.parent == node
             and type in (None, "transform", v.kind)]
    return found or None


def getAttr(plug: str, time: float | None = None, keyable: bool = False,  # noqa: N802
            lock: bool = False):
    node_name, attribute = plug.split(".", 1)
    if node_name not in scene.nodes:
        for layer in scene.layers:
            if layer.name == node_name:
                return getattr(layer, {"weight": "weight",
                                       "rotationAccumulationMode": "accumulation"}[attribute])
        raise RuntimeError(f"No object matches name: {plug}")
    node = scene.nodes[node_name]
    if keyable:
        return node.keyable.get(attribute, True)
    if lock:
        return node.locked.get(attribute, False)
    t = scene.time if time is None else float(time)
    if attribute == "worldMatrix[0]":
        return list(world_matrix(node_name, t).T.reshape(-1))  # row-vector layout
    if attribute in ("translate", "rotate"):
        return [tuple(evaluate(f"{node_name}.{attribute}{a}", t) for a in _AXES)]
    if attribute == "jointOrient":
        return [tuple(node.orient)]
    if attribute == "rotateOrder":
        return node.rotate_order
    return evaluate(plug, t)


def setAttr(plug: str, *values: float, type: str | None = None) -> None:  # noqa: N802, A002
    node_name, attribute = plug.split(".", 1)
    if type == "double3":
        for axis, v in zip(_AXES, values, strict=True):
            setAttr(f"{plug}{axis}", v)
        return
    value = values[0]
    if attribute == "rotateOrder":
        scene.nodes[node_name].rotate_order = int(value)
        return
    for layer in scene.layers:
        if layer.name == node_name and attribute == "rotationAccumulationMode":
            layer.accumulation = int(value)
            return
    node = scene.nodes[node_name]
    if node.locked.get(attribute):
        raise RuntimeError(f"The attribute '{plug}' is locked or connected and cannot be "
                           "modified.")
    node.values[attribute] = float(value)


def keyframe(plug: str, query: bool = False, keyframeCount: bool = False,  # noqa: N803
             name: bool = False, edit: bool = False, time=None, breakdown: bool = False):
    if edit:  # plug is a curve here: mark breakdown keys
        if breakdown:
            scene.curves[plug].breakdowns.add(float(time[0]))
        return 1
    curves = [scene.base[plug]] if plug in scene.base else []
    curves += [layer.curves[plug] for layer in scene.layers if plug in layer.curves]
    if keyframeCount:
        return sum(len(scene.curves[c].keys) for c in curves)
    return curves or None


def rotationInterpolation(curve: str, query: bool = False) -> str:  # noqa: N802
    return scene.curves[curve].interpolation


def animLayer(name: str | None = None, edit: bool = False, query: bool = False,  # noqa: N802
              override: bool = False, attribute: str | None = None,
              findCurveForPlug: str | None = None, weight: float | None = None,  # noqa: N803
              mute: bool | None = None):
    calls.append(f"animLayer {name}")
    if query:
        layer = _find_layer(name)
        if findCurveForPlug is not None:
            return [layer.curves[findCurveForPlug]] if findCurveForPlug in layer.curves else None
        return layer.weight
    if edit:
        layer = _find_layer(name)
        if attribute is not None:
            node_name, attr = attribute.split(".")
            if scene.nodes[node_name].locked.get(attr):
                raise RuntimeError(f"{attribute} is locked")
            layer.curves.setdefault(attribute, f"{attribute.replace('.', '_')}_{layer.name}")
            scene.curves.setdefault(layer.curves[attribute], Curve())
        if weight is not None:
            layer.weight = float(weight)
        if mute is not None:
            layer.mute = bool(mute)
        return None
    unique, n = name or "animLayer1", 1
    while objExists(unique):
        n += 1
        unique = f"{name}{n}"
    scene.layers.append(Layer(unique, override))
    return unique


def _find_layer(name: str | None) -> Layer:
    for layer in scene.layers:
        if layer.name == name:
            return layer
    raise RuntimeError(f"animLayer: no layer {name!r}")


def setKeyframe(curve: str, time: float, value: float) -> int:  # noqa: N802
    calls.append("setKeyframe")
    if curve not in scene.curves:  # a plug: key its base curve (linear, like dense mocap)
        if curve not in scene.base:
            key_base(curve, [], [])
        curve = scene.base[curve]
    scene.curves[curve].keys[float(time)] = float(value)
    return 1


def keyTangent(curve: str, edit: bool = False, lock: bool | None = None,  # noqa: N802
               weightedTangents: bool | None = None, weightLock: bool | None = None,  # noqa: N803
               time: tuple[float, float] | None = None, absolute: bool = False,
               inAngle: float | None = None, outAngle: float | None = None,  # noqa: N803
               inWeight: float | None = None, outWeight: float | None = None,  # noqa: N803
               inTangentType: str | None = None,  # noqa: N803
               outTangentType: str | None = None) -> int:  # noqa: N803
    item = scene.curves[curve]
    if weightedTangents is not None:
        item.weighted = bool(weightedTangents)
    if inTangentType == "fixed" or outTangentType == "fixed":
        item.linear = False
    if inTangentType == "linear" and outTangentType == "linear" and time is None:
        item.linear = True
    if time is not None:
        t = float(time[0])
        for target, value in ((item.in_angle, inAngle), (item.out_angle, outAngle),
                              (item.in_weight, inWeight), (item.out_weight, outWeight)):
            if value is not None:
                target[t] = float(value)
    return 1


def delete(name: str) -> None:
    calls.append(f"delete {name}")
    layer = _find_layer(name)
    for curve in layer.curves.values():
        scene.curves.pop(curve, None)
    scene.layers.remove(layer)


def undoInfo(openChunk: bool = False, closeChunk: bool = False,  # noqa: N802, N803
             chunkName: str = "") -> None:  # noqa: N803
    calls.append("openChunk" if openChunk else "closeChunk")
    if openChunk:
        _open.append(copy.deepcopy(scene))
    elif closeChunk:
        _undo.append(_open.pop())


def undo() -> None:
    global scene
    calls.append("undo")
    scene = _undo.pop()
