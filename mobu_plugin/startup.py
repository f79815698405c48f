"""Called from the start-up script that ``install.py --mobu`` writes into a PythonStartup
folder: registers the Salient Poses tool (listed under *Python Tools*) and adds the Salient Poses
menu when MotionBuilder starts (not in ``mobupy``, which has no UI)."""

from __future__ import annotations


def install() -> None:
    from mobu_plugin import ui

    ui.register_tool()
    ui.install_menu()
