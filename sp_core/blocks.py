"""Symmetric block-tridiagonal linear systems, solved by block elimination (batched).

Fitting with fixed key times couples only neighbouring keys: a segment's in-betweens depend on
the tangents of its two keys. The normal equations are therefore block tridiagonal, with one
block per key, and block elimination solves them in O(K q^3) instead of O((K q)^3).
"""

from __future__ import annotations

import numpy as np


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
