"""The world fit's tree-structured Gauss–Newton blocks against the slow exact dense path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from sp_core import fitting
from sp_core.clip import Clip
from sp_core.fitting import fit_channels, refine_world
from sp_core.reduction import constant_channels, reduce
from sp_core.tree_jacobian import (
    TreeLayout,
    channel_axes,
    pose,
    solve_key_blocks,
    solve_segment_blocks,
    world_normal_blocks,
)

from strategies import clips

KEYS = np.array([0, 37, 80, 131, 190, 244, 299])


def _blocks_both_ways(clip: Clip, rows: np.ndarray, tangents: str, columns: np.ndarray):
    fit = fit_channels(clip.channels, rows, tangents)
    q = fit.slopes.shape[1]
    basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
    # a pose away from the fit's own optimum, so that every block has weight
    rng = np.random.default_rng(5)
    channels = basis.evaluate(fit.slopes + rng.normal(0, 0.3, fit.slopes.shape), q)
    positions = clip.forward_kinematics(channels)
    miss = positions - clip.positions
    dense = fitting._world_normal_blocks(clip, basis, channels, miss, q, columns)
    layout = TreeLayout.of(clip, columns)
    chained, axes = pose(clip, layout, channels)
    np.testing.assert_allclose(chained, positions, rtol=0, atol=1e-12 * np.abs(positions).max())
    np.testing.assert_allclose(axes, channel_axes(clip, channels, columns), rtol=0, atol=1e-14)
    tree = world_normal_blocks(layout, basis.starts, basis.w_out, basis.w_in, positions, miss,
                               axes, q)
    return dense, tree


@pytest.mark.parametrize("tangents", ["unified", "broken", "weighted"])
def test_tree_blocks_equal_the_dense_jacobian_on_mocap(sample_clip, tangents):
    clip = sample_clip.sub_range(300, 599).unwrapped()
    columns = np.flatnonzero(~constant_channels(clip.channels))
    dense, tree = _blocks_both_ways(clip, KEYS, tangents, columns)
    for a, b in zip(dense, tree, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())


def test_pose_in_blocks_of_frames_is_the_same_to_the_bit(sample_clip, monkeypatch):
    """A long take's poses are formed a block of frames at a time (the rotation matrices of
    every frame at once took hundreds of MB): blocks of any size, a short last one included,
    give what one call over every frame gives."""
    from sp_core import clip as clip_module

    clip = sample_clip.unwrapped()
    channels = clip.channels + np.random.default_rng(3).normal(0, 2.0, clip.channels.shape)
    layout = TreeLayout.of(clip, np.flatnonzero(~constant_channels(clip.channels)))
    whole = pose(clip, layout, channels)
    assert len(channels) <= clip_module.FK_BLOCK  # (one call)
    for block in (1, 97, 500, len(channels) - 1):
        monkeypatch.setattr(clip_module, "FK_BLOCK", block)
        blocked = pose(clip, layout, channels)
        for a, b in zip(whole, blocked, strict=True):
            assert a.shape == b.shape and np.array_equal(a, b), block


@pytest.mark.parametrize("tangents", ["unified", "broken"])
def test_tree_blocks_overwrite_reused_arrays(sample_clip, tangents):
    """Blocks written into a previous iteration's arrays (holding anything) are the blocks
    formed in fresh ones, bit for bit; arrays of another shape are refused."""
    clip = sample_clip.sub_range(300, 599).unwrapped()
    columns = np.flatnonzero(~constant_channels(clip.channels))
    fit = fit_channels(clip.channels, KEYS, tangents)
    q = fit.slopes.shape[1]
    basis = fitting._Basis(KEYS, clip.channels, fit.out_length, fit.in_length)
    layout = TreeLayout.of(clip, columns)
    positions, axes = pose(clip, layout, basis.evaluate(fit.slopes, q))
    miss = positions - clip.positions
    args = (layout, basis.starts, basis.w_out, basis.w_in, positions, miss, axes, q)
    fresh = world_normal_blocks(*args)
    used = tuple(np.full_like(a, 7.5) for a in fresh)
    again = world_normal_blocks(*args, out=used)
    for a, b, c in zip(fresh, again, used, strict=True):
        assert b is c
        np.testing.assert_array_equal(b, a)
    with pytest.raises(ValueError, match="out must be"):
        world_normal_blocks(*args, out=(fresh[0][:-1], fresh[1], fresh[2]))


def test_tree_blocks_with_orients_and_a_subset_of_channels(sample_clip):
    orients = Rotation.random(sample_clip.n_nodes, random_state=7).as_matrix()
    clip = Clip(sample_clip.node_names, sample_clip.parents, sample_clip.offsets,
                sample_clip.end_sites, sample_clip.channel_names,
                sample_clip.channels[500:620], sample_clip.fps, orients=orients).unwrapped()
    rng = np.random.default_rng(2)
    columns = np.sort(rng.choice(clip.n_channels, 40, replace=False))
    dense, tree = _blocks_both_ways(clip, np.array([0, 30, 61, 119]), "broken", columns)
    for a, b in zip(dense, tree, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())


@pytest.mark.parametrize("translation_space", ["parent", "oriented"])
def test_tree_blocks_with_translations_everywhere_two_roots_and_node_weights(translation_space):
    """The subtree-moment blocks cover what the sample skeleton lacks: translation channels
    below the root (their pairs with rotations above and below them), a second root, nodes
    far from the origin, an orient on every node, and weights per node and frame (the
    minimax rounds); they equal the dense Jacobian's products."""
    rng = np.random.default_rng(11)
    parents = [-1, 0, 1, 1, 3, -1, 5, 6]
    names = [f"n{i}" for i in range(len(parents))]
    order = "ZXY"
    channel_names = [f"{n}.{axis}{kind}" for n in names
                     for axis, kind in [(a, "position") for a in "XYZ"]
                     + [(a, "rotation") for a in order]]
    frames = 60
    channels = np.cumsum(rng.normal(0.0, 2.0, (frames, len(channel_names))), axis=0)
    channels[:, 0:3] += 500.0  # far from the origin: the moments must not cancel
    clip = Clip(names, parents, rng.normal(0.0, 10.0, (len(parents), 3)),
                np.zeros(len(parents), bool), channel_names, channels, 30.0,
                orients=Rotation.random(len(parents), random_state=3).as_matrix(),
                translation_space=translation_space).unwrapped()
    rows = np.array([0, 17, 38, 59])
    columns = np.flatnonzero(rng.random(clip.n_channels) < 0.8)
    fit = fit_channels(clip.channels, rows, "broken")
    basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
    channels = basis.evaluate(fit.slopes + rng.normal(0, 0.3, fit.slopes.shape), 2)
    positions = clip.forward_kinematics(channels)
    miss = positions - clip.positions
    weights = rng.uniform(0.0, 3.0, positions.shape[:2])
    weights[:, 4] = 0.0  # a node left out, as a zero weight does
    dense = fitting._world_normal_blocks(clip, basis, channels, miss, 2, columns, weights)
    layout = TreeLayout.of(clip, columns)
    _, axes = pose(clip, layout, channels)
    tree = world_normal_blocks(layout, basis.starts, basis.w_out, basis.w_in, positions, miss,
                               axes, 2, weights)
    for a, b in zip(dense, tree, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max())


