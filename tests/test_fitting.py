"""Curves, block solver, channel and world fits, reduce(): exactness, identities and quality."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sp_core import fitting
from sp_core.blocks import solve_block_tridiagonal, solve_segment_pairs
from sp_core.curves import KeyedCurves, solve_parameter
from sp_core.errors import ReductionError
from sp_core.fitting import difference_slopes, fit_channels, joint_errors
from sp_core.gimbal import fit_metric, rotation_triplets
from sp_core.reduction import reduce
from sp_core.selection import SelectionSpace


# ------------------------------------------------------------------------- building blocks
@pytest.mark.parametrize(("keys", "q", "batch"), [(1, 2, (3,)), (2, 1, ()), (7, 3, (4,)),
                                                  (5, 2, (2, 3))])
def test_block_tridiagonal_equals_dense_solve(keys, q, batch):
    rng = np.random.default_rng(keys * 10 + q)
    n = keys * q
    full = rng.normal(size=batch + (n, n))
    full = full @ np.swapaxes(full, -1, -2) + n * np.eye(n)
    band = np.kron(np.eye(keys) + np.eye(keys, k=1) + np.eye(keys, k=-1), np.ones((q, q)))
    full = full * band
    diagonal = np.stack([full[..., k * q:(k + 1) * q, k * q:(k + 1) * q] for k in range(keys)],
                        axis=-3)
    upper = np.stack([full[..., k * q:(k + 1) * q, (k + 1) * q:(k + 2) * q]
                      for k in range(keys - 1)], axis=-3) if keys > 1 else \
        np.zeros(batch + (0, q, q))
    rhs = rng.normal(size=batch + (keys, q))
    expected = np.linalg.solve(full, rhs.reshape(batch + (n,))[..., None])[..., 0]
    got = solve_block_tridiagonal(diagonal, upper, rhs).reshape(batch + (n,))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("keys", "batch"), [(2, (1_000,)), (50, (96,)), (40, (4, 25))])
def test_scalar_tridiagonal_kernel_equals_numpy_elimination(keys, batch):
    """Systems of scalar blocks from KERNEL_UNKNOWNS unknowns go to the numba kernel: the same
    numbers as numpy's elimination to the bit (the fits' results must not depend on the size
    at which the kernel takes over), and a dense solve's to rounding."""
    from sp_core.blocks import KERNEL_UNKNOWNS, _solve_tridiagonal

    rng = np.random.default_rng(keys)
    diagonal = rng.uniform(2.5, 4.0, batch + (keys, 1, 1))
    upper = rng.uniform(-1.0, 1.0, batch + (keys - 1, 1, 1))  # diagonally dominant
    rhs = rng.normal(size=batch + (keys, 1))
    assert rhs.size >= KERNEL_UNKNOWNS
    got = solve_block_tridiagonal(diagonal, upper, rhs)
    assert got.shape == rhs.shape
    np.testing.assert_array_equal(
        got[..., 0], _solve_tridiagonal(diagonal[..., 0, 0], upper[..., 0, 0], rhs[..., 0]))
    full = np.zeros(batch + (keys, keys))
    index = np.arange(keys)
    full[..., index, index] = diagonal[..., 0, 0]
    full[..., index[:-1], index[1:]] = upper[..., 0, 0]
    full[..., index[1:], index[:-1]] = upper[..., 0, 0]
    np.testing.assert_allclose(got[..., 0], np.linalg.solve(full, rhs)[..., 0], rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize(("keys", "batch"), [(1, (2,)), (2, ()), (8, (3, 2))])
def test_segment_pairs_equal_the_block_solver(keys, batch):
    """Broken tangents' structure (diagonal key blocks, segments tie out_k with in_k+1 only):
    the closed-form 2 x 2 solves equal the general block elimination and a dense solve."""
    rng = np.random.default_rng(keys)
    diagonal = np.zeros(batch + (keys, 2, 2))
    upper = np.zeros(batch + (max(keys - 1, 0), 2, 2))
    diagonal[..., 0, 0] = rng.uniform(0.5, 2.0, batch + (keys,))
    diagonal[..., 1, 1] = rng.uniform(0.5, 2.0, batch + (keys,))
    # |coupling| < sqrt(out x in weight): every 2 x 2 segment block positive definite
    bound = np.sqrt(diagonal[..., :-1, 1, 1] * diagonal[..., 1:, 0, 0])
    upper[..., 1, 0] = rng.uniform(-0.95, 0.95, bound.shape) * bound
    rhs = rng.normal(size=batch + (keys, 2))
    got = solve_segment_pairs(diagonal, upper, rhs)
    np.testing.assert_allclose(got, solve_block_tridiagonal(diagonal, upper, rhs), rtol=1e-10,
                               atol=1e-12)
    full = np.zeros(batch + (2 * keys, 2 * keys))
    for k in range(keys):
        full[..., 2 * k:2 * k + 2, 2 * k:2 * k + 2] = diagonal[..., k, :, :]
        if k < keys - 1:
            full[..., 2 * k + 1, 2 * k + 2] = full[..., 2 * k + 2, 2 * k + 1] = upper[..., k, 1, 0]
    expected = np.linalg.solve(full, rhs.reshape(batch + (2 * keys,))[..., None])[..., 0]
    np.testing.assert_allclose(got.reshape(batch + (2 * keys,)), expected, rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("key_values", ["captured", "fitted"])
def test_broken_channel_fit_equals_the_block_solver(sample_clip, monkeypatch, key_values):
    """The broken channel fit's per-segment solve gives the slopes (and key values) of the
    general block-tridiagonal solver on real mocap."""
    clip = sample_clip.sub_range(100, 399).unwrapped()
    rows = np.array([0, 23, 61, 100, 152, 203, 250, 299])
    fast = fit_channels(clip.channels, rows, "broken", key_values=key_values)
    monkeypatch.setattr(fitting, "solve_segment_pairs", solve_block_tridiagonal)
    slow = fit_channels(clip.channels, rows, "broken", key_values=key_values)
    scale = np.abs(slow.slopes).max()
    np.testing.assert_allclose(fast.slopes, slow.slopes, rtol=0, atol=1e-9 * scale)
    if key_values == "fitted":
        np.testing.assert_allclose(fast.key_values, slow.key_values, rtol=0,
                                   atol=1e-9 * np.abs(slow.key_values).max())


@settings(max_examples=50, deadline=None)
@given(a=st.floats(0.0, 1.0), b=st.floats(0.0, 1.0), length=st.floats(0.5, 50.0),
       t=st.floats(0.0, 1.0))
def test_bezier_parameter_reaches_the_time(a, b, length, t):
    u = solve_parameter(np.array([t * length]), a * length, b * length, length)
    x = 3 * a * length * u * (1 - u) ** 2 + 3 * (length - b * length) * u ** 2 * (1 - u) \
        + length * u ** 3
    assert x[0] == pytest.approx(t * length, abs=1e-9 * length)
    assert 0.0 <= u[0] <= 1.0


def hermite(v0, v1, m0, m1, u):
    """The textbook cubic Hermite (tangents m per unit parameter), written out."""
    return ((2 * u**3 - 3 * u**2 + 1) * v0 + (u**3 - 2 * u**2 + u) * m0
            + (-2 * u**3 + 3 * u**2) * v1 + (u**3 - u**2) * m1)


def test_unweighted_curves_are_cubic_hermite():
    frames = np.array([10, 16, 30])
    values = np.array([[0.0], [5.0], [-2.0]])
    slopes = np.array([1.0, -0.5, 0.25])
    # one-third handles: segment lengths 6 and 14
    out_dt = np.array([2.0, 14 / 3, 14 / 3])
    in_dt = np.array([2.0, 2.0, 14 / 3])
    out = np.stack([out_dt, out_dt * slopes], axis=-1)[:, None, :]
    ins = np.stack([-in_dt, -in_dt * slopes], axis=-1)[:, None, :]
    curves = KeyedCurves(["a.Xrotation"], frames, values, ins, out, np.array([True]))
    assert not curves.weighted
    t = np.linspace(10, 30, 81)
    got = curves.evaluate(t)[:, 0]
    first = t <= 16
    u = (t - 10) / 6
    np.testing.assert_allclose(got[first], hermite(0, 5, 6 * 1.0, 6 * -0.5, u[first]),
                               atol=1e-12)
    u = (t - 16) / 14
    np.testing.assert_allclose(got[~first], hermite(5, -2, 14 * -0.5, 14 * 0.25, u[~first]),
                               atol=1e-12)
    np.testing.assert_allclose(curves.evaluate([5, 10, 16, 30, 40])[:, 0], [0, 0, 5, -2, -2])


# ------------------------------------------------------------------------- channel fits
def synthetic(tangents: str, seed: int = 0):
    """Dense values made of Hermite segments with known key slopes, and their key rows."""
    rng = np.random.default_rng(seed)
    rows = np.array([0, 7, 15, 19, 30])
    values = rng.normal(size=(len(rows), 3)) * 10
    ins = rng.normal(size=(len(rows), 3))
    outs = ins.copy() if tangents == "unified" else rng.normal(size=(len(rows), 3))
    dense = np.empty((rows[-1] + 1, 3))
    for k in range(len(rows) - 1):
        length = rows[k + 1] - rows[k]
        u = (np.arange(rows[k], rows[k + 1] + 1) - rows[k]) / length
        dense[rows[k]:rows[k + 1] + 1] = hermite(values[k], values[k + 1], length * outs[k],
                                                 length * ins[k + 1], u[:, None])
    return dense, rows, ins, outs


@pytest.mark.parametrize("tangents", ["unified", "broken"])
def test_channel_fit_recovers_known_slopes(tangents):
    dense, rows, ins, outs = synthetic(tangents)
    fit = fit_channels(dense, rows, tangents)
    q = fit.slopes.shape[1]
    np.testing.assert_allclose(fit.slopes[1:, 0], ins[1:], atol=1e-6)
    np.testing.assert_allclose(fit.slopes[:-1, q - 1], outs[:-1], atol=1e-6)


def test_smooth_lies_between_broken_and_unified():
    dense, rows, _, _ = synthetic("broken", seed=3)

    def error(tangents, smoothness=1.0):
        fit = fit_channels(dense, rows, tangents, smoothness=smoothness)
        basis = fitting._Basis(rows, dense, fit.out_length, fit.in_length)
        return float(np.sum((basis.evaluate(fit.slopes, fit.slopes.shape[1]) - dense) ** 2))

    broken, unified = error("broken"), error("unified")
    assert broken < 1e-12 < unified
    errors = [error("smooth", s) for s in (1e-3, 1e-1, 10.0, 1e6)]
    assert all(broken - 1e-12 <= e <= unified + 1e-9 for e in errors)
    assert errors == sorted(errors)
    assert errors[-1] == pytest.approx(unified, rel=1e-3)


def test_weighted_handles_stay_in_their_segments_and_fit_better(sample_clip):
    clip = sample_clip.sub_range(200, 400).unwrapped()
    rows = np.array([0, 30, 70, 90, 140, 200])
    unified = fit_channels(clip.channels, rows, "unified")
    weighted = fit_channels(clip.channels, rows, "weighted")
    lengths = np.diff(rows)[:, None]
    for handle in (weighted.out_length, weighted.in_length):
        assert np.all(handle > 0) and np.all(handle <= lengths + 1e-12)
    assert not np.allclose(weighted.out_length, lengths / 3)

    def sse(fit):
        basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
        return ((basis.evaluate(fit.slopes, 1) - clip.channels) ** 2).sum(axis=0)

    assert np.all(sse(weighted) <= sse(unified) + 1e-9)
    assert sse(weighted).sum() < 0.9 * sse(unified).sum()
    curves = weighted.curves(clip.channels, rows, 200, clip.channel_names,
                             np.ones(clip.n_channels, bool), "weighted")
    assert curves.weighted
    fine = np.linspace(200, 400, 2001)
    # a function of time: evaluating on a fine grid reproduces the fitted rows exactly
    np.testing.assert_allclose(curves.evaluate(np.arange(200, 401)),
                               fitting._Basis(rows, clip.channels, weighted.out_length,
                                              weighted.in_length).evaluate(weighted.slopes, 1),
                               atol=1e-8)
    assert np.all(np.isfinite(curves.evaluate(fine)))


# ------------------------------------------------------------------------- world space
def test_world_gradient_equals_finite_differences(sample_clip):
    clip = sample_clip.sub_range(100, 140).unwrapped()
    rows = np.array([0, 12, 25, 40])
    for tangents in ("unified", "broken"):
        fit = fit_channels(clip.channels, rows, tangents)
        q = fit.slopes.shape[1]
        basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
        channels = basis.evaluate(fit.slopes, q)
        miss = clip.forward_kinematics(channels) - clip.positions
        columns = np.arange(clip.n_channels)
        _, _, rhs = fitting._world_normal_blocks(clip, basis, channels, miss, q, columns)

        def half_sse(slopes, basis=basis, q=q):
            m = clip.forward_kinematics(basis.evaluate(slopes, q)) - clip.positions
            return 0.5 * np.sum(m * m)

        rng = np.random.default_rng(1)
        for _ in range(12):
            idx = (rng.integers(len(rows)), rng.integers(q), rng.integers(clip.n_channels))
            up, down = fit.slopes.copy(), fit.slopes.copy()
            up[idx] += 1e-5
            down[idx] -= 1e-5
            numeric = (half_sse(up) - half_sse(down)) / 2e-5
            assert -rhs[idx[0], idx[1] * clip.n_channels + idx[2]] == pytest.approx(
                numeric, rel=1e-4, abs=1e-9)


def test_position_jacobian_equals_finite_differences(sample_clip):
    channels = sample_clip.channels[300:302]
    _, jacobian = sample_clip.position_jacobian(channels)
    for c in range(0, sample_clip.n_channels, 7):
        up, down = channels.copy(), channels.copy()
        up[:, c] += 1e-6
        down[:, c] -= 1e-6
        numeric = (sample_clip.forward_kinematics(up) - sample_clip.forward_kinematics(down)) / 2e-6
        np.testing.assert_allclose(jacobian[..., c], numeric, atol=1e-7)


# ------------------------------------------------------------------------- reduce()
@pytest.fixture(scope="module")
def sample_space(sample_clip):
    return SelectionSpace.from_clip(sample_clip, max_keys=110)


def test_residual_identity_and_host_frames(sample_clip):
    clip = sample_clip.with_channels(sample_clip.channels)
    clip = type(clip)(clip.node_names, clip.parents, clip.offsets, clip.end_sites,
                      clip.channel_names, clip.channels, clip.fps, first_frame=1001)
    frames = [1001, 1100, 1180, 1400, 1994]
    result = reduce(clip, frames, "broken", space="channel", key_values="captured")
    np.testing.assert_allclose(result.reduced + result.residual, clip.channels, atol=1e-9)
    assert result.curves.frames.tolist() == frames
    assert result.frames[0] == 1001 and result.frames[-1] == 1994
    np.testing.assert_allclose(result.curves.values, clip.channels[np.array(frames) - 1001])
    assert result.metrics.original_keys == clip.n_frames * int(result.curves.animated.sum())
    assert 1001 <= result.metrics.worst_frame <= 1994


def test_every_frame_a_key_reproduces_the_clip(sample_clip):
    clip = sample_clip.sub_range(0, 60)
    result = reduce(clip, range(0, 61), "unified", space="world")
    assert np.abs(result.residual).max() < 1e-9
    assert result.metrics.max < 1e-9


def test_constant_channels_are_reported_not_keyed(sample_clip):
    result = reduce(sample_clip, [0, 500, 993], space="channel")
    flat = np.ptp(sample_clip.channels, axis=0) == 0
    assert flat.any()
    np.testing.assert_array_equal(result.curves.animated, ~flat)
    ins, outs = result.curves.slopes()
    assert np.all(ins[:, flat] == 0) and np.all(outs[:, flat] == 0)
    np.testing.assert_array_equal(result.reduced[:, flat], sample_clip.channels[:, flat])


def test_short_clips_reduce_sensibly(sample_clip):
    one = sample_clip.sub_range(5, 5)
    result = reduce(one, [5])
    assert result.curves.n_keys == 1 and np.all(result.residual == 0)
    two = sample_clip.sub_range(5, 6)
    result = reduce(two, [5, 6])
    assert np.abs(result.residual).max() < 1e-9
    three = sample_clip.sub_range(5, 7)
    result = reduce(three, [5, 7], "broken")
    assert np.isfinite(result.residual).all()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"frames": [0, 2000]}, "keyframe 2000 is outside the clip (frames 0 to 993)"),
    ({"frames": []}, "no keyframes given"),
    ({"frames": [10]}, "one keyframe cannot span a range"),
    ({"frames": [0, 993], "tangents": "bent"}, "unknown tangent mode 'bent'"),
    ({"frames": [0, 993], "space": "screen"}, "unknown fitting space 'screen'"),
    ({"frames": [0, 993], "smoothness": -1.0}, "smoothness must be a finite number >= 0"),
])
def test_bad_reduce_input(sample_clip, kwargs, message):
    with pytest.raises(ReductionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reduce(sample_clip, **kwargs)


def test_nan_channels_are_refused(sample_clip):
    values = sample_clip.channels.copy()
    values[40, 5] = np.nan
    with pytest.raises(ReductionError, match=rf"^{sample_clip.channel_names[5]} is not a number "
                                             r"\(NaN or infinity\) at frame 40; fix that key$"):
        reduce(sample_clip.with_channels(values), [0, 50, 100])


# ------------------------------------------------------------------------- quality targets
def baseline(clip, frames):
    """The published plug-in: keys at the same frames, slopes from finite differences."""
    rows = np.asarray(frames) - clip.first_frame
    values = clip.unwrapped().channels
    fit = fitting.Fit(difference_slopes(values, rows)[:, None, :],
                      *fitting._third_lengths(rows, values.shape[1]))
    basis = fitting._Basis(rows, values, fit.out_length, fit.in_length)
    return joint_errors(clip, basis.evaluate(fit.slopes, 1), clip.positions)


@pytest.mark.parametrize("ratio", [0.05, 0.10])
def test_quality_against_finite_difference_baseline(sample_clip, sample_space, ratio):
    frames = sample_space.keyframes(round(ratio * sample_clip.n_frames))
    base = baseline(sample_clip, frames)
    broken = reduce(sample_clip, frames, "broken", space="channel").metrics
    assert broken.mean <= 0.45 * base.mean()
    unified = reduce(sample_clip, frames, "unified", space="world").metrics
    assert unified.mean <= 0.6 * base.mean()
    assert unified.max <= base.max()


@pytest.mark.parametrize("tangents", ["unified", "broken", "smooth", "weighted"])
def test_world_never_worse_than_channel(sample_clip, sample_space, tangents):
    frames = sample_space.keyframes(99)
    channel = reduce(sample_clip, frames, tangents, space="channel").metrics
    world = reduce(sample_clip, frames, tangents, space="world").metrics
    assert world.mean <= channel.mean


def test_joint_orients_turn_children_and_keep_the_jacobian_exact(sample_clip):
    from scipy.spatial.transform import Rotation

    from sp_core.clip import Clip

    # a root turned 90 degrees about Z by its orient carries its child's offset along
    simple = Clip(["root", "tip"], [-1, 0], [[0, 0, 0], [1, 0, 0]], [False, True],
                  ["root.Zrotation"], np.zeros((1, 1)), 24.0,
                  orients=np.stack([Rotation.from_euler("z", 90, degrees=True).as_matrix(),
                                    np.eye(3)]))
    np.testing.assert_allclose(simple.positions[0, 1], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(simple.rest_positions()[1], [0, 1, 0], atol=1e-12)
    # orient then channel rotation: R = orient . Rz(30)
    turned = simple.with_channels(np.array([[30.0]]))
    angle = np.radians(120)
    np.testing.assert_allclose(turned.positions[0, 1], [np.cos(angle), np.sin(angle), 0],
                               atol=1e-12)
    orients = Rotation.random(sample_clip.n_nodes, random_state=3).as_matrix()
    clip = Clip(sample_clip.node_names, sample_clip.parents, sample_clip.offsets,
                sample_clip.end_sites, sample_clip.channel_names, sample_clip.channels[400:402],
                sample_clip.fps, orients=orients)
    _, jacobian = clip.position_jacobian(clip.channels)
    for c in range(0, clip.n_channels, 5):
        up, down = clip.channels.copy(), clip.channels.copy()
        up[:, c] += 1e-6
        down[:, c] -= 1e-6
        numeric = (clip.forward_kinematics(up) - clip.forward_kinematics(down)) / 2e-6
        np.testing.assert_allclose(jacobian[..., c], numeric, atol=1e-7)
    assert clip.sub_nodes(["LeftWrist"]).orients is not None


# ------------------------------------------------------------------------ fitted key values
@pytest.mark.parametrize("tangents", fitting.TANGENT_MODES)
def test_fitted_key_values_never_fit_worse_than_captured_ones(sample_clip, tangents):
    clip = sample_clip.sub_range(300, 599)
    frames = [300, 340, 380, 420, 470, 520, 560, 599]
    for space in ("channel", "world"):
        captured = reduce(clip, frames, tangents, space=space, key_values="captured")
        fitted = reduce(clip, frames, tangents, space=space, key_values="fitted")
        # every layer still adds up to the original
        np.testing.assert_allclose(fitted.reduced + fitted.residual, clip.channels, atol=1e-9)
        np.testing.assert_allclose(fitted.curves.dense(), fitted.reduced, atol=1e-9)
        if space == "channel":
            # each half-step is a channel's exact least squares given the other: no channel's
            # squared error grows (the joint error need not follow: a channel's squared error
            # ignores its reach), except the rotations fitted on the rotation near gimbal lock
            work = clip.unwrapped()
            coupled = [c for order, columns in rotation_triplets(work)
                       if fit_metric(order, work.channels[:, columns]) is not None
                       for c in columns]
            sse = [np.sum(r.residual ** 2, axis=0) for r in (captured, fitted)]
            alone = np.setdiff1d(np.arange(clip.n_channels), coupled)
            assert np.all(sse[1][alone] <= sse[0][alone] * (1 + 1e-9) + 1e-12)
        else:
            assert fitted.metrics.mean_mm < captured.metrics.mean_mm
        # the key poses stay near the captured ones: on average no further off than the
        # in-betweens (least squares spreads the error; it does not move the keys away)
        rows = np.asarray(frames) - clip.first_frame
        reference = clip.unwrapped().positions
        at_keys = joint_errors(clip.unwrapped(), fitted.reduced[rows], reference[rows])
        assert at_keys.mean() <= 2 * fitted.metrics.mean


def test_the_key_value_rounds_report_progress_and_stop_on_cancel(sample_clip):
    clip = sample_clip.sub_range(0, 299)
    frames = [0, 60, 120, 180, 240, 299]
    seen: list[tuple[float, str]] = []
    reduce(clip, frames, progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0.0 <= fractions[0] and fractions[-1] <= 1.0
    assert any("key values" in m for _, m in seen) and any("tangents" in m for _, m in seen)

    class Stop(Exception):
        pass

    def cancel(fraction: float, message: str) -> None:
        if "key values" in message:
            raise Stop

    with pytest.raises(Stop):
        reduce(clip, frames, progress=cancel)


def test_unknown_key_values_are_refused(sample_clip):
    with pytest.raises(ReductionError, match="unknown key values 'rounded'; choose one of "
                                             "fitted, captured"):
        reduce(sample_clip.sub_range(0, 40), [0, 20, 40], key_values="rounded")


def test_held_channels_are_captured_in_the_world_fit_and_in_what_is_reported(sample_clip):
    """Channels a host leaves alone (locked) are kept as captured: not keyed, and the world
    fit poses them as captured (it fitted the others to their fitted curves, a pose never
    written: 19.1 mm mean where fitting to what is written gives 15.8)."""
    from sp_core.fitting import fit_channels, refine_world
    from sp_core.reduction import constant_channels

    clip = sample_clip.sub_range(0, 300)
    names = [c for c in clip.channel_names if "rotation" in c and c.split(".")[0] in
             ("lowerback", "Chest", "LeftHip", "RightHip", "LeftShoulder", "RightShoulder")]
    held_clip = clip._derived(held_channels=names)  # noqa: SLF001 - as a host's motion()
    frames = np.arange(0, 301, 50)
    reduction = reduce(held_clip, frames)
    held = held_clip.held
    assert held.sum() == len(names) and not reduction.curves.animated[held].any()
    work = held_clip.unwrapped()
    np.testing.assert_array_equal(reduction.reduced[:, held], work.channels[:, held])
    shown = np.linalg.norm(clip.forward_kinematics(reduction.reduced) - clip.positions,
                           axis=-1) * clip.mm_per_unit()
    assert reduction.metrics.mean_mm == pytest.approx(shown.mean(), rel=1e-9)
    assert reduction.metrics.pose_keys == len(frames) * int(reduction.curves.animated.sum())
    # the fit that ignores what the host keeps, then written with the held channels captured
    values, rows = work.channels, frames
    animated = ~constant_channels(values)
    start = fit_channels(values, rows, "unified", 1.0, key_values="fitted")
    start.slopes[:, :, ~animated] = 0.0
    blind = refine_world(work, rows, start, "unified", 1.0, free=animated & ~held,
                         key_values="fitted")
    dense = blind.curves(values, rows, work.first_frame, list(work.channel_names), animated,
                         "unified").dense()
    dense[:, held] = values[:, held]
    blind_mm = np.linalg.norm(clip.forward_kinematics(dense) - clip.positions,
                              axis=-1).mean() * clip.mm_per_unit()
    assert reduction.metrics.mean_mm < 0.9 * blind_mm
