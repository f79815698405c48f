"""A strict fake of the ``pyfbsdk`` subset Salient Poses uses, written from the documentation.

Every modelled behaviour is listed with its source in ``FACTS.md`` next to this file; read that
first. Signatures follow ``motionbuilder-stubs`` 2026.1.1 (positional-only parameters, enum
types): a keyword argument, a plain ``int`` where an enumeration is expected, a ``float`` where
ticks are expected or an unknown attribute raises, as Boost.Python does. Not Autodesk code.

Test helpers (not part of pyfbsdk) start with an underscore or are listed in ``__test_api__``:
``reset``, ``scene``, ``calls``, ``key_base``, ``ticks_per_frame``, ``frame_ticks``.
"""

from __future__ import annotations

import bisect
import copy
import os
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

try:
    from reference_bezier import bezier_at
except ImportError:  # imported with only tests/fake_mobu on the path
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reference_bezier import bezier_at

__test_api__ = ("reset", "scene", "calls", "key_base", "ticks_per_frame", "frame_ticks",
                "saved", "RATES", "ORDERS", "TICKS_PER_SECOND")

#: Host calls made since the last :func:`reset`, by ``"Class.Method"``.
calls: Counter[str] = Counter()


def _call(name: str) -> None:
    calls[name] += 1


class ArgumentError(TypeError):
    """What Boost.Python raises when no C++ overload matches the Python arguments."""


def _expect(value: Any, kinds: type | tuple[type, ...], where: str) -> None:
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise ArgumentError(f"{where}: got bool, expected {kinds}")
    if not isinstance(value, kinds):
        raise ArgumentError(f"Python argument types in {where} did not match C++ signature: "
                            f"got {type(value).__name__}, expected {kinds}")


# --------------------------------------------------------------------------- enumerations
class Enumeration(int):
    """Boost.Python enum values: ints of their own class (a plain int is not accepted)."""

    _names: dict[int, str]

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self._names.get(int(self), int(self))}"


def _enum(name: str, **members: int) -> type:
    cls = type(name, (Enumeration,), {"_names": {v: k for k, v in members.items()}})
    for key, value in members.items():
        setattr(cls, key, cls(value))
    return cls


FBInterpolation = _enum("FBInterpolation", kFBInterpolationConstant=0,
                        kFBInterpolationLinear=1, kFBInterpolationCubic=2,
                        kFBInterpolationCustom=3)
FBTangentMode = _enum("FBTangentMode", kFBTangentModeAuto=0, kFBTangentModeTCB=1,
                      kFBTangentModeUser=2, kFBTangentModeBreak=3,
                      kFBTangentModeTimeIndependent=4, kFBTangentModeClampProgressive=5)
FBTangentClampMode = _enum("FBTangentClampMode", kFBTangentClampModeNone=0,
                           kFBTangentClampModeClamped=1)
FBTangentWeightMode = _enum("FBTangentWeightMode", kFBTangentWeightModeNone=0,
                            kFBTangentWeightModeRight=1, kFBTangentWeightModeNextLeft=2,
                            kFBTangentWeightModeBoth=3)
FBExtrapolationMode = _enum("FBExtrapolationMode", kFCurveExtrapolationConst=1,
                            kFCurveExtrapolationRepetition=2,
                            kFCurveExtrapolationMirrorRepetition=3,
                            kFCurveExtrapolationKeepSlope=4,
                            kFCurveExtrapolationRelativeRepetition=5)
FBLayerMode = _enum("FBLayerMode", kFBLayerModeInvalidIndex=-1, kFBLayerModeAdditive=0,
                    kFBLayerModeOverride=1, kFBLayerModeOverridePassthrough=2)
FBLayerRotationMode = _enum("FBLayerRotationMode", kFBLayerRotationModeInvalidIndex=-1,
                            kFBLayerRotationModeEulerRotation=0,
                            kFBLayerRotationModeQuaternionRotation=1)
FBModelRotationOrder = _enum("FBModelRotationOrder", kFBEulerXYZ=0, kFBEulerXZY=1,
                             kFBEulerYZX=2, kFBEulerYXZ=3, kFBEulerZXY=4, kFBEulerZYX=5,
                             kFBSphericXYZ=6)
FBModelTransformationType = _enum("FBModelTransformationType", kModelTransformation=0,
                                  kModelRotation=1, kModelTranslation=2, kModelScaling=3)
FBTimeMode = _enum("FBTimeMode", kFBTimeModeDefault=0, kFBTimeMode1000Frames=1,
                   kFBTimeMode120Frames=2, kFBTimeMode11988Frames=3, kFBTimeMode100Frames=4,
                   kFBTimeMode96Frames=5, kFBTimeMode72Frames=6, kFBTimeMode60Frames=7,
                   kFBTimeMode5994Frames=8, kFBTimeMode50Frames=9, kFBTimeMode48Frames=10,
                   kFBTimeMode30Frames=11, kFBTimeMode2997Frames_Drop=12,
                   kFBTimeMode2997Frames=13, kFBTimeMode25Frames=14, kFBTimeMode24Frames=15,
                   kFBTimeMode23976Frames=16, kFBTimeModeCustom=17)

#: Frame rate of each standard time mode (NTSC rates are 1000/1001 of the nominal rate).
RATES = {1: Fraction(1000), 2: Fraction(120), 3: Fraction(120000, 1001), 4: Fraction(100),
         5: Fraction(96), 6: Fraction(72), 7: Fraction(60), 8: Fraction(60000, 1001),
         9: Fraction(50), 10: Fraction(48), 11: Fraction(30), 12: Fraction(30000, 1001),
         13: Fraction(30000, 1001), 14: Fraction(25), 15: Fraction(24),
         16: Fraction(24000, 1001)}
#: FBX/MotionBuilder time unit: ticks per second (FBXSDK_TC_SECOND).
TICKS_PER_SECOND = 46_186_158_000


# --------------------------------------------------------------------------- time
def ticks_per_frame(mode: int, custom_fps: float = 0.0) -> int:
    """One frame in ticks: TC_SECOND / rate with integer division, as fbxtimecode.h does."""
    if int(mode) == 17:
        return int(round(TICKS_PER_SECOND / custom_fps))
    rate = RATES[int(mode)]
    return TICKS_PER_SECOND * rate.denominator // rate.numerator


