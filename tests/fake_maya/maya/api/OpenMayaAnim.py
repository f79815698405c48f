"""Strict fake of the subset of ``maya.api.OpenMayaAnim`` the adapter uses (see ../FACTS.md)."""

from __future__ import annotations

import numpy as np

from maya._scene import STATE, MayaError
from maya.api.OpenMaya import MObject, MPlug, MTime, counted


class MAnimControl:
    """Static access to the playback range and current time (values in the UI time unit)."""

    @staticmethod
    def minTime() -> MTime:  # noqa: N802
        STATE.calls["MAnimControl.minTime"] += 1
        return MTime(STATE.scene.playback[0], STATE.scene.time_unit)

    @staticmethod
    def maxTime() -> MTime:  # noqa: N802
        STATE.calls["MAnimControl.maxTime"] += 1
        return MTime(STATE.scene.playback[1], STATE.scene.time_unit)

    @staticmethod
    def currentTime() -> MTime:  # noqa: N802
        STATE.calls["MAnimControl.currentTime"] += 1
        return MTime(STATE.scene.time, STATE.scene.time_unit)

    @staticmethod
    def setCurrentTime(time: MTime) -> None:  # noqa: N802
        STATE.calls["MAnimControl.setCurrentTime"] += 1
        if not isinstance(time, MTime):
            raise TypeError("setCurrentTime takes an MTime")
        STATE.scene.time = time.asUnits(STATE.scene.time_unit)
        STATE.cache.clear()


class MAnimCurveChange:
    """Records anim-curve edits so that a command can undo and redo them."""

    def __init__(self) -> None:
        self._edits: list[tuple[str, object, object]] = []  # (curve, before, after)

    def _before(self, name: str) -> None:
        self._edits.append((name, STATE.scene.curves[name].copy(), None))

    def _after(self) -> None:
        name, before, _ = self._edits[-1]
        self._edits[-1] = (name, before, STATE.scene.curves[name].copy())

    def undoIt(self) -> None:  # noqa: N802
        for name, before, _after in reversed(self._edits):
            _restore(name, before)

    def redoIt(self) -> None:  # noqa: N802
        for name, _before, after in self._edits:
            _restore(name, after)


def _restore(name: str, curve) -> None:
    target = STATE.scene.curves[name]
    target.__dict__.update(curve.copy().__dict__)
    STATE.touch()


class MAnimUtil:
    @staticmethod
    def isAnimated(obj, checkParent: bool = False) -> bool:  # noqa: N802, N803
        STATE.calls["MAnimUtil.isAnimated"] += 1
        if not isinstance(obj, MPlug):
            raise TypeError("this fake models MAnimUtil.isAnimated(MPlug)")
        plug = obj._plug()
        source = STATE.scene.inputs.get(plug)
        return source in STATE.scene.curves or any(plug in layer.curves
                                                   for layer in STATE.scene.layers)


def _edit(function):
    """An MFnAnimCurve edit: recorded in ``change`` if given, else flagged as not undoable."""
    def wrapper(self, *args, change=None, **kwargs):
        if change is not None and not isinstance(change, MAnimCurveChange):
            raise TypeError("change must be an MAnimCurveChange")
        if self._curve().referenced:
            raise MayaError(f"(kFailure): {self._name} is from a referenced file and cannot "
                            "be edited")
        if change is None:
            STATE.unrecorded_api_edits.append(f"{self._name}.{function.__name__}")
        else:
            change._before(self._name)
        result = function(self, *args, **kwargs)
        if change is not None:
            change._after()
        STATE.touch()
        return result
    wrapper.__name__ = function.__name__
    wrapper.__qualname__ = function.__qualname__
    return counted(wrapper)


