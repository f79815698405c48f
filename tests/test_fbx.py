"""FBX input (sp_core.io.fbx through ufbx), checked against the BVH the files were made from.

The FBX files in tests/data were exported by Blender from BVH cuts of the demo clip
(tools/make_fbx_fixtures.py says exactly how). Blender's export undoes its import's axis turn and,
with the settings used, its scale, so the FBX world is the BVH world: positions are compared with
no conversion at all. Channels are not: Blender writes each bone's whole local transform in XYZ
order, so FBX angles differ from the BVH's; they are checked against the file's own values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from sp_core.errors import ClipError, ClipFormatError
from sp_core.io import fbx
from sp_core.io.bvh import read_bvh, write_bvh
from sp_core.io.readers import read_clip

from fbx_ascii import Joint, write_fbx

DATA = Path(__file__).parent / "data"
ONE = DATA / "cmu_131_01_240.fbx"
TAKES = DATA / "two_takes.fbx"
# The bar: world positions within 0.01 % of the character's height.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def one() -> tuple:
    return read_clip(ONE), read_bvh(DATA / "cmu_131_01_240.bvh")


def _gap(fbx_clip, bvh_clip, prefix: str = "") -> float:
    """Largest distance between namesake nodes at any frame, as a fraction of BVH height."""
    columns = [fbx_clip.node_index(prefix + n) for n in bvh_clip.node_names]
    gap = np.linalg.norm(fbx_clip.positions[:, columns] - bvh_clip.positions, axis=2)
    return float(gap.max() / bvh_clip.height())


def test_same_skeleton_and_timing_as_the_bvh(one):
    clip, bvh = one
    assert clip.node_names == bvh.node_names
    assert list(clip.parents) == list(bvh.parents)
    assert clip.end_site_names == bvh.end_site_names
    # Blender imported the BVH at frame 1 and its FBX export keeps the take there; the clip
    # keeps the file's own numbering (the BVH, which has no frame numbers, starts at 0)
    assert (clip.n_frames, clip.fps, clip.first_frame, bvh.first_frame) == (
        bvh.n_frames, 120.0, 1, 0)
    # the file stores Blender's rate for a 0.0083333 s frame time: 120.00048 fps
    assert clip.frame_time == pytest.approx(0.0083333, rel=1e-7)
    assert (clip.units, clip.up_axis) == ("m", "y")


def test_world_positions_equal_the_bvh_at_every_frame(one):
    clip, bvh = one
    assert _gap(clip, bvh) <= TOLERANCE


def test_world_positions_equal_ufbx_evaluation_at_every_frame():
    """The clip's forward kinematics against ufbx's own node_to_world at each sampled frame."""
    clip = read_clip(ONE)
    graph, selected, samples, take, _ = fbx._extract_isolated(str(ONE), None, None)
    assert [graph.names[i] for i in selected] == clip.node_names
    world = samples["world"][:-1]  # the last row is the file's stored (rest) state
    # 1e-5: Blender's float32 values (scales of 0.99999994, noise in constant translations)
    # are read as the uniform scales and still offsets they stand for
    assert np.abs(clip.positions - world).max() <= 1e-5 * clip.height()
    # and the stored rest state is the clip's rest pose
    assert np.abs(clip.rest_positions() - samples["world"][-1]).max() <= 1e-5 * clip.height()


def test_rotation_channels_are_the_files_euler_values(one):
    """Raw channels are the file's Lcl Rotation per frame; channels are those unwrapped."""
    clip, _ = one
    _, _, samples, _, _ = fbx._extract_isolated(str(ONE), None, None)
    joint = clip.node_index("LeftHip")
    euler = samples["euler"][:-1, joint]  # sampled nodes are the clip's nodes, in order
    # Blender writes XYZ order (R = Rz·Ry·Rx), listed intrinsically as Z, Y, X
    assert clip.rotation_orders[joint] == "ZYX"
    columns = clip.node_channels("LeftHip")
    assert np.array_equal(clip.raw_channels[:, columns], euler[:, ::-1])
    steps = np.abs(np.diff(clip.channels[:, columns], axis=0))
    assert steps.max() < 180.0
    wrapped = (clip.channels[:, columns] - clip.raw_channels[:, columns]) / 360.0
    assert np.allclose(wrapped, np.round(wrapped))


