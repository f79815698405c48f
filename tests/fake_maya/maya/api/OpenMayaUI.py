"""Fake ``maya.api.OpenMayaUI``: the time-slider custom drawing of Maya 2023+ (see FACTS.md)."""

from __future__ import annotations

from maya._scene import STATE, MayaError


class MTimeSliderDrawPrimitive:
    kFilledRect, kUpperOutline, kFullOutline, kVerticalLine, kBracket, kFrameFlag = range(6)

    def __init__(self, drawType: int, startTime, endTime, color, bottom: float = 0.0,  # noqa: N803
                 height: float = -1.0, priority: int = 0) -> None:
        self.drawType, self.startTime = drawType, startTime
        self.endTime, self.color = endTime, color
        self.tooltip = ""
        self.label = ""


class MTimeSliderCustomDrawManager:
    """The time-slider draw manager. C++ reaches the singleton with ``instance()``; the Python
    API 2.0 class has no ``instance`` (py_ref member list, maya-stubs): constructing it gives the
    manager, whose methods are instance methods, so calling them on the class fails."""

    kAbove, kBelow, kOn = 0, 1, 2
    _shared: MTimeSliderCustomDrawManager | None = None

    def __new__(cls) -> MTimeSliderCustomDrawManager:
        if STATE.batch:
            raise MayaError("(kFailure): the time slider does not exist in batch mode")
        if cls._shared is None:
            cls._shared = super().__new__(cls)
            cls._shared.contexts = {}
        return cls._shared

    def registerCustomDrawOn(self, name: str, drawLayer: int) -> int:  # noqa: N802, N803
        if not isinstance(name, str) or not isinstance(drawLayer, int):
            raise TypeError("registerCustomDrawOn(name: str, drawLayer: int)")
        draw_id = len(self.contexts) + 1
        self.contexts[draw_id] = []
        return draw_id

    def setDrawPrimitives(self, draw_id: int, primitives) -> None:  # noqa: N802
        if draw_id not in self.contexts:
            raise MayaError(f"(kInvalidParameter): no draw context {draw_id}")
        self.contexts[draw_id] = list(primitives)

    def clearDrawPrimitives(self, draw_id: int) -> None:  # noqa: N802
        self.contexts[draw_id] = []

    def requestTimeSliderRedraw(self) -> None:  # noqa: N802
        STATE.ui["redraws"] = STATE.ui.get("redraws", 0) + 1