class MFnAnimCurve:
    kTangentGlobal, kTangentFixed, kTangentLinear, kTangentFlat, kTangentSmooth, \
        kTangentStep = 0, 1, 2, 3, 4, 5
    kTangentClamped, kTangentAuto = 8, 11
    kAnimCurveTA, kAnimCurveTL, kAnimCurveTT, kAnimCurveTU = 0, 1, 2, 3

    def __init__(self, obj: MObject | MPlug | None = None) -> None:
        self._name = None
        if isinstance(obj, MPlug):  # the single animCurve connected to the plug
            source = STATE.scene.inputs.get(obj._plug())
            if source not in STATE.scene.curves:
                raise MayaError(f"(kInvalidParameter): no animCurve drives {obj._plug()}")
            self._name = source
        elif isinstance(obj, MObject):
            if obj._name not in STATE.scene.curves:
                raise TypeError(f"{obj._name} is not an animCurve")
            self._name = obj._name
        elif obj is not None:
            raise TypeError("MFnAnimCurve takes an MObject or an MPlug")

    def _curve(self):
        if self._name is None:
            raise MayaError("(kInvalidParameter): function set has no object")
        return STATE.scene.curves[self._name]

    @property
    def numKeys(self) -> int:  # noqa: N802
        return len(self._curve().times)

    @property
    def isWeighted(self) -> bool:  # noqa: N802
        return self._curve().weighted

    @property
    def animCurveType(self) -> int:  # noqa: N802
        return {"TA": 0, "TL": 1, "TU": 3}[self._curve().kind]

    def name(self) -> str:
        return str(self._name)

    def input(self, index: int) -> MTime:
        return MTime(float(self._curve().times[index]), MTime.kSeconds)

    def value(self, index: int) -> float:
        return float(self._curve().values[index])

    @counted
    def evaluate(self, time: MTime) -> float:
        if not isinstance(time, MTime):
            raise TypeError("evaluate takes an MTime")
        return float(self._curve().evaluate([time.seconds()])[0])

    def find(self, time: MTime) -> int | None:
        hits = np.flatnonzero(np.isclose(self._curve().times, time.seconds(), atol=1e-9))
        return int(hits[0]) if hits.size else None

    def tangentsLocked(self, index: int) -> bool:  # noqa: N802
        return bool(self._curve().tangents_locked[index])

    def weightsLocked(self, index: int) -> bool:  # noqa: N802
        return bool(self._curve().weights_locked[index])

    def isBreakdown(self, index: int) -> bool:  # noqa: N802
        return bool(self._curve().breakdown[index])

    def inTangentType(self, index: int) -> int:  # noqa: N802
        return int(self._curve().in_type[index])

    def outTangentType(self, index: int) -> int:  # noqa: N802
        return int(self._curve().out_type[index])

    def getTangentXY(self, index: int, isInTangent: bool) -> tuple[float, float]:  # noqa: N802, N803
        curve = self._curve()
        if isInTangent:
            return float(curve.ix[index]), float(curve.iy[index])
        return float(curve.ox[index]), float(curve.oy[index])

    @staticmethod
    def _times(times) -> np.ndarray:
        if not all(isinstance(t, MTime) for t in times):
            raise TypeError("times must be a sequence of MTime (an MTimeArray)")
        return np.array([t.seconds() for t in times])

    @_edit
    def addKeys(self, times, values, tangentInType: int = 0,  # noqa: N802, N803
                tangentOutType: int = 0, keepExistingKeys: bool = False) -> None:  # noqa: N803
        seconds = self._times(times)
        if len(seconds) != len(values):
            raise ValueError("times and values differ in length")
        self._curve().set_keys(seconds, np.asarray(values, float), tangentInType,
                               tangentOutType, keepExistingKeys)

    @_edit
    def addKeysWithTangents(self, times, values, tangentInType: int = 0,  # noqa: N802, N803
                            tangentOutType: int = 0, tangentInTypeArray=None,  # noqa: N803
                            tangentOutTypeArray=None, tangentInXArray=None,  # noqa: N803
                            tangentInYArray=None, tangentOutXArray=None,  # noqa: N803
                            tangentOutYArray=None, tangentsLockedArray=None,  # noqa: N803
                            weightsLockedArray=None, convertUnits: bool = True,  # noqa: N803
                            keepExistingKeys: bool = False) -> None:  # noqa: N803
        seconds = self._times(times)
        n = len(seconds)
        arrays = (tangentInTypeArray, tangentOutTypeArray, tangentInXArray, tangentInYArray,
                  tangentOutXArray, tangentOutYArray, tangentsLockedArray, weightsLockedArray)
        if len(values) != n or any(a is not None and len(a) != n for a in arrays):
            raise ValueError("every array must have one entry per key")
        if convertUnits:
            raise NotImplementedError("this fake models convertUnits=False only: x in seconds"
                                      ", y in internal units")
        curve = self._curve()
        curve.set_keys(seconds, np.asarray(values, float),
                       tangentInType if tangentInTypeArray is None else tangentInTypeArray,
                       tangentOutType if tangentOutTypeArray is None else tangentOutTypeArray,
                       keepExistingKeys)
        order = np.argsort(seconds, kind="stable")
        where = np.searchsorted(curve.times, seconds[order])
        for target, given in ((curve.ix, tangentInXArray), (curve.iy, tangentInYArray),
                              (curve.ox, tangentOutXArray), (curve.oy, tangentOutYArray),
                              (curve.tangents_locked, tangentsLockedArray),
                              (curve.weights_locked, weightsLockedArray)):
            if given is not None:
                target[where] = np.asarray(given)[order]
        curve._resolve_linear()
        locked = curve.tangents_locked[where]
        cross = curve.ix[where] * curve.oy[where] - curve.iy[where] * curve.ox[where]
        scale = np.hypot(curve.ix[where], curve.iy[where]) * np.hypot(curve.ox[where],
                                                                      curve.oy[where])
        bad = locked & (np.abs(cross) > 1e-9 * np.maximum(scale, 1e-300))
        if bad.any():  # a locked tangent has one direction for in and out (keyTangent -lock)
            raise MayaError(f"locked tangents with different in/out directions at key(s) "
                            f"{np.flatnonzero(bad)[:5].tolist()} of {self._name}")

    @_edit
    def setIsWeighted(self, isWeighted: bool) -> None:  # noqa: N802, N803
        self._curve().weighted = bool(isWeighted)

    @_edit
    def setIsBreakdown(self, index: int, isBreakdown: bool) -> None:  # noqa: N802, N803
        self._curve().breakdown[index] = bool(isBreakdown)

    @_edit
    def setTangentsLocked(self, index: int, locked: bool) -> None:  # noqa: N802
        self._curve().tangents_locked[index] = bool(locked)

    @_edit
    def setWeightsLocked(self, index: int, locked: bool) -> None:  # noqa: N802
        self._curve().weights_locked[index] = bool(locked)
