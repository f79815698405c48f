"""The undoable command that writes prepared curves with ``MFnAnimCurve`` (Python API 2.0).

``MFnAnimCurve`` edits are not on Maya's undo queue by themselves; a scripted ``MPxCommand``
whose edits are recorded in an ``MAnimCurveChange`` is (``undoIt``/``redoIt`` replay the cache).
The plug-in file ``module/plug-ins/salientPoses.py`` registers :class:`WriteCurves` as
:data:`NAME`; :class:`maya_plugin.host.MayaHost` puts the curve data in :data:`PENDING` and calls
the command, inside its undo chunk. All or nothing: if an edit fails, the command undoes its own
edits before the error reaches the host.

One call per curve: ``addKeysWithTangents`` (or ``addKeys`` for linear residual keys), plus
``setIsWeighted`` when weighted and one ``setIsBreakdown`` per breakdown key.
"""

from __future__ import annotations

from typing import Any

# Only imported inside Maya (by the plug-in file and by MayaHost when it writes).
from maya.api import OpenMaya as om
from maya.api import OpenMayaAnim as oma

NAME = "salientPosesWriteCurves"
#: Curve data for the next call: dicts made by MayaHost.write_curves / write_residual.
PENDING: list[dict[str, Any]] = []


def write_curve(job: dict[str, Any], unit: int, change: Any) -> None:
    """Replace every key of one anim curve (times in UI frames, values and tangents in
    internal units: cm, radians, seconds)."""
    selection = om.MSelectionList()
    selection.add(job["curve"])
    curve = oma.MFnAnimCurve(selection.getDependNode(0))
    times = [om.MTime(float(f), unit) for f in job["frames"]]
    values = [float(v) for v in job["values"]]
    if job["tangents"] == "linear":
        curve.addKeys(times, values, oma.MFnAnimCurve.kTangentLinear,
                      oma.MFnAnimCurve.kTangentLinear, keepExistingKeys=False, change=change)
        return
    n = len(times)
    fixed = oma.MFnAnimCurve.kTangentFixed
    curve.setIsWeighted(bool(job["weighted"]), change=change)
    curve.addKeysWithTangents(
        times, values, tangentInTypeArray=[fixed] * n, tangentOutTypeArray=[fixed] * n,
        tangentInXArray=[float(x) for x in job["in_xy"][:, 0]],
        tangentInYArray=[float(y) for y in job["in_xy"][:, 1]],
        tangentOutXArray=[float(x) for x in job["out_xy"][:, 0]],
        tangentOutYArray=[float(y) for y in job["out_xy"][:, 1]],
        tangentsLockedArray=[bool(job["locked"])] * n,
        weightsLockedArray=[not job["weighted"]] * n,
        convertUnits=False, keepExistingKeys=False, change=change)
    for k in job["breakdowns"]:
        curve.setIsBreakdown(int(k), True, change=change)


class WriteCurves(om.MPxCommand):
    """``salientPosesWriteCurves``: write :data:`PENDING`; undoable."""

    def __init__(self) -> None:
        super().__init__()
        self.change: Any = None

    @staticmethod
    def creator() -> WriteCurves:
        return WriteCurves()

    def isUndoable(self) -> bool:  # noqa: N802 - Maya's method name
        return True

    def doIt(self, args: Any) -> None:  # noqa: N802
        jobs = list(PENDING)
        if not jobs:
            raise RuntimeError(f"{NAME}: nothing to write (the command is called by Salient "
                               "Poses, not by hand)")
        self.change = oma.MAnimCurveChange()
        unit = om.MTime.uiUnit()
        try:
            for job in jobs:
                try:
                    write_curve(job, unit, self.change)
                except Exception as exc:
                    raise RuntimeError(f"writing {job['plug']} ({job['curve']}): {exc}") \
                        from exc
        except Exception:
            self.change.undoIt()  # all or nothing
            raise

    def redoIt(self) -> None:  # noqa: N802
        self.change.redoIt()

    def undoIt(self) -> None:  # noqa: N802
        self.change.undoIt()
