"""In-host self-test: proves the plug-in on this Maya.

Run it from the menu (Salient Poses > Run Self-Test) or from a shell::

    mayapy /path/to/salient-poses/maya_plugin/selftest.py

It opens a new scene (save your work first), builds joints from the bundled sample clip keyed on
every frame from 1001 at 30 fps, analyses, applies with each tangent mode and once with the
residual layer and once with corrective keys, checks the composite against the engine's curves
on every frame, checks the tangent locks of each mode and that the corrective layer holds only
the engine's few keys per channel, undoes and checks the scene is back, applies once with the
New Curve Default set to quaternion slerp and checks that the layer's rotate curves are Euler
and the preference is put back, times the read and the Apply, and prints PASS or FAIL per step
with the Maya version.

Only the standard library is imported at module level, so that ``mayapy`` can start Maya
(``maya.standalone.initialize``) before numpy, the engine or ``maya.cmds`` are imported.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"
FIRST = 1001
FRAMES = 60
KEYS = 10
MODES = ("unified", "broken", "weighted")
CORRECTIVE = "40"  # corrective keys
TOLERANCE = 1e-3  # scene units / degrees: keys are stored in single precision by some paths


def build_scene(new_scene: bool = True) -> tuple[list[str], Any]:
    """Joints for the sample skeleton keyed on every frame; returns (plugs, values)."""
    from maya import cmds

    from maya_plugin.host import ENGINE_ATTRIBUTES, ROTATE_ORDERS, _euler_curves
    from sp_core.io.bvh import read_bvh

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
    # the scene's curves are Euler whatever the user's New Curve Default (quaternion curves
    # are refused by the analysis)
    with _euler_curves():
        for c, channel in enumerate(clip.channel_names):
            node, _, attribute = channel.rpartition(".")
            plug = f"{node}.{ENGINE_ATTRIBUTES[attribute]}"
            plugs.append(plug)
            for row in range(FRAMES):
                cmds.setKeyframe(plug, time=FIRST + row, value=float(clip.channels[row, c]))
    cmds.select(clip.node_names[0])
    return plugs, clip.channels


def composite(plugs: list[str]) -> Any:
    """Composite values of ``plugs`` on every frame (UI units), by ``getAttr -time``."""
    import numpy as np
    from maya import cmds

    return np.array([[float(cmds.getAttr(p, time=FIRST + row)) for p in plugs]
                     for row in range(FRAMES)])


def tangent_locks(layer: str, plugs: list[str]) -> set[bool]:
    """The lock state of every key of the layer's curves for ``plugs``."""
    from maya import cmds
    from maya.api import OpenMaya, OpenMayaAnim

    states: set[bool] = set()
    for plug in plugs:
        found: Any = cmds.animLayer(layer, query=True, findCurveForPlug=plug)
        selection = OpenMaya.MSelectionList()
        selection.add(str(found[0]))
        fn = OpenMayaAnim.MFnAnimCurve(selection.getDependNode(0))
        states.update(bool(fn.tangentsLocked(i)) for i in range(fn.numKeys))
    return states


def key_counts(layer: str, plugs: list[str]) -> list[int]:
    """How many keys the layer's curve of each plug holds."""
    from maya import cmds
    from maya.api import OpenMaya, OpenMayaAnim

    counts = []
    for plug in plugs:
        found: Any = cmds.animLayer(layer, query=True, findCurveForPlug=plug)
        selection = OpenMaya.MSelectionList()
        selection.add(str(found[0]))
        counts.append(int(OpenMayaAnim.MFnAnimCurve(selection.getDependNode(0)).numKeys))
    return counts


