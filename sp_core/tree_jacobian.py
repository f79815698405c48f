"""Gauss–Newton blocks of the world-space fit from the skeleton's tree structure.

A channel of node j moves only j and its descendants, so the position Jacobian of one frame,
(3 n_nodes × C), is mostly zeros (81 % on the sample skeleton). Instead of building it densely
and multiplying it out, this module keeps per channel only its world direction (the axis a
rotation turns about, or the axis a translation moves along) and its pivot node; the kernel in
:mod:`sp_core._fit_kernels` forms each nonzero of J_fᵀ J_f and J_fᵀ r_f in closed form from
weighted moments of the subtree both channels move, summed up the tree once per frame: O(n_nodes
+ pairs of channels on one chain) per frame instead of O(n_nodes C²) (on the sample: 1,116 pairs
per frame, where summing node by node took 7,434 products).

The result is the same block-tridiagonal normal system as the dense product (to rounding; the
tests compare both on real mocap), laid out like :func:`sp_core.fitting.refine_world` expects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sp_core.clip import AXES, Clip


@dataclass(frozen=True)
class TreeLayout:
    """Which free channels move which node, flattened for the kernel.

    Attributes
    ----------
    columns : (Cf,) int64
        The free channels (columns of the clip's channels), in unknown order.
    rotation : (Cf,) bool
        True for rotation channels (turn about an axis through the pivot), False for
        translations (move along an axis).
    pivot : (Cf,) int64
        The node that owns each channel.
    parents : (n_nodes,) int64
        The clip's parents (parents before children).
    pair_a, pair_b : (P,) int64
        Every pair a ≤ b of free channels that move a common node: the nonzeros of the upper
        triangle of J_fᵀ J_f.
    pair_hi : (P,) int64
        Each pair's channel whose owner is the other's or one of its ancestors (the nodes both
        move are the other's owner's subtree).
    pair_slot : (P,) int64
        Each pair's slot: its (``pivot[pair_hi]``, other channel) combination, which the
        kernel forms one vector for per frame.
    slot_top, slot_lo : (L,) int64
        Every slot's ancestor owner (a node) and deeper channel.
    slot : (C_all,) int64
        Index of every channel of the clip among ``columns``, -1 for fixed channels.

    The skeleton itself, as the chain kernels take it, is the clip's
    (:meth:`~sp_core.clip.Clip.chain`).
    """

    columns: np.ndarray
    rotation: np.ndarray
    pivot: np.ndarray
    parents: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    pair_hi: np.ndarray
    pair_slot: np.ndarray
    slot_top: np.ndarray
    slot_lo: np.ndarray
    slot: np.ndarray

    @classmethod
    def of(cls, clip: Clip, columns: np.ndarray) -> TreeLayout:
        """The layout for the free ``columns`` (C,) int of ``clip``."""
        columns = np.asarray(columns, dtype=np.int64)
        position = {int(c): t for t, c in enumerate(columns)}
        owned: list[list[int]] = [[] for _ in range(clip.n_nodes)]
        for c in columns:
            owned[int(clip.channel_nodes[c])].append(position[int(c)])
        above: list[list[int]] = []
        for n in range(clip.n_nodes):
            p = int(clip.parents[n])
            above.append(sorted((above[p] if p >= 0 else []) + owned[n]))
        pairs = set()
        for chans in above:
            for i, a in enumerate(chans):
                for b in chans[i:]:
                    pairs.add((a, b))
        ordered = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        pivot = np.asarray(clip.channel_nodes, dtype=np.int64)[columns]
        lineage: list[set[int]] = []  # every node with its ancestors
        for n in range(clip.n_nodes):
            p = int(clip.parents[n])
            lineage.append({n} | (lineage[p] if p >= 0 else set()))
        # a's owner is b's or above it (else b's is above a's)
        above_b = np.array([int(pivot[a]) in lineage[int(pivot[b])] for a, b in ordered],
                           dtype=bool)
        pair_hi = np.where(above_b, ordered[:, 0], ordered[:, 1])
        pair_lo = np.where(above_b, ordered[:, 1], ordered[:, 0])
        slots, pair_slot = np.unique(np.stack([pivot[pair_hi], pair_lo], axis=1).reshape(-1, 2),
                                     axis=0, return_inverse=True)
        slots = slots.astype(np.int64).reshape(-1, 2)
        slot = np.full(clip.n_channels, -1, dtype=np.int64)
        slot[columns] = np.arange(len(columns))
        return cls(
            columns=columns,
            rotation=np.asarray(clip.is_rotation_channel(), dtype=bool)[columns],
            pivot=pivot,
            parents=np.asarray(clip.parents, dtype=np.int64),
            pair_a=np.ascontiguousarray(ordered[:, 0]),
            pair_b=np.ascontiguousarray(ordered[:, 1]),
            pair_hi=pair_hi,
            pair_slot=np.ascontiguousarray(pair_slot.reshape(-1), dtype=np.int64),
            slot_top=np.ascontiguousarray(slots[:, 0]),
            slot_lo=np.ascontiguousarray(slots[:, 1]),
            slot=slot)


def channel_axes(clip: Clip, channels: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Each channel's world direction, per frame.

    Parameters
    ----------
    clip : Clip
    channels : (F, C_all) float64
        Values in the clip's channel layout.
    columns : (Cf,) int
        The channels whose directions are wanted.

    Returns
    -------
    axes : (F, Cf, 3) float64
        Translations: the world axis the channel moves along (scene units per unit): the
        parent's, or the node's oriented one for ``translation_space="oriented"``.
        Rotations: the world axis the channel turns about (the parent's world rotation, the
        orient, then the Euler rotations listed before it), scaled by π/180 so that
        ``axis × (p_n − p_pivot)`` is scene units per degree.
    """
    channels = np.asarray(channels, dtype=np.float64)
    n_frames = channels.shape[0]
    turns = clip.axis_rotations(channels)
    wanted = {int(c): t for t, c in enumerate(np.asarray(columns, dtype=np.int64))}
    axes = np.zeros((n_frames, len(wanted), 3))
    identity = np.broadcast_to(np.eye(3), (n_frames, 3, 3))
    world: list[np.ndarray] = []
    translation = clip._translation_index
    rotation_index = clip._rotation_index
    for i in range(clip.n_nodes):
        p = int(clip.parents[i])
        parent_r = identity if p < 0 else world[p]
        partial = parent_r if clip.orients is None else np.matmul(parent_r, clip.orients[i])
        moving = partial if clip.translation_space == "oriented" else parent_r
        for axis in range(3):
            c = int(translation[i, axis])
            if c in wanted:
                axes[:, wanted[c]] = moving[:, :, axis]
        order = clip.rotation_orders[i]
        for k, c in enumerate(rotation_index[i]):
            if int(c) in wanted:
                axes[:, wanted[int(c)]] = partial[:, :, AXES.index(order[k])] * (np.pi / 180.0)
            partial = np.matmul(partial, turns[:, clip.rotation_slot[c]])
        world.append(partial)
    return axes


def pose(clip: Clip, layout: TreeLayout, channels: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray]:
    """World positions and the free channels' world directions in one pass (numba).

    Parameters
    ----------
    clip : Clip
    layout : TreeLayout
    channels : (F, C_all) float64

    Returns
    -------
    positions : (F, n_nodes, 3) float64
        Those of :meth:`sp_core.clip.Clip.forward_kinematics` (the same kernel).
    axes : (F, Cf, 3) float64
        As :func:`channel_axes`.
    """
    channels = np.ascontiguousarray(channels, dtype=np.float64)
    return clip.chain_pass(channels, layout.slot, len(layout.columns))


def world_normal_blocks(layout: TreeLayout, starts: np.ndarray, w_out: np.ndarray,
                        w_in: np.ndarray, positions: np.ndarray, miss: np.ndarray,
                        axes: np.ndarray, q: int, node_weight: np.ndarray | None = None,
                        out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss–Newton normal equations for the slopes of the free channels in world space.

    Parameters
    ----------
    layout : TreeLayout
    starts : (K - 1,) int
        First row of every segment (segment k runs to the next start; the last to the end).
    w_out, w_in : (F, C_all) float64
        Basis weights of each row's segment slopes (see :class:`sp_core.fitting._Basis`).
    positions, miss : (F, n_nodes, 3) float64
        The current positions and their errors (minus the target), scene units.
    axes : (F, Cf, 3) float64
        The free channels' world directions (:func:`pose` or :func:`channel_axes`).
    q : int
        1 (one slope per key) or 2 (in, out).
    node_weight : (F, n_nodes) float64, optional
        Weight of every node's squared error on every frame (default: all 1).
    out : (diagonal, upper, rhs), optional
        Arrays of the returned shapes (C-contiguous float64) to overwrite and return, e.g.
        the previous iteration's: on 5,000 frames with broken tangents the blocks take 80 MB,
        and fresh memory costs about a quarter of the kernel's time to map and zero.

    Returns
    -------
    diagonal : (K, q Cf, q Cf) float64
    upper : (K - 1, q Cf, q Cf) float64
    rhs : (K, q Cf) float64
        Minus the gradient. A key's unknowns are ordered in slopes, then out slopes.
    """
    from sp_core._fit_kernels import segment_normal_blocks

    columns = layout.columns
    bounds = np.append(np.asarray(starts, dtype=np.int64), positions.shape[0])
    if node_weight is None:
        node_weight = np.ones(positions.shape[:2])
    n_keys, size = len(bounds), q * len(columns)
    if out is None:
        out = (np.empty((n_keys, size, size)), np.empty((n_keys - 1, size, size)),
               np.empty((n_keys, size)))
    diagonal, upper, rhs = out
    if diagonal.shape != (n_keys, size, size) or upper.shape != (n_keys - 1, size, size) \
            or rhs.shape != (n_keys, size) \
            or not all(a.flags.c_contiguous and a.dtype == np.float64 for a in out):
        raise ValueError("out must be C-contiguous float64 arrays of the blocks' shapes")
    w_out = np.ascontiguousarray(w_out[:, columns])
    w_in = np.ascontiguousarray(w_in[:, columns])
    # every mode but weighted tangents gives all channels the same handles
    shared = bool(len(columns) and np.all(w_out == w_out[:, :1])
                  and np.all(w_in == w_in[:, :1]))
    return segment_normal_blocks(
        np.ascontiguousarray(positions), np.ascontiguousarray(miss),
        np.ascontiguousarray(axes), layout.rotation, layout.pivot, layout.parents,
        layout.pair_a, layout.pair_b, layout.pair_hi, layout.pair_slot, layout.slot_top,
        layout.slot_lo, w_out, w_in, bounds, q,
        np.ascontiguousarray(node_weight, dtype=np.float64), shared, diagonal, upper, rhs)


def solve_key_blocks(diagonal: np.ndarray, coupling: np.ndarray, rhs: np.ndarray, q: int,
                     shift: np.ndarray | None = None) -> np.ndarray:
    """Solve the world fit's block-tridiagonal system, using where its off-diagonal is zero.

    A segment couples only its first key's out slopes with its second key's in slopes, so
    the block A[k, k + 1] is zero except for its (out, in) quadrant ``coupling[k]``. Block
    elimination then needs only C + 1 right-hand sides per key instead of q C + 1, and the
    Schur update touches only the next key's (in, in) quadrant: about a third of the work of
    :func:`sp_core.blocks.solve_block_tridiagonal` for broken tangents (q = 2). Pivots are
    positive definite, so Cholesky factors them, and the Schur update is formed from
    triangular solves with the factor (Zᵀ Z, Z = L⁻¹ C) instead of solves with the pivot:
    half the flops for q = 2, a sixth less time for q = 1 at 72 channels.

    Parameters
    ----------
    diagonal : (K, q C, q C) float64
        Diagonal blocks; a key's unknowns are in slopes, then out slopes.
    coupling : (K - 1, C, C) float64
        A[k, k + 1][out slots of key k, in slots of key k + 1].
    rhs : (K, q C) float64
    q : int
    shift : (K, q C) float64, optional
        Added to the diagonal of the diagonal blocks (Levenberg–Marquardt damping) without
        copying them all.

    Returns
    -------
    x : (K, q C) float64
    """
    # LAPACK's routines called directly: what cho_factor and solve_triangular call, without
    # their checks and lookups, which cost more than a factor of this size (every key, every
    # iteration)
    from scipy.linalg.lapack import dpotrf, dtrtrs

    n_keys, size = rhs.shape
    n = size // q
    o = slice((q - 1) * n, q * n)
    i = slice(0, n)
    diagonal_of = np.arange(size)
    # Forward: with the pivot P_k = L_k L_kᵀ, Z_k = L_k⁻¹ C_k and z_k = L_k⁻¹ r_k, the next
    # pivot loses C_kᵀ P_k⁻¹ C_k = Z_kᵀ Z_k and its right-hand side C_kᵀ P_k⁻¹ r_k = Z_kᵀ z_k.
    # C_k is zero outside the out rows, which come last, so Z_k is too and only L_k's
    # (out, out) corner is solved with: half the work of solving with P_k itself.
    lowers: list[np.ndarray] = []
    couplings: list[np.ndarray] = []
    partial: list[np.ndarray] = []
    schur: np.ndarray | None = None
    carried: np.ndarray | None = None
    for k in range(n_keys):
        pivot = diagonal[k].copy()
        if shift is not None:
            pivot[diagonal_of, diagonal_of] += shift[k]
        right = rhs[k].copy()
        if schur is not None and carried is not None:
            pivot[i, i] -= schur
            right[i] -= carried
        lower, info = dpotrf(pivot, lower=1, overwrite_a=1, clean=0)
        if info > 0:
            raise np.linalg.LinAlgError(f"{info}-th leading minor of the array is not "
                                        "positive definite")
        z = dtrtrs(lower, right, lower=1)[0]
        lowers.append(lower)
        partial.append(z)
        if k < n_keys - 1:
            # (the factor is in LAPACK's column order: its corner goes as it is, not through
            # a C-ordered copy that would be copied back)
            zc = dtrtrs(lower[o, o], coupling[k], lower=1)[0]
            couplings.append(zc)
            schur = zc.T @ zc
            carried = zc.T @ z[o]
    # Backward: x_k = L_k⁻ᵀ (z_k − Z_k x_{k+1}[in])
    x = np.empty_like(rhs)
    x[-1] = dtrtrs(lowers[-1], partial[-1], lower=1, trans=1)[0]
    for k in range(n_keys - 2, -1, -1):
        z = partial[k].copy()
        z[o] -= couplings[k] @ x[k + 1][i]
        x[k] = dtrtrs(lowers[k], z, lower=1, trans=1)[0]
    return x


def solve_segment_blocks(diagonal: np.ndarray, coupling: np.ndarray, rhs: np.ndarray,
                         shift: np.ndarray | None = None) -> np.ndarray:
    """Solve the world fit's system for broken tangents (q = 2) one segment at a time.

    Without the smooth term nothing ties a key's in slopes to its out slopes: a segment's
    rows depend on its first key's out slopes and its second key's in slopes only, and the
    anchor, ridge and damping act on single slopes. The (in, out) quadrants of the key blocks
    are then zero and the system falls apart into one 2 C × 2 C system per segment (plus the
    first key's in slopes and the last key's out slopes, C × C each), solved independently
    by Cholesky (numba, in parallel): about a third of the time of
    :func:`solve_key_blocks`, which solves the same system to rounding.

    Parameters
    ----------
    diagonal : (K, 2 C, 2 C) float64
        Diagonal blocks; a key's unknowns are in slopes, then out slopes. Their (in, out)
        quadrants must be zero (they are not read).
    coupling : (K - 1, C, C) float64
        A[k, k + 1][out slots of key k, in slots of key k + 1].
    rhs : (K, 2 C) float64
    shift : (K, 2 C) float64, optional
        Added to the diagonal (Levenberg–Marquardt damping).

    Returns
    -------
    x : (K, 2 C) float64
    """
    from sp_core._fit_kernels import segment_solve

    rhs = np.ascontiguousarray(rhs, dtype=np.float64)
    return segment_solve(np.ascontiguousarray(diagonal, dtype=np.float64),
                         np.ascontiguousarray(coupling, dtype=np.float64), rhs,
                         np.zeros_like(rhs) if shift is None
                         else np.ascontiguousarray(shift, dtype=np.float64))
