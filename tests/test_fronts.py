"""One choice of options, one result on every front end (issue 16): the command line, a job (what
batches run), the session (what every panel drives), the panel itself offscreen,
``maya_plugin.api`` and both in-host batches on the strict fakes."""

from __future__ import annotations

import copy
import csv
import json
import re

import numpy as np
import pytest
from maya_scenes import STATE, build_scene
from mobu_scenes import build_scene as build_mobu_scene
from mobu_scenes import fb

from sp_core.io.bvh import read_bvh, write_bvh
from sp_core.jobs import Job, run_job
from sp_core.options import Options, flag_of
from sp_core.session import Session
from sp_core.standalone import StandaloneHost

FIRST = 1001
CHOICES = [{"ratio": 0.1}, {"keys": 9}, {}, {"pins": [1030, 1071], "keys": 8}]
IDS = ["ratio", "keys", "default", "pins"]


def summary_row(folder):
    with open(folder / "summary.csv", newline="") as handle:
        return next(csv.DictReader(handle))


def cli_flags(choice):
    flags = []
    for name, value in choice.items():
        flags += [flag_of(name), ",".join(map(str, value)) if isinstance(value, list)
                  else str(value)]
    return flags


@pytest.fixture(scope="module")
def maya_part(sample_clip):
    part, _ = build_scene(sample_clip, first=FIRST)
    return part


def reference(part, tmp_path, options):
    """The job on a BVH of the same motion: what every other front must reproduce."""
    path = tmp_path / "take.bvh"
    write_bvh(part, path)
    return path, run_job(Job(str(path), options.replace(first_frame=FIRST))), read_bvh(
        path, first_frame=FIRST)


