"""MotionBuilder UI: the shared panel in an ``FBTool`` and a *Salient Poses* menu.

Facts (tests/fake_mobu/FACTS.md, "UI"): subclass ``FBWidgetHolder`` and override
``WidgetCreate(parent_ptr)`` to build a Qt widget parented to ``wrapInstance(parent_ptr)``,
returning its C++ pointer; an ``FBTool`` gets a region holding it; tools are registered with
``pyfbsdk_additions.FBAddTool`` (which lists them under *Python Tools*) and shown with
``ShowTool``; menus come from ``FBMenuManager`` with ``OnMenuActivate`` callbacks.
"""

from __future__ import annotations

from typing import Any, cast

from mobu_plugin.host import MobuHost, fb

TOOL = "Salient Poses"
MENU = "Salient Poses"
_ITEMS = ("Open Panel", "Run Self-Test (new scene)")


def _additions() -> Any:
    import pyfbsdk_additions

    return pyfbsdk_additions


_alive: dict[str, Any] = {}  # widget holders must outlive the call that made them


def make_holder() -> Any:
    """An ``FBWidgetHolder`` that creates the shared PySide6 panel (the class is made here so
    that importing this module does not need pyfbsdk)."""
    from PySide6 import QtWidgets
    from shiboken6 import getCppPointer, wrapInstance

    from sp_core.session import Session
    from sp_core.ui.panel import SalientPosesPanel

    class PanelHolder(fb.FBWidgetHolder):
        def WidgetCreate(self, parent_ptr: int) -> int:  # noqa: N802 - the SDK's name
            parent = cast(QtWidgets.QWidget, wrapInstance(parent_ptr, QtWidgets.QWidget))
            self.panel = SalientPosesPanel(Session(MobuHost()), parent=parent)
            return int(getCppPointer(self.panel)[0])

    return PanelHolder()


def make_tool() -> Any:
    """The Salient Poses tool (one region filling it, holding the panel)."""
    tool = fb.FBTool(TOOL)
    x = fb.FBAddRegionParam(0, fb.FBAttachType.kFBAttachLeft, "")
    y = fb.FBAddRegionParam(0, fb.FBAttachType.kFBAttachTop, "")
    w = fb.FBAddRegionParam(0, fb.FBAttachType.kFBAttachRight, "")
    h = fb.FBAddRegionParam(0, fb.FBAttachType.kFBAttachBottom, "")
    tool.AddRegion("main", "main", x, y, w, h)
    _alive[TOOL] = make_holder()
    tool.SetControl("main", _alive[TOOL])
    tool.StartSizeX, tool.StartSizeY = 480, 900
    return tool


def register_tool() -> Any:
    """Register the tool with ``pyfbsdk_additions.FBAddTool`` (once), which lists it in the
    *Python Tools* menu; MotionBuilder docks it like its other tools (the possible dock
    positions are left at their default)."""
    additions = _additions()
    if TOOL not in additions.FBToolList:
        additions.FBAddTool(make_tool())
    return additions.FBToolList[TOOL]


def show_panel() -> None:
    fb.ShowTool(register_tool())


def _on_menu(_control: Any, event: Any) -> None:
    if event.Name == _ITEMS[0]:
        show_panel()
    elif event.Name == _ITEMS[1]:
        from mobu_plugin import selftest

        if fb.FBMessageBox("Salient Poses", "The self-test opens a new scene. Continue?",
                           "Run", "Cancel") == 1:
            selftest.run()


def install_menu() -> None:
    """Add the Salient Poses menu to the main menu bar (once)."""
    manager = fb.FBMenuManager()
    if manager.GetMenu(MENU) is None:
        manager.InsertLast(None, MENU)
        menu = manager.GetMenu(MENU)
        for item in _ITEMS:
            menu.InsertLast(item, _ITEMS.index(item))
        menu.OnMenuActivate.Add(_on_menu)
