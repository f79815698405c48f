"""In-host self-test for MotionBuilder: the *Salient Poses > Run Self-Test* menu item, the Python
editor (``from mobu_plugin import selftest; selftest.run()``) or a shell
(``mobupy -m mobu_plugin.selftest``).

It replaces the open scene (save your work first): a skeleton is built from the bundled clip at
30 fps, keyed on every frame from 1001; the tool analyses it, applies each tangent mode and
compares what the override layer evaluates to with the engine's curves on every frame (and
that a rotation axis held still at 15 degrees, which the layer keys once, stays there), applies
with the residual and compares the scene's world positions with the original ones on every
frame, then removes the layers and checks the scene is back; it applies corrective keys and
checks that the corrective layer holds a few keys, not one per frame, and that the corrected
channels show base + corrections (rotations exactly on their key frames: in MotionBuilder's
default per layer rotation mode the layer holds turns, linear between the keys); it applies to
a part of the take and checks that the joints outside it play the original motion. It prints
PASS or FAIL per step and the time the read and each Apply took.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from mobu_plugin.host import ROTATE_ORDERS, MobuHost, fb
from sp_core.host import (
    SELF_TEST_LIMB,
    corrected_reduction,
    limb_check,
    replace_check,
    run_self_test,
)
from sp_core.io.bvh import read_bvh
from sp_core.options import Options
from sp_core.session import Session

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cmu_131_01.bvh"
FIRST = 1001
FRAMES = 90
KEYS = 12
TANGENTS = ("unified", "broken", "smooth", "weighted")
TOLERANCE = 1e-3  # scene units / degrees
#: An axis held still at a non-zero angle while its property's other axes move: what an
#: override layer shows on an axis it does not key is not documented, so Apply keys it (once,
#: with its value); the apply steps check that it still shows that value.
STILL, STILL_VALUE = "LeftKnee.Yrotation", 15.0
CORRECTIVE = "60"  # corrective keys
#: The engine's Euler order → the FBModelRotationOrder member of the same rotation.
ORDER_NAMES = {"ZYX": "kFBEulerXYZ", "YZX": "kFBEulerXZY", "XZY": "kFBEulerYZX",
               "ZXY": "kFBEulerYXZ", "YXZ": "kFBEulerZXY", "XYZ": "kFBEulerZYX"}
assert set(ORDER_NAMES) == set(ROTATE_ORDERS.values())


def build_scene(host: MobuHost) -> list[str]:
    """A new scene at 30 fps with skeleton models for the sample clip, keyed on every frame
    from :data:`FIRST`; returns the model names."""
    clip = read_bvh(SAMPLE).sub_range(0, FRAMES - 1)
    fb.FBApplication().FileNew()
    fb.FBPlayerControl().SetTransportFps(fb.FBTimeMode.kFBTimeMode30Frames)
    clock = host.clock()
    times = [fb.FBTime(clock.ticks(FIRST + row)) for row in range(FRAMES)]
    linear = [fb.FBInterpolation.kFBInterpolationLinear] * FRAMES
    models: dict[str, Any] = {}
    for i, name in enumerate(clip.node_names):
        model = fb.FBModelSkeleton(name)
        if clip.parents[i] >= 0:
            model.Parent = models[clip.node_names[clip.parents[i]]]
        model.Show = True
        model.RotationOrder = getattr(fb.FBModelRotationOrder,
                                      ORDER_NAMES[clip.rotation_orders[i] or "ZYX"])
        model.Translation = fb.FBVector3d(*(float(v) for v in clip.offsets[i]))
        models[name] = model
    for c, channel in enumerate(clip.channel_names):
        node, _, attribute = channel.rpartition(".")
        prop = models[node].Translation if attribute.endswith("position") else \
            models[node].Rotation
        prop.SetAnimated(True)
        animation = prop.GetAnimationNode()
        curve = animation.Nodes["XYZ".index(attribute[0])].FCurve
        values = clip.channels[:, c] if channel != STILL else np.full(FRAMES, STILL_VALUE)
        curve.KeysAdd(times, [float(v) for v in values], linear)
    take = fb.FBSystem().CurrentTake
    take.LocalTimeSpan = fb.FBTimeSpan(times[0], times[-1])
    for model in models.values():
        model.Selected = False
    models[clip.node_names[0]].Selected = True
    return list(clip.node_names)


def part_of_the_take() -> tuple[int, int]:
    """The frames the part-of-the-take step analyses and applies to: the middle half."""
    return FIRST + FRAMES // 4, FIRST + 3 * FRAMES // 4 - 1


def _layer_keys(layer: str, nodes: Sequence[str]) -> int:
    """Keys the layer named ``layer`` holds on the Translation and Rotation of ``nodes``."""
    take = fb.FBSystem().CurrentTake
    current = take.GetCurrentLayer()
    take.SetCurrentLayer(next(i for i in range(take.GetLayerCount())
                              if take.GetLayer(i).Name == layer))
    held = 0
    try:  # GetAnimationNode answers for the current layer
        for name in nodes:
            model = fb.FBFindModelByLabelName(name)
            for prop in (model.Translation, model.Rotation):
                animation = prop.GetAnimationNode() if prop.IsAnimated() else None
                if animation is not None:
                    held += sum(len(animation.Nodes[a].FCurve.Keys) for a in range(3))
    finally:
        take.SetCurrentLayer(current)
    return held


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
        started = time.perf_counter()
        motion = host.motion(state["names"][:1], FIRST, FIRST + FRAMES - 1)
        report(f"      read {FRAMES} frames of {motion.n_nodes} models in "
               f"{time.perf_counter() - started:.3f} s")
        session.analyze(motion=motion)
        session.set_k(KEYS)
        session.set_options(space="channel")
        state["session"] = session
        order = [state["names"].index(n) for n in motion.node_names]
        error = np.abs(motion.positions - state["positions"][:, order]).max()
        return None if error < TOLERANCE else \
            f"the tool's kinematics differ from the scene by {error:.4g} units"

    def apply(tangents: str) -> Callable[[], str | None]:
        def check() -> str | None:
            session = state["session"]
            session.set_options(tangents=tangents, residual_layer=False)
            started = time.perf_counter()
            reduction = session.apply()
            report(f"      Apply ({tangents}) took {time.perf_counter() - started:.3f} s")
            try:
                curves = reduction.curves
                names = [n for n, a in zip(curves.channel_names, curves.animated, strict=True)
                         if a and n not in host.skipped]
                got = host.channel_values(names, frames[0], frames[-1])
                columns = [curves.channel_names.index(n) for n in names]
                error = np.abs(got - curves.evaluate(frames)[:, columns]).max()
                still = np.abs(host.channel_values([STILL], frames[0], frames[-1])
                               - STILL_VALUE).max()
            finally:
                session.remove()
            if still >= TOLERANCE:
                return f"{STILL}, still at {STILL_VALUE:g}, is {still:.4g} off after Apply"
            return None if error < TOLERANCE else \
                f"the override layer differs from the curves by {error:.4g}"
        return check

    def with_residual() -> str | None:
        session = state["session"]
        session.set_options(tangents="unified", residual_layer=True)
        session.apply()
        error = np.abs(host.world_positions(state["names"], frames)
                       - state["positions"]).max()
        return None if error < TOLERANCE else f"joints moved by up to {error:.4g} units"

    def with_corrections() -> str | None:
        session = state["session"]
        reduction = corrected_reduction(session, FIRST, FRAMES, 5, CORRECTIVE, KEYS)
        if reduction is None:
            return "the corrective stage found nothing to correct"
        corrections = reduction.corrections
        motion = session.motion
        wanted = reduction.reduced + corrections.dense()
        corrected = corrections.host_keys()  # (zero keys outside the range end them)
        joints = sorted({c.rpartition(".")[0] for c in corrected if c.endswith("rotation")})
        session.apply(reduction)
        try:
            held = _layer_keys(session.applied[1].token, motion.node_names)
            names = [c for c in corrected if c.endswith("position")] + [
                f"{j}.{a}rotation" for j in joints
                for a in motion.rotation_orders[motion.node_index(j)]]
            got = host.channel_values(names, FIRST, FIRST + FRAMES - 1)
            shown = host.world_positions(motion.node_names, frames)
        finally:
            session.remove()
            session.set_options(corrective_budget=None)
        off = float(np.linalg.norm(shown - motion.forward_kinematics(wanted), axis=-1).max())
        report(f"      {corrections.n_keys} corrective keys, the layer holds {held}; joints "
               f"within {off:.3g} units of the engine's corrected motion on every frame")
        written = sum(len(frames) for frames, _ in corrected.values())
        if not 0 < held <= 3 * written:  # a turn keys a joint's three axes
            return f"the corrective layer holds {held} keys for the engine's {written}"
        for c, name in enumerate(names):
            if name.endswith("position"):
                error = np.abs(got[:, c] - wanted[:, motion.channel_names.index(name)]).max()
                if error > TOLERANCE:
                    return f"{name} differs from base + corrections by {error:.4g}"
        for joint in joints:
            order = motion.rotation_orders[motion.node_index(joint)]
            mine = [names.index(f"{joint}.{a}rotation") for a in order]
            theirs = [motion.channel_names.index(f"{joint}.{a}rotation") for a in order]
            rows = sorted({int(f) - FIRST for c, (keyed, _v) in corrected.items()
                           if c.startswith(joint + ".") and c.endswith("rotation")
                           for f in keyed if FIRST <= f < FIRST + FRAMES})
            turn = Rotation.from_euler(order, got[rows][:, mine], degrees=True).inv() \
                * Rotation.from_euler(order, wanted[rows][:, theirs], degrees=True)
            error = float(np.degrees(turn.magnitude()).max())
            if error > TOLERANCE:
                return f"{joint} is {error:.4g} degrees off its corrected rotation on its " \
                       "corrective frames"
        return None

    def undo() -> str | None:
        state["session"].remove()
        error = np.abs(host.world_positions(state["names"], frames) - state["positions"]).max()
        count = fb.FBSystem().CurrentTake.GetLayerCount()
        if count != 1:
            return f"{count - 1} layers left"
        return None if error < 1e-6 else f"scene differs from before by {error:.4g}"

    def part() -> str | None:
        first, last = part_of_the_take()
        session = Session(host)
        session.analyze(motion=host.motion(state["names"][:1], first, last))
        session.set_k(KEYS // 2)  # (half the frames: K at most half of them)
        session.set_options(space="channel", residual_layer=False)
        session.apply()
        try:
            shown = host.world_positions(state["names"], frames)
        finally:
            session.remove()
        rows = [i for i, f in enumerate(frames) if not first <= f <= last]
        error = np.abs(shown[rows] - state["positions"][rows]).max()
        return None if error < TOLERANCE else \
            f"joints outside the analysed frames moved by up to {error:.4g} units"

    def replace() -> str | None:
        return replace_check(Session(host, Options().replace(roots=state["names"][:1])), host,
                             state["names"], FIRST, FRAMES, KEYS, TOLERANCE)

    def limb() -> str | None:
        session = Session(host, Options().replace(roots=[SELF_TEST_LIMB]))
        return limb_check(session, host, state["names"], FIRST, FRAMES, TOLERANCE)

    steps = [(f"build a skeleton from the sample clip (30 fps, frames {FIRST}+)", setup),
             ("analyse: the read motion matches the scene on every frame", analyse)]
    steps += [(f"apply {t}: override layer = the reduced curves on every frame", apply(t))
              for t in TANGENTS]
    steps += [("residual: base + override + residual = original joints on every frame",
               with_residual),
              ("undo: removing the layers restores the scene", undo),
              (f"corrective keys ({CORRECTIVE}): a few linear keys; translations = base + "
               "corrections on every frame, rotations on their key frames (turns in a per "
               "layer rotation layer); removed again", with_corrections),
              ("a part of the take (frames {}-{}): outside it the joints play the original "
               "motion on every frame".format(*part_of_the_take()), part),
              ("apply to the second quarter, analyse from its middle to the end of the third "
               "and apply replacing it: the analysis reads the motion, not the reduction (the "
               "layers out of the read); the original plays outside those frames, where the "
               "replaced layer played too; removed again", replace),
              (f"a limb ({SELF_TEST_LIMB}): read in its parent's frame, Apply keys it alone",
               limb)]
    return run_self_test(steps, report, essential=2)


def main() -> int:
    """Run from ``mobupy -m mobu_plugin.selftest``; returns the exit status."""
    import pyfbstandalone

    pyfbstandalone.initialize()
    return 0 if run() else 1


if __name__ == "__main__":
    sys.exit(main())
