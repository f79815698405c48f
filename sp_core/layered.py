"""Keyposes and breakdowns: layered selections from a leading part (the thesis, chapter 4).

Animators block with *keyposes* (the extremes) and add *breakdowns* (how the body passes between
them). Two ways to recover that structure:

- :func:`layered_selection` (automatic, three layers, each with its own cost and threshold):

  1. segments: ``line-max`` on the **leading part** (the nodes that carry the action, e.g. the
     throwing hand), K by the threshold rule with a coarse accuracy;
  2. keyposes: inside each segment, ``line-sse`` on the leading part with the threshold rule
     normalised **per segment** (by the segment's own largest pose distance), so small but busy
     segments get keys and large smooth arcs do not get too many;
  3. breakdowns: between consecutive keyposes, ``curve-max`` on all chosen nodes (what curve
     in-betweens cannot reproduce).

  Keys of layers 1 and 2 are labelled by :func:`extremes`: keyposes where the leading part comes
  to rest, breakdowns where it passes through.

- :class:`TwoPassSpace` (interactive, the published tool's two passes made optimal): choose K
  keyposes on the leading part's selection space, then browse the breakdown space, solved
  globally with those keyposes pinned.

Every keyframe carries its label (``keypose`` / ``breakdown``) and the layer that chose it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sp_core.clip import Clip
from sp_core.curves import BREAKDOWN, KEYPOSE
from sp_core.errors import SelectionError
from sp_core.poses import node_names, pose_matrix
from sp_core.selection import SIGNIFICANCE, SelectionSpace

#: Default accuracies of the three layers (normalised errors, see
#: :meth:`SelectionSpace.threshold_choice`): coarse segments, then keyposes, then breakdowns.
SEGMENT_ACCURACY = 0.2
KEYPOSE_ACCURACY = 0.05
BREAKDOWN_ACCURACY = 0.05
#: Speed ratio below which a key of the line layers counts as an extreme (see :func:`extremes`).
EXTREME_RATIO = 0.25
#: A key of the line layers whose path goes straight on (cosine between incoming and outgoing
#: motion above this, i.e. a turn under about 25°) without slowing down is a breakdown.
TURN_COSINE = 0.9
#: Largest K solved inside one segment (threshold choices land far below it).
LAYER_MAX_KEYS = 64


@dataclass(frozen=True)
class LayeredSelection:
    """Labelled keyframes.

    Attributes
    ----------
    frames : (K,) int64
        Host frames, ascending (first and last of the range included).
    labels : list of str
        ``"keypose"`` or ``"breakdown"`` per frame.
    layers : list of str
        The layer that chose each frame: ``"segments"``, ``"keyposes"``, ``"breakdowns"``,
        ``"pins"`` (two-pass keyposes).
    """

    frames: np.ndarray
    labels: list[str]
    layers: list[str]

    @property
    def keyposes(self) -> np.ndarray:
        return self.frames[[label == KEYPOSE for label in self.labels]]

    @property
    def breakdowns(self) -> np.ndarray:
        return self.frames[[label == BREAKDOWN for label in self.labels]]

    def record(self) -> dict[str, list]:
        return {"frames": self.frames.tolist(), "labels": list(self.labels),
                "layers": list(self.layers)}


def _choose(space: SelectionSpace, accuracy: float, significance: float,
            count: int | None) -> np.ndarray:
    k = space.threshold_choice(accuracy, significance) if count is None else \
        int(min(max(count, space.min_keys), space.max_keys))
    return space.keyframes(k)


def _sub_space(poses: np.ndarray, first: int, start: int, end: int, cost: str, stride: int,
               compose: str = "max") -> SelectionSpace | None:
    """The selection space of host frames start..end (None when there is no frame between)."""
    if end - start < 2:
        return None
    rows = poses[start - first:end - first + 1]
    interior = (end - start - 1 + stride - 1) // stride
    return SelectionSpace(rows, first_frame=start, cost=cost, stride=stride, compose=compose,
                          max_keys=min(LAYER_MAX_KEYS, interior + 2))


def layered_selection(clip: Clip, leading: Sequence[str], nodes: Sequence[str] | None = None,
                      weights: Mapping[str, float] | None = None,
                      frame_range: tuple[int, int] | None = None, stride: int = 1,
                      segment_accuracy: float = SEGMENT_ACCURACY,
                      keypose_accuracy: float = KEYPOSE_ACCURACY,
                      breakdown_accuracy: float = BREAKDOWN_ACCURACY,
                      significance: float = SIGNIFICANCE, segments: int | None = None,
                      pose: str = "positions", compose: str = "sum",
                      keypose_cost: str = "line-sse",
                      extreme_ratio: float = EXTREME_RATIO) -> LayeredSelection:
    """Keyposes and breakdowns of a clip in three layers (see module docstring).

    Parameters
    ----------
    clip : Clip
    leading : sequence of str
        Nodes of the leading part (layers 1 and 2).
    nodes : sequence of str, optional
        Nodes that count for the breakdowns (default all).
    weights : mapping, optional
        Per-node weights (all layers).
    frame_range : (int, int), optional
        Inclusive host frames.
    stride : int
        Keys only on host frames divisible by ``stride``.
    segment_accuracy, keypose_accuracy, breakdown_accuracy, significance : float
        Threshold-rule parameters of the layers.
    segments : int, optional
        Explicit number of segment keys (instead of the threshold rule).
    pose : {"positions", "channels"}
        Pose space of every layer.
    compose : {"sum", "max"}
        Composition of the line layers (the paper's sum pins each key down; with max, many
        selections tie at the worst segment and the others may sit anywhere).
    keypose_cost : str
        Cost of the keypose layer.
    extreme_ratio : float
        A key of the line layers is a keypose when the leading part's speed there is below this
        fraction of its mean speed over the two neighbouring segments, or when its path turns
        sharply there (see :func:`extremes`).
    """
    leading = node_names(leading) or []
    if not leading:
        raise SelectionError("choose at least one node of the leading part")
    first = clip.first_frame if frame_range is None else frame_range[0]
    lead = pose_matrix(clip, pose, leading, weights, 0.0, frame_range)
    body = pose_matrix(clip, pose, nodes, weights, 0.0, frame_range)
    last = first + len(lead) - 1
    top = SelectionSpace(lead, first_frame=first, cost="line-max", stride=stride,
                         compose=compose, max_keys=min(LAYER_MAX_KEYS, len(lead)))
    chosen = {int(f): "segments" for f in _choose(top, segment_accuracy, significance, segments)}
    bounds = sorted(chosen)
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        space = _sub_space(lead, first, start, end, keypose_cost, stride, compose)
        if space is not None:
            for f in _choose(space, keypose_accuracy, significance, None)[1:-1]:
                chosen.setdefault(int(f), "keyposes")
    keys = sorted(chosen)
    labels = extremes(lead, first, keys, extreme_ratio, window=max(1, round(clip.fps / 12)))
    poses_at = sorted(f for f in keys if labels[f] == KEYPOSE)
    for start, end in zip(poses_at[:-1], poses_at[1:], strict=True):
        space = _sub_space(body, first, start, end, "curve-max", stride)
        if space is not None:
            for f in _choose(space, breakdown_accuracy, significance, None)[1:-1]:
                chosen.setdefault(int(f), "breakdowns")
                labels.setdefault(int(f), BREAKDOWN)
    frames = np.array(sorted(chosen), dtype=np.int64)
    assert frames[0] == first and frames[-1] == last
    return LayeredSelection(frames, [labels[int(f)] for f in frames],
                            [chosen[int(f)] for f in frames])


def extremes(poses: np.ndarray, first: int, keys: Sequence[int], ratio: float = EXTREME_RATIO,
             window: int = 2, turn: float = TURN_COSINE) -> dict[int, str]:
    """Label the keys chosen by the line layers: ``keypose`` at the extremes an animator blocks
    with — where the leading part comes (nearly) to rest or turns back — and ``breakdown`` where
    it passes through.

    At key k, with incoming motion p(k) - p(k - window) and outgoing motion p(k + window) - p(k):
    a keypose when the speed there, |p(k+1) - p(k-1)| / 2, is below ``ratio`` times the mean
    speed from the previous to the next key, or when the cosine between incoming and outgoing
    motion is below ``turn`` (the path bends by more than about 25 degrees); a breakdown when
    the motion passes straight through at speed. The first and last keys are keyposes.
    """
    labels = {int(keys[0]): KEYPOSE, int(keys[-1]): KEYPOSE}
    speed = np.linalg.norm(np.diff(poses, axis=0), axis=1)  # speed[r]: rows r -> r + 1
    last = len(poses) - 1
    for before, key, after in zip(keys[:-2], keys[1:-1], keys[2:], strict=True):
        r = key - first
        here = 0.5 * (speed[r - 1] + speed[r])
        around = speed[before - first:after - first].mean()
        incoming = poses[r] - poses[max(0, r - window)]
        outgoing = poses[min(last, r + window)] - poses[r]
        norms = np.linalg.norm(incoming) * np.linalg.norm(outgoing)
        cosine = float(incoming @ outgoing / norms) if norms > 0 else -1.0
        rests = here <= ratio * around
        labels[int(key)] = KEYPOSE if rests or cosine < turn else BREAKDOWN
    return labels


class TwoPassSpace:
    """Keyposes on the leading part, then breakdowns solved globally with the keyposes pinned.

    Parameters
    ----------
    clip : Clip
    leading : sequence of str
        Nodes of the leading part (the keypose space).
    nodes, weights, frame_range, stride, pose
        As in :func:`layered_selection`.
    keypose_cost : str
        Cost of the keypose space (default ``line-max``).
    max_keys : int, optional
        Most keyposes of the keypose space (default :class:`SelectionSpace`'s).
    holds : int, optional
        A keypose count the keypose space must offer (:class:`SelectionSpace`'s ``holds``).
    """

    def __init__(self, clip: Clip, leading: Sequence[str], nodes: Sequence[str] | None = None,
                 weights: Mapping[str, float] | None = None,
                 frame_range: tuple[int, int] | None = None, stride: int = 1,
                 pose: str = "positions", keypose_cost: str = "line-max",
                 max_keys: int | None = None, holds: int | None = None) -> None:
        leading = node_names(leading) or []
        if not leading:
            raise SelectionError("choose at least one node of the leading part")
        self.first = clip.first_frame if frame_range is None else frame_range[0]
        self.stride = stride
        lead = pose_matrix(clip, pose, leading, weights, 0.0, frame_range)
        self.body = pose_matrix(clip, pose, nodes, weights, 0.0, frame_range)
        self.keyposes = SelectionSpace(lead, first_frame=self.first, cost=keypose_cost,
                                       stride=stride, max_keys=max_keys, holds=holds)
        self._breakdowns: dict[int, SelectionSpace] = {}

    def breakdown_space(self, keyposes: int, max_keys: int | None = None) -> SelectionSpace:
        """The ``curve-max`` space of all chosen nodes with the ``keyposes`` keys pinned
        (cached per keypose count). Its ``max_span`` is the widest keypose gap: no breakdown
        segment can cross a keypose, so wider pairs are never needed."""
        if keyposes not in self._breakdowns:
            pinned = self.keyposes.keyframes(keyposes)
            gap = int(np.diff(pinned).max())
            wanted = max_keys or min(len(self.body), keyposes + LAYER_MAX_KEYS)
            self._breakdowns[keyposes] = SelectionSpace(
                self.body, first_frame=self.first, cost="curve-max", stride=self.stride,
                pins=pinned[1:-1].tolist(), max_span=gap, max_keys=wanted)
        return self._breakdowns[keyposes]

    def selection(self, keyposes: int, total: int | None = None,
                  accuracy: float = BREAKDOWN_ACCURACY) -> LayeredSelection:
        """``keyposes`` keyposes and, with ``total``, ``total - keyposes`` breakdowns (default:
        the breakdown space's threshold rule at ``accuracy``).

        Raises
        ------
        SelectionError
            ``total`` is more keys than the breakdown space offers.
        """
        pinned = set(self.keyposes.keyframes(keyposes).tolist())
        space = self.breakdown_space(keyposes)
        k = space.threshold_choice(accuracy) if total is None else total
        if not space.min_keys <= k <= space.max_keys:
            raise SelectionError(f"{k - keyposes} breakdowns with {keyposes} keyposes is out of "
                                 f"range: choose 0 to {space.max_keys - keyposes} breakdowns")
        frames = space.keyframes(int(k))
        labels = [KEYPOSE if int(f) in pinned else BREAKDOWN for f in frames]
        layers = ["pins" if int(f) in pinned else "breakdowns" for f in frames]
        return LayeredSelection(np.asarray(frames, dtype=np.int64), labels, layers)