class FBTime:
    """Time as integer ticks (1/46,186,158,000 s)."""

    __slots__ = ("_ticks",)

    def __init__(self, *args: Any) -> None:
        _call("FBTime.__init__")
        if not args:
            self._ticks = 0
        elif len(args) == 1 and isinstance(args[0], FBTime):
            self._ticks = args[0]._ticks
        elif len(args) == 1:
            _expect(args[0], int, "FBTime.__init__(Time)")
            self._ticks = int(args[0])
        else:
            parts = list(args)
            mode = parts.pop() if len(parts) == 6 else FBTimeMode.kFBTimeModeDefault
            hour, minute, second, frame, field = parts + [0] * (5 - len(parts))
            for value in (hour, minute, second, frame, field):
                _expect(value, int, "FBTime.__init__(Hour, Minute, Second, Frame, Field)")
            _expect(mode, FBTimeMode, "FBTime.__init__(..., TimeMode)")
            per_frame = ticks_per_frame(_resolve(mode), scene.custom_fps)
            self._ticks = ((hour * 3600 + minute * 60 + second) * TICKS_PER_SECOND
                           + frame * per_frame + field * per_frame // 2)

    def Get(self) -> int:
        return self._ticks

    def Set(self, Time: int, /) -> None:
        _expect(Time, int, "FBTime.Set")
        self._ticks = int(Time)

    def GetSecondDouble(self) -> float:
        return self._ticks / TICKS_PER_SECOND

    def SetSecondDouble(self, Time: float, /) -> None:
        _expect(Time, (float, int), "FBTime.SetSecondDouble")
        self._ticks = int(Time * TICKS_PER_SECOND)  # a C cast: truncation toward zero

    def GetFrame(self, TimeMode: Any = None, /) -> int:
        mode = FBTimeMode.kFBTimeModeDefault if TimeMode is None else TimeMode
        _expect(mode, FBTimeMode, "FBTime.GetFrame")
        return self._ticks // ticks_per_frame(_resolve(mode), scene.custom_fps)

    def SetFrame(self, Frames: int, TimeMode: Any = None, /) -> None:
        mode = FBTimeMode.kFBTimeModeDefault if TimeMode is None else TimeMode
        _expect(Frames, int, "FBTime.SetFrame")
        _expect(mode, FBTimeMode, "FBTime.SetFrame")
        self._ticks = Frames * ticks_per_frame(_resolve(mode), scene.custom_fps)

    def IsExactlyOnFrame(self, TimeMode: Any = None, /) -> bool:
        mode = FBTimeMode.kFBTimeModeDefault if TimeMode is None else TimeMode
        return self._ticks % ticks_per_frame(_resolve(mode), scene.custom_fps) == 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FBTime) and other._ticks == self._ticks

    def __lt__(self, other: FBTime) -> bool:
        return self._ticks < other._ticks

    def __le__(self, other: FBTime) -> bool:
        return self._ticks <= other._ticks

    def __hash__(self) -> int:
        return hash(self._ticks)

    def __repr__(self) -> str:
        return f"FBTime({self._ticks})"


def _time(ticks: int) -> FBTime:
    """An FBTime made inside the fake (not counted as a host call)."""
    time = FBTime.__new__(FBTime)
    time._ticks = int(ticks)
    return time


FBTime.OneSecond = _time(TICKS_PER_SECOND)  # type: ignore[attr-defined]
FBTime.Zero = _time(0)  # type: ignore[attr-defined]


def _resolve(mode: int) -> int:
    return int(scene.mode) if int(mode) == 0 else int(mode)


class FBTimeSpan:
    __slots__ = ("_start", "_stop")

    def __init__(self, Start: FBTime | None = None, Stop: FBTime | None = None, /) -> None:
        self._start = _time(Start.Get()) if Start is not None else _time(0)
        self._stop = _time(Stop.Get()) if Stop is not None else _time(0)

    def GetStart(self) -> FBTime:
        return _time(self._start.Get())

    def GetStop(self) -> FBTime:
        return _time(self._stop.Get())

    def Set(self, Start: FBTime, Stop: FBTime, /) -> None:
        _expect(Start, FBTime, "FBTimeSpan.Set")
        _expect(Stop, FBTime, "FBTimeSpan.Set")
        self._start, self._stop = _time(Start.Get()), _time(Stop.Get())


# --------------------------------------------------------------------------- vectors
class _Fixed:
    """A fixed-length list-like of floats (slicing is not supported, per the stub)."""

    _size = 3
    __slots__ = ("_values",)

    def __init__(self, *values: float) -> None:
        if len(values) == 1 and not isinstance(values[0], int | float):
            values = tuple(values[0])
        if values and len(values) != self._size:
            raise ArgumentError(f"{type(self).__name__} takes {self._size} values")
        self._values = [float(v) for v in values] if values else [0.0] * self._size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int) -> float:
        if not isinstance(index, int):
            raise TypeError(f"{type(self).__name__} does not support slicing")
        return self._values[index]

    def __setitem__(self, index: int, value: float) -> None:
        if not isinstance(index, int):
            raise TypeError(f"{type(self).__name__} does not support slicing")
        self._values[index] = float(value)

    def __iter__(self):
        return iter(list(self._values))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{tuple(self._values)}"


class FBVector3d(_Fixed):
    __slots__ = ()


class FBColor(_Fixed):
    __slots__ = ()


class FBMatrix(_Fixed):
    """16 doubles, column-major: the translation is in elements 12, 13, 14."""

    _size = 16
    __slots__ = ()

    def __init__(self, *values: float) -> None:
        super().__init__(*values)
        if not values:
            self._values = list(np.eye(4).ravel(order="F"))


# --------------------------------------------------------------------------- curves
class FBFCurveKey:
    """One key (the attributes of FBFCurveKey; set through FBFCurve.KeySet*)."""

    __slots__ = ("Time", "Value", "Interpolation", "TangentMode", "TangentBreak",
                 "TangentClampMode", "TangentWeightMode", "LeftDerivative", "RightDerivative",
                 "RightTangentWeight", "NextLeftTangentWeight")

    def __init__(self, time: FBTime, value: float, interpolation: Any, mode: Any) -> None:
        self.Time, self.Value = _time(time.Get()), float(value)
        self.Interpolation, self.TangentMode = interpolation, mode
        self.TangentBreak = False
        # assumption, see FACTS.md: a new key is clamped unless told otherwise
        self.TangentClampMode = FBTangentClampMode.kFBTangentClampModeClamped
        self.TangentWeightMode = FBTangentWeightMode.kFBTangentWeightModeNone
        self.LeftDerivative = self.RightDerivative = 0.0
        self.RightTangentWeight = self.NextLeftTangentWeight = 1.0 / 3.0


