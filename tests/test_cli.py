"""The salient-poses command line: info, demo, errors."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sp_core.cli import main
from sp_core.io.bvh import read_bvh


def test_info_prints_summary_and_writes_json_and_positions(sample_path, tmp_path, capsys):
    out_json, out_npy = tmp_path / "info.json", tmp_path / "pos.npy"
    assert main(["info", str(sample_path), "--json", str(out_json), "--positions", str(out_npy),
                 "--first-frame", "1001"]) == 0
    text = capsys.readouterr().out
    assert "994" in text and "120 fps" in text and "1001..1994" in text
    assert text.endswith(f"Wrote {out_json}, {out_npy}\n")  # (as reduce says it; it did not)
    record = json.loads(out_json.read_text())
    assert set(record) >= {"clip", "frames", "fps", "frame_time", "first_frame", "duration_s",
                           "nodes", "end_sites", "channels", "height"}
    clip = read_bvh(sample_path)
    assert record["frames"] == 994 and record["fps"] == 120 and record["frame_time"] == 0.0083333
    assert record["first_frame"] == 1001
    assert record["duration_s"] == pytest.approx(994 * 0.0083333)
    assert record["nodes"] == clip.node_names and len(record["nodes"]) == 38
    assert record["end_sites"] == clip.end_site_names and len(record["channels"]) == 96
    assert record["height"] == pytest.approx(clip.height())
    positions = np.load(out_npy)
    assert positions.shape == (994, 38, 3)
    np.testing.assert_array_equal(positions, clip.positions)


def test_info_json_to_stdout_is_pure_json(sample_path, capsys):
    assert main(["info", str(sample_path), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["frames"] == 994


def test_info_tree(sample_path, capsys):
    assert main(["info", str(sample_path), "--tree"]) == 0
    assert "LeftToe_end  (End Site)" in capsys.readouterr().out


def test_info_of_a_skeleton_without_frames_says_so(sample_path, tmp_path, capsys):
    text = sample_path.read_text()
    motion = text.index("MOTION")
    path = tmp_path / "rest.bvh"
    path.write_text(text[:motion] + "MOTION\nFrames: 0\nFrame Time: 0.0083333\n")
    assert main(["info", str(path)]) == 0
    assert "Frames     0  (no motion: the skeleton alone) at 120 fps" in \
        capsys.readouterr().out  # (it said "frames 0..-1")


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT A\n{\nOFFSET 0 0\n}\n")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 5" in err and "Traceback" not in err
    assert main(["info", str(tmp_path / "missing.bvh")]) == 2
    assert main(["info", str(tmp_path / "clip.c3d")]) == 2
    assert "unsupported file type '.c3d'" in capsys.readouterr().err
    for folder in (tmp_path / "takes", tmp_path / "takes.bvh"):  # whatever its name
        folder.mkdir()
        assert main(["reduce", str(folder)]) == 2
        assert capsys.readouterr().err == (
            f"salient-poses: error: {folder}: is a folder, not a motion file (`salient-poses "
            "batch FOLDER --out OUT` reduces every take in a folder)\n")


def test_unwritable_output_exits_2(sample_path, tmp_path, capsys):
    assert main(["info", str(sample_path), "--json", str(tmp_path / "no" / "x.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly(sample_path):
    # `salient-poses info take.bvh | head -0`: the reader is gone before anything is printed
    reader = subprocess.Popen([sys.executable, "-m", "sp_core.cli", "info", str(sample_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()
    err = reader.stderr.read()
    assert reader.wait(timeout=120) == 1 and err == b""


def test_an_os_error_without_a_file_is_one_plain_line(sample_path, capsys, monkeypatch):
    import errno
    import os

    import sp_core.cli as cli

    def failing(args, options):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setitem(cli.COMMANDS, "info", failing)
    assert main(["info", str(sample_path)]) == 2
    assert capsys.readouterr().err == f"salient-poses: error: {os.strerror(errno.EIO)}\n"


def test_frames_before_zero_need_no_equals_sign(sample_path, capsys):
    # pre-roll: `--range -5:20` and `--frames -100,...`, not only `--range=-5:20`
    assert main(["reduce", str(sample_path), "--first-frame", "-100", "--range", "-5:20",
                 "--keys", "4", "--space", "channel", "--json", "-"]) == 0
    frames = json.loads(capsys.readouterr().out)["frames"]
    assert len(frames) == 4 and (frames[0], frames[-1]) == (-5, 20)
    assert main(["reduce", str(sample_path), "--first-frame", "-100", "--frames", "-100,-50,0",
                 "--space", "channel", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["frames"] == [-100, -50, 0]


def test_errors_carry_the_unit_of_their_pose_space(sample_path, capsys):
    # one unit text for the summary, the plot and the panel (sp_core.poses.error_unit)
    from sp_core.poses import error_unit

    assert main(["analyze", str(sample_path), "--pose", "channels", "--cost", "line-max",
                 "--max-keys", "20"]) == 0
    assert "channel units (" in capsys.readouterr().out.split("Suggested")[1].split("\n")[0]
    assert main(["analyze", str(sample_path), "--max-keys", "20"]) == 0
    suggested = capsys.readouterr().out.split("Suggested")[1].split("\n")[0]
    assert error_unit("positions", True) == "scene units²" and "scene units² (" in suggested
    assert error_unit("channels", False) == "channel units"


def test_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.bvh"
    bad.write_text("nonsense")
    from sp_core.errors import ClipFormatError

    with pytest.raises(ClipFormatError):
        main(["info", str(bad), "--debug"])
    with pytest.raises(ClipFormatError):  # before the command too (the command's default undid it)
        main(["--debug", "info", str(bad)])
    assert main(["info", str(bad)]) == 2


def test_console_script_demo_and_help(tmp_path):
    script = Path(sys.executable).with_name("salient-poses")
    for _ in range(2):  # the README's first command, twice: the demo rewrites its own files
        result = subprocess.run([str(script), "demo"], capture_output=True, text=True,
                                timeout=300, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "994" in result.stdout and (tmp_path / "demo_out" / "reduced.bvh").exists()
    for command in (["--help"], ["info", "--help"], ["demo", "--help"]):
        help_run = subprocess.run([str(script), *command], capture_output=True, text=True)
        assert help_run.returncode == 0 and "usage: salient-poses" in help_run.stdout


def test_help_version_and_a_mistyped_flag_load_no_engine():
    """--help, --version and a flag no command takes are answered from the options schema:
    numba and scipy (about 1 s of a fresh process) are loaded by the commands that run
    them."""
    from sp_core import version

    code = ("import sys\n"
            "from sp_core import cli\n"
            "for argv in (['--version'], ['reduce', '--help'], ['reduce', 'x.bvh', '--bogus']):\n"
            "    try:\n"
            "        cli.main(argv)\n"
            "    except SystemExit as exc:\n"
            "        assert exc.code in (0, 2), exc.code\n"
            "print(sorted(m for m in ('numba', 'scipy', 'sp_core.jobs') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert "--bogus" in result.stderr and f"salient-poses {version()}" in result.stdout


def test_the_command_ends_with_its_status_output_and_exit_handlers(sample_path, tmp_path):
    """``run`` ends the process without the interpreter's teardown: the command's exit status,
    its whole output (a pipe, block-buffered) and its exit handlers must come through as
    with a plain exit, and a thread the command left running must still finish."""
    script = tmp_path / "command.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        "from pathlib import Path\n"
        "from sp_core import cli\n"
        "out = Path(sys.argv[1])\n"
        "atexit.register(lambda: (out / 'handler').write_text('ran'))\n"
        "if sys.argv[2] == 'thread':\n"
        "    threading.Thread(target=lambda: (time.sleep(0.5),\n"
        "                                     (out / 'thread').write_text('done'))).start()\n"
        "sys.argv = ['salient-poses', *sys.argv[3:]]\n"
        "print('begun')\n"
        "cli.run()\n")
    for thread, argv, status in (("none", ["info", str(sample_path)], 0),
                                 ("none", ["info", str(tmp_path / "missing.bvh")], 2),
                                 ("thread", ["info", str(sample_path)], 0)):
        out = tmp_path / f"{thread}{status}"
        out.mkdir()
        result = subprocess.run([sys.executable, str(script), str(out), thread, *argv],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == status, result.stderr
        assert (out / "handler").read_text() == "ran"
        if status:
            assert "salient-poses: error:" in result.stderr
        else:
            assert result.stdout.startswith("begun\nClip ") and "994" in result.stdout
            assert result.stdout.removeprefix("begun\n") == subprocess.run(
                [sys.executable, "-c", "import sys; from sp_core.cli import main; "
                 "sys.exit(main(sys.argv[1:]))", *argv],
                capture_output=True, text=True, timeout=120).stdout
        assert (out / "thread").exists() == (thread == "thread")


def test_the_plot_of_a_still_clip_says_why_it_is_empty(sample_clip, tmp_path, monkeypatch):
    """`analyze --plot` of a clip in which nothing moves drew empty axes (no K has a cost a
    log axis can show); it says why, as the panel's graph does."""
    import pyqtgraph as pg

    from sp_core.selection import SelectionSpace
    from sp_core.ui import error_plot
    from sp_core.ui.graph import NOTHING_TO_DRAW

    still = sample_clip.sub_range(0, 59)
    still = still.with_channels(np.repeat(still.channels[:1], 60, axis=0))
    shown = []

    def save(widget, path, width):  # what the picture holds, instead of the picture
        shown.extend(item.textItem.toPlainText() for item in widget.getPlotItem().items
                     if isinstance(item, pg.TextItem))
    monkeypatch.setattr(error_plot, "save_widget_png", save)
    error_plot.save_error_plot(SelectionSpace.from_clip(still), tmp_path / "still.png")
    assert shown == [NOTHING_TO_DRAW]
    shown.clear()
    error_plot.save_error_plot(SelectionSpace.from_clip(sample_clip.sub_range(0, 59)),
                               tmp_path / "moving.png")
    assert shown == []


