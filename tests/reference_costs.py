"""Plain-numpy references for the cost tables and a brute-force selection, for the tests."""

from __future__ import annotations

import itertools

import numpy as np


def pair_cost(poses: np.ndarray, i: int, j: int, name: str) -> float:
    """Cost of keys i < j computed directly from the poses."""
    if j - i < 2:
        return 0.0
    a, b = poses[i], poses[j]
    inner = poses[i + 1:j]
    if name == "line-max":
        direction = b - a
        length = np.linalg.norm(direction)
        if length == 0:
            return float(np.linalg.norm(inner - a, axis=1).max())
        u = direction / length
        rel = inner - a
        perp = rel - np.outer(rel @ u, u)
        return float(np.linalg.norm(perp, axis=1).max())
    if name in ("curve-max", "curve-sse"):
        u = (np.arange(i + 1, j) - i) / (j - i)
        basis = np.column_stack([u**3 - 2 * u**2 + u, u**3 - u**2])  # h10, h11
        base = np.outer(2 * u**3 - 3 * u**2 + 1, a) + np.outer(-2 * u**3 + 3 * u**2, b)
        tangents, *_ = np.linalg.lstsq(basis, inner - base, rcond=None)
        distances = np.linalg.norm(inner - base - basis @ tangents, axis=1)
        return float(distances.max() if name == "curve-max" else np.sum(distances**2))
    t = (np.arange(i + 1, j) - i)[:, None] / (j - i)
    residual = inner - (a + t * (b - a))
    squared = np.sum(residual**2, axis=1)
    if name == "line-time":
        return float(np.sqrt(squared.max()))
    if name == "line-sse":
        return float(squared.sum())
    raise ValueError(name)


def full_table(poses: np.ndarray, name: str) -> np.ndarray:
    n = len(poses)
    table = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(i + 1, n):
            table[i, j] = pair_cost(poses, i, j, name)
    return table


def brute_force(table: np.ndarray, keys: int, compose: str, pins=(), candidates=None,
                max_span=None) -> float:
    """Best composed cost over every selection of ``keys`` frames (inf if none is allowed)."""
    n = table.shape[0]
    interior = [c for c in (range(1, n - 1) if candidates is None else candidates)
                if 0 < c < n - 1]
    best = np.inf
    for chosen in itertools.combinations(interior, keys - 2):
        frames = [0, *chosen, n - 1]
        if not set(pins) <= set(frames):
            continue
        gaps = np.diff(frames)
        if max_span is not None and gaps.max() > max_span:
            continue
        costs = [table[a, b] for a, b in itertools.pairwise(frames)]
        value = sum(costs) if compose == "sum" else max(costs)
        best = min(best, value)
    return best
