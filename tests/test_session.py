"""The Qt-free session over a host: analysis, K, Apply/Remove, pins, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from choices import SUGGESTED
from fake_host import FakeHost

from sp_core.clip import Clip
from sp_core.errors import OptionError, SalientPosesError, SelectionError
from sp_core.host import Host, HostError
from sp_core.options import Options
from sp_core.reduction import constant_channels
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


def test_replace_is_one_undo_step_and_a_failed_write_keeps_the_layers_it_replaces(clip):
    """The panel's Replace removed the old layers in an undo step of their own, then the write
    could fail ("the scene is unchanged", but the layers were gone), and one undo of a
    Replace left no layer at all."""
    host = StandaloneHost(clip)
    session = Session(host, Options().replace(keys=12))
    session.analyze()
    first = session.apply()
    old = [h.name for h in session.applied]
    session.set_options(residual_layer=True)
    host.write_residual = lambda *args, **kwargs: (_ for _ in ()).throw(  # type: ignore
        RuntimeError("disk full"))
    with pytest.raises(HostError, match="disk full"):
        session.apply(replace=True)
    assert [layer.handle.name for layer in host._layers] == old == \
        [h.name for h in session.applied]
    del host.write_residual
    session.apply(replace=True)
    new = [h.name for h in session.applied]
    assert len(new) == 2 and not set(new) & set(old)
    assert [layer.handle.name for layer in host._layers] == new
    assert host.undo() == "Salient Poses: apply 12 keys"  # one step gives the old ones back
    assert [layer.handle.name for layer in host._layers] == old
    assert session.last_reduction is not None and first.curves.n_keys == 12


def test_a_k_picked_once_does_not_cap_the_next_analysis(clip):
    """K = 20 picked on the slider set max_keys to 20 for every later analysis: the graph,
    slider and spin box ended at 20 and the cliffs above it were gone."""
    from sp_core.options import max_keys_for

    options = Options().replace(keys=20)
    whole = (0, 400)  # a panel's graph: the space's default, half the frames
    assert max_keys_for(options, 20, whole) is None
    assert max_keys_for(options, 300, whole) == 300
    assert max_keys_for(options.replace(max_keys=30), 20, whole) == 30
    assert max_keys_for(options.replace(max_keys=30), 40, whole) == 40
    session = Session(StandaloneHost(clip), options)
    assert session.adopt_analysis(session.compute_analysis(graph=True)).max_keys == 200
    # elsewhere K needs no more (a long take's analysis stays exact for a small K: the
    # reviewer's find, --keys 12 on 9,940 frames refused)
    assert max_keys_for(options, 20) == 20
    assert session.analyze().max_keys == 20


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


def test_standalone_reads_of_a_few_frames_are_those_of_the_whole_scene(clip):
    """A pose read evaluates the layers on the frames asked for only: the same values as the
    whole scene's on those frames, through and beneath the reduction layers, with an override,
    an additive layer at half weight, a muted layer and a propagated edit."""
    host = StandaloneHost(clip)
    session = Session(host, SUGGESTED)
    session.analyze()
    session.set_options(residual_layer=True, space="channel")
    session.apply()
    names = clip.channel_names
    frames = clip.frames
    rng = np.random.default_rng(3)
    host.write_residual(names[:5], frames[10:40], rng.normal(size=(30, 5)), "half", 0.5)
    muted = host.write_residual(names[3:9], frames[:20], rng.normal(size=(20, 6)), "muted", 1.0)
    host.set_muted(muted, True)
    host.write_residual(names[6:8], frames[25:60], rng.normal(size=(35, 2)), "edit", 1.0,
                        edit=True)
    for first, last in ((0, 0), (12, 30), (35, 35), (len(frames) - 3, len(frames) - 1)):
        for beneath in (False, True):
            whole = host.evaluated_channels(not beneath)
            np.testing.assert_array_equal(
                host.channel_values(names, int(frames[first]), int(frames[last]), beneath),
                whole[first:last + 1])


def test_apply_refuses_an_analysis_the_options_no_longer_describe(clip):
    """Pins, stride or the tolerance changed after Analyze: the keys of K still come from the
    old space, so Apply would write neither the pins nor the stride (an audit found the panel
    doing so without a word). Options read after the analysis, and the fit's, are taken."""
    host = FakeHost(clip)
    session = Session(host, SUGGESTED)
    session.analyze()
    assert session.changed_since_analysis() == ()
    session.set_options(pins=[Pin(200)], stride=4)
    with pytest.raises(SelectionError) as refused:
        session.apply()
    assert str(refused.value) == ("pins, stride changed since the analysis; analyse again to "
                                  "use them, or set them back")
    assert refused.value.options == ("pins", "stride")
    assert host.layers == [] and host.undo_chunks == []
    session.set_options(pins=[], stride=1, accuracy=0.2, tangents="broken", space="channel")
    assert session.changed_since_analysis() == ()
    # what makes the same analysis again is no change: the frames analysed given as a range,
    # more memory for an analysis that needed no window
    session.set_options(frame_range=(0, 400), memory_gib=4.0)
    assert session.changed_since_analysis() == ()
    session.set_options(frame_range=(0, 300), memory_gib=1.0)
    assert session.changed_since_analysis() == ("frame_range", "memory_gib")
    session.set_options(frame_range=None, memory_gib=2.0)
    host.playback_range = lambda: (0, 100)  # the scene's range moved, not an option
    assert session.changed_since_analysis() == ()
    del host.playback_range
    session.set_options(frame_range=None, memory_gib=2.0, pins=[Pin(200, name="contact")])
    session.analyze()
    session.set_options(pins=[Pin(200, name="heel strike", note="left")])  # the same frame
    assert session.changed_since_analysis() == ()
    session.apply()
    assert len(host.layers) == 1
    # the tolerance chose no K in this analysis: choosing K by it needs one
    session.set_options(suggested=False, tolerance=(3.0, 30.0))
    assert session.changed_since_analysis() == ("tolerance",)
    session.analyze()
    assert session.changed_since_analysis() == ()
    session.set_options(tolerance=(2.0, 20.0))
    with pytest.raises(SelectionError, match="^tolerance changed since the analysis; analyse "
                                             "again to use it, or set it back$"):
        session.apply()


