"""Time the selection engine; print a table (medians of repeated warm runs).

Usage: ``.venv/bin/python benchmarks/bench_selection.py [--repeat 5] [--quick]``

Clips are slices of the bundled sample; lengths beyond its 994 frames continue with the motion
played backwards (continuous poses, like a longer take). ``max_keys`` is N/2 throughout.
Rows: JIT start-up in a fresh process (compiled code loaded from numba's cache), then
table and DP times per length and cost, then the long-clip case (10,000 frames, stride 4,
max_span 2 s) with the peak memory of a fresh process.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.poses import pose_matrix  # noqa: E402
from sp_core.selection import SelectionSpace  # noqa: E402

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"


def long_poses(n: int) -> np.ndarray:
    poses = pose_matrix(read_bvh(SAMPLE))
    loop = np.concatenate([poses, poses[::-1]])
    reps = -(-n // len(loop))
    return np.ascontiguousarray(np.tile(loop, (reps, 1))[:n])


def fresh_process(code: str) -> str:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return run.stdout.strip()


def startup() -> tuple[float, float]:
    """Seconds for the first analysis in a new process, and for the import alone."""
    code = ("import time; t0 = time.perf_counter(); import numpy as np; "
            "from sp_core.selection import SelectionSpace; t1 = time.perf_counter(); "
            "p = np.random.default_rng(0).normal(size=(200, 12)).cumsum(0); "
            "[SelectionSpace(p, cost=c) for c in ('line-max', 'line-time', 'line-sse')]; "
            "print(time.perf_counter() - t0, t1 - t0)")
    first, imported = map(float, fresh_process(code).split())
    return first, imported


def long_case() -> tuple[float, float, float, float]:
    code = ("import resource, time, sys; sys.path.insert(0, 'benchmarks'); "
            "from bench_selection import long_poses; from sp_core.selection import "
            "SelectionSpace; p = long_poses(10000); SelectionSpace(p[:400], stride=4, "
            "max_span=240); t = time.perf_counter(); "
            "s = SelectionSpace(p, stride=4, max_span=240); "
            "print(time.perf_counter() - t, s.timings['table_s'], s.timings['select_s'], "
            "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    return tuple(map(float, fresh_process(code).split()))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="lengths 300 and 1100 only")
    args = parser.parse_args()
    lengths = [300, 1100] if args.quick else [300, 600, 1100, 2000]

    first, imported = startup()
    print(f"fresh process: import {imported:.2f} s, first analyses (3 costs, JIT from cache) "
          f"{first:.2f} s\n")
    print(f"{'frames':>7} {'cost':<10}{'max_keys':>9}{'table s':>10}{'DP s':>9}{'total s':>9}")
    for n in lengths:
        poses = long_poses(n)
        for cost in ("line-max", "line-time", "line-sse"):
            SelectionSpace(poses[:50], cost=cost)  # warm-up
            table, dp, total = [], [], []
            for _ in range(args.repeat):
                t = time.perf_counter()
                space = SelectionSpace(poses, cost=cost)
                total.append(time.perf_counter() - t)
                table.append(space.timings["table_s"])
                dp.append(space.timings["select_s"])
            print(f"{n:>7} {cost:<10}{space.max_keys:>9}{statistics.median(table):>10.3f}"
                  f"{statistics.median(dp):>9.3f}{statistics.median(total):>9.3f}")
    seconds, table_s, dp_s, peak = long_case()
    print(f"\n10,000 frames, stride 4, max_span 240 (2 s), max_keys 1,250, line-max: "
          f"{seconds:.2f} s (table {table_s:.2f} s, DP {dp_s:.2f} s), peak {peak:.0f} MB")


if __name__ == "__main__":
    main()
