"""``line-sse``: the thesis' robust variant, a sum of squared time-aligned distances."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sp_core.costs.base import Cost, empty_table, fill_in_blocks, register


@register
class LineSSE(Cost):
    """Sum over i < k < j of the squared distance from pose k to the linear in-between.

    Computed in O(n_pairs × n_dims) from prefix sums of the poses, not by visiting every frame
    of every pair. The table is in squared pose units.
    """

    name = "line-sse"
    squared = True
    description = "sum of squared distances from the in-between poses to linear in-betweens"
    steps_per_second = 2.0e9
    buffers = "prefix sums"

    def row_work(self, n: int, dims: int, candidates: np.ndarray, band: int, max_gap: int,
                 lowest: np.ndarray | None = None) -> np.ndarray:
        # rows are the later key: its partners, each O(n_dims)
        return (np.minimum(np.arange(len(candidates)), band) + 1.0) * dims

    def extra_bytes(self, n: int, dims: int, max_gap: int) -> int:
        # the prefix sums, and three transposed copies of candidate rows (at most n each)
        return 8 * (n + 1) * (2 * dims + 1) + 24 * n * dims

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None,
              progress: Callable[[float], None] | None = None) -> np.ndarray:
        from sp_core import _kernels

        candidates = np.ascontiguousarray(candidates, dtype=np.int64)
        m = len(candidates)
        s1, sk, sq = _kernels.prefix_sums(poses)
        # the earlier key's rows, candidate-ordered and transposed for the kernel's vector loop
        earlier = np.ascontiguousarray(poses[candidates].T)
        earlier_s1 = np.ascontiguousarray(s1[candidates + 1].T)
        earlier_sk = np.ascontiguousarray(sk[candidates + 1].T)
        table = empty_table(m, band)
        work = self.row_work(*poses.shape, candidates, band, max_gap)

        def fill(first: int, stop: int) -> None:
            _kernels.sse_rows(poses, s1, sk, sq, earlier, earlier_s1, earlier_sk, candidates,
                              band, max_gap, table, first, stop)
        fill_in_blocks(work, fill, progress)
        return table