def test_analyze_json_schema_and_plot(sample_path, tmp_path, capsys):
    out_json, out_png = tmp_path / "a.json", tmp_path / "a.png"
    code = main(["analyze", str(sample_path), "--range", "1100:1400", "--first-frame", "1001",
                 "--stride", "2", "--pins", "1200", "--max-span", "120", "--cost", "line-time",
                 "--compose", "sum", "--nodes", "Hips,LeftWrist,RightWrist,Head",
                 "--weights", "Head=2", "--max-keys", "40", "--json", str(out_json),
                 "--plot", str(out_png)])
    assert code == 0, capsys.readouterr().err
    record = json.loads(out_json.read_text())
    assert set(record) == {"clip", "fps", "first_frame", "last_frame", "cost", "compose",
                           "max_keys", "options", "timings", "space", "suggested", "notes"}
    assert record["notes"] == []  # a short range: the exact space
    assert record["options"]["analysis"]["pins"] == [{"frame": 1200, "name": "", "note": ""}]
    assert record["options"]["analysis"]["weights"] == [["Head", 2.0]]
    assert record["first_frame"] == 1100 and record["last_frame"] == 1400
    assert record["cost"] == "line-time" and record["compose"] == "sum"
    assert set(record["timings"]) == {"table_s", "select_s"}
    space = record["space"]
    assert [e["keys"] for e in space] == list(range(space[0]["keys"], 41))
    for entry in space:
        if entry["frames"] is not None:
            frames = entry["frames"]
            assert len(frames) == entry["keys"] and frames[0] == 1100 and frames[-1] == 1400
            assert 1200 in frames and all(f % 2 == 0 for f in frames)
            assert max(np.diff(frames)) <= 120
    assert set(record["suggested"]) == {"cliffs", "threshold"}
    assert out_png.stat().st_size > 10_000
    from PySide6 import QtGui

    image = QtGui.QImage(str(out_png))
    assert image.width() == 1200 and image.height() > 300


