"""Pose spaces: every frame of a clip as one point, in which the costs measure distances.

Two spaces:

``positions`` (the paper's, default)
    The world positions of the chosen nodes (default: every node, End Sites included),
    flattened, each node's coordinates multiplied by its weight. Units: scene units.
``channels``
    The animated channels of the chosen nodes — what the animator's curves hold. A translation
    channel counts as is; a rotation channel is converted to a distance: radians × the node's
    *reach*, the largest rest-pose distance from the node to any node below it (what a rotation
    of the joint sweeps at the tip of its limb, to first order). A node with nothing below it
    uses its own bone length. Per-node weights multiply as in ``positions``. Units: scene units.

Optionally one more coordinate ``time_scale × frame_index`` (``time_scale`` in scene units per
frame) makes frames far apart in time count as different even when the poses repeat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sp_core.clip import Clip
from sp_core.errors import ClipError, SelectionError
from sp_core.options import POSE_SPACES


def error_unit(space: str, squared: bool) -> str:
    """The unit of a selection's errors over poses of ``space`` ("positions" or "channels"):
    the pose matrix's, squared for costs that sum squares (``Cost.squared``)."""
    return ("scene units" if space == "positions" else "channel units") + ("²" if squared else "")


def node_reach(clip: Clip) -> np.ndarray:
    """(n_nodes,) float64, scene units: the rest-pose reach of every node (see module notes)."""
    rest = clip.rest_positions()
    reach = np.zeros(clip.n_nodes)
    # children come after parents, so one backward sweep carries every descendant up the chain
    for i in range(clip.n_nodes - 1, -1, -1):
        p = clip.parents[i]
        while p >= 0:
            reach[p] = max(reach[p], float(np.linalg.norm(rest[i] - rest[p])))
            p = clip.parents[p]
    bone = np.linalg.norm(clip.offsets, axis=1)
    return np.where(reach > 0, reach, bone)


def node_names(nodes: str | Sequence[str] | None) -> list[str] | None:
    """``nodes`` as a list of names: one name is one node (a script's ``"RightWrist"`` was
    read letter by letter: "no node named 'R'")."""
    if nodes is None:
        return None
    return [nodes] if isinstance(nodes, str) else list(nodes)


def pose_matrix(
    clip: Clip,
    space: str = "positions",
    nodes: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    time_scale: float = 0.0,
    frame_range: tuple[int, int] | None = None,
    root_relative: bool = False,
) -> np.ndarray:
    """Every frame of the range as one row.

    Parameters
    ----------
    clip : Clip
    space : {"positions", "channels"}
    nodes : sequence of str, optional
        Nodes that count; default all (``positions``) or all with channels (``channels``).
    weights : mapping of str to float, optional
        Per-node weights (default 1); nodes not in ``nodes`` may not be weighted.
    time_scale : float, optional
        Scene units per frame of the extra time coordinate (0: none).
    frame_range : (int, int), optional
        First and last host frame, inclusive (default: the whole clip).
    root_relative : bool, optional
        ``positions`` only: measure positions from the first root, so similar poses look alike
        wherever the character is (used by the magic wand).

    Returns
    -------
    (n_frames, n_dims) float64, scene units

    Raises
    ------
    SelectionError
        Unknown space, node or weight; negative weights; non-finite poses.
    """
    if space not in POSE_SPACES:
        raise SelectionError(f"unknown pose space {space!r}; use one of {', '.join(POSE_SPACES)}")
    if frame_range is not None:
        clip = clip.sub_range(*frame_range)
    _refuse_non_finite(clip)
    nodes = node_names(nodes)
    if nodes is None:
        index = (list(range(clip.n_nodes)) if space == "positions"
                 else sorted(set(clip.channel_nodes.tolist())))
    else:
        index = [_node(clip, n) for n in nodes]
        if len(set(index)) != len(index):
            raise SelectionError("a node is listed twice in the analysis nodes")
    if not index:
        what = "nodes" if space == "positions" else "animated channels"
        raise SelectionError(f"clip {clip.name!r} has no {what} to analyse")
    w = np.ones(clip.n_nodes)
    for name, value in (weights or {}).items():
        i = _node(clip, name)
        if i not in index:
            raise SelectionError(f"node {name!r} has a weight but is not among the analysed nodes")
        if not (np.isfinite(value) and value >= 0):
            raise SelectionError(f"weight of node {name!r} must be a number >= 0, got {value!r}")
        w[i] = value

    if space == "positions":
        positions = clip.positions
        if root_relative:
            positions = positions - positions[:, :1, :]
        poses = (positions[:, index, :] * w[index, None]).reshape(clip.n_frames, -1)
    else:
        reach = node_reach(clip)
        rotation = clip.is_rotation_channel()
        columns = [c for c in range(clip.n_channels) if clip.channel_nodes[c] in set(index)]
        if not columns:
            raise SelectionError("the analysed nodes have no channels; pick animated nodes or "
                                 "use the positions pose space")
        nodes_of = clip.channel_nodes[columns]
        scale = w[nodes_of] * np.where(rotation[columns], np.radians(1.0) * reach[nodes_of], 1.0)
        poses = clip.channels[:, columns] * scale
    if time_scale:
        if not (np.isfinite(time_scale) and time_scale > 0):
            raise SelectionError(f"time scale must be a number >= 0, got {time_scale!r}")
        poses = np.hstack([poses, time_scale * np.arange(clip.n_frames, dtype=float)[:, None]])
    return np.ascontiguousarray(poses, dtype=np.float64)


def _node(clip: Clip, name: str) -> int:
    try:
        return clip.node_index(name)
    except ClipError as exc:  # the analysis' own error type, same message
        raise SelectionError(str(exc)) from None


def _refuse_non_finite(clip: Clip) -> None:
    """Name the first channel value that is NaN or infinite in the range (host applications
    let a NaN key through; the pose data would only say its frame), and the longest run of
    frames without one, which a frame range could analyse instead."""
    found = clip.not_a_number()
    if found is not None:
        said, bad_rows = found
        first, last = _longest_clean_run(bad_rows)
        runs = (f"set frame_range to frames that leave it out (the longest run without one: "
                f"frames {clip.first_frame + first} to {clip.first_frame + last})"
                if last > first else "")  # a range needs 2 frames
        raise SelectionError(f"{said}; fix that key" + (f", or {runs}" if runs else ""),
                             options=("frame_range",) if runs else ())


def _longest_clean_run(bad_rows: np.ndarray) -> tuple[int, int]:
    """First and last row of the longest run of False in ``bad_rows`` (frames,); the earliest
    of equal ones; (0, -1) if every row is bad."""
    edges = np.flatnonzero(np.diff(np.concatenate(([1], bad_rows.astype(np.int8), [1]))))
    starts, stops = edges[::2], edges[1::2]  # each clean run is [start, stop)
    if not len(starts):
        return 0, -1
    longest = int(np.argmax(stops - starts))
    return int(starts[longest]), int(stops[longest]) - 1
