"""In-host self-test: proves the add-on on this Blender.

Run it headless from a shell, with ``bpy`` installed as a module or with Blender itself::

    python -m blender_addon.selftest [--screenshot nla.png]
    blender -b --python-expr "from blender_addon import selftest; selftest.main([])"

In a background session it starts from Blender's factory settings; in an interactive session it
works in a new scene of its own and deletes it afterwards (your scenes are not touched). It
imports the bundled sample with Blender's own BVH importer at frame 1001, reads the motion and
checks the engine's kinematics against the depsgraph on every frame, analyses, applies with each
tangent mode and once with the residual track, compares what Blender evaluates with the engine
on every frame, checks the keys (chosen frames only, Bézier, handle types), that the original
action is untouched, that undo and Remove restore the scene, applies corrective keys and checks
the corrective track holds the engine's few linear keys and shows the corrected motion, and
prints PASS or FAIL per step.
``--screenshot`` renders the result with the Workbench engine: the original motion (grey) and
the reduced NLA result (red) at the frame where they differ most.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from blender_addon.host import HANDLE_TYPES, MADE, BlenderHost
from sp_core.host import (
    SELF_TEST_LIMB,
    corrected_reduction,
    limb_check,
    replace_check,
    run_self_test,
)
from sp_core.options import Options
from sp_core.session import Session

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"
FIRST = 1001
FRAMES = 120
KEYS = 10
MODES = ("unified", "broken", "weighted")
SCREENSHOT_KEYS = 5
CORRECTIVE = "60"  # corrective keys
#: Fraction of the character's height (the contract's 0.01 %).
TOLERANCE = 1e-4


class SelfTest:
    """The steps, sharing one scene."""

    def __init__(self) -> None:
        import bpy

        self.bpy = bpy
        self.host = BlenderHost()
        self.session: Session | None = None
        self.own_scene: Any = None
        self.original: dict[tuple[str, int], np.ndarray] = {}
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ helpers
    def shown(self, nodes: list[str], frames: Sequence[int] | np.ndarray) -> np.ndarray:
        """World positions from the depsgraph (bone heads, tails for End Sites)."""
        return self.host.world_positions(nodes, frames)

    def _keys(self) -> dict[tuple[str, int], np.ndarray]:
        obj = self.host.object()
        action = obj.animation_data.action
        if action is None:  # pushed down: the bottom track's strip holds it
            action = next(s.action for t in obj.animation_data.nla_tracks for s in t.strips
                          if MADE not in s.action)
        from blender_addon.host import _action_fcurves

        found = {}
        for fcurve in _action_fcurves(action, None):
            points = fcurve.keyframe_points
            co = np.empty(len(points) * 2, dtype=np.float32)
            points.foreach_get("co", co)
            found[(fcurve.data_path, fcurve.array_index)] = co
        return found

    # ------------------------------------------------------------------ steps
    def version(self) -> str | None:
        print(f"Blender {self.bpy.app.version_string}, Python {sys.version.split()[0]}")
        return None if tuple(self.bpy.app.version) >= (4, 2, 0) else "needs Blender 4.2+"

    def scene(self) -> str | None:
        bpy = self.bpy
        if bpy.app.background:
            bpy.ops.wm.read_factory_settings(use_empty=True)
        else:
            self.own_scene = bpy.data.scenes.new("Salient Poses self-test")
            bpy.context.window.scene = self.own_scene
        bpy.ops.import_anim.bvh(filepath=str(SAMPLE), frame_start=FIRST,
                                update_scene_fps=True, use_fps_scale=False)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = FIRST, FIRST + FRAMES - 1
        scene.frame_set(FIRST)
        bpy.ops.ed.undo_push(message="Salient Poses self-test scene")
        self.original = self._keys()
        return None if self.host.playback_range() == (FIRST, FIRST + FRAMES - 1) else \
            f"playback range {self.host.playback_range()}"

    def read(self) -> str | None:
        started = time.perf_counter()
        self.session = Session(self.host)
        self.session.analyze()
        self.timings["analyse"] = time.perf_counter() - started
        motion = self.session.motion
        assert motion is not None
        miss = np.linalg.norm(motion.positions - self.shown(motion.node_names, motion.frames),
                              axis=-1).max()
        print(f"  read {motion.n_frames} frames, {motion.n_channels} channels; engine FK vs "
              f"depsgraph: {miss:.2e} scene units")
        return None if miss <= TOLERANCE * motion.height() else f"FK off by {miss:.3g}"

    def apply_modes(self) -> str | None:
        session = self.session
        assert session is not None and session.motion is not None
        motion = session.motion
        session.set_k(KEYS)
        for mode in MODES:
            session.set_options(tangents=mode, residual_layer=False)
            started = time.perf_counter()
            reduction = session.apply()
            self.timings[f"apply {mode}"] = time.perf_counter() - started
            engine = motion.forward_kinematics(reduction.reduced)
            miss = np.linalg.norm(self.shown(motion.node_names, motion.frames) - engine,
                                  axis=-1).max()
            print(f"  {mode}: Blender vs engine {miss:.2e} scene units")
            if miss > TOLERANCE * motion.height():
                return f"{mode}: off by {miss:.3g}"
            problem = self.check_keys(session.applied[-1].token, reduction, mode)
            if problem:
                return problem
            session.remove()
        return None

    def check_keys(self, token: Any, reduction: Any, mode: str) -> str | None:
        _object, _track, action_name = token
        from blender_addon.host import _action_fcurves

        wanted = reduction.curves.frames.astype(float).tolist()
        for fcurve in _action_fcurves(self.bpy.data.actions[action_name], None):
            points = fcurve.keyframe_points
            if [p.co[0] for p in points] != wanted:
                return f"{fcurve.data_path}[{fcurve.array_index}] keyed at other frames"
            if {p.interpolation for p in points} != {"BEZIER"} or \
                    {p.handle_left_type for p in points} != {HANDLE_TYPES[mode]}:
                return f"{fcurve.data_path}: not Bézier with {HANDLE_TYPES[mode]} handles"
        return None

    def residual(self) -> str | None:
        session = self.session
        assert session is not None and session.motion is not None
        motion = session.motion
        session.set_options(tangents="unified", residual_layer=True)
        session.apply()
        miss = np.linalg.norm(self.shown(motion.node_names, motion.frames) - motion.positions,
                              axis=-1).max()
        print(f"  reduced + residual vs original: {miss:.2e} scene units")
        return None if miss <= TOLERANCE * motion.height() else f"off by {miss:.3g}"

    def untouched(self) -> str | None:
        now = self._keys()
        same = now.keys() == self.original.keys() and all(
            np.array_equal(now[k], self.original[k]) for k in now)
        return None if same else "the original action changed"

    def undo(self) -> str | None:
        bpy = self.bpy
        bpy.ops.ed.undo()
        obj = self.host.object()
        data = obj.animation_data
        if len(data.nla_tracks) or data.action is None:
            return f"after undo: {len(data.nla_tracks)} tracks, action {data.action}"
        if any(MADE in a for a in bpy.data.actions):
            return "after undo: an action of this tool is left"
        return None

    def remove(self) -> str | None:
        session = self.session
        assert session is not None
        session.applied.clear()
        session.apply()
        session.remove()
        data = self.host.object().animation_data
        return None if not len(data.nla_tracks) and data.action is not None else \
            "Remove left tracks behind"

    def limb(self) -> str | None:
        assert self.session is not None and self.session.motion is not None
        nodes = self.session.motion.node_names  # the whole armature, read by Analyze
        session = Session(self.host, Options().replace(roots=[SELF_TEST_LIMB]))
        return limb_check(session, self.host, nodes, FIRST, FRAMES,
                          TOLERANCE * self.session.motion.height())

    def replace(self) -> str | None:
        assert self.session is not None and self.session.motion is not None
        motion = self.session.motion
        return replace_check(Session(self.host), self.host, motion.node_names, FIRST, FRAMES,
                             KEYS, TOLERANCE * motion.height())

    def corrective(self) -> str | None:
        from blender_addon.host import _action_fcurves

        session = self.session
        assert session is not None and session.motion is not None
        motion = session.motion
        reduction = corrected_reduction(session, FIRST, FRAMES, 6, CORRECTIVE, KEYS)
        if reduction is None:
            return "the corrective stage found nothing to correct"
        corrections = reduction.corrections
        session.apply(reduction)
        try:
            engine = motion.forward_kinematics(reduction.reduced + corrections.dense())
            miss = np.linalg.norm(self.shown(motion.node_names, motion.frames) - engine,
                                  axis=-1).max()
            _object, _track, name = cast(tuple[str, str, str], session.applied[1].token)
            action = self.bpy.data.actions[name]
            points = [p for f in _action_fcurves(action, None) for p in f.keyframe_points]
            linear = {p.interpolation for p in points} == {"LINEAR"}
        finally:
            session.remove()
            session.set_options(corrective_budget=None)
        # (and a zero key outside the range where a correction ends off zero)
        written = sum(len(frames) for frames, _ in corrections.host_keys().values())
        print(f"  {corrections.n_keys} corrective keys ({written} with the zero keys that end "
              f"them outside the range), {len(points)} in the track; Blender vs engine "
              f"{miss:.2e} scene units")
        if len(points) != written or not linear:
            return f"the corrective track holds {len(points)} keys (linear: {linear}) for " \
                   f"the engine's {written} linear keys"
        return None if miss <= TOLERANCE * motion.height() else f"off by {miss:.3g}"

    def cleanup(self) -> None:
        if self.own_scene is not None:
            self.bpy.data.scenes.remove(self.own_scene)

    def steps(self) -> list[tuple[str, Callable[[], str | None]]]:
        return [("Blender version", self.version),
                ("sample imported with Blender's BVH importer at frame 1001", self.scene),
                ("read motion: engine kinematics = depsgraph on every frame", self.read),
                ("apply each tangent mode: Blender = engine on every frame", self.apply_modes),
                ("residual track: Blender shows the original", self.residual),
                ("original action untouched", self.untouched),
                ("undo restores the scene", self.undo),
                ("Remove restores the original action", self.remove),
                ("corrective keys: a few linear keys, Blender = engine on every frame",
                 self.corrective),
                ("apply to the second quarter, analyse from its middle to the end of the third"
                 " and apply replacing it: the analysis reads the motion, not the reduction; "
                 "the original plays outside those frames; removed again", self.replace),
                (f"a limb ({SELF_TEST_LIMB}): read in its parent's frame, Apply keys it alone",
                 self.limb)]


def _stick_mesh(bpy: Any, obj: Any, name: str, colour: tuple[float, ...], radius: float) -> Any:
    """A box per bone, skinned to it (armatures are overlays, not rendered)."""
    verts: list[tuple[float, float, float]] = []
    faces: list[tuple[int, ...]] = []
    groups: list[tuple[str, list[int]]] = []
    for bone in obj.data.bones:
        head, tail = np.array(bone.head_local), np.array(bone.tail_local)
        axis = tail - head
        if np.linalg.norm(axis) < 1e-9:
            continue
        side = np.cross(axis, [0.0, 0.0, 1.0])
        if np.linalg.norm(side) < 1e-6:
            side = np.cross(axis, [1.0, 0.0, 0.0])
        side = side / np.linalg.norm(side) * radius
        up = np.cross(axis / np.linalg.norm(axis), side)
        start = len(verts)
        for end in (head, tail):
            for a, b in ((1, 1), (-1, 1), (-1, -1), (1, -1)):
                verts.append(tuple(end + a * side + b * up))
        faces += [(start, start + 1, start + 2, start + 3), (start + 4, start + 7, start + 6,
                                                             start + 5)]
        faces += [(start + i, start + 4 + i, start + 4 + (i + 1) % 4, start + (i + 1) % 4)
                  for i in range(4)]
        groups.append((bone.name, list(range(start, start + 8))))
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    sticks = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(sticks)
    for bone, indices in groups:
        sticks.vertex_groups.new(name=bone).add(indices, 1.0, "REPLACE")
    sticks.modifiers.new("Armature", "ARMATURE").object = obj
    sticks.parent = obj
    sticks.color = colour
    return sticks


def screenshot(path: str, test: SelfTest) -> None:
    """Render the original (grey) and the reduced NLA result (red) with Workbench."""
    bpy = test.bpy
    session = test.session
    assert session is not None and session.motion is not None
    motion = session.motion
    session.set_options(tangents="unified", residual_layer=False)
    session.set_k(SCREENSHOT_KEYS)  # few keys: the difference is large enough to see
    reduction = session.apply()
    reduced = test.host.object()
    frame = int(reduction.metrics.worst_frame)
    original = reduced.copy()  # copies the NLA tracks too: mute ours to see the original
    original.data = reduced.data
    bpy.context.scene.collection.objects.link(original)
    for track in original.animation_data.nla_tracks:
        track.mute = any(s.action is not None and MADE in s.action for s in track.strips)
    height = motion.height()
    _stick_mesh(bpy, reduced, "reduced", (0.85, 0.15, 0.1, 1.0), 0.012 * height)
    _stick_mesh(bpy, original, "original", (0.55, 0.55, 0.55, 1.0), 0.02 * height)
    scene = bpy.context.scene
    scene.frame_set(frame)
    points = motion.positions[frame - motion.first_frame]
    centre = (points.min(axis=0) + points.max(axis=0)) / 2
    camera = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
    camera.data.type = "ORTHO"
    camera.data.ortho_scale = 1.35 * np.ptp(points, axis=0).max()
    camera.location = (centre[0] - 10 * height, centre[1], centre[2])
    camera.rotation_euler = (np.pi / 2, 0.0, -np.pi / 2)  # looks along +X: a side view
    scene.collection.objects.link(camera)
    scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.color_type = "OBJECT"
    scene.display.shading.light = "STUDIO"
    scene.display.shading.show_xray = True  # the red result shows through the grey original
    scene.display.shading.xray_alpha = 0.5
    scene.render.resolution_x, scene.render.resolution_y = 900, 700
    scene.render.filepath = str(Path(path).resolve())
    bpy.ops.render.render(write_still=True)
    print(f"  wrote {path}: frame {frame}, K = {SCREENSHOT_KEYS}, max error "
          f"{reduction.metrics.max_mm:.1f} mm (grey original, red reduced NLA result)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m blender_addon.selftest",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", metavar="OUT.png",
                        help="also render the NLA result with Workbench into this file")
    args = parser.parse_args(argv)
    test = SelfTest()
    try:
        passed = run_self_test(test.steps(), print, essential=3)
        for what, seconds in test.timings.items():
            print(f"  {what}: {seconds:.2f} s")
        if passed and args.screenshot:
            screenshot(args.screenshot, test)
    finally:
        test.cleanup()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