@settings(max_examples=60, deadline=None)
@given(clip=clips(max_joints=6, max_frames=12, min_frames=4), data=st.data())
def test_tree_blocks_equal_the_dense_jacobian_on_random_skeletons(clip, data):
    """Any hierarchy (several roots, End Sites, any channels in any order), orients or none,
    any subset of free channels, node weights with zeros: the subtree-moment blocks are the
    dense Jacobian's products."""
    assume(clip.n_channels > 0)
    if data.draw(st.booleans(), label="orients"):
        seed = data.draw(st.integers(0, 2**16), label="orient seed")
        clip = Clip(clip.node_names, clip.parents, clip.offsets, clip.end_sites,
                    clip.channel_names, clip.channels, clip.fps,
                    orients=Rotation.random(clip.n_nodes, random_state=seed).as_matrix(),
                    translation_space=data.draw(st.sampled_from(["parent", "oriented"]),
                                                label="translation space"))
    clip = clip.unwrapped()
    picked = data.draw(st.lists(st.booleans(), min_size=clip.n_channels,
                                max_size=clip.n_channels), label="free")
    columns = np.flatnonzero(picked)
    assume(len(columns) > 0)
    last = clip.n_frames - 1
    rows = np.array([0, data.draw(st.integers(1, last - 1), label="middle key"), last])
    tangents = data.draw(st.sampled_from(["unified", "broken"]), label="tangents")
    fit = fit_channels(clip.channels, rows, tangents)
    q = fit.slopes.shape[1]
    basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    channels = basis.evaluate(fit.slopes + rng.normal(0, 0.5, fit.slopes.shape), q)
    positions = clip.forward_kinematics(channels)
    miss = positions - clip.positions
    weights = rng.uniform(0.0, 2.0, positions.shape[:2]) * (rng.random(positions.shape[:2]) > 0.2)
    dense = fitting._world_normal_blocks(clip, basis, channels, miss, q, columns, weights)
    layout = TreeLayout.of(clip, columns)
    _, axes = pose(clip, layout, channels)
    tree = world_normal_blocks(layout, basis.starts, basis.w_out, basis.w_in, positions, miss,
                               axes, q, weights)
    for a, b in zip(dense, tree, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9 * max(np.abs(a).max(), 1e-300))


