"""numba kernels for the error tables and the dynamic programme (private; use the Python API).

Tables are *banded by the later key*: ``table[b, d]`` is the cost of candidates ``b - d`` and
``b``. With ``max_span`` the band is narrow and long clips stay linear in length; without it the
band is the whole triangle. The kernels fill the table one block of rows per call and solve the
DP a few key counts per call, so Python can report progress and cancel in between; each
parallelises with ``prange`` (the DP's threads meet between key counts inside one call, see
:func:`select_rows`). Minima and maxima are taken on int64 bit patterns (:func:`_bits`), which
numba vectorises.
The long kernels release the GIL (``nogil``), so the panel's event loop keeps running while an
analysis runs in its worker thread.

The line costs need only dot products between poses, so they read a banded Gram matrix
(:func:`sp_core.costs.line.gram_bands`) instead of the poses: each (i, k, j) triple then costs
O(1) instead of O(n_dims), which is what makes the O(N^3) table fast. Two layouts of the same
Gram band are kept so that both inner-loop reads are contiguous.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from sp_core.threads import TakingTurns

# Contraction (fused multiply-adds) and reciprocals only: the tables and the DP hold inf, so the
# "no inf / no NaN" fast-math assumptions would be wrong; with reassociation too, a process
# that compiled the line kernels computed other last digits of their tables than one that
# loaded the same kernels from numba's cache (so a first run after installing could choose
# other keys than every later run on a tie).
_FAST = {"nsz", "arcp", "contract"}
_INF_BITS = 0x7FF0000000000000  # the bit pattern of +inf


@intrinsic
def _bits(typingctx, x):  # type: ignore[no-untyped-def]
    """The int64 bit pattern of a float64 (an LLVM bitcast: no instruction, no memory)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _float(typingctx, x):  # type: ignore[no-untyped-def]
    """The float64 whose bit pattern is the int64 ``x`` (inverse of :func:`_bits`)."""
    if x != types.int64:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


def _counter_pointer(context, builder, signature, args):  # type: ignore[no-untyped-def]
    """Address of ``counts[index]`` (no negative-index wraparound)."""
    array_type = signature.args[0]
    array = context.make_array(array_type)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, array_type, array, [args[1]])


def _is_counter(counts) -> bool:  # type: ignore[no-untyped-def]
    return isinstance(counts, types.Array) and counts.dtype == types.int64 and counts.ndim == 1


@intrinsic
def _add(typingctx, counts, index, value):  # type: ignore[no-untyped-def]
    """``counts[index] += value`` as one atomic, sequentially consistent step (a full memory
    barrier: every write before it is seen by a thread that reads the new count); returns the
    count before."""
    if not _is_counter(counts):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        pointer = _counter_pointer(context, builder, signature, args)
        return builder.atomic_rmw("add", pointer, args[2], "seq_cst")
    return types.int64(counts, types.intp, types.int64), codegen


@intrinsic
def _load(typingctx, counts, index):  # type: ignore[no-untyped-def]
    """``counts[index]``, read atomically with acquire order (reads after it see every write
    made before the :func:`_add` that produced the value)."""
    if not _is_counter(counts):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        pointer = _counter_pointer(context, builder, signature, args)
        return builder.load_atomic(pointer, "acquire", 8)
    return types.int64(counts, types.intp), codegen


#: Earlier keys :func:`line_rows` takes together: every later key's Gram row is then read from
#: memory once for the whole tile instead of once per earlier key (the band of a 1,100-frame
#: clip is 9.7 MB, past the per-core caches).
_LINE_TILE = 16
#: Later keys :func:`line_rows` takes together for one earlier key (:func:`_four_line_max`).
_LINE_LATER = 4