class FBFCurve:
    __slots__ = ("Keys", "_owner", "_editing", "_ticks", "_extrapolation")

    def __init__(self) -> None:
        self.Keys: list[FBFCurveKey] = []
        self._ticks: list[int] = []  # key times, kept sorted with Keys
        self._owner: FBPropertyAnimatableVector3d | None = None
        self._editing = 0
        # pre, post: a new curve holds its end values (FACTS.md)
        const = FBExtrapolationMode.kFCurveExtrapolationConst
        self._extrapolation = [const, const]

    def _set_extrapolation(self, side: int, mode: Any, where: str) -> None:
        _expect(mode, FBExtrapolationMode, where)
        if int(mode) != 1:
            raise NotImplementedError(f"{where}: this fake models constant extrapolation only")
        self._extrapolation[side] = mode

    def GetPreExtrapolationMode(self) -> Any:
        _call("FBFCurve.GetPreExtrapolationMode")
        return self._extrapolation[0]

    def GetPostExtrapolationMode(self) -> Any:
        _call("FBFCurve.GetPostExtrapolationMode")
        return self._extrapolation[1]

    def SetPreExtrapolationMode(self, ExtrapolationMode: Any, /) -> None:
        _call("FBFCurve.SetPreExtrapolationMode")
        self._set_extrapolation(0, ExtrapolationMode, "FBFCurve.SetPreExtrapolationMode")

    def SetPostExtrapolationMode(self, ExtrapolationMode: Any, /) -> None:
        _call("FBFCurve.SetPostExtrapolationMode")
        self._set_extrapolation(1, ExtrapolationMode, "FBFCurve.SetPostExtrapolationMode")

    def _writable(self) -> bool:
        owner = self._owner
        return owner is None or not owner._locked_for(self)

    def _index(self, Index: int, where: str) -> FBFCurveKey:
        _expect(Index, int, where)
        if not 0 <= Index < len(self.Keys):
            raise IndexError(f"{where}: key index {Index} out of range")
        return self.Keys[Index]

    def EditBegin(self, KeyCount: int = -1, /) -> None:
        _call("FBFCurve.EditBegin")
        _expect(KeyCount, int, "FBFCurve.EditBegin")
        self._editing += 1

    def EditEnd(self, KeyCount: int = -1, /) -> None:
        _call("FBFCurve.EditEnd")
        _expect(KeyCount, int, "FBFCurve.EditEnd")
        self._editing = max(0, self._editing - 1)

    def EditClear(self) -> None:
        _call("FBFCurve.EditClear")
        if self._writable():
            self.Keys.clear()
            self._ticks.clear()

    def _insert(self, time: FBTime, value: float, interpolation: Any, mode: Any) -> int:
        ticks = time.Get()
        i = bisect.bisect_left(self._ticks, ticks)
        key = FBFCurveKey(time, value, interpolation, mode)
        if i < len(self._ticks) and self._ticks[i] == ticks:  # a key at that time is replaced
            self.Keys[i] = key
        else:
            self.Keys.insert(i, key)
            self._ticks.insert(i, ticks)
        return i

    def KeyAdd(self, Time: FBTime, Value: float,
               Interpolation: Any = FBInterpolation.kFBInterpolationCubic,
               TangentMode: Any = FBTangentMode.kFBTangentModeAuto, /) -> int:
        _call("FBFCurve.KeyAdd")
        _expect(Time, FBTime, "FBFCurve.KeyAdd(Time)")
        _expect(Value, (float, int), "FBFCurve.KeyAdd(Value)")
        _expect(Interpolation, FBInterpolation, "FBFCurve.KeyAdd(Interpolation)")
        _expect(TangentMode, FBTangentMode, "FBFCurve.KeyAdd(TangentMode)")
        if not self._writable():
            return -1
        return self._insert(Time, float(Value), Interpolation, TangentMode)

    def KeysAdd(self, Times: list, Values: list, Interpolations: list | None = None,
                TangentModes: list | None = None, /) -> bool:
        _call("FBFCurve.KeysAdd")
        for name, items, kind in (("Times", Times, FBTime), ("Values", Values, (float, int)),
                                  ("Interpolations", Interpolations or [], FBInterpolation),
                                  ("TangentModes", TangentModes or [], FBTangentMode)):
            _expect(items, list, f"FBFCurve.KeysAdd({name})")
            for item in items:
                _expect(item, kind, f"FBFCurve.KeysAdd({name}[i])")
        n = len(Times)
        if len(Values) != n or (Interpolations and len(Interpolations) != n) \
                or (TangentModes and len(TangentModes) != n) or not self._writable():
            return False
        merged = dict(zip(self._ticks, self.Keys, strict=True))
        for i in range(n):
            merged[Times[i].Get()] = FBFCurveKey(
                Times[i], float(Values[i]),
                Interpolations[i] if Interpolations else FBInterpolation.kFBInterpolationCubic,
                TangentModes[i] if TangentModes else FBTangentMode.kFBTangentModeAuto)
        self._ticks = sorted(merged)
        self.Keys = [merged[t] for t in self._ticks]
        return True

    def KeyDelete(self, StartIndex: int, StopIndex: int, /) -> bool:
        _call("FBFCurve.KeyDelete")
        if not self._writable():
            return False
        del self.Keys[StartIndex:StopIndex + 1]
        del self._ticks[StartIndex:StopIndex + 1]
        return True

    # per-key getters and setters (FBFCurve.KeyGet*/KeySet*)
    def KeyGetTime(self, Index: int, /) -> FBTime:
        _call("FBFCurve.KeyGetTime")
        return _time(self._index(Index, "FBFCurve.KeyGetTime").Time.Get())

    def KeyGetValue(self, Index: int, /) -> float:
        _call("FBFCurve.KeyGetValue")
        return self._index(Index, "FBFCurve.KeyGetValue").Value

    def KeyGetTangentMode(self, Index: int, /) -> Any:
        return self._index(Index, "FBFCurve.KeyGetTangentMode").TangentMode

    def KeyGetTangentBreak(self, Index: int, /) -> bool:
        return self._index(Index, "FBFCurve.KeyGetTangentBreak").TangentBreak

    def KeyGetTangentClampMode(self, Index: int, /) -> Any:
        return self._index(Index, "FBFCurve.KeyGetTangentClampMode").TangentClampMode

    def KeyGetInterpolation(self, Index: int, /) -> Any:
        return self._index(Index, "FBFCurve.KeyGetInterpolation").Interpolation

    def KeyGetTangentWeightMode(self, Index: int, /) -> Any:
        return self._index(Index, "FBFCurve.KeyGetTangentWeightMode").TangentWeightMode

    def KeyGetLeftDerivative(self, Index: int, /) -> float:
        key = self._index(Index, "FBFCurve.KeyGetLeftDerivative")
        return key.LeftDerivative if key.TangentBreak else key.RightDerivative

    def KeyGetRightDerivative(self, Index: int, /) -> float:
        return self._index(Index, "FBFCurve.KeyGetRightDerivative").RightDerivative

    def KeyGetRightTangentWeight(self, Index: int, /) -> float:
        return self._index(Index, "FBFCurve.KeyGetRightTangentWeight").RightTangentWeight

    def KeyGetLeftTangentWeight(self, Index: int, /) -> float:
        self._index(Index, "FBFCurve.KeyGetLeftTangentWeight")
        return self.Keys[Index - 1].NextLeftTangentWeight if Index > 0 else 1.0 / 3.0

    def _set(self, name: str, Index: int, value: Any, kind: Any) -> FBFCurveKey | None:
        _call(f"FBFCurve.{name}")
        key = self._index(Index, f"FBFCurve.{name}")
        _expect(value, kind, f"FBFCurve.{name}(Value)")
        return key if self._writable() else None

    def KeySetValue(self, Index: int, Value: float, /) -> None:
        if key := self._set("KeySetValue", Index, Value, (float, int)):
            key.Value = float(Value)

    def KeySetInterpolation(self, Index: int, Value: Any, /) -> None:
        if key := self._set("KeySetInterpolation", Index, Value, FBInterpolation):
            key.Interpolation = Value

    def KeySetTangentMode(self, Index: int, Value: Any, /) -> None:
        if key := self._set("KeySetTangentMode", Index, Value, FBTangentMode):
            key.TangentMode = Value

    def KeySetTangentBreak(self, Index: int, Value: bool, /) -> None:
        if key := self._set("KeySetTangentBreak", Index, Value, bool):
            key.TangentBreak = bool(Value)
            if Value and key.TangentMode == FBTangentMode.kFBTangentModeUser:
                key.TangentMode = FBTangentMode.kFBTangentModeBreak

    def KeySetTangentClampMode(self, Index: int, Value: Any, /) -> None:
        if key := self._set("KeySetTangentClampMode", Index, Value, FBTangentClampMode):
            key.TangentClampMode = Value

    def KeySetTangentWeightMode(self, Index: int, Value: Any, /) -> None:
        if key := self._set("KeySetTangentWeightMode", Index, Value, FBTangentWeightMode):
            key.TangentWeightMode = Value

    def KeySetRightDerivative(self, Index: int, Value: float, /) -> None:
        if key := self._set("KeySetRightDerivative", Index, Value, (float, int)):
            key.RightDerivative = float(Value)
            if not _broken(key):  # one slope on both sides unless broken
                key.LeftDerivative = float(Value)

    def KeySetLeftDerivative(self, Index: int, Value: float, /) -> None:
        if key := self._set("KeySetLeftDerivative", Index, Value, (float, int)):
            key.LeftDerivative = float(Value)
            if not _broken(key):
                key.RightDerivative = float(Value)

    def KeySetRightTangentWeight(self, Index: int, Value: float, /) -> None:
        if key := self._set("KeySetRightTangentWeight", Index, Value, (float, int)):
            key.RightTangentWeight = float(Value)
            key.TangentWeightMode = FBTangentWeightMode(int(key.TangentWeightMode) | 1)

    def KeySetLeftTangentWeight(self, Index: int, Value: float, /) -> None:
        if self._set("KeySetLeftTangentWeight", Index, Value, (float, int)) and Index > 0:
            before = self.Keys[Index - 1]  # the left weight lives on the previous key
            before.NextLeftTangentWeight = float(Value)
            before.TangentWeightMode = FBTangentWeightMode(int(before.TangentWeightMode) | 2)

    # evaluation
    def _slopes(self, k: int) -> tuple[float, float]:
        """(left, right) derivative of key k in value per second, as MotionBuilder uses it."""
        key = self.Keys[k]
        mode = int(key.TangentMode)
        if mode in (0, 1, 4, 5):  # auto modes: recomputed from the neighbours (cardinal)
            before = self.Keys[max(k - 1, 0)]
            after = self.Keys[min(k + 1, len(self.Keys) - 1)]
            span = (after.Time.Get() - before.Time.Get()) / TICKS_PER_SECOND
            slope = (after.Value - before.Value) / span if span > 0 else 0.0
            left = right = slope
        else:
            right = key.RightDerivative
            left = key.LeftDerivative if _broken(key) else right
        if int(key.TangentClampMode) == 1:
            neighbours = [self.Keys[j].Value for j in (k - 1, k + 1) if 0 <= j < len(self.Keys)]
            if any(v == key.Value for v in neighbours):
                left = right = 0.0
        return left, right

    def Evaluate(self, Time: FBTime, /) -> float:
        _call("FBFCurve.Evaluate")
        _expect(Time, FBTime, "FBFCurve.Evaluate")
        return self._value(Time.Get())

    def _value(self, ticks: int) -> float:
        keys = self.Keys
        if not keys:
            return 0.0
        if ticks <= self._ticks[0]:
            return keys[0].Value
        if ticks >= self._ticks[-1]:
            return keys[-1].Value
        times = self._ticks
        k = bisect.bisect_right(times, ticks) - 1
        a, b = keys[k], keys[k + 1]
        t0, t1 = times[k] / TICKS_PER_SECOND, times[k + 1] / TICKS_PER_SECOND
        t = ticks / TICKS_PER_SECOND
        span = t1 - t0
        if int(a.Interpolation) == 0:
            return a.Value
        if int(a.Interpolation) == 1:
            return a.Value + (b.Value - a.Value) * (t - t0) / span
        right = self._slopes(k)[1]
        left = self._slopes(k + 1)[0]
        w_right = a.RightTangentWeight if int(a.TangentWeightMode) & 1 else 1 / 3
        w_left = a.NextLeftTangentWeight if int(a.TangentWeightMode) & 2 else 1 / 3
        if w_right == w_left == 1 / 3:  # unweighted: the cubic Hermite in time
            u = (t - t0) / span
            h00, h10 = 2 * u**3 - 3 * u**2 + 1, u**3 - 2 * u**2 + u
            h01, h11 = -2 * u**3 + 3 * u**2, u**3 - u**2
            return h00 * a.Value + h10 * span * right + h01 * b.Value + h11 * span * left
        return bezier_at([[t0, a.Value], [t0 + w_right * span, a.Value + w_right * span * right],
                          [t1 - w_left * span, b.Value - w_left * span * left],
                          [t1, b.Value]], t)


