"""Symmetric block-tridiagonal linear systems, solved by block elimination (batched).

Fitting with fixed key times couples only neighbouring keys: a segment's in-betweens depend on
the tangents of its two keys. The normal equations are therefore block tridiagonal, with one
block per key, and block elimination solves them in O(K q^3) instead of O((K q)^3).
"""

from __future__ import annotations

import numpy as np

#: Unknowns from which a system of scalar blocks (q = 1) is solved by a numba kernel
#: (:func:`sp_core._fit_kernels.tridiagonal_rows`, the same numbers; a channel fit of the
#: sample, 50 keys of 96 channels: 0.31 ms a system in numpy's loop over the keys, 0.06 ms in
#: the kernel). Smaller systems are quick in numpy and load no numba.
KERNEL_UNKNOWNS = 2_000


def solve_block_tridiagonal(diagonal: np.ndarray, upper: np.ndarray,
                            rhs: np.ndarray) -> np.ndarray:
    """Solve A x = rhs for symmetric positive definite block-tridiagonal A.

    Parameters
    ----------
    diagonal : (..., K, q, q) float64
        Diagonal blocks A[k, k].
    upper : (..., K - 1, q, q) float64
        Blocks A[k, k + 1]; A[k + 1, k] is their transpose.
    rhs : (..., K, q) float64

    Returns
    -------
    x : (..., K, q) float64

    Notes
    -----
    Block Thomas elimination without pivoting, which is stable for positive definite A (every
    Schur complement stays positive definite). Leading dimensions are independent systems.
    """
    n_keys = diagonal.shape[-3]
    if diagonal.shape[-1] == 1:
        if rhs.size >= KERNEL_UNKNOWNS and n_keys > 1:
            from sp_core._fit_kernels import tridiagonal_rows

            flat = (np.ascontiguousarray(a, dtype=np.float64).reshape(-1, a.shape[-1])
                    for a in (diagonal[..., 0, 0], upper[..., 0, 0], rhs[..., 0]))
            return tridiagonal_rows(*flat).reshape(rhs.shape)
        return _solve_tridiagonal(diagonal[..., 0, 0], upper[..., 0, 0], rhs[..., 0])[..., None]
    solve_for: list[np.ndarray] = []
    partial: list[np.ndarray] = []
    pivot = diagonal[..., 0, :, :]
    right = rhs[..., 0, :]
    for k in range(n_keys):
        if k > 0:
            lower = np.swapaxes(upper[..., k - 1, :, :], -1, -2)
            pivot = diagonal[..., k, :, :] - lower @ solve_for[k - 1]
            right = rhs[..., k, :] - (lower @ partial[k - 1][..., None])[..., 0]
        if k < n_keys - 1:
            both = np.linalg.solve(pivot, np.concatenate(
                [upper[..., k, :, :], right[..., None]], axis=-1))
            solve_for.append(both[..., :-1])
            partial.append(both[..., -1])
        else:
            partial.append(np.linalg.solve(pivot, right[..., None])[..., 0])
    x = np.empty_like(rhs)
    x[..., n_keys - 1, :] = partial[n_keys - 1]
    for k in range(n_keys - 2, -1, -1):
        x[..., k, :] = partial[k] - (solve_for[k] @ x[..., k + 1, :][..., None])[..., 0]
    return x


def _solve_tridiagonal(diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The q = 1 case with scalar blocks: Thomas elimination by division, (..., K) arrays.

    One slope or one key value per key is the common case (unified tangents, fitted key
    values); batched ``np.linalg.solve`` on 1 × 1 blocks costs a LAPACK call per key.
    """
    n_keys = diagonal.shape[-1]
    factor = np.empty_like(diagonal)
    partial = np.empty_like(rhs)
    pivot = diagonal[..., 0]
    partial[..., 0] = rhs[..., 0] / pivot
    for k in range(1, n_keys):
        factor[..., k - 1] = upper[..., k - 1] / pivot
        pivot = diagonal[..., k] - upper[..., k - 1] * factor[..., k - 1]
        partial[..., k] = (rhs[..., k] - upper[..., k - 1] * partial[..., k - 1]) / pivot
    x = np.empty_like(rhs)
    x[..., -1] = partial[..., -1]
    for k in range(n_keys - 2, -1, -1):
        x[..., k] = partial[..., k] - factor[..., k] * x[..., k + 1]
    return x


def solve_segment_pairs(diagonal: np.ndarray, upper: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve a two-slot system whose keys are tied only through their segments.

    For broken tangents without the smooth term (channel space) a key's in slope (slot 0) and
    out slope (slot 1) share no term: A[k, k] is diagonal and A[k, k + 1] holds only its
    (1, 0) entry (the segment's out and in slopes). The system is then one 2 × 2 system per
    segment in (out_k, in_k+1), plus the first key's in slope and the last key's out slope
    alone, solved in closed form. The result equals :func:`solve_block_tridiagonal` to
    rounding; entries this structure leaves out are not read.

    Parameters
    ----------
    diagonal : (..., K, 2, 2) float64
        Diagonal blocks; only their diagonals are read.
    upper : (..., K - 1, 2, 2) float64
        Blocks A[k, k + 1]; only their (1, 0) entries are read.
    rhs : (..., K, 2) float64

    Returns
    -------
    x : (..., K, 2) float64
    """
    a = diagonal[..., :-1, 1, 1]  # out slope of each segment's first key
    d = diagonal[..., 1:, 0, 0]  # in slope of its second key
    b = upper[..., :, 1, 0]
    r_out = rhs[..., :-1, 1]
    r_in = rhs[..., 1:, 0]
    det = a * d - b * b  # positive: the 2 x 2 blocks are positive definite
    x = np.empty_like(rhs)
    x[..., :-1, 1] = (d * r_out - b * r_in) / det
    x[..., 1:, 0] = (a * r_in - b * r_out) / det
    x[..., 0, 0] = rhs[..., 0, 0] / diagonal[..., 0, 0, 0]
    x[..., -1, 1] = rhs[..., -1, 1] / diagonal[..., -1, 1, 1]
    return x
