"""Keyframe markers on Maya's time slider (HOST_APIS.md §6).

Maya 2023+ draws custom primitives on the time slider (``MTimeSliderCustomDrawManager``); the
markers are UI only, so they are neither saved nor on the undo queue. Without it (older Maya,
batch, no UI) the preview does nothing: the panel's graph and the keyframe list still show K.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DRAW_NAME = "salientPosesKeys"
_state: dict[str, Any] = {"id": None}


def _manager() -> Any:
    """The time-slider draw manager, or None where there is none (batch, Maya < 2023)."""
    try:
        from maya import cmds
        from maya.api import OpenMayaUI

        if cmds.about(batch=True):
            return None
        manager = OpenMayaUI.MTimeSliderCustomDrawManager
        return manager.instance() if hasattr(manager, "instance") else manager
    except (ImportError, AttributeError, RuntimeError):
        return None


def show(frames: Sequence[int], fps: float, labels: Sequence[str] | None = None) -> None:
    """Draw one flag per frame on the time slider (breakdowns in blue), replacing the previous
    preview."""
    manager = _manager()
    if manager is None:
        return
    from maya.api import OpenMaya, OpenMayaUI

    if _state["id"] is None:
        _state["id"] = manager.registerCustomDrawOn(DRAW_NAME, 0)
    unit = OpenMaya.MTime.uiUnit()
    colours = {"breakdown": OpenMaya.MColor((0.43, 0.66, 0.86))}
    default = OpenMaya.MColor((0.96, 0.70, 0.42))
    primitives = []
    for i, frame in enumerate(frames):
        label = labels[i] if labels is not None else "keyframe"
        time = OpenMaya.MTime(float(frame), unit)
        primitive = OpenMayaUI.MTimeSliderDrawPrimitive(
            OpenMayaUI.MTimeSliderDrawPrimitive.kFrameFlag, time, time,
            colours.get(label, default))
        primitive.tooltip = f"Salient Poses {label} {frame}"
        primitives.append(primitive)
    manager.setDrawPrimitives(_state["id"], primitives)
    manager.requestTimeSliderRedraw()


def clear() -> None:
    manager = _manager()
    if manager is None or _state["id"] is None:
        return
    manager.clearDrawPrimitives(_state["id"])
    manager.requestTimeSliderRedraw()
