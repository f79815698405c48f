"""The salient-poses command line: info, demo, errors."""

from __future__ import annotations

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


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT A\n{\nOFFSET 0 0\n}\n")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 5" in err and "Traceback" not in err
    assert main(["info", str(tmp_path / "missing.bvh")]) == 2
    assert main(["info", str(tmp_path / "clip.fbx")]) == 2
    assert "unsupported file type '.fbx'" in capsys.readouterr().err


def test_unwritable_output_exits_2(sample_path, tmp_path, capsys):
    assert main(["info", str(sample_path), "--json", str(tmp_path / "no" / "x.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.bvh"
    bad.write_text("nonsense")
    from sp_core.errors import ClipFormatError

    with pytest.raises(ClipFormatError):
        main(["info", str(bad), "--debug"])


def test_demo_runs_in_process(capsys):
    assert main(["demo"]) == 0
    assert "cmu_131_01" in capsys.readouterr().out


def test_console_script_demo_and_help():
    script = Path(sys.executable).with_name("salient-poses")
    result = subprocess.run([str(script), "demo"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "994" in result.stdout
    for command in (["--help"], ["info", "--help"], ["demo", "--help"]):
        help_run = subprocess.run([str(script), *command], capture_output=True, text=True)
        assert help_run.returncode == 0 and "usage: salient-poses" in help_run.stdout
