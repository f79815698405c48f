"""Issue 17's findings 1–8: the old call forms, run against the strict fake, fail (so the fake
would have caught them), and the new forms pass. Finding 5 (.mod file) is in test_install.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fake_maya"))
from choices import SUGGESTED
from maya import cmds, testing  # noqa: E402  (the fake)
from maya._scene import STATE, MayaError  # noqa: E402
from test_maya_host import build_scene  # noqa: E402

from maya_plugin.host import MayaHost  # noqa: E402
from sp_core.session import Session  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_1_a_layer_curve_exists_only_once_the_plug_is_keyed_on_the_layer(sample_clip):
    build_scene(sample_clip, frames=10)
    layer = cmds.animLayer("reduced", override=True)
    cmds.animLayer(layer, edit=True, attribute="Hips.translateX")  # the old form stopped here
    assert cmds.animLayer(layer, query=True, findCurveForPlug="Hips.translateX") == []
    cmds.setKeyframe("Hips.translateX", animLayer=layer, time=1001)  # the documented way
    assert cmds.animLayer(layer, query=True, findCurveForPlug="Hips.translateX") == [
        "Hips_translateX_reduced_inputB"]


def test_2_rotation_interpolation_is_queried_with_convert_and_answers_a_list(sample_clip):
    build_scene(sample_clip, frames=10)
    with pytest.raises(TypeError, match="-convert is needed"):
        cmds.rotationInterpolation("Hips_rotateX", query=True)  # the old form
    assert cmds.rotationInterpolation("Hips_rotateX", query=True, convert=True) == ["none"]
    # several curves in one query: an answer no source documents (the adapter asks one at a
    # time)
    with pytest.raises(RuntimeError, match="one curve only"):
        cmds.rotationInterpolation("Hips_rotateX", "Hips_rotateY", query=True, convert=True)


def test_3_the_time_slider_draw_manager_is_constructed_not_used_as_a_class():
    testing.reset(batch=False)
    from maya.api.OpenMayaUI import MTimeSliderCustomDrawManager

    with pytest.raises(TypeError):  # the old form: a method called on the class
        MTimeSliderCustomDrawManager.registerCustomDrawOn("salientPosesKeys", 0)
    assert MTimeSliderCustomDrawManager().registerCustomDrawOn("keys", 0) == 1
    assert MTimeSliderCustomDrawManager() is MTimeSliderCustomDrawManager()  # the singleton
    assert not hasattr(MTimeSliderCustomDrawManager, "instance")  # C++ only


def test_4_the_panel_is_built_once(monkeypatch):
    from maya_plugin import ui

    testing.reset(batch=False)
    built = []
    monkeypatch.setattr(ui, "restore", lambda: built.append("panel"))
    # the old form: create the control with its uiScript, then build the panel explicitly
    cmds.workspaceControl(ui.WORKSPACE, label="Salient Poses", loadImmediately=True,
                          uiScript="from maya_plugin import ui; ui.restore()")
    ui.restore()
    assert built == ["panel", "panel"]
    built.clear()
    ui.show_panel()  # deletes the old control and makes a new one
    assert built == ["panel"]


def test_the_panel_is_built_when_its_control_is_made_not_when_first_shown(monkeypatch):
    """``loadImmediately`` is off by default: Maya builds the uiScript's contents when the
    control is first shown, and a tab behind the Attribute Editor is not."""
    from maya_plugin import ui

    testing.reset(batch=False)
    built = []
    monkeypatch.setattr(ui, "restore", lambda: built.append("panel"))
    cmds.workspaceControl("other", uiScript="from maya_plugin import ui; ui.restore()")
    assert built == []  # (the fake shows no control: a delayed build never comes)
    ui.show_panel()
    assert built == ["panel"]


def _clean_mayapy(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """A Python that, like a clean mayapy, has ``maya`` (the fake) and numpy/scipy (as if
    installed for it) but not the checkout: ``-S`` skips the .pth of our editable install."""
    import numpy

    site = str(Path(numpy.__file__).parents[1])
    env = {"PYTHONPATH": f"{ROOT / 'tests' / 'fake_maya'}:{site}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=cwd, env=env, text=True,
                          capture_output=True)


def test_6_mayapy_launch_path_and_import_order(tmp_path):
    # old form: -m from a clean shell: the package is not importable
    old = _clean_mayapy("import runpy; runpy.run_module('maya_plugin.selftest')", tmp_path)
    assert "No module named 'maya_plugin'" in old.stderr
    # old form: the engine imported before maya.standalone.initialize()
    early = _clean_mayapy(
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import sp_core.batch\n"  # what the old batch.py did at import time
        "from maya import standalone; standalone.initialize()\n"
        "from maya._scene import STATE; print(STATE.ui['imported_before_initialize'])",
        tmp_path)
    assert "sp_core.batch" in early.stdout
    # new form: mayapy <checkout>/maya_plugin/batch.py, nothing imported before Maya is up
    new = _clean_mayapy(
        "import runpy, sys\n"
        f"sys.argv = [{str(ROOT / 'maya_plugin' / 'batch.py')!r}, '--help']\n"
        f"sys.path.insert(0, {str(ROOT / 'maya_plugin')!r})\n"  # what running a file does
        f"try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "from maya._scene import STATE; print('early:', STATE.ui['imported_before_initialize'])",
        tmp_path)
    assert new.returncode == 0, new.stderr
    assert "mayapy maya_plugin/batch.py" in new.stdout and "early: []" in new.stdout


@pytest.mark.parametrize("tangents", ["unified", "weighted"])
def test_7_unified_and_weighted_tangents_are_locked(sample_clip, tangents):
    build_scene(sample_clip, frames=60)
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    session.set_k(8)
    session.set_options(tangents=tangents, space="channel")
    session.apply()
    layer = next(la for la in STATE.scene.layers if la.override)
    curves = [STATE.scene.curves[name] for name in layer.curves.values()]
    assert all(c.tangents_locked.all() for c in curves)
    # the old form (every tangent unlocked, whatever the mode) fails the same check
    for curve in curves:
        curve.tangents_locked[:] = False
    assert not any(c.tangents_locked.all() for c in curves)


def test_7_broken_tangents_written_locked_are_rejected(sample_clip, monkeypatch):
    from maya_plugin import host

    build_scene(sample_clip, frames=60)
    monkeypatch.setitem(host.LOCKED_MODES, "broken", True)  # a wrong mode -> lock mapping
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    session.set_k(8)
    session.set_options(tangents="broken", space="channel")
    with pytest.raises(Exception, match="locked tangents with different in/out directions"):
        session.apply()
    assert STATE.scene.layers == []


def test_7_keys_land_on_fractional_scene_frames(sample_clip):
    """Key times go through MTime in the UI unit: a 29.97 fps scene keeps its frame numbers."""
    build_scene(sample_clip, "29.97fps", frames=40)
    session = Session(MayaHost(), SUGGESTED)
    session.analyze()
    session.set_k(6)
    session.set_options(space="channel")
    session.apply()
    layer = next(la for la in STATE.scene.layers if la.override)
    curve = STATE.scene.curves[next(iter(layer.curves.values()))]
    np.testing.assert_allclose(curve.times * (30000 / 1001), session.keyframes(), atol=1e-9)


def test_8_the_old_reads_made_a_call_per_plug_per_frame(sample_clip):
    part, times = build_scene(sample_clip, frames=30)
    host = MayaHost()
    nodes = [n for n, _ in host.hierarchy(["Hips"])]
    plugs = [f"{n}.{a}" for n in nodes for a in ("translateX", "rotateX")]
    # the old form: getAttr -time per joint (and per plug) per frame
    for node in nodes:
        for frame in times:
            cmds.getAttr(f"{node}.worldMatrix[0]", time=float(frame))
    for plug in plugs:
        for frame in times:
            cmds.getAttr(plug, time=float(frame))
    old_calls = STATE.calls["cmds.getAttr"]
    assert old_calls == len(times) * (len(nodes) + len(plugs))
    STATE.calls.clear()
    host.motion(["Hips"], 1001, 1030)
    assert STATE.calls["cmds.getAttr"] == 0
    # (+ each node's offsetParentMatrix, read once)
    assert STATE.calls["MPlug.asMObject"] == len(times) * (len(nodes) + 1) + len(nodes)
    assert STATE.calls["MPlug.asMObject"] < old_calls / 2


def test_fake_is_strict_about_flags_and_call_forms(sample_clip):
    build_scene(sample_clip, frames=10)
    with pytest.raises(TypeError):
        cmds.setKeyframe("Hips.translateX", t=1001)  # unknown flag
    from maya.api import OpenMaya

    node = OpenMaya.MSelectionList().add("Hips").getDependNode(0)
    with pytest.raises(TypeError):
        OpenMaya.MFnDependencyNode(node).findPlug("translateX")  # wantNetworkedPlug missing
    plug = OpenMaya.MFnDependencyNode(node).findPlug("worldMatrix", False)
    with pytest.raises(TypeError):
        plug.asMObject()  # an array plug needs an element
    with pytest.raises(MayaError):
        OpenMaya.MSelectionList().add("nobody")
    cmds.animLayer("layer1", override=True)
    with pytest.raises(TypeError):  # a query names what it asks (-mute, -weight, ...)
        cmds.animLayer("layer1", query=True)
    with pytest.raises(TypeError):  # the flag is -mute; -muted is no flag
        cmds.animLayer("layer1", edit=True, muted=True)
    with pytest.raises(TypeError):  # ls -type, not -nodeType
        cmds.ls(nodeType="animLayer")
    assert OpenMaya.MTime(24.0).asUnits(OpenMaya.MTime.kSeconds) == 1.0  # kFilm by default


def test_the_modules_usersetup_never_stops_mayas_start_up_chain(monkeypatch, capsys):
    """Maya runs every module's userSetup.py in one chain: numpy or scipy missing for mayapy
    (install.py --no-deps, or no mayapy found) raised out of ours and stopped the rest."""
    import runpy
    import types

    import maya_plugin

    def install() -> None:
        raise ModuleNotFoundError("No module named 'scipy'", name="scipy")

    startup = types.ModuleType("maya_plugin.startup")
    startup.install = install  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "maya_plugin.startup", startup)
    monkeypatch.setattr(maya_plugin, "startup", startup, raising=False)
    runpy.run_path(str(ROOT / "maya_plugin" / "module" / "scripts" / "userSetup.py"))
    assert capsys.readouterr().out == (
        "Salient Poses is not available (ModuleNotFoundError: No module named 'scipy'); run "
        "install.py --maya --mayapy PATH to install its Python packages for this Maya\n")


def test_the_fake_refuses_the_wrong_forms_of_the_calls_added_for_the_audit(sample_clip):
    """optionVar, undoInfo -query, the offset parent matrix and a child plug's parent, as
    their references give them (FACTS.md): another form raises, as Maya's would."""
    from maya.api import OpenMaya as om

    build_scene(sample_clip, frames=5)
    with pytest.raises(TypeError):  # a flag is needed
        cmds.optionVar()
    with pytest.raises(TypeError):  # -query answers -state here
        cmds.undoInfo(query=True)
    with pytest.raises(RuntimeError):  # a matrix needs -type "matrix" and 16 values
        cmds.setAttr("LeftKnee.offsetParentMatrix", [1.0] * 16)
    with pytest.raises(RuntimeError):
        cmds.setAttr("LeftKnee.offsetParentMatrix", [1.0] * 9, type="matrix")
    fn = om.MFnDependencyNode(om.MSelectionList().add("LeftKnee").getDependNode(0))
    assert fn.findPlug("rotateX", False).isChild
    assert not fn.findPlug("rotateOrder", False).isChild
    with pytest.raises(RuntimeError):  # only a child plug has a parent
        fn.findPlug("rotateOrder", False).parent()
    assert not fn.hasAttribute("noSuchAttribute")