@TakingTurns
@njit(cache=True, parallel=True, nogil=True, fastmath=_FAST)
def line_rows(forward: np.ndarray, backward: np.ndarray, candidates: np.ndarray, band: int,
              max_gap: int, timed: bool, table: np.ndarray, first: int, stop: int) -> None:
    """``line-max`` (``timed=False``) or ``line-time`` (``timed=True``) table from Gram bands,
    for the pairs whose *earlier* key is candidate ``first .. stop - 1``.

    ``table`` is (m, band + 1) float64, filled with inf by the caller; one call writes
    ``table[ai, 0] = 0`` and ``table[ai + d, d]`` for the block's ``ai``, so blocks are
    independent and Python can report progress (or cancel) between them.

    For keys i < j and a frame k = i + e between them, with a = p_k - p_i and b = p_j - p_i:
    perpendicular distance^2 = |a|^2 - (a.b)^2 / |b|^2; time-aligned distance^2 =
    |a|^2 - 2 t a.b + t^2 |b|^2 with t = e / (j - i).

    |a|^2 and p_k.p_i - |p_i|^2 are computed once per (i, k) and shared by every j; then
    a.b = p_k.p_j - (p_k.p_i - |p_i|^2) - p_i.p_j is one read per triple. The earlier keys
    are taken :data:`_LINE_TILE` at a time, and the later keys :data:`_LINE_LATER` at a time:
    their Gram rows are then loaded once for the whole tile and stay in the core's cache while
    every earlier key of the tile reads them, and each earlier key's |a|^2 and a.b terms are
    loaded once for the four later keys (line-max: :func:`_four_line_max`; 1.6x faster than
    one later key at a time on the sample's table). Tiles are taken in pairs from both ends so
    the threads get equal work. The maximum over a span is taken on the distances' int64 bit
    patterns (:func:`_bits`, in the same loop): non-negative doubles order like their bit
    patterns, negative rounding noise falls below 0, and numba vectorises an integer max
    reduction but not a floating-point one. Every entry is the same expression whatever the
    tiling, and a maximum does not depend on the order it is taken in, so the table does not
    either.
    """
    m = candidates.shape[0]
    n = forward.shape[0]
    width = forward.shape[1] - 1
    squares = forward[:, 0]
    tiles = (stop - first + _LINE_TILE - 1) // _LINE_TILE
    for r in prange((tiles + 1) // 2):
        for side in range(2):
            tile = np.int64(r) if side == 0 else tiles - 1 - np.int64(r)
            if side == 1 and tile == r:
                break
            lo = first + tile * _LINE_TILE
            hi = min(lo + _LINE_TILE, stop)
            # per earlier key of the tile: |p_{i+e} - p_i|^2 and p_{i+e}.p_i - |p_i|^2, and
            # its last later key (within the band and max_gap)
            aa = np.empty((hi - lo, width + 1))
            cc = np.empty((hi - lo, width + 1))
            last = np.empty(hi - lo, dtype=np.int64)
            for t in range(hi - lo):
                ai = lo + t
                table[ai, 0] = 0.0
                i = candidates[ai]
                gii = squares[i]
                reach = min(max_gap, n - 1 - i, width)
                from_i = forward[i]
                for e in range(reach + 1):
                    aa[t, e] = squares[i + e] - 2.0 * from_i[e] + gii
                    cc[t, e] = from_i[e] - gii
                last[t] = min(ai + band, np.searchsorted(candidates, i + reach, "right") - 1)
            for b0 in range(lo + 1, min(hi - 1 + band, m - 1) + 1, _LINE_LATER):
                for t in range(hi - lo):
                    ai = lo + t
                    first_b = max(b0, ai + 1)
                    last_b = min(b0 + _LINE_LATER - 1, last[t])
                    if last_b < first_b:
                        continue
                    i = candidates[ai]
                    if last_b - first_b == _LINE_LATER - 1 and not timed and _four_line_max(
                            backward, forward[i], aa[t], cc[t], i, candidates[first_b:],
                            table, first_b, first_b - ai):
                        continue
                    for bi in range(first_b, last_b + 1):
                        span = candidates[bi] - i
                        table[bi, bi - ai] = _line_max(backward[candidates[bi]], aa[t], cc[t],
                                                       forward[i, span], width - span, span,
                                                       timed)


@njit(cache=True, inline="always", fastmath=_FAST)
def _four_line_max(backward: np.ndarray, from_i: np.ndarray, aa: np.ndarray, cc: np.ndarray,
                   i: int, later: np.ndarray, table: np.ndarray, b: int, d: int) -> bool:
    """:func:`_line_max` (line-max) of earlier key ``i`` with the four later keys
    ``later[0..3]`` (frames, increasing), written to ``table[b + q, d + q]``: one pass over
    the frames before the nearest of them, in which each frame's ``aa`` and ``cc`` are loaded
    once for the four (each distance is :func:`_line_max`'s expression, so the entries are
    its own), then the few frames that only the farther ones span. False, with nothing
    written, where any pair's keys coincide (:func:`_line_max` handles that case).
    ``from_i`` is ``forward[i]``; ``backward``, ``aa`` and ``cc`` as in :func:`line_rows`."""
    width = from_i.shape[0] - 1
    s0, s1, s2, s3 = later[0] - i, later[1] - i, later[2] - i, later[3] - i
    bb0, bb1, bb2, bb3 = aa[s0], aa[s1], aa[s2], aa[s3]
    if not (bb0 > 1e-300 and bb1 > 1e-300 and bb2 > 1e-300 and bb3 > 1e-300):
        return False
    r0, r1, r2, r3 = backward[later[0]], backward[later[1]], backward[later[2]], backward[later[3]]
    h0, h1, h2, h3 = width - s0, width - s1, width - s2, width - s3
    g0, g1, g2, g3 = from_i[s0], from_i[s1], from_i[s2], from_i[s3]
    i0, i1, i2, i3 = 1.0 / bb0, 1.0 / bb1, 1.0 / bb2, 1.0 / bb3
    w0 = w1 = w2 = w3 = 0
    for e in range(1, s0):  # (unsigned indices: contiguous loads, see _line_max)
        a, c = aa[e], cc[e]
        w0 = _worse(w0, r0[np.uint64(h0 + e)], a, c, g0, i0)
        w1 = _worse(w1, r1[np.uint64(h1 + e)], a, c, g1, i1)
        w2 = _worse(w2, r2[np.uint64(h2 + e)], a, c, g2, i2)
        w3 = _worse(w3, r3[np.uint64(h3 + e)], a, c, g3, i3)
    w1 = _tail_max(r1, h1, g1, i1, aa, cc, s0, s1, w1)
    w2 = _tail_max(r2, h2, g2, i2, aa, cc, s0, s2, w2)
    w3 = _tail_max(r3, h3, g3, i3, aa, cc, s0, s3, w3)
    table[b, d] = np.sqrt(_float(w0))
    table[b + 1, d + 1] = np.sqrt(_float(w1))
    table[b + 2, d + 2] = np.sqrt(_float(w2))
    table[b + 3, d + 3] = np.sqrt(_float(w3))
    return True


@njit(cache=True, inline="always", fastmath=_FAST)
def _tail_max(to_j: np.ndarray, shift: int, gij: float, inv_bb: float, aa: np.ndarray,
              cc: np.ndarray, start: int, stop: int, worst: np.int64) -> np.int64:
    """``worst`` and the squared line-max distances (bit patterns) of frames ``start ..
    stop - 1`` after key i, as :func:`_line_max` computes them (:func:`_four_line_max`'s
    frames that only its farther keys span; :func:`_line_max`'s own frames)."""
    for e in range(start, stop):
        worst = _worse(worst, to_j[np.uint64(shift + e)], aa[e], cc[e], gij, inv_bb)
    return worst


@njit(cache=True, inline="always", fastmath=_FAST)
def _worse(worst: np.int64, pj_pk: float, aa: float, cc: float, gij: float, inv_bb: float
           ) -> np.int64:
    """The larger of ``worst`` and the squared line-max distance of frame k = i + e as a bit
    pattern (see :func:`line_rows`): ``pj_pk`` = p_j . p_k, ``aa`` and ``cc`` at e, ``gij``
    = p_i . p_j, ``inv_bb`` = 1 / |p_j - p_i|^2."""
    ab = pj_pk - cc - gij
    x = _bits(aa - ab * ab * inv_bb)
    return x if x > worst else worst


@njit(cache=True, inline="always", fastmath=_FAST)
def _line_max(to_j: np.ndarray, aa: np.ndarray, cc: np.ndarray, gij: float, shift: int,
              span: int, timed: bool) -> float:
    """The largest distance of the frames strictly between keys i and j = i + ``span`` to
    their line (see :func:`line_rows`): ``to_j[shift + e]`` = p_j . p_{i+e}, ``aa[e]``,
    ``cc[e]`` as there, ``gij`` = p_i . p_j."""
    bb = aa[span]
    # to_j[shift + e] with an unsigned index: contiguous loads, not gathers (see
    # _best_previous); the largest squared distance, as a bit pattern (>= 0: see line_rows)
    worst = 0
    if timed:
        inv_span = 1.0 / span
        for e in range(1, span):
            ab = to_j[np.uint64(shift + e)] - cc[e] - gij
            t = e * inv_span
            x = _bits(aa[e] - 2.0 * t * ab + t * t * bb)
            worst = x if x > worst else worst
    elif bb > 1e-300:
        worst = _tail_max(to_j, shift, gij, 1.0 / bb, aa, cc, 1, span, worst)
    else:  # the keys coincide: distance to that point
        for e in range(1, span):
            x = _bits(aa[e])
            worst = x if x > worst else worst
    return np.sqrt(_float(worst))


@njit(cache=True, nogil=True)
def prefix_sums(poses: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Running sums of p_k, k p_k and |p_k|^2 for :func:`sse_rows`, each with a leading 0."""
    n, dims = poses.shape
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
    return s1, sk, sq


#: Earlier keys :func:`sse_rows` handles at once for one later key (vector lanes x unrolling).
_SSE_LANES = 32
#: Consecutive later keys :func:`sse_rows` handles at once, sharing each read of the earlier
#: keys' rows (they come from L2 or beyond: the rows of a wide band do not fit L1).
_SSE_LATER = 8


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def sse_rows(poses: np.ndarray, s1: np.ndarray, sk: np.ndarray, sq: np.ndarray,
             earlier: np.ndarray, earlier_s1: np.ndarray, earlier_sk: np.ndarray,
             candidates: np.ndarray, band: int, max_gap: int, table: np.ndarray, first: int,
             stop: int) -> None:
    """``line-sse`` table in O(pairs × n_dims) from prefix sums (:func:`prefix_sums`), for the
    pairs whose *later* key is candidate ``first .. stop - 1`` (``table`` filled with inf by
    the caller).

    With S = sum p_k, W = sum k p_k and Q = sum |p_k|^2 over i < k < j, L = j - i, b = p_j - p_i:
    sum |p_k - p_i - t_k b|^2 = Q + (L-1)|p_i|^2 + |b|^2 sum t^2 - 2 p_i.S - 2 b.(W - iS)/L
    + 2 (p_i.b) sum t, where sum t = (L-1)/2 and sum t^2 = (L-1)(2L-1)/(6L).

    The five dot products of a pair are summed over the dimensions in order, but for a tile
    of :data:`_SSE_LATER` later keys and up to :data:`_SSE_LANES` earlier keys at once: the
    innermost loop runs over earlier keys, reading the candidate-ordered, transposed
    ``earlier*`` arrays contiguously, so LLVM vectorises it across pairs without
    reassociating any sum (every pair's sums are bit for bit those of one pair at a time; a
    dimension-innermost loop cannot vectorise its reductions without reassociation), and the
    later keys of a tile share each read of the earlier keys' rows. Tiles are taken in pairs
    from both ends of the block (later keys have more partners) so the threads get equal
    work. Expanding the sums into three matrix products (BLAS) instead was tried and
    rejected: differences of large dot products lose most digits of short spans' costs
    (13 % error at a span of 2 frames on the sample, against 1e-5 here).

    Parameters
    ----------
    poses : (n, n_dims) float64
    s1, sk, sq : (n + 1, n_dims), (n + 1, n_dims), (n + 1,) float64
        Prefix sums (:func:`prefix_sums`).
    earlier, earlier_s1, earlier_sk : (n_dims, m) float64
        ``poses[candidates].T``, ``s1[candidates + 1].T``, ``sk[candidates + 1].T``.
    candidates : (m,) int64
    band, max_gap, table, first, stop
        As in :func:`line_rows`.
    """
    dims = poses.shape[1]
    tiles = (stop - first + _SSE_LATER - 1) // _SSE_LATER
    for r in prange((tiles + 1) // 2):
        acc = np.empty((5, _SSE_LATER, _SSE_LANES))
        low = np.empty(_SSE_LATER, np.int64)
        for side in range(2):
            tile = np.int64(r) if side == 0 else tiles - 1 - np.int64(r)
            if side == 1 and tile == r:
                break
            head = first + tile * _SSE_LATER
            later = min(_SSE_LATER, stop - head)
            for q in range(later):
                bi = head + q
                table[bi, 0] = 0.0
                j = candidates[bi]
                lo = bi  # earliest earlier key: within the band, the clip and max_gap
                while lo > 0 and bi - lo < band and j - candidates[lo - 1] <= max_gap:
                    lo -= 1
                low[q] = lo
            for start in range(low[0], head + later - 1, _SSE_LANES):
                count = min(_SSE_LANES, head + later - 1 - start)
                acc[:, :later, :count] = 0.0
                for c in range(dims):
                    p_row = earlier[c]
                    s1_row = earlier_s1[c]
                    sk_row = earlier_sk[c]
                    for q in range(later):
                        j = candidates[head + q]
                        pj = poses[j, c]
                        s1j = s1[j, c]
                        skj = sk[j, c]
                        pi_pi = acc[0, q]
                        bb = acc[1, q]
                        pi_s = acc[2, q]
                        b_w = acc[3, q]
                        pi_b = acc[4, q]
                        for x in range(count):
                            ai = np.uint64(start + x)  # no wraparound: vector loads
                            pic = p_row[ai]
                            bc = pj - pic
                            s = s1j - s1_row[ai]
                            w = skj - sk_row[ai] - candidates[ai] * s
                            pi_pi[x] += pic * pic
                            bb[x] += bc * bc
                            pi_s[x] += pic * s
                            b_w[x] += bc * w
                            pi_b[x] += pic * bc
                for q in range(later):
                    bi = head + q
                    j = candidates[bi]
                    for x in range(max(low[q] - start, 0), min(count, bi - start)):
                        ai = start + x
                        i = candidates[ai]
                        span = j - i
                        if span == 1:
                            table[bi, bi - ai] = 0.0
                            continue
                        inner = span - 1.0
                        sum_t = inner / 2.0
                        sum_t2 = inner * (2.0 * span - 1.0) / (6.0 * span)
                        total = (sq[j] - sq[i + 1] + inner * acc[0, q, x]
                                 + acc[1, q, x] * sum_t2 - 2.0 * acc[2, q, x]
                                 - 2.0 * acc[3, q, x] / span + 2.0 * acc[4, q, x] * sum_t)
                        table[bi, bi - ai] = max(total, 0.0)


@njit(cache=True, inline="always")
def _hermite(u: float) -> tuple[float, float, float, float]:
    """The cubic Hermite basis h00, h10, h01, h11 at parameter u."""
    u2 = u * u
    u3 = u2 * u
    return 2 * u3 - 3 * u2 + 1, u3 - 2 * u2 + u, -2 * u3 + 3 * u2, u3 - u2


@TakingTurns
@njit(cache=True, parallel=True, nogil=True, fastmath=_FAST)
def curve_rows(poses: np.ndarray, candidates: np.ndarray, band: int, max_gap: int,
               lowest: np.ndarray, table: np.ndarray, first: int, stop: int,
               total: bool = False) -> None:
    """``curve-max`` table: largest distance from the in-betweens to the least-squares cubic,
    for the pairs whose *later* key is candidate ``first .. stop - 1`` (``table`` filled with
    inf by the caller); with ``total``, the ``curve-sse`` table: the sum of their squared
    distances instead.

    For keys i < j (span L) and in-between k with u = (k - i) / L, the cubic is the Hermite
    curve h00 p_i + h10 m_i + h01 p_j + h11 m_j; the end tangents m_i, m_j (per unit u) solve the
    least-squares fit to the in-betweens, one 2x2 system shared by every dimension; with two or
    fewer in-betweens the fit is exact and the cost 0. O(L · D) per pair, so whole clips want a
    ``max_span``.
    """
    dims = poses.shape[1]
    for bi in prange(first, stop):
        table[bi, 0] = 0.0
        j = candidates[bi]
        rhs_i = np.empty(dims)
        rhs_j = np.empty(dims)
        tangent_i = np.empty(dims)
        tangent_j = np.empty(dims)
        for d in range(1, band + 1):
            ai = bi - d
            if ai < 0:
                break
            if ai < lowest[bi]:  # a pin lies between: the selection never uses this pair
                break
            i = candidates[ai]
            span = j - i
            if span > max_gap:
                break
            if span < 4:  # at most two in-betweens: the two tangents fit them exactly
                table[bi, d] = 0.0
                continue
            a = 0.0
            b = 0.0
            c = 0.0
            for e in range(dims):
                rhs_i[e] = 0.0
                rhs_j[e] = 0.0
            for k in range(i + 1, j):
                h00, h10, h01, h11 = _hermite((k - i) / span)
                a += h10 * h10
                b += h10 * h11
                c += h11 * h11
                for e in range(dims):
                    r = poses[k, e] - h00 * poses[i, e] - h01 * poses[j, e]
                    rhs_i[e] += h10 * r
                    rhs_j[e] += h11 * r
            # three or more distinct u make h10 and h11 independent: det > 0
            det = a * c - b * b
            for e in range(dims):  # the tangents, once per pair
                tangent_i[e] = (c * rhs_i[e] - b * rhs_j[e]) / det
                tangent_j[e] = (a * rhs_j[e] - b * rhs_i[e]) / det
            worst = 0.0
            summed = 0.0
            for k in range(i + 1, j):
                h00, h10, h01, h11 = _hermite((k - i) / span)
                squared = 0.0
                for e in range(dims):
                    r = (poses[k, e] - h00 * poses[i, e] - h01 * poses[j, e]
                         - h10 * tangent_i[e] - h11 * tangent_j[e])
                    squared += r * r
                worst = max(worst, squared)
                summed += squared
            table[bi, d] = summed if total else np.sqrt(worst)


#: Previous keys per block of :func:`block_floors` (a cell of the max DP reads whole blocks
#: or skips them). A constant, so the block's loop has a fixed length that LLVM unrolls into
#: vectors. 16: the DP of 1,102 frames took 0.023, 0.026 and 0.034 s on one thread with
#: blocks of 16, 32 and 64, against 0.047 s reading every previous key.
FLOOR_BLOCK = 16


@TakingTurns
@njit(cache=True, parallel=True, nogil=True)
def block_floors(table: np.ndarray) -> np.ndarray:
    """A lower bound of every block of :data:`FLOOR_BLOCK` previous keys and all farther ones:
    ``floors[b, k]`` is the smallest cost ``table[b, d]`` with ``d >= 1 + k * FLOOR_BLOCK``,
    as an int64 bit pattern (:func:`_bits`).

    Parameters
    ----------
    table : (m, band + 1) float64
        Banded cost table (see module docstring).

    Returns
    -------
    (m, ceil(band / FLOOR_BLOCK)) int64
    """
    m, width = table.shape
    blocks = (width - 1 + FLOOR_BLOCK - 1) // FLOOR_BLOCK
    floors = np.empty((m, blocks), dtype=np.int64)
    for b in prange(m):
        costs = table[b]
        lowest = np.int64(_INF_BITS)
        for k in range(blocks - 1, -1, -1):  # from the farthest block: suffix minima
            for d in range(1 + k * FLOOR_BLOCK, min(width, 1 + (k + 1) * FLOOR_BLOCK)):
                x = _bits(costs[d])
                lowest = x if x < lowest else lowest
            floors[b, k] = lowest
    return floors


@njit(cache=True, inline="always", fastmath=_FAST)
def _composed_max(before: np.ndarray, shift: int, costs: np.ndarray, d: int) -> np.int64:
    """The max of ``before[shift - d]`` and ``costs[d]``, as a bit pattern."""
    # ``shift - d`` is never negative; as an unsigned index numba drops its wraparound for
    # negative indices, so LLVM loads ``before`` as contiguous (reversed) vectors instead of
    # gathering element by element (about 1.3x on the DP)
    x = _bits(before[np.uint64(shift - d)])
    y = _bits(costs[d])
    return x if x > y else y


@njit(cache=True, inline="always", fastmath=_FAST)
def _best_previous(before: np.ndarray, shift: int, costs: np.ndarray, floors: np.ndarray,
                   top: int, use_sum: bool) -> tuple[int, float]:
    """The best previous key of one cell: ``(d, error)``, the smallest d = 1..top whose
    composed error ``before[shift - d]`` (+ or max) ``costs[d]`` is the least, and that
    error; ``(0, inf)`` if every one is inf.

    Errors and costs are >= 0 or +inf, which order like their int64 bit patterns
    (:func:`_bits`), so the minimum is taken on integers: numba vectorises an integer
    minimum, not a floating-point one; the max of two bit patterns is the bit pattern of the
    max.

    By max, the previous keys are read a block at a time from the nearest, and the reading
    stops at the first block whose ``floors`` (:func:`block_floors`, this cell's row) is not
    below the least error found: a composed error is at least its cost, so no farther key
    can lower it, or tie it nearer. The error of a long segment is large, so a cell reads
    a block or two of its hundreds of previous keys (about a fifteenth of them on the
    sample). A second pass over the block that gave the least error finds its first d.

    By sum (a sum of costs is large against one cost, so no block could be skipped) every
    previous key is read in one pass, and a second finds the first d reaching the minimum.
    """
    best = np.int64(_INF_BITS)
    if use_sum:
        for d in range(1, top + 1):
            x = _bits(before[np.uint64(shift - d)] + costs[d])
            best = x if x < best else best
        if best != _INF_BITS:
            for d in range(1, top + 1):
                if _bits(before[np.uint64(shift - d)] + costs[d]) == best:
                    return d, _float(best)
        return 0, np.inf
    where = -1  # the first block holding the least error
    for k in range((top + FLOOR_BLOCK - 1) // FLOOR_BLOCK):
        if floors[k] >= best:
            break
        first = 1 + k * FLOOR_BLOCK
        least = np.int64(_INF_BITS)
        if first + FLOOR_BLOCK - 1 <= top:
            for j in range(FLOOR_BLOCK):  # a fixed length: unrolled into vectors
                v = _composed_max(before, shift, costs, first + j)
                least = v if v < least else least
        else:
            for d in range(first, top + 1):
                v = _composed_max(before, shift, costs, d)
                least = v if v < least else least
        if least < best:
            best, where = least, k
    if best != _INF_BITS:
        first = 1 + where * FLOOR_BLOCK
        for d in range(first, min(top, first + FLOOR_BLOCK - 1) + 1):
            if _composed_max(before, shift, costs, d) == best:
                return d, _float(best)
    return 0, np.inf


@njit(cache=True, inline="always", fastmath=_FAST)
def _solve_cells(table: np.ndarray, floors: np.ndarray, lowest: np.ndarray, use_sum: bool,
                 keys: int, lo: int, hi: int, before: np.ndarray, after: np.ndarray,
                 back: np.ndarray) -> None:
    """The DP's cells of ``keys`` keys ending at candidates ``lo .. hi - 1``: ``after[b]``,
    the least composed cost (:func:`_best_previous` over the previous keys that ``lowest``,
    the band and the key count allow), and ``back[keys, b]``, its offset (left 0 where no
    selection reaches b). ``before`` holds the costs of ``keys - 1`` keys. Both DP kernels
    compute every cell here, so they agree to the bit."""
    width = table.shape[1]
    for b in range(lo, hi):
        if b < keys - 1:  # fewer candidates than keys
            after[b] = np.inf
            continue
        top = b - max(lowest[b], keys - 2, b - width + 1)
        d, error = _best_previous(before, b, table[b], floors[b], top, use_sum)
        after[b] = error  # inf and no back-pointer if unreachable
        if d:
            back[keys, b] = d


#: Consecutive candidates one work unit of :func:`select_rows` takes at a time (whole cache
#: lines of the rows it writes; neighbouring cells share the previous key count's errors).
_DP_GROUP = 32
#: Polls a DP worker waits for the others between key counts before it leaves the call: longer
#: than any wait on the quiet two-core VM (2**14 and 2**16 polls were not: the DP took 0.053 and
#: 0.035 s instead of 0.030 s at 1,100 frames), far shorter than the time slice of a thread
#: that lost its core (loaded: 0.062-0.069 s instead of 0.109 s when never leaving).
DP_PATIENCE = 1 << 18


@TakingTurns
@njit(cache=True, parallel=True, nogil=True, fastmath=_FAST)
def select_rows(table: np.ndarray, floors: np.ndarray, lowest: np.ndarray, first: int,
                stop: int, use_sum: bool, chunks: int, workers: int, patience: int,
                rows: np.ndarray, final: np.ndarray, back: np.ndarray, claimed: np.ndarray,
                done: np.ndarray) -> int:
    """Optimal selections for key counts ``first .. stop - 1``: a slice of the dynamic
    programme, which keeps only the two rows of errors the recursion needs.

    Each cell composes the allowed previous keys (by max, those whose block's floor does not
    rule them out) and takes the minimum on int64 bit patterns (:func:`_best_previous`), then
    picks the nearest previous key reaching it, so ties go to the latest previous key.

    Every key count needs the one before it complete. Rather than one parallel launch per key
    count (waking the other threads costs about 60 µs a launch on the two-core VM: more than
    half the time of a 1,100-frame DP, which then ran no faster on two threads than on one),
    ``workers`` threads run the whole slice in one launch and meet between key counts: the
    cells of a key count are ``chunks`` work units (groups of :data:`_DP_GROUP` candidates,
    dealt in turn so that every unit gets long and short rows alike); a thread claims units
    with an atomic counter (``claimed``) until none is left, counts each finished unit
    (``done``), then waits until every unit of that key count is done. A thread only ever waits
    for units already claimed, and a claimed unit is being computed by a running thread that
    does not wait inside it, so the launch always finishes: if the threading layer runs the
    workers one after another, the first claims and solves every unit and the others find
    the work done. Python calls this for a few key counts at a time, so it can report
    progress (or cancel) in between.

    A worker that has waited ``patience`` polls (its partner's thread may have lost its core
    to another process: spinning would only keep it off) raises a flag and leaves; the others
    finish the key count they are in and leave too, and the call returns the first key count
    not solved, for Python to call again (the threads then sleep until the next launch, as
    numba's passive OpenMP threads do: see :func:`sp_core.threads.passive_waiting`).

    Parameters
    ----------
    table : (m, band + 1) float64
        Banded cost table (see module docstring).
    floors : (m, blocks) int64
        The table's :func:`block_floors` (by max; by sum never read: any (m, 0) array).
    lowest : (m,) int64
        Earliest candidate allowed before each candidate as the previous key (pins and spans).
    first, stop : int
        Key counts to solve, ``2 <= first``; ``rows`` holds those of ``first - 1``.
    use_sum : bool
        Compose segment costs by sum (True) or by max (False).
    chunks : int
        Work units per key count, a few per thread.
    workers : int
        Parallel workers: the number of threads (``numba.get_num_threads()`` is not
        callable from a cached kernel); any number gives the same result.
    rows : (2, m) float64
        ``rows[K % 2, b]``: best composed cost of K keys from candidate 0 to candidate b (inf
        if impossible); row ``(first - 1) % 2`` is read, the other overwritten, in turn.
    final : (max_keys + 1,) float64
        Receives ``error[K, m - 1]`` for the key counts solved.
    back : (max_keys + 1, m) unsigned or int32, zero where not yet solved
        Receives ``back[K, b]``, the distance in candidates from b back to the key before it
        in that best selection (0 if none): a band offset, narrow enough for uint8 or uint16.
    patience : int
        Polls a worker waits between key counts before it leaves (0: leave rather than wait;
        -1: leave after every key count, for tests).
    claimed, done : (stop - first + 1,) int64, zero
        The work counters of each key count; the last element of ``claimed`` is the flag of a
        worker that stopped waiting.

    Returns
    -------
    int
        The first key count not solved: ``stop``, or less if a worker stopped waiting.
    """
    m = table.shape[0]
    left = stop - first  # claimed[left]: a worker stopped waiting
    for _ in prange(workers):
        for keys in range(first, stop):
            level = keys - first
            if _load(claimed, left) > 0:
                break  # every key count before this one is complete
            before = rows[(keys - 1) % 2]
            after = rows[keys % 2]  # the errors of keys - 2 keys: nobody reads them any more
            while True:
                unit = _add(claimed, level, 1)
                if unit >= chunks:
                    break
                for group in range(unit * _DP_GROUP, m, chunks * _DP_GROUP):
                    _solve_cells(table, floors, lowest, use_sum, keys, group,
                                 min(group + _DP_GROUP, m), before, after, back)
                    if group + _DP_GROUP >= m:
                        # the last candidate's error is K's, taken by the unit that computed
                        # it, before it counts as done: once every unit is done another
                        # worker may solve K + 1 and K + 2, which overwrites this row (taken
                        # after the count, a worker held up in between read K + 2's error)
                        final[keys] = after[m - 1]
                _add(done, level, 1)
            polls = 0
            while _load(done, level) < chunks:  # the other workers' last units
                polls += 1
                if polls > patience:
                    _add(claimed, left, 1)
                    break
            if polls > patience:
                break
    solved = first
    while solved < stop and done[solved - first] == chunks:
        solved += 1
    return solved


#: Candidates of one tile of :func:`select_tiles` at the least (a tile is never narrower than
#: the band: a cell's previous keys then lie in its own tile or the one before).
DP_TILE = 1024
#: Key counts :func:`select_tiles` solves over one tile before it moves on (its rows of
#: errors carry this many and one more).
DP_TILE_KEYS = 16


@TakingTurns
@njit(cache=True, parallel=True, nogil=True, fastmath=_FAST)
def select_tiles(table: np.ndarray, floors: np.ndarray, lowest: np.ndarray, first: int,
                 stop: int, use_sum: bool, tile: int, workers: int, patience: int,
                 rows: np.ndarray, final: np.ndarray, back: np.ndarray, ready: np.ndarray,
                 claimed: np.ndarray, done: np.ndarray) -> int:
    """:func:`select_rows` for a long take with a narrow band: the same cells, computed
    ``rows.shape[0] - 1`` key counts at a time over one tile of candidates before the next.

    :func:`select_rows` sweeps every candidate for each key count; when the table's rows
    that a sweep reads (each cell's nearest block or two of previous keys and their floors,
    about 200 bytes a candidate) outgrow the caches, every key count reads them from memory
    again (a 50,000-frame take: 149 ns a cell against 46 ns at 10,000 frames on a host with
    a 32 MB cache). Here a worker claims a tile of ``tile`` consecutive candidates and solves
    it for a batch of key counts while its rows stay in the core's cache. Cell (K, b) needs
    the errors of K - 1 keys at b - d, d < band <= ``tile``: in b's tile, solved by the same
    worker before, or in the tile before, whose worker the batch waits for (``ready[t]``, the
    last key count solved on tile t). Tiles are claimed in order, so a worker waits only on a
    tile claimed earlier by a running worker that does not wait on a later one: the launch
    always finishes, also when the threading layer runs the workers one after another. The
    workers meet once a batch (``done``), since the next batch writes rows the last one reads
    (``rows[K % R]`` with R = ``rows.shape[0]``: the batch's key counts and the one before it).

    The cells are computed as in :func:`select_rows` (:func:`_solve_cells`), so the errors
    and back-pointers are the same to the bit.

    Parameters
    ----------
    table, floors, lowest, first, stop, use_sum, workers, final, back
        As for :func:`select_rows`.
    tile : int
        Candidates per tile, at least the band (``table.shape[1] - 1``).
    patience : int
        Polls a worker waits (on the tile before, or between batches) before it leaves
        (-1: leave after every batch, for tests); the others then leave too, and the call
        returns the first key count not solved on every tile, for Python to call again.
    rows : (R, m) float64
        ``rows[K % R, b]``: best composed cost of K keys to candidate b; row
        ``(first - 1) % R`` is read.
    ready : (ceil(m / tile),) int64
        ``first - 1`` on every tile; ``ready[t]`` counts up as tile t is solved.
    claimed, done : (batches + 1,) int64, zero
        Tiles claimed and finished of each batch; the last element of ``claimed`` is the flag
        of a worker that stopped waiting.

    Returns
    -------
    int
        The first key count not solved: ``stop``, or less if a worker stopped waiting.
    """
    m = table.shape[0]
    ring = rows.shape[0]
    batch = ring - 1
    tiles = (m + tile - 1) // tile
    batches = (stop - first + batch - 1) // batch
    for _ in prange(workers):
        for level in range(batches):
            k0 = first + level * batch
            k1 = min(k0 + batch, stop)
            if _load(claimed, batches) > 0:
                break  # a worker left: every batch before this one is complete
            left = False
            while True:
                t = _add(claimed, level, 1)
                if t >= tiles:
                    break
                lo = t * tile
                hi = min(lo + tile, m)
                # once a worker has left, the tiles still unclaimed get the batch's first key
                # count only (it waits on nobody), so that every call solves one at least
                last = k0 + 1 if left or _load(claimed, batches) > 0 else k1
                for keys in range(k0, last):
                    polls = 0
                    while t > 0 and keys > k0 and _load(ready, t - 1) < keys - 1:
                        # (the tile before has not solved K - 1 yet)
                        polls += 1
                        if polls > patience:
                            left = True
                            break
                    if left and keys > k0:
                        break
                    before = rows[(keys - 1) % ring]
                    after = rows[keys % ring]
                    _solve_cells(table, floors, lowest, use_sum, keys, lo, hi, before, after,
                                 back)
                    if hi == m:
                        final[keys] = after[m - 1]
                    _add(ready, t, 1)  # (a full barrier: the tile's rows are seen first)
                _add(done, level, 1)
            if left:
                _add(claimed, batches, 1)
                break
            polls = 0
            while _load(done, level) < tiles:  # the other workers' last tiles
                polls += 1
                if polls > patience:
                    break
            if polls > patience:
                _add(claimed, batches, 1)
                break
    solved = stop
    for t in range(tiles):
        solved = min(solved, ready[t] + 1)
    return solved