def test_the_automatic_corrective_budget_serves_the_tolerances_k_only(clip):
    session = Session(FakeHost(clip), Options().replace(tolerance=(3.0, 30.0), space="channel"))
    session.analyze()
    assert session.tolerance_k == session.k
    assert session.corrective_plan() == ("5%", 30.0)
    session.set_k(session.k + 1)
    assert session.corrective_plan() == (None, None)
    assert session.reduce().corrections is None
    session.set_options(corrective_budget="10")  # a budget asked for is spent at any K
    assert session.corrective_plan() == ("10", 30.0)


def test_a_readout_says_whether_its_k_has_the_tolerances_corrective_keys(clip):
    """A K above the tolerance's showed a max three times as large, and nothing said that
    its figures were of the pose keys alone (a review on real Blender)."""
    session = Session(FakeHost(clip), Options().replace(tolerance=(3.0, 30.0), space="channel"))
    session.analyze()
    chosen = session.k
    corrected = session.reduce().metrics.corrective_keys
    assert corrected > 0
    assert session.keys_said(corrected) == f"with {corrected} corrective keys"
    session.set_k(chosen + 1)
    assert session.keys_said(session.reduce().metrics.corrective_keys) == (
        f"pose keys alone (the corrective keys are the tolerance's, at K = {chosen})")
    session.set_options(corrective_budget="0")  # none asked for: nothing to say
    assert session.keys_said(0) == ""


def test_a_range_where_nothing_moves_is_said_and_not_applied(clip):
    """A still clip analysed to K = 2, and Apply wrote an empty layer and said "Applied 2
    keys"."""
    still = clip.with_channels(np.repeat(clip.channels[:1], clip.n_frames, axis=0))
    host = FakeHost(still)
    session = Session(host, SUGGESTED)
    session.analyze()
    said = ("nothing moves in frames 0..400: every channel keeps one value, so there is no key "
            "to write")
    assert session.notes == [said]
    with pytest.raises(SelectionError, match=f"^{said}$"):
        session.apply()
    assert host.layers == [] and host.undo_chunks == []


