"""Called from Maya's ``userSetup.py`` (written by ``install.py --maya``): add the menu once the
UI is up. Nothing happens in batch (``mayapy``)."""

from __future__ import annotations


def install() -> None:
    from maya import utils

    from maya_plugin import ui

    utils.executeDeferred(ui.install_menu)
