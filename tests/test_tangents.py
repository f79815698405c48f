"""Host tangent conversions, checked by evaluating each host's documented interpolation."""

from __future__ import annotations

import numpy as np
import pytest
from reference_bezier import bezier_at

from sp_core import tangents
from sp_core.fitting import fit_channels
from sp_core.reduction import reduce

FPS = 30.0


@pytest.fixture(scope="module")
def curves(sample_clip):
    """A weighted and an unweighted reduction of a stretch of the sample, 3 channels."""
    clip = sample_clip.sub_range(120, 240)
    frames = [120, 150, 171, 200, 240]
    return {mode: reduce(clip, frames, mode, space="channel").curves
            for mode in ("unified", "weighted")}


def maya_keys(curve, c):
    """Keys in Maya's own terms: times in seconds, (x, y) tangents and angle/weight."""
    keys = []
    for k in range(curve.n_keys):
        keys.append({
            "time": curve.frames[k] / FPS,
            "value": curve.values[k, c],
            "in_xy": tangents.to_maya_xy(curve.in_handles[k, c], FPS, incoming=True),
            "out_xy": tangents.to_maya_xy(curve.out_handles[k, c], FPS, incoming=False),
            "in_aw": tangents.to_maya_angle_weight(curve.in_handles[k, c], incoming=True),
            "out_aw": tangents.to_maya_angle_weight(curve.out_handles[k, c], incoming=False),
        })
    return keys


@pytest.mark.parametrize("mode", ["unified", "weighted"])
def test_maya_weighted_formula_reproduces_our_curve(curves, mode):
    curve = curves[mode]
    for c in (5, 20, 40):
        keys = maya_keys(curve, c)
        for k in range(len(keys) - 1):
            a, b = keys[k], keys[k + 1]
            # animx: P1 = (t_k + ox/3, v_k + oy/3), P2 = (t_k1 - ix/3, v_k1 - iy/3), seconds
            p0 = (a["time"], a["value"])
            p1 = (a["time"] + a["out_xy"][0] / 3, a["value"] + a["out_xy"][1] / 3)
            p2 = (b["time"] - b["in_xy"][0] / 3, b["value"] - b["in_xy"][1] / 3)
            p3 = (b["time"], b["value"])
            for frame in np.linspace(curve.frames[k], curve.frames[k + 1], 7)[1:-1]:
                ours = curve.evaluate([frame], [c])[0, 0]
                assert bezier_at([p0, p1, p2, p3], frame / FPS) == pytest.approx(ours, abs=1e-7)


def test_maya_angle_weight_match_xy_and_hermite(curves):
    curve = curves["unified"]
    for c in (5, 20):
        keys = maya_keys(curve, c)
        for k in range(len(keys) - 1):
            a, b = keys[k], keys[k + 1]
            # SideFX "Converting Maya keys": tan(angle) = dv/dframe, weight^2 = dframe^2 + dv^2
            angle, weight = a["out_aw"]
            dframe = a["out_xy"][0] * FPS / 3
            assert np.tan(np.radians(angle)) == pytest.approx(a["out_xy"][1] / 3 / dframe)
            assert weight == pytest.approx(np.hypot(dframe, a["out_xy"][1] / 3))
            # non-weighted Maya curves are Hermite on the slopes y/x (per second)
            span = b["time"] - a["time"]
            m0 = a["out_xy"][1] / a["out_xy"][0] * span
            m1 = b["in_xy"][1] / b["in_xy"][0] * span
            for frame in np.linspace(curve.frames[k], curve.frames[k + 1], 5)[1:-1]:
                u = (frame / FPS - a["time"]) / span
                hermite = ((2 * u**3 - 3 * u**2 + 1) * a["value"] + (u**3 - 2 * u**2 + u) * m0
                           + (-2 * u**3 + 3 * u**2) * b["value"] + (u**3 - u**2) * m1)
                assert hermite == pytest.approx(curve.evaluate([frame], [c])[0, 0], abs=1e-9)