def _broken(key: FBFCurveKey) -> bool:
    return key.TangentBreak or int(key.TangentMode) == 3


class FBAnimationNode:
    __slots__ = ("Name", "Nodes", "FCurve")

    def __init__(self, name: str, owner: FBPropertyAnimatableVector3d | None = None,
                 children: int = 0) -> None:
        self.Name = name
        self.Nodes = [FBAnimationNode("XYZ"[i], owner) for i in range(children)]
        self.FCurve: FBFCurve | None = None
        if not children:
            self.FCurve = FBFCurve()
            self.FCurve._owner = owner


# --------------------------------------------------------------------------- properties
class FBPropertyAnimatableVector3d:
    """``Translation``/``Rotation``/``Scaling`` of a model (local values)."""

    __slots__ = ("Name", "_model", "_static", "_nodes", "_locked", "_member_locked")

    def __init__(self, model: FBModel, name: str, values: Sequence[float]) -> None:
        self.Name, self._model = name, model
        self._static = [float(v) for v in values]
        self._nodes: dict[FBAnimationLayer, FBAnimationNode] = {}  # layer -> node
        self._locked = False
        self._member_locked = [False, False, False]

    def _locked_for(self, curve: FBFCurve) -> bool:
        if self._locked:
            return True
        for node in self._nodes.values():
            for axis, child in enumerate(node.Nodes):
                if child.FCurve is curve:
                    return self._member_locked[axis] or _layer_of(node, self).Lock
        return False

    def IsAnimated(self) -> bool:
        _call("FBProperty.IsAnimated")
        return scene.take.layers[0] in self._nodes

    def SetAnimated(self, State: bool, /) -> None:
        _call("FBProperty.SetAnimated")
        _expect(State, bool, "FBProperty.SetAnimated")
        base = scene.take.layers[0]
        if State and base not in self._nodes:
            self._nodes[base] = FBAnimationNode(self.Name, self, 3)
        elif not State:
            self._nodes.clear()

    def GetAnimationNode(self) -> FBAnimationNode | None:
        _call("FBProperty.GetAnimationNode")
        if not self.IsAnimated():
            return None
        layer = scene.take.layers[scene.take.current]
        return self._nodes.setdefault(layer, FBAnimationNode(self.Name, self, 3))

    def IsLocked(self) -> bool:
        _call("FBProperty.IsLocked")
        return self._locked

    def SetLocked(self, Value: bool, /) -> None:
        self._locked = bool(Value)

    def IsMemberLocked(self, Index: int, /) -> bool:
        _call("FBProperty.IsMemberLocked")
        _expect(Index, int, "FBProperty.IsMemberLocked")
        return self._member_locked[Index]

    def SetMemberLocked(self, Index: int, Value: bool, /) -> None:
        self._member_locked[Index] = bool(Value)

    @property
    def Data(self) -> FBVector3d:
        _call("FBProperty.Data")
        return FBVector3d(*self._model._local_values(self.Name, scene.evaluated))

    @Data.setter
    def Data(self, value: Any) -> None:
        self._static = [float(v) for v in value]

    # evaluation helpers
    def _layer_values(self, layer: FBAnimationLayer, ticks: int) -> list[float | None]:
        node = self._nodes.get(layer)
        if node is None:
            return [None, None, None]
        return [c.FCurve._value(ticks) if c.FCurve and c.FCurve.Keys else None
                for c in node.Nodes]

    def _composite(self, ticks: int) -> list[float]:
        layers = scene.take.layers
        base = self._layer_values(layers[0], ticks)
        values = [b if b is not None else s for b, s in zip(base, self._static, strict=True)]
        for layer in layers[1:]:
            if layer.Mute:
                continue
            mine = self._layer_values(layer, ticks)
            if all(m is None for m in mine):
                continue
            w = layer.Weight / 100.0
            quaternion = (self.Name == "Lcl Rotation" and int(layer.LayerRotationMode) == 1)
            if not quaternion:
                if int(layer.LayerMode) == 0:
                    values = [v + w * (m or 0.0) for v, m in zip(values, mine, strict=True)]
                elif int(layer.LayerMode) == 2:  # override-passthrough: below keeps 1 - w
                    values = [v if m is None else (1 - w) * v + w * m
                              for v, m in zip(values, mine, strict=True)]
                else:  # override: the layer's value, scaled by the weight
                    values = [v if m is None else w * m
                              for v, m in zip(values, mine, strict=True)]
                continue
            order = ORDERS[int(self._model.RotationOrder)]
            below = Rotation.from_euler(order, [values["XYZ".index(a)] for a in order],
                                        degrees=True)
            if int(layer.LayerMode) == 0:  # additive: turn the rotation below by the layer's
                turn = Rotation.from_euler(order, [mine["XYZ".index(a)] or 0.0 for a in order],
                                           degrees=True)
                result = below * Rotation.from_rotvec(turn.as_rotvec() * w)
            else:
                target = Rotation.from_euler(order, [
                    values["XYZ".index(a)] if mine["XYZ".index(a)] is None
                    else mine["XYZ".index(a)] for a in order], degrees=True)
                if int(layer.LayerMode) == 2:  # passthrough: from below towards the layer's
                    delta = below.inv() * target
                    result = below * Rotation.from_rotvec(delta.as_rotvec() * w)
                else:  # override: the layer's rotation, scaled by the weight
                    result = Rotation.from_rotvec(target.as_rotvec() * w)
            angles = result.as_euler(order, degrees=True)
            values = [float(angles[order.index(a)]) for a in "XYZ"]
        return values