def test_channel_axes_match_the_position_jacobian(sample_clip):
    clip = sample_clip.sub_range(10, 14)
    columns = np.arange(clip.n_channels)
    positions, jacobian = clip.position_jacobian(clip.channels)
    axes = channel_axes(clip, clip.channels, columns)
    rotation = clip.is_rotation_channel()
    for c in columns:
        node = clip.channel_nodes[c]
        # the owner node's child (or itself for translations) moves by axis x arm
        below = [n for n in range(clip.n_nodes) if clip.parents[n] == node] or [node]
        n = below[0]
        expected = (np.cross(axes[:, c], positions[:, n] - positions[:, node]) if rotation[c]
                    else axes[:, c])
        np.testing.assert_allclose(expected, jacobian[:, n, :, c], atol=1e-12)


@pytest.mark.parametrize(("tangents", "key_values"), [("unified", "captured"),
                                                     ("smooth", "captured"),
                                                     ("broken", "captured"),
                                                     ("unified", "fitted"),
                                                     ("smooth", "fitted"),
                                                     ("broken", "fitted")])
def test_tree_refinement_equals_the_dense_refinement(sample_clip, tangents, key_values):
    clip = sample_clip.sub_range(200, 499).unwrapped()
    free = ~constant_channels(clip.channels)
    fit = fit_channels(clip.channels, KEYS, tangents)
    fit.slopes[:, :, ~free] = 0.0
    slow = refine_world(clip, KEYS, fit, tangents, iterations=4, free=free, jacobian="dense",
                        key_values=key_values)
    fast = refine_world(clip, KEYS, fit, tangents, iterations=4, free=free,
                        key_values=key_values)
    assert fast.info["world_iterations"] == slow.info["world_iterations"]
    q = fit.slopes.shape[1]
    errors = [fitting.joint_errors(clip, f.basis(clip.channels, KEYS).evaluate(f.slopes, q),
                                   clip.positions)
              for f in (slow, fast)]
    assert errors[1].mean() == pytest.approx(errors[0].mean(), rel=1e-6)
    assert errors[1].max() == pytest.approx(errors[0].max(), rel=1e-6)


def test_default_reduce_matches_the_twelve_iteration_dense_fit(sample_clip):
    """The shipped path (tree blocks, stopping on convergence) keeps the slow exact path's
    quality on real mocap: mean and max joint error within 1 %."""
    frames = [0, 128, 183, 223, 303, 356, 402, 460, 509, 563, 624, 711, 746, 794, 993]
    fast = reduce(sample_clip, frames)
    clip = sample_clip.unwrapped()
    rows = np.asarray(frames)
    free = ~constant_channels(clip.channels)
    fit = fit_channels(clip.channels, rows, "unified")
    fit.slopes[:, :, ~free] = 0.0
    slow = refine_world(clip, rows, fit, "unified", iterations=12, free=free, jacobian="dense")
    basis = fitting._Basis(rows, clip.channels, fit.out_length, fit.in_length)
    slow_errors = fitting.joint_errors(clip, basis.evaluate(slow.slopes, 1), clip.positions)
    scale = sample_clip.mm_per_unit()
    assert fast.metrics.mean_mm <= 1.01 * slow_errors.mean() * scale
    assert fast.metrics.max_mm <= 1.01 * slow_errors.max() * scale


