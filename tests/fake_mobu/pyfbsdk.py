"""Fake ``pyfbsdk``: the subset MobuHost uses, with MotionBuilder's documented semantics.

Modelled (../shared/reference/HOST_APIS.md §3.3, §4): FBTime in seconds; FCurves with cubic keys
whose right tangent of key k and left tangent of key k+1 form a Bézier in (seconds, value):
P1 = (t_k + w_r Δ, v_k + w_r Δ d_r), P2 = (t_k1 − w_l Δ, v_k1 − w_l Δ d_l) (derivatives in value
per second, weights as fractions of the segment, default 1/3); linear keys; constant outside the
keys. Layers of the current take in order over BaseAnimation: override
(result = (1 − w) below + w layer) and additive (translations add w · layer; rotations compose
per layer as quaternions, R = R_below · R_layer^w). Models with Translation, Rotation
(RotationOrder, PreRotation when RotationActive) and global positions. Not Autodesk code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
from reference_bezier import bezier_at
from scipy.spatial.transform import Rotation

ORDERS = {0: "ZYX", 1: "YZX", 2: "XZY", 3: "ZXY", 4: "YXZ", 5: "XYZ"}


class _Enum:
    pass


class FBLayerMode(_Enum):
    kFBLayerModeAdditive = 0
    kFBLayerModeOverride = 1


class FBInterpolation(_Enum):
    kFBInterpolationConstant = 0
    kFBInterpolationLinear = 1
    kFBInterpolationCubic = 2


class FBTangentMode(_Enum):
    kFBTangentModeAuto = 0
    kFBTangentModeUser = 2
    kFBTangentModeBreak = 3


class FBTangentClampMode(_Enum):
    kFBTangentClampModeNone = 0
    kFBTangentClampModeClamped = 1


class FBModelTransformationType(_Enum):
    kModelTranslation = 0


class FBTime:
    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = float(seconds)

    def SetSecondDouble(self, seconds: float) -> None:  # noqa: N802
        self.seconds = float(seconds)

    def GetSecondDouble(self) -> float:  # noqa: N802
        return self.seconds


class FBVector3d(list):
    def __init__(self, *values) -> None:
        if len(values) == 1:
            values = tuple(values[0])
        super().__init__(float(v) for v in (values or (0.0, 0.0, 0.0)))


@dataclass
class _Key:
    value: float
    interpolation: int
    right_d: float = 0.0
    left_d: float = 0.0
    right_w: float = 1 / 3
    left_w: float = 1 / 3


class FBFCurve:
    def __init__(self) -> None:
        self.keys: dict[float, _Key] = {}

    def _times(self) -> list[float]:
        return sorted(self.keys)

    def EditBegin(self, count: int = -1) -> None:  # noqa: N802
        pass

    def EditEnd(self, count: int = -1) -> None:  # noqa: N802
        pass

    def KeyAdd(self, time: FBTime, value: float,  # noqa: N802
               interpolation: int = FBInterpolation.kFBInterpolationCubic,
               mode: int = FBTangentMode.kFBTangentModeAuto) -> int:
        self.keys[round(time.seconds, 9)] = _Key(float(value), interpolation)
        return self._times().index(round(time.seconds, 9))

    def _key(self, index: int) -> _Key:
        return self.keys[self._times()[index]]

    def KeySetTangentClampMode(self, index: int, mode: int) -> None:  # noqa: N802
        pass

    def KeySetTangentBreak(self, index: int, value: bool) -> None:  # noqa: N802
        pass

    def KeySetRightDerivative(self, index: int, value: float) -> None:  # noqa: N802
        self._key(index).right_d = value

    def KeySetLeftDerivative(self, index: int, value: float) -> None:  # noqa: N802
        self._key(index).left_d = value

    def KeySetRightTangentWeight(self, index: int, value: float) -> None:  # noqa: N802
        self._key(index).right_w = value

    def KeySetLeftTangentWeight(self, index: int, value: float) -> None:  # noqa: N802
        self._key(index).left_w = value

    def Evaluate(self, time: FBTime) -> float:  # noqa: N802
        t = time.seconds
        times = self._times()
        if t <= times[0]:
            return self.keys[times[0]].value
        if t >= times[-1]:
            return self.keys[times[-1]].value
        k = int(np.searchsorted(times, t, side="right")) - 1
        t0, t1 = times[k], times[k + 1]
        a, b = self.keys[t0], self.keys[t1]
        span = t1 - t0
        if a.interpolation == FBInterpolation.kFBInterpolationLinear:
            return a.value + (b.value - a.value) * (t - t0) / span
        right, left = a.right_w * span, b.left_w * span
        return bezier_at([[t0, a.value], [t0 + right, a.value + right * a.right_d],
                          [t1 - left, b.value - left * b.left_d], [t1, b.value]], t)


class _AxisNode:
    def __init__(self) -> None:
        self.FCurve = FBFCurve()


class FBAnimationNode:
    def __init__(self) -> None:
        self.Nodes = [_AxisNode() for _ in range(3)]


class _Property:
    def __init__(self, model: FBModel, kind: str, values) -> None:
        self.model, self.kind = model, kind
        self.static = [float(v) for v in values]
        self.nodes: dict[int, FBAnimationNode] = {}  # layer index -> animation node
        self.locked = False
        self.member_locked = [False, False, False]

    def IsAnimated(self) -> bool:  # noqa: N802
        return 0 in self.nodes

    def SetAnimated(self, state: bool, check_locked: bool = False) -> None:  # noqa: N802
        self.nodes.setdefault(scene.take.current, FBAnimationNode())

    def GetAnimationNode(self) -> FBAnimationNode:  # noqa: N802
        return self.nodes[scene.take.current]

    def IsLocked(self) -> bool:  # noqa: N802
        return self.locked

    def IsMemberLocked(self, index: int) -> bool:  # noqa: N802
        return self.member_locked[index]

    def layer_values(self, layer: int, t: float) -> list[float | None]:
        node = self.nodes.get(layer)
        if node is None:
            return [None, None, None]
        return [n.FCurve.Evaluate(FBTime(t)) if n.FCurve.keys else None for n in node.Nodes]

    def composite(self, t: float) -> list[float]:
        base = self.layer_values(0, t)
        values = [b if b is not None else s for b, s in zip(base, self.static, strict=True)]
        order = ORDERS[self.model.RotationOrder]
        for index, layer in enumerate(scene.take.layers[1:], 1):
            if layer.Mute:
                continue
            mine = self.layer_values(index, t)
            if all(m is None for m in mine):
                continue
            w = layer.Weight / 100.0
            if layer.LayerMode == FBLayerMode.kFBLayerModeOverride:
                values = [v if m is None else (1 - w) * v + w * m
                          for v, m in zip(values, mine, strict=True)]
            elif self.kind == "translation":
                values = [v + w * (m or 0.0) for v, m in zip(values, mine, strict=True)]
            else:  # rotations compose per layer as quaternions
                below = Rotation.from_euler(order, [values["XYZ".index(a)] for a in order],
                                            degrees=True)
                turn = Rotation.from_euler(order, [mine["XYZ".index(a)] or 0.0 for a in order],
                                           degrees=True)
                turn = Rotation.from_rotvec(turn.as_rotvec() * w)
                angles = (below * turn).as_euler(order, degrees=True)
                values = [float(angles[order.index(a)]) for a in "XYZ"]
        return values

    @property
    def Data(self) -> FBVector3d:  # noqa: N802
        return FBVector3d(self.composite(scene.time))


class FBModel:
    def __init__(self, name: str, parent: FBModel | None = None, translation=(0, 0, 0),
                 rotation_order: int = 0, pre_rotation=(0.0, 0.0, 0.0)) -> None:
        self.Name = self.LongName = name
        self._parent: FBModel | None = None
        self.Children: list[FBModel] = []
        self.Parent = parent
        self.Show = False
        self._translation = _Property(self, "translation", translation)
        self.Rotation = _Property(self, "rotation", (0, 0, 0))
        self.RotationOrder = rotation_order
        self.RotationActive = any(pre_rotation)
        self.PreRotation = FBVector3d(pre_rotation)
        self.PostRotation = FBVector3d()
        scene.models[name] = self

    @property
    def Parent(self) -> FBModel | None:  # noqa: N802
        return self._parent

    @Parent.setter
    def Parent(self, parent: FBModel | None) -> None:  # noqa: N802
        if self._parent is not None:
            self._parent.Children.remove(self)
        self._parent = parent
        if parent is not None:
            parent.Children.append(self)

    @property
    def Translation(self) -> _Property:  # noqa: N802
        return self._translation

    @Translation.setter
    def Translation(self, value) -> None:  # noqa: N802
        self._translation.static = [float(v) for v in value]

    @property
    def Selected(self) -> bool:  # noqa: N802
        return self.Name in scene.selection

    @Selected.setter
    def Selected(self, value: bool) -> None:  # noqa: N802
        if value and self.Name not in scene.selection:
            scene.selection.append(self.Name)
        elif not value and self.Name in scene.selection:
            scene.selection.remove(self.Name)

    def local(self, t: float) -> np.ndarray:
        order = ORDERS[self.RotationOrder]
        angles = self.Rotation.composite(t)
        matrix = np.eye(4)
        rotate = Rotation.from_euler(order, [angles["XYZ".index(a)] for a in order],
                                     degrees=True).as_matrix()
        pre = Rotation.from_euler("ZYX", list(self.PreRotation)[::-1], degrees=True).as_matrix()
        matrix[:3, :3] = (pre if self.RotationActive else np.eye(3)) @ rotate
        matrix[:3, 3] = self.Translation.composite(t)
        return matrix

    def world(self, t: float) -> np.ndarray:
        local = self.local(t)
        return local if self.Parent is None else self.Parent.world(t) @ local

    def GetVector(self, vector: FBVector3d, kind: int, global_info: bool = True) -> None:  # noqa: N802
        vector[:] = list(self.world(scene.time)[:3, 3])


@dataclass
class FBAnimationLayer:
    Name: str
    LayerMode: int = FBLayerMode.kFBLayerModeAdditive
    Weight: float = 100.0
    LayerRotationMode: int = 1
    Mute: bool = False


class _Span:
    def __init__(self, start: float, stop: float) -> None:
        self.start, self.stop = start, stop

    def GetStart(self) -> FBTime:  # noqa: N802
        return FBTime(self.start)

    def GetStop(self) -> FBTime:  # noqa: N802
        return FBTime(self.stop)


@dataclass
class FBTake:
    layers: list[FBAnimationLayer] = field(
        default_factory=lambda: [FBAnimationLayer("BaseAnimation", Weight=100.0)])
    current: int = 0
    marks: list[tuple[float, str]] = field(default_factory=list)
    colours: dict[int, tuple] = field(default_factory=dict)
    LocalTimeSpan: _Span = field(default_factory=lambda: _Span(0.0, 1.0))

    def CreateNewLayer(self) -> None:  # noqa: N802
        self.layers.append(FBAnimationLayer(f"AnimLayer{len(self.layers)}"))

    def GetLayerCount(self) -> int:  # noqa: N802
        return len(self.layers)

    def GetLayer(self, index: int) -> FBAnimationLayer:  # noqa: N802
        return self.layers[index]

    def GetLayerByName(self, name: str) -> FBAnimationLayer:  # noqa: N802
        return next(layer for layer in self.layers if layer.Name == name)

    def SetCurrentLayer(self, index: int) -> None:  # noqa: N802
        self.current = index

    def GetCurrentLayer(self) -> int:  # noqa: N802
        return self.current

    def RemoveLayer(self, index: int) -> None:  # noqa: N802
        del self.layers[index]
        for model in scene.models.values():
            for prop in (model.Translation, model.Rotation):
                prop.nodes.pop(index, None)
                prop.nodes = {(i - 1 if i > index else i): n for i, n in prop.nodes.items()}

    def AddTimeMark(self, time: FBTime) -> int:  # noqa: N802
        self.marks.append((time.seconds, ""))
        return len(self.marks) - 1

    def SetTimeMarkName(self, index: int, name: str) -> bool:  # noqa: N802
        self.marks[index] = (self.marks[index][0], name)
        return True

    def SetTimeMarkColor(self, index: int, colour) -> bool:  # noqa: N802
        self.colours[index] = tuple(colour)
        return True

    def GetTimeMarkCount(self) -> int:  # noqa: N802
        return len(self.marks)

    def GetTimeMarkName(self, index: int) -> str:  # noqa: N802
        return self.marks[index][1]

    def GetTimeMarkTime(self, index: int) -> FBTime:  # noqa: N802
        return FBTime(self.marks[index][0])

    def DeleteTimeMark(self, index: int) -> bool:  # noqa: N802
        del self.marks[index]
        return True


class _Root:
    @property
    def Children(self) -> list[FBModel]:  # noqa: N802
        return [m for m in scene.models.values() if m.Parent is None]


class FBScene:
    RootModel = _Root()

    def Evaluate(self) -> bool:  # noqa: N802
        return True


@dataclass
class _State:
    fps: float = 30.0
    time: float = 0.0
    models: dict[str, FBModel] = field(default_factory=dict)
    selection: list[str] = field(default_factory=list)
    take: FBTake = field(default_factory=FBTake)


scene = _State()


def reset(fps: float = 30.0) -> None:
    global scene
    scene = _State(fps=fps)


class FBSystem:
    @property
    def CurrentTake(self) -> FBTake:  # noqa: N802
        return scene.take

    @property
    def Scene(self) -> FBScene:  # noqa: N802
        return FBScene()

    @property
    def LocalTime(self) -> FBTime:  # noqa: N802
        return FBTime(scene.time)


class FBPlayerControl:
    def GetTransportFpsValue(self) -> float:  # noqa: N802
        return scene.fps

    def Goto(self, time: FBTime) -> bool:  # noqa: N802
        scene.time = time.seconds
        return True


class FBColor(tuple):
    def __new__(cls, r: float, g: float, b: float):
        return super().__new__(cls, (r, g, b))


class FBModelList(list):
    pass


class FBModelSkeleton(FBModel):
    pass


def FBModelRotationOrder(value: int) -> int:  # noqa: N802
    return int(value)


def FBTimeSpan(start: FBTime, stop: FBTime) -> _Span:  # noqa: N802
    return _Span(start.seconds, stop.seconds)


saved: dict[str, _State] = {}  # "files" on the fake disk


class FBApplication:
    def FileNew(self, ask: bool = False, clear_name: bool = True) -> bool:  # noqa: N802
        reset(scene.fps)
        return True

    def FileOpen(self, path: str, show: bool = False) -> bool:  # noqa: N802
        global scene
        if path not in saved:
            return False
        scene = copy.deepcopy(saved[path])
        return True

    def FileSave(self, path: str) -> bool:  # noqa: N802
        saved[path] = copy.deepcopy(scene)
        with open(path, "w") as handle:  # a marker file on the real disk
            handle.write("; fake FBX\n")
        return True


def FBGetSelectedModels(models: FBModelList) -> None:  # noqa: N802
    models.extend(scene.models[n] for n in scene.selection)


def FBFindModelByLabelName(name: str) -> FBModel | None:  # noqa: N802
    return scene.models.get(name)


def key_base(prop: _Property, axis: int, times, values) -> None:
    """Key the BaseAnimation curve of one axis, linear (like dense mocap)."""
    node = prop.nodes.setdefault(0, FBAnimationNode())
    for t, v in zip(times, values, strict=True):
        node.Nodes[axis].FCurve.KeyAdd(FBTime(t), v, FBInterpolation.kFBInterpolationLinear)
