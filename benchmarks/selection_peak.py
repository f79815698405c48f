"""The selection (line-max table + DP over every K ≤ N/2) against a plain numpy reference and
against the machine's measured peak.

The reference computes the same table with vectorised numpy, one first key at a time (the
distances of every in-between to every line from that key in one array), and the same DP one
key count at a time (a vectorised min over max). The peak is what numpy's BLAS reaches on a
large matrix product with every core (the practical ceiling of fused multiply-adds on this
machine), measured in the same run.
"""

from __future__ import annotations

import time

import numpy as np


def reference_table(poses: np.ndarray) -> np.ndarray:
    """(n, n) line-max costs, ``table[i, j]`` for i < j (inf elsewhere), in plain numpy: for
    each first key i, the distances of every later frame k to the line to every later key j
    in one (k, j) array, masked to k < j."""
    n = len(poses)
    table = np.full((n, n), np.inf)
    for i in range(n - 1):
        rest = poses[i + 1:] - poses[i]  # rows: frames i + 1 .. n - 1 (as k and as j)
        squares = np.einsum("kd,kd->k", rest, rest)
        dots = rest @ rest.T  # (k, j)
        with np.errstate(divide="ignore", invalid="ignore"):
            squared = squares[:, None] - np.where(squares[None, :] > 0,
                                                  dots * dots / squares[None, :], 0.0)
        squared[np.tril_indices(len(rest))] = 0.0  # only k < j counts
        table[i, i + 1:] = np.sqrt(np.maximum(squared.max(axis=0), 0.0))
    return table


def reference_select(table: np.ndarray, max_keys: int) -> np.ndarray:
    """(max_keys + 1,) best largest segment cost of K keys from the first to the last frame."""
    n = len(table)
    error = np.full(n, np.inf)
    error[0] = 0.0
    best = np.full(max_keys + 1, np.inf)
    for keys in range(2, max_keys + 1):
        error = np.min(np.maximum(error[:, None], table), axis=0)
        best[keys] = error[-1]
    return best


def operations(n: int, max_keys: int) -> tuple[float, float]:
    """Floating-point operations of the engine's line-max table (6 per in-between of every
    pair: two subtractions, a product, a multiply-add, the max) and comparisons of its DP (2 per
    allowed previous key of every cell: the max and the min)."""
    spans = np.arange(1, n)
    table = 6.0 * float(np.sum((n - spans) * (spans - 1)))
    dp = 2.0 * sum(float(np.sum(np.arange(keys - 1, n) - (keys - 2))) for keys in
                   range(2, max_keys + 1))
    return table, dp


def machine_peak(size: int = 2000, repeat: int = 3) -> float:
    """Floating-point operations per second of numpy's matrix product (all cores)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(size, size)), rng.normal(size=(size, size))
    a @ b  # noqa: B018 - BLAS warmed
    best = np.inf
    for _ in range(repeat):
        started = time.perf_counter()
        a @ b  # noqa: B018
        best = min(best, time.perf_counter() - started)
    return 2.0 * size**3 / best


def measure(poses: np.ndarray, repeat: int) -> dict[str, float]:
    """Seconds of the engine and of the reference on ``poses`` (all K ≤ N/2), the operations
    per second the engine reached and the machine's peak; the two agree on every K."""
    from sp_core.selection import SelectionSpace

    n = len(poses)
    max_keys = n // 2
    SelectionSpace(poses[:100])  # kernels loaded
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        space = SelectionSpace(poses, max_keys=max_keys)
        times.append(time.perf_counter() - started)
    engine = float(np.median(times))
    started = time.perf_counter()
    best = reference_select(reference_table(poses - poses.mean(axis=0)), max_keys)
    reference = time.perf_counter() - started
    ks = np.arange(2, max_keys + 1)
    np.testing.assert_allclose([space.error(int(k)) for k in ks], best[ks], rtol=1e-6,
                               atol=1e-9)
    table_ops, dp_ops = operations(n, max_keys)
    return {"engine_s": engine, "reference_s": reference,
            "rate": (table_ops + dp_ops) / engine, "peak": machine_peak()}
