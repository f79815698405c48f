"""Scenes for the MotionBuilder tests, built on the strict fake ``pyfbsdk`` (tests/fake_mobu)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "fake_mobu"))
import pyfbsdk as fb  # noqa: E402  (the fake)

from mobu_plugin.host import ROTATE_ORDERS  # noqa: E402

ORDER_INDEX = {v: k for k, v in ROTATE_ORDERS.items()}
LOCKED = ("LeftWrist", 1)  # LeftWrist Rotation Y


def build_scene(clip, fps=30.0, first=1001, frames=61, pre_rotations=False,
                post_rotations=False, locked=True, mode=None):
    """The clip's first ``frames`` frames as skeleton models keyed (linear) on every frame
    from ``first``; returns the sub-clip and the frame numbers."""
    fb.reset(fps, mode)
    part = clip.sub_range(0, frames - 1)
    rng = np.random.default_rng(3)
    models = {}
    for i, name in enumerate(part.node_names):
        model = fb.FBModelSkeleton(name)
        if part.parents[i] >= 0:
            model.Parent = models[part.node_names[part.parents[i]]]
        model.RotationOrder = fb.FBModelRotationOrder(ORDER_INDEX[part.rotation_orders[i]
                                                                  or "ZYX"])
        model.Translation = fb.FBVector3d(*part.offsets[i])
        if (pre_rotations or post_rotations) and part.parents[i] >= 0:
            model.RotationActive = True
            if pre_rotations:
                model.PreRotation = fb.FBVector3d(*rng.uniform(-30, 30, 3))
            if post_rotations:
                model.PostRotation = fb.FBVector3d(*rng.uniform(-30, 30, 3))
        models[name] = model
    numbers = first + np.arange(frames)
    for c, channel in enumerate(part.channel_names):
        node, _, attribute = channel.rpartition(".")
        prop = models[node].Translation if attribute.endswith("position") else \
            models[node].Rotation
        fb.key_base(prop, "XYZ".index(attribute[0]), numbers, part.channels[:, c])
    if locked:
        models[LOCKED[0]].Rotation.SetMemberLocked(LOCKED[1], True)
    fb.scene.take.LocalTimeSpan = fb.FBTimeSpan(fb._time(fb.frame_ticks(first)),
                                                fb._time(fb.frame_ticks(first + frames - 1)))
    fb.scene.selection = [models[part.node_names[0]]]
    fb.scene.time = fb.scene.evaluated = fb.frame_ticks(first)
    fb.calls.clear()
    return part, numbers


def model(name):
    return next(m for m in fb.scene.models if m.Name == name)


def composite(name, kind, frames):
    """(n_frames, 3) what the scene shows for a model's Translation or Rotation."""
    prop = model(name).Translation if kind == "position" else model(name).Rotation
    return np.array([prop._composite(fb.frame_ticks(int(f))) for f in frames])


def world(names, frames):
    """(n_frames, n_models, 3) world positions straight from the fake's scene graph."""
    return np.array([[model(n)._world_matrix(fb.frame_ticks(int(f)))[:3, 3] for n in names]
                     for f in frames])


def local_turns(names, frames):
    return np.array([[model(n)._local_matrix(fb.frame_ticks(int(f)))[:3, :3] for n in names]
                     for f in frames])