@pytest.mark.parametrize("args, message", [
    (["--range", "10:5"], "--range must be START:END host frames with END > START, got 10:5"),
    (["--range", "2000:3000"], "frame 2000 is outside clip"),
    (["--pins", "5000"], "pinned frame 5000 is outside"),
    (["--pins", "a,b"], "--pins must be whole frame numbers separated by commas, got a,b"),
    (["--weights", "Head"], "--weights must be NODE=WEIGHT pairs"),
    (["--nodes", "Hed"], "did you mean Head"),
    (["--range", "5"], "--range must be START:END host frames"),
    (["--stride", "4", "--pins", "3"], "not a candidate"),
])
def test_analyze_bad_options_exit_2(sample_path, args, message, capsys):
    assert main(["analyze", str(sample_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--max-span", "5", "--stride", "10"],
     "--max-span of 5 frames is shorter than the gap between candidate frames 0 and 10; raise "
     "--max-span or lower --stride"),
    (["--max-keys", "3", "--max-span", "100"],
     "no selection of at most 3 keys has keys at most --max-span 100 frames apart (they need "
     "at least 11 keys); raise --max-keys or --max-span"),
    (["--max-keys", "5", "--pins", "10,20,30,40,50,60"],  # (it named a --max-span never given)
     "no selection of at most 5 keys has the 6 pinned frames (they need at least 8 keys); "
     "raise --max-keys"),
    # (it said "or add it to candidates", which no front offers)
    (["--stride", "4", "--pins", "3"],
     "pinned frame 3 is not a candidate frame at --stride 4 (frames divisible by 4, the first "
     "and the last); pin 0 or 4, or lower --stride (1 makes every frame a candidate)"),
    (["--first-frame", "1001", "--stride", "4", "--pins", "1050"],
     "pinned frame 1050 is not a candidate frame at --stride 4 (frames divisible by 4, the "
     "first and the last); pin 1048 or 1052, or lower --stride (1 makes every frame a "
     "candidate)"),
])
def test_engine_errors_name_the_options_by_their_flags(sample_path, args, message, capsys):
    # the engine names options by their field names, as its Python API takes them; the
    # command line says its flags instead
    from sp_core.errors import SelectionError
    from sp_core.selection import SelectionSpace

    assert main(["analyze", str(sample_path), *args]) == 2
    assert capsys.readouterr().err == f"salient-poses: error: {message}\n"
    with pytest.raises(SelectionError, match="raise max_span or lower stride$"):
        SelectionSpace(np.zeros((30, 3)), stride=10, max_span=5)
    with pytest.raises(SelectionError, match="pin one of them or add it to candidates$"):
        SelectionSpace(np.zeros((30, 3)), candidates=[0, 10, 20], pins=[5])


