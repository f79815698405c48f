"""Long takes: the memory-lean, resumable DP against the dense one and brute force; the
automatic window and its notes; progress and cancelling between blocks."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from reference_costs import brute_force, full_table
from reference_dp import dense_keyframes, dense_select

from sp_core import _kernels, selection
from sp_core.cli import main
from sp_core.errors import CapacityError, SelectionError
from sp_core.io.bvh import read_bvh, write_bvh
from sp_core.jobs import Job, run_job
from sp_core.options import Options
from sp_core.poses import pose_matrix
from sp_core.selection import SelectionSpace
from sp_core.session import Session
from sp_core.standalone import StandaloneHost


def random_poses(seed: int, n: int, dims: int = 3) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).normal(size=(n, dims)), axis=0)


def assert_same_as_dense(space: SelectionSpace) -> None:
    """Errors and keys of every K equal those of the dense DP (all rows, int32 pointers) on
    the space's own table."""
    band = space._table.shape[1] - 1
    error, previous = dense_select(space._table, space._lowest_previous(band), space.max_keys,
                                   space.compose == "sum", 8)
    np.testing.assert_array_equal(error[:, -1], space._errors)
    for keys in space.key_counts:
        if np.isfinite(space.error(int(keys))):
            expected = dense_keyframes(previous, space._candidates, int(keys))
            np.testing.assert_array_equal(space.keyframes(int(keys)),
                                          expected + space.first_frame)


def gaps_at_most(frames: np.ndarray, span: int) -> bool:
    return bool(np.diff(frames).max() <= span)


# ------------------------------------------------------------------ lean DP = dense DP
@pytest.mark.parametrize("compose", ["max", "sum"])
def test_lean_dp_equals_dense_dp_on_the_sample_for_every_k(sample_clip, compose):
    space = SelectionSpace.from_clip(sample_clip, compose=compose)
    assert space.max_keys == sample_clip.n_frames // 2 and not space.notes
    assert space._back.dtype == np.uint16  # band 993: offsets fit 16 bits
    assert_same_as_dense(space)


@pytest.mark.parametrize("compose", ["max", "sum"])
@pytest.mark.parametrize("span, stride, pins", [(6, 1, ()), (9, 2, (402, 404)), (25, 1, (300,)),
                                                (40, 3, ())])
def test_narrow_bands_equal_the_dense_dp(sample_clip, compose, span, stride, pins):
    # narrow bands with strides and pins on the sample (uint8 offsets)
    space = SelectionSpace.from_clip(sample_clip, compose=compose, max_span=span, stride=stride,
                                     pins=pins, max_keys=400)
    assert space._back.dtype == np.uint8
    assert_same_as_dense(space)
    for keys in (space.min_keys, space.max_keys):
        assert gaps_at_most(space.keyframes(keys), span)


@pytest.mark.parametrize("compose", ["max", "sum"])
def test_a_long_take_is_solved_tile_by_tile_with_the_same_result(sample_clip, compose,
                                                                 monkeypatch):
    # A take many tiles long with a narrow band is solved by select_tiles (here the sample
    # with tiles of 64 candidates, a 40-frame band and a pin): the same errors, offsets and
    # keys as the dense DP.
    monkeypatch.setattr(_kernels, "DP_TILE", 64)
    monkeypatch.setattr(selection, "TILED_DP_TILES", 4)
    space = SelectionSpace.from_clip(sample_clip, compose=compose, max_span=40, pins=(300,),
                                     max_keys=400)
    assert space._rows.shape == (_kernels.DP_TILE_KEYS + 1, len(space._candidates))
    assert_same_as_dense(space)


