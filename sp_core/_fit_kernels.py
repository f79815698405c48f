"""numba kernels of the world-space fit (private; use :mod:`sp_core.tree_jacobian`).

Imported only when a world fit runs, so reading files and the channel fit never load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True, nogil=True)
def segment_normal_blocks(positions: np.ndarray, miss: np.ndarray, axes: np.ndarray,
                          rotation: np.ndarray, pivot: np.ndarray, node_ptr: np.ndarray,
                          node_chan: np.ndarray, pair_a: np.ndarray, pair_b: np.ndarray,
                          w_out: np.ndarray, w_in: np.ndarray, bounds: np.ndarray):
    """Per-segment Gram blocks and gradients of the world fit.

    Parameters
    ----------
    positions, miss : (F, n_nodes, 3) float64
        World positions and their errors (current − target), scene units.
    axes : (F, Cf, 3) float64
        World direction of every free channel (rotations: per degree).
    rotation : (Cf,) bool
    pivot : (Cf,) int64
    node_ptr, node_chan : CSR of the free channels that move each node (ascending).
    pair_a, pair_b : (P,) int64
        Pairs a ≤ b of channels moving a common node.
    w_out, w_in : (F, Cf) float64
        Basis weights of each row's out slope (segment's first key) and in slope (second key).
    bounds : (S + 1,) int64
        Row bounds of the S segments.

    Returns
    -------
    d_out, d_in, up : (S, Cf, Cf) float64
        Σ_f diag(w_out) G_f diag(w_out), the same with w_in, and diag(w_out) G_f diag(w_in),
        G_f = J_fᵀ J_f.
    g_out, g_in : (S, Cf) float64
        Σ_f w_out ∘ J_fᵀ r_f and the same with w_in.
    """
    n_segments = len(bounds) - 1
    n_free = axes.shape[1]
    n_nodes = positions.shape[1]
    n_pairs = len(pair_a)
    longest = 0
    for n in range(n_nodes):
        longest = max(longest, node_ptr[n + 1] - node_ptr[n])
    d_out = np.zeros((n_segments, n_free, n_free))
    d_in = np.zeros((n_segments, n_free, n_free))
    up = np.zeros((n_segments, n_free, n_free))
    g_out = np.zeros((n_segments, n_free))
    g_in = np.zeros((n_segments, n_free))
    for s in prange(n_segments):
        gram = np.zeros((n_free, n_free))
        grad = np.zeros(n_free)
        jac = np.empty((longest, 3))
        for f in range(bounds[s], bounds[s + 1]):
            for n in range(n_nodes):
                lo = node_ptr[n]
                m = node_ptr[n + 1] - lo
                rx = miss[f, n, 0]
                ry = miss[f, n, 1]
                rz = miss[f, n, 2]
                for t in range(m):
                    c = node_chan[lo + t]
                    ax = axes[f, c, 0]
                    ay = axes[f, c, 1]
                    az = axes[f, c, 2]
                    if rotation[c]:
                        j = pivot[c]
                        ux = positions[f, n, 0] - positions[f, j, 0]
                        uy = positions[f, n, 1] - positions[f, j, 1]
                        uz = positions[f, n, 2] - positions[f, j, 2]
                        jac[t, 0] = ay * uz - az * uy
                        jac[t, 1] = az * ux - ax * uz
                        jac[t, 2] = ax * uy - ay * ux
                    else:
                        jac[t, 0] = ax
                        jac[t, 1] = ay
                        jac[t, 2] = az
                    grad[c] += jac[t, 0] * rx + jac[t, 1] * ry + jac[t, 2] * rz
                for t1 in range(m):
                    c1 = node_chan[lo + t1]
                    x1 = jac[t1, 0]
                    y1 = jac[t1, 1]
                    z1 = jac[t1, 2]
                    for t2 in range(t1, m):
                        gram[c1, node_chan[lo + t2]] += (x1 * jac[t2, 0] + y1 * jac[t2, 1]
                                                         + z1 * jac[t2, 2])
            for c in range(n_free):
                g_out[s, c] += w_out[f, c] * grad[c]
                g_in[s, c] += w_in[f, c] * grad[c]
                grad[c] = 0.0
            for e in range(n_pairs):
                a = pair_a[e]
                b = pair_b[e]
                value = gram[a, b]
                gram[a, b] = 0.0
                oa = w_out[f, a]
                ob = w_out[f, b]
                ia = w_in[f, a]
                ib = w_in[f, b]
                d_out[s, a, b] += oa * ob * value
                d_in[s, a, b] += ia * ib * value
                up[s, a, b] += oa * ib * value
                if a != b:
                    up[s, b, a] += ob * ia * value
        for a in range(n_free):
            for b in range(a + 1, n_free):
                d_out[s, b, a] = d_out[s, a, b]
                d_in[s, b, a] = d_in[s, a, b]
    return d_out, d_in, up, g_out, g_in