def test_slopes_before_key_value_rounds_stop_early_within_a_percent(sample_clip, monkeypatch):
    """Before the key-value rounds the slopes' first fit stops at SLOPES_BEFORE_ROUNDS: on the
    sample at its suggested K = 14 (where that fit crept on for twelve iterations) it runs
    fewer iterations, and the fit's mean and max joint errors stay within 1 % of those of the
    first fit run to refine_world's own tolerance."""
    frames = [0, 134, 184, 251, 310, 365, 432, 485, 549, 616, 691, 746, 802, 993]
    clip = sample_clip.unwrapped()
    rows = np.asarray(frames)
    free = ~constant_channels(clip.channels)
    start = fit_channels(clip.channels, rows, "unified", key_values="fitted")
    start.slopes[:, :, ~free] = 0.0
    results = {}
    for label, fraction in (("early", fitting.SLOPES_BEFORE_ROUNDS), ("full", 0.0)):
        monkeypatch.setattr(fitting, "SLOPES_BEFORE_ROUNDS", fraction)
        fit = refine_world(clip, rows, start, "unified", free=free, key_values="fitted")
        channels = fit.basis(clip.channels, rows).evaluate(fit.slopes, 1)
        errors = fitting.joint_errors(clip, channels, clip.positions)
        results[label] = (fit.info["world_iterations"], errors.mean(), errors.max())
    (early_runs, early_mean, early_max), (full_runs, full_mean, full_max) = (
        results["early"], results["full"])
    assert early_runs < full_runs
    assert early_mean <= 1.01 * full_mean
    assert early_max <= 1.01 * full_max


def test_unknown_jacobian_is_refused(sample_clip):
    clip = sample_clip.sub_range(0, 40).unwrapped()
    rows = np.array([0, 20, 40])
    fit = fit_channels(clip.channels, rows)
    with pytest.raises(fitting.ReductionError, match="unknown jacobian 'sparse'"):
        refine_world(clip, rows, fit, "unified", jacobian="sparse")


@pytest.mark.parametrize(("keys", "q", "n"), [(2, 1, 3), (6, 2, 5), (9, 1, 4), (5, 2, 1)])
def test_key_block_solver_equals_a_dense_solve(keys, q, n):
    """Random positive definite systems with the world fit's structure: a segment couples
    only the out slots of its first key with the in slots of its second."""
    rng = np.random.default_rng(keys * 10 + q)
    size = q * n
    rows = rng.normal(size=(3 * keys * size, keys * size))
    gram = rows.T @ rows
    for a in range(keys):
        for b in range(keys):
            if abs(a - b) > 1:
                gram[a * size:(a + 1) * size, b * size:(b + 1) * size] = 0.0
            elif b == a + 1:
                keep = np.zeros((size, size), bool)
                keep[(q - 1) * n:, :n] = True
                gram[a * size:(a + 1) * size, b * size:(b + 1) * size][~keep] = 0.0
                gram[b * size:(b + 1) * size, a * size:(a + 1) * size] = \
                    gram[a * size:(a + 1) * size, b * size:(b + 1) * size].T
    gram += keys * size * np.eye(keys * size)  # positive definite after the zeroing
    rhs = rng.normal(size=keys * size)
    diagonal = np.stack([gram[k * size:(k + 1) * size, k * size:(k + 1) * size]
                         for k in range(keys)])
    coupling = np.stack([gram[k * size + (q - 1) * n:(k + 1) * size,
                              (k + 1) * size:(k + 1) * size + n] for k in range(keys - 1)]
                        ) if keys > 1 else np.zeros((0, n, n))
    x = solve_key_blocks(diagonal, coupling, rhs.reshape(keys, size), q)
    np.testing.assert_allclose(x.reshape(-1), np.linalg.solve(gram, rhs), rtol=1e-9,
                               atol=1e-12)


def test_key_block_solver_refuses_a_pivot_that_is_not_positive_definite():
    """The key blocks are factored by LAPACK's potrf directly: a pivot that is not positive
    definite raises numpy's LinAlgError, as scipy's cho_factor did, instead of returning
    garbage."""
    diagonal = np.stack([np.eye(2), np.diag([1.0, -1.0])])
    with pytest.raises(np.linalg.LinAlgError, match="2-th leading minor"):
        solve_key_blocks(diagonal, np.zeros((1, 2, 2)), np.ones((2, 2)), 1)