def test_apply_refuses_a_scene_whose_moving_channels_are_all_held(clip):
    """With every moving channel locked, an in-host batch skipped Apply in silence (as for a
    still scene) and said ok."""
    from sp_core.jobs import Job, run_job

    moving = [n for n, c in zip(clip.channel_names, constant_channels(clip.channels),
                                strict=True) if not c]
    host = FakeHost(clip._derived(held_channels=moving))  # noqa: SLF001 - as a host reads it
    with pytest.raises(SelectionError, match="^nothing to write: every channel that moves is "
                                             "left alone "):
        run_job(Job("", SUGGESTED, "reduce", apply=True), host=host)
    assert host.layers == []


def test_reviewed_apply_keeps_to_the_options_it_was_given(clip, tmp_path, capsys):
    """A review of the fixes above: Apply checked the analysis against the session's options
    of the moment (a stride changed while its fit ran failed it, though the fit used the
    options of the press); a value greyed in a panel (smoothness kept after the tangents went
    back to unified) was recorded in the options block, which then failed as a preset; the
    suggested K adopted used the analysis's accuracy while the graph showed the live one."""
    import json

    from sp_core.cli import main
    from sp_core.jobs import RESULT_GROUPS

    host = StandaloneHost(clip)
    session = Session(host, Options().replace(keys=8, tangents="smooth", smoothness=5))
    session.analyze()
    session.set_options(tangents="unified")
    pressed = session.options
    reduction = session.reduce(options=pressed)
    session.set_options(stride=2)  # while the fit ran
    session.apply(reduction, options=pressed)
    assert session.changed_since_analysis() == ("stride",)
    assert session.last_options.fit.smoothness == 1.0  # greyed: did not apply
    block = tmp_path / "block.json"
    block.write_text(json.dumps(session.last_options.to_dict(RESULT_GROUPS)))
    path = tmp_path / "take.bvh"
    from sp_core.io.bvh import write_bvh
    write_bvh(clip, path)
    assert main(["reduce", str(path), "--preset", str(block), "--space", "channel"]) == 0
    capsys.readouterr()
    session = Session(StandaloneHost(clip), Options().replace(suggested=True))
    analysis = session.compute_analysis(choose=False)
    session.set_options(accuracy=0.5)  # while it ran
    session.adopt_analysis(analysis)
    assert session.k == session.suggested_k


def test_reviewed_a_browsed_space_offers_the_k_asked_on_a_long_take_and_more_elsewhere(
        clip, monkeypatch):
    """A second review: the panel's and the Blender sidebar's whole space was windowed past a
    small K on a long take (K = 12 refused on 9,940 frames: "22 to 4970"), and the sidebar,
    whose analysis still capped at the options' K, refused to browse above a ratio's K."""
    session = Session(StandaloneHost(clip), Options().replace(ratio=0.02))
    session.analyze(graph=True)
    assert session.k == 8 and session.space.max_keys == 200
    session.set_k(18)
    # a time budget too small for the whole space windows it past K: the space up to K then
    budget = Options().replace(suggested=True, time_budget=0.005)
    assert Session(StandaloneHost(clip), budget).analyze(graph=True).min_keys == 3
    session = Session(StandaloneHost(clip), budget.replace(keys=2))
    builds = _count_builds(monkeypatch)
    space = session.analyze(graph=True)
    # planned up to K before its table is built: built once (its first, windowed build was
    # wasted time, and the progress bar went back from 95 % to 5 %)
    assert space.min_keys == 2 and session.k == 2 and len(builds) == 1


def _count_builds(monkeypatch) -> list[int]:
    """The max_keys of every selection space built from now on (each builds a table)."""
    from sp_core import selection

    builds: list[int] = []
    start = selection.SelectionSpace._start_select

    def counted(self, *args):
        builds.append(self.max_keys)
        start(self, *args)

    monkeypatch.setattr(selection.SelectionSpace, "_start_select", counted)
    return builds