@pytest.mark.parametrize("mode", ["unified", "weighted"])
def test_motionbuilder_formula_reproduces_our_curve(curves, mode):
    curve = curves[mode]
    for c in (5, 20, 40):
        for k in range(curve.n_keys - 1):
            span_frames = curve.frames[k + 1] - curve.frames[k]
            right_d, right_w = tangents.to_mobu(curve.out_handles[k, c], span_frames, FPS)
            left_d, left_w = tangents.to_mobu(curve.in_handles[k + 1, c], span_frames, FPS)
            t0, t1 = curve.frames[k] / FPS, curve.frames[k + 1] / FPS
            v0, v1 = curve.values[k, c], curve.values[k + 1, c]
            # ufbx: right.dx = weight (t_next - t), right.dy = right.dx * slope; the left
            # tangent of the next key likewise; Bézier (t+dx, v+dy), (t1-dx', v1-dy')
            rdx = right_w * (t1 - t0)
            ldx = left_w * (t1 - t0)
            p1 = (t0 + rdx, v0 + rdx * right_d)
            p2 = (t1 - ldx, v1 - ldx * left_d)
            for frame in np.linspace(curve.frames[k], curve.frames[k + 1], 7)[1:-1]:
                ours = curve.evaluate([frame], [c])[0, 0]
                assert bezier_at([(t0, v0), p1, p2, (t1, v1)], frame / FPS) == pytest.approx(
                    ours, abs=1e-7)
            if mode == "unified":
                assert right_w == pytest.approx(1 / 3) and left_w == pytest.approx(1 / 3)


def test_conversions_round_trip():
    rng = np.random.default_rng(0)
    handles = np.stack([rng.uniform(0.1, 10, 50), rng.normal(size=50) * 20], axis=-1)
    for incoming, h in ((False, handles), (True, -handles)):
        angle, weight = tangents.to_maya_angle_weight(h, incoming)
        np.testing.assert_allclose(tangents.from_maya_angle_weight(angle, weight, incoming), h,
                                   atol=1e-12)
        xy = tangents.to_maya_xy(h, 24.0, incoming)
        np.testing.assert_allclose(tangents.from_maya_xy(xy, 24.0, incoming), h, atol=1e-12)
        assert np.all(xy[:, 0] > 0)  # Maya tangents point forward in time, in and out alike
        d, w = tangents.to_mobu(h, 12.0, 24.0)
        np.testing.assert_allclose(tangents.from_mobu(d, w, 12.0, 24.0, incoming), h,
                                   atol=1e-12)


def test_fit_handles_are_thirds_unless_weighted(sample_clip):
    clip = sample_clip.sub_range(0, 100)
    rows = np.array([0, 40, 100])
    fit = fit_channels(clip.unwrapped().channels, rows, "broken")
    np.testing.assert_allclose(fit.out_length, np.diff(rows)[:, None] / 3 + 0 * fit.out_length)


@pytest.mark.parametrize("mode", ["unified", "weighted"])
def test_blender_handle_points_give_the_same_curve(curves, mode):
    """Blender evaluates a segment as the Bézier co_k, handle_right_k, handle_left_k+1,
    co_k+1 (bpy.types.Keyframe); the points from to_blender reproduce the engine's curve."""
    curve = curves[mode]
    for c in range(3):
        left, right = tangents.to_blender(curve.frames, curve.values[:, c],
                                          curve.in_handles[:, c], curve.out_handles[:, c])
        back = tangents.from_blender(curve.frames, curve.values[:, c], left, right)
        np.testing.assert_allclose(back[0], curve.in_handles[:, c], atol=1e-12)
        np.testing.assert_allclose(back[1], curve.out_handles[:, c], atol=1e-12)
        for k in range(curve.n_keys - 1):
            points = [(curve.frames[k], curve.values[k, c]), right[k], left[k + 1],
                      (curve.frames[k + 1], curve.values[k + 1, c])]
            for t in np.linspace(curve.frames[k], curve.frames[k + 1], 7):
                assert bezier_at(points, t) == pytest.approx(
                    curve.evaluate([t], [c])[0, 0], abs=1e-7)
