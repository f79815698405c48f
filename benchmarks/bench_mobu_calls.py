"""MotionBuilder host calls for reading a take and for Apply, counted on the strict fake.

Usage: ``.venv/bin/python benchmarks/bench_mobu_calls.py [--frames 1000 10000] [--keys-every 20]``

A synthetic 60-joint character (five 12-joint chains under a root, every rotation and the root's
translation keyed on every frame, 183 curves) is built in the fake ``pyfbsdk`` of
``tests/fake_mobu``; ``MobuHost.motion`` reads it, then ``write_curves`` (one key every
``--keys-every`` frames, unified tangents) and ``write_residual`` (every frame) write it back.
Each row counts the pyfbsdk calls by kind. Beside them: what the old adapter's loops made for the
same take (from its code: ``Goto`` + ``Evaluate`` and six ``Data`` reads per model per frame;
one ``KeyAdd`` and up to six setters per key, one ``KeyAdd`` per frame for the residual).

The seconds are an **estimate, not a measurement in MotionBuilder** (none is available here):
scene evaluations at 2–20 ms each (the range the issue reports for the old read: 2–20 s per
1,000 frames) and every other call at 1–5 µs (a Boost.Python call that does little work). The
fake's own run time is printed too; it is Python, not MotionBuilder.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fake_mobu"))
sys.path.insert(0, str(ROOT / "tests"))

import pyfbsdk as fb  # noqa: E402  (the fake)

from mobu_plugin.host import MobuHost  # noqa: E402
from sp_core.curves import KeyedCurves  # noqa: E402

JOINTS = 60
CHAINS = 5
FIRST = 1001
EVALUATION_MS = (2.0, 20.0)
CALL_US = (1.0, 5.0)


def build(frames: int) -> list[str]:
    """The character keyed on every frame; returns the curve (channel) names."""
    fb.reset(30.0)
    rng = np.random.default_rng(7)
    root = fb.FBModelSkeleton("root")
    models = [root]
    for chain in range(CHAINS):
        parent = root
        for link in range((JOINTS - 1) // CHAINS + (chain < (JOINTS - 1) % CHAINS)):
            joint = fb.FBModelSkeleton(f"c{chain}j{link}")
            joint.Parent = parent
            joint.Translation = fb.FBVector3d(*rng.uniform(-10, 10, 3))
            models.append(joint)
            parent = joint
    numbers = FIRST + np.arange(frames)
    t = numbers / 30.0
    channels = []
    for model in models:
        props = [("rotation", model.Rotation)]
        if model is root:
            props.insert(0, ("position", model.Translation))
        for kind, prop in props:
            for axis in range(3):
                amplitude, speed, phase = rng.uniform(5, 40), rng.uniform(0.5, 3), rng.uniform(0, 6)
                fb.key_base(prop, axis, numbers, amplitude * np.sin(speed * t + phase))
                channels.append(f"{model.Name}.{'XYZ'[axis]}{kind}")
    fb.scene.take.LocalTimeSpan = fb.FBTimeSpan(fb._time(fb.frame_ticks(FIRST)),
                                                fb._time(fb.frame_ticks(FIRST + frames - 1)))
    fb.scene.time = fb.scene.evaluated = fb.frame_ticks(FIRST)
    assert len(models) == JOINTS
    return channels


def estimate(counts: dict[str, int]) -> tuple[float, float]:
    evaluations = counts.get("FBScene.Evaluate", 0)
    others = sum(counts.values()) - evaluations
    return tuple(evaluations * ms / 1e3 + others * us / 1e6
                 for ms, us in zip(EVALUATION_MS, CALL_US, strict=True))  # type: ignore[return-value]


def old_read(frames: int) -> dict[str, int]:
    """The old read: Goto + Evaluate per frame (and once to restore the time), and one ``Data``
    per channel per frame, six channels per model."""
    return {"FBScene.Evaluate": frames + 1, "FBPlayerControl.Goto": frames + 1,
            "FBProperty.Data": frames * 6 * JOINTS}


def old_apply(frames: int, keys: int, curves: int) -> dict[str, int]:
    """The old Apply: per key KeyAdd, clamp, break, and two derivatives/weights (six setters
    on inner keys); the residual one KeyAdd per frame per curve."""
    per_curve = keys * 3 + 4 * (keys - 1)
    return {"FBFCurve.KeyAdd": curves * (keys + frames),
            "FBFCurve.setters": curves * per_curve - curves * keys}


def run(frames: int, every: int) -> list[tuple[str, dict[str, int], float]]:
    channels = build(frames)
    host = MobuHost()
    host.progress_after = float("inf")
    rows = []
    started = time.perf_counter()
    fb.calls.clear()
    motion = host.motion(["root"], FIRST, FIRST + frames - 1)
    rows.append(("read", dict(fb.calls), time.perf_counter() - started))
    key_frames = np.unique(np.r_[np.arange(FIRST, FIRST + frames, every), FIRST + frames - 1])
    k, c = len(key_frames), len(channels)
    columns = [motion.channel_names.index(name) for name in channels]
    values = motion.channels[key_frames - FIRST][:, columns]
    handles = np.zeros((k, c, 2))
    handles[:, :, 0] = every / 3.0
    curves = KeyedCurves(channels, key_frames, values, -handles, handles, np.ones(c, bool))
    with host.undo_chunk("bench"):
        started = time.perf_counter()
        fb.calls.clear()
        host.write_curves(curves, "reduced")
        rows.append(("Apply: override layer", dict(fb.calls), time.perf_counter() - started))
        started = time.perf_counter()
        fb.calls.clear()
        host.write_residual(channels, motion.frames, np.zeros((frames, c)), "residual", 1.0)
        rows.append(("Apply: residual layer", dict(fb.calls), time.perf_counter() - started))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--keys-every", type=int, default=20)
    args = parser.parse_args()
    print(f"{JOINTS}-joint character, 183 curves, one key every {args.keys_every} frames; "
          f"estimate = evaluations × {EVALUATION_MS} ms + other calls × {CALL_US} µs "
          "(assumed, not measured in MotionBuilder)\n")
    print("| frames | step | scene evaluations | curve evaluations | key writes (KeysAdd / "
          "KeyAdd) | per-key tangent calls | all calls | estimate in MotionBuilder | fake run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for frames in args.frames:
        for name, counts, seconds in run(frames, args.keys_every):
            setters = sum(v for key, v in counts.items() if key.startswith("FBFCurve.KeySet"))
            low, high = estimate(counts)
            print(f"| {frames:,} | {name} | {counts.get('FBScene.Evaluate', 0):,} | "
                  f"{counts.get('FBFCurve.Evaluate', 0):,} | "
                  f"{counts.get('FBFCurve.KeysAdd', 0):,} / {counts.get('FBFCurve.KeyAdd', 0):,}"
                  f" | {setters:,} | {sum(counts.values()):,} | {low:.2f}–{high:.2f} s | "
                  f"{seconds:.1f} s |")
        keys = len(np.unique(np.r_[np.arange(0, frames, args.keys_every), frames - 1]))
        for name, counts in (("old read", old_read(frames)),
                             ("old Apply (both layers)", old_apply(frames, keys, 183))):
            low, high = estimate(counts)
            print(f"| {frames:,} | {name} | {counts.get('FBScene.Evaluate', 0):,} | 0 | "
                  f"0 / {counts.get('FBFCurve.KeyAdd', 0):,} | "
                  f"{counts.get('FBFCurve.setters', 0):,} | {sum(counts.values()):,} | "
                  f"{low:.2f}–{high:.2f} s | — |")


if __name__ == "__main__":
    main()
