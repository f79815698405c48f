"""Time FBX reading (sp_core.io.fbx through ufbx); print a table of medians of repeated runs.

Usage: ``.venv/bin/python benchmarks/bench_fbx.py [--repeat 5] [--long-frames 3600]``

Cases: the Blender-exported test files in tests/data (240 and 90 frames, 38 nodes) beside the BVH
they were made from, and a long ASCII FBX (31 joints keyed on every frame, default 3600 frames =
30 s at 120 fps) written by tests/fbx_ascii.py, to show the per-frame cost. Reading an FBX runs
ufbx in a forked child (see sp_core.io.fbx), so every time includes the fork.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.io.readers import read_clip  # noqa: E402

from fbx_ascii import Joint, write_fbx  # noqa: E402

DATA = ROOT / "tests" / "data"


def median_seconds(read, path: Path, repeat: int) -> tuple[float, int]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        clip = read(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times), clip.n_frames


def long_file(frames: int, path: Path) -> Path:
    rng = np.random.default_rng(0)
    joints = [Joint("j0", None, (0, 1, 0), order="ZXY",
                    rotation_keys={"T": np.cumsum(rng.normal(0, 1, (frames, 3)), axis=0)},
                    translation_keys={"T": np.cumsum(rng.normal(0, 0.1, (frames, 3)), axis=0)})]
    for k in range(1, 31):
        joints.append(Joint(f"j{k}", f"j{k - 1}", (0, 1, 0), order="YXZ", pre=(10, 0, 5),
                            rotation_keys={"T": np.cumsum(rng.normal(0, 1, (frames, 3)),
                                                          axis=0)}))
    return write_fbx(path, joints, ["T"], fps=120.0, n_frames=frames)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--long-frames", type=int, default=3600)
    args = parser.parse_args(argv)
    rows = []
    for name in ("cmu_131_01_240", "two_takes"):
        seconds, frames = median_seconds(read_clip, DATA / f"{name}.fbx", args.repeat)
        rows.append((f"{name}.fbx", frames, seconds))
    seconds, frames = median_seconds(read_bvh, DATA / "cmu_131_01_240.bvh", args.repeat)
    rows.append(("cmu_131_01_240.bvh (reference)", frames, seconds))
    with tempfile.TemporaryDirectory() as folder:
        path = long_file(args.long_frames, Path(folder) / "long.fbx")
        seconds, frames = median_seconds(read_clip, path, max(1, args.repeat // 2))
        rows.append(("long ASCII FBX, 31 joints", frames, seconds))
    print(f"{'file':40s} {'frames':>7s} {'median s':>9s} {'ms/frame':>9s}")
    for label, frames, seconds in rows:
        print(f"{label:40s} {frames:7d} {seconds:9.3f} {1000 * seconds / frames:9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
