"""Speed of the magic wand on the sample clip (994 frames): eigendecomposition, then falloffs.

Usage: ``.venv/bin/python benchmarks/bench_falloff.py [--repeat 5]`` (medians).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.falloff import PoseGraph  # noqa: E402
from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.poses import pose_matrix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    poses = pose_matrix(read_bvh(ROOT / "examples" / "cmu_131_01.bvh"))
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        graph = PoseGraph(poses)
        times.append(time.perf_counter() - start)
    print(f"pose graph + eigenpairs ({len(poses)} frames, {graph.eigen} pairs): "
          f"{statistics.median(times) * 1000:.0f} ms")
    for mode in ("local", "global"):
        times = []
        for frame in range(0, len(poses), 50):
            start = time.perf_counter()
            graph.weights(frame, region=(0, len(poses) - 1), mode=mode)
            times.append(time.perf_counter() - start)
        print(f"falloff for a new frame, {mode}: {statistics.median(times) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