@pytest.mark.parametrize(("keys", "n"), [(2, 3), (3, 1), (7, 5)])
def test_segment_solver_equals_a_dense_solve(keys, n):
    """Broken tangents without the smooth term: key blocks with zero (in, out) quadrants, so
    the system falls apart by segment; the segment solver equals a dense solve of the whole
    system and the key-block solver."""
    rng = np.random.default_rng(keys * 7 + n)
    size = 2 * n
    # a sum of per-segment Gram matrices (out slopes of key s, in slopes of key s + 1) and a
    # positive diagonal: the world fit's structure for broken tangents
    gram = np.zeros((keys * size, keys * size))
    for s in range(keys - 1):
        slots = np.r_[s * size + n:(s + 1) * size, (s + 1) * size:(s + 1) * size + n]
        rows = rng.normal(size=(3 * size, size))
        gram[np.ix_(slots, slots)] += rows.T @ rows
    gram += np.diag(rng.uniform(0.1, 1.0, keys * size))
    shift = rng.uniform(0.0, 2.0, (keys, size))
    rhs = rng.normal(size=(keys, size))
    diagonal = np.stack([gram[k * size:(k + 1) * size, k * size:(k + 1) * size]
                         for k in range(keys)])
    assert not np.any(diagonal[:, :n, n:])
    coupling = np.stack([gram[k * size + n:(k + 1) * size, (k + 1) * size:(k + 1) * size + n]
                         for k in range(keys - 1)])
    x = solve_segment_blocks(diagonal, coupling, rhs, shift)
    exact = np.linalg.solve(gram + np.diag(shift.reshape(-1)), rhs.reshape(-1))
    np.testing.assert_allclose(x.reshape(-1), exact, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(x, solve_key_blocks(diagonal, coupling, rhs, 2, shift),
                               rtol=1e-9, atol=1e-12)
    unshifted = np.linalg.solve(gram, rhs.reshape(-1))
    np.testing.assert_allclose(solve_segment_blocks(diagonal, coupling, rhs).reshape(-1),
                               unshifted, rtol=1e-9, atol=1e-12)


def test_bezier_parameter_kernel_equals_the_numpy_iteration(monkeypatch):
    from sp_core import curves

    rng = np.random.default_rng(4)
    n = 5000
    length = rng.integers(1, 90, n).astype(np.float64)
    a = rng.random(n) * length
    b = rng.random(n) * length
    a[:50], b[50:100] = 0.0, length[50:100]  # handles at the ends of their range
    t = rng.random(n) * length
    t[:20], t[20:40] = 0.0, length[20:40]
    monkeypatch.setattr(curves, "KERNEL_SIZE", 10**9)
    plain = curves.solve_parameter(t, a, b, length)
    monkeypatch.setattr(curves, "KERNEL_SIZE", 1)
    kernel = curves.solve_parameter(t, a, b, length)
    np.testing.assert_allclose(kernel, plain, rtol=0, atol=1e-12)
    u = kernel
    v = 1 - u
    x = 3 * a * u * v * v + 3 * (length - b) * u * u * v + length * u ** 3
    np.testing.assert_allclose(x, t, rtol=0, atol=1e-9 * length.max())


def test_tree_kinematics_of_oriented_translations():
    """Blender-style locations (added to the offset in the node's oriented frame): the numba
    chain and the channel axes follow the clip's own kinematics and position Jacobian."""
    from test_kinematics import _oriented_chain

    clip, values, expected = _oriented_chain(np.random.default_rng(8))
    columns = np.arange(clip.n_channels)
    chained, axes = pose(clip, TreeLayout.of(clip, columns), values)
    np.testing.assert_allclose(chained, expected, atol=1e-12)
    np.testing.assert_allclose(axes, channel_axes(clip, values, columns), atol=1e-14)
    _, jacobian = clip.position_jacobian(values)
    for c in np.flatnonzero(~clip.is_rotation_channel()):
        # a location moves its own node along the axis
        np.testing.assert_allclose(axes[:, c], jacobian[:, clip.channel_nodes[c], :, c],
                                   atol=1e-12)


# ------------------------------------------------------- the channel fit's segment sums
@settings(max_examples=60, deadline=None)
@given(st.integers(2, 400), st.integers(1, 9), st.data())
def test_segment_sums_kernel_equals_numpys_reduceat_to_the_bit(n_rows, n_channels, data):
    # numpy's add.reduceat is the segment's first row plus the pairwise sum of the rest (in
    # blocks of eight, from -0.0): segments of one, two and hundreds of rows, and signed zeros
    # (a segment's first row has w_in = -0.0), must come out the same to the bit
    from sp_core._fit_kernels import segment_normal_sums

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    starts = np.unique(np.array([0, *data.draw(st.lists(st.integers(1, n_rows - 1),
                                                       max_size=min(n_rows - 1, 60)))],
                                dtype=np.int64))
    arrays = []
    for _ in range(3):
        a = rng.normal(size=(n_rows, n_channels)) * 10.0 ** rng.integers(-3, 4)
        zeros = rng.random((n_rows, n_channels)) < 0.2
        a[zeros] = np.where(rng.random(zeros.sum()) < 0.5, -0.0, 0.0)
        arrays.append(a)
    w_out, w_in, residual = arrays
    weights = data.draw(st.booleans())  # False: the residual's sums only
    got = segment_normal_sums(w_out, w_in, residual, starts, weights)
    for k, product in enumerate((w_out * w_out, w_in * w_in, w_out * w_in, w_out * residual,
                                 w_in * residual)):
        if k < 3 and not weights:
            continue
        expected = np.add.reduceat(product, starts, axis=0)
        np.testing.assert_array_equal(got[k], expected)
        np.testing.assert_array_equal(np.signbit(got[k]), np.signbit(expected))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=40), st.data())