def test_reviewed_a_browsed_layered_space_offers_the_k_asked_when_windowed(sample_clip,
                                                                           monkeypatch):
    """A third review: the layered keypose space browsed whole (the Blender sidebar) of a
    long take was windowed past the K asked for (refused: "K = 9 … 10 to 1491"); a smaller
    memory limit stands in for a take of tens of thousands of frames."""
    from sp_core import selection

    v = sample_clip.channels
    take = sample_clip.with_channels(np.concatenate([v, v[::-1], v])[:3000])
    options = Options().replace(layered=True, leading=("lhand", "rhand"), ratio=0.003)
    built = selection.SelectionSpace.__init__

    def small(self, *args, **kwargs):
        kwargs["memory_limit"] = 33 * 1024**2
        built(self, *args, **kwargs)

    monkeypatch.setattr(selection.SelectionSpace, "__init__", small)
    session = Session(StandaloneHost(take), options)
    builds = _count_builds(monkeypatch)
    space = session.analyze(graph=True)
    assert session.k == 9 and space.min_keys <= 9 <= space.max_keys
    assert builds[0] == space.max_keys  # the keypose space built once, up to K


def test_layered_suggests_the_automatic_choice_and_its_options_ask_for_a_new_analysis(
        sample_clip):
    """An audit: in keyposes + breakdowns mode the suggested K (the graph's star, Suggested) was
    the keypose space's threshold rule (10 keyposes on the sample) where Analyze and
    ``reduce --layered --suggested`` give the three-layer choice (16); and after accuracy or
    significance changed, that choice (of the old values) stayed at its K, unflagged, where
    the same options elsewhere give other keys."""
    options = Options().replace(layered=True, leading=("RightWrist",), space="channel")
    session = Session(StandaloneHost(sample_clip), options)
    session.analyze()
    automatic = session.automatic
    assert automatic is not None
    assert session.k == session.suggested_k == len(automatic.keyposes) == 16
    assert session.space.suggestions(0.05, 0.1)["threshold"] != 16  # (what was suggested)
    assert session.keyframes().tolist() == automatic.frames.tolist()
    session.set_options(accuracy=0.2)
    assert session.changed_since_analysis() == ("accuracy",)
    with pytest.raises(SalientPosesError, match="accuracy"):
        session.check_analysis_current()
    # at K = 16 now: what these options give for 16 keyposes (a command line's --keys 16)
    asked = Session(StandaloneHost(sample_clip), options.replace(keys=16, accuracy=0.2))
    asked.analyze()
    assert session.keyframes(16).tolist() == asked.keyframes().tolist()
    session.set_options(accuracy=0.05, significance=0.5)
    assert session.changed_since_analysis() == ("significance",)
    session.set_options(significance=0.1)
    assert session.changed_since_analysis() == ()
    assert session.keyframes(16).tolist() == automatic.frames.tolist()
    # plain mode reads them live, as before
    plain = Session(StandaloneHost(sample_clip), Options().replace(suggested=True))
    plain.analyze()
    plain.set_options(accuracy=0.2)
    assert plain.changed_since_analysis() == ()