def _layer_of(node: FBAnimationNode, prop: FBPropertyAnimatableVector3d) -> FBAnimationLayer:
    for layer in scene.take.layers:
        if prop._nodes.get(layer) is node:
            return layer
    return scene.take.layers[0]


#: FBModelRotationOrder → scipy intrinsic order (kFBEulerXYZ applies X first: R = Rz·Ry·Rx).
ORDERS = {0: "ZYX", 1: "YZX", 2: "XZY", 3: "ZXY", 4: "YXZ", 5: "XYZ"}


def _xyz(angles: Sequence[float]) -> np.ndarray:
    """Pre/post rotation matrix: always XYZ order (R = Rz·Ry·Rx)."""
    return Rotation.from_euler("ZYX", list(angles)[::-1], degrees=True).as_matrix()


# --------------------------------------------------------------------------- models
class FBModel:
    _fields = ("Name", "LongName", "Show", "RotationActive", "PreRotation", "PostRotation",
               "RotationOrder", "QuaternionInterpolate")

    def __init__(self, Name: str, /) -> None:
        _expect(Name, str, f"{type(self).__name__}.__init__")
        d = self.__dict__
        d["Name"] = d["LongName"] = Name
        d["Show"] = False
        d["_parent"] = None
        d["Children"] = []
        d["_translation"] = FBPropertyAnimatableVector3d(self, "Lcl Translation", (0, 0, 0))
        d["_rotation"] = FBPropertyAnimatableVector3d(self, "Lcl Rotation", (0, 0, 0))
        d["_scaling"] = FBPropertyAnimatableVector3d(self, "Lcl Scaling", (1, 1, 1))
        d["RotationOrder"] = FBModelRotationOrder.kFBEulerXYZ
        d["RotationActive"] = False
        d["PreRotation"] = FBVector3d()
        d["PostRotation"] = FBVector3d()
        d["QuaternionInterpolate"] = False
        #: a stand-in for constraints, relations, IK or a character's input: a function of
        #: (property name, ticks) returning local values that override the curves
        d["_driver"] = None
        scene.models.append(self)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "RotationOrder":
            _expect(value, FBModelRotationOrder, "FBModel.RotationOrder")
        elif name in ("PreRotation", "PostRotation"):
            value = FBVector3d(*value)
        elif name in ("Translation", "Rotation", "Scaling"):
            getattr(self, name).Data = value
            return
        elif name in ("Parent", "Selected"):
            object.__setattr__(self, name, value)
            return
        elif name not in self._fields:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        self.__dict__[name] = value

    @property
    def Translation(self) -> FBPropertyAnimatableVector3d:
        return self.__dict__["_translation"]

    @property
    def Rotation(self) -> FBPropertyAnimatableVector3d:
        return self.__dict__["_rotation"]

    @property
    def Scaling(self) -> FBPropertyAnimatableVector3d:
        return self.__dict__["_scaling"]

    @property
    def Parent(self) -> FBModel | None:
        return self.__dict__["_parent"]

    @Parent.setter
    def Parent(self, parent: FBModel | None) -> None:
        old = self.__dict__["_parent"]
        if old is not None:
            old.Children.remove(self)
        self.__dict__["_parent"] = parent
        if parent is not None:
            parent.Children.append(self)

    @property
    def Selected(self) -> bool:
        return self in scene.selection

    @Selected.setter
    def Selected(self, value: bool) -> None:
        if value and self not in scene.selection:
            scene.selection.append(self)
        elif not value and self in scene.selection:
            scene.selection.remove(self)

    def _local_values(self, name: str, ticks: int) -> list[float]:
        driver = self.__dict__["_driver"]
        if driver is not None:
            driven = driver(name, ticks)
            if driven is not None:
                return list(driven)
        prop = {"Lcl Translation": self.Translation, "Lcl Rotation": self.Rotation,
                "Lcl Scaling": self.Scaling}[name]
        return prop._composite(ticks)

    def _local_matrix(self, ticks: int) -> np.ndarray:
        order = int(self.RotationOrder)
        if order == 6:
            raise NotImplementedError("the fake does not model spheric rotation order")
        angles = self._local_values("Lcl Rotation", ticks)
        rotate = Rotation.from_euler(ORDERS[order], [angles["XYZ".index(a)]
                                                     for a in ORDERS[order]],
                                     degrees=True).as_matrix()
        if self.RotationActive:
            rotate = _xyz(self.PreRotation) @ rotate @ _xyz(self.PostRotation).T
        matrix = np.eye(4)
        matrix[:3, :3] = rotate @ np.diag(self._local_values("Lcl Scaling", ticks))
        matrix[:3, 3] = self._local_values("Lcl Translation", ticks)
        return matrix

    def _world_matrix(self, ticks: int) -> np.ndarray:
        local = self._local_matrix(ticks)
        return local if self.Parent is None else self.Parent._world_matrix(ticks) @ local

    def GetVector(self, Vector: FBVector3d, What: Any = None, GlobalInfo: bool = True,
                  EvaluateInfo: Any = None, /) -> None:
        _call("FBModel.GetVector")
        what = FBModelTransformationType.kModelTranslation if What is None else What
        _expect(Vector, FBVector3d, "FBModel.GetVector(Vector)")
        _expect(what, FBModelTransformationType, "FBModel.GetVector(What)")
        _expect(GlobalInfo, bool, "FBModel.GetVector(GlobalInfo)")
        if int(what) != 2:
            raise NotImplementedError("the fake models translation vectors only")
        matrix = (self._world_matrix(scene.evaluated) if GlobalInfo
                  else self._local_matrix(scene.evaluated))
        for i in range(3):
            Vector[i] = float(matrix[i, 3])

    def GetMatrix(self, Matrix: FBMatrix, What: Any = None, GlobalInfo: bool = True,
                  EvaluateInfo: Any = None, /) -> None:
        _call("FBModel.GetMatrix")
        what = FBModelTransformationType.kModelTransformation if What is None else What
        _expect(Matrix, FBMatrix, "FBModel.GetMatrix(Matrix)")
        _expect(what, FBModelTransformationType, "FBModel.GetMatrix(What)")
        if int(what) != 0:
            raise NotImplementedError("the fake models the transformation matrix only")
        matrix = (self._world_matrix(scene.evaluated) if GlobalInfo
                  else self._local_matrix(scene.evaluated))
        for i, value in enumerate(matrix.ravel(order="F")):
            Matrix[i] = float(value)


