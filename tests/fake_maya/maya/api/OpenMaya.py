"""Strict fake of the subset of ``maya.api.OpenMaya`` (Python API 2.0) the adapter uses.

Every call is counted in ``STATE.calls`` (for benchmarks/bench_maya_calls.py). Signatures follow
the Python API 2.0 reference; a wrong call form raises ``TypeError`` or ``RuntimeError`` like
Maya's bindings do. See ../FACTS.md.
"""

from __future__ import annotations

import functools

import numpy as np

from maya._scene import LINEAR_CM, STATE, TIME_RATES, MayaError


def counted(function):
    """Count one call of an API function under ``Class.method``."""
    name = function.__qualname__

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        STATE.calls[name] += 1
        return function(*args, **kwargs)
    return wrapper


class MTime:
    """A time in a unit; ``MTime(value)`` is in kFilm (24 fps), not the scene's rate."""

    kInvalid, kHours, kMinutes, kSeconds, kMilliseconds = 0, 1, 2, 3, 4
    kGames, kFilm, kPALFrame, kNTSCFrame, kShowScan, kPALField, kNTSCField = 5, 6, 7, 8, 9, 10, 11
    k15FPS, k24FPS, k25FPS, k30FPS, k48FPS, k50FPS, k60FPS = 5, 6, 7, 8, 9, 10, 11
    k120FPS, k23_976FPS, k29_97FPS, k29_97DF, k47_952FPS, k59_94FPS, k119_88FPS = \
        26, 43, 44, 45, 46, 47, 51

    def __init__(self, value: float = 0.0, unit: int = 6) -> None:
        if not isinstance(value, int | float | np.floating | np.integer):
            raise TypeError("an MTime needs a number (and optionally a unit)")
        if unit not in TIME_RATES:
            raise ValueError(f"invalid MTime unit {unit}")
        self.value = float(value)
        self.unit = int(unit)

    def seconds(self) -> float:
        return self.value / TIME_RATES[self.unit]

    def asUnits(self, unit: int) -> float:  # noqa: N802
        if unit == self.unit:
            return self.value
        return self.seconds() * TIME_RATES[unit]

    @staticmethod
    def uiUnit() -> int:  # noqa: N802
        STATE.calls["MTime.uiUnit"] += 1
        return STATE.scene.time_unit

    def __repr__(self) -> str:
        return f"MTime({self.value}, {self.unit})"


class MDistance:
    kInvalid, kInches, kFeet, kYards, kMiles, kMillimeters, kCentimeters, kKilometers, \
        kMeters = range(9)
    _CM = {1: 2.54, 2: 30.48, 5: 0.1, 6: 1.0, 8: 100.0}
    _NAMES = {"in": 1, "ft": 2, "mm": 5, "cm": 6, "m": 8}

    def __init__(self, value: float = 0.0, unit: int = 6) -> None:
        self.value, self.unit = float(value), int(unit)

    def asUnits(self, unit: int) -> float:  # noqa: N802
        return self.value * self._CM[self.unit] / self._CM[unit]

    @staticmethod
    def uiUnit() -> int:  # noqa: N802
        STATE.calls["MDistance.uiUnit"] += 1
        return MDistance._NAMES[STATE.scene.linear_unit]

    @staticmethod
    def internalUnit() -> int:  # noqa: N802
        return MDistance.kCentimeters


assert set(MDistance._NAMES) <= set(LINEAR_CM)


class MAngle:
    kInvalid, kRadians, kDegrees, kAngMinutes, kAngSeconds = range(5)
    _RAD = {1: 1.0, 2: np.pi / 180.0}

    def __init__(self, value: float = 0.0, unit: int = 1) -> None:
        self.value, self.unit = float(value), int(unit)

    def asUnits(self, unit: int) -> float:  # noqa: N802
        return self.value * self._RAD[self.unit] / self._RAD[unit]

    def asRadians(self) -> float:  # noqa: N802
        return self.asUnits(1)

    def asDegrees(self) -> float:  # noqa: N802
        return self.asUnits(2)

    @staticmethod
    def uiUnit() -> int:  # noqa: N802
        STATE.calls["MAngle.uiUnit"] += 1
        return 2 if STATE.scene.angle_unit == "deg" else 1


class MFn:
    kInvalid, kDependencyNode, kDagNode, kTransform, kJoint, kAnimCurve, kAnimLayer = \
        0, 4, 107, 110, 121, 7, 1002
    kAnimCurveTimeToAngular, kAnimCurveTimeToDistance, kAnimCurveTimeToUnitless = 8, 9, 11


