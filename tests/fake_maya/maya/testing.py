"""Helpers for tests to set up the fake scene directly (not part of Maya's API)."""

from __future__ import annotations

import numpy as np

from maya._scene import AXES, LINEAR, STATE, TIME_NAMES, Curve, Node, State


def reset(time_unit: str = "film", batch: bool = True) -> State:
    """A new empty session (scene, undo queue, call counts, plug-ins)."""
    STATE.__init__()
    STATE.scene.time_unit = TIME_NAMES[time_unit]
    STATE.batch = batch
    from maya.api.OpenMayaUI import MTimeSliderCustomDrawManager

    MTimeSliderCustomDrawManager._shared = None
    return STATE


def create_node(name: str, parent: str | None = None, type: str = "joint",  # noqa: A002
                translate=(0.0, 0.0, 0.0), orient_degrees=(0.0, 0.0, 0.0),
                rotate_order: int = 0) -> None:
    """A transform or joint; translate in cm, orient in degrees (X, then Y, then Z)."""
    attrs = {f"translate{a}": float(v) for a, v in zip(AXES, translate, strict=True)}
    attrs.update({f"rotate{a}": 0.0 for a in AXES})
    attrs.update({f"jointOrient{a}": float(np.radians(v))
                  for a, v in zip(AXES, orient_degrees, strict=True)})
    attrs.update({f"rotateAxis{a}": 0.0 for a in AXES})
    attrs["rotateOrder"] = rotate_order
    STATE.scene.nodes[name] = Node(name, type, parent, attrs)
    STATE.touch()


def key_base(plug: str, frames, values) -> str:
    """Dense base keys (UI frames; values in internal units), linear tangents like mocap."""
    node, attr = plug.split(".")
    name = f"{node}_{attr}"
    curve = Curve("TL" if attr.startswith("translate") else "TA")
    seconds = np.asarray(frames, float) / STATE.scene.fps
    curve.set_keys(seconds, np.asarray(values, float), LINEAR, LINEAR, keep=False)
    STATE.scene.curves[name] = curve
    STATE.scene.inputs[plug] = name
    STATE.touch()
    return name


def composite(plugs, frames) -> np.ndarray:
    """(n_frames, n_plugs) composite values in internal units."""
    seconds = np.asarray(frames, float) / STATE.scene.fps
    return np.stack([STATE.plug_values(p, seconds) for p in plugs], axis=1)
