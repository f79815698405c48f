"""BVH reading and writing: real layouts, every malformed case, and the write/read round trip."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings

from sp_core.errors import ClipError, ClipFormatError
from sp_core.io.bvh import format_bvh, fps_from_frame_time, parse_bvh, read_bvh, write_bvh

from reference_fk import world_positions
from strategies import clips

SMALL = textwrap.dedent("""\
    HIERARCHY
    ROOT Hips
    {
      OFFSET 0 0 0
      CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
      JOINT Spine
      {
        OFFSET 0 10 0
        CHANNELS 3 Zrotation Xrotation Yrotation
        End Site
        {
          OFFSET 0 5 0
        }
      }
    }
    MOTION
    Frames: 3
    Frame Time: 0.0333333
    1 2 3 0 0 0 0 0 0
    1 2 4 5 0 0 0 0 20
    1 2 5 0 0 90 0 0 30
    """)


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_sample_clip_header(sample_clip):
    assert sample_clip.n_frames == 994
    assert sample_clip.fps == 120.0
    assert sample_clip.frame_time == 0.0083333
    assert sample_clip.n_nodes == 38 and len(sample_clip.end_site_names) == 7
    assert sample_clip.n_channels == 96
    assert sample_clip.channel_names[:4] == ["Hips.Xposition", "Hips.Yposition", "Hips.Zposition",
                                             "Hips.Zrotation"]
    assert sample_clip.rotation_orders[0] == "ZYX"
    assert sample_clip.first_frame == 0


def test_small_file_values_and_positions():
    clip = parse_bvh(SMALL)
    assert clip.node_names == ["Hips", "Spine", "Spine_end"]
    assert clip.rotation_orders == ["ZXY", "ZXY", ""]
    assert clip.fps == 30.0 and clip.frame_time == 0.0333333
    np.testing.assert_allclose(clip.positions[0], [[1, 2, 3], [1, 12, 3], [1, 17, 3]], atol=1e-12)
    # frame 2: yaws about Y (Hips 90 deg, Spine 30 deg) do not move points on the Y axis
    np.testing.assert_allclose(clip.positions[2, 2], [1, 17, 5], atol=1e-12)


def test_first_frame_is_kept():
    clip = parse_bvh(SMALL, first_frame=1001)
    assert clip.first_frame == 1001 and clip.last_frame == 1003
    assert list(clip.frames) == [1001, 1002, 1003]


def test_tabs_crlf_trailing_spaces_scientific_notation():
    text = SMALL.replace("  ", "\t").replace("\n", " \t\r\n")
    text = text.replace("1 2 4 5", "1e0 2.0E+0 4 5.0e-0").replace("0.0333333", ".0333333")
    a, b = parse_bvh(SMALL), parse_bvh(text)
    np.testing.assert_array_equal(a.channels, b.channels)
    assert b.node_names == a.node_names


@pytest.mark.parametrize("frame_time, fps", [(".0083333", 120.0), ("0.033333", 30.0),
                                             ("0.041666667", 24.0), ("0.0333667", 30000 / 1001),
                                             ("0.01", 100.0), ("0.0123", 1 / 0.0123)])
def test_fps_from_frame_time(frame_time, fps):
    clip = parse_bvh(SMALL.replace("0.0333333", frame_time))
    assert clip.fps == pytest.approx(fps, rel=1e-12)
    assert clip.frame_time == float(frame_time)
    assert fps_from_frame_time(float(frame_time)) == clip.fps


def test_root_with_rotation_only_and_positions_on_joints_and_two_roots():
    text = textwrap.dedent("""\
        HIERARCHY
        ROOT A
        {
        OFFSET 1 0 0
        CHANNELS 3 Yrotation Xrotation Zrotation
        JOINT B
        {
        OFFSET 0 2 0
        CHANNELS 6 Zrotation Xposition Yposition Zposition Xrotation Yrotation
        }
        }
        ROOT C
        {
        OFFSET 5 5 5
        CHANNELS 1 Xposition
        End Site
        {
        OFFSET 0 1 0
        }
        }
        MOTION
        Frames: 2
        Frame Time: 0.04
        90 0 0  0 3 4 5 0 0  7
        0 0 0  0 3 4 5 0 0  8
        """)
    clip = parse_bvh(text)
    assert clip.root_names == ["A", "C"]
    assert clip.rotation_orders == ["YXZ", "ZXY", "", ""]
    expected = world_positions(clip.node_names, clip.parents, clip.offsets, clip.channel_names,
                               clip.channels)
    np.testing.assert_allclose(clip.positions, expected, atol=1e-12)
    # B's position channels replace its offset: rotated by A's 90 deg yaw, (3,4,5) -> (5,4,-3)
    np.testing.assert_allclose(clip.positions[0, 1], [1 + 5, 4, -3], atol=1e-12)
    np.testing.assert_allclose(clip.positions[:, 2], [[7, 5, 5], [8, 5, 5]])
    np.testing.assert_allclose(clip.positions[:, 3], [[7, 6, 5], [8, 6, 5]])


def test_lowercase_channel_names_and_zero_frames():
    clip = parse_bvh(SMALL.replace("Zrotation", "zROTATION").replace("Frames: 3", "Frames: 0")
                     .split("1 2 3")[0])
    assert clip.n_frames == 0 and clip.channel_names[3] == "Hips.Zrotation"
    assert clip.positions.shape == (0, 3, 3)


def test_one_frame_clip():
    text = SMALL.replace("Frames: 3", "Frames: 1").rsplit("\n1 2 4", 1)[0]
    clip = parse_bvh(text)
    assert clip.n_frames == 1 and clip.positions.shape == (1, 3, 3)


def test_rotations_are_unwrapped_on_load_and_raw_values_kept():
    text = SMALL.replace("0 0 20\n", "0 0 170\n").replace("0 0 30\n", "0 0 -150\n")
    clip = parse_bvh(text)
    assert clip.channels[:, 8].tolist() == [0.0, 170.0, 210.0]
    assert clip.raw_channels[:, 8].tolist() == [0.0, 170.0, -150.0]
    np.testing.assert_allclose(clip.positions, clip.forward_kinematics(clip.raw_channels),
                               atol=1e-12)
    assert parse_bvh(text, unwrap=False).channels[2, 8] == -150.0


# ---------------------------------------------------------------------------- malformed input
def replace_line(text: str, number: int, new: str) -> str:
    rows = text.splitlines()
    rows[number - 1] = new
    return "\n".join(rows) + "\n"


MALFORMED = [
    # (description, text, line, message fragment)
    ("truncated file", SMALL.rsplit("\n1 2 5", 1)[0] + "\n", 20, "ends after 2 frames"),
    ("truncated hierarchy", "\n".join(lines(SMALL)[:9]), 9, "expected '}' closing JOINT 'Spine'"),
    ("Frames too large", SMALL.replace("Frames: 3", "Frames: 4"), 21, "'Frames: 4'"),
    ("Frames too small", SMALL.replace("Frames: 3", "Frames: 2"), 21, "more motion data"),
    ("Frames not a number", SMALL.replace("Frames: 3", "Frames: three"), 17, "whole number"),
    ("negative Frames", SMALL.replace("Frames: 3", "Frames: -3"), 17, "whole number"),
    ("missing Frames", SMALL.replace("Frames: 3", "Frame: 3"), 17, "expected 'Frames: <number>'"),
    ("bad Frame Time", SMALL.replace("0.0333333", "0"), 18, "positive number of seconds"),
    # (a viewer's timer overflowed at 3e-7 fps; 1e-300 s read as 1e+300 fps)
    ("Frame Time of a month", SMALL.replace("0.0333333", "3000000"), 18,
     "'Frame Time:' 3000000 s is outside 1e-06 to 3600 s (a million frames a second to one "
     "an hour)"),
    ("tiny Frame Time", SMALL.replace("0.0333333", "1e-300"), 18, "is outside 1e-06 to 3600 s"),
    ("non-numeric value", replace_line(SMALL, 20, "1 2 4 5 0 x 20 0 0"), 20,
     "'x' for channel Hips.Yrotation is not a number"),
    ("too few values", replace_line(SMALL, 20, "1 2 4 5 0 0 20 0"), 20, "expected 9 values"),
    ("too many values", replace_line(SMALL, 19, "1 2 3 0 0 0 10 0 0 0"), 19, "found 10"),
    ("NaN", replace_line(SMALL, 21, "1 2 5 10 0 nan 30 0 0"), 21, "not finite"),
    ("inf", replace_line(SMALL, 19, "1 2 3 0 0 0 inf 0 0"), 19, "not finite"),
    # finite but far beyond any motion: squared distances would overflow to inf
    ("huge value", replace_line(SMALL, 20, "1e300 2 4 5 0 0 20 0 0"), 20,
     "value '1e300' for channel Hips.Xposition is beyond ±1e+09, which no motion comes near"),
    ("huge offset", SMALL.replace("OFFSET 0 10 0", "OFFSET 0 1e12 0"), 8,
     "an OFFSET value (3 numbers) must be within ±1e+09, found '1e12'"),
    ("unknown channel", SMALL.replace("Zrotation Xrotation Yrotation", "Zrotation Xrotation Wrot"),
     5, "expected a channel name"),
    ("channel count too high", SMALL.replace("CHANNELS 3", "CHANNELS 4"), 10,
     "expected a channel name"),
    ("channel listed twice", SMALL.replace("Zrotation Xrotation Yrotation",
                                           "Zrotation Xrotation Zrotation"), 5, "listed twice"),
    ("unbalanced: missing brace", SMALL.replace("    }\n  }\n}", "    }\n  }"), 15,
     "expected '}' closing ROOT 'Hips' (opened on line 2), found 'MOTION'"),
    ("unbalanced: extra brace", SMALL.replace("    }\n  }\n}", "    }\n  }\n}\n}"), 16,
     "expected 'ROOT' or 'MOTION', found '}'"),
    ("bad offset", SMALL.replace("OFFSET 0 10 0", "OFFSET 0 ten 0"), 8, "expected an OFFSET value"),
    ("no MOTION", SMALL.split("MOTION")[0], 15, "expected 'MOTION'"),
    ("empty file", "", 1, "expected 'HIERARCHY'"),
    ("not a BVH", "hello world\n", 1, "expected 'HIERARCHY', found 'hello'"),
    ("duplicate joint", SMALL.replace("JOINT Spine", "JOINT Hips"), 6, "used twice"),
    ("garbage in joint", SMALL.replace("OFFSET 0 10 0", "OFFSET 0 10 0\n    WEIGHT 3"), 9,
     "found 'WEIGHT'"),
]


@pytest.mark.parametrize("case, text, line, fragment", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_raises_clip_format_error_with_line(case, text, line, fragment, tmp_path):
    path = tmp_path / "bad.bvh"
    path.write_text(text)
    with pytest.raises(ClipFormatError) as info:
        read_bvh(path)
    assert info.value.line == line, str(info.value)
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"{path}, line {line}: ")


def test_a_clip_refuses_values_beyond_any_motion(sample_clip):
    # whatever read them (FBX, a host, an edit): the first such value, with its frame
    channels = sample_clip.channels.copy()
    channels[5, 7] = -2e9
    name = sample_clip.channel_names[7]
    with pytest.raises(ClipError, match=rf"^channel {name} is -2e\+09 at frame 5: beyond "
                                        r"±1e\+09, which no motion comes near"):
        sample_clip.with_channels(channels)


def test_missing_file_is_a_clip_format_error(tmp_path):
    with pytest.raises(ClipFormatError, match="cannot read the file"):
        read_bvh(tmp_path / "absent.bvh")


# ------------------------------------------------------------------------------- writing
def test_sample_round_trip(sample_clip, tmp_path):
    path = tmp_path / "out.bvh"
    write_bvh(sample_clip, path)
    again = read_bvh(path)
    assert again.node_names == sample_clip.node_names
    assert again.channel_names == sample_clip.channel_names
    np.testing.assert_allclose(again.channels, sample_clip.channels, atol=5e-7)
    np.testing.assert_allclose(again.positions, sample_clip.positions, atol=1e-4)
    raw = read_bvh(path, unwrap=False)
    np.testing.assert_allclose(raw.channels, sample_clip.channels, atol=5e-7)
    write_bvh(sample_clip, path, raw=True)
    np.testing.assert_allclose(read_bvh(path, unwrap=False).channels, sample_clip.raw_channels,
                               atol=5e-7)


@settings(max_examples=80, deadline=None)
@given(clips())
def test_write_then_read_gives_the_same_clip(clip):
    again = parse_bvh(format_bvh(clip), first_frame=clip.first_frame, unwrap=False)
    assert sorted(again.node_names) == sorted(clip.node_names)
    assert again.root_names == clip.root_names
    for name in clip.node_names:
        i, j = clip.node_index(name), again.node_index(name)
        np.testing.assert_allclose(again.offsets[j], clip.offsets[i], atol=1e-9)
        assert bool(again.end_sites[j]) == bool(clip.end_sites[i])
        parent = clip.parents[i]
        assert (again.node_names[again.parents[j]] if again.parents[j] >= 0 else None) == \
            (clip.node_names[parent] if parent >= 0 else None)
        assert again.rotation_orders[j] == clip.rotation_orders[i]
        assert [again.channel_names[c] for c in again.node_channels(name)] == \
            [clip.channel_names[c] for c in clip.node_channels(name)]
    assert sorted(again.channel_names) == sorted(clip.channel_names)
    columns = [again.channel_names.index(c) for c in clip.channel_names]
    np.testing.assert_allclose(again.channels[:, columns], clip.channels, atol=1e-9)
    assert again.n_frames == clip.n_frames and again.first_frame == clip.first_frame
    assert again.fps == clip.fps and again.frame_time == clip.frame_time
    nodes = [again.node_index(n) for n in clip.node_names]
    np.testing.assert_allclose(again.positions[:, nodes], clip.positions, atol=1e-7)
    # and the unwrapped reading shows the same poses
    unwrapped = parse_bvh(format_bvh(clip))
    np.testing.assert_allclose(unwrapped.positions[:, nodes], clip.positions, atol=1e-7)


def test_a_joint_named_like_an_end_site_keeps_its_name(tmp_path):
    """``Spine_end`` is the name the reader gives Spine's End Site; a joint of that name read
    after it is the file's own: the End Site takes the next free name."""
    path = tmp_path / "named.bvh"
    path.write_text(textwrap.dedent("""\
        HIERARCHY
        ROOT Hips
        {
          OFFSET 0 0 0
          CHANNELS 3 Xposition Yposition Zposition
          JOINT Spine
          {
            OFFSET 0 10 0
            CHANNELS 1 Zrotation
            End Site
            {
              OFFSET 0 5 0
            }
          }
          JOINT Spine_end
          {
            OFFSET 5 0 0
            CHANNELS 1 Zrotation
            End Site
            {
              OFFSET 0 5 0
            }
          }
        }
        MOTION
        Frames: 2
        Frame Time: 0.0333333
        1 2 3 10 7
        1 2 4 20 7
        """))
    clip = read_bvh(path)
    assert clip.node_names == ["Hips", "Spine", "Spine_end2", "Spine_end", "Spine_end_end"]
    assert clip.end_sites.tolist() == [False, False, True, False, True]
    assert clip.channels[:, clip.channel_names.index("Spine_end.Zrotation")].tolist() == [7, 7]
