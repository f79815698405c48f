"""Fake ``maya.standalone``: records initialisation so tests can check the import order."""

from __future__ import annotations

import sys

from maya._scene import STATE


def initialize(name: str = "python") -> None:
    STATE.ui["standalone"] = True
    # engine modules imported before Maya is up (what must not happen) are remembered for the
    # tests (numpy and scipy cannot be checked: this fake itself uses them)
    STATE.ui["imported_before_initialize"] = sorted(
        m for m in sys.modules if m.split(".")[0] == "sp_core"
        or m in ("maya_plugin.host", "maya_plugin.api", "maya_plugin.ui", "maya_plugin.command"))


def uninitialize() -> None:
    STATE.ui["standalone"] = False
