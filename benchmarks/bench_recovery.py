"""Key recovery: does Salient Poses find the keys of keyframed animation baked to every frame?

Usage: ``.venv/bin/python benchmarks/bench_recovery.py [--clips 10] [--seed 0]``

Each trial generates keyframe animation on the sample skeleton in channel space: keyposes every
0.6–1.6 s with random poses and eased (flat) tangents, the extremes an animator blocks with, and
in about half the gaps a breakdown with a smooth (Catmull-Rom) tangent; in-betweens are cubic
Hermite curves. It is baked to every frame at 24 and at 120 fps, and then:

- the plain selection at the true K (positions and channels pose spaces, line-max composed by
  sum — the paper's equation — and by max): precision and recall of the recovered keys within ±1
  and ±2 frames (at 120 fps, ±1 and ±2 frames of 24 fps, i.e. ±5 and ±10 frames);
- the layered mode (keyposes + breakdowns, all joints leading, channels pose space): the share of
  true keyposes labelled keypose and of true breakdowns labelled breakdown, and the recall and
  precision of all keys.

Medians over the trials are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.clip import Clip  # noqa: E402
from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.layered import layered_selection  # noqa: E402
from sp_core.selection import SelectionSpace  # noqa: E402

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"


def hermite(v0, v1, m0, m1, u):
    return ((2 * u**3 - 3 * u**2 + 1) * v0 + (u**3 - 2 * u**2 + u) * m0
            + (-2 * u**3 + 3 * u**2) * v1 + (u**3 - u**2) * m1)


def keyframed_clip(skeleton: Clip, rng: np.random.Generator, fps: float, seconds: float = 10.0
                   ) -> tuple[Clip, np.ndarray, np.ndarray]:
    """A clip animated from random keys; returns (clip, key frames, keypose mask)."""
    n = int(round(seconds * fps)) + 1
    keys = [0]
    while keys[-1] < n - 1:
        keys.append(min(n - 1, keys[-1] + int(rng.uniform(0.6, 1.6) * fps)))
    if keys[-1] - keys[-2] < 0.4 * fps:
        keys.pop(-2)
    keyposes = list(keys)
    frames = set(keys)
    for a, b in zip(keyposes[:-1], keyposes[1:], strict=True):
        if rng.random() < 0.5 and b - a > 0.5 * fps:
            frames.add(int(round(a + rng.uniform(0.35, 0.65) * (b - a))))
    keys = sorted(frames)
    is_keypose = np.array([k in keyposes for k in keys])
    c = skeleton.n_channels
    rotation = skeleton.is_rotation_channel()
    values = np.where(rotation, rng.normal(0.0, 25.0, (len(keys), c)),
                      rng.normal(0.0, 3.0, (len(keys), c)))
    values += skeleton.channels[0]  # around the sample's first pose
    # breakdowns lie between their keyposes, like an animator's passing pose
    for i in np.flatnonzero(~is_keypose):
        values[i] = 0.5 * (values[i - 1] + values[i + 1]) + rng.normal(0, 6.0, c) * rotation
    slopes = np.zeros_like(values)
    for i in np.flatnonzero(~is_keypose):
        slopes[i] = (values[i + 1] - values[i - 1]) / (keys[i + 1] - keys[i - 1])
    dense = np.empty((n, c))
    for i in range(len(keys) - 1):
        a, b = keys[i], keys[i + 1]
        u = (np.arange(a, b + 1) - a)[:, None] / (b - a)
        dense[a:b + 1] = hermite(values[i], values[i + 1], slopes[i] * (b - a),
                                 slopes[i + 1] * (b - a), u)
    clip = skeleton.with_channels(dense)
    clip = Clip(clip.node_names, clip.parents, clip.offsets, clip.end_sites,
                clip.channel_names, dense, fps)
    return clip, np.array(keys), is_keypose


def precision_recall(found: np.ndarray, truth: np.ndarray, tolerance: int) -> tuple[float, float]:
    near = np.abs(found[:, None] - truth[None, :]) <= tolerance
    return float(near.any(axis=1).mean()), float(near.any(axis=0).mean())


def trial(skeleton: Clip, rng: np.random.Generator, fps: float) -> dict[str, float]:
    clip, keys, is_keypose = keyframed_clip(skeleton, rng, fps)
    step = int(round(fps / 24))
    out: dict[str, float] = {}
    for pose in ("positions", "channels"):
        for compose in ("sum", "max"):
            space = SelectionSpace.from_clip(clip, pose=pose, compose=compose,
                                             max_keys=len(keys) + 2)
            found = space.keyframes(len(keys))
            for tol in (1, 2):
                p, r = precision_recall(found, keys, tol * step)
                out[f"{pose}, compose {compose}: precision ±{tol}"] = p
                out[f"{pose}, compose {compose}: recall ±{tol}"] = r
    layered = layered_selection(clip, clip.joint_names, pose="channels")
    truth_poses, truth_breaks = keys[is_keypose], keys[~is_keypose]
    near = np.abs(layered.keyposes[:, None] - truth_poses[None, :]) <= 2 * step
    out["layered: true keyposes labelled keypose ±2"] = float(near.any(axis=0).mean())
    near = np.abs(layered.breakdowns[:, None] - truth_breaks[None, :]) <= 2 * step
    out["layered: true breakdowns labelled breakdown ±2"] = float(near.any(axis=0).mean())
    out["layered: recall of all keys ±2"] = precision_recall(layered.frames, keys, 2 * step)[1]
    out["layered: precision of all keys ±2"] = precision_recall(layered.frames, keys,
                                                                2 * step)[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    skeleton = read_bvh(SAMPLE).sub_range(0, 0)
    for fps in (24.0, 120.0):
        rng = np.random.default_rng(args.seed)
        results = [trial(skeleton, rng, fps) for _ in range(args.clips)]
        print(f"\n{fps:g} fps, {args.clips} clips of 10 s (medians)")
        for name in results[0]:
            print(f"  {name:<48} {statistics.median(r[name] for r in results):.3f}")


if __name__ == "__main__":
    main()