def _types(node_type: str) -> set[int]:
    if node_type.startswith("animCurve"):
        return {MFn.kDependencyNode, MFn.kAnimCurve}
    if node_type == "joint":
        return {MFn.kDependencyNode, MFn.kDagNode, MFn.kTransform, MFn.kJoint}
    if node_type in ("transform", "parentConstraint"):
        return {MFn.kDependencyNode, MFn.kDagNode, MFn.kTransform}
    return {MFn.kDependencyNode}


class MObject:
    kNullObj: MObject

    def __init__(self, name: str | None = None) -> None:
        self._name = name

    def isNull(self) -> bool:  # noqa: N802
        return self._name is None

    def hasFn(self, fn: int) -> bool:  # noqa: N802
        return fn in _types(_node_type(self._name))

    def apiTypeStr(self) -> str:  # noqa: N802
        return _node_type(self._name)


MObject.kNullObj = MObject()


def _node_type(name: str | None) -> str:
    scene = STATE.scene
    if name in scene.curves:
        return "animCurve" + scene.curves[name].kind
    if name in scene.nodes:
        return scene.nodes[name].type
    raise MayaError(f"(kInvalidParameter): Object does not exist: {name}")


class MDagPath:
    def __init__(self, name: str | None = None) -> None:
        self._name = name

    @counted
    def partialPathName(self) -> str:  # noqa: N802
        return str(self._name)

    @counted
    def fullPathName(self) -> str:  # noqa: N802
        chain, name = [], self._name
        while name is not None:
            chain.append(name)
            name = STATE.scene.nodes[name].parent
        return "|" + "|".join(reversed(chain))

    def node(self) -> MObject:
        return MObject(self._name)

    def hasFn(self, fn: int) -> bool:  # noqa: N802
        return MObject(self._name).hasFn(fn)


class MSelectionList:
    def __init__(self) -> None:
        self._items: list[str] = []

    @counted
    def add(self, pattern: str) -> MSelectionList:
        if not isinstance(pattern, str):
            raise TypeError("MSelectionList.add takes a name")
        name = pattern.split(".", 1)[0]
        if name not in STATE.scene.nodes and name not in STATE.scene.curves:
            raise MayaError("(kInvalidParameter): Object does not exist")
        self._items.append(pattern)
        return self

    def length(self) -> int:
        return len(self._items)

    @counted
    def getDependNode(self, index: int) -> MObject:  # noqa: N802
        return MObject(self._items[index].split(".", 1)[0])

    @counted
    def getDagPath(self, index: int) -> MDagPath:  # noqa: N802
        name = self._items[index].split(".", 1)[0]
        if MFn.kDagNode not in _types(_node_type(name)):
            raise TypeError(f"{name} is not a DAG node")
        return MDagPath(name)

    @counted
    def getPlug(self, index: int) -> MPlug:  # noqa: N802
        item = self._items[index]
        if "." not in item:
            raise TypeError(f"{item} is not a plug")
        node, attr = item.split(".", 1)
        return MFnDependencyNode(MObject(node)).findPlug(attr, False)


class MGlobal:
    @staticmethod
    def getActiveSelectionList(orderedSelectionIfAvailable: bool = False  # noqa: N802, N803
                               ) -> MSelectionList:
        STATE.calls["MGlobal.getActiveSelectionList"] += 1
        selection = MSelectionList()
        for name in STATE.scene.selection:
            selection.add(name)
        return selection

    @staticmethod
    def displayWarning(message: str) -> None:  # noqa: N802
        STATE.ui.setdefault("warnings", []).append(str(message))

    @staticmethod
    def displayError(message: str) -> None:  # noqa: N802
        STATE.ui.setdefault("errors", []).append(str(message))


_STATIC_ATTRS = ("jointOrientX", "jointOrientY", "jointOrientZ", "rotateAxisX", "rotateAxisY",
                 "rotateAxisZ", "rotateOrder", "rotatePivotX", "rotatePivotY", "rotatePivotZ",
                 "scalePivotX", "scalePivotY", "scalePivotZ", "rotatePivotTranslateX",
                 "rotatePivotTranslateY", "rotatePivotTranslateZ", "scalePivotTranslateX",
                 "scalePivotTranslateY", "scalePivotTranslateZ", "shearXY", "shearXZ", "shearYZ",
                 "scaleX", "scaleY", "scaleZ", "inheritsTransform")
#: Defaults of the static attributes that are not 0 (transform node reference).
_DEFAULTS = {"scaleX": 1.0, "scaleY": 1.0, "scaleZ": 1.0, "inheritsTransform": 1.0}
_CHANNELS = tuple(f"{a}{x}" for a in ("translate", "rotate") for x in "XYZ")
_COMPOUND = {"translate", "rotate", "jointOrient", "rotateAxis"}


