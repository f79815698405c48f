"""How far apart two nearby Euler triplets are as rotations: the metric the channel fit uses
near gimbal lock.

Near gimbal lock (the middle angle of a three-axis rotation at ±90°) Euler curves swing: the
first and third angles turn together by up to 180° in a few frames while the rotation they
describe hardly moves, because at the lock only their sum or difference matters. A fit that
measures each channel's error on its own spends its keys' tangents on those swings and misses
the rotation that does matter; the feet of a character whose root passes near the lock slide
off together. Measured on the rotation instead, an error along the swinging combination costs
what it turns the node by, nearly nothing at the lock.

For angles θ of an intrinsic order (R = R₁(θ₁) R₂(θ₂) R₃(θ₃), as :class:`sp_core.clip.Clip`
composes them), a small change δ turns the node by the angle |J(θ) δ|, J's columns the three
channel axes in the node's frame; the metric is G = JᵀJ (3 × 3). For Tait–Bryan orders it is
the identity except G₁₃ = G₃₁ = ±sin θ₂, so it equals the channel errors' own metric when the
middle angle is 0 and becomes singular at ±90°.

The channel fit (:func:`sp_core.fitting.fit_channels` with ``rotations``) uses this metric only
where a node comes within :data:`GIMBAL_ZONE` of the lock, blended in smoothly down to
:data:`GIMBAL_CORE` (:func:`fit_metric`); elsewhere it keeps each channel's own error, so nodes
that never come near the lock fit exactly as before. Measured on the sample and the same take
turned on and off the lock (:func:`turn_clip`, ``benchmarks/bench_gimbal.py``,
docs/quality.md): the unified channel fit's mean error near the lock went from 1.5× to 1.08×
the turned-away take's at 50 keys, its worst ankle from 2.1× to 1.2×.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import Clip
from sp_core.errors import ClipError
from sp_core.euler import unwrap_euler

#: Where the fit starts measuring on the rotation: middle angles closer than this to ±90°
#: (degrees). Farther away channel and rotation errors agree to within a factor 1 ± sin θ₂ and
#: fits keep the channels' own metric, so clips far from gimbal lock fit exactly as before.
GIMBAL_ZONE = 30.0
#: Closer than this to ±90° (degrees) the fit measures on the rotation alone.
GIMBAL_CORE = 15.0


def rotation_triplets(clip: Clip) -> list[tuple[str, np.ndarray]]:
    """The nodes with three rotation channels: (intrinsic order, columns in that order).

    Parameters
    ----------
    clip : Clip

    Returns
    -------
    list of (str, (3,) int)
        e.g. ``("ZYX", array([3, 4, 5]))`` for a BVH root.
    """
    rotation = clip.is_rotation_channel()
    triplets = []
    for node, order in enumerate(clip.rotation_orders):
        if len(order) == 3:
            columns = np.flatnonzero(rotation & (clip.channel_nodes == node))
            triplets.append((order, columns))
    return triplets


def euler_metric(order: str, angles: np.ndarray) -> np.ndarray:
    """The rotation metric G = JᵀJ of intrinsic Euler angles at every frame.

    Parameters
    ----------
    order : str
        Three different upper-case axes, e.g. ``"ZYX"`` (R = Rz Ry Rx).
    angles : (F, 3) float64, degrees

    Returns
    -------
    (F, 3, 3) float64
        ``δᵀ G δ`` is the squared angle (rad², δ in rad) the node turns by when its angles
        change by a small δ.
    """
    angles = np.asarray(angles, dtype=np.float64)
    unit = {axis: np.eye(3)[k] for k, axis in enumerate("XYZ")}
    # the channel axes in the node's own frame: the third is itself, the second is seen
    # through the third's rotation, the first through the second's and the third's
    third = np.broadcast_to(unit[order[2]], angles.shape)
    second = Rotation.from_euler(order[2], angles[:, 2:], degrees=True).inv().apply(unit[order[1]])
    first = Rotation.from_euler(order[1:], angles[:, 1:], degrees=True).inv().apply(
        unit[order[0]])
    jacobian = np.stack([first, second, third], axis=-1)  # (F, 3 components, 3 channels)
    return np.einsum("fic,fid->fcd", jacobian, jacobian)


def gimbal_weight(middle: np.ndarray, zone: float | None = None,
                  core: float | None = None) -> np.ndarray:
    """How much of the rotation metric the fit uses at each frame: 0 far from gimbal lock, 1
    near it, a smooth step between.

    Parameters
    ----------
    middle : (F,) float64, degrees
        The middle angle (unwrapped values past ±90° included).
    zone, core : float, degrees
        Distances from ±90° where the weight starts to rise and where it reaches 1 (default
        :data:`GIMBAL_ZONE`, :data:`GIMBAL_CORE`).

    Returns
    -------
    (F,) float64 in [0, 1]
    """
    zone = GIMBAL_ZONE if zone is None else zone
    core = GIMBAL_CORE if core is None else core
    # distance from the lock: |cos θ₂| = sin(distance), whatever branch the angle is on
    distance = np.degrees(np.arcsin(np.clip(np.abs(np.cos(np.radians(middle))), 0.0, 1.0)))
    t = np.clip((zone - distance) / max(zone - core, 1e-9), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def fit_metric(order: str, angles: np.ndarray, zone: float | None = None,
               core: float | None = None) -> np.ndarray | None:
    """The metric a channel fit measures one node's errors with, or None where it is the
    identity on every frame (the node never comes near gimbal lock).

    ``(1 - w) I + w G`` with ``w`` from :func:`gimbal_weight`: the channels' own metric far from
    the lock, the rotation's near it; both are positive semi-definite, so is the blend.

    Parameters
    ----------
    order : str
    angles : (F, 3) float64, degrees

    Returns
    -------
    (F, 3, 3) float64 or None
    """
    weight = gimbal_weight(angles[:, 1], zone, core)
    near = np.flatnonzero(weight > 0)
    if not len(near):
        return None
    metric = np.tile(np.eye(3), (len(angles), 1, 1))
    blend = weight[near, None, None]
    metric[near] = (1.0 - blend) * np.eye(3) + blend * euler_metric(order, angles[near])
    return metric


def turn_clip(clip: Clip, turn: Rotation) -> Clip:
    """The same motion seen turned by a fixed rotation: every root's rotation pre-multiplied by
    ``turn`` and its position turned about the origin, re-expressed in the root's own Euler
    order (continuous, :func:`sp_core.euler.unwrap_euler`).

    Distances between joints are unchanged, so any fit that measures on poses gives the same
    errors on both; turning a take so that its root passes near gimbal lock is how the tests and
    ``benchmarks/bench_gimbal.py`` measure a fit's dependence on the Euler angles.

    Parameters
    ----------
    clip : Clip
        Every root needs three position and three rotation channels (a BVH root) and no joint
        orient.
    turn : scipy.spatial.transform.Rotation
        One rotation.

    Returns
    -------
    Clip

    Raises
    ------
    ClipError
        A root without three position and three rotation channels, or a clip with orients.
    """
    if clip.orients is not None or clip.translation_space != "parent":
        raise ClipError("only clips without joint orients (BVH-like) can be turned")
    values = np.array(clip.channels)
    rotation = clip.is_rotation_channel()
    for root in np.flatnonzero(clip.parents < 0):
        mine = clip.channel_nodes == root
        turns, moves = np.flatnonzero(mine & rotation), np.flatnonzero(mine & ~rotation)
        order = clip.rotation_orders[root]
        if len(order) != 3 or len(moves) != 3:
            raise ClipError(f"root {clip.node_names[root]!r} needs three position and three "
                            "rotation channels to be turned")
        axes = [clip.channel_names[c].rpartition(".")[2][0] for c in moves]
        moves = moves[np.argsort(axes)]  # X, Y, Z
        turned = turn * Rotation.from_euler(order, values[:, turns], degrees=True)
        with warnings.catch_warnings():
            # a frame exactly at the lock: scipy sets the third angle to 0, the same rotation
            warnings.simplefilter("ignore", UserWarning)
            angles = turned.as_euler(order, degrees=True)
        values[:, turns] = unwrap_euler(angles)
        values[:, moves] = turn.apply(values[:, moves])
    return clip.with_channels(values)
