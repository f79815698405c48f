"""The minimax world fit: never a larger max than least squares at the same keys, the mean
within its bound, weighted blocks equal to the dense reference, progress and cancellation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sp_core import fitting
from sp_core.errors import ReductionError
from sp_core.fitting import MINIMAX_MEAN_BOUND, fit_channels, refine_world
from sp_core.io.bvh import read_bvh
from sp_core.reduction import constant_channels, reduce
from sp_core.reweighting import worst_first_weights
from sp_core.session import AnalysisCancelled, CancelToken, Session
from sp_core.standalone import StandaloneHost
from sp_core.tree_jacobian import TreeLayout, pose, world_normal_blocks

from strategies import clips

DATA = Path(__file__).parent / "data"


def _both(clip, frames, tangents):
    return [reduce(clip, frames, tangents, objective=o).metrics
            for o in ("least-squares", "minimax")]


def _within_bounds(plain, minimax) -> None:
    # the fit's own check uses its kinematics; the metrics recompute them (rounding only)
    assert minimax.max <= plain.max * (1 + 1e-9) + 1e-12
    assert minimax.mean <= (1 + MINIMAX_MEAN_BOUND) * plain.mean * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("tangents", ["unified", "broken", "smooth", "weighted"])
@pytest.mark.parametrize(("name", "k"), [("cmu_131_01_walk.bvh", 5),
                                         ("cmu_131_01_stop.bvh", 5)])
def test_minimax_lowers_the_max_of_real_takes_and_keeps_the_mean(name, k, tangents):
    """On real mocap at the default selection's keys, in every tangent mode: the max is never
    above the least-squares fit's and the mean within the bound; in the default mode it is
    clearly lower (the worst frames of both takes have room)."""
    from sp_core.selection import SelectionSpace

    clip = read_bvh(DATA / name)
    frames = SelectionSpace.from_clip(clip, max_keys=k + 2).keyframes(k)
    plain, minimax = _both(clip, frames, tangents)
    _within_bounds(plain, minimax)
    if tangents == "unified":
        assert minimax.max < 0.95 * plain.max


def test_minimax_on_a_range_of_the_sample_with_many_keys(sample_clip):
    clip = sample_clip.sub_range(300, 599)
    frames = list(range(300, 600, 25)) + [599]
    plain, minimax = _both(clip, frames, "unified")
    _within_bounds(plain, minimax)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clip=clips(max_joints=5, max_frames=14, min_frames=6),
       tangents=st.sampled_from(["unified", "broken", "smooth", "weighted"]),
       middle=st.integers(1, 4))
def test_minimax_bounds_on_random_skeletons(clip, tangents, middle):
    """Any hierarchy, channel layout and (wild) motion: the same two bounds."""
    frames = sorted({clip.first_frame, clip.first_frame + middle, clip.last_frame})
    plain, minimax = _both(clip, frames, tangents)
    _within_bounds(plain, minimax)


@pytest.mark.parametrize("tangents", ["unified", "broken"])
def test_node_weighted_tree_blocks_equal_the_dense_reference(sample_clip, tangents):
    """The kernel's joint weights against the dense position Jacobian with every joint's rows
    scaled by the square root of its weight."""
    clip = sample_clip.sub_range(100, 249).unwrapped()
    rows = np.array([0, 31, 77, 120, 149])
    columns = np.flatnonzero(~constant_channels(clip.channels))
    fit = fit_channels(clip.channels, rows, tangents)
    q = fit.slopes.shape[1]
    basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
    channels = basis.evaluate(fit.slopes, q)
    positions = clip.forward_kinematics(channels)
    miss = positions - clip.positions
    weights = np.random.default_rng(3).uniform(0.0, 5.0, positions.shape[:2])
    weights[::7] = 0.0  # zero weights are skipped by the kernel
    dense = fitting._world_normal_blocks(clip, basis, channels, miss, q, columns, weights)
    layout = TreeLayout.of(clip, columns)
    _, axes = pose(clip, layout, channels)
    tree = world_normal_blocks(layout, basis.starts, basis.w_out, basis.w_in, positions, miss,
                               axes, q, weights)
    plain = world_normal_blocks(layout, basis.starts, basis.w_out, basis.w_in, positions, miss,
                                axes, q)
    for a, b, c in zip(dense, tree, plain, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())
        assert not np.allclose(b, c)  # the weights changed something


def test_worst_first_weights():
    errors = np.array([1.0, 1.0, 2.0, 4.0])  # mean 2
    np.testing.assert_allclose(worst_first_weights(errors, 4.0), [1 + 1 / 16, 1 + 1 / 16, 2, 17])
    np.testing.assert_allclose(worst_first_weights(errors, 1.0, cap=1.5), [1.5, 1.5, 2, 2.5])
    np.testing.assert_allclose(worst_first_weights(np.zeros(3)), np.ones(3))


def test_minimax_fit_reports_its_rounds_and_stops_when_progress_raises(sample_clip):
    clip = sample_clip.sub_range(0, 299)
    frames = list(range(0, 300, 20)) + [299]
    seen: list[tuple[float, str]] = []
    reduce(clip, frames, objective="minimax", progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] >= 0.0 and fractions[-1] <= 1.0
    assert any(m.startswith("world fit, iteration") for _, m in seen)
    assert any(m.startswith("minimax round 1 of at most") for _, m in seen)

    class Stop(Exception):
        pass

    calls: list[str] = []

    def stop_in_the_first_round(fraction: float, message: str) -> None:
        calls.append(message)
        if message.startswith("minimax round 1"):
            raise Stop

    with pytest.raises(Stop):
        reduce(clip, frames, objective="minimax", progress=stop_in_the_first_round)
    assert calls[-1].startswith("minimax round 1")


def test_a_cancel_in_a_minimax_round_stops_the_tolerance_search():
    clip = read_bvh(DATA / "cmu_131_01_walk.bvh")
    token = CancelToken()
    reached: list[str] = []

    def cancel_in_a_round(fraction: float, message: str) -> None:
        reached.append(message)
        if "minimax round" in message:
            token.cancel()

    session = Session(StandaloneHost(clip))
    session.set_options(objective="minimax")
    with pytest.raises(AnalysisCancelled):
        session.analyze(progress=cancel_in_a_round, cancel=token)
    assert "minimax round" in reached[-1]
    assert session.space is None and session.k is None


def test_unknown_objective_is_refused(sample_clip):
    with pytest.raises(ReductionError, match="unknown fit objective 'median'; choose one of "
                                             "least-squares, minimax"):
        reduce(sample_clip, [0, 50, 100], objective="median")
    clip = sample_clip.sub_range(0, 40).unwrapped()
    rows = np.array([0, 20, 40])
    with pytest.raises(ReductionError, match="unknown fit objective 'median'"):
        refine_world(clip, rows, fit_channels(clip.channels, rows), "unified",
                     objective="median")