class MPlug:
    def __init__(self, node: str | None = None, attr: str | None = None,
                 index: int | None = None) -> None:
        self._node, self._attr, self._index = node, attr, index

    # properties (Python API 2.0 exposes these as properties, not methods)
    @property
    def isNull(self) -> bool:  # noqa: N802
        return self._node is None

    @property
    def isLocked(self) -> bool:  # noqa: N802
        STATE.calls["MPlug.isLocked"] += 1
        return self._attr in STATE.scene.nodes[self._node].locked

    @property
    def isKeyable(self) -> bool:  # noqa: N802
        STATE.calls["MPlug.isKeyable"] += 1
        return self._attr in _CHANNELS and \
            self._attr not in STATE.scene.nodes[self._node].nonkeyable

    @property
    def isDestination(self) -> bool:  # noqa: N802
        """A connection into this plug only: a child of a connected compound (``rotateX`` of
        ``decomposeMatrix.outputRotate → rotate``) is not a destination itself (FACTS.md)."""
        STATE.calls["MPlug.isDestination"] += 1
        return self._plug() in STATE.scene.inputs or any(
            self._plug() in layer.plugs for layer in STATE.scene.layers)

    @property
    def isChild(self) -> bool:  # noqa: N802
        return self._attr is not None and self._attr[:-1] in _COMPOUND \
            and self._attr[-1:] in "XYZ"

    @counted
    def parent(self) -> MPlug:
        if not self.isChild:
            raise RuntimeError(f"(kInvalidParameter): {self._plug()} is not a child plug")
        return MPlug(self._node, self._attr[:-1])

    def _plug(self) -> str:
        return f"{self._node}.{self._attr}"

    @counted
    def name(self) -> str:
        suffix = f"[{self._index}]" if self._index is not None else ""
        return f"{self._node}.{self._attr}{suffix}"

    @counted
    def node(self) -> MObject:
        return MObject(self._node)

    @counted
    def source(self) -> MPlug:
        """The plug this one is connected from (a null plug if none)."""
        plug = self._plug()
        for layer in reversed(STATE.scene.layers):
            if plug in layer.plugs:  # layered plugs are driven by the layer's blend node
                return MPlug(f"{self._node}_{self._attr}_{layer.name}", "output")
        source = STATE.scene.inputs.get(plug)
        return MPlug(source, "output") if source is not None else MPlug()

    @counted
    def elementByLogicalIndex(self, index: int) -> MPlug:  # noqa: N802
        if self._attr not in ("worldMatrix", "parentMatrix"):
            raise TypeError(f"{self._plug()} is not an array plug")
        return MPlug(self._node, self._attr, int(index))

    @counted
    def asDouble(self) -> float:  # noqa: N802
        """The value in internal units (cm, radians), at the current context's time."""
        if self._attr in _COMPOUND or self._attr in ("worldMatrix", "parentMatrix"):
            raise TypeError(f"{self._plug()} is not a numeric plug")
        node = STATE.scene.nodes[self._node]
        if self._attr in _CHANNELS:
            return STATE.plug_value(self._plug(), _context_seconds())
        if self._attr in node.attrs or self._attr in _STATIC_ATTRS:
            return float(node.attrs.get(self._attr, _DEFAULTS.get(self._attr, 0.0)))
        raise MayaError(f"(kInvalidParameter): no attribute {self._attr}")

    @counted
    def asInt(self) -> int:  # noqa: N802
        return int(self.asDouble())

    @counted
    def asBool(self) -> bool:  # noqa: N802
        return bool(self.asDouble())

    @counted
    def asMObject(self, *context) -> MObject:  # noqa: N802
        if context:  # Maya 2019+: the context argument is obsolete, use MDGContextGuard
            raise TypeError("MPlug.asMObject(): passing an MDGContext is obsolete; "
                            "use MDGContextGuard")
        if self._attr == "offsetParentMatrix":  # (Maya 2020+; not an array; static here)
            data = MObject(None)
            data._matrix = tuple(STATE.scene.nodes[self._node].attrs.get(
                "offsetParentMatrix", tuple(np.eye(4).ravel())))
            return data
        if self._attr not in ("worldMatrix", "parentMatrix") or self._index is None:
            raise TypeError(f"{self.name()} holds no data object (an array plug needs an "
                            "element)")
        seconds = _context_seconds()
        name = self._node
        if self._attr == "parentMatrix":
            name = STATE.scene.nodes[self._node].parent
        matrix = np.eye(4) if name is None else STATE.world_matrix_at(name, seconds)
        data = MObject("__matrix__")
        data._matrix = matrix.T  # Maya's row-vector layout: translation in row 3
        return data


def _context_seconds() -> float:
    if STATE.context_time is not None:
        return STATE.context_time
    return STATE.scene.time / STATE.scene.fps


class MMatrix:
    def __init__(self, rows=None) -> None:
        self._m = np.eye(4) if rows is None else np.asarray(rows, float).reshape(4, 4)

    def getElement(self, row: int, column: int) -> float:  # noqa: N802
        return float(self._m[row, column])

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> float:
        return float(self._m.reshape(-1)[index])


