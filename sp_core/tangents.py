"""Bézier handles ↔ host tangents (Maya angle/weight and x/y, MotionBuilder derivative/weight,
Blender handle points).

Facts from ../shared/reference/HOST_APIS.md §3:

- Maya angle/weight are measured in (frames at the scene rate, UI value units):
  ``angle = atan2(Δvalue, Δframe)``, ``weight = hypot(Δframe, Δvalue)``, where (Δframe, Δvalue)
  is the handle. In-tangents point forward in time, so an in handle (pointing back) is negated.
- Maya's (x, y) form is in (seconds, value units) and is 3× the handle:
  ``x = 3 Δframe / fps``, ``y = 3 Δvalue``; the in form is negated like the angle.
- MotionBuilder stores derivatives in value units per second and tangent weights as fractions
  of the segment's duration: ``RightDerivative_k = Δvalue / Δseconds`` of key k's out handle,
  ``RightTangentWeight_k = Δframe / segment frames``; the left pair of key k + 1 likewise from
  its in handle (the weight is stored on key k as its "next left" weight).
- Blender's ``Keyframe.co``, ``handle_left`` and ``handle_right`` are the Bézier control points
  themselves, in (scene frame, F-curve value) (Blender Python API, ``bpy.types.Keyframe``:
  "Coordinates of the left handle (before the control point)"): a segment from key k to k + 1 is
  the Bézier ``co_k, handle_right_k, handle_left_k+1, co_k+1``, like ours, so the handles are
  our offsets added to the keys. Handle lengths carry the weights (there is no weight flag).

All functions are vectorised: handles are (..., 2) arrays of (Δframe, Δvalue). Angles are in
degrees. Values must already be in the host's UI units (the caller converts, e.g. cm to m).
"""

from __future__ import annotations

import numpy as np


def _forward(handles: np.ndarray, incoming: bool) -> np.ndarray:
    """Handles as vectors pointing forward in time."""
    handles = np.asarray(handles, dtype=np.float64)
    return -handles if incoming else handles


def to_maya_angle_weight(handles: np.ndarray, incoming: bool) -> tuple[np.ndarray, np.ndarray]:
    """Maya tangent angle (degrees) and weight (frame/value units) of handles (..., 2)."""
    dt, dv = np.moveaxis(_forward(handles, incoming), -1, 0)
    return np.degrees(np.arctan2(dv, dt)), np.hypot(dt, dv)


def from_maya_angle_weight(angle: np.ndarray, weight: np.ndarray, incoming: bool) -> np.ndarray:
    """Handles (..., 2) from Maya angle (degrees) and weight."""
    a = np.radians(np.asarray(angle, dtype=np.float64))
    w = np.asarray(weight, dtype=np.float64)
    return _forward(np.stack([w * np.cos(a), w * np.sin(a)], axis=-1), incoming)


def to_maya_xy(handles: np.ndarray, fps: float, incoming: bool) -> np.ndarray:
    """Maya tangent (x, y) in (seconds, value units): (..., 2)."""
    forward = _forward(handles, incoming)
    return np.stack([3.0 * forward[..., 0] / fps, 3.0 * forward[..., 1]], axis=-1)


def from_maya_xy(xy: np.ndarray, fps: float, incoming: bool) -> np.ndarray:
    """Handles (..., 2) from Maya tangent (x, y)."""
    xy = np.asarray(xy, dtype=np.float64)
    return _forward(np.stack([xy[..., 0] * fps / 3.0, xy[..., 1] / 3.0], axis=-1), incoming)


def to_mobu(handles: np.ndarray, segment_frames: np.ndarray, fps: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """MotionBuilder derivative (value per second) and tangent weight (fraction of segment).

    Parameters
    ----------
    handles : (..., 2)
        Out or in handles; the sign of Δframe does not matter (both ends of a segment slope
        the same way along time).
    segment_frames : (...) float
        Length in frames of the segment the handle lies in.
    fps : float
    """
    handles = np.asarray(handles, dtype=np.float64)
    dt = np.abs(handles[..., 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(dt > 0, handles[..., 1] / handles[..., 0], 0.0)
    return slope * fps, dt / np.asarray(segment_frames, dtype=np.float64)


def from_mobu(derivative: np.ndarray, weight: np.ndarray, segment_frames: np.ndarray,
              fps: float, incoming: bool) -> np.ndarray:
    """Handles (..., 2) from a MotionBuilder derivative (value per second) and weight."""
    dt = np.asarray(weight, dtype=np.float64) * np.asarray(segment_frames, dtype=np.float64)
    dv = dt * np.asarray(derivative, dtype=np.float64) / fps
    handles = np.stack([dt, dv], axis=-1)
    return -handles if incoming else handles


def to_blender(frames: np.ndarray, values: np.ndarray, in_handles: np.ndarray,
               out_handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blender ``handle_left`` and ``handle_right`` points of keys.

    Parameters
    ----------
    frames, values : (K,) float
        The keys (values already in the F-curve's units, e.g. radians for rotations).
    in_handles, out_handles : (K, 2) float
        (Δframe, Δvalue) offsets in the same units.

    Returns
    -------
    left, right : (K, 2) float64, absolute (frame, value) points
    """
    keys = np.stack([np.asarray(frames, np.float64), np.asarray(values, np.float64)], axis=-1)
    return keys + np.asarray(in_handles, np.float64), keys + np.asarray(out_handles, np.float64)


def from_blender(frames: np.ndarray, values: np.ndarray, left: np.ndarray, right: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """In and out handles (K, 2) from Blender's ``handle_left`` / ``handle_right`` points."""
    keys = np.stack([np.asarray(frames, np.float64), np.asarray(values, np.float64)], axis=-1)
    return np.asarray(left, np.float64) - keys, np.asarray(right, np.float64) - keys