class FBModelSkeleton(FBModel):
    pass


class FBModelNull(FBModel):
    pass


class FBCharacter:
    """A character; ``ActiveInput`` True means a control rig or another source drives it."""

    __slots__ = ("Name", "LongName", "ActiveInput")

    def __init__(self, Name: str, /) -> None:
        self.Name = self.LongName = Name
        self.ActiveInput = False
        scene.characters.append(self)


class FBModelList(list):
    pass


# --------------------------------------------------------------------------- layers and takes
class FBAnimationLayer:
    __slots__ = ("Name", "_mode", "Weight", "Mute", "Lock", "_rotation_mode", "_base")

    def __init__(self, name: str, base: bool = False) -> None:
        self.Name, self._base = name, base
        self._mode = FBLayerMode.kFBLayerModeAdditive
        self.Weight, self.Mute, self.Lock = 100.0, False, False
        # MotionBuilder's default for new layers: rotations per layer (quaternions); a user
        # can change the default in the UI (scene.layer_rotation_default)
        self._rotation_mode = FBLayerRotationMode(1 if base else scene.layer_rotation_default)

    @property
    def LayerMode(self) -> Any:
        return self._mode

    @LayerMode.setter
    def LayerMode(self, value: Any) -> None:
        _expect(value, FBLayerMode, "FBAnimationLayer.LayerMode")
        if self._base:
            raise RuntimeError("LayerMode cannot be applied to the BaseAnimation layer")
        self._mode = value

    @property
    def LayerRotationMode(self) -> Any:
        return self._rotation_mode

    def GetLayerIndex(self) -> int:
        return scene.take.layers.index(self)