def run(report: Callable[[str], None] = print) -> bool:
    """Run every step; True when all pass."""
    import numpy as np
    from maya import cmds

    from maya_plugin.host import LOCKED_MODES, MayaHost
    from sp_core.host import (
        SELF_TEST_LIMB,
        corrected_reduction,
        limb_check,
        replace_check,
        run_self_test,
    )
    from sp_core.options import Options
    from sp_core.session import Session

    report(f"Maya {cmds.about(version=True)}, Salient Poses self-test")
    state: dict[str, Any] = {}

    def setup() -> str | None:
        state["plugs"], state["original"] = build_scene()
        return None

    def analyse() -> str | None:
        session = Session(MayaHost())
        start = time.perf_counter()
        space = session.analyze()
        report(f"      read and analysed {FRAMES} frames in {time.perf_counter() - start:.2f} s")
        state["session"] = session
        if space.first_frame != FIRST or space.n_frames != FRAMES:
            return f"analysed frames {space.first_frame}+{space.n_frames}, expected " \
                   f"{FIRST}+{FRAMES}"
        session.set_k(KEYS)
        return None

    def apply_mode(mode: str) -> Callable[[], str | None]:
        def check() -> str | None:
            session = state["session"]
            session.set_options(tangents=mode, space="channel", residual_layer=False)
            start = time.perf_counter()
            reduction = session.apply()
            report(f"      Apply ({mode}) took {time.perf_counter() - start:.2f} s")
            curves = reduction.curves
            columns = [i for i, a in enumerate(curves.animated) if a]
            plugs = [MayaHost.plug_for(curves.channel_names[i]) for i in columns]
            frames = np.arange(FIRST, FIRST + FRAMES)
            error = np.abs(composite(plugs) - curves.evaluate(frames)[:, columns]).max()
            locks = tangent_locks(session.applied[0].name, plugs)
            cmds.undo()
            session.applied.clear()
            back = np.abs(composite(state["plugs"]) - state["original"]).max()
            left = [la for la in cmds.ls(type="animLayer") or [] if "salientPoses" in la]
            if error > TOLERANCE:
                return f"composite differs from the engine's curves by {error:.3g}"
            if locks != {LOCKED_MODES[mode]}:
                return f"tangent locks {sorted(locks)}, expected {LOCKED_MODES[mode]}"
            if left or back > TOLERANCE:
                return f"after undo: layers {left}, scene differs by {back:.3g}"
            return None
        return check

    def with_residual() -> str | None:
        session = state["session"]
        session.set_options(residual_layer=True)
        session.apply()
        error = np.abs(composite(state["plugs"]) - state["original"]).max()
        cmds.undo()
        session.applied.clear()
        left = [la for la in cmds.ls(type="animLayer") or [] if "salientPoses" in la]
        if error > TOLERANCE:
            return f"base + override + residual differs from the original by {error:.3g}"
        return f"layers left after undo: {left}" if left else None

    def with_corrections() -> str | None:
        session = state["session"]
        reduction = corrected_reduction(session, FIRST, FRAMES, 4, CORRECTIVE, KEYS)
        if reduction is None:
            return "the corrective stage found nothing to correct"
        corrections = reduction.corrections
        session.apply(reduction)
        curves = reduction.curves
        columns = [i for i, a in enumerate(curves.animated) if a]
        plugs = [MayaHost.plug_for(curves.channel_names[i]) for i in columns]
        frames = np.arange(FIRST, FIRST + FRAMES)
        wanted = (curves.evaluate(frames) + corrections.dense())[:, columns]
        error = np.abs(composite(plugs) - wanted).max()
        corrected = sorted(corrections.keys)
        counts = key_counts(session.applied[1].name,
                            [MayaHost.plug_for(corrections.channel_names[c]) for c in corrected])
        # (with the zero keys that end a correction outside the range)
        given = [len(frames) for frames, _ in corrections.host_keys().values()]
        cmds.undo()
        session.applied.clear()
        session.set_options(corrective_budget=None)
        left = [la for la in cmds.ls(type="animLayer") or [] if "salientPoses" in la]
        if error > TOLERANCE:
            return f"base + override + corrective differs from the engine by {error:.3g}"
        if counts != given:
            return f"corrective curves hold {counts} keys, the engine wrote {given}"
        return f"layers left after undo: {left}" if left else None

    def part() -> str | None:
        # Apply over frames 10-39 of the 60: the override layer's curves hold their end keys
        # outside them, so its weight is keyed to the range; outside it the scene must play
        # the original, inside the engine's curves; Remove must leave nothing (the weight's
        # curve included)
        first, last = FIRST + 10, FIRST + 39
        session = Session(MayaHost(), Options().replace(frame_range=(first, last)))
        session.analyze()
        session.set_k(KEYS // 2)
        session.set_options(space="channel", residual_layer=False)
        curves_before = len(cmds.ls(type="animCurve") or [])
        curves = session.apply().curves
        columns = [i for i, a in enumerate(curves.animated) if a]
        plugs = [MayaHost.plug_for(curves.channel_names[i]) for i in columns]
        original = state["original"][:, [state["plugs"].index(p) for p in plugs]]
        frames = np.arange(FIRST, FIRST + FRAMES)
        inside = (frames >= first) & (frames <= last)
        shown = composite(plugs)
        outside = np.abs(shown[~inside] - original[~inside]).max()
        error = np.abs(shown[inside] - curves.evaluate(frames[inside])[:, columns]).max()
        session.remove()
        back = np.abs(composite(state["plugs"]) - state["original"]).max()
        curves_left = len(cmds.ls(type="animCurve") or []) - curves_before
        if outside > TOLERANCE:
            return f"outside the range the scene differs from the original by {outside:.3g}"
        if error > TOLERANCE:
            return f"inside the range the composite differs from the engine by {error:.3g}"
        if back > TOLERANCE or curves_left:
            return f"after Remove: the scene differs by {back:.3g}, {curves_left} curves left"
        return None

    def joints() -> list[str]:
        return list(dict.fromkeys(plug.rpartition(".")[0] for plug in state["plugs"]))

    def replace() -> str | None:
        nodes = list(state["session"].motion.node_names)
        return replace_check(Session(MayaHost()), MayaHost(), nodes, FIRST, FRAMES, KEYS,
                             TOLERANCE)

    def undo_after_analysis() -> str | None:
        # the layers muted while the motion is read are no undo step of their own
        session = Session(MayaHost())
        session.analyze()
        session.set_k(KEYS)
        session.set_options(space="channel", residual_layer=False)
        session.apply()
        session.analyze()
        cmds.undo()
        left = [la for la in cmds.ls(type="animLayer") or [] if "salientPoses" in la]
        back = np.abs(composite(state["plugs"]) - state["original"]).max()
        if left or back > TOLERANCE:
            return f"after Apply, Analyze and one undo: layers {left}, the scene differs by " \
                   f"{back:.3g}"
        return None

    def quaternion_default() -> str | None:
        # a user's New Curve Default of quaternion slerp: the layer's rotate curves must still
        # be Euler (a quaternion curve ignores the tangents written)
        from maya_plugin.host import (
            NEW_CURVE_ROTATION,
            QUATERNION_MODES,
            _names,
            _rotation_mode,
            option_var,
        )

        session = state["session"]
        session.set_options(tangents="unified", residual_layer=False)
        with option_var(NEW_CURVE_ROTATION, 3):
            reduction = session.apply()
            layer = session.applied[0].name
            curves = reduction.curves
            plugs = [MayaHost.plug_for(n) for n, a in zip(curves.channel_names, curves.animated,
                                                          strict=True) if a]
            modes = set()
            for plug in plugs:
                if ".rotate" in plug:
                    found = _names(cmds.animLayer(layer, query=True, findCurveForPlug=plug))
                    modes.add(_rotation_mode(found[0]))
            kept = cmds.optionVar(query=NEW_CURVE_ROTATION)
            cmds.undo()
            session.applied.clear()
        if modes & set(QUATERNION_MODES) or not modes:
            return f"the layer's rotate curves have {sorted(modes)} interpolation"
        return None if kept == 3 else f"the preference was {kept} after Apply, not 3"

    def limb() -> str | None:
        host = MayaHost()
        limb_session = Session(host, Options().replace(roots=[SELF_TEST_LIMB]))
        return limb_check(limb_session, host, joints(), FIRST, FRAMES, TOLERANCE)

    steps: list[tuple[str, Callable[[], str | None]]] = [
        ("build a scene from the sample clip (30 fps, frames 1001+)", setup),
        ("analyse the selection (read in DG contexts)", analyse)]
    steps += [(f"apply {KEYS} keys, {mode} tangents: composite = engine on every frame, "
               f"locks, one undo restores the scene", apply_mode(mode)) for mode in MODES]
    steps.append(("apply with the residual layer: composite = original; undo", with_residual))
    steps.append((f"apply {CORRECTIVE} corrective keys: a few linear keys per channel, "
                  "composite = engine on every frame; undo", with_corrections))
    steps.append(("apply to frames 10-39 of the 60: the original plays outside them, the "
                  "engine's curves inside; Remove leaves nothing", part))
    steps.append(("apply to the second quarter, analyse from its middle to the end of the third "
                  "and apply replacing it: the analysis reads the motion, not the reduction; "
                  "the original plays outside those frames; Remove", replace))
    steps.append(("apply, analyse again, one undo: the Apply is taken back (reading is no "
                  "undo step)", undo_after_analysis))
    steps.append(("apply with a quaternion New Curve Default: the layer's rotate curves are "
                  "Euler, the preference is put back; undo", quaternion_default))
    steps.append((f"a limb ({SELF_TEST_LIMB}): read in its parent's frame, Apply keys it alone",
                  limb))
    return run_self_test(steps, report, essential=2)


def main() -> int:
    """``mayapy maya_plugin/selftest.py``: start Maya without UI, run, shut down."""
    from maya_plugin.mayapy import bootstrap

    bootstrap()
    from maya import standalone

    try:
        return 0 if run() else 1
    finally:
        standalone.uninitialize()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # so that maya_plugin.mayapy imports; bootstrap tidies up
    sys.exit(main())
