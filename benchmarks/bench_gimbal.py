"""Fits of a root near gimbal lock: the same motion turned so its root's Euler angles differ.

Usage: ``.venv/bin/python benchmarks/bench_gimbal.py [--world]``

The bundled sample's root (Hips, order Z Y X, Y up) turns about 100° to face along the Z axis
and back, which puts its middle angle within 2° of +90° (frame 440). The same take turned about
the up axis is the same motion with other Euler angles: turned −45° its root stays 26° or more
from the lock; turned 180° it comes as near −90°; turned by the 2° that sets frame 440 exactly on
the lock, continuity filtering carries the middle angle past 90° (to 191°). Joint distances are
the same in all four, so a fit that does not depend on the Euler angles gives the same errors on
all four; the turned-away take is the reference.

Keys: the line-max selection of the sample at K = 25, 50, 99 (the same frames for every take).
Rows: mean and max joint error and the worst ankle/toe error (mm, character at 1.7 m) for the
channel-space fits (broken, unified; ``--world`` adds the unified world fit), once with every
channel fitted alone (``per channel``, the fit before rotations were measured near the lock)
and once with three-axis rotations measured on the rotation near the lock (``rotation``, see
:mod:`sp_core.gimbal`). :func:`sp_core.reduction.reduce` fits channel space the second way and
starts the world fit from the first (the world fit measures on poses; started from the second
it was no better). Channel fits take well under a second each, world fits a few seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.clip import Clip  # noqa: E402
from sp_core.fitting import fit_channels, joint_errors, refine_world  # noqa: E402
from sp_core.gimbal import rotation_triplets, turn_clip  # noqa: E402
from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.reduction import constant_channels, reduce  # noqa: E402
from sp_core.selection import SelectionSpace  # noqa: E402

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"
KEYS = (25, 50, 99)


def through_lock(clip: Clip, frame: int) -> Rotation:
    """The smallest turn that points the root's X axis at frame ``frame`` along −Z, where the
    middle angle of a Z Y X root is exactly +90°."""
    root = clip.rotation_orders[0]
    columns = rotation_triplets(clip)[0][1]
    axis = Rotation.from_euler(root, clip.channels[frame, columns], degrees=True).apply([1, 0, 0])
    turn, _ = Rotation.align_vectors([[0.0, 0.0, -1.0]], [axis])
    return turn


def takes(clip: Clip) -> dict[str, Clip]:
    """The four takes, each named with its root's middle-angle range."""
    turns = {"sample": Rotation.identity(),
             "turned -45 deg (reference)": Rotation.from_euler("y", -45, degrees=True),
             "turned 180 deg": Rotation.from_euler("y", 180, degrees=True),
             "through the lock at frame 440": through_lock(clip, 440)}
    out = {}
    for name, turn in turns.items():
        take = turn_clip(clip, turn)
        middle = take.unwrapped().channels[:, rotation_triplets(take)[0][1][1]]
        out[f"{name} (middle angle {middle.min():.0f} to {middle.max():.0f} deg)"] = take
    return out


def reduced(clip: Clip, frames: np.ndarray, tangents: str, space: str,
            rotations: bool) -> np.ndarray:
    """Dense channels of the fit as :func:`reduce` makes it; ``rotations=False`` fits every
    channel alone."""
    work = clip.unwrapped()
    values = work.channels
    rows = np.asarray(frames) - clip.first_frame
    animated = ~constant_channels(values)
    fit = fit_channels(values, rows, tangents,
                       rotations=rotation_triplets(work) if rotations else None)
    fit.slopes[:, :, ~animated] = 0.0
    if space == "world":
        fit = refine_world(work, rows, fit, tangents, free=animated)
    dense = fit.curves(values, rows, clip.first_frame, list(work.channel_names), animated,
                       tangents).dense()
    dense[:, ~animated] = values[:1, ~animated]
    return dense


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", action="store_true", help="add the unified world fit")
    args = parser.parse_args()
    sample = read_bvh(SAMPLE)
    space = SelectionSpace.from_clip(sample, max_keys=max(KEYS))
    feet = [i for i, name in enumerate(sample.node_names) if "Ankle" in name or "Toe" in name]
    modes = [("broken", "channel"), ("unified", "channel")]
    if args.world:
        modes.append(("unified", "world"))
    scale = sample.mm_per_unit()
    # the harness must measure what reduce() does
    for tangents, where in modes:
        check = reduce(sample, space.keyframes(KEYS[0]), tangents, space=where).reduced
        assert np.allclose(check, reduced(sample, space.keyframes(KEYS[0]), tangents, where,
                                          where == "channel"))
    print("mean / max joint error / worst ankle or toe, mm at 1.7 m")
    for name, take in takes(sample).items():
        print(f"\n{name}")
        for tangents, where in modes:
            for rotations in (False, True):
                cells = []
                for k in KEYS:
                    dense = reduced(take, space.keyframes(k), tangents, where, rotations)
                    error = joint_errors(take, dense, take.positions) * scale
                    cells.append(f"K={k}: {error.mean():6.2f} / {error.max():5.1f} / "
                                 f"{error[:, feet].max():5.1f}")
                label = f"{tangents} {where}, {'rotation' if rotations else 'per channel'}"
                print(f"  {label:34s}" + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main()
