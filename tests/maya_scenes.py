"""Maya fake scenes built from a clip, shared by the Maya tests and the cross-front test."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_maya"))
from maya import testing  # noqa: E402  (the fake)
from maya._scene import STATE  # noqa: E402

from maya_plugin.host import ROTATE_ORDERS  # noqa: E402

LOCKED = "LeftWrist.rotateY"
ENGINE = {"Xposition": "translateX", "Yposition": "translateY", "Zposition": "translateZ",
          "Xrotation": "rotateX", "Yrotation": "rotateY", "Zrotation": "rotateZ"}


def build_scene(clip, time_unit="film", first=1001, frames=121, orients=False,
                linear_unit="cm"):
    """The sample skeleton as Maya joints keyed on every frame from ``first``."""
    testing.reset(time_unit)
    STATE.scene.linear_unit = linear_unit
    cm = {"cm": 1.0, "m": 100.0}[linear_unit]
    part = clip.sub_range(0, frames - 1)
    rng = np.random.default_rng(7)
    for i, name in enumerate(part.node_names):
        parent = part.node_names[part.parents[i]] if part.parents[i] >= 0 else None
        order = part.rotation_orders[i] or "ZYX"
        orient = tuple(rng.uniform(-40, 40, 3)) if orients and parent else (0.0, 0.0, 0.0)
        testing.create_node(name, parent, translate=part.offsets[i] * cm, orient_degrees=orient,
                            rotate_order=ROTATE_ORDERS.index(order))
    times = np.arange(first, first + frames)
    for c, channel in enumerate(part.channel_names):
        node, _, attribute = channel.rpartition(".")
        values = part.channels[:, c]
        values = np.radians(values) if "rotation" in attribute else values * cm
        testing.key_base(f"{node}.{ENGINE[attribute]}", times, values)
    node, attr = LOCKED.split(".")
    STATE.scene.nodes[node].locked.add(attr)
    STATE.scene.playback = (float(first), float(first + frames - 1))
    STATE.scene.selection = [part.node_names[0]]
    STATE.calls.clear()
    return part, times


def ui_composite(plugs, times):
    """Composite values in engine units (UI linear units, degrees)."""
    values = testing.composite(plugs, times)
    cm = {"cm": 1.0, "m": 100.0}[STATE.scene.linear_unit]
    return np.stack([np.degrees(values[:, i]) if ".rotate" in p else values[:, i] / cm
                     for i, p in enumerate(plugs)], axis=1)
