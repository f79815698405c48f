"""One Host contract, every host: the standalone host, MayaHost and MobuHost on their strict
fakes, and BlenderHost on real Blender (``bpy``). A new host is done when this suite passes.

Each test builds its scene afresh (tests/host_contract.py) and compares what the application
itself evaluates with what the engine expects, to :data:`TOLERANCE` × the character's height.
"""

from __future__ import annotations

import numpy as np
import pytest
from host_contract import (
    BPY_MACHINES,
    FIRST,
    FRAMES,
    SCENES,
    TOLERANCE,
    UNANIMATED,
    ContractScene,
    bpy_wheel_exists,
)

from sp_core.errors import SalientPosesError
from sp_core.options import TANGENT_MODES, Options
from sp_core.session import Session

K = 6


@pytest.fixture(params=list(SCENES))
def scene(request) -> ContractScene:
    made = SCENES[request.param]()
    if made.name == "blender" and not bpy_wheel_exists():
        pytest.skip("bpy 4.5 has no wheel for this platform (CPython 3.11 on "
                    f"{', '.join(BPY_MACHINES)} only), so Blender cannot run here")
    reason = made.xfail.get(request.node.originalname)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    made.build()
    return made


def analysed(scene: ContractScene, residual: bool = False, tangents: str = "unified"
             ) -> Session:
    session = Session(scene.host)
    session.analyze()
    session.set_k(K)
    session.set_options(tangents=tangents, space="channel", residual_layer=residual)
    return session


def expected_override(session: Session, reduction, scene: ContractScene) -> np.ndarray:
    """Reduced channels, except a locked channel, which Apply leaves as it was."""
    motion = session.motion
    values = reduction.reduced.copy()
    if scene.locked is not None:
        c = motion.channel_names.index(scene.locked)
        values[:, c] = motion.channels[:, c]
    return values


def worst(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b, axis=-1).max())


def test_reads_the_motion_in_host_frames(scene):
    host = scene.host
    assert host.fps == pytest.approx(scene.fps(), rel=1e-12)
    assert host.playback_range() == (FIRST, FIRST + FRAMES - 1)
    motion = host.motion(host.selected_nodes(), FIRST, FIRST + FRAMES - 1)
    assert motion.first_frame == FIRST and motion.n_frames == FRAMES
    assert motion.fps == pytest.approx(scene.fps(), rel=1e-12)
    shown = scene.positions(motion.node_names, motion.frames)
    assert worst(motion.positions, shown) <= TOLERANCE * motion.height()
    joints = motion.joint_names
    animated = host.animated_channels(joints)
    assert not {*UNANIMATED, "LHipJoint.rotateX", "LHipJoint.rotateY",
                "LHipJoint.rotateZ"} & set(animated)
    assert len(animated) > 30
    if scene.locked is not None:
        assert scene.locked not in animated and host.skipped == {scene.skipped_name: "locked"}


@pytest.mark.parametrize("tangents", TANGENT_MODES)
def test_apply_each_tangent_mode_shows_the_reduced_motion(scene, tangents):
    session = analysed(scene, tangents=tangents)
    reduction = session.apply()
    motion = session.motion
    assert reduction.curves.frames.tolist() == session.keyframes(K).tolist()
    for channel in UNANIMATED:
        assert not reduction.curves.animated[motion.channel_names.index(channel)]
    shown = scene.positions(motion.node_names, motion.frames)
    engine = motion.forward_kinematics(expected_override(session, reduction, scene))
    assert worst(shown, engine) <= TOLERANCE * motion.height()
    # the scene really shows the reduction, not the original
    assert worst(shown, motion.positions) > 3 * TOLERANCE * motion.height()


def test_residual_layer_gives_back_the_original(scene):
    session = analysed(scene, residual=True)
    session.apply()
    motion = session.motion
    kinds = [handle.kind for handle in session.applied]
    assert kinds == ["override", "additive"]
    shown = scene.positions(motion.node_names, motion.frames)
    assert worst(shown, motion.positions) <= TOLERANCE * motion.height()


def test_undo_restores_the_scene_exactly(scene):
    session = analysed(scene, residual=True)
    before = scene.state()
    session.apply()
    assert scene.state() != before
    scene.undo()
    assert scene.state() == before


def test_remove_takes_the_layers_away(scene):
    session = analysed(scene, residual=True)
    before = scene.state()
    session.apply()
    session.remove()
    assert scene.state() == before


def test_a_failed_apply_leaves_nothing_behind(scene, monkeypatch):
    session = analysed(scene, residual=True)
    before = scene.state()
    host = scene.host
    write = host.write_residual

    def failing(*args, **kwargs):
        write(*args, **kwargs)
        raise RuntimeError("disk full")

    monkeypatch.setattr(host, "write_residual", failing)
    with pytest.raises(SalientPosesError, match="residual layer .*RuntimeError: disk full"):
        session.apply()
    assert scene.state() == before and session.applied == []


def test_bad_input_gets_the_hosts_message(scene):
    before = scene.state()
    session = Session(scene.host, Options().replace(roots=["Nope"]))
    with pytest.raises(SalientPosesError, match=scene.bad_root):
        session.analyze()
    with pytest.raises(SalientPosesError, match="keyframe 900 is outside the clip"):
        analysed(scene).reduce(frames=[900, FIRST + 10])
    assert scene.state() == before
