"""How far a reduced animation is from the original: world-position errors in units and mm."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sp_core.clip import Clip


@dataclass(frozen=True)
class Metrics:
    """Errors of a reduced animation against the original over the reduced range.

    Attributes
    ----------
    mean, max : float
        Mean and largest distance between original and reduced node positions over every frame
        and node (End Sites included), scene units.
    mean_mm, max_mm : float
        The same for the character scaled to 1.7 m (:meth:`sp_core.clip.Clip.mm_per_unit`).
    worst_node : str
    worst_frame : int
        Host frame of the largest error.
    channel_max : dict of str to float
        Largest absolute channel error (channel units: degrees or scene units) per channel.
    keys, original_keys : int
        Keys written, all layers (pose keys + corrective keys), and keys of the original
        (frames × animated channels, as motion capture keys every channel on every frame).
    pose_keys, corrective_keys : int
        Keys of the pose-key layer (keyframes × animated channels) and of the corrective layer
        (:mod:`sp_core.corrective`; 0 without one).
    scaled : bool
        False where the character's size cannot be measured: ``mean_mm`` and ``max_mm`` are
        scene units then (see :func:`sp_core.reduction.size_unknown`).
    """

    mean: float
    max: float
    mean_mm: float
    max_mm: float
    worst_node: str
    worst_frame: int
    channel_max: dict[str, float]
    keys: int
    original_keys: int
    pose_keys: int = 0
    corrective_keys: int = 0
    scaled: bool = True

    def said(self, mean_digits: int = 2, max_digits: int = 2) -> str:
        """"mean 1.98 mm, max 19.90 mm" (character scaled to 1.7 m), or the same in scene
        units where the character's size cannot be measured (``scaled`` False: the ``*_mm``
        fields then hold scene units)."""
        if self.scaled:
            return (f"mean {self.mean_mm:.{mean_digits}f} mm, max "
                    f"{self.max_mm:.{max_digits}f} mm")
        return f"mean {self.mean:.4g}, max {self.max:.4g} scene units"

    def keys_said(self, k: int) -> str:
        """The keys in words for ``k`` keyframes: ``49 keys × 72 channels = 3,528 keys + 156
        corrective keys (3,684 in all)`` (a bare "3528 pose + 156 corrective" read as a wrong
        sum beside K = 49)."""
        channels = self.pose_keys // k if k else 0
        text = f"{k} keys × {channels} channels = {self.pose_keys:,} keys"
        if self.corrective_keys:
            text += f" + {self.corrective_keys:,} corrective keys ({self.keys:,} in all)"
        return text

    def record(self) -> dict:
        """JSON-ready summary (without the per-channel table); no mm (null) where the
        character's size is unknown (``mean`` and ``max`` are in scene units)."""
        mm = self.scaled
        return {"mean_mm": self.mean_mm if mm else None, "max_mm": self.max_mm if mm else None,
                "mean": self.mean,
                "max": self.max, "worst_node": self.worst_node, "worst_frame": self.worst_frame,
                "keys": self.keys, "pose_keys": self.pose_keys,
                "corrective_keys": self.corrective_keys, "original_keys": self.original_keys}


def measure(clip: Clip, reduced: np.ndarray, n_keys: int, animated: np.ndarray,
            mm_per_unit: float | None = None, corrective_keys: int = 0,
            scaled: bool = True) -> Metrics:
    """Compare reduced channel values with the clip's own.

    Parameters
    ----------
    clip : Clip
        The original over the reduced range.
    reduced : (n_frames, n_channels) float64
        Reduced channel values on the same frames.
    n_keys : int
        Keyframes per animated channel.
    animated : (n_channels,) bool
    mm_per_unit : float, optional
        Defaults to ``clip.mm_per_unit()``; pass the whole clip's value when ``clip`` is a
        sub-range.
    corrective_keys : int
        Keys of a corrective layer included in ``reduced``.
    scaled : bool
        ``mm_per_unit`` is the character's scale (False: a stand-in, the size unknown).
    """
    scale = clip.mm_per_unit() if mm_per_unit is None else mm_per_unit
    distance = np.linalg.norm(clip.forward_kinematics(reduced) - clip.positions, axis=-1)
    worst = np.unravel_index(int(np.argmax(distance)), distance.shape)
    channel_max = np.abs(reduced - clip.channels).max(axis=0) if len(reduced) else \
        np.zeros(clip.n_channels)
    n_animated = int(np.count_nonzero(animated))
    return Metrics(mean=float(distance.mean()), max=float(distance.max()),
                   mean_mm=float(distance.mean() * scale), max_mm=float(distance.max() * scale),
                   worst_node=clip.node_names[worst[1]],
                   worst_frame=int(clip.first_frame + worst[0]),
                   channel_max=dict(zip(clip.channel_names, map(float, channel_max),
                                        strict=True)),
                   keys=n_keys * n_animated + corrective_keys,
                   original_keys=clip.n_frames * n_animated, pose_keys=n_keys * n_animated,
                   corrective_keys=corrective_keys, scaled=scaled)
