"""Batch throughput: takes per minute on 12 takes for a process pool of 1 and 2 workers and a
2-worker Dask LocalCluster (issue 21).

Usage: ``.venv/bin/python benchmarks/bench_batch.py [--repeat 3] [--space world]``

The takes are 12 overlapping 400-frame cuts of the bundled sample (120 fps, 38 nodes), reduced
with the default options (K: the smallest within the default tolerance, corrective keys
included; unified tangents). Each configuration runs ``--repeat``
times into a fresh folder (nothing resumed); the table gives the median wall time from the
command line's start to its summary (process start-up, Dask cluster start-up and the batch's
checks included), the takes per minute, and the speed-up over one worker. The ideal for N
workers on N cores is N x.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.io.bvh import read_bvh, write_bvh  # noqa: E402

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"
CONFIGS = [("pool, 1 worker", ["--workers", "1"]), ("pool, 2 workers", ["--workers", "2"]),
           ("Dask LocalCluster, 2 workers", ["--scheduler", "local:2"])]


def make_takes(folder: Path, count: int = 12, frames: int = 400) -> list[Path]:
    clip = read_bvh(SAMPLE)
    step = (clip.n_frames - frames) // (count - 1)
    paths = []
    for i in range(count):
        path = folder / f"take{i:02d}.bvh"
        write_bvh(clip.sub_range(i * step, i * step + frames - 1), path)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--space", default="world", choices=("world", "channel"))
    args = parser.parse_args()
    command = [str(Path(sys.executable).with_name("salient-poses")), "batch"]
    with tempfile.TemporaryDirectory() as tmp:
        takes = make_takes(Path(tmp))
        results = []
        for label, flags in CONFIGS:
            times = []
            for r in range(args.repeat):
                out = Path(tmp) / f"out-{len(results)}-{r}"
                started = time.perf_counter()
                subprocess.run([*command, *map(str, takes), "--out", str(out), "--space",
                                args.space, *flags], check=True, capture_output=True)
                times.append(time.perf_counter() - started)
            results.append((label, statistics.median(times)))
    base = results[0][1]
    print(f"{len(takes)} takes of 400 frames, {args.space} fit, median of {args.repeat} runs\n")
    print("| executor | wall time (s) | takes per minute | speed-up over 1 worker |")
    print("|---|---|---|---|")
    for label, seconds in results:
        print(f"| {label} | {seconds:.1f} | {60 * len(takes) / seconds:.1f} | "
              f"{base / seconds:.2f}x |")


if __name__ == "__main__":
    main()