def test_root_position_channels_are_the_bvh_root_positions(one):
    clip, bvh = one
    ours = clip.channels[:, clip.node_channels("Hips")[:3]]
    theirs = bvh.channels[:, bvh.node_channels("Hips")[:3]]
    assert clip.channel_names[:3] == ["Hips.Xposition", "Hips.Yposition", "Hips.Zposition"]
    assert np.abs(ours - theirs).max() <= TOLERANCE * bvh.height()


def test_only_moving_translations_become_channels(one):
    clip, bvh = one
    # like the BVH: translation on the root only; every joint keeps its three rotations
    assert clip.n_channels == bvh.n_channels == 96
    assert [c for c in clip.channel_names if "position" in c] == \
        ["Hips.Xposition", "Hips.Yposition", "Hips.Zposition"]
    # offsets are in each parent's frame, which is Blender's bone frame, not the BVH's: the
    # lengths agree
    lengths = np.linalg.norm(clip.offsets[1:], axis=1)
    assert np.abs(lengths - np.linalg.norm(bvh.offsets[1:], axis=1)).max() < 1e-5


def test_default_take_and_root_and_every_take():
    default = read_clip(TAKES)
    stop_bvh = read_bvh(DATA / "cmu_131_01_stop.bvh")
    walk_bvh = read_bvh(DATA / "cmu_131_01_walk.bvh")
    # the file's active take is Blender's first action; the first skeleton root is Stop's
    assert default.root_names == ["Stop:Hips"]
    assert _gap(default, stop_bvh, "Stop:") <= TOLERANCE
    walk = read_clip(TAKES, take="Walk|Walk", root="Hips")
    assert walk.n_frames == walk_bvh.n_frames == 90
    assert _gap(walk, walk_bvh) <= TOLERANCE
    # a node above the skeleton (the armature) names its skeleton
    by_armature = read_clip(TAKES, take="Walk|Walk", root="Walk")
    assert np.array_equal(by_armature.positions, walk.positions)
    # the Walk skeleton in the Stop take is not animated: its stored pose throughout
    still = read_clip(TAKES, take="Stop|Stop", root="Walk")
    assert np.ptp(still.positions, axis=0).max() < 1e-9


def test_without_fork_a_fresh_interpreter_reads_the_file(monkeypatch):
    """Where os.fork is missing (Windows) the child is ``python -m sp_core.io.fbx``."""
    forked = read_clip(TAKES, take="Walk|Walk", root="Walk")
    monkeypatch.delattr(fbx.os, "fork")
    spawned = read_clip(TAKES, take="Walk|Walk", root="Walk")
    assert np.array_equal(spawned.channels, forked.channels)
    with pytest.raises(ClipFormatError, match="no take 'Run'"):
        read_clip(TAKES, take="Run")


def test_a_crash_in_ufbx_is_one_error_line(monkeypatch):
    """The child dies without an answer (as a crash in ufbx would; SIGKILL here, which no fault
    handler reports): the parent says so in one line."""
    monkeypatch.setattr(fbx, "_child_result", lambda *args: os.kill(os.getpid(), 9))
    with pytest.raises(ClipFormatError) as caught:
        read_clip(ONE)
    assert str(caught.value) == (
        f"{ONE}: ufbx crashed while reading this file (signal 9); the file may be damaged or "
        "use something ufbx cannot read")


def test_an_empty_take_range_is_refused(tmp_path):
    joints = [Joint("hips", None, (0, 1, 0), rotation_keys={"T": np.zeros((2, 3))}),
              Joint("head", "hips", (0, 1, 0))]
    path = write_fbx(tmp_path / "backwards.fbx", joints, ["T"], n_frames=2)
    text = path.read_text().replace('"LocalStart", "KTime", "Time", "",0',
                                    '"LocalStart", "KTime", "Time", "",46186158000')
    path.write_text(text)
    with pytest.raises(ClipFormatError) as caught:
        read_clip(path)
    assert str(caught.value).startswith(f"{path}: take 'T' has an empty time range (1 s to ")


