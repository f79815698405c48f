"""numba kernels for the error tables and the dynamic programme (private; use the Python API).

Tables are *banded by the later key*: ``table[b, d]`` is the cost of candidates ``b - d`` and
``b``. With ``max_span`` the band is narrow and long clips stay linear in length; without it the
band is the whole triangle. Both kernels parallelise over the later key with ``prange``.

The line costs need only dot products between poses, so they read a banded Gram matrix instead
of the poses: each (i, k, j) triple then costs O(1) instead of O(n_dims), which is what makes the
O(N^3) table fast. Two layouts of the same Gram band are kept so that both inner-loop reads are
contiguous.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def gram_bands(poses: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Dot products of poses at most ``width`` frames apart.

    Parameters
    ----------
    poses : (n, n_dims) float64
    width : int

    Returns
    -------
    forward : (n, width + 1) float64
        ``forward[i, e] = poses[i] . poses[i + e]`` (0 past the end).
    backward : (n, width + 1) float64
        ``backward[j, c] = poses[j] . poses[j - width + c]`` (0 before the start): row j holds
        the products with the frames before j in ascending order, ending with j itself.
    """
    n, dims = poses.shape
    forward = np.zeros((n, width + 1))
    backward = np.zeros((n, width + 1))
    for i in prange(n):
        for e in range(min(width, n - 1 - i) + 1):
            s = 0.0
            for c in range(dims):
                s += poses[i, c] * poses[i + e, c]
            forward[i, e] = s
    for j in prange(n):
        for e in range(min(width, j) + 1):
            backward[j, width - e] = forward[j - e, e]
    return forward, backward


@njit(cache=True, parallel=True, fastmath=True)
def line_table(forward: np.ndarray, backward: np.ndarray, candidates: np.ndarray, band: int,
               max_gap: int, timed: bool) -> np.ndarray:
    """``line-max`` (``timed=False``) or ``line-time`` (``timed=True``) table from Gram bands.

    For keys i < j and a frame k between them, with a = p_k - p_i and b = p_j - p_i:
    perpendicular distance^2 = |a|^2 - (a.b)^2 / |b|^2; time-aligned distance^2 =
    |a|^2 - 2 t a.b + t^2 |b|^2 with t = (k - i) / (j - i). Every term is a Gram entry, read
    from contiguous rows. (numba does not vectorise this loop's max reduction yet; see
    docs/performance.md.)
    """
    m = candidates.shape[0]
    width = forward.shape[1] - 1
    squares = forward[:, 0].copy()
    table = np.full((m, band + 1), np.inf)
    for bi in prange(m):
        table[bi, 0] = 0.0
        j = candidates[bi]
        gjj = squares[j]
        to_j = backward[j]
        for d in range(1, band + 1):
            ai = bi - d
            if ai < 0:
                break
            i = candidates[ai]
            span = j - i
            if span > max_gap:
                break
            from_i = forward[i]
            gii = squares[i]
            gij = from_i[span]
            bb = gjj - 2.0 * gij + gii
            worst = 0.0
            if timed:
                inv_span = 1.0 / span
                for k in range(i + 1, j):
                    gik = from_i[k - i]
                    aa = squares[k] - 2.0 * gik + gii
                    ab = to_j[k - j + width] - gik - gij + gii
                    t = (k - i) * inv_span
                    worst = max(worst, aa - 2.0 * t * ab + t * t * bb)
            elif bb > 1e-300:
                inv_bb = 1.0 / bb
                for k in range(i + 1, j):
                    gik = from_i[k - i]
                    aa = squares[k] - 2.0 * gik + gii
                    ab = to_j[k - j + width] - gik - gij + gii
                    worst = max(worst, aa - ab * ab * inv_bb)
            else:  # the keys coincide: distance to that point
                for k in range(i + 1, j):
                    worst = max(worst, squares[k] - 2.0 * from_i[k - i] + gii)
            table[bi, d] = np.sqrt(max(worst, 0.0))
    return table


