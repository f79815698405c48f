"""In-host self-test for MotionBuilder (menu item, or run from the Python editor).

Builds a skeleton from the bundled clip in a new scene (keys on every frame from 1001 at the
transport rate), analyses, applies with a residual layer, checks that the override layer alone
gives the reduced curves and that with the residual the joints are where they were, removes the
layers and checks the scene is back, printing PASS or FAIL per step. It replaces the open scene:
save your work first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mobu_plugin.host import ROTATE_ORDERS, MobuHost, fb
from sp_core.host import run_self_test
from sp_core.io.bvh import read_bvh
from sp_core.session import Session

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cmu_131_01.bvh"
FIRST = 1001
FRAMES = 90
TOLERANCE = 1e-2  # scene units: FBX-style weights are stored with 4 decimals


def build_scene(host: MobuHost) -> list[str]:
    """Skeleton models for the sample clip keyed on every frame; returns their names."""
    clip = read_bvh(SAMPLE).sub_range(0, FRAMES - 1)
    fb.FBApplication().FileNew()
    orders = {v: k for k, v in ROTATE_ORDERS.items()}
    models: dict[str, Any] = {}
    for i, name in enumerate(clip.node_names):
        model = fb.FBModelSkeleton(name)
        if clip.parents[i] >= 0:
            model.Parent = models[clip.node_names[clip.parents[i]]]
        model.Show = True
        model.RotationOrder = fb.FBModelRotationOrder(orders[clip.rotation_orders[i] or "ZYX"])
        model.Translation = fb.FBVector3d(*clip.offsets[i])
        models[name] = model
    for c, channel in enumerate(clip.channel_names):
        node, _, attribute = channel.rpartition(".")
        prop = models[node].Translation if attribute.endswith("position") else \
            models[node].Rotation
        prop.SetAnimated(True)
        curve = prop.GetAnimationNode().Nodes["XYZ".index(attribute[0])].FCurve
        for row in range(FRAMES):
            curve.KeyAdd(host.time_of(FIRST + row), float(clip.channels[row, c]),
                         fb.FBInterpolation.kFBInterpolationLinear)
    take = fb.FBSystem().CurrentTake
    take.LocalTimeSpan = fb.FBTimeSpan(host.time_of(FIRST), host.time_of(FIRST + FRAMES - 1))
    for model in models.values():
        model.Selected = False
    models[clip.node_names[0]].Selected = True
    return list(clip.node_names)


def run(report: Callable[[str], None] = print) -> bool:
    """Run every step; True when all pass."""
    host = MobuHost()
    state: dict[str, Any] = {}
    frames = list(range(FIRST, FIRST + FRAMES))

    def setup() -> str | None:
        state["names"] = build_scene(host)
        state["positions"] = host.world_positions(state["names"], frames)
        return None

    def analyse() -> str | None:
        session = Session(host)
        session.analyze()
        session.set_k(12)
        state["session"] = session
        return None

    def apply() -> str | None:
        session = state["session"]
        session.reduction.space = "channel"
        session.reduction.residual = True
        state["reduction"] = session.apply()
        return None if len(session.applied) == 2 else f"{len(session.applied)} layers made"

    def with_residual() -> str | None:
        error = np.abs(host.world_positions(state["names"], frames) - state["positions"]).max()
        return None if error < TOLERANCE else f"joints moved by up to {error:.4g} units"

    def override_alone() -> str | None:
        take = fb.FBSystem().CurrentTake
        residual = take.GetLayerByName(state["session"].applied[1].name)
        residual.Mute = True
        try:
            curves = state["reduction"].curves
            expected = curves.evaluate(frames)
            names = [n for n, a in zip(curves.channel_names, curves.animated, strict=True)
                     if a and n not in host.skipped]
            got = host.channel_values(names, frames[0], frames[-1])
            columns = [curves.channel_names.index(n) for n in names]
            error = np.abs(got - expected[:, columns]).max()
        finally:
            residual.Mute = False
        return None if error < TOLERANCE else f"override differs from the curves by {error:.4g}"

    def remove() -> str | None:
        state["session"].remove()
        error = np.abs(host.world_positions(state["names"], frames) - state["positions"]).max()
        count = fb.FBSystem().CurrentTake.GetLayerCount()
        if count != 1:
            return f"{count - 1} layers left"
        return None if error < 1e-6 else f"scene differs from before by {error:.4g}"

    steps = (("build a skeleton from the sample clip (frames 1001+)", setup),
             ("analyse the selection", analyse),
             ("apply 12 keys with a residual layer", apply),
             ("base + override + residual = original joint positions", with_residual),
             ("override layer alone = the reduced curves", override_alone),
             ("removing the layers restores the scene", remove))
    return run_self_test(steps, report, essential=3)


if __name__ in ("__main__", "__builtin__", "builtins"):
    run()