def test_a_long_takes_note_names_the_flags(sample_path, capsys):
    # a budget that windows the sample and caps K
    assert main(["analyze", str(sample_path), "--time-budget", "0.02"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Note")]
    assert len(notes) == 1 and "(--max-span " in notes[0] and "(--max-keys)" in notes[0]
    assert "max_span" not in notes[0] and "max_keys" not in notes[0]


def test_demo_writes_analysis_and_plot(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "analysis.json").read_text())
    assert record["space"][0]["keys"] == 2 and len(record["space"]) == 496
    assert (tmp_path / "error_vs_k.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    keys = json.loads((tmp_path / "reduced_keys.json").read_text())
    k = len(keys["frames"])
    # the analysis offers the threshold rule; the reduction takes the default tolerance's K
    assert "threshold rule K =" in out and f"Reduction  {k} keys" in out
    assert f"the smallest K within mean 2 mm and max 20 mm: K = {k}" in out
    assert keys["space"] == "world" and keys["metrics"]["mean_mm"] <= 2.0 \
        and keys["metrics"]["max_mm"] <= 20.0
    assert keys["metrics"]["keys"] == keys["metrics"]["pose_keys"] + \
        keys["metrics"]["corrective_keys"]
    assert read_bvh(tmp_path / "reduced.bvh").n_frames == 994
    assert (tmp_path / "before_after.png").stat().st_size > 20_000


def test_reduce_writes_keys_bvh_and_residual(sample_path, tmp_path, capsys):
    out_json, out_bvh, out_npy = tmp_path / "k.json", tmp_path / "r.bvh", tmp_path / "res.npy"
    assert main(["reduce", str(sample_path), "--first-frame", "1001", "--ratio", "0.05",
                 "--tangents", "broken", "--space", "channel", "--json", str(out_json),
                 "--bvh", str(out_bvh), "--residual", str(out_npy)]) == 0
    assert "mean" in capsys.readouterr().out
    record = json.loads(out_json.read_text())
    assert set(record) >= {"frames", "tangents", "channels", "metrics", "options"}
    assert "timings" not in record  # a file depends only on its input and options
    assert len(record["frames"]) == round(0.05 * 994) and record["frames"][0] == 1001
    assert set(record["metrics"]) == {"mean_mm", "max_mm", "mean", "max", "worst_node",
                                      "worst_frame", "keys", "pose_keys", "corrective_keys",
                                      "original_keys"}
    assert "corrective" not in record  # --ratio chooses K: no corrective keys unless asked
    animated = [c for c in record["channels"] if c["animated"]]
    assert all(len(c["keys"]) == 50 and len(c["keys"][0]) == 6 for c in animated)
    assert all(c["keys"] == [] and "value" in c for c in record["channels"]
               if not c["animated"])
    original = read_bvh(sample_path, first_frame=1001)
    reduced = read_bvh(out_bvh, first_frame=1001)
    residual = np.load(out_npy)
    assert residual.shape == original.channels.shape
    # the BVH holds 6 decimals; the residual is exact
    np.testing.assert_allclose(reduced.channels + residual, original.channels, atol=2e-6)
    hips = original.channel_names.index("Hips.Xrotation")
    key = animated[[c["name"] for c in animated].index("Hips.Xrotation")]["keys"][3]
    # the file's keys are the BVH's curves; fitted key values stay near the capture
    assert key[1] == pytest.approx(reduced.channels[key[0] - 1001, hips], abs=2e-6)
    assert key[1] == pytest.approx(original.channels[key[0] - 1001, hips], abs=0.5)


@pytest.mark.parametrize(("args", "message"), [
    (["--ratio", "2"], "--ratio must be a number in (0, 1], got 2"),
    (["--frames", "0,5000"], "frame 5000 is outside clip"),
    (["--frames", "0,x"], "--frames must be whole frame numbers"),
])
def test_reduce_bad_options(sample_path, args, message, capsys):
    assert main(["reduce", str(sample_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_batch_continues_past_a_bad_file(sample_path, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    text = sample_path.read_text()
    (inputs / "walk.bvh").write_text(text)
    (inputs / "cut.bvh").write_text(text[:3000])
    out = tmp_path / "out"
    code = main(["batch", str(inputs), "--out", str(out), "--keys", "20", "--space", "channel",
                 "--workers", "2"])
    assert code == 1
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    by_name = {Path(r["clip"]).name: r for r in rows}
    walk, cut = by_name["walk.bvh"], by_name["cut.bvh"]
    assert walk["status"] == "ok" and (walk["frames"], walk["keys"]) == ("994", "20")
    assert cut["status"].startswith("failed: ") and "found the end of the file" in cut["status"]
    assert (out / "walk.keys.json").exists() and (out / "walk.reduced.bvh").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_long_steps_show_a_progress_bar_on_a_terminal_and_nothing_on_a_pipe(
        sample_path, tmp_path, monkeypatch, capsys):
    from sp_core import cli

    args = ["reduce", str(sample_path), "--keys", "12", "--space", "channel", "--json",
            str(tmp_path / "k.json")]
    assert cli.main(args) == 0  # stderr is a pipe here: quiet
    assert capsys.readouterr().err == ""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(cli.TerminalProgress, "delay", 0.0)  # as if every step were long
    assert cli.main([*args, "--overwrite"]) == 0
    shown = terminal.getvalue()
    for step in ("reading the motion", "poses", "fitting curves through 12 keys (channel space)"):
        assert step in shown
    assert "100%" in shown and "Traceback" not in shown


@pytest.mark.parametrize(("command", "flag"), [("reduce", "--bvh"), ("reduce", "--residual"),
                                               ("analyze", "--plot"), ("info", "--positions")])
def test_dash_is_standard_output_for_the_json_only(sample_path, tmp_path, monkeypatch, capsys,
                                                   command, flag):
    """`--bvh -` and the like wrote a file named '-' past every check of outputs (a '-' that
    was a link to the input replaced the input) and then said "Nothing written"."""
    monkeypatch.chdir(tmp_path)
    clip = tmp_path / "take.bvh"  # (a copy: the check is that it survives)
    clip.write_bytes(sample_path.read_bytes())
    (tmp_path / "-").symlink_to(clip)
    extra = ["--keys", "5", "--space", "channel"] if command == "reduce" else []
    assert main([command, str(clip), *extra, flag, "-", "--overwrite"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{flag} must be a file name ('-', standard output, is for the JSON only), got -")
    assert clip.read_bytes() == sample_path.read_bytes()


def test_a_preset_is_an_input_and_cannot_switch_overwriting_on(sample_path, tmp_path, capsys):
    """`--preset studio.json --json studio.json --overwrite` replaced the shared preset with the
    reduction; a preset saying `overwrite = true` replaced files for everyone using it; a
    .yaml preset was read as JSON."""
    preset = tmp_path / "studio.json"
    preset.write_text('{"keys": {"keys": 6}, "fit": {"space": "channel"}}\n')
    kept = preset.read_bytes()
    clip = str(sample_path)
    assert main(["reduce", clip, "--preset", str(preset), "--json", str(preset),
                 "--overwrite"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"salient-poses: error: --json {preset} is the preset of this command; refusing to "
        "overwrite it (choose another file name)")
    assert preset.read_bytes() == kept
    loose = tmp_path / "loose.toml"
    for text in ("[output]\noverwrite = true\n", "overwrite = true\n"):
        loose.write_text(text)
        assert main(["reduce", clip, "--preset", str(loose), "--json",
                     str(tmp_path / "k.json")]) == 2
        assert capsys.readouterr().err.strip() == (
            f"salient-poses: error: preset {loose}: overwrite is not taken from a preset (a "
            "shared preset would replace files for everyone who uses it); add --overwrite to "
            "the command")
    # an output file in a preset: dropped by a command without it (batch), and named as a
    # flag never typed by one with it ("--json k.json exists; add --overwrite")
    for text, flag in (("[output]\njson = \"k.json\"\n", "--json"),
                       ("plot = \"g.png\"\n", "--plot"), ("[batch]\nout = \"o\"\n", "--out")):
        loose.write_text(text)
        for command in (["reduce", clip], ["batch", clip, "--out", str(tmp_path / "b")]):
            assert main([*command, "--preset", str(loose)]) == 2
            name = flag.strip("-")
            assert capsys.readouterr().err.strip() == (
                f"salient-poses: error: preset {loose}: {name} is a file a command writes, not "
                "an option a preset shares (everyone who uses it would write the same file); "
                f"give {flag} on the command line")
    assert not (tmp_path / "b").exists()
    yaml = tmp_path / "studio.yaml"
    yaml.write_text("keys: 6\n")
    assert main(["reduce", clip, "--preset", str(yaml)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"salient-poses: error: preset {yaml}: a preset is a .toml or .json file")


@pytest.mark.parametrize(("flags", "said"), [
    (["--frames", "0,100,239", "--max-span", "10"],
     "--frames gives the keys itself: --max-span cannot apply; drop one of them"),
    (["--frames", "0,100,239", "--stride", "4"],
     "--frames gives the keys itself: --stride cannot apply; drop one of them"),
    (["--keys", "12", "--smoothness", "5"],
     "--smoothness applies to the smooth tangents only (--tangents smooth); drop it or add "
     "that"),
    (["--keys", "12", "--space", "channel", "--world-iterations", "3"],
     "--world-iterations applies to the world fit only; drop it or fit in world space (--space "
     "world)"),
    (["--keys", "12", "--space", "channel", "--fit-objective", "minimax"],
     "--fit-objective applies to the world fit only; drop it or fit in world space (--space "
     "world)")])
def test_flags_that_cannot_apply_are_refused_not_dropped(sample_path, capsys, flags, said):
    """These ran with exit 0, and the JSON's options block recorded them as if applied."""
    assert main(["reduce", str(sample_path), *flags]) == 2
    assert capsys.readouterr().err.strip() == f"salient-poses: error: {said}"



def test_a_presets_frames_mean_nothing_to_analyze_and_a_batch_keeps_the_preset(
        sample_path, tmp_path, capsys):
    """A shared preset naming reduce's keys made `analyze` refuse its own --cost (naming a
    --frames it does not have) or fail inside; a batch could write a take's JSON over the
    preset; `batch --out -` was told to give a file name."""
    preset = tmp_path / "keys.toml"
    preset.write_text("[keys]\nframes = [0, 100, 200]\n")
    assert main(["analyze", str(sample_path), "--preset", str(preset), "--cost",
                 "line-max"]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    out.mkdir()
    clip = tmp_path / "take.bvh"
    clip.write_bytes(sample_path.read_bytes())
    kept = out / "take.keys.json"
    kept.write_text('{"fit": {"space": "channel"}}')
    assert main(["batch", str(clip), "--out", str(out), "--preset", str(kept), "--keys", "4",
                 "--overwrite"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"salient-poses: error: output {kept} is an input of this command; refusing to "
        "overwrite it (choose another file name)")
    assert kept.read_text() == '{"fit": {"space": "channel"}}'
    assert main(["batch", str(clip), "--out", "-"]) == 2
    assert capsys.readouterr().err.strip() == (
        "salient-poses: error: --out must be a folder name ('-', standard output, is for the "
        "JSON only), got -")


@pytest.mark.parametrize("end_site", ["", "  End Site\n  {\n    OFFSET 0 4 0\n  }\n"])
def test_a_skeleton_without_a_size_has_no_mm_tolerance(tmp_path, capsys, end_site):
    """One joint (an End Site or not): no body's height scales its errors to millimetres (an
    End Site's offset is no character's size, nor the 0.1-unit bone Blender's importer makes of
    a joint without one: Blender chose another K than the command line). The default
    tolerance gives way to the suggested K (said), the errors are said in scene units, and a
    tolerance asked for is refused (it judged scene units as mm)."""
    t = np.linspace(0.0, 4.0, 120)
    rows = np.stack([10 * np.sin(t), 90 + np.cos(2 * t), 5 * t, 20 * np.sin(3 * t),
                     10 * t, 5 * np.cos(t)], axis=1)
    path = tmp_path / "root.bvh"
    path.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 6 Xposition Yposition "
                    f"Zposition Zrotation Xrotation Yrotation\n{end_site}}}\nMOTION\n"
                    "Frames: 120\nFrame Time: 0.0083333\n"
                    + "\n".join(" ".join(f"{v:.6f}" for v in row) for row in rows) + "\n")
    assert main(["reduce", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Keys       the suggested K = " in out
    assert "scene units (no mm: see the note)" in out and "character scaled" not in out
    assert ("Note       the character's size cannot be measured (clip 'root' has one joint, no "
            "body whose size the errors can be measured against): K is the suggested K, not the "
            "default tolerance's") in out
    # a corrective budget of its own is spent without the tolerance's stop (20 "mm" would be
    # read as 20 scene units), as at a K the user chose
    assert main(["reduce", str(path), "--corrective-budget", "10%"]) == 0
    out = capsys.readouterr().out
    assert main(["reduce", str(path), "--corrective-budget", "10%", "--suggested"]) == 0
    chosen = capsys.readouterr().out
    corrective = [line for line in out.splitlines() if line.startswith("Corrective")]
    assert corrective and corrective == [line for line in chosen.splitlines()
                                         if line.startswith("Corrective")]
    assert corrective[0].endswith(" scene units")
    assert main(["reduce", str(path), "--tolerance", "3,30"]) == 2
    assert capsys.readouterr().err.endswith(
        "so a --tolerance in mm cannot be judged; choose K with --keys, --ratio or "
        "--suggested\n")


def test_demo_replaces_only_its_own_files_without_overwrite(tmp_path, capsys):
    """``demo --out DIR`` replaced the user's own DIR/reduced.bvh without a word."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "reduced.bvh").write_text("my precious take\n")
    assert main(["demo", "--out", str(user)]) == 2
    assert capsys.readouterr().err == (f"salient-poses: error: the demo's output "
                                       f"{user / 'reduced.bvh'} exists; add --overwrite to "
                                       "replace it\n")
    assert [p.name for p in user.iterdir()] == ["reduced.bvh"]
    assert (user / "reduced.bvh").read_text() == "my precious take\n"
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    assert main(["demo", "--out", str(out)]) == 0  # its own files of the earlier run
    (out / "before_after.png").write_bytes(b"my edit")  # no longer the demo's
    capsys.readouterr()
    assert main(["demo", "--out", str(out)]) == 2
    assert capsys.readouterr().err.endswith(f"{out / 'before_after.png'} exists; add "
                                            "--overwrite to replace it\n")
    assert main(["demo", "--out", str(out), "--overwrite"]) == 0
    assert (out / "before_after.png").read_bytes().startswith(b"\x89PNG")
    assert main(["demo", "--out", str(out)]) == 0  # and it is the demo's again


def test_demo_checks_its_folder_before_its_work(tmp_path, monkeypatch, capsys):
    """A folder the demo cannot write in: said up front, by its flag (it ran the analysis,
    then said "cannot write --json .../analysis.json", a flag the user never gave)."""
    import sp_core.cli as cli

    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 2
    assert capsys.readouterr().err == (f"salient-poses: error: cannot write in --out "
                                       f"{tmp_path / 'demo'}: the folder is not writable\n")


def test_analyze_layered_suggests_the_automatic_choice_only_when_it_made_one(sample_path,
                                                                           tmp_path, capsys):
    """A review: ``analyze --layered`` with a K from a preset called that K "the three-layer
    rule's" choice; and the JSON's suggested K was the keypose space's rule (10) where the
    summary, the panel and --suggested give the three-layer choice (16)."""
    base = ["analyze", str(sample_path), "--layered", "--leading", "RightWrist"]
    out = tmp_path / "a.json"
    assert main([*base, "--json", str(out)]) == 0
    said = capsys.readouterr().out
    assert "Suggested  the three-layer rule's 16 keyposes (below; --suggested writes them)" in said
    suggested = json.loads(out.read_text())["suggested"]
    assert (suggested["threshold"], suggested["space_threshold"]) == (16, 10)
    preset = tmp_path / "k.toml"
    preset.write_text("keys = 20\n")
    assert main([*base, "--preset", str(preset)]) == 0
    said = capsys.readouterr().out
    assert "three-layer" not in said
    assert "Suggested  the keypose space's threshold rule K = 10" in said


SHORT_CLIP = Path(__file__).parent / "data" / "cmu_131_01_240.bvh"


@pytest.mark.parametrize(("args", "said"), [
    (["reduce", "CLIP", "--keys", "4", "--tol", "2,20"], "unrecognized arguments: --tol 2,20"),
    (["reduce", "CLIP", "--keys", "4", "--over"], "unrecognized arguments: --over"),
    (["batch", "CLIP", "--out", "OUT", "--keys", "4", "--json", "foo.json"],
     "unrecognized arguments: --json foo.json; --json is an option of info, analyze, reduce, "
     "not of batch"),
])
def test_abbreviated_flags_are_refused(tmp_path, capsys, args, said):
    # (argparse took --tol for --tolerance, and batch's --json for --json-log, then refused
    # the file name that followed as an extra argument)
    args = [str(SHORT_CLIP) if a == "CLIP" else str(tmp_path) if a == "OUT" else a
            for a in args]
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and said in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "said"), [
    (["reduce", "CLIP", "--space", "channel", "--frames", ""], "--frames needs a value, got an "
                                                              "empty one"),
    (["analyze", "CLIP", "--range", " "], "--range needs a value, got an empty one"),
    (["analyze", "CLIP", "--pins", ""], "--pins needs a value, got an empty one"),
    (["reduce", "CLIP", "--space", "channel", "--frames", "0,,89"],
     "--frames must be whole frame numbers separated by commas, got 0,,89"),
    (["analyze", "CLIP", "--nodes", "Hips,,Head"],
     "--nodes must be node names separated by commas, got Hips,,Head"),
])
def test_an_empty_value_is_refused_not_taken_for_none(capsys, args, said):
    # (`--frames "$KEYS"` with KEYS unset ran the default tolerance search; "0,,89" was 0,89)
    assert main([str(SHORT_CLIP) if a == "CLIP" else a for a in args]) == 2
    assert capsys.readouterr().err == f"salient-poses: error: {said}\n"


@pytest.mark.parametrize(("args", "said"), [
    (["reduce", "CLIP", "--keys", "4", "--bvh", ""], "--bvh must be a file name"),
    (["reduce", "CLIP", "--keys", "4", "--json", ""], "--json must be a file name"),
    (["reduce", "CLIP", "--keys", "4", "--residual", ""], "--residual must be a file name"),
    (["reduce", "CLIP", "--keys", "4", "--preset", ""], "--preset must be a file name"),
    (["analyze", "CLIP", "--plot", ""], "--plot must be a file name"),
    (["info", "CLIP", "--positions", ""], "--positions must be a file name"),
    (["propagate", "CLIP", "--frame", "10", "--edit", "", "--bvh", "OUT/m.bvh"],
     "--edit must be a file name"),
    (["propagate", "CLIP", "--frame", "10", "--edit", "e.json", "--bvh", ""],
     "--bvh must be a file name"),
    (["batch", "CLIP", "--keys", "4", "--out", ""], "--out must be a folder name"),
    (["demo", "--out", ""], "--out must be a folder name"),
    (["info", ""], "CLIP must be a file name"),
    (["batch", "", "--keys", "4", "--out", "OUT"], "INPUT must be a file or folder name"),
])
def test_an_empty_path_is_refused_not_taken_for_no_file(tmp_path, capsys, monkeypatch, args,
                                                          said):
    # (`--bvh "$OUT"` with OUT unset said "Nothing written" and exited 0)
    monkeypatch.chdir(tmp_path)
    args = [str(SHORT_CLIP) if a == "CLIP" else a.replace("OUT", str(tmp_path)) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == f"salient-poses: error: {said}, got an empty path\n"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("ratio", "last", "said"), [
    ("0.05", 89, "ratio 0.05 of 90 frames: K = 5"),  # 4.5: half up (round() gave 4)
    ("0.07", 49, "ratio 0.07 of 50 frames: K = 4"),  # 3.5000000000000004 in binary
    ("0.05", 88, "ratio 0.05 of 89 frames: K = 4"),  # 4.45
])
def test_a_ratio_rounds_half_up(capsys, ratio, last, said):
    assert main(["reduce", str(SHORT_CLIP), "--ratio", ratio, "--range", f"0:{last}",
                 "--space", "channel"]) == 0
    assert f"Keys       {said}\n" in capsys.readouterr().out


@pytest.mark.parametrize(("offsets", "said"), [
    ('{"offsets": {"NoNode.Zrotation": 30}}',
     "offsets: 'NoNode.Zrotation' is not a channel of CLIP (no node 'NoNode'; `salient-poses "
     "info CLIP --tree` lists them)"),
    ('{"offsets": {"RightShoulder.Wrotation": 3}}',
     "offsets: 'RightShoulder.Wrotation' is not a channel of CLIP (node RightShoulder has "
     "Zrotation, Xrotation, Yrotation; `salient-poses info CLIP --tree` lists them)"),
    ('{"offsets": {"RightShoulder.Zrotation": "x"}}',
     'offsets: RightShoulder.Zrotation must be a number (degrees, scene units for a '
     'position), got "x"'),
    ('{"offsets": {"RightShoulder.Zrotation": NaN}}',
     "offsets: RightShoulder.Zrotation must be a number (degrees, scene units for a "
     "position), got NaN"),
    ("not json", 'not JSON (Expecting value at line 1 column 1); expected {"offsets": '
                 '{"Node.Xrotation": degrees, ...}}'),
    ("[1]", 'expected {"offsets": {"Node.Xrotation": degrees, ...}}'),
    # a joint's three rotations are a pose: 190 went the other way, 360 and 720 changed nothing
    # and said they propagated
    ('{"offsets": {"RightShoulder.Zrotation": 190}}',
     "offsets: RightShoulder.Zrotation is 190 degrees, more than half a turn: the edit is the "
     "pose it leads to, spread over the motion as the shortest turn to it (-170 degrees "
     "here); give -180 to 180"),
    ('{"offsets": {"RightShoulder.Xrotation": -720}}',
     "offsets: RightShoulder.Xrotation is -720 degrees, more than half a turn: the edit is the "
     "pose it leads to, spread over the motion as the shortest turn to it (0 degrees here); "
     "give -180 to 180"),
    # (blamed on the clip: "channel Hips.Xposition is 2.8369e+10 at frame 15 ... a corrupt
    # file?")
    ('{"offsets": {"Hips.Xposition": 1e12}}', "offsets: Hips.Xposition is 1e+12, beyond ±1e+09"),
])
def test_a_bad_edit_names_the_channel_or_value(tmp_path, capsys, offsets, said):
    # (it showed Python's words: "('NoNode.Zrotation' is not in list)", "(could not convert
    # string to float: 'x')")
    edit = tmp_path / "edit.json"
    edit.write_text(offsets)
    assert main(["propagate", str(SHORT_CLIP), "--frame", "100", "--edit", str(edit),
                 "--bvh", str(tmp_path / "m.bvh")]) == 2
    assert capsys.readouterr().err == \
        f"salient-poses: error: {edit}: {said.replace('CLIP', str(SHORT_CLIP))}\n"
    assert not (tmp_path / "m.bvh").exists()


@pytest.mark.parametrize(("args", "said"), [
    (["analyze", "CLIP", "--linear"],
     "--linear sets the error axis of --plot, which is not given; add --plot OUT.png or drop "
     "it"),
    (["info", "CLIP", "--tree", "--json", "-"],
     "--tree prints the hierarchy with the summary, which --json - replaces (its JSON holds the "
     "hierarchy: nodes and parents); drop one of them"),
])
def test_output_flags_that_need_another_are_refused_not_dropped(capsys, args, said):
    # (both ran with exit 0 and did nothing with the flag)
    assert main([str(SHORT_CLIP) if a == "CLIP" else a for a in args]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"salient-poses: error: {said}\n" and captured.out == ""


def test_info_tree_with_a_json_file_prints_the_tree(tmp_path, capsys):
    assert main(["info", str(SHORT_CLIP), "--tree", "--json", str(tmp_path / "i.json")]) == 0
    assert "RThumb_end  (End Site)" in capsys.readouterr().out
    assert "RThumb_end" in json.loads((tmp_path / "i.json").read_text())["nodes"]


# ------------------------------------------------ a review of the command line on bad input
def _cut(sample_path: Path, tmp_path: Path, frames: int = 60, rename: dict | None = None,
         name: str = "cut.bvh") -> Path:
    """The sample's first ``frames`` frames as a file, joints renamed by ``rename``."""
    text = sample_path.read_text()
    head, _, rest = text.partition("MOTION")
    for old, new in (rename or {}).items():
        head = head.replace(f"JOINT {old}\n", f"JOINT {new}\n")
    rows = rest.strip().splitlines()[2:2 + frames]
    path = tmp_path / name
    path.write_text(f"{head}MOTION\nFrames: {frames}\nFrame Time: 0.0083333\n"
                    + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_name_the_console_cannot_show_is_escaped_not_a_failure(sample_path, tmp_path,
                                                                 monkeypatch):
    """On a cp1252 console (Windows) the summary printed after the files were written failed
    the command with them written (exit 1, "internal error: UnicodeEncodeError")."""
    clip = _cut(sample_path, tmp_path, rename={"RightToe": "右足"})
    console = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    monkeypatch.setattr(sys, "stdout", console)
    out = tmp_path / "keys.json"
    assert main(["info", str(clip), "--tree"]) == 0
    assert main(["reduce", str(clip), "--keys", "4", "--space", "channel", "--json",
                 str(out)]) == 0
    console.flush()
    printed = console.buffer.getvalue().decode("cp1252")
    assert "\\u53f3\\u8db3  Zrotation" in printed and "Wrote " in printed
    assert "右足.Zrotation" in [c["name"] for c in
                               json.loads(out.read_text(encoding="utf-8"))["channels"]]


def test_a_long_line_is_quoted_in_part(sample_path, tmp_path, capsys):
    """A missing Frame Time before a data line of 20,000 values was one error line of 80,094
    characters."""
    text = sample_path.read_text()
    path = tmp_path / "long.bvh"
    path.write_text(text[:text.index("MOTION")] + "MOTION\nFrames: 1\n"
                    + " ".join(["1.0"] * 20000) + "\n")
    assert main(["info", str(path)]) == 2
    said = capsys.readouterr().err
    assert said.endswith("expected 'Frame Time: <number>', found '1.0 1.0 1.0 1.0 1.0 1.0 1.0 "
                         "1.0 1.0 1.0 1.0 1.0 1.0 1.0 1.0 '… (79,999 characters)\n")
    assert said == f"salient-poses: error: {path}, line 187: " + said.split(": ", 3)[3]


@pytest.mark.parametrize(("args", "said"), [
    (["--json", "x.bvh"], "--json must be a .json file name, got x.bvh"),
    (["--json", "{tmp}/cut.bvh/x.json"],
     "cannot write --json {tmp}/cut.bvh/x.json: folder {tmp}/cut.bvh is a file, not a folder"),
    (["--max-span", "10"], "no selection of at most 4 keys has keys at most --max-span 10 "
                           "frames apart (they need at least 7 keys); raise --max-keys or "
                           "--max-span"),
])
def test_outputs_and_spans_are_refused_with_what_to_change(sample_path, tmp_path, capsys, args,
                                                          said):
    """JSON went into x.bvh (which a later batch read as a clip); a file was called a folder
    that does not exist; "raise --max-keys" did not say to how many (the next run said K was
    out of range)."""
    clip = _cut(sample_path, tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["reduce", str(clip), "--keys", "4", "--space", "channel", *args]) == 2
    said = said.replace("{tmp}", str(tmp_path))
    assert capsys.readouterr().err == f"salient-poses: error: {said}\n"
    assert not (tmp_path / "x.bvh").exists()


def test_a_clip_without_frames_has_no_last_frame(sample_path, tmp_path, capsys):
    text = sample_path.read_text()
    path = tmp_path / "rest.bvh"
    path.write_text(text[:text.index("MOTION")] + "MOTION\nFrames: 0\nFrame Time: 0.0083333\n")
    assert main(["info", str(path), "--json", "-"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["frames"] == 0 and record["last_frame"] is None  # (it said -1)


@pytest.mark.parametrize("args", [["--nodes", "LeftToe"], ["--nodes", "LeftToe,RightToe",
                                                           "--weights", "LeftToe=0,RightToe=0"]])
def test_nodes_that_do_not_move_are_said_to_make_k_arbitrary(sample_path, tmp_path, capsys,
                                                             args):
    """Only a wrist moved; measured at a toe, the analysis chose K = 32 of 150 frames and said
    nothing."""
    text = _cut(sample_path, tmp_path, frames=80).read_text()
    head, _, rest = text.partition("MOTION")
    rows = rest.strip().splitlines()[2:]
    names = read_bvh(_cut(sample_path, tmp_path, frames=80)).channel_names
    wrist = names.index("LeftWrist.Zrotation")
    values = np.array([row.split() for row in rows], dtype=float)
    values[:] = values[0]
    values[:, wrist] = 40.0 * np.sin(np.arange(len(values)) / 15.0)
    path = tmp_path / "wrist.bvh"
    path.write_text(f"{head}MOTION\nFrames: {len(values)}\nFrame Time: 0.0083333\n"
                    + "\n".join(" ".join(f"{v:.4f}" for v in row) for row in values) + "\n")
    assert main(["analyze", str(path), *args]) == 0
    out = capsys.readouterr().out
    assert "the poses the keys are chosen by do not change in frames 0..79: the --nodes " \
           "measured do not move (or their --weights are 0), so every selection fits them " \
           "alike and K and its keys are arbitrary" in out.replace("\n", " ").replace("  ", " ")
    assert main(["analyze", str(path)]) == 0  # (the wrist measured: nothing to say)
    assert "do not change" not in capsys.readouterr().out
