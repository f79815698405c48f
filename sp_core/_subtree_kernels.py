"""numba kernels of the corrective stage's greedy search (private; used by
:mod:`sp_core.corrective`): forward kinematics that recompute only a subtree, the candidates'
node errors and the joint steps' normal equations.

The corrective stage evaluates hundreds of candidate blocks per greedy step: rows of the
current motion in which one channel (or a few on one chain) changed. Only the nodes below the
topmost changed node move, so these kernels keep every node's world position and rotation for
the current motion and redo only that subtree, from its parent's kept transform. A node's step
is :func:`sp_core._fit_kernels.chain_kinematics`'s own (``_place``, ``_times``), so the
positions are the same to the bit. The other kernels sum in the order of the numpy
expressions they replace, for the same reason: the greedy search's choices follow the last
digits of its scores.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from sp_core._fit_kernels import _pairwise_sum, _place, _store, _times


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
        for i in range(n_nodes):
            partial = _place(i, channels[f], positions[f], world[f], offsets, parents,
                             translation, orients, oriented)[1]
            for e in range(rot_ptr[i], rot_ptr[i + 1]):
                partial = _times(partial, turns[f, rot_slot[rot_chan[e]]])
            _store(world[f, i], partial)
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
                partial = _place(i, channels[b], positions[b], world, offsets, parents,
                                 translation, orients, oriented)[1]
                for e in range(rot_ptr[i], rot_ptr[i + 1]):
                    c = rot_chan[e]
                    turn = kept_turns[f, rot_slot[c]]
                    for q in range(patch_ptr[b], patch_ptr[b + 1]):
                        if patch_chan[q] == c:
                            turn = patch_turn[q]
                    partial = _times(partial, turn)
                _store(world[i], partial)
    return positions


@njit(cache=True, parallel=True, nogil=True)
def row_errors(positions: np.ndarray, target: np.ndarray, frames: np.ndarray,
               current: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every node's distance to its target on rows of candidate motion, with each row's worst
    and mean, and the current motion's worst on the same frames.

    The same numbers as ``np.linalg.norm(positions - target[frames], axis=-1)`` and its
    ``max``/``mean`` along the nodes to the bit (the sums run in numpy's order): the greedy
    search compares candidates by them, so a last digit changes which keys it writes.

    Parameters
    ----------
    positions : (B, N, 3) float64
        Candidate rows' world positions (:func:`subtree_positions`).
    target : (F, N, 3) float64
    frames : (B,) int64
        Frame of each row.
    current : (F, N) float64
        The current motion's distances.

    Returns
    -------
    errors : (B, N) float64
    worst, mean : (B,) float64
    current_worst : (B,) float64
        ``current[frames].max(axis=1)``.
    """
    n_rows, n_nodes = positions.shape[0], positions.shape[1]
    errors = np.empty((n_rows, n_nodes))
    worst = np.empty(n_rows)
    mean = np.empty(n_rows)
    current_worst = np.empty(n_rows)
    for b in prange(n_rows):
        f = frames[b]
        top = -np.inf
        was = -np.inf
        for i in range(n_nodes):
            d0 = positions[b, i, 0] - target[f, i, 0]
            d1 = positions[b, i, 1] - target[f, i, 1]
            d2 = positions[b, i, 2] - target[f, i, 2]
            e = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
            errors[b, i] = e
            top = max(top, e)
            was = max(was, current[f, i])
        worst[b] = top
        mean[b] = _pairwise_sum(errors[b]) / n_nodes
        current_worst[b] = was
    return errors, worst, mean, current_worst


@njit(cache=True, nogil=True)
def joint_normals(jac: np.ndarray, miss: np.ndarray, columns: np.ndarray,
                  shaped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normal equations of the greedy step's joint corrections, one per hat width.

    Correction i of width w moves the positions by ``jac[:, :, columns[w, i]]`` times its
    hat ``shaped[w, i]``; the products are those numpy's ``einsum("fni,fnj->ij")`` and
    ``einsum("fni,fn->i")`` of the weighted columns form, summed in the same order (frames,
    then coordinates), so the steps equal theirs to the bit. Off a hat the column is zero,
    which adds nothing to a sum.

    Parameters
    ----------
    jac : (F, M, n_movers) float64
        Position change per unit of each channel on the window's frames.
    miss : (F, M) float64
        Position minus target on those frames.
    columns : (W, S) int64
        The channel (of ``jac``'s last axis) of each correction.
    shaped : (W, S, F) float64
        Each correction's hat on the window's frames (0 where it does not reach).

    Returns
    -------
    normals : (W, S, S) float64
    gradients : (W, S) float64
    """
    n_widths, size = columns.shape
    n_frames, n_coords = miss.shape
    normals = np.zeros((n_widths, size, size))
    gradients = np.zeros((n_widths, size))
    weighted = np.empty(size)
    for w in range(n_widths):
        for f in range(n_frames):
            reached = False
            for i in range(size):
                reached = reached or shaped[w, i, f] != 0.0
            if not reached:
                continue
            for n in range(n_coords):
                for i in range(size):
                    weighted[i] = jac[f, n, columns[w, i]] * shaped[w, i, f]
                for i in range(size):
                    for j in range(i, size):
                        normals[w, i, j] += weighted[i] * weighted[j]
                    gradients[w, i] += weighted[i] * miss[f, n]
        for i in range(size):
            for j in range(i):
                normals[w, i, j] = normals[w, j, i]
    return normals, gradients
