#!/usr/bin/env python3
"""Make the FBX test files in ``tests/data`` by exporting BVH clips with Blender's FBX exporter.

Usage::

    .venv/bin/pip install 'bpy==4.5.*'        # Blender as a Python module (generation only)
    .venv/bin/python tools/make_fbx_fixtures.py [--out tests/data]

The files are committed; this script documents exactly how they were made so they can be made
again. ``bpy`` is not a dependency of the project (it is ~400 MB); only this script needs it.

What it writes
--------------
``cmu_131_01_240.bvh`` / ``.fbx``
    Frames 0..239 of ``examples/cmu_131_01.bvh`` (CMU 31 joints, ZYX rotations, 120 fps), the BVH
    as cut and the FBX Blender exports from it: one armature, one take.
``two_takes.fbx`` (with ``cmu_131_01_walk.bvh`` and ``cmu_131_01_stop.bvh``)
    Two armatures (``Walk`` and ``Stop``: two skeleton roots; the ``Stop`` bones are prefixed
    ``Stop:`` as a namespace would), each with its own action, exported with every action as its
    own take (animation stacks ``Walk|Walk`` and ``Stop|Stop``): frames 300..389 and 700..789 of
    the demo clip as two 90-frame BVH files.
``no_animation.fbx``
    The ``cmu_131_01_240`` armature exported without animation (``bake_anim=False``): no take.
``no_skeleton.fbx``
    One empty object, no armature.

Blender settings (and why)
--------------------------
Import (``bpy.ops.import_anim.bvh``): ``global_scale=1`` (1 BVH unit = 1 Blender unit),
``rotate_mode='NATIVE'`` (keep the BVH's Euler orders), ``axis_forward='-Z'``, ``axis_up='Y'``
(the importer's defaults: BVH is Y up, Blender Z up, so the importer turns the motion +90° about
X), ``use_fps_scale=False``, ``update_scene_fps=True``, ``update_scene_duration=True``,
``frame_start=1``.

Export (``bpy.ops.export_scene.fbx``): ``object_types={'ARMATURE'}`` (armature only),
``axis_forward='-Z'``, ``axis_up='Y'`` (Y up in the file, undoing the importer's turn, so the FBX
world is the BVH world), ``apply_unit_scale=True``, ``global_scale=1`` and
``apply_scale_options='FBX_SCALE_ALL'`` (the scene unit, 1 Blender unit = 1 BVH unit, is written
as the FBX unit: the file says metres and the armature has scale 1, so 1 FBX unit = 1 BVH unit;
the default ``FBX_SCALE_NONE`` writes centimetres with the armature scaled by 100 instead),
``add_leaf_bones=True`` (a ``<bone>_end`` joint at each bone's tail, which is where the BVH End
Site was: our BVH reader names End Sites ``<joint>_end`` too, so every BVH node has its FBX
namesake), ``bake_anim=True``, ``bake_anim_step=1``, ``bake_anim_simplify_factor=0`` (a key on
every frame, nothing simplified away), ``bake_anim_force_startend_keying=True``,
``bake_anim_use_all_bones=True``, ``bake_anim_use_nla_strips=False``,
``bake_anim_use_all_actions`` False for the one-take file and True for the two-take file,
``primary_bone_axis='Y'``, ``secondary_bone_axis='X'`` (Blender's own bone axes).

So there is no conversion between the FBX and the BVH world positions: same axes (the armature
node carries the -90° X turn that undoes the import's), same scale, same frames (the scene range
is set to the BVH's frames). Blender writes every bone's full local transform as its
``Lcl Translation``/``Lcl Rotation`` (XYZ order, bone rolls included), so FBX channels are not
the BVH's channels: compare world positions, not angles.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sp_core.io.bvh import read_bvh, write_bvh  # noqa: E402

SOURCE = ROOT / "examples" / "cmu_131_01.bvh"


def cut(source: Path, start: int, end: int, out: Path) -> Path:
    """Frames ``start..end`` (inclusive, 0-based) of a BVH file as a new BVH file."""
    clip = read_bvh(source, unwrap=False)
    write_bvh(clip.sub_range(start, end), out, precision=10, raw=True)
    return out


def reset_scene() -> None:
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)


def import_bvh(path: Path, name: str | None = None):
    """Import a BVH file into the current scene; returns the armature object."""
    import bpy

    bpy.ops.import_anim.bvh(
        filepath=str(path), global_scale=1.0, frame_start=1, use_fps_scale=False,
        update_scene_fps=True, update_scene_duration=True, use_cyclic=False,
        rotate_mode="NATIVE", axis_forward="-Z", axis_up="Y")
    armature = bpy.context.view_layer.objects.active
    if name:
        armature.name = name
        armature.data.name = name
        armature.animation_data.action.name = name
    return armature


def set_range(frames: int) -> None:
    """Frames 1..frames: the BVH's frames and no more (the importer leaves one extra)."""
    import bpy

    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frames


def export_fbx(path: Path, all_actions: bool = False, bake: bool = True,
               object_types: frozenset[str] = frozenset({"ARMATURE"})) -> None:
    import bpy

    bpy.ops.export_scene.fbx(
        filepath=str(path), check_existing=False, use_selection=False,
        object_types=object_types, global_scale=1.0, apply_unit_scale=True,
        apply_scale_options="FBX_SCALE_ALL", axis_forward="-Z", axis_up="Y",
        use_space_transform=True, bake_space_transform=False, add_leaf_bones=True,
        primary_bone_axis="Y", secondary_bone_axis="X", armature_nodetype="NULL",
        bake_anim=bake, bake_anim_use_all_bones=True, bake_anim_use_nla_strips=False,
        bake_anim_use_all_actions=all_actions, bake_anim_force_startend_keying=True,
        bake_anim_step=1.0, bake_anim_simplify_factor=0.0, embed_textures=False,
        path_mode="AUTO")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    import bpy

    one = cut(SOURCE, 0, 239, out / "cmu_131_01_240.bvh")
    reset_scene()
    import_bvh(one)
    set_range(240)
    export_fbx(out / "cmu_131_01_240.fbx")
    export_fbx(out / "no_animation.fbx", bake=False)

    walk = cut(SOURCE, 300, 389, out / "cmu_131_01_walk.bvh")
    stop = cut(SOURCE, 700, 789, out / "cmu_131_01_stop.bvh")
    reset_scene()
    import_bvh(walk, "Walk")
    armature = import_bvh(stop, "Stop")
    for bone in armature.data.bones:  # Blender renames the action's curves with the bones
        bone.name = f"Stop:{bone.name}"
    set_range(90)
    export_fbx(out / "two_takes.fbx", all_actions=True)

    reset_scene()
    bpy.ops.object.empty_add(location=(0.0, 0.0, 0.0))
    export_fbx(out / "no_skeleton.fbx", bake=False, object_types=frozenset({"EMPTY"}))
    for path in sorted(out.glob("*.fbx")):
        print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
