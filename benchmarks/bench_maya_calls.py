"""Host calls MayaHost makes, counted against the strict fake (tests/fake_maya).

``.venv/bin/python benchmarks/bench_maya_calls.py [--frames 1000 10000] [--joints 60]``

A chain of ``--joints`` joints keyed on every frame (translate and rotate, 6 curves per joint) is
read (``MayaHost.motion``) and written back (``write_curves`` with one key every 25 frames, then
``write_residual`` with a key on every frame, inside one undo chunk). Calls are grouped:

- *DG evaluations*: contexts (each one ``MDGContext`` made current by one ``MDGContextGuard``;
  counted once) and matrix plug reads (``MPlug.asMObject``;
  each is followed by one ``MFnMatrixData.matrix()`` on the returned data object, counted
  apart);
- *per-plug static reads*: everything read once per joint or plug (plugs, flags, orients);
- *commands*: ``maya.cmds`` calls (layers, the keying that creates layer curves, queries);
- *curve writes*: ``MFnAnimCurve`` edits inside the undoable plug-in command.

The real-Maya time is an **estimate**, not a measurement: the counts times assumed per-call
costs (printed with the table), which nobody has measured in Maya for this project yet.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fake_maya"))

from maya import testing  # noqa: E402  (the fake)
from maya._scene import STATE  # noqa: E402

from maya_plugin.host import MayaHost  # noqa: E402
from sp_core.curves import KeyedCurves  # noqa: E402

#: Assumed real-Maya costs (seconds) per call kind — assumptions for the estimate only.
#: Context evaluation of a 60-joint skeleton at one time; a matrix plug read when the context is
#: already evaluated; a Python API call; a maya.cmds call; writing one key inside addKeys*.
ASSUMED = {"context": (2e-4, 1e-3), "matrix": (5e-6, 2e-5), "api": (2e-6, 1e-5),
           "command": (5e-5, 2e-4), "key": (2e-7, 1e-6)}


def build(joints: int, frames: int, first: int = 1001) -> list[str]:
    testing.reset("ntsc")
    names = [f"j{i:02d}" for i in range(joints)]
    times = np.arange(first, first + frames)
    rng = np.random.default_rng(3)
    for i, name in enumerate(names):
        testing.create_node(name, names[i - 1] if i else None, translate=(0.0, 5.0, 0.0))
        for a, axis in enumerate("XYZ"):
            phase = rng.uniform(0, 2 * np.pi)
            testing.key_base(f"{name}.rotate{axis}", times,
                             0.4 * np.sin(times / (40.0 + 7 * a) + phase))
            testing.key_base(f"{name}.translate{axis}", times,
                             (5.0 if axis == "Y" else 0.0) + 0.1 * np.cos(times / 55.0 + phase))
    STATE.scene.playback = (float(first), float(first + frames - 1))
    return names


def reduced(motion, every: int = 25) -> KeyedCurves:
    """Keys every ``every`` frames with one-third handles along the local slope."""
    rows = np.unique(np.r_[np.arange(0, motion.n_frames, every), motion.n_frames - 1])
    values = motion.channels[rows]
    slope = np.gradient(motion.channels, axis=0)[rows]
    gaps = np.diff(rows).astype(float)
    out_dt = np.r_[gaps, gaps[-1]][:, None] / 3
    in_dt = np.r_[gaps[0], gaps][:, None] / 3
    ones = np.ones_like(values)
    out_handles = np.stack([out_dt * ones, out_dt * slope], axis=-1)
    in_handles = np.stack([-in_dt * ones, -in_dt * slope], axis=-1)
    return KeyedCurves(list(motion.channel_names), motion.first_frame + rows, values, in_handles,
                       out_handles, np.ones(len(motion.channel_names), bool))


def groups(calls) -> dict[str, int]:
    out = {"context": 0, "matrix": 0, "matrix-data": 0, "api": 0, "command": 0,
           "key-writes": 0}
    for name, n in calls.items():
        if name == "MDGContextGuard":
            out["context"] += n
        elif name == "MDGContext":  # one per guard: the context object it makes current
            continue
        elif name == "MPlug.asMObject":  # each read is asMObject + MFnMatrixData.matrix
            out["matrix"] += n
        elif name == "MFnMatrixData.matrix":
            out["matrix-data"] += n
        elif name.startswith("cmds."):
            out["command"] += n
        elif name.startswith("MFnAnimCurve.add"):
            out["key-writes"] += n
        else:
            out["api"] += n
    return out


def estimate(counts: dict[str, int], keys: int) -> str:
    low = (counts["context"] * ASSUMED["context"][0] + counts["matrix"] * ASSUMED["matrix"][0]
           + counts["matrix-data"] * ASSUMED["api"][0]
           + counts["api"] * ASSUMED["api"][0] + counts["command"] * ASSUMED["command"][0]
           + keys * ASSUMED["key"][0])
    high = (counts["context"] * ASSUMED["context"][1] + counts["matrix"] * ASSUMED["matrix"][1]
            + counts["matrix-data"] * ASSUMED["api"][1]
            + counts["api"] * ASSUMED["api"][1] + counts["command"] * ASSUMED["command"][1]
            + keys * ASSUMED["key"][1])
    return f"{low:.1f}–{high:.1f} s"


def row(frames: int, step: str, counts: dict[str, int], keys: int, seconds: float) -> str:
    cells = [counts[k] for k in ("context", "matrix", "matrix-data", "api", "command",
                                 "key-writes")]
    return (f"| {frames:,} | {step} | " + " | ".join(f"{c:,}" for c in cells)
            + f" | {keys:,} | {estimate(counts, keys)} | {seconds:.1f} s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--joints", type=int, default=60)
    args = parser.parse_args()
    print(f"{args.joints} joints, 6 keyed channels each; counts against the strict fake")
    print("| frames | step | contexts | matrix reads | matrix data | other API calls | "
          "cmds calls | addKeys* calls | keys written | estimated real Maya | fake wall time |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for frames in args.frames:
        names = build(args.joints, frames)
        host = MayaHost()
        start = time.perf_counter()
        motion = host.motion([names[0]], 1001, 1000 + frames)
        read_time = time.perf_counter() - start
        read = groups(STATE.calls)
        print(row(frames, "read", read, 0, read_time))
        curves = reduced(motion)
        residual = motion.channels - curves.evaluate(np.arange(1001, 1001 + frames))
        STATE.calls.clear()
        start = time.perf_counter()
        with host.undo_chunk("bench"):
            host.write_curves(curves, "salientPoses")
            host.write_residual(motion.channel_names, np.arange(1001, 1001 + frames), residual,
                                "salientPoses_residual", 1.0)
        write_time = time.perf_counter() - start
        write = groups(STATE.calls)
        keys = len(motion.channel_names) * (curves.n_keys + frames)
        print(row(frames, "Apply", write, keys, write_time))
    print("\nAssumed real-Maya cost per call (low–high, seconds; not measured): "
          + ", ".join(f"{k} {lo:g}–{hi:g}" for k, (lo, hi) in ASSUMED.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
