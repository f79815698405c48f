"""Hypothesis strategies for random skeletons, channel layouts and values."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from sp_core.clip import Clip

AXES = "XYZ"


@st.composite
def clips(draw, max_joints: int = 7, max_frames: int = 6, min_frames: int = 0) -> Clip:
    """A random clip: any hierarchy (possibly several roots), any channel subset and order."""
    n_joints = draw(st.integers(1, max_joints))
    parents = [-1]
    for i in range(1, n_joints):
        # mostly attached to an earlier joint; sometimes a second ROOT
        parents.append(draw(st.one_of(st.integers(0, i - 1), st.just(-1) if i > 1 else st.just(0))))
    names = [f"J{i}" for i in range(n_joints)]
    value = st.integers(-200_000, 200_000).map(lambda v: v / 1000.0)
    offsets = [[draw(value) for _ in range(3)] for _ in range(n_joints)]
    channel_names: list[str] = []
    for name in names:
        positions = draw(st.permutations(AXES).map(lambda p: list(p)))
        positions = positions[: draw(st.integers(0, 3))]
        rotations = draw(st.permutations(AXES).map(lambda p: list(p)))
        rotations = rotations[: draw(st.integers(0, 3))]
        attrs = [f"{a}position" for a in positions] + [f"{a}rotation" for a in rotations]
        if draw(st.booleans()):
            attrs = [f"{a}rotation" for a in rotations] + [f"{a}position" for a in positions]
        channel_names += [f"{name}.{a}" for a in attrs]
    # End Sites on some leaves, named as the reader names them
    leaves = [i for i in range(n_joints) if i not in parents]
    node_names, node_parents, node_offsets, end_sites = list(names), list(parents), list(offsets), \
        [False] * n_joints
    for leaf in leaves:
        if draw(st.booleans()):
            node_names.append(f"{names[leaf]}_end")
            node_parents.append(leaf)
            node_offsets.append([draw(value) for _ in range(3)])
            end_sites.append(True)
    n_frames = draw(st.integers(min_frames, max_frames))
    angle = st.integers(-720_000, 720_000).map(lambda v: v / 1000.0)
    rows = []
    for _ in range(n_frames):
        rows.append([draw(angle) if c.endswith("rotation") else draw(value) for c in channel_names])
    values = np.array(rows, dtype=float).reshape(n_frames, len(channel_names))
    fps = draw(st.sampled_from([24.0, 30.0, 60.0, 120.0]))
    return Clip(node_names, node_parents, np.array(node_offsets), end_sites, channel_names, values,
                fps=fps, frame_time=round(1.0 / fps, 7), first_frame=draw(st.integers(-10, 2000)))
