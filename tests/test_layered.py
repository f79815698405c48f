"""Keyposes and breakdowns: labelling, per-segment thresholds, the pinned breakdown space,
recovery of keyframed animation, and labels reaching files and hosts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from reference_costs import brute_force, full_table

from sp_core.clip import Clip
from sp_core.layered import BREAKDOWN, KEYPOSE, TwoPassSpace, extremes, layered_selection
from sp_core.reduction import reduce

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_recovery import keyframed_clip, precision_recall  # noqa: E402


def point_clip(path: np.ndarray, fps: float = 24.0) -> Clip:
    """A one-node clip whose root follows ``path`` (n_frames, 3)."""
    return Clip(["root", "root_end"], [-1, 0], [[0, 0, 0], [0, 1, 0]], [False, True],
                ["root.Xposition", "root.Yposition", "root.Zposition"], path, fps)


def test_extremes_label_rests_and_turns_as_keyposes_and_passes_as_breakdowns():
    t = np.linspace(0, 1, 21)[:, None]
    out = np.hstack([t * 10, 0 * t, 0 * t])  # 0 -> 10 along x
    back = np.hstack([10 - t[1:] * 10, t[1:] * 3, 0 * t[1:]])  # turns back
    straight = np.hstack([t[1:] * 10 - 10, 3 + 0 * t[1:], 0 * t[1:]])  # goes straight on
    poses = np.vstack([out, back, straight])
    keys = [0, 20, 30, 40, 50, 60]
    labels = extremes(poses, 0, keys, window=2)
    assert labels[20] == KEYPOSE  # turns back: an extreme
    assert labels[50] == BREAKDOWN  # the path goes straight through at speed
    eased = np.vstack([np.zeros((5, 3)), np.linspace([0, 0, 0], [5, 0, 0], 20)])
    assert extremes(eased, 0, [0, 4, 24])[4] == KEYPOSE  # at rest


def test_small_busy_segments_get_keys_too():
    # a large smooth sweep, then a small but busy zigzag (3 % of the sweep's size): thresholds
    # normalised per segment give the zigzag keys, and the smooth sweep only a few
    sweep = np.column_stack([np.linspace(0, 100, 60), np.sin(np.linspace(0, np.pi, 60)) * 30,
                             np.zeros(60)])
    t = np.arange(60)
    zigzag = np.column_stack([100 + t * 0.05, np.abs(((t / 5.0) % 2) - 1), np.zeros(60)])
    chosen = layered_selection(point_clip(np.vstack([sweep, zigzag])), ["root"])
    assert len([f for f in chosen.frames if 60 < f < 119]) >= 4
    assert len([f for f in chosen.frames if 0 < f < 59]) <= 2
    # the same zigzag alone, or after a sweep ten times larger, is keyed alike
    bigger = layered_selection(point_clip(np.vstack([sweep * [10, 10, 1], zigzag + [900, 0, 0]])),
                               ["root"])
    assert len([f for f in bigger.frames if 60 < f < 119]) >= 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pinned_breakdown_space_is_optimal_given_the_keyposes(seed):
    rng = np.random.default_rng(seed)
    path = np.cumsum(rng.normal(size=(13, 3)), axis=0)
    two_pass = TwoPassSpace(point_clip(path), ["root"])
    for keyposes in (3, 4):
        pinned = two_pass.keyposes.keyframes(keyposes)
        space = two_pass.breakdown_space(keyposes)
        table = full_table(two_pass.body - two_pass.body.mean(axis=0), "curve-max")
        np.fill_diagonal(table, 0.0)
        for k in range(space.min_keys, space.max_keys + 1):
            expected = brute_force(table, k, "max", pins=pinned[1:-1].tolist())
            assert space.error(k) == pytest.approx(expected, rel=1e-9, abs=1e-9)
        chosen = two_pass.selection(keyposes, keyposes + 2)
        assert set(pinned.tolist()) <= set(chosen.frames.tolist())
        assert chosen.labels.count(KEYPOSE) == keyposes


def test_recovery_of_keyframed_animation(sample_clip):
    skeleton = sample_clip.sub_range(0, 0)
    rng = np.random.default_rng(5)
    recalls, labelled = [], []
    for _ in range(2):
        clip, keys, is_keypose = keyframed_clip(skeleton, rng, 24.0, seconds=6.0)
        from sp_core.selection import SelectionSpace

        space = SelectionSpace.from_clip(clip, pose="channels", compose="sum",
                                         max_keys=len(keys) + 2)
        recalls.append(precision_recall(space.keyframes(len(keys)), keys, 2)[1])
        chosen = layered_selection(clip, clip.joint_names, pose="channels")
        near = np.abs(chosen.keyposes[:, None] - keys[is_keypose][None, :]) <= 2
        labelled.append(near.any(axis=0).mean())
    assert min(recalls) >= 0.9
    assert min(labelled) >= 0.8


def test_labels_reach_json_and_reduction(sample_path, tmp_path):
    from sp_core.cli import main

    out = tmp_path / "keys.json"
    assert main(["reduce", str(sample_path), "--layered", "--leading", "RightWrist,LeftWrist",
                 "--space", "channel", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert len(record["labels"]) == len(record["frames"])
    assert set(record["labels"]) == {KEYPOSE, BREAKDOWN}
    assert record["labels"][0] == record["labels"][-1] == KEYPOSE


def test_reduce_refuses_missing_labels(sample_clip):
    from sp_core.errors import ReductionError

    with pytest.raises(ReductionError, match="no label for keyframe 500"):
        reduce(sample_clip, [0, 500, 993], labels={0: KEYPOSE, 993: KEYPOSE})
    # (a typo was written as a plain key: the breakdown lost)
    with pytest.raises(ReductionError, match="^keyframe 500 is labelled 'breakdwon'; a label is "
                                             "'keypose' or 'breakdown'$"):
        reduce(sample_clip, [0, 500, 993], labels={0: KEYPOSE, 500: "breakdwon", 993: KEYPOSE})


def test_one_leading_node_may_be_named_without_a_list(sample_clip):
    """An audit: ``layered_selection(clip, "RightWrist")`` read the name letter by letter ("no
    node named 'R'"), where Blender's ``api.reduce(leading="RightWrist")`` took it whole."""
    short = sample_clip.sub_range(0, 300)
    named = layered_selection(short, "RightWrist", nodes="RightWrist")
    listed = layered_selection(short, ["RightWrist"], nodes=["RightWrist"])
    assert named.frames.tolist() == listed.frames.tolist() and named.labels == listed.labels
    assert TwoPassSpace(short, "RightWrist").keyposes.keyframes(5).tolist() == \
        TwoPassSpace(short, ["RightWrist"]).keyposes.keyframes(5).tolist()


@pytest.mark.parametrize("frames, keys", [(3, 3), (5, 3), (4, None)])
def test_a_layered_take_of_a_few_frames_gets_the_keyposes_asked_or_chosen(sample_clip, frames,
                                                                          keys):
    """The keypose space offered K up to half the frames: K = 3 asked on 3 or 5 frames, and
    the rules' 4 keyposes of the sample's first 4 frames (the hips leading), were "out of
    range"."""
    from sp_core.options import Options
    from sp_core.session import Session
    from sp_core.standalone import StandaloneHost

    clip = sample_clip.sub_range(0, frames - 1)
    options = Options().replace(layered=True, leading=("Hips",), keys=keys,
                                tolerance=None, space="channel")
    session = Session(StandaloneHost(clip), options)
    session.analyze()
    chosen = session.selection()
    assert len(chosen.keyposes) == (keys or frames)