@njit(cache=True, parallel=True)
def sse_table(poses: np.ndarray, candidates: np.ndarray, band: int, max_gap: int) -> np.ndarray:
    """``line-sse`` table in O(pairs × n_dims) from prefix sums.

    With S = sum p_k, W = sum k p_k and Q = sum |p_k|^2 over i < k < j, L = j - i, b = p_j - p_i:
    sum |p_k - p_i - t_k b|^2 = Q + (L-1)|p_i|^2 + |b|^2 sum t^2 - 2 p_i.S - 2 b.(W - i S)/L
    + 2 (p_i.b) sum t, where sum t = (L-1)/2 and sum t^2 = (L-1)(2L-1)/(6L).
    """
    n, dims = poses.shape
    m = candidates.shape[0]
    s1 = np.zeros((n + 1, dims))
    sk = np.zeros((n + 1, dims))
    sq = np.zeros(n + 1)
    for k in range(n):
        q = 0.0
        for c in range(dims):
            s1[k + 1, c] = s1[k, c] + poses[k, c]
            sk[k + 1, c] = sk[k, c] + k * poses[k, c]
            q += poses[k, c] * poses[k, c]
        sq[k + 1] = sq[k] + q
    table = np.full((m, band + 1), np.inf)
    for bi in prange(m):
        table[bi, 0] = 0.0
        j = candidates[bi]
        for d in range(1, band + 1):
            ai = bi - d
            if ai < 0:
                break
            i = candidates[ai]
            span = j - i
            if span > max_gap:
                break
            if span == 1:
                table[bi, d] = 0.0
                continue
            pi_pi = 0.0
            bb = 0.0
            pi_s = 0.0
            b_w = 0.0
            pi_b = 0.0
            for c in range(dims):
                pic = poses[i, c]
                bc = poses[j, c] - pic
                s = s1[j, c] - s1[i + 1, c]
                w = sk[j, c] - sk[i + 1, c] - i * s
                pi_pi += pic * pic
                bb += bc * bc
                pi_s += pic * s
                b_w += bc * w
                pi_b += pic * bc
            inner = span - 1.0
            sum_t = inner / 2.0
            sum_t2 = inner * (2.0 * span - 1.0) / (6.0 * span)
            total = (sq[j] - sq[i + 1] + inner * pi_pi + bb * sum_t2 - 2.0 * pi_s
                     - 2.0 * b_w / span + 2.0 * pi_b * sum_t)
            table[bi, d] = max(total, 0.0)
    return table


@njit(cache=True, parallel=True)
def select(table: np.ndarray, lowest: np.ndarray, max_keys: int,
           use_sum: bool) -> tuple[np.ndarray, np.ndarray]:
    """Optimal selections for every key count up to ``max_keys`` (one dynamic programme).

    Parameters
    ----------
    table : (m, band + 1) float64
        Banded cost table (see module docstring).
    lowest : (m,) int64
        Earliest candidate allowed before each candidate as the previous key (pins and spans).
    max_keys : int
    use_sum : bool
        Compose segment costs by sum (True) or by max (False).

    Returns
    -------
    error : (max_keys + 1, m) float64
        ``error[K, b]``: best composed cost of K keys from candidate 0 to candidate b (inf if
        impossible).
    previous : (max_keys + 1, m) int32
        The key before b in that best selection (-1 if none).
    """
    m, width = table.shape
    error = np.full((max_keys + 1, m), np.inf)
    previous = np.full((max_keys + 1, m), -1, dtype=np.int32)
    error[1, 0] = 0.0
    for keys in range(2, max_keys + 1):
        for b in prange(keys - 1, m):
            best = np.inf
            arg = -1
            low = max(lowest[b], keys - 2, b - width + 1)
            for a in range(b - 1, low - 1, -1):
                before = error[keys - 1, a]
                cost = table[b, b - a]
                value = before + cost if use_sum else max(before, cost)
                if value < best:
                    best = value
                    arg = a
            error[keys, b] = best
            previous[keys, b] = arg
    return error, previous