@pytest.mark.parametrize("seed", range(6))
def test_lean_dp_equals_dense_dp_on_random_data(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 400))
    span = int(rng.integers(3, n))
    poses = random_poses(seed, n, dims=int(rng.integers(1, 6)))
    if seed % 2:  # exact ties: repeated and collinear poses on an integer grid
        poses = rng.integers(0, 3, size=(n, 2)).astype(float)
    pins = sorted({int(p) for p in rng.integers(1, n - 1, size=int(rng.integers(0, 3)))})
    for compose in ("max", "sum"):
        space = SelectionSpace(poses, compose=compose, max_span=span, pins=pins,
                               max_keys=n // 2 + len(pins) + 2)
        assert_same_as_dense(space)


@pytest.mark.parametrize(("workers", "chunks", "patience", "first", "stop"),
                         [(1, 1, 100, 2, 40), (2, 4, 1 << 14, 2, 40), (5, 3, 100, 2, 40),
                          (2, 9, 0, 2, 17), (3, 2, 0, 17, 40), (4, 8, -1, 2, 40),
                          (2, 4, -1, 17, 40)])
def test_dp_kernel_gives_the_dense_result_with_any_workers_and_units(workers, chunks, patience,
                                                                     first, stop):
    # The kernel's workers meet between key counts through atomic counters; more workers
    # than threads (run one after another by the threading layer), one unit or many, a slice
    # starting after K = 2, and workers that leave at once instead of waiting (patience 0;
    # -1 leaves after every key count: the call returns early and is called again, as
    # SelectionSpace does) must all give the dense DP's errors and offsets.
    rng = np.random.default_rng(workers * 10 + chunks)
    m, band = 70, 69
    table = rng.integers(0, 4, size=(m, band + 1)).astype(float)  # many exact ties
    for b in range(m):
        table[b, 0] = 0.0
        table[b, b + 1:] = np.inf
    lowest = np.maximum(np.arange(m) - band, 0).astype(np.int64)
    lowest[40:] = np.maximum(lowest[40:], 30)  # a pin at candidate 30
    for use_sum in (False, True):
        error, previous = dense_select(table, lowest, stop - 1, use_sum, 4)
        rows = np.full((2, m), np.inf)
        rows[(first - 1) % 2] = error[first - 1]
        final = np.full(stop, np.inf)
        back = np.zeros((stop, m), dtype=np.uint8)
        keys, calls = first, 0
        while keys < stop:
            solved = _kernels.select_rows(table, _kernels.block_floors(table), lowest, keys,
                                          stop, use_sum, chunks, workers, patience, rows,
                                          final, back,
                                          np.zeros(stop - keys + 1, dtype=np.int64),
                                          np.zeros(stop - keys + 1, dtype=np.int64))
            assert keys < solved <= stop  # every call solves at least one key count
            keys, calls = solved, calls + 1
        assert calls <= stop - first
        np.testing.assert_array_equal(final[first:], error[first:, -1])
        np.testing.assert_array_equal(rows[(stop - 1) % 2], error[stop - 1])
        for keys in range(first, stop):
            reached = previous[keys] >= 0
            np.testing.assert_array_equal(back[keys][reached],
                                          (np.arange(m) - previous[keys])[reached])
            assert not back[keys][~reached].any()


@pytest.mark.parametrize(("workers", "tile", "ring", "patience", "first", "stop"),
                         [(1, 24, 5, 100, 2, 60), (2, 24, 5, 1 << 14, 2, 60),
                          (3, 30, 17, 1 << 14, 2, 60), (2, 21, 2, 1 << 14, 2, 60),
                          (2, 24, 5, 0, 2, 60), (4, 24, 7, -1, 2, 60),
                          (2, 300, 5, 1 << 14, 17, 60), (5, 25, 4, -1, 17, 60)])
@pytest.mark.parametrize("use_sum", [False, True])
def test_tiled_dp_kernel_gives_the_dense_result(workers, tile, ring, patience, first, stop,
                                               use_sum):
    # select_tiles solves a batch of ring - 1 key counts over one tile of candidates before
    # the next, its workers waiting on the tile before; tiles of the band's width or more
    # (21 = the band: cells reach into the tile before, never two back), one tile, more
    # workers than threads, a slice starting after K = 2, and workers that leave instead of
    # waiting (patience 0; -1 after every batch: the call returns early and is called
    # again) must all give the dense DP's errors and offsets, to the bit.
    rng = np.random.default_rng(workers * 100 + tile + ring)
    m, band = 200, 21
    table = np.cumsum(rng.integers(0, 2, size=(m, band + 1)), axis=1).astype(float)
    table[rng.random((m, band + 1)) < 0.1] = 1.0  # ties, and long spans that fit well
    for b in range(m):
        table[b, 0] = 0.0
        table[b, b + 1:] = np.inf
    lowest = np.maximum(np.arange(m) - band, 0).astype(np.int64)
    lowest[120:] = np.maximum(lowest[120:], 110)  # a pin at candidate 110
    error, previous = dense_select(table, lowest, stop - 1, use_sum, 4)
    floors = np.empty((m, 0), dtype=np.int64) if use_sum else _kernels.block_floors(table)
    rows = np.full((ring, m), np.inf)
    rows[(first - 1) % ring] = error[first - 1]
    final = np.full(stop, np.inf)
    back = np.zeros((stop, m), dtype=np.uint8)
    tiles = -(-m // tile)
    keys, calls = first, 0
    while keys < stop:
        batches = -(-(stop - keys) // (ring - 1))
        solved = _kernels.select_tiles(table, floors, lowest, keys, stop, use_sum, tile,
                                       workers, patience, rows, final, back,
                                       np.full(tiles, keys - 1, dtype=np.int64),
                                       np.zeros(batches + 1, dtype=np.int64),
                                       np.zeros(batches + 1, dtype=np.int64))
        assert keys < solved <= stop  # every call solves at least one key count
        keys, calls = solved, calls + 1
    assert calls <= stop - first
    np.testing.assert_array_equal(final[first:], error[first:, -1])
    np.testing.assert_array_equal(rows[(stop - 1) % ring], error[stop - 1])
    for keys in range(first, stop):
        reached = previous[keys] >= 0
        np.testing.assert_array_equal(back[keys][reached],
                                      (np.arange(m) - previous[keys])[reached])
        assert not back[keys][~reached].any()


def test_block_floors_bound_each_block_and_every_farther_one():
    # floors[b, k]: the least cost at 1 + 16 k previous keys or farther, as a bit pattern
    rng = np.random.default_rng(3)
    table = rng.random((9, 41))
    table[:, 0] = 0.0
    table[2, 30:] = np.inf
    table[4] = np.inf
    floors = _kernels.block_floors(table)
    block = _kernels.FLOOR_BLOCK
    assert floors.shape == (9, -(-40 // block))
    for b in range(9):
        for k in range(floors.shape[1]):
            expected = np.min(table[b, 1 + k * block:])
            assert floors[b, k] == np.float64(expected).view(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_max_dp_skipping_blocks_of_far_keys_gives_the_dense_result(seed):
    # Costs that grow with the span, as real ones do, let the kernel stop reading a cell's
    # previous keys after a block or two; small integers tie often, at block edges too, so
    # the nearest previous key must still win every tie. Pins and a window cut the blocks.
    rng = np.random.default_rng(seed)
    m, band = 150, 120 if seed % 2 else 149
    table = np.cumsum(rng.integers(0, 2, size=(m, band + 1)), axis=1).astype(float)
    dips = rng.random((m, band + 1)) < 0.05  # a long span that fits well now and then
    table[dips] = rng.integers(0, 3, size=int(dips.sum()))
    for b in range(m):
        table[b, 0] = 0.0
        table[b, b + 1:] = np.inf
    lowest = np.maximum(np.arange(m) - band, 0).astype(np.int64)
    lowest[90:] = np.maximum(lowest[90:], 70 + seed)  # a pin
    stop = 80
    error, previous = dense_select(table, lowest, stop - 1, False, 4)
    rows = np.full((2, m), np.inf)
    rows[1, 0] = 0.0
    final = np.full(stop, np.inf)
    back = np.zeros((stop, m), dtype=np.uint8)
    keys = 2
    while keys < stop:
        keys = _kernels.select_rows(table, _kernels.block_floors(table), lowest, keys, stop,
                                    False, 4, 2, 1 << 14, rows, final, back,
                                    np.zeros(stop - keys + 1, dtype=np.int64),
                                    np.zeros(stop - keys + 1, dtype=np.int64))
    np.testing.assert_array_equal(final[2:], error[2:, -1])
    for keys in range(2, stop):
        reached = previous[keys] >= 0
        np.testing.assert_array_equal(back[keys][reached],
                                      (np.arange(m) - previous[keys])[reached])
        assert not back[keys][~reached].any()


# ------------------------------------------------------------------- windowed = brute force
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("compose", ["max", "sum"])
def test_windowed_plan_is_the_brute_force_optimum_with_gaps_at_most_the_window(monkeypatch,
                                                                              seed, compose):
    monkeypatch.setattr(selection, "SHORTEST_WINDOW", 3)  # windows of small clips
    n = 12
    poses = random_poses(seed, n)
    table = full_table(poses - poses.mean(axis=0), "line-max")
    exact = SelectionSpace(poses, compose=compose)
    plans = set()
    for limit in range(1500, 6000, 4):  # bytes: the plans change every few bytes
        try:
            space = SelectionSpace(poses, compose=compose, memory_limit=limit)
        except CapacityError as error:
            assert "raise memory_gib to" in str(error)
            continue
        window, top = space.max_span, space.max_keys
        if (window, top) in plans:
            continue
        plans.add((window, top))
        if (window, top) == (n - 1, exact.max_keys):
            assert not space.notes
            np.testing.assert_array_equal(space.errors, exact.errors)
            continue
        assert len(space.notes) == 1 and space.notes[0].startswith("long take: ")
        assert (f"keys at most {window} frames apart" in space.notes[0]) == (window < n - 1)
        assert (f"K up to {top} (max_keys)" in space.notes[0]) == (top < exact.max_keys)
        for keys in range(2, top + 1):
            expected = brute_force(table, keys, compose, max_span=window)
            if keys < space.min_keys:
                assert expected == np.inf
                continue
            assert space.error(keys) == pytest.approx(expected, rel=1e-9, abs=1e-9)
            frames = space.keyframes(keys)
            assert gaps_at_most(frames, window)
            costs = [table[a, b] for a, b in itertools.pairwise(frames)]
            achieved = sum(costs) if compose == "sum" else max(costs)
            assert achieved == pytest.approx(expected, rel=1e-9, abs=1e-9)
    # the limits above give the exact space, windows with every K, and capped K
    assert (n - 1, exact.max_keys) in plans
    assert any(w < n - 1 for w, _ in plans) and any(k < exact.max_keys for _, k in plans)


def test_automatic_window_on_a_long_take_with_a_small_memory_limit():
    poses = random_poses(3, 3000)
    space = SelectionSpace(poses, memory_limit=20 * 10**6)
    window, top = space.max_span, space.max_keys
    assert selection.SHORTEST_WINDOW <= window < 2999 and top <= 1500
    note = space.notes[0]
    assert f"keys at most {window:,} frames apart (max_span {window})" in note
    assert f"exact for spans <= {window:,}; K from {space.min_keys:,}" in note
    assert "the exact space of K up to 1,500 and every span would need" in note
    # the plan only chose the options: the same as asking for them
    asked = SelectionSpace(poses, max_span=window, max_keys=top)
    np.testing.assert_array_equal(space.errors, asked.errors)
    assert not asked.notes
    for keys in (space.min_keys, (space.min_keys + top) // 2, top):
        frames = space.keyframes(keys)
        assert gaps_at_most(frames, window)
        np.testing.assert_array_equal(frames, asked.keyframes(keys))
    # a memory estimate: what the plan allows fits the limit
    parts, _ = space._needs(3, window, top)
    assert sum(parts.values()) <= 20 * 10**6


def test_time_budget_caps_k_and_keeps_an_explicit_max_span():
    poses = random_poses(4, 3000)
    space = SelectionSpace(poses, max_span=300, time_budget=0.2)
    assert space.max_span == 300 and space.max_keys < 1500
    assert space.notes[0].startswith(f"long take: K up to {space.max_keys:,} (max_keys)")
    assert "about" in space.notes[0] and "(time budget 0.2 s)" in space.notes[0]
    _, seconds = space._needs(3, 300, space.max_keys)
    assert seconds <= 0.2
    # an explicit max_keys is kept too: the window is what gives
    window = SelectionSpace(poses, max_keys=900, time_budget=0.2)
    assert window.max_keys == 900 and window.max_span < 2999
    assert window.min_keys <= 900


def test_refuses_only_when_even_the_window_does_not_fit():
    poses = random_poses(5, 3000)
    with pytest.raises(CapacityError) as info:
        SelectionSpace(poses, memory_limit=2 * 10**6)
    message = str(info.value)
    assert "analysing 3,000 frames (3,000 candidates) even with the smallest plan" in message
    assert "more than the limit of 2.0 MB: raise memory_gib to 0.1" in message
    # explicit options the memory cannot hold are refused, not changed
    # the table and its block floors (a bound per 16 previous keys, for the max DP)
    parts = {"error table": 8 * 3000 * 3000 + 8 * 3000 * 188, "Gram bands": 16 * 3000 * 3000,
             "selection arrays": 2 * 1501 * 3000 + 16 * 3000 + 8 * 1501, "poses": 16 * 3000 * 3}
    total = sum(parts.values())
    with pytest.raises(CapacityError) as info:
        SelectionSpace(poses, max_span=2999, max_keys=1500, memory_limit=10**8)
    arrays = parts["selection arrays"] / 1e6
    assert (f"(max_span 2999, max_keys 1500) needs {total / 1e9:.2f} GB (error table "
            f"76.5 MB, Gram bands 0.14 GB, selection arrays {arrays:.1f} MB, poses 0.1 MB), "
            f"more than the limit of 0.10 GB: raise memory_gib to "
            f"{np.ceil(total / 1024**3 * 10) / 10:g}; or set stride (e.g. 4), a smaller "
            "max_span, fewer max_keys") in str(info.value)
    # ... but only a time estimate over the budget runs as asked
    asked = SelectionSpace(poses[:600], max_span=599, max_keys=300, time_budget=1e-6)
    assert asked.max_span == 599 and asked.max_keys == 300 and not asked.notes


def test_capped_space_lookups_and_suggestions():
    poses = random_poses(6, 3000)
    space = SelectionSpace(poses, time_budget=0.1)
    assert space.notes and space.max_keys < 1500
    assert len(space.errors) == len(space.key_counts) == space.max_keys - space.min_keys + 1
    assert np.all(np.isfinite(space.errors))
    suggested = space.suggestions()
    assert space.min_keys <= suggested["threshold"] <= space.max_keys
    assert all(space.min_keys < k <= space.max_keys for k in suggested["cliffs"])
    frames = space.keyframes(space.max_keys)
    assert space.segment_costs(frames).max() == pytest.approx(space.error(space.max_keys))


# ----------------------------------------------------------------- progress and cancel
def test_progress_reports_real_fractions_between_blocks_and_may_abort():
    poses = random_poses(7, 2000)
    seen: list[tuple[float, str]] = []
    SelectionSpace(poses, max_span=1999, max_keys=1000,
                   progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0 <= fractions[0] and fractions[-1] <= 1
    table = [f for f, m in seen if "table" in m]
    dp = [f for f, m in seen if "optimal selections" in m]
    assert len(table) >= 4 and len(dp) >= 4  # blocks, not one report per stage
    assert len(set(fractions)) >= 8

    class Stop(Exception):
        pass

    def stop(fraction, message):
        if "optimal selections" in message and fraction > dp[1]:
            raise Stop

    with pytest.raises(Stop):
        SelectionSpace(poses, max_span=1999, max_keys=1000, progress=stop)


# ------------------------------------------------------------------ session, jobs, CLI
def test_session_tolerance_search_and_notes_with_a_capped_space(sample_clip):
    # an explicit max_span and a small budget: K is capped
    options = Options().replace(max_span=240, time_budget=0.02, space="channel",
                                cost="line-max")
    session = Session(StandaloneHost(sample_clip), options)
    analysis = session.compute_analysis(choose=False)
    session.adopt_analysis(analysis)
    space = analysis.space
    assert space.max_span == 240 and space.max_keys < sample_clip.n_frames // 2
    assert session.notes == space.notes and "(max_keys)" in space.notes[0]
    k = session.smallest_k_within(30.0, 300.0, space=space, motion=sample_clip)
    assert space.min_keys <= k <= space.max_keys
    # a tolerance beyond the capped K says which K it tried and what to raise
    with pytest.raises(SelectionError, match=f"no K up to {space.max_keys} keeps the error "
                                             "within mean 0.01 mm .* raise max_keys or loosen "
                                                 "tolerance$"):
        session.smallest_k_within(0.01, 0.1, space=space, motion=sample_clip)


def test_cli_prints_the_note_and_writes_it_to_both_jsons(tmp_path, sample_clip, capsys):
    clip = tmp_path / "take.bvh"
    write_bvh(sample_clip.sub_range(0, 599), clip)

    def run(*args: str) -> str:
        assert main(list(args)) == 0
        return capsys.readouterr().out

    out = run("analyze", str(clip), "--time-budget", "0.008", "--json", str(tmp_path / "a.json"))
    record = json.loads((tmp_path / "a.json").read_text())
    assert record["notes"] and record["notes"][0].startswith("long take: ")
    # the JSON keeps the field names of its options block; the command line says its flags
    assert "(max_span " in record["notes"][0]
    said = record["notes"][0].replace("max_span", "--max-span").replace("max_keys", "--max-keys")
    assert f"Note       {said}" in out.splitlines()
    window = re.search(r"keys at most (\d+) frames apart", record["notes"][0])
    assert window or record["max_keys"] < 300
    for entry in record["space"]:
        if window and entry["frames"]:
            assert gaps_at_most(np.array(entry["frames"]), int(window.group(1)))
    out = run("reduce", str(clip), "--time-budget", "0.008", "--suggested", "--space",
              "channel", "--json", str(tmp_path / "r.json"))
    reduced = json.loads((tmp_path / "r.json").read_text())
    assert reduced["notes"][0] == record["notes"][0]
    assert f"Note       {said}" in out.splitlines()
    # without the budget the same take is exact and says nothing
    out = run("analyze", str(clip), "--json", str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text())["notes"] == []
    assert "Note" not in out


@pytest.mark.parametrize("limit", [24 * 10**6, 40 * 10**6])
def test_a_long_take_of_real_mocap_gets_a_window_and_narrow_offsets(sample_clip, limit):
    poses = pose_matrix(sample_clip)
    space = SelectionSpace(np.concatenate([poses, poses[::-1], poses]), memory_limit=limit)
    band = space._table.shape[1] - 1
    assert space.max_span < 2981 and space.notes
    assert space._back.dtype == (np.uint8 if band <= 255 else np.uint16)
    for keys in (space.min_keys, space.max_keys):
        assert gaps_at_most(space.keyframes(keys), space.max_span)
    assert_same_as_dense(space)


# ------------------------------------------------------------------- the DP on demand
@pytest.mark.parametrize("seed", range(6))
def test_dp_on_demand_equals_the_whole_dp_and_solves_only_the_k_asked(seed):
    # K asked in any order (the tolerance's search jumps about) give the errors and keys the
    # whole DP gives; nothing above the largest K asked is solved until the whole space is
    # read, and then everything equals the whole DP's, back-pointers included
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 400))
    poses = random_poses(seed, n, dims=int(rng.integers(1, 6)))
    if seed % 2:  # exact ties
        poses = rng.integers(0, 3, size=(n, 2)).astype(float)
    options = {"compose": ("max", "sum")[seed % 2], "cost": ("line-max", "line-sse")[seed // 3]}
    if seed % 3 == 1:
        options.update(max_span=int(rng.integers(n // 8, n // 2)),
                       pins=[int(rng.integers(1, n - 1))])
    whole = SelectionSpace(poses, **options)
    calls = []
    lazy = SelectionSpace(poses, on_demand=lambda: calls.append(1), **options)
    assert lazy.min_keys == whole.min_keys and lazy.max_keys == whole.max_keys
    assert lazy._solved < whole.max_keys // 2  # up to the smallest feasible K, doubling
    asked = [int(k) for k in rng.integers(whole.min_keys, whole.max_keys // 3, size=8)]
    for k in asked:
        assert lazy.error(k) == whole.error(k)
        if np.isfinite(whole.error(k)):
            np.testing.assert_array_equal(lazy.keyframes(k), whole.keyframes(k))
    assert lazy._solved == max(asked + [lazy.min_keys])
    assert not lazy._back[lazy._solved + 1:].any() and calls
    np.testing.assert_array_equal(lazy.errors, whole.errors)
    assert lazy._solved == whole.max_keys
    np.testing.assert_array_equal(lazy._back, whole._back)
    assert lazy.suggestions() == whole.suggestions()


def test_dp_on_demand_cancelled_midway_keeps_what_it_solved(sample_clip):
    # the hook raises between blocks (a cancelled job): the K solved so far stay valid, and
    # asking again carries on from there to the same result as the whole DP
    whole = SelectionSpace.from_clip(sample_clip)
    state = {"calls": 0, "cancel": False}

    class Cancelled(Exception):
        pass

    def hook():
        state["calls"] += 1
        if state["cancel"]:
            raise Cancelled

    lazy = SelectionSpace.from_clip(sample_clip, on_demand=hook)
    state["cancel"] = True
    with pytest.raises(Cancelled):
        lazy.keyframes(whole.max_keys)
    solved = lazy._solved
    assert solved < whole.max_keys
    np.testing.assert_array_equal(lazy._errors[:solved + 1], whole._errors[:solved + 1])
    state["cancel"] = False
    np.testing.assert_array_equal(lazy.keyframes(whole.max_keys),
                                  whole.keyframes(whole.max_keys))
    np.testing.assert_array_equal(lazy.errors, whole.errors)
    assert lazy.timings["select_s"] > 0


def test_reduce_job_solves_the_dp_as_far_as_its_search_goes():
    # the default reduce job: the same K and keys as with the whole space solved first,
    # from part of the DP; the whole space, read afterwards, is the same too
    walk = Path(__file__).parent / "data" / "cmu_131_01_walk.bvh"
    clip = read_bvh(walk)
    options = Options()
    messages = []
    result = run_job(Job(str(walk), options, "reduce"), clip=clip,
                     progress=lambda f, m: messages.append(m))
    space = result.space
    assert space is not None and space.solved < space.max_keys
    # the wait for the DP says what it is, at the K that needed it
    assert any(re.fullmatch(r"K = \d+: optimal keyframes \(selections up to K = \d+\)", m)
               for m in messages)
    session = Session(StandaloneHost(clip, source="walk"), options)
    session.analyze()  # whole space first, then the same search
    assert session.space.solved == session.space.max_keys
    assert session.k == result.keys
    assert [int(f) for f in session.keyframes()] == result.frames
    np.testing.assert_array_equal(space.errors, session.space.errors)
