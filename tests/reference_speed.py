"""Plain references of the corrective keys' speed limits (sp_core.speed_limits): joint angles
by scipy's rotations, the capture's limit by a sliding window."""

from __future__ import annotations

import numpy as np


def joint_angles(clip, channels):
    """(F - 1, N) degrees each node's local rotation turns from a frame to the next (nodes
    without rotation channels: 0), composed here with scipy from the channels' axes."""
    from scipy.spatial.transform import Rotation

    out = np.zeros((len(channels) - 1, clip.n_nodes))
    for node, columns in enumerate(clip._rotation_index):
        if not len(columns):
            continue
        turn = Rotation.identity(len(channels))
        for c in columns:
            axis = clip.channel_names[c].split(".")[-1][0].lower()
            turn = turn * Rotation.from_euler(axis, channels[:, c, None], degrees=True)
        out[:, node] = np.degrees((turn[:-1].inv() * turn[1:]).magnitude())
    return out


def capture_limits(steps):
    """The documented limit on steps (F - 1, n): the capture's fastest anywhere, or twice its
    fastest within two frames."""
    padded = np.concatenate([np.repeat(steps[:1], 2, axis=0), steps,
                             np.repeat(steps[-1:], 2, axis=0)])
    local = np.lib.stride_tricks.sliding_window_view(padded, 5, axis=0).max(axis=-1)
    return np.maximum(2.0 * local, steps.max(axis=0, initial=0.0))