def test_block_sums_kernel_equals_numpys_sum_to_the_bit(lengths, data):
    # the greedy step's scores: np.sum of each candidate's rows (pairwise over all of them,
    # not np.add.reduceat's first row plus the rest), for the candidates asked for
    from sp_core._fit_kernels import block_sums

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    lengths = np.array(lengths, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    values = rng.normal(size=int(lengths.sum())) * 10.0 ** rng.integers(-5, 6)
    values[rng.random(len(values)) < 0.5] = 0.0  # most rows of a candidate gain nothing
    chosen = np.flatnonzero(rng.random(len(lengths)) < 0.7)
    got = block_sums(values, offsets, lengths, chosen)
    expected = [np.sum(values[offsets[i]:offsets[i] + lengths[i]]) for i in chosen]
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.float64))


@pytest.mark.parametrize("tangents", ["unified", "broken", "smooth", "weighted"])
@pytest.mark.parametrize("kernel", [True, False])
def test_channel_fit_reusing_the_weights_sums_is_the_fit_remaking_them(sample_clip, monkeypatch,
                                                                        tangents, kernel):
    # a fit's rounds keep the sums of the weights' products of the first round that had those
    # weights (key values' and slopes' alike); made anew every time, the same fit to the bit
    values = sample_clip.unwrapped().channels
    rows = np.linspace(0, len(values) - 1, 40).round().astype(np.int64)
    if not kernel:
        monkeypatch.setattr(fitting, "KERNEL_SIZE", values.size + 1)
    kept = fit_channels(values, rows, tangents, key_values="fitted")
    remake = fitting._normal_blocks

    def forgetting(basis, residual, q):
        basis.sums.clear()
        return remake(basis, residual, q)

    monkeypatch.setattr(fitting, "_normal_blocks", forgetting)
    made = fit_channels(values, rows, tangents, key_values="fitted")
    np.testing.assert_array_equal(kept.slopes, made.slopes)
    np.testing.assert_array_equal(kept.key_values, made.key_values)
    np.testing.assert_array_equal(kept.out_length, made.out_length)


@pytest.mark.parametrize("tangents", ["unified", "broken", "weighted"])
def test_channel_fit_with_the_sums_kernel_is_numpys_to_the_bit(sample_clip, monkeypatch,
                                                                tangents):
    # the sample (994 x 96 values) takes the kernel; forcing numpy's path gives the same fit
    values = sample_clip.unwrapped().channels
    rows = np.linspace(0, len(values) - 1, 40).round().astype(np.int64)
    assert values.size >= fitting.KERNEL_SIZE
    kernel = fit_channels(values, rows, tangents, key_values="fitted")
    monkeypatch.setattr(fitting, "KERNEL_SIZE", values.size + 1)
    plain = fit_channels(values, rows, tangents, key_values="fitted")
    np.testing.assert_array_equal(kernel.slopes, plain.slopes)
    np.testing.assert_array_equal(kernel.key_values, plain.key_values)
    np.testing.assert_array_equal(kernel.out_length, plain.out_length)
