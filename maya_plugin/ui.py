"""Maya UI: the Salient Poses menu and the dockable panel (workspaceControl).

Facts (tests/fake_maya/FACTS.md): the panel is parented into a ``workspaceControl`` through
``MQtUtil.findControl`` + ``addWidgetToMayaLayout``; Maya runs the control's ``uiScript`` to
build it (on creation and on layout restore); menus go under ``MayaWindow`` and are skipped in
batch.
"""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maya_plugin.host import MayaHost, cmds

if TYPE_CHECKING:
    from sp_core.ui.panel import SalientPosesPanel

WORKSPACE = "salientPosesWorkspaceControl"
MENU = "salientPosesMenu"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "maya.md"
_panels: list[SalientPosesPanel] = []  # keep the Python wrappers alive while docked


def install_menu() -> None:
    """Add the Salient Poses menu to Maya's main menu bar (once; nothing in batch)."""
    if cmds.about(batch=True):
        return
    if cmds.menu(MENU, exists=True):
        cmds.deleteUI(MENU)
    menu = str(cmds.menu(MENU, label="Salient Poses", parent="MayaWindow", tearOff=True))
    cmds.menuItem(parent=menu, label="Open Panel", command=lambda *_: show_panel())
    cmds.menuItem(parent=menu, label="Reduce Selection with Last Settings",
                  command=lambda *_: reduce_with_last_settings())
    cmds.menuItem(parent=menu, divider=True)
    cmds.menuItem(parent=menu, label="Run Self-Test (new scene)",
                  command=lambda *_: run_selftest())
    cmds.menuItem(parent=menu, label="Help", command=lambda *_: webbrowser.open(DOCS.as_uri()))


def show_panel() -> None:
    """Open (or re-open) the dockable panel, tabbed next to the Attribute Editor.

    Maya runs ``uiScript`` to build the control's contents, both now and when it restores its
    layout (workspaceControl docs), so the panel is built there and only there.
    """
    if cmds.workspaceControl(WORKSPACE, exists=True):
        cmds.deleteUI(WORKSPACE)
    # uiScript must be a string: Maya stores it with the layout to rebuild the panel
    # (maya-stubs types it as a callable)
    restore_script: Any = "from maya_plugin import ui; ui.restore()"
    # built now, not when the tab is first shown (loadImmediately's default: a tab behind the
    # Attribute Editor would stay empty until clicked)
    cmds.workspaceControl(WORKSPACE, label="Salient Poses", retain=False, initialWidth=470,
                          tabToControl=("AttributeEditor", -1), uiScript=restore_script,
                          loadImmediately=True)


def restore() -> None:
    """Build the panel inside the workspace control (Maya calls this through ``uiScript``)."""
    from maya import OpenMayaUI
    from shiboken6 import getCppPointer

    from sp_core.session import Session
    from sp_core.ui.panel import SalientPosesPanel

    control = OpenMayaUI.MQtUtil.findControl(WORKSPACE)
    panel = SalientPosesPanel(Session(MayaHost()))
    OpenMayaUI.MQtUtil.addWidgetToMayaLayout(int(getCppPointer(panel)[0]), int(control))
    _panels[:] = [panel]


def last_settings() -> dict[str, Any]:
    """The options the panel saved last (:func:`sp_core.ui.settings.stored_options`), as the
    keywords of :func:`maya_plugin.api.reduce`."""
    from sp_core.options import Options, applied
    from sp_core.ui import settings

    # (keyposes + breakdowns is not among them: its leading nodes belong to one scene); the
    # values the panel keeps greyed (smoothness after going back to unified) do not apply,
    # and the API, as a command line, refuses them given
    stored = applied(settings.stored_options(settings.panel_settings()))
    return settings.changed_fields(stored, Options())


def reduce_with_last_settings() -> None:
    """Analyse the selection and apply the suggested K with the panel's last options."""
    from maya_plugin import api
    from sp_core.errors import SalientPosesError, said
    from sp_core.options import words_of

    try:
        result = api.reduce(None, **last_settings())
    except SalientPosesError as exc:  # the options it names in words, as the panel's rows
        cmds.warning(f"Salient Poses: {said(exc, words_of)}")
        return
    assert result.reduction is not None  # a reduce job always reduces
    m = result.reduction.metrics
    cmds.inViewMessage(assistMessage=f"Salient Poses: {result.keys} keys into "
                                     f"{', '.join(h.name for h in result.layers)}; mean error "
                                     f"{m.mean_mm:.1f} mm", position="topCenter", fade=True)


def run_selftest() -> None:
    """Run the self-test in a new scene after asking (it replaces the open scene)."""
    answer = cmds.confirmDialog(title="Salient Poses self-test",
                                message="The self-test opens a new scene. Continue?",
                                button=["Run", "Cancel"], defaultButton="Run",
                                cancelButton="Cancel", dismissString="Cancel")
    if answer != "Run":
        return
    from maya_plugin import selftest

    lines: list[str] = []
    passed = selftest.run(lines.append)
    for line in lines:
        print(line)
    cmds.confirmDialog(title="Salient Poses self-test", message="\n".join(lines),
                       button=["OK"], icon="information" if passed else "critical")