class FBTake:
    __slots__ = ("Name", "layers", "current", "marks", "LocalTimeSpan")

    def __init__(self, name: str = "Take 001") -> None:
        self.Name = name
        self.layers = [FBAnimationLayer("BaseAnimation", base=True)]
        self.current = 0
        self.marks: list[dict[str, Any]] = []
        self.LocalTimeSpan = FBTimeSpan(_time(0), _time(0))

    def CreateNewLayer(self) -> None:
        _call("FBTake.CreateNewLayer")
        self.layers.append(FBAnimationLayer(f"AnimLayer{len(self.layers)}"))

    def GetLayerCount(self) -> int:
        _call("FBTake.GetLayerCount")
        return len(self.layers)

    def GetLayer(self, Index: int, /) -> FBAnimationLayer:
        _call("FBTake.GetLayer")
        _expect(Index, int, "FBTake.GetLayer")
        return self.layers[Index]

    def GetLayerByName(self, Name: str, /) -> FBAnimationLayer | None:
        _call("FBTake.GetLayerByName")
        return next((layer for layer in self.layers if layer.Name == Name), None)

    def SetCurrentLayer(self, Index: int, /) -> None:
        _call("FBTake.SetCurrentLayer")
        _expect(Index, int, "FBTake.SetCurrentLayer")
        if not 0 <= Index < len(self.layers):
            raise IndexError(f"no layer {Index}")
        self.current = Index

    def GetCurrentLayer(self) -> int:
        return self.current

    def RemoveLayer(self, Index: int, /) -> None:
        _call("FBTake.RemoveLayer")
        _expect(Index, int, "FBTake.RemoveLayer")
        if Index == 0:
            return  # BaseAnimation cannot be removed
        layer = self.layers.pop(Index)
        for model in scene.models:
            for prop in (model.Translation, model.Rotation, model.Scaling):
                prop._nodes.pop(layer, None)
        if self.current >= len(self.layers):
            self.current = 0

    def AddTimeMark(self, Time: FBTime, /) -> int:
        """No mark at the time of another (-1); the marks kept in time order, so a mark added
        before others moves their indices (the stub's docstring)."""
        _call("FBTake.AddTimeMark")
        _expect(Time, FBTime, "FBTake.AddTimeMark")
        ticks = Time.Get()
        times = [mark["time"].Get() for mark in self.marks]
        if ticks in times:
            return -1
        index = sum(t < ticks for t in times)
        self.marks.insert(index, {"time": _time(ticks), "name": "", "color": None})
        return index

    def _mark(self, Index: int, what: str) -> dict[str, Any]:
        if not 0 <= Index < len(self.marks):  # (-1 would be the last one in a Python list)
            raise IndexError(f"FBTake.{what}: no time mark {Index}")
        return self.marks[Index]

    def SetTimeMarkName(self, Index: int, Name: str, /) -> bool:
        self._mark(Index, "SetTimeMarkName")["name"] = Name
        return True

    def SetTimeMarkColor(self, Index: int, Color: FBColor, /) -> bool:
        _expect(Color, FBColor, "FBTake.SetTimeMarkColor")
        self._mark(Index, "SetTimeMarkColor")["color"] = tuple(Color)
        return True

    def GetTimeMarkCount(self) -> int:
        return len(self.marks)

    def GetTimeMarkName(self, Index: int, /) -> str:
        return self.marks[Index]["name"]

    def GetTimeMarkTime(self, Index: int, /) -> FBTime:
        return _time(self.marks[Index]["time"].Get())

    def DeleteTimeMark(self, Index: int, /) -> bool:
        del self.marks[Index]
        return True


# --------------------------------------------------------------------------- scene, system
class _State:
    def __init__(self, mode: int = 11, custom_fps: float = 0.0) -> None:
        self.mode = FBTimeMode(mode)
        self.custom_fps = custom_fps
        self.time = 0  # ticks of the player (LocalTime)
        self.evaluated = 0  # ticks the scene was last evaluated at (what models report)
        self.models: list[FBModel] = []
        self.selection: list[FBModel] = []
        self.take = FBTake()
        self.undo: list[str] = []  # closed transactions, oldest first
        self.transaction: str | None = None
        self.progress: list[dict[str, Any]] = []
        self.cancel_at: int | None = None  # a user pressing Esc at this Percent
        self.characters: list[Any] = []
        self.layer_rotation_default = 1  # per layer (quaternions)


scene = _State()


def reset(fps: float = 30.0, mode: Any = None) -> None:
    """A new empty scene at ``fps`` (the standard mode of that rate, else a custom rate)."""
    global scene
    if mode is None:
        standard = [m for m, r in RATES.items() if abs(float(r) - fps) < 1e-9 and m != 12]
        mode, custom = (standard[0], 0.0) if standard else (17, float(fps))
    else:
        custom = 0.0
    scene = _State(int(mode), custom)
    calls.clear()


class _Root:
    @property
    def Children(self) -> list[FBModel]:
        return [m for m in scene.models if m.Parent is None]


class FBScene:
    RootModel = _Root()

    def Evaluate(self) -> None:
        _call("FBScene.Evaluate")
        scene.evaluated = scene.time

    @property
    def Characters(self) -> list[Any]:
        return list(scene.characters)


