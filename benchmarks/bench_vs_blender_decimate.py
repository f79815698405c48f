"""Our reduction applied in Blender against Blender's own Graph Editor Decimate, at equal key
budgets (5 %, 10 %, 20 % of the original keys), on the shared mocap clip.

Both results are evaluated by Blender itself (the depsgraph's bone heads and tails in world
space on every frame) and compared with the original take: mean and max joint error in mm for
the character scaled to 1.7 m, keys written, seconds. Usage::

    .venv/bin/python benchmarks/bench_vs_blender_decimate.py [clip.bvh ...]

Decimate is an editor operator: headless it needs a Graph Editor area (the factory start-up
screen's first area is switched to one), the editor's filters opened up (*Only Show Selected*
off, hidden channels shown; the armature selected) and every key selected, then
``graph.decimate(mode="RATIO", factor=1 - budget)`` runs under ``context.temp_override``
(Blender manual, Graph Editor > Keys > Decimate: "Ratio: deletes a defined percentage of
keyframes"). Decimate works per F-curve on the action's own keys; ours keys only the chosen
frames on every animated channel, so the budgets are matched in total keys.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLIPS = [Path("/work/shared/data/mocap/cmu_131_01.bvh")]
FALLBACK = ROOT / "examples" / "cmu_131_01.bvh"
BUDGETS = (0.05, 0.10, 0.20)
FIRST = 1001


def load(path: Path):
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=False)  # keep the start-up screen's areas
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    bpy.ops.import_anim.bvh(filepath=str(path), frame_start=FIRST, update_scene_fps=True,
                            use_fps_scale=False)
    obj = bpy.context.view_layer.objects.active
    action = obj.animation_data.action
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = (int(round(v)) for v in action.frame_range)
    return obj


def total_keys(action) -> int:
    from blender_addon.host import _action_fcurves

    return sum(len(f.keyframe_points) for f in _action_fcurves(action, None))


def decimate_fcurves(obj, fcurves, keep: float) -> float:
    """Blender's Graph Editor Decimate on ``fcurves`` (of ``obj``'s active action), keeping
    ``keep`` of their keys; returns the operator's seconds.

    Headless, the operator needs a Graph Editor area (the screen's first area is switched to
    one), the editor's filters opened up (*Only Show Selected* off, hidden channels shown, the
    object selected) and every key of the curves selected (see the module docstring).
    ``bench_quality_decimate.py`` decimates through this function too.
    """
    import bpy

    window = bpy.context.window_manager.windows[0]
    area = window.screen.areas[0]
    area.type = "GRAPH_EDITOR"
    region = next(r for r in area.regions if r.type == "WINDOW")
    space = area.spaces.active
    space.dopesheet.show_only_selected = False
    space.dopesheet.show_hidden = True
    obj.select_set(True)
    for fcurve in fcurves:
        fcurve.select = True
        fcurve.hide = False
        for point in fcurve.keyframe_points:
            point.select_control_point = True
    started = time.perf_counter()
    with bpy.context.temp_override(window=window, area=area, region=region):
        bpy.ops.graph.decimate(mode="RATIO", factor=1.0 - keep)
    return time.perf_counter() - started


def decimate(obj, budget: float) -> tuple[int, float]:
    """Decimate a copy of the original action (made active) to ``budget`` of its keys."""
    from blender_addon.host import _action_fcurves

    data = obj.animation_data
    original = data.action
    copy = original.copy()
    data.action = copy
    if len(copy.slots):
        data.action_slot = copy.slots[0]
    seconds = decimate_fcurves(obj, _action_fcurves(copy, None), budget)
    return total_keys(copy), seconds


def restore(obj, original) -> None:
    data = obj.animation_data
    data.action = original
    if len(original.slots):
        data.action_slot = original.slots[0]


def run(path: Path) -> list[tuple]:
    from blender_addon.host import BlenderHost
    from sp_core.session import Session

    obj = load(path)
    host = BlenderHost()
    original = obj.animation_data.action
    n_keys = total_keys(original)
    started = time.perf_counter()
    session = Session(host)
    session.analyze()
    analyse_s = time.perf_counter() - started
    motion = session.motion
    names, frames = motion.node_names, motion.frames
    reference = host.world_positions(names, frames)
    mm = motion.mm_per_unit()
    rows = []

    def errors(shown: np.ndarray) -> tuple[float, float]:
        distance = np.linalg.norm(shown - reference, axis=-1) * mm
        return float(distance.mean()), float(distance.max())

    for budget in BUDGETS:
        keys, seconds = decimate(obj, budget)
        rows.append((path.name, budget, "Blender Decimate", keys, *errors(
            host.world_positions(names, frames)), seconds))
        restore(obj, original)
        channels = int(np.count_nonzero(np.ptp(motion.channels, axis=0) > 0))
        k = max(2, int(budget * n_keys // channels))
        started = time.perf_counter()
        session.set_k(min(k, session.space.max_keys))
        reduction = session.reduce()
        session.apply(reduction)
        seconds = time.perf_counter() - started + analyse_s
        keys = reduction.curves.n_keys * int(reduction.curves.animated.sum())
        rows.append((path.name, budget, f"Salient Poses (K = {session.k})", keys,
                     *errors(host.world_positions(names, frames)), seconds))
        session.remove()
    return rows, n_keys


def main(argv: list[str]) -> int:
    import bpy

    clips = [Path(a) for a in argv] or [c if c.exists() else FALLBACK for c in CLIPS]
    print(f"Blender {bpy.app.version_string}; errors in mm at 1.7 m, every frame, every joint "
          "(End Sites included), evaluated by Blender's depsgraph")
    print("| clip | budget | method | keys | mean mm | max mm | seconds |")
    print("|---|---|---|---|---|---|---|")
    for clip in clips:
        rows, n_keys = run(clip)
        for name, budget, method, keys, mean, worst, seconds in rows:
            print(f"| {name} | {budget:.0%} of {n_keys} | {method} | {keys} | {mean:.2f} | "
                  f"{worst:.1f} | {seconds:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
