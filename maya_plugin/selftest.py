"""In-host self-test: proves the plug-in on this Maya (menu item, or ``mayapy -m
maya_plugin.selftest``).

It builds a new scene from the bundled sample clip (joints keyed on every frame from 1001, at
30 fps), analyses, applies with a residual layer, checks that the composite equals the reduced
curves (override layer alone) and the original (with the residual), undoes and checks the scene
is back, then prints PASS or FAIL per step. Nothing of the user's is touched: it runs in a new
scene (``file -newFile -force``), so save your work first when running it from the menu.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from maya_plugin.host import ENGINE_ATTRIBUTES, ROTATE_ORDERS, MayaHost, cmds
from sp_core.host import run_self_test
from sp_core.io.bvh import read_bvh
from sp_core.session import Session

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cmu_131_01.bvh"
FIRST = 1001
FRAMES = 150
TOLERANCE = 1e-3  # scene units / degrees: keys are stored in single precision by some paths


def build_scene(new_scene: bool = True) -> tuple[list[str], np.ndarray]:
    """Joints for the sample skeleton keyed on every frame; returns (plugs, values)."""
    clip = read_bvh(SAMPLE).sub_range(0, FRAMES - 1)
    if new_scene:
        cmds.file(newFile=True, force=True)
    cmds.currentUnit(time="ntsc")
    cmds.playbackOptions(minTime=FIRST, maxTime=FIRST + FRAMES - 1)
    for i, name in enumerate(clip.node_names):
        parent = clip.node_names[clip.parents[i]] if clip.parents[i] >= 0 else None
        cmds.select(clear=True)
        joint = str(cmds.joint(name=name, position=tuple(clip.offsets[i]), relative=True))
        if parent:
            cmds.parent(joint, parent, relative=True)
        cmds.setAttr(f"{name}.translate", *clip.offsets[i], type="double3")
        order = ROTATE_ORDERS.index(clip.rotation_orders[i] or "ZYX")
        # maya-stubs types every setAttr value as str; Maya takes numbers
        cmds.setAttr(f"{name}.rotateOrder", order)  # type: ignore[arg-type]
    plugs = []
    for c, channel in enumerate(clip.channel_names):
        node, _, attribute = channel.rpartition(".")
        plug = f"{node}.{ENGINE_ATTRIBUTES[attribute]}"
        plugs.append(plug)
        for row in range(FRAMES):
            cmds.setKeyframe(plug, time=FIRST + row, value=float(clip.channels[row, c]))
    cmds.select(clip.node_names[0])
    return plugs, clip.channels


def composite(plugs: list[str]) -> np.ndarray:
    return np.array([[float(cmds.getAttr(p, time=FIRST + row)) for p in plugs]
                     for row in range(FRAMES)])


def run(report: Callable[[str], None] = print) -> bool:
    """Run every step; True when all pass."""
    state: dict = {}

    def setup() -> str | None:
        state["plugs"], state["original"] = build_scene()
        return None

    def analyse() -> str | None:
        session = Session(MayaHost())
        space = session.analyze()
        state["session"] = session
        if space.first_frame != FIRST or space.n_frames != FRAMES:
            return f"analysed frames {space.first_frame}+{space.n_frames}, expected {FIRST}+" \
                   f"{FRAMES}"
        session.set_k(12)
        return None

    def apply() -> str | None:
        session = state["session"]
        session.reduction.residual = True
        session.reduction.space = "channel"
        reduction = session.apply()
        state["reduction"] = reduction
        return None if len(session.applied) == 2 else f"{len(session.applied)} layers made"

    def with_residual() -> str | None:
        error = np.abs(composite(state["plugs"]) - state["original"]).max()
        return None if error < TOLERANCE else f"composite differs from the original by {error}"

    def override_alone() -> str | None:
        residual = state["session"].applied[1].name
        cmds.animLayer(residual, edit=True, mute=True)
        reduction = state["reduction"]
        frames = np.arange(FIRST, FIRST + FRAMES)
        expected = reduction.curves.evaluate(frames)
        columns = [i for i, a in enumerate(reduction.curves.animated) if a]
        plugs = [MayaHost.plug_for(reduction.curves.channel_names[i]) for i in columns]
        error = np.abs(composite(plugs) - expected[:, columns]).max()
        cmds.animLayer(residual, edit=True, mute=False)
        return None if error < TOLERANCE else f"override differs from the curves by {error}"

    def undo() -> str | None:
        cmds.undo()
        layers = cmds.ls(type="animLayer") or []
        left = [layer for layer in layers if "salientPoses" in layer]
        if left:
            return f"layers left after undo: {left}"
        error = np.abs(composite(state["plugs"]) - state["original"]).max()
        return None if error < TOLERANCE else f"scene differs from the original by {error}"

    steps = (("build a scene from the sample clip (30 fps, frames 1001+)", setup),
             ("analyse the selection", analyse),
             ("apply 12 keys with a residual layer (one undo chunk)", apply),
             ("base + override + residual = original on every frame", with_residual),
             ("override layer alone = the reduced curves", override_alone),
             ("one undo removes everything", undo))
    return run_self_test(steps, report, essential=3)


def main() -> int:
    """``mayapy -m maya_plugin.selftest``: start Maya without UI, run, shut down."""
    from maya import standalone

    standalone.initialize(name="python")
    try:
        return 0 if run() else 1
    finally:
        standalone.uninitialize()


if __name__ == "__main__":
    sys.exit(main())
