"""Euler-angle curves: continuity filtering (unwrap) that keeps every pose unchanged.

Motion capture exporters write each frame's rotation independently, so Euler curves jump by
±360° (angle wrapping) or flip to the other equivalent triplet (a gimbal flip), which makes the
curves impossible to fit. :func:`unwrap_euler` removes both, like Maya's Euler filter, while every
frame still describes exactly the same rotation.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation


def wrap_degrees(angles: np.ndarray) -> np.ndarray:
    """Map angles to [-180, 180).

    Parameters
    ----------
    angles : (...) float64, degrees

    Returns
    -------
    (...) float64, degrees
    """
    return (angles + 180.0) % 360.0 - 180.0


def flip_triplet(angles: np.ndarray) -> np.ndarray:
    """The other Euler triplet of the same rotation: ``(a + 180, 180 - b, c + 180)``.

    This identity holds for every Tait-Bryan order (three different axes, as in BVH), intrinsic or
    extrinsic, so no order argument is needed.

    Parameters
    ----------
    angles : (..., 3) float64, degrees

    Returns
    -------
    (..., 3) float64, degrees
    """
    flipped = np.empty_like(angles)
    flipped[..., 0] = angles[..., 0] + 180.0
    flipped[..., 1] = 180.0 - angles[..., 1]
    flipped[..., 2] = angles[..., 2] + 180.0
    return flipped


def unwrap_euler(angles: np.ndarray) -> np.ndarray:
    """Make Euler curves continuous without changing the rotation of any frame.

    For three-angle rotations each frame first takes whichever of its two equivalent triplets is
    closer to its predecessor (the decision is relative between consecutive frames, so it is a
    cumulative parity and fully vectorised); then every curve is unwrapped by multiples of 360°.
    The first frame keeps its values. Curves of one or two angles are only unwrapped.

    Parameters
    ----------
    angles : (n_frames, n_angles) float64, degrees
        The rotation channels of one node in their listed order, ``n_angles`` in 1..3.

    Returns
    -------
    (n_frames, n_angles) float64, degrees
        A new array; consecutive frames differ by less than 180° per angle.
    """
    angles = np.asarray(angles, dtype=np.float64)
    out = angles.copy()
    if out.shape[0] < 2:
        return out
    if out.shape[1] == 3:
        prev, cur = angles[:-1], angles[1:]
        keep = np.sum(wrap_degrees(cur - prev) ** 2, axis=1)
        swap = np.sum(wrap_degrees(flip_triplet(cur) - prev) ** 2, axis=1)
        # Flipping both frames leaves their wrapped distance unchanged, so whether frame t is
        # flipped is the parity of the "swap is closer" decisions up to t. The small margin keeps
        # noise near gimbal lock (where both are almost equally close) from toggling flips.
        relative_flip = swap < keep - 1e-6
        flipped = np.concatenate([[False], np.cumsum(relative_flip) % 2 == 1])
        out[flipped] = flip_triplet(angles[flipped])
    return np.unwrap(out, period=360.0, axis=0)


def nearest_euler(angles: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per frame, the angles of the same rotation nearest ``reference``'s: each angle turned by
    whole turns to within 180° of the reference's and, for three angles, the triplet or its
    flip (:func:`flip_triplet`), whichever is nearer.

    Parameters
    ----------
    angles : (n_frames, n_angles) float64, degrees
    reference : (n_frames, n_angles) float64, degrees

    Returns
    -------
    (n_frames, n_angles) float64, degrees
    """
    angles = np.asarray(angles, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    near = reference + wrap_degrees(angles - reference)
    if angles.shape[-1] != 3:
        return near
    flipped = reference + wrap_degrees(flip_triplet(angles) - reference)
    closer = np.sum((flipped - reference) ** 2, axis=-1) < \
        np.sum((near - reference) ** 2, axis=-1) - 1e-9
    return np.where(closer[..., None], flipped, near)


def euler_matrices(order: str, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices of intrinsic Euler angles, one per frame.

    Equal to ``Rotation.from_euler(order, angles, degrees=True).as_matrix()``; built as the
    product of single-axis rotations because scipy converts one axis at a time about twenty
    times faster than three, which matters for 100,000-frame clips.

    Parameters
    ----------
    order : str
        Upper-case (intrinsic) axes in listed order, 1 to 3 of ``"XYZ"``, e.g. ``"ZYX"``.
    angles : (n_frames, len(order)) float64, degrees

    Returns
    -------
    (n_frames, 3, 3) float64
    """
    result = None
    for k, axis in enumerate(order):
        m = Rotation.from_euler(axis, angles[:, k:k + 1], degrees=True).as_matrix()
        result = m if result is None else np.matmul(result, m)
    assert result is not None, "order must name at least one axis"
    return result


def unwrap_euler_from(angles: np.ndarray, start: np.ndarray) -> np.ndarray:
    """:func:`unwrap_euler`, then the equivalent curves whose first frame is nearest ``start``.

    For hosts that return rotations as matrices: the decomposed angles are continuous after
    :func:`unwrap_euler`, and ``start`` (the host's own channel values at the first frame) picks
    which of the equivalent continuous curves the animator keyed (a 370° key stays 370°).

    Parameters
    ----------
    angles : (n_frames, 3) float64, degrees
        One node's three rotation channels in their listed order.
    start : (3,) float64, degrees
        The channel values at the first frame, same order.

    Returns
    -------
    (n_frames, 3) float64, degrees
        The same rotation on every frame.
    """
    out = unwrap_euler(angles)
    start = np.asarray(start, dtype=np.float64)
    if out.shape[0] and np.sum(wrap_degrees(flip_triplet(out[0]) - start) ** 2) \
            < np.sum(wrap_degrees(out[0] - start) ** 2) - 1e-9:
        out = flip_triplet(out)
    if out.shape[0]:
        out = out + 360.0 * np.round((start - out[0]) / 360.0)
    return out
