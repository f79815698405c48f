"""numba kernels of the world-space fit (private; use :mod:`sp_core.tree_jacobian`) and of the
corrective stage's greedy search (used by :mod:`sp_core.corrective`).

Imported on the first forward kinematics (:meth:`sp_core.clip.Clip.forward_kinematics`, the
chain kernel), a world fit, or a channel fit of large arrays (:data:`sp_core.curves.KERNEL_SIZE`);
reading a file loads numba only when its positions are asked for.

The two share their forward kinematics' steps (``_place``, ``_times``) and sums
(``_pairwise_sum``), so they live in one file: numba's cache of a kernel follows the kernel's
own source file only, and a kernel compiled with a helper of another file kept running the old
helper after that file changed (numba's documented caching limitation: changes in functions
of other files are not seen), e.g. after a ``git pull`` that changed only the helpers' file.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from sp_core.threads import TakingTurns


@njit(cache=True, nogil=True)
def _segment(s: int, positions: np.ndarray, miss: np.ndarray, axes: np.ndarray,
             rotation: np.ndarray, pivot: np.ndarray, parents: np.ndarray, pair_a: np.ndarray,
             pair_b: np.ndarray, pair_hi: np.ndarray, pair_slot: np.ndarray,
             slot_top: np.ndarray, slot_lo: np.ndarray, w_out: np.ndarray, w_in: np.ndarray,
             bounds: np.ndarray, q: int, node_weight: np.ndarray, shared: bool,
             diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray) -> None:
    """Add segment s's rows to the blocks of its keys s (out slots) and s + 1 (in slots).

    A channel owned by node j moves j's subtree: a rotation about axis a through p_j moves
    node m by a × (p_m − p_j), a translation along t by t. Two channels move a common node
    only if one owner A is an ancestor of (or is) the other's, B; the nodes they both move
    are B's subtree. So every entry of J_fᵀ H_f J_f is a closed form in the weighted moments
    of B's subtree about p_B (Σ h, Σ h e, Σ h e eᵀ with e = p_m − p_B) and d = p_B − p_A:
    for two rotations (a over A, b over B), Σ h (a × (e + d)) · (b × e)
    = (a · b)(tr M2 + d · M1) − aᵀ M2 b − (a · M1)(d · b). The moments are summed up the tree
    once per row, so a row costs O(nodes + pairs) instead of O(Σ_n |channels above n|²), and
    the moments about each subtree's own root keep the sums free of cancellation far from
    the origin. Every such entry is linear in the upper channel's axis a: a · w, with w
    depending only on A, b and the kind of a (rotation or translation); w is formed once per
    (A, b) slot and row, and each pair costs one dot product. The gradient is
    a · Σ h e × r (rotations) or t · Σ h r.
    """
    n_free = axes.shape[1]
    n_nodes = positions.shape[1]
    n_pairs = len(pair_a)
    o = (q - 1) * n_free
    m0 = np.empty(n_nodes)
    m1 = np.empty((n_nodes, 3))
    m2 = np.empty((n_nodes, 3, 3))
    r0 = np.empty((n_nodes, 3))
    r1 = np.empty((n_nodes, 3))
    trace = np.empty(n_nodes)
    turned = np.empty((n_free, 3))  # M2 of the owner's subtree times the channel's axis
    n_slots = len(slot_lo)
    # per (ancestor owner, deeper channel): the vector a pair's value is the ancestor
    # channel's axis dotted with, for a rotation (0) or a translation (1) above
    lever = np.empty((n_slots, 2, 3))
    grad = np.empty(n_free)
    acc = np.zeros((4, n_pairs))  # (out, out), (in, in), (out a, in b), (out b, in a) sums
    d = np.empty(3)
    for f in range(bounds[s], bounds[s + 1]):
        for n in range(n_nodes):
            h = node_weight[f, n]
            m0[n] = h
            for k in range(3):
                m1[n, k] = 0.0
                r0[n, k] = h * miss[f, n, k]
                r1[n, k] = 0.0
                for k2 in range(3):
                    m2[n, k, k2] = 0.0
        for n in range(n_nodes - 1, -1, -1):  # children (later in the order) are complete
            p = parents[n]
            if p < 0:
                continue
            for k in range(3):
                d[k] = positions[f, n, k] - positions[f, p, k]
            for k in range(3):
                for k2 in range(3):
                    m2[p, k, k2] += m2[n, k, k2] + m1[n, k] * d[k2] + d[k] * m1[n, k2] \
                        + m0[n] * d[k] * d[k2]
            for k in range(3):
                m1[p, k] += m1[n, k] + m0[n] * d[k]
                r0[p, k] += r0[n, k]
            r1[p, 0] += r1[n, 0] + d[1] * r0[n, 2] - d[2] * r0[n, 1]
            r1[p, 1] += r1[n, 1] + d[2] * r0[n, 0] - d[0] * r0[n, 2]
            r1[p, 2] += r1[n, 2] + d[0] * r0[n, 1] - d[1] * r0[n, 0]
            m0[p] += m0[n]
        for n in range(n_nodes):
            trace[n] = m2[n, 0, 0] + m2[n, 1, 1] + m2[n, 2, 2]
        for c in range(n_free):
            j = pivot[c]
            ax = axes[f, c, 0]
            ay = axes[f, c, 1]
            az = axes[f, c, 2]
            if rotation[c]:
                grad[c] = ax * r1[j, 0] + ay * r1[j, 1] + az * r1[j, 2]
                for k in range(3):
                    turned[c, k] = m2[j, k, 0] * ax + m2[j, k, 1] * ay + m2[j, k, 2] * az
            else:
                grad[c] = ax * r0[j, 0] + ay * r0[j, 1] + az * r0[j, 2]
        for c in range(n_free):
            rhs[s, o + c] -= w_out[f, c] * grad[c]
            rhs[s + 1, c] -= w_in[f, c] * grad[c]
        if shared:  # (the same products as per channel below)
            out_out = w_out[f, 0] * w_out[f, 0]
            in_in = w_in[f, 0] * w_in[f, 0]
            out_in = w_out[f, 0] * w_in[f, 0]
        for k in range(n_slots):
            lo = slot_lo[k]
            big = pivot[lo]
            top = slot_top[k]
            dx = positions[f, big, 0] - positions[f, top, 0]
            dy = positions[f, big, 1] - positions[f, top, 1]
            dz = positions[f, big, 2] - positions[f, top, 2]
            lx = axes[f, lo, 0]
            ly = axes[f, lo, 1]
            lz = axes[f, lo, 2]
            sx = m1[big, 0]
            sy = m1[big, 1]
            sz = m1[big, 2]
            if rotation[lo]:
                # a rotation above: (a · b)(tr M2 + d · M1) − aᵀ M2 b − (a · M1)(d · b)
                spread = trace[big] + dx * sx + dy * sy + dz * sz
                along = dx * lx + dy * ly + dz * lz
                lever[k, 0, 0] = spread * lx - turned[lo, 0] - sx * along
                lever[k, 0, 1] = spread * ly - turned[lo, 1] - sy * along
                lever[k, 0, 2] = spread * lz - turned[lo, 2] - sz * along
                # a translation t above: t · (b × M1)
                lever[k, 1, 0] = ly * sz - lz * sy
                lever[k, 1, 1] = lz * sx - lx * sz
                lever[k, 1, 2] = lx * sy - ly * sx
            else:
                # a rotation a above: t · (a × (M1 + M0 d)) = a · ((M1 + M0 d) × t)
                vx = sx + m0[big] * dx
                vy = sy + m0[big] * dy
                vz = sz + m0[big] * dz
                lever[k, 0, 0] = vy * lz - vz * ly
                lever[k, 0, 1] = vz * lx - vx * lz
                lever[k, 0, 2] = vx * ly - vy * lx
                # a translation above: M0 (t_a · t)
                lever[k, 1, 0] = m0[big] * lx
                lever[k, 1, 1] = m0[big] * ly
                lever[k, 1, 2] = m0[big] * lz
        for e in range(n_pairs):
            a = pair_a[e]
            b = pair_b[e]
            hi = pair_hi[e]
            k = pair_slot[e]
            w = 0 if rotation[hi] else 1
            value = axes[f, hi, 0] * lever[k, w, 0] + axes[f, hi, 1] * lever[k, w, 1] \
                + axes[f, hi, 2] * lever[k, w, 2]
            if shared:
                acc[0, e] += out_out * value
                acc[1, e] += in_in * value
                acc[2, e] += out_in * value
            else:
                oa = w_out[f, a]
                ob = w_out[f, b]
                ia = w_in[f, a]
                ib = w_in[f, b]
                acc[0, e] += oa * ob * value
                acc[1, e] += ia * ib * value
                acc[2, e] += oa * ib * value
                acc[3, e] += ob * ia * value
    for e in range(n_pairs):
        a = pair_a[e]
        b = pair_b[e]
        diagonal[s, o + a, o + b] += acc[0, e]
        diagonal[s + 1, a, b] += acc[1, e]
        upper[s, o + a, b] += acc[2, e]
        if a != b:
            upper[s, o + b, a] += acc[2, e] if shared else acc[3, e]


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def segment_normal_blocks(positions: np.ndarray, miss: np.ndarray, axes: np.ndarray,
                          rotation: np.ndarray, pivot: np.ndarray, parents: np.ndarray,
                          pair_a: np.ndarray, pair_b: np.ndarray, pair_hi: np.ndarray,
                          pair_slot: np.ndarray, slot_top: np.ndarray, slot_lo: np.ndarray,
                          w_out: np.ndarray, w_in: np.ndarray, bounds: np.ndarray, q: int,
                          node_weight: np.ndarray, shared: bool, diagonal: np.ndarray,
                          upper: np.ndarray, rhs: np.ndarray):
    """Gauss–Newton normal equations of the world fit, in key blocks.

    Parameters
    ----------
    positions, miss : (F, n_nodes, 3) float64
        World positions and their errors (current − target), scene units.
    axes : (F, Cf, 3) float64
        World direction of every free channel (rotations: per degree).
    rotation : (Cf,) bool
    pivot : (Cf,) int64
        The node that owns each channel.
    parents : (n_nodes,) int64
        Every node's parent (-1 for roots), parents before children.
    pair_a, pair_b : (P,) int64
        Pairs a ≤ b of channels moving a common node.
    pair_hi : (P,) int64
        The pair's channel whose owner is the other's or an ancestor of it.
    pair_slot : (P,) int64
        The pair's (ancestor owner, deeper channel) slot.
    slot_top, slot_lo : (L,) int64
        Each slot's ancestor owner (node) and deeper channel.
    w_out, w_in : (F, Cf) float64
        Basis weights of each row's out slope (segment's first key) and in slope (second key).
    bounds : (S + 1,) int64
        Row bounds of the S = K - 1 segments.
    q : int
        Slots per channel and key: 1 (one slope) or 2 (in, then out).
    node_weight : (F, n_nodes) float64
        Weight of every node's squared error on every frame (ones: plain least squares).
    shared : bool
        Every channel has the same weights on a row (``w_out[f, c] = w_out[f, 0]``, also for
        ``w_in``): true of every mode's handles but weighted tangents'. A pair's products of
        weights are then the row's, formed once per row.
    diagonal, upper, rhs : float64 arrays of the shapes returned
        Where to write the results (overwritten, not added to): a caller that forms blocks
        every iteration reuses them instead of having fresh memory mapped and zeroed.

    Returns
    -------
    diagonal : (K, q Cf, q Cf) float64
        Σ_f diag(w) G_f diag(w) (G_f = J_fᵀ H_f J_f, H_f the node weights) in each key's
        out slots from the segment after it and in slots from the segment before it.
    upper : (K - 1, q Cf, q Cf) float64
        Σ_f diag(w_out) G_f diag(w_in) in the (out of key k, in of key k + 1) quadrant.
    rhs : (K, q Cf) float64
        Minus the gradient, Σ_f w ∘ J_fᵀ H_f r_f, in the same slots.

    Notes
    -----
    Segment s writes keys s and s + 1, so even segments run in parallel first, then odd
    ones: no two threads ever write the same block.
    """
    n_segments = len(bounds) - 1
    size = diagonal.shape[1]
    for k in prange(n_segments + 1):
        diagonal[k] = 0.0
        rhs[k] = 0.0
        if k < n_segments:
            upper[k] = 0.0
    for parity in range(2):
        for half in prange((n_segments - parity + 1) // 2):
            _segment(2 * half + parity, positions, miss, axes, rotation, pivot, parents,
                     pair_a, pair_b, pair_hi, pair_slot, slot_top, slot_lo, w_out, w_in,
                     bounds, q, node_weight,
                     shared, diagonal, upper, rhs)
    for k in prange(n_segments + 1):
        for a in range(size):
            for b in range(a + 1, size):
                diagonal[k, b, a] = diagonal[k, a, b]
    return diagonal, upper, rhs


# A rotation matrix in the chain kernels is a tuple of its nine entries, row by row: numba
# keeps a tuple in registers, where a 3 x 3 scratch array made every product a round trip
# through memory (a third of the corrective stage's subtree kinematics). The products are
# the same sums in the same order, so the numbers are the same to the bit.
_IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


@njit(cache=True, inline="always")
def _entries(m: np.ndarray) -> tuple:
    """The nine entries of a (3, 3) array, row by row."""
    return (m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2])


@njit(cache=True, inline="always")
def _store(m: np.ndarray, a: tuple) -> None:
    """Write the nine entries ``a`` into the (3, 3) array ``m``."""
    m[0, 0], m[0, 1], m[0, 2] = a[0], a[1], a[2]
    m[1, 0], m[1, 1], m[1, 2] = a[3], a[4], a[5]
    m[2, 0], m[2, 1], m[2, 2] = a[6], a[7], a[8]


@njit(cache=True, inline="always")
def _column(a: tuple, k: int) -> tuple:
    """Column ``k`` (0, 1 or 2) of the entries ``a``."""
    if k == 0:
        return a[0], a[3], a[6]
    if k == 1:
        return a[1], a[4], a[7]
    return a[2], a[5], a[8]


@njit(cache=True, inline="always")
def _times(a: tuple, m: np.ndarray) -> tuple:
    """The entries of ``a`` · ``m`` (``m`` a (3, 3) array)."""
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = a
    return (a00 * m[0, 0] + a01 * m[1, 0] + a02 * m[2, 0],
            a00 * m[0, 1] + a01 * m[1, 1] + a02 * m[2, 1],
            a00 * m[0, 2] + a01 * m[1, 2] + a02 * m[2, 2],
            a10 * m[0, 0] + a11 * m[1, 0] + a12 * m[2, 0],
            a10 * m[0, 1] + a11 * m[1, 1] + a12 * m[2, 1],
            a10 * m[0, 2] + a11 * m[1, 2] + a12 * m[2, 2],
            a20 * m[0, 0] + a21 * m[1, 0] + a22 * m[2, 0],
            a20 * m[0, 1] + a21 * m[1, 1] + a22 * m[2, 1],
            a20 * m[0, 2] + a21 * m[1, 2] + a22 * m[2, 2])


@njit(cache=True, inline="always")
def _place(i: int, row: np.ndarray, position: np.ndarray, world: np.ndarray,
           offsets: np.ndarray, parents: np.ndarray, translation: np.ndarray,
           orients: np.ndarray, oriented: bool) -> tuple[tuple, tuple]:
    """Node i's position from its parent's (``position`` (N, 3) and ``world`` (N, 3, 3) of
    one frame, ``row`` its channels), written to ``position[i]``; returns the entries of the
    parent's rotation and of parent rotation · orient (the node's rotation channels
    follow)."""
    p = parents[i]
    c0, c1, c2 = translation[i, 0], translation[i, 1], translation[i, 2]
    if oriented:  # offset + orient · location
        m0 = 0.0 if c0 < 0 else row[c0]
        m1 = 0.0 if c1 < 0 else row[c1]
        m2 = 0.0 if c2 < 0 else row[c2]
        o = orients[i]
        t0 = offsets[i, 0] + (o[0, 0] * m0 + o[0, 1] * m1 + o[0, 2] * m2)
        t1 = offsets[i, 1] + (o[1, 0] * m0 + o[1, 1] * m1 + o[1, 2] * m2)
        t2 = offsets[i, 2] + (o[2, 0] * m0 + o[2, 1] * m1 + o[2, 2] * m2)
    else:
        t0 = offsets[i, 0] if c0 < 0 else row[c0]
        t1 = offsets[i, 1] if c1 < 0 else row[c1]
        t2 = offsets[i, 2] if c2 < 0 else row[c2]
    if p >= 0:
        parent = _entries(world[p])
        position[i, 0] = position[p, 0] + (parent[0] * t0 + parent[1] * t1 + parent[2] * t2)
        position[i, 1] = position[p, 1] + (parent[3] * t0 + parent[4] * t1 + parent[5] * t2)
        position[i, 2] = position[p, 2] + (parent[6] * t0 + parent[7] * t1 + parent[8] * t2)
    else:
        parent = _IDENTITY
        position[i, 0] = t0
        position[i, 1] = t1
        position[i, 2] = t2
    return parent, _times(parent, orients[i])


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def chain_kinematics(channels: np.ndarray, turns: np.ndarray, offsets: np.ndarray,
                     parents: np.ndarray, translation: np.ndarray, rot_ptr: np.ndarray,
                     rot_chan: np.ndarray, rot_axis: np.ndarray, rot_slot: np.ndarray,
                     orients: np.ndarray, slot: np.ndarray, n_free: int, oriented: bool):
    """World positions and the world direction of every free channel, per frame.

    The same chain as :meth:`sp_core.clip.Clip.forward_kinematics` (local translation in the
    parent's frame, or added to the offset in the node's oriented frame for Blender-style
    locations; parent rotation · orient · channel rotations in listed order), with the axes of
    :func:`sp_core.tree_jacobian.channel_axes` picked up on the way.

    Parameters
    ----------
    channels : (F, C) float64
    turns : (F, R, 3, 3) float64
        Each rotation channel's single-axis matrix (from scipy, see
        :meth:`sp_core.clip.Clip.axis_rotations`), channel c's at ``rot_slot[c]``.
    offsets : (N, 3) float64
    parents : (N,) int64
    translation : (N, 3) int64
        Translation channel of each node and axis, -1 for none (the offset is kept).
    rot_ptr, rot_chan : CSR of each node's rotation channels in listed order.
    rot_axis : (C,) int64
        Axis (0, 1, 2) of every rotation channel.
    rot_slot : (C,) int64
    orients : (N, 3, 3) float64
    slot : (C,) int64
        Index of each channel among the free ones, -1 if not free.
    n_free : int
    oriented : bool
        The clip's ``translation_space`` is ``"oriented"``.

    Returns
    -------
    positions : (F, N, 3) float64
    axes : (F, n_free, 3) float64
    """
    n_frames = channels.shape[0]
    n_nodes = offsets.shape[0]
    positions = np.empty((n_frames, n_nodes, 3))
    axes = np.zeros((n_frames, n_free, 3))
    degree = np.pi / 180.0
    for f in prange(n_frames):
        world = np.empty((n_nodes, 3, 3))
        for i in range(n_nodes):
            parent, partial = _place(i, channels[f], positions[f], world, offsets, parents,
                                     translation, orients, oriented)
            for a in range(3):
                c = translation[i, a]
                if c >= 0 and slot[c] >= 0:
                    axis = _column(partial if oriented else parent, a)
                    for r in range(3):
                        axes[f, slot[c], r] = axis[r]
            for e in range(rot_ptr[i], rot_ptr[i + 1]):
                c = rot_chan[e]
                if slot[c] >= 0:
                    axis = _column(partial, rot_axis[c])
                    for r in range(3):
                        axes[f, slot[c], r] = axis[r] * degree
                partial = _times(partial, turns[f, rot_slot[c]])
            _store(world[i], partial)
    return positions, axes


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def bezier_parameter(t: np.ndarray, a: np.ndarray, b: np.ndarray, length: np.ndarray
                     ) -> np.ndarray:
    """Curve parameters u where x(u) = t, entry by entry (see
    :func:`sp_core.curves.solve_parameter`: the same safeguarded Newton iteration).

    Parameters
    ----------
    t, a, b, length : (n,) float64
        Time from the segment start, out and in handle lengths, segment length (frames).

    Returns
    -------
    (n,) float64
    """
    n = t.shape[0]
    out = np.empty(n)
    for e in prange(n):
        te = t[e]
        ae = a[e]
        be = b[e]
        le = length[e]
        u = min(max(te / le, 0.0), 1.0)
        lo = 0.0
        hi = 1.0
        for _ in range(60):
            v = 1.0 - u
            miss = 3.0 * ae * u * v * v + 3.0 * (le - be) * u * u * v + le * u ** 3 - te
            if miss > 0:
                hi = u
            else:
                lo = u
            dx = 3.0 * (ae * v * v + 2.0 * (le - ae - be) * u * v + be * u * u)
            step = u - miss / dx if dx != 0.0 else np.nan
            moved = step if np.isfinite(step) and lo < step < hi else 0.5 * (lo + hi)
            if abs(miss) <= 1e-12 * le and (miss == 0.0 or moved == u):
                break
            u = moved
        out[e] = u
    return out


@njit(cache=True, nogil=True)
def _cholesky_solve(m: np.ndarray, b: np.ndarray) -> None:
    """Solve m x = b for symmetric positive definite m (n, n); x overwrites b (n,)."""
    n = b.shape[0]
    lower = np.linalg.cholesky(m)
    for r in range(n):  # lower y = b
        v = b[r]
        for c in range(r):
            v -= lower[r, c] * b[c]
        b[r] = v / lower[r, r]
    for r in range(n - 1, -1, -1):  # lowerᵀ x = y
        v = b[r]
        for c in range(r + 1, n):
            v -= lower[c, r] * b[c]
        b[r] = v / lower[r, r]


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def segment_solve(diagonal: np.ndarray, coupling: np.ndarray, rhs: np.ndarray,
                  shift: np.ndarray) -> np.ndarray:
    """Solve the broken-tangent key system segment by segment (see
    :func:`sp_core.tree_jacobian.solve_segment_blocks`, which states when this is exact).

    Parameters
    ----------
    diagonal : (K, 2 C, 2 C) float64
        Key blocks, in slots then out slots; only their (in, in) and (out, out) quadrants
        are read.
    coupling : (K - 1, C, C) float64
        (out of key k, in of key k + 1) quadrant of the off-diagonal blocks.
    rhs, shift : (K, 2 C) float64
        Right-hand side; addition to the diagonal.

    Returns
    -------
    x : (K, 2 C) float64
    """
    n_keys, size = rhs.shape
    n = size // 2
    x = np.empty_like(rhs)
    for s in prange(n_keys - 1):
        # unknowns of segment s: out slopes of key s, then in slopes of key s + 1
        m = np.empty((size, size))
        b = np.empty(size)
        for a in range(n):
            for c in range(n):
                m[a, c] = diagonal[s, n + a, n + c]
                m[n + a, n + c] = diagonal[s + 1, a, c]
                m[a, n + c] = coupling[s, a, c]
                m[n + c, a] = coupling[s, a, c]
            m[a, a] += shift[s, n + a]
            m[n + a, n + a] += shift[s + 1, a]
            b[a] = rhs[s, n + a]
            b[n + a] = rhs[s + 1, a]
        _cholesky_solve(m, b)
        for a in range(n):
            x[s, n + a] = b[a]
            x[s + 1, a] = b[n + a]
    # the first key's in slopes and the last key's out slopes belong to no segment
    for key, first in ((0, 0), (n_keys - 1, n)):
        m = np.empty((n, n))
        b = np.empty(n)
        for a in range(n):
            for c in range(n):
                m[a, c] = diagonal[key, first + a, first + c]
            m[a, a] += shift[key, first + a]
            b[a] = rhs[key, first + a]
        _cholesky_solve(m, b)
        for a in range(n):
            x[key, first + a] = b[a]
    return x


@njit(cache=True, nogil=True)
def _block_sum(values: np.ndarray, lo: int, n: int) -> float:
    """numpy's sum of a block of up to 128 values: eight running sums, then the rest."""
    if n < 8:
        total = -0.0  # as numpy: -0.0 + x is x for every x, so sums of -0.0 stay -0.0
        for i in range(n):
            total += values[lo + i]
        return total
    r0, r1, r2, r3 = values[lo], values[lo + 1], values[lo + 2], values[lo + 3]
    r4, r5, r6, r7 = values[lo + 4], values[lo + 5], values[lo + 6], values[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += values[lo + i]
        r1 += values[lo + i + 1]
        r2 += values[lo + i + 2]
        r3 += values[lo + i + 3]
        r4 += values[lo + i + 4]
        r5 += values[lo + i + 5]
        r6 += values[lo + i + 6]
        r7 += values[lo + i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += values[lo + i]
        i += 1
    return total


@njit(cache=True, nogil=True)
def _pairwise_sum(values: np.ndarray) -> float:
    """Sum of ``values`` (n,) in numpy's pairwise order (blocks of up to 128, halves cut at a
    multiple of 8 above), so a mean here equals numpy's to the bit. The halves are walked
    with an explicit stack: numba cannot cache a recursive kernel."""
    n = values.shape[0]
    if n <= 128:
        return _block_sum(values, 0, n)
    los = np.empty(64, dtype=np.int64)
    sizes = np.empty(64, dtype=np.int64)
    lefts = np.empty(64)  # a range's left half's sum, once known
    halves_done = np.zeros(64, dtype=np.bool_)
    los[0], sizes[0], depth = 0, n, 1
    while True:
        top = depth - 1
        if sizes[top] > 128:  # descend into the left half
            half = sizes[top] // 2
            half -= half % 8
            los[depth], sizes[depth], halves_done[depth] = los[top], half, False
            depth += 1
            continue
        total = _block_sum(values, los[top], sizes[top])
        depth -= 1
        while depth > 0:  # hand the sum up: a left half starts its right one
            parent = depth - 1
            half = sizes[parent] // 2
            half -= half % 8
            if not halves_done[parent]:
                halves_done[parent], lefts[parent] = True, total
                los[depth], sizes[depth] = los[parent] + half, sizes[parent] - half
                halves_done[depth] = False
                depth += 1
                break
            total = lefts[parent] + total
            depth -= 1
        if depth == 0:
            return total


@njit(cache=True, nogil=True)
def tridiagonal_rows(diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve one symmetric positive definite tridiagonal system per row (Thomas elimination).

    The same operations in the same order as :func:`sp_core.blocks._solve_tridiagonal`, so
    the same numbers to the bit; one call instead of its numpy loop over the keys (a channel
    fit solves a dozen such systems of 50 keys and 100 channels, 0.3 ms each in numpy).

    Parameters
    ----------
    diagonal, rhs : (n, K) float64
    upper : (n, K - 1) float64
        A[k, k + 1] = A[k + 1, k] of every row's system.

    Returns
    -------
    x : (n, K) float64
    """
    n_systems, n_keys = rhs.shape
    x = np.empty((n_systems, n_keys))
    factor = np.empty(n_keys)
    partial = np.empty(n_keys)
    for c in range(n_systems):
        pivot = diagonal[c, 0]
        partial[0] = rhs[c, 0] / pivot
        for k in range(1, n_keys):
            factor[k - 1] = upper[c, k - 1] / pivot
            pivot = diagonal[c, k] - upper[c, k - 1] * factor[k - 1]
            partial[k] = (rhs[c, k] - upper[c, k - 1] * partial[k - 1]) / pivot
        x[c, n_keys - 1] = partial[n_keys - 1]
        for k in range(n_keys - 2, -1, -1):
            x[c, k] = partial[k] - factor[k] * x[c, k + 1]
    return x


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def segment_normal_sums(w_out: np.ndarray, w_in: np.ndarray, residual: np.ndarray,
                        starts: np.ndarray, weights: bool) -> np.ndarray:
    """The channel fit's per-segment sums of products (see :func:`sp_core.fitting._normal_blocks`).

    Each sum is what numpy's ``add.reduceat`` gives, to the bit: a segment's first row, plus
    the pairwise sum of the others (numpy's order, :func:`_pairwise_sum`).
    One pass reads each row once instead of forming five (F, C) products first, and the
    segments run in parallel.

    Parameters
    ----------
    w_out, w_in, residual : (F, C) float64
        Basis weights of the out and in slopes of every row, and the residual.
    starts : (S,) int64
        First row of every segment (the last runs to row F - 1).
    weights : bool
        Whether to sum the products of the weights too (False: they are left unset; a fit's
        rounds change the residual, not the weights, so the caller keeps their sums).

    Returns
    -------
    (5, S, C) float64
        Σ w_out², Σ w_in², Σ w_out w_in, Σ w_out r and Σ w_in r per segment and channel.
    """
    n_rows, n_channels = residual.shape
    n_segments = starts.shape[0]
    out = np.empty((5, n_segments, n_channels))
    # one channel's products of every row: segments own disjoint rows, so the threads share
    # it without allocating (allocations in parallel threads grew the heap by arenas; only a
    # segment of more than 129 rows allocates, _pairwise_sum's small stack)
    terms = np.empty((5, n_rows))
    first = 0 if weights else 3
    for s in prange(n_segments):
        lo = starts[s]
        hi = starts[s + 1] if s + 1 < n_segments else n_rows
        rest = hi - lo - 1
        for c in range(n_channels):
            for f in range(lo, hi):
                o = w_out[f, c]
                i = w_in[f, c]
                r = residual[f, c]
                if weights:
                    terms[0, f] = o * o
                    terms[1, f] = i * i
                    terms[2, f] = o * i
                terms[3, f] = o * r
                terms[4, f] = i * r
            for k in range(first, 5):
                out[k, s, c] = terms[k, lo]
                if rest:  # (a one-row segment adds nothing: -0.0 stays -0.0, as in numpy)
                    out[k, s, c] += _pairwise_sum(terms[k, lo + 1:hi])
    return out

# ------------------------------------------------------------------------------------------
# The corrective stage's greedy search: forward kinematics that recompute only a subtree, the
# candidates' node errors and the joint steps' normal equations.
#
# The corrective stage evaluates hundreds of candidate blocks per greedy step: rows of the
# current motion in which one channel (or a few on one chain) changed. Only the nodes below the
# topmost changed node move, so these kernels keep every node's world position and rotation for
# the current motion and redo only that subtree, from its parent's kept transform. A node's step
# is chain_kinematics's own (_place, _times), so the positions are the same to the bit. The
# other kernels sum in the order of the numpy expressions they replace, for the same reason:
# the greedy search's choices follow the last digits of its scores.


@TakingTurns
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


@TakingTurns
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
            positions[b] = kept_positions[base[b]]
            if roots[b] >= 0:
                _subtree(b, base[b], roots[b], channels, patch_ptr, patch_chan, patch_turn,
                         kept_turns, kept_world, positions[b], world, sub_ptr, sub_nodes,
                         offsets, parents, translation, rot_ptr, rot_chan, rot_slot, orients,
                         oriented)
    return positions


@njit(cache=True, inline="always")
def _subtree(b: int, f: int, root: int, channels: np.ndarray, patch_ptr: np.ndarray,
             patch_chan: np.ndarray, patch_turn: np.ndarray, kept_turns: np.ndarray,
             kept_world: np.ndarray, position: np.ndarray, world: np.ndarray,
             sub_ptr: np.ndarray, sub_nodes: np.ndarray, offsets: np.ndarray,
             parents: np.ndarray, translation: np.ndarray, rot_ptr: np.ndarray,
             rot_chan: np.ndarray, rot_slot: np.ndarray, orients: np.ndarray,
             oriented: bool) -> None:
    """Row b of :func:`subtree_positions` (frame f): the positions of ``root``'s subtree into
    ``position`` (N, 3), whose entry for the root's parent is the kept one; ``world`` (N, 3,
    3) is scratch."""
    above = parents[root]
    if above >= 0:
        world[above] = kept_world[f, above]
    for s in range(sub_ptr[root], sub_ptr[root + 1]):
        i = sub_nodes[s]
        partial = _place(i, channels[b], position, world, offsets, parents, translation,
                         orients, oriented)[1]
        for e in range(rot_ptr[i], rot_ptr[i + 1]):
            c = rot_chan[e]
            turn = kept_turns[f, rot_slot[c]]
            for q in range(patch_ptr[b], patch_ptr[b + 1]):
                if patch_chan[q] == c:
                    turn = patch_turn[q]
            partial = _times(partial, turn)
        _store(world[i], partial)


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def subtree_errors(channels: np.ndarray, base: np.ndarray, roots: np.ndarray,
                   patch_ptr: np.ndarray, patch_chan: np.ndarray, patch_turn: np.ndarray,
                   kept_turns: np.ndarray, kept_positions: np.ndarray, kept_world: np.ndarray,
                   kept_errors: np.ndarray, target: np.ndarray, sub_ptr: np.ndarray,
                   sub_nodes: np.ndarray, offsets: np.ndarray, parents: np.ndarray,
                   translation: np.ndarray, rot_ptr: np.ndarray, rot_chan: np.ndarray,
                   rot_slot: np.ndarray, orients: np.ndarray, oriented: bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`subtree_positions`' rows' distances to ``target`` (F, N, 3), without the
    positions: the nodes outside a row's subtree keep their positions, so their distances are
    the kept ones (``kept_errors`` (F, N), the same numbers), and only the subtree's are
    formed. The numbers are ``np.linalg.norm(positions - target[base], axis=-1)`` and its
    ``max``/``mean`` along the nodes to the bit (the sums in numpy's order): the greedy
    search compares candidates by them, so a last digit changes which keys it writes.

    Returns
    -------
    errors : (B, N) float64
    worst, mean : (B,) float64
    """
    n_rows = channels.shape[0]
    n_nodes = offsets.shape[0]
    errors = np.empty((n_rows, n_nodes))
    worst = np.empty(n_rows)
    mean = np.empty(n_rows)
    chunks = min(n_rows, 64)
    for chunk in prange(chunks):
        world = np.empty((n_nodes, 3, 3))
        position = np.empty((n_nodes, 3))
        for b in range(chunk, n_rows, chunks):
            f = base[b]
            root = roots[b]
            errors[b] = kept_errors[f]
            if root >= 0:
                if parents[root] >= 0:
                    position[parents[root]] = kept_positions[f, parents[root]]
                _subtree(b, f, root, channels, patch_ptr, patch_chan, patch_turn, kept_turns,
                         kept_world, position, world, sub_ptr, sub_nodes, offsets, parents,
                         translation, rot_ptr, rot_chan, rot_slot, orients, oriented)
                for s in range(sub_ptr[root], sub_ptr[root + 1]):
                    i = sub_nodes[s]
                    d0 = position[i, 0] - target[f, i, 0]
                    d1 = position[i, 1] - target[f, i, 1]
                    d2 = position[i, 2] - target[f, i, 2]
                    errors[b, i] = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
            top = -np.inf
            for i in range(n_nodes):
                top = max(top, errors[b, i])
            worst[b] = top
            mean[b] = _pairwise_sum(errors[b]) / n_nodes
    return errors, worst, mean


@njit(cache=True, nogil=True)
def block_sums(values: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
               chosen: np.ndarray) -> np.ndarray:
    """``np.sum(values[offsets[i]:offsets[i] + lengths[i]])`` for each i in ``chosen``, to the
    bit (numpy's pairwise order, :func:`_pairwise_sum`; ``np.add.reduceat`` sums in another
    order); the greedy step's scores, one call instead of a numpy call per candidate.

    Parameters
    ----------
    values : (n,) float64
    offsets, lengths : (B,) int64
    chosen : (m,) int64

    Returns
    -------
    (m,) float64
    """
    out = np.empty(chosen.shape[0])
    for j in range(chosen.shape[0]):
        i = chosen[j]
        out[j] = _pairwise_sum(values[offsets[i]:offsets[i] + lengths[i]])
    return out


@njit(cache=True, nogil=True)
def _interpolate(x: float, points: np.ndarray, values: np.ndarray, n: int, j: int) -> float:
    """``np.interp(x, points[:n], values[:n])`` to the bit, ``j`` the point at or before
    ``x`` (numpy's rules: the value itself at a point and at the last, the slope's line from
    the point before otherwise, from the point after where that gives NaN)."""
    if n == 1 or j == n - 1 or points[j] == x:
        return values[j]
    slope = (values[j + 1] - values[j]) / (points[j + 1] - points[j])
    out = slope * (x - points[j]) + values[j]
    if np.isnan(out):
        out = slope * (x - points[j + 1]) + values[j + 1]
        if np.isnan(out) and values[j] == values[j + 1]:
            out = values[j]
    return out


@njit(cache=True, nogil=True)
def corrective_hats(point_rows: np.ndarray, point_values: np.ndarray,
                    point_knots: np.ndarray, point_ptr: np.ndarray, written: np.ndarray,
                    written_ptr: np.ndarray, correction: np.ndarray, columns: np.ndarray,
                    worst: int, widths: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                               np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate shape of a greedy step's change at frame ``worst`` on some channels:
    a unit change there, closed by knots ``widths[w]`` frames each side that keep the
    correction as it is (unless a point of the channel is nearer, or the take ends first),
    or by the points around it (a ramp); its change on the rows it reaches and its key cost.

    Parameters
    ----------
    point_rows, point_values, point_knots : (P,) int64, float64, bool
        Every channel's points (its anchors and knots), ascending rows: their values (0 for
        an anchor that is no knot) and whether each is a knot; channel t's are
        ``[point_ptr[t]:point_ptr[t + 1]]``.
    point_ptr : (T + 1,) int64
    written, written_ptr : (Q,), (T + 1,) int64
        The rows of every channel's keys written now (a knot, or a point next to one).
    correction : (F, C) float64
    columns : (T,) int64
        The channels' columns of ``correction``.
    worst : int
    widths : (W,) int64

    Returns
    -------
    n_shapes : (T,) int64
        Each channel's distinct shapes: shape 0 the ramp, then one per width that has a
        closing knot (widths without one are the ramp).
    shape_of : (T, W + 1) int64
        The shape of the ramp (0) and of each width.
    closing : (T, W + 1, 2) int64
        A shape's closing knots, before and after ``worst`` (-1: none).
    lo, hi : (T, W + 1) int64
        The rows a shape's change reaches (inclusive): from the point before its first new
        knot to the point after its last (where there is none, that new knot itself).
    cost : (T, W + 1) int64
        Keys written after the change minus before (a knot, or a point next to one).
    hat_ptr : (T (W + 1) + 1,) int64
    hats : (H,) float64
        Shape s of channel t changes the correction on rows lo..hi by ``delta`` times
        ``hats[hat_ptr[t (W + 1) + s]:hat_ptr[t (W + 1) + s + 1]]``: the linear interpolation
        of the points with the new knots (value 1 above the correction at ``worst``) minus
        the correction, as ``np.interp`` gives it to the bit.
    """
    n_channels = columns.shape[0]
    n_frames = correction.shape[0]
    n_slots = widths.shape[0] + 1
    n_shapes = np.ones(n_channels, dtype=np.int64)
    shape_of = np.zeros((n_channels, n_slots), dtype=np.int64)
    closing = np.full((n_channels, n_slots, 2), -1, dtype=np.int64)
    lo = np.zeros((n_channels, n_slots), dtype=np.int64)
    hi = np.zeros((n_channels, n_slots), dtype=np.int64)
    cost = np.zeros((n_channels, n_slots), dtype=np.int64)
    hat_ptr = np.zeros(n_channels * n_slots + 1, dtype=np.int64)
    for t in range(n_channels):
        rows = point_rows[point_ptr[t]:point_ptr[t + 1]]
        at = np.searchsorted(rows, worst)
        after_at = np.searchsorted(rows, worst, side="right")
        before = rows[at - 1] if at > 0 else -1
        after = rows[after_at] if after_at < rows.shape[0] else n_frames
        for w in range(widths.shape[0]):
            first, last = worst - widths[w], worst + widths[w]
            has_first = before < first and first >= 0
            has_last = last < after and last < n_frames
            if has_first or has_last:
                s = n_shapes[t]
                n_shapes[t] += 1
                shape_of[t, w + 1] = s
                if has_first:
                    closing[t, s, 0] = first
                if has_last:
                    closing[t, s, 1] = last
        for s in range(n_shapes[t]):
            first = closing[t, s, 0] if closing[t, s, 0] >= 0 else worst
            last = closing[t, s, 1] if closing[t, s, 1] >= 0 else worst
            i = np.searchsorted(rows, first) - 1
            j = np.searchsorted(rows, last, side="right")
            lo[t, s] = rows[i] if i >= 0 else first
            hi[t, s] = rows[j] if j < rows.shape[0] else last
            hat_ptr[t * n_slots + s + 1] = hi[t, s] - lo[t, s] + 1
    hat_ptr = np.cumsum(hat_ptr)
    hats = np.empty(hat_ptr[-1])
    longest = 0
    for t in range(n_channels):
        longest = max(longest, point_ptr[t + 1] - point_ptr[t])
    merged = np.empty(longest + 3)
    values = np.empty(longest + 3)
    knots = np.empty(longest + 3, dtype=np.bool_)
    for t in range(n_channels):
        c = columns[t]
        rows = point_rows[point_ptr[t]:point_ptr[t + 1]]
        old_values = point_values[point_ptr[t]:point_ptr[t + 1]]
        old_knots = point_knots[point_ptr[t]:point_ptr[t + 1]]
        keys = written[written_ptr[t]:written_ptr[t + 1]]
        for s in range(n_shapes[t]):
            a, b = lo[t, s], hi[t, s]
            # the channel's points on a..b and one beyond each end, with the new knots laid
            # over them (only `worst` can be a point already: the closing knots lie between
            # the points around it)
            new_rows = (closing[t, s, 0], worst, closing[t, s, 1])
            new_values = (correction[max(closing[t, s, 0], 0), c],
                          correction[worst, c] + 1.0,
                          correction[max(closing[t, s, 1], 0), c])
            k = max(np.searchsorted(rows, a) - 1, 0)
            end = min(np.searchsorted(rows, b, side="right") + 1, rows.shape[0])
            n = 0
            for q in range(3):
                r = new_rows[q]
                if r < 0:
                    continue
                while k < end and rows[k] < r:
                    merged[n], values[n], knots[n] = rows[k], old_values[k], old_knots[k]
                    n += 1
                    k += 1
                if k < end and rows[k] == r:
                    k += 1
                merged[n], values[n], knots[n] = r, new_values[q], True
                n += 1
            while k < end:
                merged[n], values[n], knots[n] = rows[k], old_values[k], old_knots[k]
                n += 1
                k += 1
            start = 0
            while merged[start] < a:
                start += 1
            stop = start
            while stop < n and merged[stop] <= b:
                stop += 1
            # the change on a..b, and the keys written there (a knot or next to one)
            out = hats[hat_ptr[t * n_slots + s]:hat_ptr[t * n_slots + s + 1]]
            j = 0
            for x in range(a, b + 1):
                while j < stop - start - 1 and merged[start + j + 1] <= x:
                    j += 1
                out[x - a] = _interpolate(float(x), merged[start:stop], values[start:stop],
                                          stop - start, j) - correction[x, c]
            keys_now = 0
            for i in range(start, stop):
                if knots[i] or (i > 0 and knots[i - 1]) or (i < n - 1 and knots[i + 1]):
                    keys_now += 1
            cost[t, s] = keys_now - (np.searchsorted(keys, b, side="right")
                                     - np.searchsorted(keys, a))
    return n_shapes, shape_of, closing, lo, hi, cost, hat_ptr, hats


@njit(cache=True, nogil=True)
def hat_windows(hats: np.ndarray, hat_ptr: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                chosen: np.ndarray, first: int, last: int) -> np.ndarray:
    """(S, T, last - first + 1) float64: hat ``chosen[s, t]`` of :func:`corrective_hats`'s
    (lo, hi flattened) on rows first..last, zero where it does not reach."""
    out = np.zeros((chosen.shape[0], chosen.shape[1], last - first + 1))
    for s in range(chosen.shape[0]):
        for t in range(chosen.shape[1]):
            h = chosen[s, t]
            for r in range(max(lo[h], first), min(hi[h], last) + 1):
                out[s, t, r - first] = hats[hat_ptr[h] + r - lo[h]]
    return out


@njit(cache=True, nogil=True)
def hat_sums(hats: np.ndarray, begins: np.ndarray, counts: np.ndarray,
             first_rows: np.ndarray, columns: np.ndarray, norm: np.ndarray, grad: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The greedy step's one-channel Gauss–Newton sums of every hat: ``sum(h * h * norm[rows,
    m])`` and ``sum(h * grad[rows, m])``, the products and sums numpy's (to the bit).

    Parameters
    ----------
    hats : (H,) float64
        The hats' values: hat i is ``hats[begins[i]:begins[i] + counts[i]]`` on the
        Jacobian's rows ``first_rows[i]`` on.
    begins, counts : (n,) int64
    first_rows, columns : (n,) int64
        Each hat's first row and its channel (``norm``'s and ``grad``'s column).
    norm, grad : (F, T) float64
        Per row and channel: the squared norm of the position change per unit, and its dot
        product with the miss.

    Returns
    -------
    squares, gradients : (n,) float64
    """
    n = begins.shape[0]
    squares = np.empty(n)
    gradients = np.empty(n)
    terms = np.empty(counts.max() if n else 0)
    for i in range(n):
        lo, count, m, r = begins[i], counts[i], columns[i], first_rows[i]
        for k in range(count):
            terms[k] = hats[lo + k] * hats[lo + k] * norm[r + k, m]
        squares[i] = _pairwise_sum(terms[:count])
        for k in range(count):
            terms[k] = hats[lo + k] * grad[r + k, m]
        gradients[i] = _pairwise_sum(terms[:count])
    return squares, gradients


@njit(cache=True, nogil=True)
def joint_normals(jac: np.ndarray, miss: np.ndarray, shaped: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Normal equations of the greedy step's joint corrections, one per hat width.

    Correction i of width w moves the positions by ``jac[:, :, i]`` times its
    hat ``shaped[w, i]``; the products are those numpy's ``einsum("fni,fnj->ij")`` and
    ``einsum("fni,fn->i")`` of the weighted columns form, summed in the same order (frames,
    then coordinates), so the steps equal theirs to the bit. Off a hat the column is zero,
    which adds nothing to a sum; so does a column's zero on the coordinates of the nodes its
    channel does not move (most, for a joint low in the chain), and only the products of the
    nonzero weighted columns are summed (adding a zero leaves a sum as it is: it starts at
    +0 and never becomes -0; with finite inputs only, since 0 × inf is not added).

    Parameters
    ----------
    jac : (F, M, S) float64
        Position change per unit of each channel on the window's frames.
    miss : (F, M) float64
        Position minus target on those frames.
    shaped : (W, S, F) float64
        Each correction's hat on the window's frames (0 where it does not reach).

    Returns
    -------
    normals : (W, S, S) float64
    gradients : (W, S) float64
    """
    n_widths, size = shaped.shape[0], shaped.shape[1]
    n_frames, n_coords = miss.shape
    normals = np.zeros((n_widths, size, size))
    gradients = np.zeros((n_widths, size))
    weighted = np.empty(size)
    nonzero = np.empty(size, dtype=np.int64)
    for w in range(n_widths):
        for f in range(n_frames):
            reached = False
            for i in range(size):
                reached = reached or shaped[w, i, f] != 0.0
            if not reached:
                continue
            for n in range(n_coords):
                count = 0
                for i in range(size):
                    weighted[i] = jac[f, n, i] * shaped[w, i, f]
                    if weighted[i] != 0.0:
                        nonzero[count] = i
                        count += 1
                for a in range(count):
                    i = nonzero[a]
                    for b in range(a, count):
                        normals[w, i, nonzero[b]] += weighted[i] * weighted[nonzero[b]]
                    gradients[w, i] += weighted[i] * miss[f, n]
        for i in range(size):
            for j in range(i):
                normals[w, i, j] = normals[w, j, i]
    return normals, gradients


@njit(cache=True, inline="always")
def _distance(a: tuple, b: tuple) -> float:
    """``|a - b|²`` of two rotations' entries (the squared distance of
    :mod:`sp_core.speed_limits`)."""
    total = 0.0
    for k in range(9):
        d = a[k] - b[k]
        total += d * d
    return total


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def joint_steps_too_fast(group_ptr: np.ndarray, group_node: np.ndarray, first: np.ndarray,
                         count: np.ndarray, slot: np.ndarray, start: np.ndarray,
                         new_turns: np.ndarray, changed: np.ndarray, kept_turns: np.ndarray,
                         node_ptr: np.ndarray,
                         node_slots: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """Which groups of changes turn their joint faster than ``limits`` allow and than it
    turned before (:mod:`sp_core.speed_limits`).

    Group g changes node ``group_node[g]``'s rotation channels: change q (of
    ``group_ptr[g]:group_ptr[g + 1]``) gives the channel of rotation slot ``slot[q]`` the
    matrices ``new_turns[start[q]:start[q] + count[q]]`` on rows ``first[q]`` on, those
    ``changed`` marks (the others keep the kept ones, and are not read); its steps are
    checked from the row before the first change to the row after the last.

    Parameters
    ----------
    group_ptr : (G + 1,) int64
    group_node : (G,) int64
    first, count, slot, start : (Q,) int64
    new_turns : (P, 3, 3) float64
    changed : (P,) bool
    kept_turns : (F, R, 3, 3) float64
        Every rotation channel's matrix before the changes.
    node_ptr, node_slots : (N + 1,), (R,) int64
        CSR of each node's rotation slots in product order.
    limits : (F - 1, N) float64
        Largest squared distance of a step (``SpeedLimits.joint``).

    Returns
    -------
    (G,) bool
    """
    n_groups = group_node.shape[0]
    n_frames = kept_turns.shape[0]
    out = np.zeros(n_groups, dtype=np.bool_)
    for g in prange(n_groups):
        node = group_node[g]
        lo = n_frames
        hi = 0
        for q in range(group_ptr[g], group_ptr[g + 1]):
            lo = min(lo, first[q] - 1)
            hi = max(hi, first[q] + count[q])
        lo = max(lo, 0)
        hi = min(hi, n_frames - 1)
        was_after = _IDENTITY
        was_before = _IDENTITY
        was_moving = False
        for r in range(lo, hi + 1):
            # (a row without a changed value, as most rows of a hat, has the joint's rotation
            # as it was; a step between two such rows is the step before)
            moves = False
            for q in range(group_ptr[g], group_ptr[g + 1]):
                if first[q] <= r < first[q] + count[q]:
                    moves = moves or changed[start[q] + r - first[q]]
            before = _IDENTITY
            for e in range(node_ptr[node], node_ptr[node + 1]):
                before = _times(before, kept_turns[r, node_slots[e]])
            after = before
            if moves:
                after = _IDENTITY
                for e in range(node_ptr[node], node_ptr[node + 1]):
                    s = node_slots[e]
                    turn = kept_turns[r, s]
                    for q in range(group_ptr[g], group_ptr[g + 1]):
                        if slot[q] == s and first[q] <= r < first[q] + count[q] \
                                and changed[start[q] + r - first[q]]:
                            turn = new_turns[start[q] + r - first[q]]
                    after = _times(after, turn)
            if r > lo and (moves or was_moving):
                moved = _distance(after, was_after)
                bound = max(_distance(before, was_before), limits[r - 1, node])
                if moved > bound * (1.0 + 1e-9) + 1e-12:
                    out[g] = True
                    break
            was_after = after
            was_before = before
            was_moving = moves
    return out
