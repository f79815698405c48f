"""Salient Poses for Blender: optimal keyframes for motion capture, as an add-on over ``sp_core``.

Importing this package does not import ``bpy``; Blender calls :func:`register` when the add-on
is enabled. The extension manifest (Blender 4.2+) is ``blender_manifest.toml`` beside this file;
``bl_info`` serves older add-on loading.
"""

from __future__ import annotations

bl_info = {
    "name": "Salient Poses",
    "author": "Salient Poses developers",
    "version": (0, 1, 0),
    "blender": (4, 2, 0),
    "location": "Graph Editor / Dope Sheet > Sidebar > Salient Poses",
    "description": "Optimal keyframes for motion capture: analyse, choose K, apply as an NLA "
                   "track",
    "category": "Animation",
}


def register() -> None:
    from blender_addon.ui import register as register_ui

    register_ui()


def unregister() -> None:
    from blender_addon.ui import unregister as unregister_ui

    unregister_ui()