def test_first_frame_numbers_the_take():
    clip = read_clip(TAKES, first_frame=1001, take="Walk|Walk", root="Walk")
    assert (clip.first_frame, clip.last_frame) == (1001, 1090)


def test_a_take_keeps_its_own_frame_numbers_by_default(tmp_path):
    """A take that starts at frame 1001 in the file starts at 1001 in the clip (and in every
    key and output), unless --first-frame renumbers it."""
    keys = np.zeros((6, 3))
    keys[:, 2] = np.arange(6) * 10.0
    joints = [Joint("hips", None, (0, 1, 0), rotation_keys={"T": keys}),
              Joint("head", "hips", (0, 1, 0))]
    path = write_fbx(tmp_path / "late.fbx", joints, ["T"], fps=24.0, n_frames=6,
                     start_frame=1001)
    clip = read_clip(path)
    assert (clip.first_frame, clip.last_frame, clip.fps) == (1001, 1006, 24.0)
    column = clip.channel_names.index("hips.Zrotation")
    np.testing.assert_allclose(clip.channels[:, column], keys[:, 2], atol=1e-9)
    assert read_clip(path, first_frame=0).first_frame == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"take": "Run"}, "no take 'Run'; the takes are 'Stop|Stop', 'Walk|Walk'"),
    ({"root": "Spine9"}, "no root joint 'Spine9'; the skeleton roots are Stop:Hips, Hips"),
    ({"take": "Walk|Walk", "root": "LeftHip"},
     "the nodes above root 'LeftHip' move during take 'Walk|Walk'; salient-poses needs "
     "them still (read a root that holds the motion)"),
])
def test_unknown_take_or_root(kwargs, message):
    with pytest.raises(ClipFormatError) as caught:
        read_clip(TAKES, **kwargs)
    assert str(caught.value) == f"{TAKES}: {message}"