class FBSystem:
    @property
    def CurrentTake(self) -> FBTake:
        return scene.take

    @property
    def Scene(self) -> FBScene:
        return FBScene()

    @property
    def LocalTime(self) -> FBTime:
        return _time(scene.time)

    def GetPythonStartupPath(self) -> list[str]:
        """The user and install PythonStartup folders, then MOTIONBUILDER_PYTHON_STARTUP."""
        extra = [p for p in os.environ.get("MOTIONBUILDER_PYTHON_STARTUP", "").split(os.pathsep)
                 if p]
        return ["<UserConfigDir>/config/PythonStartup", "<MoBuInstDir>/bin/config/PythonStartup",
                *extra]


class FBPlayerControl:
    def GetTransportFps(self) -> Any:
        _call("FBPlayerControl.GetTransportFps")
        return scene.mode

    def GetTransportFpsValue(self, TimeMode: Any = None, /) -> float:
        _call("FBPlayerControl.GetTransportFpsValue")
        mode = int(scene.mode) if TimeMode is None or int(TimeMode) == 0 else int(TimeMode)
        return scene.custom_fps if mode == 17 else float(RATES[mode])

    def SetTransportFps(self, TimeMode: Any, Custom: float = 0.0, /) -> None:
        _call("FBPlayerControl.SetTransportFps")
        _expect(TimeMode, FBTimeMode, "FBPlayerControl.SetTransportFps")
        scene.mode, scene.custom_fps = TimeMode, float(Custom)

    def Goto(self, Time: FBTime, TimeReferential: Any = None, /) -> bool:
        _call("FBPlayerControl.Goto")
        _expect(Time, FBTime, "FBPlayerControl.Goto")
        scene.time = Time.Get()
        return True


class FBUndoManager:
    def TransactionBegin(self, TransactionName: str, /) -> bool:
        _call("FBUndoManager.TransactionBegin")
        _expect(TransactionName, str, "FBUndoManager.TransactionBegin")
        if scene.transaction is not None:
            return False
        scene.transaction = TransactionName
        return True

    def TransactionIsOpen(self) -> bool:
        return scene.transaction is not None

    def TransactionEnd(self) -> bool:
        _call("FBUndoManager.TransactionEnd")
        if scene.transaction is None:
            return False
        scene.undo.append(scene.transaction)
        scene.transaction = None
        return True

    def TransactionAddProperty(self, Property: Any, /) -> bool:
        return scene.transaction is not None

    def TransactionAddModelTRS(self, Model: FBModel, /) -> bool:
        _call("FBUndoManager.TransactionAddModelTRS")
        _expect(Model, FBModel, "FBUndoManager.TransactionAddModelTRS")
        return scene.transaction is not None

    def Undo(self, NoRedo: bool = False, /) -> None:
        if scene.undo:
            scene.undo.pop()

    def Clear(self) -> bool:
        scene.undo.clear()
        return True


class FBProgress:
    """A progress bar; ``scene.cancel_at`` makes the user press Esc at that percentage."""

    def __init__(self) -> None:
        self.__dict__["_record"] = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in ("Caption", "Text", "Percent"):
            raise AttributeError(f"'FBProgress' object has no attribute {name!r}")
        record = self.__dict__["_record"]
        if name in ("Text", "Percent") and record is None:
            raise RuntimeError(f"FBProgress.{name} must be set between ProgressBegin() and "
                               "ProgressDone()")
        if name == "Percent":
            _expect(value, int, "FBProgress.Percent")
        if record is not None:
            record[name] = value
        self.__dict__[name] = value

    def ProgressBegin(self) -> None:
        _call("FBProgress.ProgressBegin")
        record = {"Caption": self.__dict__.get("Caption", ""), "Percent": 0, "done": False}
        self.__dict__["_record"] = record
        scene.progress.append(record)

    def ProgressDone(self) -> None:
        _call("FBProgress.ProgressDone")
        if self.__dict__["_record"] is not None:
            self.__dict__["_record"]["done"] = True
        self.__dict__["_record"] = None

    def UserRequestCancell(self) -> bool:
        record = self.__dict__["_record"]
        if record is None:
            raise RuntimeError("UserRequestCancell must be called between ProgressBegin() and "
                               "ProgressDone()")
        return scene.cancel_at is not None and record["Percent"] >= scene.cancel_at


saved: dict[str, _State] = {}  # "files" on the fake disk


class FBApplication:
    def FileNew(self, AskUser: bool = False, ClearSceneName: bool = False, /) -> bool:
        reset(0.0, scene.mode) if int(scene.mode) != 17 else reset(scene.custom_fps)
        return True

    def FileOpen(self, Filename: str, ShowUIMsg: bool = False, Options: Any = None, /) -> bool:
        global scene
        _expect(Filename, str, "FBApplication.FileOpen")
        if Filename not in saved:
            return False
        scene = copy.deepcopy(saved[Filename])
        return True

    def FileSave(self, Filename: str | None = None, Options: Any = None, /) -> bool:
        if Filename is None:
            return False
        saved[Filename] = copy.deepcopy(scene)
        with open(Filename, "w") as handle:  # a marker file on the real disk
            handle.write("; fake FBX\n")
        return True


def FBGetSelectedModels(ModelList: FBModelList, /) -> None:
    _expect(ModelList, FBModelList, "FBGetSelectedModels")
    ModelList.extend(scene.selection)


def FBFindModelByLabelName(Name: str, /) -> FBModel | None:
    _call("FBFindModelByLabelName")
    _expect(Name, str, "FBFindModelByLabelName")
    return next((m for m in scene.models if m.LongName == Name), None)


# --------------------------------------------------------------------------- test helpers
def key_base(prop: FBPropertyAnimatableVector3d, axis: int, frames: Sequence[int],
             values: Sequence[float]) -> None:
    """Key the BaseAnimation curve of one axis on whole frames, linear (like dense mocap)."""
    base = scene.take.layers[0]
    node = prop._nodes.setdefault(base, FBAnimationNode(prop.Name, prop, 3))
    curve = node.Nodes[axis].FCurve
    per_frame = ticks_per_frame(int(scene.mode), scene.custom_fps)
    for frame, value in zip(frames, values, strict=True):
        curve._insert(_time(int(frame) * per_frame), float(value),
                      FBInterpolation.kFBInterpolationLinear, FBTangentMode.kFBTangentModeAuto)


def frame_ticks(frame: int) -> int:
    """Ticks of a whole frame at the scene's rate."""
    return int(frame) * ticks_per_frame(int(scene.mode), scene.custom_fps)

