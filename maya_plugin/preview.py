"""Keyframe markers on Maya's time slider.

Maya 2023+ draws custom primitives on the time slider through ``MTimeSliderCustomDrawManager``,
a singleton (C++ reference). C++ reaches it with ``instance()``; the Python API 2.0 class has no
``instance`` (py_ref member list; maya-stubs) and is constructed, like Autodesk's Python example
for its sibling ``MSequencerCustomDrawManager()``; its methods are instance methods, so calling
them on the class fails (the old bug). The markers are UI only: neither saved nor
on the undo queue. In batch (``mayapy``) there is no time slider and the preview does nothing;
the panel's graph and keyframe list still show K.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DRAW_NAME = "salientPosesKeys"
_state: dict[str, Any] = {"id": None}


def _manager() -> Any:
    """The time-slider draw manager, or None where there is none (batch, Maya < 2023)."""
    from maya import cmds

    if cmds.about(batch=True):
        return None
    from maya.api import OpenMayaUI

    if not hasattr(OpenMayaUI, "MTimeSliderCustomDrawManager"):  # Maya < 2023
        return None
    return OpenMayaUI.MTimeSliderCustomDrawManager()


def show(frames: Sequence[int], labels: Sequence[str] | None = None) -> None:
    """Draw one flag per frame on the time slider (breakdowns in blue), replacing the previous
    preview. Frames are in the scene's UI time unit."""
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
