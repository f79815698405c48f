"""An independent forward-kinematics reference for the tests: 4x4 matrices built by hand.

Nothing from sp_core's kinematics is used: elementary rotation matrices are written out with
cos/sin, multiplied in the listed (intrinsic) order, and chained as homogeneous transforms.
"""

from __future__ import annotations

import numpy as np


def axis_matrix(axis: str, degrees: float) -> np.ndarray:
    c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
    m = np.eye(4)
    if axis == "X":
        m[1:3, 1:3] = [[c, -s], [s, c]]
    elif axis == "Y":
        m[0, 0], m[0, 2], m[2, 0], m[2, 2] = c, s, -s, c
    else:
        m[0:2, 0:2] = [[c, -s], [s, c]]
    return m


def world_positions(node_names, parents, offsets, channel_names, values) -> np.ndarray:
    """(n_frames, n_nodes, 3) by chaining per-node 4x4 transforms frame by frame."""
    n_frames = values.shape[0]
    out = np.zeros((n_frames, len(node_names), 3))
    for f in range(n_frames):
        world = []
        for i, name in enumerate(node_names):
            translate = np.array(offsets[i], dtype=float)
            rotate = np.eye(4)
            for c, full in enumerate(channel_names):
                node, _, attr = full.rpartition(".")
                if node != name:
                    continue
                axis = "XYZ".index(attr[0])
                if attr.endswith("position"):
                    translate[axis] = values[f, c]
                else:
                    rotate = rotate @ axis_matrix(attr[0], values[f, c])
            local = np.eye(4)
            local[:3, 3] = translate
            local = local @ rotate
            m = world[parents[i]] @ local if parents[i] >= 0 else local
            world.append(m)
            out[f, i] = m[:3, 3]
    return out