def test_a_keyed_layer_weight_limits_an_override_layer_to_its_range(sample_clip):
    """The fake's layer weight as the references give it (FACTS.md): keyed with setKeyframe
    -attribute weight (stepped out tangents; -inTangentType takes no 'step'), its curve mixes
    the override layer in (weight 1) and out (weight 0: the motion below plays, with passthrough
    only); its curve is found and deleted as Remove does."""
    build_scene(sample_clip, frames=10)
    plug = "Hips.translateX"
    below = testing.composite([plug], np.arange(1001, 1011))[:, 0]
    layer = cmds.animLayer("over", override=True)
    cmds.animLayer(layer, edit=True, attribute=[plug])
    cmds.setKeyframe(plug, animLayer=layer, time=1001, value=50.0)
    with pytest.raises(MayaError, match="inTangentType"):  # (the flag's values today)
        cmds.setKeyframe(layer, attribute="weight", time=1003, value=1.0, inTangentType="step")
    for time, weight in ((1002, 0.0), (1003, 1.0), (1006, 1.0), (1007, 0.0)):
        cmds.setKeyframe(layer, attribute="weight", time=time, value=weight,
                         outTangentType="step")
    shown = testing.composite([plug], np.arange(1001, 1011))[:, 0]
    inside = (np.arange(1001, 1011) >= 1003) & (np.arange(1001, 1011) <= 1006)
    np.testing.assert_allclose(shown[~inside], below[~inside], atol=1e-12)
    np.testing.assert_allclose(shown[inside], 50.0, atol=1e-9)  # the layer's key, held
    # without passthrough the layer blocks the motion below at every weight
    cmds.animLayer(layer, edit=True, passthrough=False)
    shown = testing.composite([plug], np.arange(1001, 1011))[:, 0]
    np.testing.assert_allclose(shown[~inside], 0.0, atol=1e-12)
    cmds.animLayer(layer, edit=True, passthrough=True)
    curves = cmds.listConnections(f"{layer}.weight", source=True, destination=False,
                                  type="animCurve")
    assert curves is not None and len(curves) == 1
    cmds.delete(*curves)
    assert cmds.listConnections(f"{layer}.weight", source=True, destination=False,
                                type="animCurve") is None
    np.testing.assert_allclose(testing.composite([plug], [1001])[:, 0], 50.0)  # weight 1 again
    with pytest.raises(NotImplementedError):  # another form: the fake does not guess
        cmds.listConnections(f"{layer}.weight", type="animCurve")
