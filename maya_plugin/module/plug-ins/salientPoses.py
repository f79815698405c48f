"""Salient Poses plug-in file (Python API 2.0), loaded from the module's plug-ins folder.

Registers the undoable ``salientPosesWriteCurves`` command (maya_plugin/command.py) that Apply
uses to write curves with MFnAnimCurve in one undo step.
"""

import maya.api.OpenMaya as om

from maya_plugin import command


def maya_useNewAPI():  # noqa: N802 - the name Maya looks for
    """Tells Maya this plug-in uses the Python API 2.0."""


def initializePlugin(plugin):  # noqa: N802
    om.MFnPlugin(plugin, "Salient Poses", "1.0", "Any").registerCommand(
        command.NAME, command.WriteCurves.creator)


def uninitializePlugin(plugin):  # noqa: N802
    om.MFnPlugin(plugin).deregisterCommand(command.NAME)
