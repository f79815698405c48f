"""The selection engine: exact against brute force, kernels against plain references, errors."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_costs import brute_force, full_table, pair_cost

from sp_core import _kernels
from sp_core.costs import available_costs, get_cost
from sp_core.costs.line import gram_bands
from sp_core.errors import CapacityError, OptionError, SelectionError
from sp_core.poses import node_reach, pose_matrix
from sp_core.selection import SelectionSpace

COSTS = ["line-max", "line-time", "line-sse", "curve-max", "curve-sse"]


def random_poses(seed: int, n: int, dims: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(size=(n, dims)), axis=0)


def banded_to_full(table: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    full = np.full((n, n), np.inf)
    for b, j in enumerate(rows):
        for d in range(1, table.shape[1]):
            if b - d >= 0:
                full[rows[b - d], j] = table[b, d]
    return full


# ------------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("name", COSTS)
@pytest.mark.parametrize("seed", range(4))
def test_cost_tables_equal_plain_reference(name, seed):
    poses = random_poses(seed, 40, dims=7)
    rows = np.arange(40)
    table = get_cost(name).table(poses, rows, 39, 39)
    expected = full_table(poses, name)
    got = banded_to_full(table, rows, 40)
    upper = np.triu(np.ones((40, 40), dtype=bool), 1)
    np.testing.assert_allclose(got[upper], expected[upper], rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("name", COSTS)
def test_cost_tables_on_sample_clip_with_candidates_and_span(name, sample_clip):
    poses = pose_matrix(sample_clip, frame_range=(200, 329))
    poses = poses - poses.mean(axis=0)
    rows = np.union1d(np.arange(0, 130, 3), [129])
    span = 40
    reach = np.searchsorted(rows, rows + span, side="right")
    band = int((reach - np.arange(len(rows))).max()) - 1
    table = get_cost(name).table(poses, rows, band, span)
    for b, j in enumerate(rows):
        for d in range(1, band + 1):
            if b - d < 0:
                continue
            i = rows[b - d]
            if j - i > span:
                assert table[b, d] == np.inf
            else:
                expected = pair_cost(poses, i, j, name)
                assert table[b, d] == pytest.approx(expected, rel=1e-7, abs=1e-7)


@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize(("span", "stride"), [(None, 1), (11, 1), (23, 3)])
def test_line_table_in_any_blocks_equals_one_call_bit_for_bit(timed, span, stride):
    """The line kernel takes its earlier keys in tiles; blocks of rows that cut the tiles
    anywhere (and bands narrower than a tile) give every entry to the bit, and each entry is
    the perpendicular or time-aligned distance of the plain reference."""
    poses = random_poses(11, 61, dims=6)
    rows = np.union1d(np.arange(0, 61, stride), [60])
    width = 60 if span is None else span
    reach = np.searchsorted(rows, rows + width, side="right")
    band = int((reach - np.arange(len(rows))).max()) - 1
    forward, backward = gram_bands(poses, width)

    def table_in(blocks: list[int]) -> np.ndarray:
        table = np.full((len(rows), band + 1), np.inf)
        for first, stop in itertools.pairwise([0, *blocks, len(rows)]):
            _kernels.line_rows(forward, backward, rows, band, width, timed, table, first, stop)
        return table

    whole = table_in([])
    for blocks in ([1], [3, 4, 5, 21], list(range(1, len(rows)))):
        np.testing.assert_array_equal(table_in(blocks), whole)
    b, d = np.indices(whole.shape)
    within = (b - d >= 0) & (rows[b] - rows[np.maximum(b - d, 0)] <= width)
    np.testing.assert_array_equal(np.isfinite(whole), within)  # every pair in reach, no other
    name = "line-time" if timed else "line-max"
    for b, d in zip(*np.nonzero(np.isfinite(whole[:, 1:])), strict=True):
        expected = pair_cost(poses, rows[b - d - 1], rows[b], name)
        assert whole[b, d + 1] == pytest.approx(expected, rel=1e-7, abs=1e-7)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one core")
@pytest.mark.parametrize("width", [699, 300, 40])
def test_gram_bands_are_the_same_to_the_bit_on_one_thread_or_two(width):
    """The Gram bands' blocks are shared between threads (one BLAS thread each): the bands
    must not depend on how many run, or a tie between selections would; and they are the
    dot products they stand for."""
    poses = random_poses(5, 700, dims=40)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = gram_bands(poses, width)
        numba.set_num_threads(2)
        two = gram_bands(poses, width)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    products = poses @ poses.T
    i, e = 123, 31
    assert two[0][i, e] == pytest.approx(products[i, i + e], rel=1e-12)
    assert two[1][i + e, width - e] == pytest.approx(products[i + e, i], rel=1e-12)


@pytest.mark.parametrize(("span", "stride"), [(None, 1), (9, 1), (23, 2)])
def test_line_max_four_later_keys_at_once_equal_one_at_a_time_bit_for_bit(span, stride):
    """The line-max kernel takes four later keys per pass over an earlier key's frames; every
    entry is the one-pair kernel's (:func:`_kernels._line_max`) to the bit, with poses held
    still for a few frames (coincident keys, which the one-pair kernel handles) and groups of
    four cut by the band, the reach and the end."""
    poses = np.repeat(random_poses(12, 30, dims=5), 2, axis=0)  # pairs of equal poses
    n = len(poses)
    rows = np.union1d(np.arange(0, n, stride), [n - 1])
    width = n - 1 if span is None else span
    reach = np.searchsorted(rows, rows + width, side="right")
    band = int((reach - np.arange(len(rows))).max()) - 1
    forward, backward = gram_bands(poses, width)
    table = np.full((len(rows), band + 1), np.inf)
    _kernels.line_rows(forward, backward, rows, band, width, False, table, 0, len(rows))
    squares = forward[:, 0]
    checked = 0
    for b, d in zip(*np.nonzero(np.isfinite(table[:, 1:])), strict=True):
        i, j = rows[b - d - 1], rows[b]
        gap = j - i
        aa = squares[i:i + gap + 1] - 2.0 * forward[i, :gap + 1] + squares[i]
        cc = forward[i, :gap + 1] - squares[i]
        one = _kernels._line_max(backward[j], aa, cc, forward[i, gap], width - gap, gap, False)
        assert table[b, d + 1] == one
        checked += 1
    assert checked > 100


def test_line_sse_equals_direct_sum_with_coincident_keys():
    poses = random_poses(3, 25)
    poses[20] = poses[5]  # a repeated pose: degenerate line for line-max, fine for the sum
    rows = np.arange(25)
    sse = get_cost("line-sse").table(poses, rows, 24, 24)
    assert sse[20, 15] == pytest.approx(pair_cost(poses, 5, 20, "line-sse"), rel=1e-9)
    perp = get_cost("line-max").table(poses, rows, 24, 24)
    assert perp[20, 15] == pytest.approx(pair_cost(poses, 5, 20, "line-max"), rel=1e-7)


def sse_pair_by_pair(poses: np.ndarray, rows: np.ndarray, band: int, span: int) -> np.ndarray:
    """The line-sse table one pair at a time in plain Python, with the kernel's formula and
    order of operations (prefix sums; the five dot products summed over dimensions in order)."""
    s1, sk, sq = _kernels.prefix_sums(poses)
    table = np.full((len(rows), band + 1), np.inf)
    for b, j in enumerate(rows):
        table[b, 0] = 0.0
        for d in range(1, band + 1):
            if b - d < 0 or j - rows[b - d] > span:
                break
            i = int(rows[b - d])
            length = int(j) - i
            if length == 1:
                table[b, d] = 0.0
                continue
            pi_pi = bb = pi_s = b_w = pi_b = 0.0
            for c in range(poses.shape[1]):
                pic = poses[i, c]
                bc = poses[j, c] - pic
                s = s1[j, c] - s1[i + 1, c]
                w = sk[j, c] - sk[i + 1, c] - i * s
                pi_pi += pic * pic
                bb += bc * bc
                pi_s += pic * s
                b_w += bc * w
                pi_b += pic * bc
            inner = length - 1.0
            total = (sq[j] - sq[i + 1] + inner * pi_pi + bb * (inner * (2.0 * length - 1.0)
                                                               / (6.0 * length))
                     - 2.0 * pi_s - 2.0 * b_w / length + 2.0 * pi_b * (inner / 2.0))
            table[b, d] = max(total, 0.0)
    return table


@pytest.mark.parametrize(("n", "dims", "stride", "span", "blocks"),
                         [(70, 7, 1, 69, [0, 70]), (70, 7, 1, 69, [0, 5, 23, 70]),
                          (83, 3, 3, 20, [0, 11, 29, 30]), (9, 2, 1, 8, [0, 9]),
                          (40, 5, 2, 50, [0, 21])])
def test_line_sse_kernel_equals_pair_by_pair_formula_exactly(n, dims, stride, span, blocks):
    # The kernel works on tiles of later keys and vectors of earlier keys, filled block by
    # block; every pair must still get exactly the same sums (bands beyond the 32 lanes,
    # ragged tiles, blocks not aligned to tiles, stride and span limits).
    poses = random_poses(n + dims, n, dims)
    poses -= poses.mean(axis=0)
    rows = np.union1d(np.arange(0, n, stride), [n - 1]).astype(np.int64)
    reach = np.searchsorted(rows, rows + span, side="right")
    band = int((reach - np.arange(len(rows))).max()) - 1
    s1, sk, sq = _kernels.prefix_sums(poses)
    table = np.full((len(rows), band + 1), np.inf)
    blocks = [min(e, len(rows)) for e in blocks]
    for first, stop in itertools.pairwise(blocks):
        _kernels.sse_rows(poses, s1, sk, sq, np.ascontiguousarray(poses[rows].T),
                          np.ascontiguousarray(s1[rows + 1].T),
                          np.ascontiguousarray(sk[rows + 1].T), rows, band, span, table,
                          first, stop)
    expected = sse_pair_by_pair(poses, rows, band, span)
    assert np.array_equal(table[:blocks[-1]], expected[:blocks[-1]])


def test_line_sse_kernel_equals_pair_by_pair_formula_on_the_sample(sample_clip):
    poses = pose_matrix(sample_clip, frame_range=(100, 219))
    poses = poses - poses.mean(axis=0)
    rows = np.union1d(np.arange(0, 120, 2), [119]).astype(np.int64)
    table = get_cost("line-sse").table(poses, rows, 45, 90)
    assert np.array_equal(table, sse_pair_by_pair(poses, rows, 45, 90))


def test_a_kernel_compiled_here_computes_what_its_cached_copy_computes(tmp_path):
    """The same analysis in a process that compiles the kernels and in one that loads them
    from numba's cache gives the same tables and errors to the bit (with fast-math
    reassociation the line-max and line-time tables differed in their last digits)."""
    code = ("import hashlib; import numpy as np; from sp_core.selection import SelectionSpace; "
            "p = np.cumsum(np.random.default_rng(3).normal(size=(240, 12)), axis=0); "
            "h = hashlib.sha1(); "
            "[h.update(SelectionSpace(p, cost=c).errors.tobytes() + "
            "SelectionSpace(p, cost=c)._table.tobytes()) for c in "
            "('line-max', 'line-time', 'line-sse')]; print(h.hexdigest())")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=root, env=env).stdout for _ in range(2)]
    assert any(tmp_path.rglob("*.nbi"))  # the first run compiled and cached, the second loaded
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("n", "width", "block"), [(30, 6, 4), (30, 6, 256), (9, 20, 4),
                                                     (1, 3, 2)])
def test_gram_bands_equal_dot_products(n, width, block):
    poses = random_poses(5, n, dims=5)
    forward, backward = gram_bands(poses, width, block=block)
    width = min(width, n - 1)
    assert forward.shape == backward.shape == (n, width + 1)
    for i in range(n):
        for e in range(width + 1):
            inside = poses[i] @ poses[i + e] if i + e < n else 0.0
            assert forward[i, e] == pytest.approx(inside, abs=1e-12)
            inside = poses[i] @ poses[i - e] if i - e >= 0 else 0.0
            assert backward[i, width - e] == pytest.approx(inside, abs=1e-12)


# --------------------------------------------------------------------- DP vs brute force
@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 12), seed=st.integers(0, 10_000), compose=st.sampled_from(["max", "sum"]),
       name=st.sampled_from(COSTS))
def test_dp_equals_brute_force_for_every_k(n, seed, compose, name):
    poses = random_poses(seed, n, dims=3)
    space = SelectionSpace(poses, cost=name, compose=compose, max_keys=n)
    table = full_table(poses - poses.mean(axis=0), name)
    np.fill_diagonal(table, 0.0)
    for keys in range(2, n + 1):
        expected = brute_force(table, keys, compose)
        assert space.error(keys) == pytest.approx(expected, rel=1e-9, abs=1e-9)
        frames = space.keyframes(keys)
        assert len(frames) == keys and frames[0] == 0 and frames[-1] == n - 1
        assert np.all(np.diff(frames) > 0)
        costs = [table[a, b] for a, b in itertools.pairwise(frames)]
        achieved = sum(costs) if compose == "sum" else max(costs)
        assert achieved == pytest.approx(expected, rel=1e-9, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 12), seed=st.integers(0, 10_000), compose=st.sampled_from(["max", "sum"]),
       name=st.sampled_from(COSTS))
def test_dp_with_exact_ties_and_zero_costs_equals_brute_force(n, seed, compose, name):
    # poses on a coarse integer grid, often repeated or collinear: many costs are exactly equal
    # or zero, which exercises the kernels' integer-ordered min/max and the tie-break. A line
    # cost read from Gram entries is a square root of a difference of squares, so a true 0
    # comes out as up to sqrt(machine epsilon) x the pose scale (here about 1e-8).
    poses = np.random.default_rng(seed).integers(0, 2, size=(n, 2)).astype(float)
    space = SelectionSpace(poses, cost=name, compose=compose, max_keys=n)
    table = full_table(poses - poses.mean(axis=0), name)
    np.fill_diagonal(table, 0.0)
    for keys in range(2, n + 1):
        expected = brute_force(table, keys, compose)
        assert space.error(keys) == pytest.approx(expected, abs=1e-6)
        frames = space.keyframes(keys)
        costs = [table[a, b] for a, b in itertools.pairwise(frames)]
        assert (sum(costs) if compose == "sum" else max(costs)) == pytest.approx(expected,
                                                                               abs=1e-6)


def test_collinear_motion_costs_nothing():
    poses = np.linspace(0.0, 1.0, 40)[:, None] * np.array([[1.0, 2.0, -1.0]])
    space = SelectionSpace(poses, max_keys=10)
    assert space.errors.max() == pytest.approx(0.0, abs=1e-6)
    assert space.keyframes(2).tolist() == [0, 39]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(4, 12), compose=st.sampled_from(["max", "sum"]),
       first=st.sampled_from([0, 1001]))
def test_dp_with_pins_stride_and_max_span_equals_brute_force(data, n, compose, first):
    poses = random_poses(data.draw(st.integers(0, 999)), n)
    stride = data.draw(st.integers(1, 3))
    rows = sorted({0, n - 1} | {r for r in range(n) if (first + r) % stride == 0})
    pins = data.draw(st.lists(st.sampled_from(rows[1:-1]), max_size=2, unique=True)) \
        if len(rows) > 2 else []
    max_gap = int(np.diff(rows).max())
    span = data.draw(st.one_of(st.none(), st.integers(max_gap, n)))
    space = SelectionSpace(poses, first_frame=first, compose=compose, stride=stride,
                           pins=[first + p for p in pins], max_span=span, max_keys=len(rows))
    table = full_table(poses - poses.mean(axis=0), "line-max")
    assert space.min_keys >= 2 + len(pins)
    for keys in range(space.min_keys, space.max_keys + 1):
        expected = brute_force(table, keys, compose, pins=pins, candidates=rows, max_span=span)
        assert space.error(keys) == pytest.approx(expected, rel=1e-9, abs=1e-9)
        if np.isfinite(expected):
            frames = space.keyframes(keys) - first
            assert set(pins) <= set(frames.tolist()) and set(frames.tolist()) <= set(rows)
            if span is not None:
                assert np.diff(frames).max() <= span
    # below min_keys nothing satisfies the constraints
    for keys in range(2, space.min_keys):
        assert brute_force(table, keys, compose, pins, rows, span) == np.inf


# ----------------------------------------------------------------------- pose spaces
def test_positions_space_flattens_weighted_nodes(sample_clip):
    poses = pose_matrix(sample_clip, nodes=["Head", "LeftWrist"], weights={"LeftWrist": 2.0})
    pos = sample_clip.positions
    np.testing.assert_allclose(poses[:, :3], pos[:, sample_clip.node_index("Head")])
    np.testing.assert_allclose(poses[:, 3:], 2 * pos[:, sample_clip.node_index("LeftWrist")])


def test_channels_space_scales_rotations_by_reach(sample_clip):
    poses = pose_matrix(sample_clip, space="channels", nodes=["LeftElbow"], time_scale=0.5)
    reach = node_reach(sample_clip)[sample_clip.node_index("LeftElbow")]
    columns = sample_clip.node_channels("LeftElbow")
    np.testing.assert_allclose(poses[:, :3], np.radians(sample_clip.channels[:, columns]) * reach)
    np.testing.assert_allclose(poses[:, 3], 0.5 * np.arange(sample_clip.n_frames))
    # the elbow reaches the finger tips: forearm + hand + fingers, longer than the forearm alone
    rest = sample_clip.rest_positions()
    forearm = np.linalg.norm(rest[sample_clip.node_index("LeftWrist")]
                             - rest[sample_clip.node_index("LeftElbow")])
    assert reach > forearm


def test_a_time_coordinate_leaves_the_threshold_rules_scale_alone(sample_clip):
    """--time-scale 100 put the suggested K at 2 instead of 5 (35 mm mean): the time
    coordinate grows with the take's length, not its motion, and as part of the largest pose
    distance it made every error look small."""
    clip = sample_clip.sub_range(0, 299)
    plain = SelectionSpace.from_clip(clip, stride=2)
    for scale in (0.01, 100.0):
        timed = SelectionSpace.from_clip(clip, stride=2, time_scale=scale)
        assert timed.diameter == pytest.approx(plain.diameter, rel=1e-12)
        # (the time coordinate changes the distances to the lines between keys, a little)
        assert abs(timed.suggestions()["threshold"] - plain.suggestions()["threshold"]) <= 2


def test_from_clip_uses_host_frames(sample_clip):
    clip = sample_clip.with_channels(sample_clip.channels)
    clip.first_frame = 1001
    space = SelectionSpace.from_clip(clip, frame_range=(1101, 1300), stride=4, pins=[1200])
    frames = space.keyframes(space.min_keys + 3)
    assert frames[0] == 1101 and frames[-1] == 1300 and 1200 in frames
    assert all(f % 4 == 0 for f in frames[1:-1])


# ---------------------------------------------------------------------------- bad input
def test_a_nan_key_is_refused_by_its_channel_and_frame(sample_clip):
    """Hosts let a NaN key through (Blender's curves take one): the pose data alone could only
    name the frame, not the key to fix. Outside the analysed range it does not matter."""
    values = sample_clip.channels.copy()
    column = sample_clip.channel_names.index("LeftElbow.Xrotation")
    values[[40, 41], column] = np.nan
    clip = sample_clip.with_channels(values)
    with pytest.raises(SelectionError) as refused:
        SelectionSpace.from_clip(clip, stride=4)
    assert str(refused.value) == ("LeftElbow.Xrotation is not a number (NaN or infinity) at "
                                  "frame 40 (and 1 more value); fix that key, or set "
                                  "frame_range to frames that leave it out (the longest run "
                                  "without one: frames 42 to 993)")
    assert refused.value.options == ("frame_range",)
    assert SelectionSpace.from_clip(clip, frame_range=(42, 200), max_span=40).n_frames == 159
    # NaN on every frame but one: no range of two frames avoids it, so none is suggested
    values[:-1, column] = np.nan
    with pytest.raises(SelectionError) as refused:
        SelectionSpace.from_clip(sample_clip.with_channels(values), stride=4)
    assert str(refused.value).endswith("at frame 0 (and 992 more values); fix that key")
    assert refused.value.options == ()


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(poses=np.zeros((1, 3))), SelectionError, "at least 2 frames"),
    (dict(poses=np.array([[0.0], [np.nan], [1.0]]), first_frame=1001), SelectionError,
     "not finite .* at frame 1002"),
    (dict(pins=[50]), SelectionError, "pinned frame 50 is outside the range 0..19"),
    (dict(pins=[5], stride=4), SelectionError, "pinned frame 5 is not a candidate"),
    (dict(cost="spline"), OptionError,
     "unknown cost 'spline'; available: curve-max, curve-sse, line-max"),
    (dict(cost="line-max", cost_options={"sigma": 1}), OptionError, "has no option 'sigma'"),
    (dict(compose="mean"), SelectionError, "compose must be"),
    (dict(max_span=2, stride=4), SelectionError, "max_span of 2 frames is shorter"),
    (dict(stride=0), SelectionError, "stride must be"),
    (dict(memory_limit=1000), CapacityError, "needs .* MB .* raise memory_gib to 0.1; or set "
     "stride"),
])
def test_bad_input_raises_specific_errors(kwargs, error, message):
    args = dict(poses=random_poses(1, 20))
    args.update(kwargs)
    with pytest.raises(error, match=message):
        SelectionSpace(**args)


def test_k_out_of_range():
    space = SelectionSpace(random_poses(2, 20), max_keys=6)
    with pytest.raises(SelectionError, match="K = 7 is out of range: .* 2 to 6 keys"):
        space.keyframes(7)
    with pytest.raises(SelectionError, match="K = 1 is out of range"):
        space.error(1)


def test_capacity_error_states_numbers_and_fix():
    # 1 GB is windowed now (tests/test_selection_long.py); 1 MB does not hold even a window
    with pytest.raises(CapacityError) as info:
        SelectionSpace(np.zeros((20_000, 3)), memory_limit=10**6)
    message = str(info.value)
    assert "20,000 frames" in message and "limit of 1.0 MB" in message
    assert "even with the smallest plan (max_span 240" in message
    assert "raise memory_gib to" in message and "set stride (e.g. 4)" in message


def test_registry_declares_options_as_data():
    assert set(COSTS) <= set(available_costs())
    for cls in available_costs().values():
        assert cls.name and cls.description
        assert isinstance(cls.options, tuple)


# ----------------------------------------------------------------- real clip properties
def test_sample_space_is_sensible(sample_clip):
    space = SelectionSpace.from_clip(sample_clip)
    assert space.min_keys == 2 and space.max_keys == sample_clip.n_frames // 2
    errors = space.errors
    assert errors[-1] < 0.02 * errors[0]
    # more keys never hurts much: the best of K+1 is at most a little above the best of K
    assert np.all(np.minimum.accumulate(errors) <= errors + 1e-12)
    suggested = space.suggestions()
    assert space.min_keys <= suggested["threshold"] <= space.max_keys
    assert all(space.min_keys < k <= space.max_keys for k in suggested["cliffs"])
    assert space.normalised_errors()[space.threshold_choice() - space.min_keys] <= 0.05


@pytest.mark.parametrize("accuracy, significance", [(0.1, 0.1), (0.2, 0.1), (0.3, 0.05),
                                                     (1e-6, 0.1)])
def test_threshold_choice_rule(accuracy, significance):
    space = SelectionSpace(random_poses(4, 60), max_keys=30)
    e = space.normalised_errors()
    accurate = [i for i in range(len(e)) if e[i] <= accuracy]
    significant = [i for i in accurate if i == 0 or e[i] <= (1 - significance) * e[i - 1]]
    if significant:
        expected = significant[0]
    elif accurate:
        expected = accurate[0]
    else:
        expected = int(np.argmin(e))
    assert space.threshold_choice(accuracy, significance) == space.min_keys + expected


@pytest.mark.parametrize("compose", ["max", "sum"])
def test_squared_costs_are_normalised_as_distances(compose):
    space = SelectionSpace(random_poses(3, 50), cost="line-sse", compose=compose, max_keys=20)
    e, d, n = space.errors, space.diameter, space.n_frames
    if compose == "max":  # the worst segment's root mean square at the average segment length
        expected = np.sqrt(e * space.key_counts / n) / d
    else:  # the mean square fraction the layered keypose threshold is tuned on
        expected = e / (d * d * n)
    np.testing.assert_allclose(space.normalised_errors(), expected, rtol=1e-12)


def test_line_sse_threshold_rule_tracks_line_max_on_real_mocap(sample_clip):
    """The default cost's suggested K lands near the one line-max suggests (not at K = 3, as a
    squared error compared with a distance threshold did)."""
    from sp_core.io.bvh import read_bvh

    walk = read_bvh(Path(__file__).parent / "data" / "cmu_131_01_walk.bvh")
    for clip in (sample_clip, walk):
        suggested = [SelectionSpace.from_clip(clip, cost=cost).threshold_choice()
                     for cost in ("line-max", "line-sse")]
        assert 0.5 * suggested[0] <= suggested[1] <= 2 * suggested[0]


def test_a_failure_in_a_gram_bands_thread_is_raised_not_left_as_unset_rows(monkeypatch):
    """A helper thread's error (memory) went to threading's hook, and the bands came back with
    its rows never written (np.empty): a table of garbage."""
    import threading

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one core")
    plain = np.matmul

    def failing(*args, **kwargs):  # noqa: ANN202
        if threading.current_thread() is not threading.main_thread():
            raise MemoryError("no room in the helper")
        return plain(*args, **kwargs)

    before = numba.get_num_threads()
    numba.set_num_threads(2)
    monkeypatch.setattr(np, "matmul", failing)
    try:
        with pytest.raises(MemoryError, match="no room in the helper"):
            gram_bands(random_poses(2, 700, dims=8), 699)
    finally:
        numba.set_num_threads(before)


def cliffs_reference(e: np.ndarray, key_counts: np.ndarray, count: int = 5, window: int = 5,
                     ratio: float = 2.0) -> list[int]:
    """The cliff rule of :meth:`SelectionSpace.cliffs` as its docstring states it, one K at a
    time."""
    finite = np.isfinite(e)
    if finite.sum() < 3:
        return []
    floor = max(float(e[finite].max()) * 1e-9, 1e-300)
    log_e = np.log(np.maximum(np.where(finite, e, e[finite].max()), floor))
    drop = np.concatenate([[0.0], log_e[:-1] - log_e[1:]])
    scores = []
    for i in range(1, len(e)):
        if drop[i] < np.log(1 / 0.9) or e[i - 1] <= floor:
            continue
        around = np.concatenate([drop[max(1, i - window):i], drop[i + 1:i + 1 + window]])
        base = float(np.mean(np.maximum(around, 0.0))) if len(around) else 0.0
        neighbours = [drop[j] for j in (i - 1, i + 1) if 1 <= j < len(e)]
        if drop[i] >= ratio * base and all(drop[i] > x for x in neighbours):
            scores.append((drop[i] / max(base, 1e-12), int(key_counts[i])))
    scores.sort(reverse=True)
    return [k for _, k in scores[:count]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(1e-6, 1e3), st.just(np.nan), st.just(0.0)),
                min_size=1, max_size=60))
def test_cliffs_follow_the_rule_one_k_at_a_time(values):
    """The cliffs' tests run for every K at once (the loop held a panel's UI thread for 0.15 s
    on a 5,000-frame take): the same K, in the same order, as the rule applied K by K, on
    any error curve (plateaus, zeros and missing K included)."""
    from types import SimpleNamespace

    e = np.sort(np.asarray(values))[::-1] if len(values) % 2 else np.asarray(values)
    space = SimpleNamespace(normalised_errors=lambda: e, key_counts=np.arange(2, 2 + len(e)))
    assert SelectionSpace.cliffs(space) == cliffs_reference(e, space.key_counts)  # type: ignore[arg-type]


def test_the_sample_and_a_long_takes_cliffs_follow_the_rule(sample_clip):
    for clip in (sample_clip, sample_clip.with_channels(np.concatenate(
            [sample_clip.channels, sample_clip.channels[::-1]] * 2))):
        space = SelectionSpace.from_clip(clip)
        assert space.cliffs() == cliffs_reference(space.normalised_errors(), space.key_counts)
