"""The options schema: one declaration reaching every front end, one message per bad value,
presets, and one rule for K (issue 16)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from sp_core.errors import OptionError, SelectionError, said
from sp_core.io.bvh import read_bvh, write_bvh
from sp_core.options import (
    CLI,
    HOST,
    Options,
    Pin,
    build,
    candidate_count,
    coerce,
    default_of,
    field_specs,
    flag_of,
    k_for,
    load_preset,
    preset_text,
)
from sp_core.session import Session
from sp_core.standalone import StandaloneHost

ROOT = Path(__file__).resolve().parents[1]


def test_every_field_declares_help_and_a_sensible_default():
    for name, (_, spec) in field_specs().items():
        assert spec.help and not spec.help.endswith("."), name
        assert spec.fronts, name
        default = default_of(name)
        if default is not None:
            assert coerce(name, default) == default, name  # the default passes its own check


def test_every_cli_field_is_a_flag_of_some_command_and_has_help():
    from sp_core.cli import COMMAND_OPTIONS, build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    reached = set()
    for command, names in COMMAND_OPTIONS.items():
        flags = {o: a for a in subparsers[command]._actions for o in a.option_strings}
        for name in names:
            action = flags[flag_of(name)]
            assert action.dest == name and action.help, (command, name)
            reached.add(name)
    cli_fields = {n for n, (_, spec) in field_specs().items() if CLI in spec.fronts}
    assert cli_fields == reached


def test_every_host_field_reaches_the_host_api_and_batches():
    from sp_core.batch import HOST_BATCH_OPTIONS, add_host_batch_options

    sys.path.insert(0, str(Path(__file__).parent / "fake_maya"))
    from maya_plugin import api

    host_fields = [n for n, (g, spec) in field_specs().items() if HOST in spec.fronts
                   and g not in ("input", "wand")]
    assert set(api.OPTIONS) == set(host_fields)
    for name in host_fields:  # the API accepts each with its default, under its own name
        value = default_of(name)
        if value is None:
            value = {"roots": ["Hips"], "nodes": ["Hips"], "max_span": 10, "max_keys": 4,
                     "breakdowns": 1, "keys": 4, "ratio": 0.5, "frames": [0, 5],
                     "out": "o", "frame_range": (0, 9), "tolerance": (2.0, 20.0),
                     "corrective_budget": "2%", "time_budget": 5.0}[name]
        # (smoothness given is held to the smooth tangents, as on a command line)
        options = api.options_for(**{name: value},
                                  **({"tangents": "smooth"} if name == "smoothness" else {}))
        assert getattr(getattr(options, field_specs()[name][0]), name) == coerce(name, value)
    import argparse

    parser = argparse.ArgumentParser()
    add_host_batch_options(parser)
    flags = {o for a in parser._actions for o in a.option_strings}
    assert {flag_of(n) for n in HOST_BATCH_OPTIONS} <= flags
    assert set(HOST_BATCH_OPTIONS) == set(host_fields)


@pytest.mark.parametrize("name, value, message", [
    ("ratio", 0, "ratio must be a number in (0, 1], got 0"),
    ("ratio", "1.5", "ratio must be a number in (0, 1], got 1.5"),
    ("keys", 2.5, "keys must be a whole number >= 2, got 2.5"),
    ("keys", True, "keys must be a whole number >= 2, got True"),
    ("stride", "two", "stride must be a whole number >= 1, got two"),
    ("tangents", "bent", "tangents must be one of unified, broken, smooth, weighted, got bent"),
    ("cost", "line-mx", "cost must be one of curve-max, curve-sse, line-max, line-sse, "
                        "line-time, got line-mx"),
    ("frame_range", "9:3", "frame_range must be START:END host frames with END > START, "
                           "got 9:3"),
    ("pins", [1.5], "pins must be whole frame numbers separated by commas"),
    ("weights", {"Head": -1}, "weights must be NODE=WEIGHT pairs (each node once, weights "
                              "from 0 to 1e6)"),
    ("weights", "Hips=2,Hips=3", "weights must be NODE=WEIGHT pairs (each node once"),
    ("weights", "Hips=1e200", "weights must be NODE=WEIGHT pairs (each node once"),
    ("frame_range", "10:", "frame_range must be START:END host frames with END > START, got "
                           "10:"),
    ("smoothness", 1e18, "smoothness must be a number in [0, 1e+06], got 1e+18"),
    ("time_scale", 1e300, "time_scale must be a number in [0, 1e+06]"),
    ("sigma", 1e-300, "sigma must be a number in [1e-06, 1e+06]"),
    ("nodes", [], "nodes must be at least one node name"),
    ("layer", "  ", "layer must be a non-empty name"),
    ("residual_weight", math.inf, "residual_weight must be a number in [0, 1], got inf"),
    ("cost_options", "{x", "cost_options must be a JSON object"),
])
def test_one_message_per_bad_value(name, value, message):
    with pytest.raises(OptionError) as caught:
        coerce(name, value)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_options_are_frozen_and_changes_are_checked():
    options = Options()
    with pytest.raises(AttributeError):
        options.analysis.stride = 2  # type: ignore[misc]
    changed = options.replace(stride="4", pins="8,4", weights="Head=2")
    assert changed.analysis.stride == 4 and changed.analysis.pins == (Pin(4), Pin(8))
    assert changed.analysis.weights == (("Head", 2.0),) and options.analysis.stride == 1
    with pytest.raises(OptionError, match="unknown option 'strid'"):
        options.replace(strid=2)
    with pytest.raises(OptionError, match="keys and ratio both choose the keys; give one"):
        options.replace(keys=5, ratio=0.1)


def test_a_choice_of_keys_on_the_command_line_replaces_the_presets(sample_path, tmp_path,
                                                                   capsys):
    # flags override a preset, the choice of keys too: --keys over a preset's ratio is not two
    # choices; two in one place still are
    from sp_core.cli import main

    preset = tmp_path / "studio.toml"
    preset.write_text("[keys]\nratio = 0.05\n")
    assert main(["reduce", str(sample_path), "--preset", str(preset), "--keys", "7",
                 "--space", "channel"]) == 0
    assert capsys.readouterr().out.startswith("Keys       K = 7 as asked\n")
    assert Options().replace(ratio=0.05).replace(suggested=True).keys == \
        Options().replace(suggested=True).keys
    preset.write_text("[keys]\nratio = 0.05\nkeys = 7\n")
    assert main(["reduce", str(sample_path), "--preset", str(preset)]) == 2
    assert f"error: preset {preset}: keys and ratio both choose the keys; give one" in \
        capsys.readouterr().err  # which file holds the error (it named no file)
    preset.write_text("[keys]\nkeyz = 7\n")
    assert main(["batch", str(sample_path), "--out", str(tmp_path / "out"), "--preset",
                 str(preset)]) == 2
    assert f"error: preset {preset}: unknown option 'keyz'" in capsys.readouterr().err


def test_a_presets_misnamed_or_repeated_option_is_said(tmp_path):
    """A preset's ``range`` (the field is ``frame_range``) is named with the option meant; a
    JSON preset that gives a key twice is refused (JSON kept the last value without a word;
    TOML refuses it itself)."""
    from sp_core.options import preset_options

    preset = tmp_path / "studio.json"
    preset.write_text('{"range": [1001, 1100]}')
    with pytest.raises(OptionError, match=r"^preset .*: unknown option 'range' \(did you "
                                          r"mean 'frame_range'\?\); options are "):
        preset_options(preset)
    preset.write_text('{"fit": {"tangents": "broken", "tangents": "unified"}}')
    with pytest.raises(OptionError) as caught:
        preset_options(preset)
    assert str(caught.value) == f"{preset}: 'tangents' given twice in one table; give each " \
                                "option once"
    preset.write_text('{"fit": {"tangents": "broken"}, "keys": {"tangents": "unified"}}')
    with pytest.raises(OptionError, match="tangents"):  # (two tables: refused as before)
        preset_options(preset)


def test_a_tolerance_is_refused_with_layered_keys(sample_path, capsys):
    # keyposes and breakdowns have their own rules: a tolerance would be dropped silently
    from sp_core.cli import main

    with pytest.raises(OptionError, match=r"^tolerance does not apply with layered"):
        Options().replace(layered=True, leading=("RightWrist",), tolerance="1,10")
    assert Options().replace(layered=True, leading=("RightWrist",)).analysis.layered
    assert main(["reduce", str(sample_path), "--layered", "--leading", "RightWrist",
                 "--keys", "3", "--space", "channel"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("Keys       3 keyposes (as asked) and ") and \
        first.endswith(" breakdowns (--layered)")
    # on a command line the leading part comes with the mode, named by its flag
    assert main(["reduce", str(sample_path), "--layered"]) == 2
    assert capsys.readouterr().err == ("salient-poses: error: --layered needs --leading "
                                       "NODE,... (the part whose extremes are the keyposes, "
                                       "e.g. --leading RightWrist)\n")


def test_presets_round_trip_through_toml_and_json(tmp_path):
    options = Options().replace(cost="line-time", stride=2, pins=[Pin(40, "contact")],
                                tangents="broken", ratio=0.05, layer="studio",
                                weights={"Head": 2.0})
    text = preset_text(options)
    (tmp_path / "studio.toml").write_text(text)
    assert build(load_preset(tmp_path / "studio.toml")) == options
    (tmp_path / "studio.json").write_text(json.dumps(options.to_dict()))
    assert build(load_preset(tmp_path / "studio.json")) == options
    (tmp_path / "bad.toml").write_text("[analysis]\nstride = 0\n")
    with pytest.raises(OptionError, match="stride must be a whole number >= 1, got 0"):
        build(load_preset(tmp_path / "bad.toml"))
    (tmp_path / "broken.toml").write_text("[analysis\n")
    with pytest.raises(OptionError, match="broken.toml: not a valid TOML preset"):
        load_preset(tmp_path / "broken.toml")
    # a byte-order mark is read past (it was "Invalid statement"), and bytes that are not
    # UTF-8 are said as such (an internal error, UnicodeDecodeError)
    for name in ("bom.toml", "bom.json"):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + (text.encode() if name.endswith(
            "toml") else json.dumps(options.to_dict()).encode()))
        assert build(load_preset(tmp_path / name)) == options
    (tmp_path / "latin.toml").write_bytes(b"\xff\xfe[analysis]")
    with pytest.raises(OptionError, match=r"latin.toml: not a TOML preset: not UTF-8 text "
                                          r"\(byte 0\)$"):
        load_preset(tmp_path / "latin.toml")


def test_cli_preset_then_flags(tmp_path, capsys):
    from sp_core.cli import main

    clip = tmp_path / "take.bvh"
    write_bvh(read_bvh(ROOT / "examples" / "cmu_131_01.bvh").sub_range(0, 199), clip)
    (tmp_path / "studio.toml").write_text('[keys]\nratio = 0.05\n[fit]\ntangents = "broken"\n'
                                          'space = "channel"\n')
    out = tmp_path / "k.json"
    assert main(["reduce", str(clip), "--preset", str(tmp_path / "studio.toml"),
                 "--tangents", "weighted", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert len(record["frames"]) == 10 and record["tangents"] == "weighted"
    assert record["options"]["keys"]["ratio"] == 0.05
    assert record["options"]["fit"] == {"tangents": "weighted", "smoothness": 1.0,
                                        "space": "channel", "world_iterations": 12,
                                        "objective": "least-squares",
                                        "key_values": "fitted", "corrective_budget": None}


def test_candidate_count_matches_the_selection():
    import numpy as np

    from sp_core.selection import SelectionSpace

    rng = np.random.default_rng(3)
    for first, last, stride in [(0, 99, 1), (1001, 1100, 4), (7, 50, 3), (-5, 5, 2)]:
        poses = rng.normal(size=(last - first + 1, 3))
        space = SelectionSpace(poses, first_frame=first, stride=stride, max_keys=2)
        assert candidate_count(first, last, stride) == len(space.candidates)


def test_k_rule():
    options = Options()
    assert k_for(options, 0, 199) is None
    assert k_for(options.replace(ratio=0.6), 0, 199) == 120
    assert k_for(options.replace(ratio=0.001), 0, 199) == 2
    assert k_for(options.replace(keys=7), 1001, 1200) == 7
    with pytest.raises(OptionError, match=r"ratio 0.6 asks for 120 keyframes, but frames 0..199 "
                                          r"hold 2 to 51 keyframes \(first and last; 51 candidate "
                                          r"frames at stride 4\)") as caught:
        k_for(options.replace(ratio=0.6, stride=4), 0, 199)
    assert caught.value.options == ("ratio",)  # each front names it its own way
    with pytest.raises(OptionError, match="keys 2: frames 0..199 hold 3 to 200 keyframes "
                                          "\\(first and last, the pins") as caught:
        k_for(options.replace(keys=2, pins=[50]), 0, 199)
    assert said(caught.value, flag_of).startswith("--keys 2: frames 0..199 hold 3 to 200 "
                                                  "keyframes (")


@pytest.fixture(scope="module")
def clip200():
    return read_bvh(ROOT / "examples" / "cmu_131_01.bvh", first_frame=1001).sub_range(1001, 1200)


def test_tolerance_gives_a_k_that_meets_it(clip200):
    session = Session(StandaloneHost(clip200), Options().replace(tolerance="3,60",
                                                                  space="channel"))
    session.analyze()
    metrics = session.reduce().metrics
    assert metrics.mean_mm <= 3 and metrics.max_mm <= 60
    fewer = session.reduce(frames=session.space.keyframes(session.space.min_keys)).metrics
    # the tolerance is what chose K, not the space's floor (corrective keys included)
    assert fewer.mean_mm > 3 or fewer.max_mm > 60
    assert metrics.keys == metrics.pose_keys + metrics.corrective_keys
    with pytest.raises(OptionError, match="keys and tolerance both choose the keys"):
        Options().replace(keys=5, tolerance="1,2")
    impossible = Session(StandaloneHost(clip200), Options().replace(
        tolerance="0.001,0.01", space="channel", max_keys=6))
    with pytest.raises(SelectionError, match=r"no K up to 6 keeps the error within mean "
                                             r"0.001 mm and max 0.01 mm \(K = 6 gives mean"
                                             r".* with the channel fit and its corrective "
                                             r"keys\); raise"):
        impossible.analyze()


def test_host_batch_flags_refuse_bad_values_with_one_line(capsys):
    import argparse

    from sp_core.batch import add_host_batch_options, host_batch_options

    parser = argparse.ArgumentParser()
    add_host_batch_options(parser)
    args = parser.parse_args(["--out", "o", "--ratio", "0", "--roots", "Hips"])
    with pytest.raises(SystemExit) as stop:
        host_batch_options(args)
    assert stop.value.code == 2
    assert capsys.readouterr().err == "error: --ratio must be a number in (0, 1], got 0\n"
    good = host_batch_options(parser.parse_args(["--out", "o", "--keys", "9", "--residual-layer",
                                                 "--layer", "walk"]))
    assert (good.keys.keys, good.layer.residual_layer, good.layer.layer) == (9, True, "walk")
    # what the standalone command line refuses before it reads a clip, the in-host batches
    # refuse before they open a scene (they recorded every scene as failed, or dropped it)
    for flags, said_ in [
            (["--layered", "--keys", "8"], "--layered needs --leading NODE,... (the part whose "
                                           "extremes are the keyposes, e.g. --leading "
                                           "RightWrist)"),
            (["--frames", "0,10,20", "--stride", "4"],
             "--frames gives the keys itself: --stride cannot apply; drop one of them"),
            (["--keys", "9", "--smoothness", "3"],
             "--smoothness applies to the smooth tangents only (--tangents smooth); drop it or "
             "add that")]:
        with pytest.raises(SystemExit) as stop:
            host_batch_options(parser.parse_args(["--out", "o", *flags]))
        assert stop.value.code == 2
        assert capsys.readouterr().err == f"error: {said_}\n"


@pytest.mark.parametrize(("preset", "said_"), [
    ('[keys]\nkeys = 10\n[fit]\ntangents = "broken"\nsmoothness = 5\n',
     "smoothness applies to the smooth tangents only (tangents smooth); drop it or add that"),
    ('[keys]\nframes = [0, 500, 993]\n[analysis]\nstride = 4\n',
     "frames gives the keys itself: stride cannot apply; drop one of them"),
    ('{"keys": {"keys": 10}, "fit": {"space": "channel", "world_iterations": 3}}',
     "world_iterations applies to the world fit only; drop it or fit in world space (space "
     "world)"),
    ('[fit]\nkeys = 30\n',
     "option 'keys' belongs to [keys], not [fit]; move it there (or write the options without "
     "groups)")])
def test_a_preset_holding_what_the_flags_refuse_is_refused_too(sample_path, tmp_path, capsys,
                                                               preset, said_):
    """The same values ran with exit 0 from a preset, the ones that could not apply dropped
    without a word (or, in the wrong group, applied as if the group meant nothing)."""
    from sp_core.cli import main

    path = tmp_path / ("p.json" if preset.startswith("{") else "p.toml")
    path.write_text(preset)
    assert main(["reduce", str(sample_path), "--preset", str(path)]) == 2
    assert capsys.readouterr().err == f"salient-poses: error: preset {path}: {said_}\n"


def test_a_flag_may_leave_a_presets_value_unused_and_its_options_block_is_a_preset(
        sample_path, tmp_path, capsys):
    """Flags override a shared preset: a value of the preset that the override leaves unused
    is not the user's to drop. An output's options block holds every field, defaults
    included (world iterations in a channel fit): as a preset it gives the same options."""
    from sp_core.cli import main

    preset = tmp_path / "studio.toml"
    preset.write_text('[keys]\nkeys = 8\n[fit]\ntangents = "smooth"\nsmoothness = 5\n'
                      'space = "channel"\n')
    first = tmp_path / "first.json"
    assert main(["reduce", str(sample_path), "--preset", str(preset), "--tangents", "broken",
                 "--json", str(first)]) == 0
    record = json.loads(first.read_text())
    assert record["tangents"] == "broken" and record["options"]["fit"]["world_iterations"] == 12
    assert record["options"]["fit"]["smoothness"] == 1.0  # the default: 5 did not apply
    block = tmp_path / "block.json"
    block.write_text(json.dumps(record["options"]))
    again = tmp_path / "again.json"
    assert main(["reduce", str(sample_path), "--preset", str(block), "--json",
                 str(again)]) == 0
    assert json.loads(again.read_text())["options"] == record["options"]
    # the result JSON itself is read for its options block (it was refused as "unknown
    # option 'clip'")
    third = tmp_path / "third.json"
    assert main(["reduce", str(sample_path), "--preset", str(first), "--json",
                 str(third)]) == 0
    assert json.loads(third.read_text())["options"] == record["options"]
    capsys.readouterr()


def test_whole_numbers_are_exact_and_of_a_size_the_engine_takes():
    """--first-frame went through a float (9007199254740993 became ...992) and 10^20 was
    taken, to overflow the engine's arrays in the middle of a reduction."""
    from sp_core.options import WHOLE_LIMIT, build

    assert build({"first_frame": str(WHOLE_LIMIT)}).input.first_frame == WHOLE_LIMIT
    assert build({"first_frame": -WHOLE_LIMIT}).input.first_frame == -WHOLE_LIMIT
    for value in (str(WHOLE_LIMIT + 1), 2**53 + 1, "99999999999999999999", 10**400):
        with pytest.raises(OptionError, match="^first_frame must be a whole number of at most "
                                              "1,000,000,000 in size, got "):
            build({"first_frame": value})
    with pytest.raises(OptionError, match="^frames must be "):
        build({"frames": f"0,{10**12}"})


def test_frames_given_over_a_presets_analysis_leave_it_unused(sample_path, tmp_path, capsys):
    """A shared preset with a range or pins, and --frames on the command line: refused as
    "--frames gives the keys itself: --range cannot apply", a flag the user never typed. The
    flag overrides the preset: its analysis has nothing to do and goes back to the defaults
    (its stride and nodes did already)."""
    from sp_core.cli import main

    preset = tmp_path / "studio.toml"
    preset.write_text("[analysis]\nframe_range = [0, 200]\npins = [100]\nstride = 4\n")
    out = tmp_path / "k.json"
    assert main(["reduce", str(sample_path), "--preset", str(preset), "--frames", "0,100,200",
                 "--space", "channel", "--json", str(out)]) == 0
    analysis = json.loads(out.read_text())["options"]["analysis"]
    assert (analysis["frame_range"], analysis["pins"], analysis["stride"]) == (None, [], 1)
    capsys.readouterr()
    assert main(["analyze", str(sample_path), "--preset", str(preset)]) == 0  # (it applies)
    assert "frames 0..200" in capsys.readouterr().out
