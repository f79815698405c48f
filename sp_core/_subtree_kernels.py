"""numba kernels of forward kinematics that recompute only a subtree (private; used by
:mod:`sp_core.corrective`).

The corrective stage evaluates hundreds of candidate blocks per greedy step: rows of the
current motion in which one channel (or a few on one chain) changed. Only the nodes below the
topmost changed node move, so these kernels keep every node's world position and rotation for
the current motion and redo only that subtree, from its parent's kept transform. The chain is
the one of :func:`sp_core._fit_kernels.chain_kinematics` with the same operations in the same
order, so the positions are the same to the bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from sp_core._fit_kernels import _matmul_into


@njit(cache=True, inline="always")
def _place(i: int, row: np.ndarray, position: np.ndarray, world: np.ndarray,
           offsets: np.ndarray, parents: np.ndarray, translation: np.ndarray,
           orients: np.ndarray, oriented: bool, t: np.ndarray, moved: np.ndarray,
           parent: np.ndarray, partial: np.ndarray) -> None:
    """Node i's position from its parent's (``position`` (N, 3) and ``world`` (N, 3, 3) of
    one frame, ``row`` its channels), and ``partial`` = parent rotation · orient (the node's
    rotation channels follow)."""
    p = parents[i]
    for a in range(3):
        c = translation[i, a]
        if oriented:
            moved[a] = 0.0 if c < 0 else row[c]
        else:
            t[a] = offsets[i, a] if c < 0 else row[c]
    if oriented:  # offset + orient · location
        for r in range(3):
            t[r] = offsets[i, r] + (orients[i, r, 0] * moved[0] + orients[i, r, 1]
                                    * moved[1] + orients[i, r, 2] * moved[2])
    if p >= 0:
        for r in range(3):
            position[i, r] = position[p, r] + (world[p, r, 0] * t[0] + world[p, r, 1] * t[1]
                                               + world[p, r, 2] * t[2])
            for k in range(3):
                parent[r, k] = world[p, r, k]
    else:
        for r in range(3):
            position[i, r] = t[r]
            for k in range(3):
                parent[r, k] = 1.0 if r == k else 0.0
    _matmul_into(parent, orients[i], partial)


@njit(cache=True, inline="always")
def _turn(partial: np.ndarray, turn: np.ndarray, temp: np.ndarray) -> None:
    """partial ← partial · turn."""
    _matmul_into(partial, turn, temp)
    for r in range(3):
        for k in range(3):
            partial[r, k] = temp[r, k]


@njit(cache=True, parallel=True, nogil=True)
def chain_world(channels: np.ndarray, turns: np.ndarray, offsets: np.ndarray,
                parents: np.ndarray, translation: np.ndarray, rot_ptr: np.ndarray,
                rot_chan: np.ndarray, rot_slot: np.ndarray, orients: np.ndarray,
                oriented: bool) -> tuple[np.ndarray, np.ndarray]:
    """World positions and rotations of every node, per frame.

    Parameters
    ----------
    channels : (F, C) float64
    turns : (F, R, 3, 3) float64
        Each rotation channel's single-axis matrix, channel c's at ``rot_slot[c]``.
    offsets, parents, translation, rot_ptr, rot_chan, rot_slot, orients, oriented
        As :func:`sp_core._fit_kernels.chain_kinematics` takes them.

    Returns
    -------
    positions : (F, N, 3) float64
    world : (F, N, 3, 3) float64
        Each node's world rotation (parent's · orient · its channels').
    """
    n_frames = channels.shape[0]
    n_nodes = offsets.shape[0]
    positions = np.empty((n_frames, n_nodes, 3))
    world = np.empty((n_frames, n_nodes, 3, 3))
    for f in prange(n_frames):
        parent = np.empty((3, 3))
        partial = np.empty((3, 3))
        temp = np.empty((3, 3))
        t = np.empty(3)
        moved = np.empty(3)
        for i in range(n_nodes):
            _place(i, channels[f], positions[f], world[f], offsets, parents, translation,
                   orients, oriented, t, moved, parent, partial)
            for e in range(rot_ptr[i], rot_ptr[i + 1]):
                c = rot_chan[e]
                _turn(partial, turns[f, rot_slot[c]], temp)
            world[f, i] = partial
    return positions, world


@njit(cache=True, parallel=True, nogil=True)
def subtree_positions(channels: np.ndarray, base: np.ndarray, roots: np.ndarray,
                      patch_ptr: np.ndarray, patch_chan: np.ndarray, patch_turn: np.ndarray,
                      kept_turns: np.ndarray, kept_positions: np.ndarray,
                      kept_world: np.ndarray, sub_ptr: np.ndarray, sub_nodes: np.ndarray,
                      offsets: np.ndarray, parents: np.ndarray, translation: np.ndarray,
                      rot_ptr: np.ndarray, rot_chan: np.ndarray, rot_slot: np.ndarray,
                      orients: np.ndarray, oriented: bool) -> np.ndarray:
    """World positions of rows of the current motion with a few channels changed.

    Parameters
    ----------
    channels : (B, C) float64
        The rows: row b is frame ``base[b]`` of the current motion, except channels that
        move only nodes below ``roots[b]``.
    base : (B,) int64
    roots : (B,) int64
        Topmost node whose channels differ on row b (-1: none, the kept positions are its).
    patch_ptr : (B + 1,) int64
    patch_chan : (P,) int64
    patch_turn : (P, 3, 3) float64
        Row b's changed rotation channels ``patch_chan[patch_ptr[b]:patch_ptr[b + 1]]`` and
        their matrices (the other channels' are ``kept_turns[base[b]]``).
    kept_turns : (F, R, 3, 3) float64
    kept_positions : (F, N, 3) float64
    kept_world : (F, N, 3, 3) float64
        The current motion's matrices, positions and world rotations (:func:`chain_world`).
    sub_ptr, sub_nodes : (N + 1,), (S,) int64
        CSR of every node's subtree (itself first, parents before children).
    offsets, parents, translation, rot_ptr, rot_chan, rot_slot, orients, oriented
        As :func:`chain_world` takes them.

    Returns
    -------
    positions : (B, N, 3) float64
    """
    n_rows = channels.shape[0]
    n_nodes = offsets.shape[0]
    positions = np.empty((n_rows, n_nodes, 3))
    chunks = min(n_rows, 64)  # scratch arrays once per chunk of rows, not per row
    for chunk in prange(chunks):
        world = np.empty((n_nodes, 3, 3))  # the subtree's, and its root's parent's
        parent = np.empty((3, 3))
        partial = np.empty((3, 3))
        temp = np.empty((3, 3))
        t = np.empty(3)
        moved = np.empty(3)
        for b in range(chunk, n_rows, chunks):
            f = base[b]
            positions[b] = kept_positions[f]
            root = roots[b]
            if root < 0:
                continue
            above = parents[root]
            if above >= 0:
                world[above] = kept_world[f, above]
            for s in range(sub_ptr[root], sub_ptr[root + 1]):
                i = sub_nodes[s]
                _place(i, channels[b], positions[b], world, offsets, parents, translation,
                       orients, oriented, t, moved, parent, partial)
                for e in range(rot_ptr[i], rot_ptr[i + 1]):
                    c = rot_chan[e]
                    turn = kept_turns[f, rot_slot[c]]
                    for q in range(patch_ptr[b], patch_ptr[b + 1]):
                        if patch_chan[q] == c:
                            turn = patch_turn[q]
                    _turn(partial, turn, temp)
                world[i] = partial
    return positions