def _bad(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: _bad(tmp, "notes.fbx", b"just some text\n"),
     "not an FBX file: it starts with neither the binary FBX signature ('Kaydara FBX Binary') "
     "nor an ASCII FBX header"),
    (lambda tmp: _bad(tmp, "empty.fbx", b""), "the file is empty"),
    (lambda tmp: _bad(tmp, "cut.fbx", ONE.read_bytes()[:20000]),
     "the FBX file is truncated (it ends before its data does)"),
    (lambda tmp: _bad(tmp, "cut2.fbx", ONE.read_bytes()[:300000]),
     "the FBX file is truncated (it ends before its data does)"),
    (lambda tmp: _bad(tmp, "damaged.fbx", ONE.read_bytes()[:300000] + bytes(300000)
                      + ONE.read_bytes()[-1000:]),
     "ufbx cannot read this FBX file: Bad DEFLATE data"),
    (lambda tmp: tmp / "missing.fbx", "cannot read the file: No such file or directory"),
    (lambda tmp: DATA / "no_skeleton.fbx",
     "no skeleton: the file has no joints (FBX skeleton/LimbNode nodes)"),
    (lambda tmp: DATA / "no_animation.fbx",
     "no animation: the file has no take (animation stack)"),
])
def test_bad_files_get_one_clear_error(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(ClipFormatError) as caught:
        read_clip(path)
    assert str(caught.value) == f"{path}: {message}"


def test_bvh_output_of_an_fbx_clip_keeps_the_motion(tmp_path, one):
    """BVH has no joint orients: the writer folds them into the rotation channels."""
    clip, _ = one
    assert clip.orients is not None  # the armature's -90° X turn sits in the root's orient
    write_bvh(clip, tmp_path / "out.bvh")
    again = read_bvh(tmp_path / "out.bvh")
    assert again.node_names == clip.node_names
    assert np.abs(again.positions - clip.positions).max() <= 1e-9 * clip.height()


def test_clip_rest_channels_units_and_up_axis(one):
    clip, _ = one
    assert clip.rest_channels is not None and clip.rest_channels.shape == (clip.n_channels,)
    # the height is measured on the file's stored pose, along the file's up axis
    rest = clip.rest_positions()
    assert clip.height() == pytest.approx(np.ptp(rest[:, 1]))
    sub = clip.sub_nodes(["LeftAnkle"]).sub_range(10, 20)
    assert (sub.units, sub.up_axis) == ("m", "y")
    assert sub.rest_channels.shape == (sub.n_channels,)
    with pytest.raises(ClipError, match="rest channel values must be 96 finite numbers"):
        clip._derived(rest_channels=np.zeros(3))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sp_core.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_cli_info_and_reduce_on_fbx(tmp_path):
    info = _cli("info", str(ONE), "--json", "-", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    record = json.loads(info.stdout)
    assert (record["frames"], record["fps"], record["nodes"][0]) == (240, 120.0, "Hips")

    done = _cli("reduce", str(ONE), "--keys", "12", "--space", "channel",
                "--key-values", "captured", "--json",
                "keys.json", "--bvh", "reduced.bvh", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    keys = json.loads((tmp_path / "keys.json").read_text())
    assert len(keys["frames"]) == 12 and keys["frames"][0] == 1 and keys["frames"][-1] == 240
    assert keys["channels"][0]["name"] == "Hips.Xposition"
    reduced = read_bvh(tmp_path / "reduced.bvh")
    clip = read_clip(ONE)
    assert reduced.n_frames == clip.n_frames
    # with captured key values the reduced motion passes through the original at the keys
    rows = np.array(keys["frames"]) - clip.first_frame
    assert np.abs(reduced.positions[rows] - clip.positions[rows]).max() < 1e-6 * clip.height()

    bad = _cli("info", str(TAKES), "--take", "Run", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"salient-poses: error: {TAKES}: no take 'Run'; the takes are 'Stop|Stop', 'Walk|Walk'"]


# ------------------------------------------------------------- FBX features Blender never writes
def _chain(n_frames: int = 12) -> list:
    """Joints with every Euler order, pre- and post-rotations, animated translations, two takes."""
    rng = np.random.default_rng(7)

    def keys() -> np.ndarray:
        return np.cumsum(rng.normal(0.0, 20.0, (n_frames, 3)), axis=0)

    return [
        Joint("root", None, (1, 2, 3), order="ZXY", pre=(10, -20, 30), post=(5, 15, -25),
              rotation_keys={"A": keys(), "B": keys()},
              translation_keys={"A": keys(), "B": keys()}),
        Joint("spine", "root", (0, 10, 0), order="YZX", pre=(0, 45, 0), post=(30, 0, 10),
              rotation_keys={"A": keys(), "B": keys()}),
        Joint("neck", "spine", (0, 8, 1), order="XZY", pre=(-15, 5, 60),
              rotation_keys={"A": keys()}),
        Joint("head", "neck", (0, 5, 0), order="YXZ", post=(12, 34, 56),
              rotation_keys={"A": keys(), "B": keys()}, translation_keys={"A": keys()}),
        Joint("jaw", "head", (0, 1, 2), order="XYZ", rotation_keys={"A": keys(), "B": keys()}),
        Joint("tip", "head", (0, 3, 0)),
    ]


def _matrix(order: str, angles) -> np.ndarray:
    """FBX Euler matrix: ``order`` "XYZ" turns about X first (extrinsic), angles given X, Y, Z."""
    values = [angles["XYZ".index(a)] for a in order]
    return Rotation.from_euler(order.lower(), values, degrees=True).as_matrix()


@pytest.mark.parametrize("take", ["A", "B"])
def test_rotation_orders_pre_and_post_rotations(tmp_path, take):
    joints = _chain()
    path = write_fbx(tmp_path / "chain.fbx", joints, ["A", "B"], fps=30.0, n_frames=12)
    clip = read_clip(path, take=take)
    _, _, samples, _, _ = fbx._extract_isolated(str(path), take, None)
    assert clip.node_names == [j.name for j in joints]
    assert clip.end_site_names == ["tip"]
    assert np.abs(clip.positions - samples["world"][:-1]).max() <= 1e-9 * clip.height()
    for joint in joints[:-1]:
        i = clip.node_index(joint.name)
        # FBX order "ZXY" (R = Ry·Rx·Rz) is listed intrinsically: Y, X, Z
        assert clip.rotation_orders[i] == joint.order[::-1]
        keyed = joint.rotation_keys.get(take)
        expected = np.tile(joint.rotation, (12, 1)) if keyed is None else keyed
        columns = [c for c in clip.node_channels(joint.name)
                   if "rotation" in clip.channel_names[c]]
        listed = ["XYZ".index(a) for a in joint.order[::-1]]
        assert np.allclose(clip.raw_channels[:, columns], expected[:, listed], atol=1e-9)
    # orients: the pre-rotation, turned by the parent's inverse post-rotation
    assert np.allclose(clip.orients[0], _matrix("XYZ", joints[0].pre))
    assert np.allclose(clip.orients[1],
                       _matrix("XYZ", joints[0].post).T @ _matrix("XYZ", joints[1].pre))
    moving = {c.partition(".")[0] for c in clip.channel_names if "position" in c}
    assert moving == ({"root", "head"} if take == "A" else {"root"})


def test_units_and_up_axis_come_from_the_file(tmp_path):
    # (two joints: one joint alone has no body whose height could be measured)
    joints = [Joint("hips", None, (0, 0, 90), rotation_keys={"T": np.zeros((3, 3))}),
              Joint("neck", "hips", (0, 0, 50)), Joint("head", "neck", (0, 0, 30))]
    path = write_fbx(tmp_path / "z_up.fbx", joints, ["T"], n_frames=3, unit_cm=100.0,
                     up_axis=2)
    clip = read_clip(path)
    assert (clip.units, clip.up_axis) == ("m", "z")
    assert clip.height() == pytest.approx(80.0)


def test_non_uniform_scale_on_a_joint_is_refused(tmp_path):
    joints = [Joint("hips", None, (0, 0, 0), scale=(1, 2, 1),
                    rotation_keys={"T": np.zeros((3, 3))}),
              Joint("head", "hips", (0, 1, 0))]
    path = write_fbx(tmp_path / "scaled.fbx", joints, ["T"], n_frames=3)
    with pytest.raises(ClipFormatError) as caught:
        read_clip(path)
    assert str(caught.value) == (
        f"{path}: joint 'hips' has non-uniform or animated scale (from 1 to 2); salient-poses "
        "reads skeletons whose joints keep one uniform scale")


def test_an_fbx_clip_runs_the_kernels_the_install_compiled_for_bvh():
    """An FBX clip's orients are read-only: the world fit's and the corrective keys'
    kinematics compiled three more kernel signatures for it, 11 s on the first FBX take of a
    batch (sp_core.warm compiles on a BVH-like clip)."""
    from sp_core import _fit_kernels
    from sp_core.reduction import reduce
    from sp_core.warm import practice_clip

    kernels = (_fit_kernels.chain_kinematics, _fit_kernels.chain_world,
               _fit_kernels.subtree_positions, _fit_kernels.subtree_errors)
    clip = practice_clip()
    reduce(clip, [0, 20, clip.n_frames - 1], space="world", corrective_budget="50%")
    known = [len(kernel.signatures) for kernel in kernels]
    take = read_clip(ONE).sub_range(1, 61)
    assert take.orients is not None and not take.orients.flags.writeable
    reduce(take, [1, 30, 61], space="world", corrective_budget="20%")
    assert [len(kernel.signatures) for kernel in kernels] == known


# ---------------------------------------------------------------- found by a review of the reader
def _ramp(n: int, step: float = 10.0) -> np.ndarray:
    keys = np.zeros((n, 3))
    keys[:, 2] = np.arange(n) * step
    return keys


def _two_joints(keys: dict[str, np.ndarray]) -> list[Joint]:
    return [Joint("hips", None, (0, 90, 0), rotation_keys=keys),
            Joint("head", "hips", (0, 30, 0))]


@pytest.mark.parametrize(("mode", "rate", "start"), [
    (18, 120000 / 1001, 0),      # eFrames119dot88: ufbx 0.0.5 reads it as 24 fps
    (9, 30000 / 1001, 107892),   # NTSC an hour in: ufbx's 29.97 put samples 0.1 frame late
    (8, 30000 / 1001, 1001),
    (13, 24000 / 1001, 86400),
    (17, 60000 / 1001, 215784),
])
def test_ntsc_and_119_88_takes_are_sampled_on_their_keys(tmp_path, mode, rate, start):
    keys = _ramp(8)
    path = write_fbx(tmp_path / "ntsc.fbx", _two_joints({"T": keys}), ["T"], fps=rate,
                     n_frames=8, start_frame=start)
    text = path.read_text().replace('"TimeMode", "enum", "", "",14',
                                    f'"TimeMode", "enum", "", "",{mode}')
    path.write_text(text.replace(f'\t\tP: "CustomFrameRate", "double", "Number", "",'
                                 f'{rate:.17g}\n', ""))
    clip = read_clip(path)
    assert clip.fps == pytest.approx(rate, rel=1e-12)
    assert (clip.first_frame, clip.n_frames) == (start, 8)
    column = clip.channel_names.index("hips.Zrotation")
    np.testing.assert_allclose(clip.raw_channels[:, column], keys[:, 2], atol=1e-6)


def test_an_unknown_time_mode_is_refused(tmp_path):
    path = write_fbx(tmp_path / "mode.fbx", _two_joints({"T": _ramp(3)}), ["T"], n_frames=3)
    path.write_text(path.read_text().replace('"TimeMode", "enum", "", "",14',
                                             '"TimeMode", "enum", "", "",19'))
    with pytest.raises(ClipFormatError) as caught:
        read_clip(path)
    assert str(caught.value) == (
        f"{path}: the scene's time mode (TimeMode 19) is not one the FBX SDK defines (0 to "
        "18), so its frame rate is unknown")


def test_a_cut_ascii_file_is_refused(tmp_path):
    """ufbx reads a cut ASCII file without a word: cut in its connections it gave the root
    alone; cut before them, joints without parents."""
    whole = write_fbx(tmp_path / "whole.fbx", _chain(), ["A"], n_frames=12).read_text()
    assert len(read_clip(tmp_path / "whole.fbx", take="A").node_names) == 6
    connections = whole.index("Connections:")
    for cut in (connections - 1, connections + 40, len(whole) - 30):
        path = tmp_path / f"cut_{cut}.fbx"
        path.write_text(whole[:cut])
        with pytest.raises(ClipFormatError) as caught:
            read_clip(path)
        assert str(caught.value) == (
            f"{path}: the FBX file is truncated (it ends before its data does)")


@pytest.mark.parametrize(("frames", "where"), [
    ([2], "at frame 2 of take 'T'"),
    ([0], "at frame 0 of take 'T'"),
    ([3, 5, 1], "at frame 1 of take 'T' (and 2 more frames)"),
])
def test_a_nan_key_is_refused_with_its_joint_and_frame(tmp_path, frames, where):
    """A NaN key was read without a word (and unwrapping spread it over the frames after it),
    or, on the first frame, failed inside scipy."""
    keys = _ramp(6)
    keys[frames, 0] = np.nan
    joints = [Joint("hips", None, (0, 90, 0), rotation_keys={"T": _ramp(6)}),
              Joint("spine", "hips", (0, 20, 0), rotation_keys={"T": keys}),
              Joint("head", "spine", (0, 30, 0))]
    path = write_fbx(tmp_path / "nan.fbx", joints, ["T"], n_frames=6)
    with pytest.raises(ClipFormatError) as caught:
        read_clip(path)
    assert str(caught.value) == (
        f"{path}: joint 'spine' has a value that is not a number (NaN or infinity) {where}; "
        "salient-poses reads finite values only")


def test_the_default_take_is_the_one_the_file_names_active(tmp_path):
    """The document's ActiveAnimStackName (ufbx 0.0.5 does not read it: it took the first)."""
    joints = _two_joints({"Walk": _ramp(5, 10.0), "Run": _ramp(5, 20.0)})
    path = write_fbx(tmp_path / "takes.fbx", joints, ["Walk", "Run"], n_frames=5)
    document = ('Documents:  {\n\tCount: 1\n\tDocument: 999, "", "Scene" {\n'
                '\t\tProperties70:  {\n\t\t\tP: "SourceObject", "object", "", ""\n'
                '\t\t\tP: "ActiveAnimStackName", "KString", "", "", "Run"\n'
                '\t\t}\n\t\tRootNode: 0\n\t}\n}\n')
    path.write_text(path.read_text().replace("Objects:  {", document + "Objects:  {", 1))
    column = read_clip(path).channel_names.index("hips.Zrotation")
    np.testing.assert_allclose(read_clip(path).raw_channels[:, column], _ramp(5, 20.0)[:, 2])
    np.testing.assert_allclose(read_clip(path, take="Walk").raw_channels[:, column],
                               _ramp(5, 10.0)[:, 2])


def test_the_active_take_name_of_a_binary_file(tmp_path):
    """The binary property's strings (S, uint32 length, bytes); Blender writes an empty name,
    which leaves the first take (test_default_take_and_root_and_every_take)."""
    def strings(*values: bytes) -> bytes:
        return b"".join(b"S" + len(v).to_bytes(4, "little") + v for v in values)

    path = tmp_path / "active.fbx"
    path.write_bytes(fbx._BINARY_MAGIC + bytes(20) + b"\x01P"
                     + strings(b"ActiveAnimStackName", b"KString", b"", b"", b"Run|Run"))
    assert fbx._active_take(str(path)) == "Run|Run"
    assert fbx._active_take(str(TAKES)) == ""
    path.write_bytes(fbx._BINARY_MAGIC + bytes(20))
    assert fbx._active_take(str(path)) is None


def test_a_take_without_a_time_span_covers_its_keys(tmp_path):
    """A take with neither LocalStart/LocalStop nor ReferenceStart/ReferenceStop: ufbx says 0
    to 0, which read one frame before the first key."""
    keys = _ramp(10)
    path = write_fbx(tmp_path / "span.fbx", _two_joints({"T": keys}), ["T"], n_frames=10,
                     start_frame=5)
    text = "".join(line for line in path.read_text().splitlines(keepends=True)
                   if '"LocalStart"' not in line and '"LocalStop"' not in line)
    path.write_text(text)
    clip = read_clip(path)
    assert (clip.first_frame, clip.last_frame) == (5, 14)
    column = clip.channel_names.index("hips.Zrotation")
    np.testing.assert_allclose(clip.raw_channels[:, column], keys[:, 2], atol=1e-9)


def test_a_group_between_joints_is_part_of_the_skeleton(tmp_path):
    """A null between two joints stopped the skeleton there: the joints below it were lost."""
    keys = _ramp(5)
    joints = [Joint("hips", None, (0, 90, 0), rotation_keys={"T": keys}),
              Joint("grp", "hips", (0, 5, 0)),
              Joint("spine", "grp", (0, 20, 0), rotation_keys={"T": keys}),
              Joint("head", "spine", (0, 30, 0))]
    path = write_fbx(tmp_path / "group.fbx", joints, ["T"], n_frames=5)
    text = path.read_text().replace(
        '"NodeAttribute::grp", "LimbNode" {\n\t\tTypeFlags: "Skeleton"',
        '"NodeAttribute::grp", "Null" {\n\t\tTypeFlags: "Null"')
    path.write_text(text.replace('"Model::grp", "LimbNode"', '"Model::grp", "Null"'))
    clip = read_clip(path)
    _, _, samples, _, _ = fbx._extract_isolated(str(path), None, None)
    assert clip.node_names == ["hips", "grp", "spine", "head"]
    assert clip.root_names == ["hips"]
    assert np.abs(clip.positions - samples["world"][:-1]).max() <= 1e-9 * clip.height()
    # (the head turns with both rotations: 10° a frame at the hips and at the spine)
    assert np.ptp(clip.positions[:, 3, 0]) > 20.0
