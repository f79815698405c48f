"""The Qt-free session over a host: analysis, K, Apply/Remove, pins, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from choices import SUGGESTED
from fake_host import FakeHost

from sp_core.errors import OptionError, SelectionError
from sp_core.host import Host, HostError
from sp_core.session import AnalysisCancelled, CancelToken, Pin, Session
from sp_core.standalone import StandaloneHost


@pytest.fixture()
def clip(sample_clip):
    return sample_clip.sub_range(0, 400)


def test_hosts_implement_the_protocol(clip):
    assert isinstance(FakeHost(clip), Host)
    assert isinstance(StandaloneHost(clip), Host)


def test_session_analyses_previews_applies_and_removes_without_qt(clip):
    host = FakeHost(clip)
    session = Session(host, SUGGESTED)
    events = []
    for name in ("analysis_started", "analysis_finished", "k_changed", "applied", "removed"):
        session.subscribe(name, lambda *args, name=name: events.append(name))
    progress = []
    space = session.analyze(progress=lambda f, m: progress.append(f))
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert session.k == space.suggestions()["threshold"]
    session.set_k(12)
    assert host.previews[-1] == space.keyframes(12).tolist()
    session.set_options(residual_layer=True, residual_weight=0.5)
    reduction = session.apply()
    assert host.undo_chunks == ["Salient Poses: apply 12 keys"]
    assert [layer["chunk"] for layer in host.layers] == [1, 1]  # both written inside the chunk
    written = host.layers[0]["curves"]
    assert written.frames.tolist() == space.keyframes(12).tolist()
    assert host.layers[1]["weight"] == 0.5
    np.testing.assert_allclose(host.layers[1]["residual"],
                               reduction.residual[:, reduction.curves.animated])
    session.remove()
    assert host.layers == [] and session.applied == []
    assert events == ["analysis_started", "analysis_finished", "k_changed", "applied",
                      "removed"]


def test_failing_host_write_leaves_scene_untouched(clip):
    host = FakeHost(clip, fail_on="write_residual")
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_options(residual_layer=True)
    with pytest.raises(HostError, match="writing the residual layer 'salientPoses_residual': "
                                        "RuntimeError: fake host failure"):
        session.apply()
    assert host.layers == [] and session.applied == []


def test_cancel_token_stops_the_analysis_and_keeps_the_previous_space(clip):
    session = Session(FakeHost(clip), SUGGESTED)
    first = session.analyze()
    token = CancelToken()
    seen = []

    def progress(fraction, message):
        seen.append(message)
        token.cancel()  # the user presses Cancel during the first stage

    with pytest.raises(AnalysisCancelled):
        session.analyze(progress=progress, cancel=token)
    assert len(seen) == 1 and session.space is first


def test_analysis_errors_are_specific(clip):
    session = Session(FakeHost(clip), SUGGESTED)
    with pytest.raises(OptionError, match=r"frame_range must be START:END host frames with "
                                          r"END > START, got 10:10"):
        session.set_options(frame_range=(10, 10))
    assert session.options.analysis.frame_range is None  # a refused change changes nothing
    with pytest.raises(SelectionError, match="analyse first"):
        session.set_k(5)
    # a mode or count that would be ignored is refused at Analyze, naming both options (the
    # fronts say them in their words); the sidebar said "choose at least one node of the
    # leading part ()" and ignored breakdowns without a word
    session.set_options(layered=True)
    with pytest.raises(SelectionError) as refused:
        session.analyze()
    assert str(refused.value) == ("layered needs leading: the nodes whose extremes are the "
                                  "keyposes (e.g. the hands of a gesture)")
    assert refused.value.options == ("layered", "leading")
    session.set_options(layered=False, breakdowns=3)
    with pytest.raises(SelectionError, match=r"^breakdowns applies only with layered; turn on "
                                             r"layered or clear breakdowns$"):
        session.analyze()
    assert session.space is None  # nothing read, nothing analysed


def test_pins_round_trip_and_bad_files(clip, tmp_path):
    session = Session(FakeHost(clip), SUGGESTED)
    session.set_options(pins=[Pin(200, "contact", "left heel down"), Pin(50)])
    session.export_pins(tmp_path / "pins.json")
    session.set_options(pins=[])
    pins = session.import_pins(tmp_path / "pins.json")
    assert pins == [Pin(50), Pin(200, "contact", "left heel down")]
    session.analyze()
    assert {50, 200} <= set(session.keyframes(session.space.min_keys).tolist())
    (tmp_path / "bad.json").write_text('{"pins": [{"name": "x"}]}')
    with pytest.raises(SelectionError, match="cannot read pins from"):
        session.import_pins(tmp_path / "bad.json")
    # a frame pinned twice (a hand-edited file) is refused, not merged into the last one
    (tmp_path / "twice.json").write_text('{"pins": [{"frame": 50, "name": "a"}, '
                                         '{"frame": 50, "name": "b"}]}')
    with pytest.raises(OptionError, match="^pins lists frame 50 twice; give each frame once$"):
        session.import_pins(tmp_path / "twice.json")
    assert session.analysis.pins == (Pin(50), Pin(200, "contact", "left heel down"))


def test_session_module_imports_no_qt():
    code = ("import sys, sp_core.session, sp_core.standalone, sp_core.host; "
            "assert not [m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph'))]")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_standalone_layers_reproduce_the_original_with_the_residual(clip):
    host = StandaloneHost(clip)
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_options(residual_layer=True, space="channel")
    session.apply()
    np.testing.assert_allclose(host.evaluated_channels(), clip.channels, atol=1e-9)
    session.remove()
    assert host.layers == []
    np.testing.assert_array_equal(host.evaluated_channels(), clip.channels)