@pytest.mark.parametrize("choice", CHOICES, ids=IDS)
@pytest.mark.parametrize("tangents", ["unified", "broken"])
def test_cli_session_maya_api_and_maya_batch_agree(sample_clip, maya_part, tmp_path, choice,
                                                   tangents):
    from maya_plugin import api
    from maya_plugin import batch as maya_batch
    from sp_core.cli import main

    options = Options().replace(tangents=tangents, space="channel", **choice)
    path, job, clip = reference(maya_part, tmp_path, options)
    frames = job.frames
    assert job.keys == len(frames) and frames[0] == FIRST

    # the command line
    out = tmp_path / "k.json"
    assert main(["reduce", str(path), "--first-frame", str(FIRST), "--tangents", tangents,
                 "--space", "channel", *cli_flags(choice), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["frames"] == frames

    # the session every panel drives
    session = Session(StandaloneHost(clip), options)
    session.analyze()
    session.set_k()
    reduction = session.apply()
    assert session.keyframes().tolist() == frames
    np.testing.assert_array_equal(reduction.curves.values, job.reduction.curves.values)

    # maya_plugin.api on the fake Maya scene holding the same motion
    build_scene(sample_clip, first=FIRST)
    result = api.reduce(["Hips"], tangents=tangents, space="channel", **choice)
    assert result.keys == job.keys and result.frames == frames
    override = next(la for la in STATE.scene.layers if la.override)
    curve = STATE.scene.curves[override.curves["Hips.rotateZ"]]
    assert np.rint(curve.times * STATE.scene.fps).astype(int).tolist() == frames
    np.testing.assert_allclose(np.degrees(curve.values),
                               job.reduction.curves.values[:, job.reduction.curves.channel_names
                                                           .index("Hips.Zrotation")],
                               atol=1e-9)

    # the mayapy batch on a saved copy of that scene
    build_scene(sample_clip, first=FIRST)
    STATE.saved["walk.ma"] = STATE.scene.snapshot()
    code = maya_batch.run(["walk.ma", "--out", str(tmp_path / "maya"), "--tangents", tangents,
                           "--space", "channel", *cli_flags(choice)])
    assert code == 0
    row = summary_row(tmp_path / "maya")
    assert row["clip"] == "walk.ma" and int(row["keys"]) == job.keys
    saved = STATE.saved[str(tmp_path / "maya" / "walk.ma")]
    layer = next(la for la in saved.layers if la.override)
    times = saved.curves[layer.curves["Hips.rotateZ"]].times
    assert np.rint(times * saved.fps).astype(int).tolist() == frames


@pytest.mark.parametrize("choice", CHOICES, ids=IDS)
def test_mobupy_batch_agrees_with_the_job(sample_clip, tmp_path, choice):
    from mobu_plugin import batch as mobu_batch

    part, _ = build_mobu_scene(sample_clip, fps=30.0, first=FIRST, frames=121)
    options = Options().replace(space="channel", **choice)
    _, job, _ = reference(part, tmp_path, options)
    fb.saved.clear()
    fb.saved["walk.fbx"] = copy.deepcopy(fb.scene)
    code = mobu_batch.run(["walk.fbx", "--out", str(tmp_path / "mobu"), "--space", "channel",
                           *cli_flags(choice)])
    assert code == 0
    row = summary_row(tmp_path / "mobu")
    assert (row["clip"], row["frames"], int(row["keys"])) == ("walk.fbx", "121", job.keys)
    saved = fb.saved[str(tmp_path / "mobu" / "walk.fbx")]
    layer = next(la for la in saved.take.layers if la.Name == "salientPoses")
    assert layer is not None
    assert float(row["mean_mm"]) == pytest.approx(job.reduction.metrics.mean_mm, abs=0.01)


@pytest.mark.parametrize("choice", CHOICES, ids=IDS)
def test_the_panel_previews_and_applies_the_jobs_keys(sample_clip, maya_part, tmp_path, qtbot,
                                                      choice):
    from fake_host import FakeHost
    from PySide6 import QtCore

    from sp_core.ui.panel import SalientPosesPanel

    options = Options().replace(space="channel", **choice)
    _, job, clip = reference(maya_part, tmp_path, options)
    host = FakeHost(clip)
    session = Session(host, options)
    settings = QtCore.QSettings(str(tmp_path / "panel.ini"), QtCore.QSettings.Format.IniFormat)
    panel = SalientPosesPanel(session, settings=settings)
    qtbot.addWidget(panel)
    qtbot.mouseClick(panel.analyze_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.analysing, timeout=120_000)
    qtbot.waitUntil(lambda: bool(host.previews), timeout=30_000)
    assert session.k == job.keys and host.previews[-1] == job.frames


def test_layered_default_is_one_selection_with_breakdowns_in_job_and_session(sample_path,
                                                                            sample_clip):
    """Keyposes and breakdowns at the default K: the three-layer rules' choice, the same in a
    job (CLI, batches) and a session (panels), and not an empty breakdown layer."""
    options = Options().replace(layered=True, leading=("RightWrist",), space="channel")
    job = run_job(Job(str(sample_path), options))
    session = Session(StandaloneHost(sample_clip), options)
    session.analyze()
    assert session.k == job.keys == job.labels.count("keypose")
    assert session.keyframes().tolist() == job.frames
    assert [session.labels()[f] for f in job.frames] == job.labels
    assert job.labels.count("breakdown") > 0
    # another K is the optimal two-pass selection with that many keyposes
    session.set_k(session.k + 1)
    assert list(session.labels().values()).count("keypose") == job.keys + 1


def test_each_front_says_the_options_an_error_names_its_own_way():
    """An error or note names options by field name and lists them; ``said`` replaces exactly
    those, as whole words (not inside a longer name or a flag, not an unlisted option), and
    the list survives pickling (batch workers send their errors to the command)."""
    import pickle

    import distributed.utils  # noqa: F401 - installs tblib's exception pickling, as in a batch

    from sp_core.errors import CapacityError, ClipFormatError, Note, said

    error = CapacityError("raise memory_gib (memory_gib_x, --memory_gib) or fewer max_keys",
                          options=("memory_gib",))
    assert said(error, flag_of) == ("raise --memory-gib (memory_gib_x, --memory_gib) or fewer "
                                    "max_keys")
    assert str(error).startswith("raise memory_gib")  # the Python API's words
    copied = pickle.loads(pickle.dumps(error))
    assert type(copied) is CapacityError and copied.options == ("memory_gib",)
    assert said(copied, flag_of) == said(error, flag_of)
    bad = pickle.loads(pickle.dumps(ClipFormatError("expected a number", "take.bvh", 12)))
    assert (str(bad), bad.path, bad.line) == ("take.bvh, line 12: expected a number",
                                              "take.bvh", 12)
    note = Note("keys at most 9 frames apart (max_span 9)", options=("max_span",))
    assert said(note, flag_of) == "keys at most 9 frames apart (--max-span 9)"
    assert json.dumps([note]) == '["keys at most 9 frames apart (max_span 9)"]'
    assert said(pickle.loads(pickle.dumps(note)), str.upper) == \
        "keys at most 9 frames apart (MAX_SPAN 9)"
    assert said("plain text max_span", flag_of) == "plain text max_span"


def test_the_maya_api_refuses_what_the_command_line_refuses(sample_clip):
    """An audit: the hosts' Python APIs built options without the command line's check, so
    ``smoothness`` without the smooth tangents (and the rest :func:`check_given` refuses) was
    dropped without a word; the command line refuses each."""
    from maya_plugin import api
    from sp_core.errors import OptionError

    build_scene(sample_clip, first=FIRST)
    for given, said in ((dict(keys=5, smoothness=3.0), "smoothness applies to the smooth "
                         "tangents only (tangents smooth); drop it or add that"),
                        (dict(keys=5, space="channel", world_iterations=3),
                         "world_iterations applies to the world fit only"),
                        (dict(frames=[FIRST, FIRST + 20, FIRST + 39], stride=4),
                         "frames gives the keys itself: stride cannot apply")):
        with pytest.raises(OptionError, match=f"^{re.escape(said)}"):
            api.reduce(["Hips"], **given)
    assert not any(la.override for la in STATE.scene.layers)  # nothing written