class MFnMatrixData:
    def __init__(self, data: MObject) -> None:
        if not hasattr(data, "_matrix"):
            raise TypeError("MFnMatrixData needs a matrix data object")
        self._data = data

    @counted
    def matrix(self) -> MMatrix:
        return MMatrix(self._data._matrix)


class MFnDependencyNode:
    def __init__(self, obj: MObject | None = None) -> None:
        if obj is not None and not isinstance(obj, MObject):
            raise TypeError("MFnDependencyNode takes an MObject")
        self._name = None if obj is None else obj._name
        if self._name is not None:
            _node_type(self._name)

    @counted
    def name(self) -> str:
        return str(self._name)

    @property
    def typeName(self) -> str:  # noqa: N802
        return _node_type(self._name)

    @counted
    def findPlug(self, attribute: str, wantNetworkedPlug: bool) -> MPlug:  # noqa: N802, N803
        if not self.hasAttribute(attribute):
            raise MayaError(f"(kInvalidParameter): {self._name} has no attribute {attribute}")
        return MPlug(self._name, attribute)

    @counted
    def hasAttribute(self, name: str) -> bool:  # noqa: N802
        node = STATE.scene.nodes.get(self._name)
        return node is not None and (name in node.attrs or name in _STATIC_ATTRS or name in (
            "worldMatrix", "parentMatrix", "offsetParentMatrix"))


class MFnDagNode(MFnDependencyNode):
    def __init__(self, obj: MObject | MDagPath | None = None) -> None:
        if isinstance(obj, MDagPath):
            obj = obj.node()
        super().__init__(obj)
        if self._name is not None and not MObject(self._name).hasFn(MFn.kDagNode):
            raise TypeError(f"{self._name} is not a DAG node")

    @counted
    def childCount(self) -> int:  # noqa: N802
        return len(self._children())

    @counted
    def child(self, index: int) -> MObject:
        return MObject(self._children()[index])

    def _children(self) -> list[str]:
        return [n for n, node in STATE.scene.nodes.items() if node.parent == self._name
                and MObject(n).hasFn(MFn.kDagNode)]

    @counted
    def parentCount(self) -> int:  # noqa: N802
        return 0 if STATE.scene.nodes[self._name].parent is None else 1

    @counted
    def parent(self, index: int) -> MObject:
        return MObject(STATE.scene.nodes[self._name].parent)

    @counted
    def partialPathName(self) -> str:  # noqa: N802
        return str(self._name)


class MDGContext:
    def __init__(self, time: MTime | None = None) -> None:
        STATE.calls["MDGContext"] += 1
        if time is not None and not isinstance(time, MTime):
            raise TypeError("MDGContext takes an MTime")
        self.time = time

    def isNormal(self) -> bool:  # noqa: N802
        return self.time is None


class MColor:
    def __init__(self, rgb=(0.0, 0.0, 0.0)) -> None:
        self.rgb = tuple(rgb)


class MArgList:
    def __init__(self, args=()) -> None:
        self._args = list(args)

    def length(self) -> int:
        return len(self._args)

    def asString(self, index: int) -> str:  # noqa: N802
        return str(self._args[index])


class MPxCommand:
    """Base of scripted commands (override doIt; redoIt/undoIt/isUndoable for undo)."""

    def __init__(self) -> None:
        pass

    def doIt(self, args: MArgList) -> None:  # noqa: N802
        pass

    def redoIt(self) -> None:  # noqa: N802
        pass

    def undoIt(self) -> None:  # noqa: N802
        pass

    def isUndoable(self) -> bool:  # noqa: N802
        return False


class MFnPlugin:
    """Registers commands of a plug-in being loaded (only valid inside initializePlugin)."""

    def __init__(self, obj: MObject, vendor: str = "Unknown", version: str = "Unknown",
                 apiVersion: str = "Any") -> None:  # noqa: N803
        if not isinstance(obj, MObject) or not getattr(obj, "_plugin", None):
            raise TypeError("MFnPlugin needs the MObject given to initializePlugin")
        self._plugin = obj._plugin

    def registerCommand(self, name: str, creator, syntaxCreator=None) -> None:  # noqa: N802, N803
        commands = STATE.plugins[self._plugin]["commands"]
        if any(name in p["commands"] for p in STATE.plugins.values()):
            raise MayaError(f"(kFailure): command {name} is already registered")
        commands[name] = creator

    def deregisterCommand(self, name: str) -> None:  # noqa: N802
        commands = STATE.plugins[self._plugin]["commands"]
        if name not in commands:
            raise MayaError(f"(kFailure): command {name} is not registered")
        del commands[name]

__all__ = [n for n in dir() if n.startswith("M")]