def test_an_api_audit_of_the_session(sample_clip, sample_path, tmp_path):
    """A pipeline TD's audit: ``reduce()`` after analysis options changed returned the old keys
    under the new options; ``set_options(keys=20)`` after ``analyze()`` kept the analysis' K
    and wrote ``keys: 20`` beside its frames; a file opened at frame 1001 recorded
    ``first_frame: null`` (as a preset: frames from 0); a script's options block held values
    that did not apply (refused as a preset); ``frames`` and ``pins`` refused numpy arrays;
    a corrective budget of 'abc', -5 or 150 % met a ValueError or was taken."""
    import json

    from sp_core.errors import ReductionError
    from sp_core.jobs import write_keys_json
    from sp_core.options import preset_options
    from sp_core.reduction import reduce

    session = Session(StandaloneHost(sample_clip), Options().replace(suggested=True))
    session.analyze()
    session.set_options(cost="line-max", stride=4)
    with pytest.raises(SelectionError, match="^cost, stride changed since the analysis"):
        session.reduce()
    session.set_options(cost="line-sse", stride=1)
    session.set_options(keys=20)
    assert session.k == 20 and len(session.reduce().curves.frames) == 20
    session.set_options(keys=900)  # not in this analysis (2 to 497): said, not ignored
    assert session.k == 20
    with pytest.raises(SelectionError, match=r"^keys changed since the analysis; analyse again "
                                             r"to use it, or set it back$"):
        session.reduce()
    session.set_options(keys=30)
    assert session.k == 30
    session.set_k(25)  # a K picked (the panel's slider) is the session's, whatever the option
    assert len(session.reduce().curves.frames) == 25
    # the options block of a file opened at 1001, with a value that does not apply
    host = StandaloneHost.from_file(sample_path, first_frame=1001)
    opened = Session(host, Options().replace(keys=5, space="channel", smoothness=3.0))
    opened.analyze()
    target = tmp_path / "k.json"
    write_keys_json(opened.reduce(), host.source, host.fps, opened.options, str(target))
    block = json.loads(target.read_text())["options"]
    assert block["input"]["first_frame"] == 1001 and block["fit"]["smoothness"] == 1.0
    preset = tmp_path / "p.json"
    preset.write_text(json.dumps(block))
    again = Session(StandaloneHost.from_file(sample_path, first_frame=1001),
                    preset_options(preset))
    again.analyze()
    assert again.keyframes().tolist() == opened.keyframes().tolist()
    assert again.keyframes()[0] == 1001
    # numpy vectors where frames are asked for
    frames = opened.space.keyframes(5)
    assert Options().replace(frames=frames).keys.frames == tuple(frames)
    assert [p.frame for p in Options().replace(pins=frames[1:3]).analysis.pins] == \
        frames[1:3].tolist()
    for budget in ("abc", -5, "150%", "-3%"):
        with pytest.raises(ReductionError, match="^corrective_budget must be a whole number of "
                                                 "keys >= 0 or a percentage in"):
            reduce(sample_clip, [0, 500, 993], space="channel", corrective_budget=budget)


def test_the_api_says_what_is_wrong_in_its_own_errors(sample_clip):
    """An audit: a bad command met ValueError, a job record without its input KeyError, a
    batch without its folder an empty AssertionError; a fractional pin was 'outside the range';
    a NaN in ``reduce`` named neither the channel nor the frame."""
    from sp_core.batch import run_batch
    from sp_core.errors import ReductionError, SalientPosesError
    from sp_core.jobs import Job
    from sp_core.reduction import reduce
    from sp_core.selection import SelectionSpace

    with pytest.raises(SalientPosesError, match="^command must be one of analyze, reduce, got "
                                                "'nope'$"):
        Job("x.bvh", command="nope")
    with pytest.raises(SalientPosesError, match="^a job record holds 'input'"):
        Job.from_dict({"frames": [0, 1]})
    with pytest.raises(SalientPosesError, match="^a batch needs out"):
        run_batch(["x.bvh"], Options())
    with pytest.raises(SelectionError, match=r"^pinned frame 100.5 is not a whole frame number$"):
        SelectionSpace.from_clip(sample_clip.sub_range(0, 200), pins=[100.5])
    channels = sample_clip.channels.copy()
    channels[100, 7] = np.nan
    with pytest.raises(ReductionError, match=rf"^{sample_clip.channel_names[7]} is not a number "
                                             r"\(NaN or infinity\) at frame 100; fix that key$"):
        reduce(sample_clip.with_channels(channels), [0, 500, 993], space="channel")


def test_reviewed_a_clips_host_keeps_the_first_frame_the_options_give(sample_path):
    """A review: a Session on ``StandaloneHost(clip)`` (how run_job builds one) set the
    options' first_frame to None (the host read no file itself): the keys JSON recorded null
    and ``apply(options=...)`` said 'first_frame changed since the analysis'."""
    from sp_core.io.readers import read_clip

    options = Options().replace(first_frame=1001, keys=5, space="channel")
    session = Session(StandaloneHost(read_clip(sample_path, first_frame=1001)), options)
    assert session.options.input.first_frame == 1001
    session.analyze()
    session.apply(options=options)


