"""The world fit's two objectives, least squares and minimax, side by side.

Usage: ``.venv/bin/python benchmarks/bench_minimax.py [--tangents unified] [--no-tolerance]``

1. At the same keys (the default selection's K keyframes; pose keys only, no corrective keys):
   mean and max joint error in mm (character scaled to 1.7 m) of each objective, the ratios
   and the world fit's seconds. Clips: the bundled sample at K = 15,
   30, 55, 90 and the two 90-frame takes in tests/data at three K each.
2. ``--tangents`` runs (1) with another tangent mode.
3. The default choice of K (``salient-poses reduce CLIP``: the smallest K within the
   tolerance, corrective keys allowed) with each objective: K, keys written, mean, max and the
   wall time of the search and reduction (one run each).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.fitting import FIT_OBJECTIVES  # noqa: E402
from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.reduction import reduce  # noqa: E402
from sp_core.selection import SelectionSpace  # noqa: E402
from sp_core.session import Session  # noqa: E402
from sp_core.standalone import StandaloneHost  # noqa: E402

CLIPS = (("cmu_131_01", ROOT / "examples" / "cmu_131_01.bvh", (15, 30, 55, 90)),
         ("walk", ROOT / "tests" / "data" / "cmu_131_01_walk.bvh", (4, 6, 9)),
         ("stop", ROOT / "tests" / "data" / "cmu_131_01_stop.bvh", (5, 7, 9)))


def same_keys(tangents: str) -> None:
    print(f"\nSame keys, pose keys only, {tangents} tangents: mean / max mm, world fit s")
    print("| clip | K | least-squares | minimax | mean ratio | max ratio | time (ls / minimax) |")
    print("|---|---|---|---|---|---|---|")
    means, maxes = [], []
    for name, path, ks in CLIPS:
        clip = read_bvh(path)
        space = SelectionSpace.from_clip(clip, max_keys=max(ks) + 5)
        for k in ks:
            frames = space.keyframes(k)
            runs = {o: reduce(clip, frames, tangents, objective=o) for o in FIT_OBJECTIVES}
            ls, mm = (runs[o].metrics for o in FIT_OBJECTIVES)
            times = [runs[o].timings["world_s"] for o in FIT_OBJECTIVES]
            means.append(mm.mean_mm / ls.mean_mm)
            maxes.append(mm.max_mm / ls.max_mm)
            print(f"| {name} | {k} | {ls.mean_mm:.2f} / {ls.max_mm:.1f} | {mm.mean_mm:.2f} / "
                  f"{mm.max_mm:.1f} | {means[-1]:.3f} | {maxes[-1]:.3f} | "
                  f"{times[0]:.2f} / {times[1]:.2f} s |", flush=True)
    print(f"geometric mean of the ratios: mean {np.exp(np.mean(np.log(means))):.3f}, max "
          f"{np.exp(np.mean(np.log(maxes))):.3f}")


def default_k() -> None:
    print("\nThe default choice of K (tolerance 2,20 mm, corrective keys allowed): K, keys, "
          "mean / max mm, s")
    print("| clip | objective | K | keys written | mean / max | time |")
    print("|---|---|---|---|---|---|")
    for name, path, _ in CLIPS:
        for objective in FIT_OBJECTIVES:
            started = time.perf_counter()
            clip = read_bvh(path)
            session = Session(StandaloneHost(clip))
            session.set_options(objective=objective)
            session.analyze()
            result = session.reduce()
            seconds = time.perf_counter() - started
            m = result.metrics
            share = 100.0 * m.keys / m.original_keys
            print(f"| {name} | {objective} | {session.k} | {m.pose_keys} + "
                  f"{m.corrective_keys} = {share:.1f} % | {m.mean_mm:.2f} / {m.max_mm:.1f} | "
                  f"{seconds:.1f} s |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tangents", default="unified")
    parser.add_argument("--no-tolerance", action="store_true",
                        help="skip the default choice of K")
    args = parser.parse_args()
    reduce(read_bvh(CLIPS[1][1]), [0, 40, 89], objective="minimax")  # warm-up (numba)
    same_keys(args.tangents)
    if not args.no_tolerance:
        default_k()


if __name__ == "__main__":
    main()
