"""The selection DP as it was before the memory-lean kernel: every row of errors and int32
back-pointers kept (``error`` and ``previous`` of shape (max_keys + 1, m)). The lean kernel
(:func:`sp_core._kernels.select_rows`) must give identical errors and keys."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_INF_BITS = 0x7FF0000000000000  # the bit pattern of +inf


@njit(parallel=True, fastmath={"nsz", "arcp", "contract", "reassoc"})
def dense_select(table: np.ndarray, lowest: np.ndarray, max_keys: int, use_sum: bool,
                 chunks: int) -> tuple[np.ndarray, np.ndarray]:
    m, width = table.shape
    error = np.full((max_keys + 1, m), np.inf)
    previous = np.full((max_keys + 1, m), -1, dtype=np.int32)
    error[1, 0] = 0.0
    for keys in range(2, max_keys + 1):
        before = error[keys - 1]
        for chunk in prange(chunks):
            value = np.empty(width)
            bits = value.view(np.int64)
            for b in range(keys - 1 + chunk, m, chunks):
                costs = table[b]
                top = b - max(lowest[b], keys - 2, b - width + 1)
                if use_sum:
                    for d in range(1, top + 1):
                        value[d - 1] = before[b - d] + costs[d]
                else:
                    for d in range(1, top + 1):
                        x = before[b - d]
                        y = costs[d]
                        value[d - 1] = x if x > y else y
                lowest_bits = np.int64(_INF_BITS)
                for e in range(top):
                    lowest_bits = bits[e] if bits[e] < lowest_bits else lowest_bits
                if lowest_bits == _INF_BITS:
                    continue
                for d in range(top):
                    if bits[d] == lowest_bits:
                        error[keys, b] = value[d]
                        previous[keys, b] = b - 1 - d
                        break
    return error, previous


def dense_keyframes(previous: np.ndarray, candidates: np.ndarray, keys: int) -> np.ndarray:
    """Backtrack ``keys`` keys from the last candidate (candidate indices -> frames)."""
    out = np.empty(keys, dtype=np.int64)
    b = len(candidates) - 1
    for slot in range(keys - 1, -1, -1):
        out[slot] = candidates[b]
        b = int(previous[slot + 1, b])
    return out
