"""Called by the module's ``scripts/userSetup.py``: load the plug-in (its undoable command is what
Apply writes with) and, once the UI is up, add the menu. In batch (``mayapy``) only the plug-in
is loaded."""

from __future__ import annotations


def install() -> None:
    from maya import cmds, utils

    from maya_plugin.host import PLUGIN_FILE

    def start() -> None:
        if not cmds.pluginInfo(str(PLUGIN_FILE), query=True, loaded=True):
            cmds.loadPlugin(str(PLUGIN_FILE), quiet=True)
        if not cmds.about(batch=True):
            from maya_plugin import ui

            ui.install_menu()

    utils.executeDeferred(start)
