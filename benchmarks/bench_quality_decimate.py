"""Blender's Graph Editor Decimate (per-curve key removal) against Salient Poses at equal key
budgets: mean and max joint error in mm (character scaled to 1.7 m), keys and time.

Blender runs headless through the ``bpy`` module from PyPI (``pip install "bpy==4.5.*"``; it
pins numpy 1.26), in a child process so that its import never touches ours. The BVH is
imported with Blender's own importer, every key of every F-Curve is selected and
``bpy.ops.graph.decimate(mode="RATIO", factor=1 - keep)`` runs with a Graph Editor area as its
context (``Context.temp_override``; the operator polls for a Graph Editor, and the editor's
filters must show every bone's curves: ``bench_vs_blender_decimate.decimate_fcurves``, shared
with that benchmark). Joint positions are the pose bones' heads and tails in
world space at every frame, before and after decimating; keys are counted on the curves that
are not constant (as ours count animated channels only).

Salient Poses runs in the default mode (unified tangents, world fit) at K = ``pose share`` of
the budget, and spends the rest as corrective keys (``corrective_budget``).

Usage::

    .venv/bin/python benchmarks/bench_quality_decimate.py [CLIP.bvh ...] [--keep 0.05,0.1,0.2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIPS = [ROOT / "examples" / "cmu_131_01.bvh", ROOT / "tests" / "data" / "cmu_131_01_walk.bvh",
         ROOT / "tests" / "data" / "cmu_131_01_stop.bvh"]
KEEP = (0.05, 0.10, 0.20)
#: Share of the key budget spent on pose keys (the rest goes to corrective keys).
POSE_SHARE = 0.9


# ------------------------------------------------------------------------------ in Blender
def _blender_worker(path: str, keeps: list[float]) -> list[dict]:
    """Run inside the child process: import, decimate, measure (scene units)."""
    import bpy
    import numpy as np
    from bench_vs_blender_decimate import decimate_fcurves  # the one Decimate set-up

    def load():  # noqa: ANN202
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.ops.import_anim.bvh(filepath=path, update_scene_fps=True,
                                update_scene_duration=True)
        obj = next(o for o in bpy.data.objects if o.type == "ARMATURE")
        return obj, list(obj.animation_data.action.fcurves)

    def positions(obj, first: int, last: int) -> np.ndarray:  # noqa: ANN001
        scene = bpy.context.scene
        world = obj.matrix_world
        out = []
        for frame in range(first, last + 1):
            scene.frame_set(frame)
            out.append([list(world @ pb.head) for pb in obj.pose.bones]
                       + [list(world @ pb.tail) for pb in obj.pose.bones])
        return np.asarray(out)

    obj, curves = load()
    frames = [int(k.co[0]) for k in curves[0].keyframe_points]
    first, last = min(frames), max(frames)
    original = positions(obj, first, last)
    moving = [i for i, c in enumerate(curves)
              if np.ptp([k.co[1] for k in c.keyframe_points]) > 1e-9]
    rows = []
    for keep in keeps:
        obj, curves = load()
        seconds = decimate_fcurves(obj, curves, keep)
        distance = np.linalg.norm(positions(obj, first, last) - original, axis=-1)
        rows.append({"keep": keep, "keys": sum(len(curves[i].keyframe_points) for i in moving),
                     "original_keys": len(moving) * (last - first + 1),
                     "mean": float(distance.mean()), "max": float(distance.max()),
                     "seconds": seconds})
    return rows


def blender_decimate(path: Path, keeps: list[float], mm_per_unit: float) -> list[dict]:
    """Blender Decimate at each ``keep`` fraction (run in a child process); errors in mm."""
    here = str(Path(__file__).parent)
    code = (f"import json, sys; sys.path.insert(0, {here!r}); "
            "import bench_quality_decimate as b; "
            f"print('RESULT' + json.dumps(b._blender_worker({str(path)!r}, {list(keeps)!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT")), None)
    if line is None:
        raise RuntimeError(f"Blender failed on {path}:\n{done.stderr[-2000:]}")
    rows = json.loads(line[len("RESULT"):])
    for row in rows:
        row["mean_mm"] = row.pop("mean") * mm_per_unit
        row["max_mm"] = row.pop("max") * mm_per_unit
    return rows


# ----------------------------------------------------------------------------- ours
def salient_poses(path: Path, keeps: list[float], pose_share: float = POSE_SHARE,
                  selection: dict | None = None) -> list[dict]:
    """Salient Poses (the default options' selection and fit) at each ``keep`` fraction: pose
    keys + corrective keys. ``selection``: keyword arguments of the selection space instead of
    the defaults (``cost``, ``compose``, ``max_span``)."""
    from sp_core.io.readers import read_clip
    from sp_core.options import Options
    from sp_core.reduction import constant_channels, reduce
    from sp_core.selection import SelectionSpace

    clip = read_clip(str(path))
    started = time.perf_counter()
    defaults = Options()
    chosen = {"cost": defaults.analysis.cost, "compose": defaults.analysis.compose,
              **(selection or {})}
    space = SelectionSpace.from_clip(clip, max_keys=max(3, int(max(keeps) * clip.n_frames) + 2),
                                     **chosen)
    analysis_s = time.perf_counter() - started
    animated = int(np.count_nonzero(~constant_channels(clip.unwrapped().channels)))
    rows = []
    for keep in keeps:
        budget = int(keep * clip.n_frames * animated)
        k = max(2, int(pose_share * keep * clip.n_frames))
        started = time.perf_counter()
        reduction = reduce(clip, space.keyframes(k),
                           corrective_budget=str(budget - k * animated))
        m = reduction.metrics
        rows.append({"keep": keep, "k": k, "keys": m.keys, "pose_keys": m.pose_keys,
                     "corrective_keys": m.corrective_keys, "original_keys": m.original_keys,
                     "mean_mm": m.mean_mm, "max_mm": m.max_mm,
                     "pose_mean_mm": (reduction.pose_metrics or m).mean_mm,
                     "pose_max_mm": (reduction.pose_metrics or m).max_mm,
                     "seconds": time.perf_counter() - started + analysis_s})
    return rows


def published_plugin(path: Path, keeps: list[float]) -> list[dict]:
    """The published plug-in's method at each ``keep`` fraction: the whole budget as pose keys
    (K = keep × frames) chosen by ``line-max`` composed by ``max`` (the published Maya tool),
    the captured values at the keys and slopes from central differences, no fit
    (:func:`bench_reduction.baseline_errors`)."""
    from bench_reduction import baseline_errors

    from sp_core.io.readers import read_clip
    from sp_core.reduction import constant_channels
    from sp_core.selection import SelectionSpace

    clip = read_clip(str(path))
    space = SelectionSpace.from_clip(clip, cost="line-max", compose="max",
                                     max_keys=max(3, int(max(keeps) * clip.n_frames) + 2))
    animated = int(np.count_nonzero(~constant_channels(clip.unwrapped().channels)))
    scale = clip.mm_per_unit()
    rows = []
    for keep in keeps:
        k = max(2, int(keep * clip.n_frames))
        errors = baseline_errors(clip.unwrapped(), space.keyframes(k)) * scale
        rows.append({"keep": keep, "k": k, "keys": k * animated,
                     "original_keys": clip.n_frames * animated,
                     "mean_mm": float(errors.mean()), "max_mm": float(errors.max())})
    return rows


def compare(clips: list[Path], keeps: list[float], selection: dict | None = None
            ) -> list[dict]:
    """Both methods on every clip and budget: one row per (clip, keep)."""
    from sp_core.io.readers import read_clip

    table = []
    for path in clips:
        scale = read_clip(str(path)).mm_per_unit()
        theirs = blender_decimate(path, keeps, scale)
        ours = salient_poses(path, keeps, selection=selection)
        plugin = published_plugin(path, keeps)
        for a, b, c in zip(ours, theirs, plugin, strict=True):
            table.append({"clip": path.name, "keep": a["keep"], "ours": a, "blender": b,
                          "plugin": c})
            print(f"{path.name:24s} {100 * a['keep']:4.0f} %  ours {a['keys']:6d} keys "
                  f"({a['pose_keys']} pose + {a['corrective_keys']} corrective) mean "
                  f"{a['mean_mm']:6.2f} max {a['max_mm']:6.1f} mm {a['seconds']:6.1f} s | "
                  f"Blender {b['keys']:6d} keys mean {b['mean_mm']:6.2f} max "
                  f"{b['max_mm']:6.1f} mm {b['seconds']:5.1f} s | ratio mean "
                  f"{a['mean_mm'] / b['mean_mm']:.2f} max {a['max_mm'] / b['max_mm']:.2f} | "
                  f"published plug-in {c['keys']:6d} keys mean {c['mean_mm']:6.2f} max "
                  f"{c['max_mm']:6.1f} mm", flush=True)
    return table


import numpy as np  # noqa: E402 - after the worker, which imports its own in the child


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clips", nargs="*", type=Path, default=CLIPS)
    parser.add_argument("--keep", default=",".join(map(str, KEEP)))
    parser.add_argument("--json", type=Path, help="write the rows as JSON")
    args = parser.parse_args(argv)
    keeps = [float(x) for x in args.keep.split(",")]
    table = compare(list(args.clips), keeps)
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