def test_reviewed_the_options_recorded_give_the_k_written(sample_path):
    """A second review: a K picked with ``set_k`` (or the panel's *Suggested*) beside a keys
    option picked before was written, and the options block said the other K (``keys: 30``
    of 25 keys written); a file read from its own first frame with options saying 1001 was
    recorded as read from 1001."""
    session = Session(StandaloneHost.from_file(sample_path),
                      Options().replace(first_frame=1001, keys=30, space="channel"))
    assert session.options.input.first_frame is None  # read from 0: the file's own
    session.analyze()
    session.set_k(25)
    session.apply()
    assert len(session.last_reduction.curves.frames) == 25
    assert session.last_options.keys.keys == 25
    session.set_k(session.suggested_k)
    session.apply(replace=True)
    assert session.last_options.keys.keys == session.suggested_k
    # the K the options choose: recorded as they are
    again = Session(StandaloneHost.from_file(sample_path), Options().replace(keys=12,
                                                                              space="channel"))
    again.analyze()
    again.apply()
    assert again.last_options == again.options.replace(first_frame=None)


def test_reviewed_the_record_names_the_k_where_the_rule_is_not_known_to_give_it(sample_clip):
    """A third review: the options' rule was trusted where a fresh analysis would choose
    otherwise: *Suggested* on a space an earlier keys option capped (2 to 10: the threshold
    rule said 10, a fresh analysis 14), and in the layered mode on an analysis made without
    its automatic choice (15 keyposes written, 46 from the record)."""
    session = Session(StandaloneHost(sample_clip), Options().replace(keys=10, space="channel"))
    session.analyze()
    session.set_options(suggested=True, keys=None)
    session.set_k(session.suggested_k)
    session.apply()
    assert session.last_options.keys.keys == len(session.last_reduction.curves.frames)
    layered = Session(StandaloneHost(sample_clip.sub_range(0, 400)), Options().replace(
        layered=True, leading=("lhand", "rhand"), keys=6, space="channel"))
    layered.analyze(graph=True)
    layered.set_options(suggested=True, keys=None)
    layered.set_k(layered.suggested_k)
    layered.apply()
    written = layered.last_reduction.curves.labels.count("keypose")
    assert layered.last_options.keys.keys == written


def test_a_rotation_no_joint_measures_is_said(clip):
    """The analysis says which rotations it cannot see (a joint without a child or End Site),
    and nothing of a skeleton whose rotations all move a joint."""
    session = Session(FakeHost(clip), SUGGESTED)
    session.analyze()
    assert not any("turns no joint" in str(note) for note in session.notes)
    leaf = clip.node_names.index("LeftToe_end")  # the toe's End Site goes: the toe is a leaf
    keep = [n for i, n in enumerate(clip.node_names) if i != leaf]
    bare = Clip(keep, [keep.index(clip.node_names[p]) if p >= 0 else -1
                       for i, p in enumerate(clip.parents) if i != leaf],
                np.delete(clip.offsets, leaf, axis=0),
                [e for i, e in enumerate(clip.end_sites) if i != leaf], clip.channel_names,
                clip.channels, clip.fps, first_frame=clip.first_frame)
    session = Session(FakeHost(bare), SUGGESTED)
    session.analyze()
    assert ("the rotation of LeftToe turns no joint or End Site (none below it, or all at its "
            "point): the keys are not chosen for it and the errors do not measure it; give it "
            "an End Site or a child joint to measure it") in session.notes


def test_muted_turns_every_layer_back_on_and_raises_the_first_failure():
    """The hosts' reads under their own layers: a layer that cannot be turned back on does
    not leave the ones after it muted."""
    from sp_core.host import muted

    state = {"a": False, "b": False, "c": False}

    def mute(layer: str, on: bool) -> None:
        if layer == "a" and not on:
            raise RuntimeError("a is locked")
        state[layer] = on

    with pytest.raises(RuntimeError, match="a is locked"), muted(["a", "b", "c"], mute):
        assert state == {"a": True, "b": True, "c": True}
    assert state == {"a": True, "b": False, "c": False}

    def refuse(layer: str, on: bool) -> None:  # (muting "b" fails: "a" goes back on)
        if layer == "b":
            raise RuntimeError("no b")
        state[layer] = on

    state["a"] = False
    with pytest.raises(RuntimeError, match="no b"), muted(["a", "b", "c"], refuse):
        pass
    assert state == {"a": False, "b": False, "c": False}
