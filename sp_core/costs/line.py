"""Shared machinery of the costs that compare in-between poses with a line through the keys."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from sp_core.costs.base import Cost, empty_table, fill_in_blocks
from sp_core.threads import single_threaded_blas


@single_threaded_blas()
def gram_bands(poses: np.ndarray, width: int, block: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Dot products of poses at most ``width`` frames apart, in two contiguous layouts.

    Computed by BLAS one block of rows at a time: each block's products with the frames
    around it form a small matrix whose diagonals are the bands, so memory stays
    O(block x (block + 2 width)) however long the clip. One BLAS thread per product
    (:func:`sp_core.threads.single_threaded_blas`): with two, OpenBLAS split the products
    differently and the sample's bands differed by up to 2e-11, so the tables' last digits,
    and with them a tie between two selections, depended on the machine's cores. The blocks
    are shared out between as many Python threads as numba may use here instead (BLAS
    releases the GIL): every product keeps its shape and its one thread, so the bands are the
    same to the bit however many threads run (a fifth of a 1,100-frame selection on one).

    Parameters
    ----------
    poses : (n, n_dims) float64
    width : int
        Widest frame distance needed; clamped to n - 1.
    block : int
        Rows per matrix product.

    Returns
    -------
    forward : (n, width + 1) float64
        ``forward[i, e] = poses[i] . poses[i + e]`` (0 past the end).
    backward : (n, width + 1) float64
        ``backward[j, c] = poses[j] . poses[j - width + c]`` (0 before the start): row j holds
        the products with the frames before j in ascending order, ending with j itself.
    """
    n = poses.shape[0]
    width = max(0, min(width, n - 1))
    forward = np.empty((n, width + 1))
    backward = np.empty((n, width + 1))
    starts = range(0, n, block)

    def products(share: range) -> None:
        # One product per block: its rows with every frame within ``width`` of them, before
        # and after, in ``line`` whose column q is frame start - width + q. Both bands are
        # its diagonals (the products of a pose with the frames after it, and with those up
        # to it), so each dot product is made once; two products, with the frames after and
        # with the frames before, made the ones in between twice (2.5x the multiply-adds on
        # a clip's whole triangle, where the frames before the first rows were zero rows).
        line = np.zeros((block, block + 2 * width))
        diagonals = {q: np.lib.stride_tricks.as_strided(
            line[:, q:], shape=(block, width + 1),
            strides=(line.strides[0] + line.strides[1], line.strides[1]), writeable=False)
            for q in (0, width)}
        for start in share:
            rows = min(block, n - start)
            lo, hi = max(0, start - width), min(n, start + rows + width)
            q_lo, q_hi = lo - (start - width), hi - (start - width)
            # frames outside the clip are zero (an earlier block's frames may sit there)
            line[:rows, :q_lo] = 0.0
            line[:rows, q_hi:] = 0.0
            np.matmul(poses[start:start + rows], poses[lo:hi].T, out=line[:rows, q_lo:q_hi])
            forward[start:start + rows] = diagonals[width][:rows]
            backward[start:start + rows] = diagonals[0][:rows]

    from numba import get_num_threads

    threads = min(get_num_threads(), len(starts))
    failed: list[BaseException] = []

    def share(t: int) -> None:
        try:
            products(starts[t::threads])
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread below
            failed.append(exc)

    helpers = [threading.Thread(target=share, args=(t,), name="salient-poses-gram")
               for t in range(1, threads)]
    for helper in helpers:
        helper.start()
    try:
        products(starts[::threads])
    finally:
        for helper in helpers:
            helper.join()
    if failed:  # (bands with a helper's rows unset would make a table of garbage)
        raise failed[0]
    return forward, backward


class GramLineCost(Cost):
    """A line cost computed from Gram bands (see :func:`sp_core._kernels.line_rows`).

    Subclasses choose the distance with :attr:`timed`: False for the perpendicular distance to
    the line, True for the distance to the time-aligned point on it.
    """

    timed: ClassVar[bool] = False
    steps_per_second = 5.0e9  # measured 5.8-6.9e9 (line-max, 1,100 to 10,000 frames, idle)
    buffers = "Gram bands"

    def row_work(self, n: int, dims: int, candidates: np.ndarray, band: int, max_gap: int,
                 lowest: np.ndarray | None = None) -> np.ndarray:
        # rows are the earlier key: its partners times their mean span (frames visited),
        # plus its share of the Gram bands (BLAS, about one step per product and frame pair)
        m = len(candidates)
        reach = np.minimum(max_gap, n - 1 - candidates)
        partners = np.minimum(np.searchsorted(candidates, candidates + reach, side="right")
                              - 1 - np.arange(m), band)
        gram = (min(max_gap, n - 1) + 1) * (dims + 8) * n / m
        return partners * (reach / 2.0 + 1.0) + reach + 1.0 + gram

    def extra_bytes(self, n: int, dims: int, max_gap: int) -> int:
        return 16 * n * (min(max_gap, n - 1) + 1)  # the two Gram bands

    def table(self, poses: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, lowest: np.ndarray | None = None,
              progress: Callable[[float], None] | None = None) -> np.ndarray:
        forward, backward = gram_bands(poses, max_gap)
        candidates = np.ascontiguousarray(candidates, dtype=np.int64)
        table = empty_table(len(candidates), band)
        work = self.row_work(*poses.shape, candidates, band, max_gap)

        from sp_core import _kernels

        def fill(first: int, stop: int) -> None:
            _kernels.line_rows(forward, backward, candidates, band, max_gap, self.timed, table,
                               first, stop)
        fill_in_blocks(work, fill, progress)
        return table
