"""Batch throughput: takes per minute on 12 takes for a process pool of 1 and 2 workers and a
2-worker Dask LocalCluster (issue 21).

Usage: ``.venv/bin/python benchmarks/bench_batch.py [--repeat 3] [--space world] [--suggested]
[--no-dask]``

The takes are 12 overlapping 400-frame cuts of the bundled sample (120 fps, 38 nodes), reduced
with the default options (K: the smallest within the default tolerance, corrective keys
included; unified tangents), or at the suggested K with ``--suggested`` (one analysis and one
world fit per take, under half a second). Each configuration runs ``--repeat`` times into a
fresh folder (nothing resumed), the configurations taking turns so that a change in the
machine's load falls on all of them; the table gives the median wall time from the command
line's start to its summary (process start-up, Dask cluster start-up and the batch's checks
included, the same for one worker as for several), the takes per minute, and the speed-up over
one worker. The ideal for N workers on N cores is N x; the line under the table gives what
the machine itself allows two processes (:func:`machine_scaling`). The CPU seconds are those of the
command and every worker (user + system), which the load of a shared machine changes much
less than the wall time: N workers cost their start-up N times. The last column leaves
start-up out:
the takes' own seconds (``summary.csv``), N x the mean over one worker's against the mean over
N workers' (the throughput of workers already running). ``--takes`` sets the folder's size.
The command runs this checkout's code (``python -m sp_core.cli`` with this folder first on
the path).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
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
CONFIGS = [("pool, 1 worker", 1, ["--workers", "1"]), ("pool, 2 workers", 2, ["--workers", "2"]),
           ("Dask LocalCluster, 2 workers", 2, ["--scheduler", "local:2"])]


def make_takes(folder: Path, count: int = 12, frames: int = 400) -> list[Path]:
    clip = read_bvh(SAMPLE)
    step = (clip.n_frames - frames) // (count - 1)
    paths = []
    for i in range(count):
        path = folder / f"take{i:02d}.bvh"
        write_bvh(clip.sub_range(i * step, i * step + frames - 1), path)
        paths.append(path)
    return paths


#: A fixed CPU-bound loop of pure Python (about a second): what two processes at once do
#: against one, with no memory traffic and no threads, is the most any two workers can gain
LOOP = "s = 0\nfor i in range(15_000_000):\n    s += i"


def machine_scaling(repeat: int) -> tuple[float, float]:
    """The machine's own scaling of two processes: the median seconds of :data:`LOOP` run
    alone and of two copies started at once (until both end), the two taking turns so that a
    change of load falls on both. Two copies finish their two loops ``2 * alone / pair``
    times as fast as one; a shared host's two cores may give well under 2 (neighbours, or
    two hyperthreads of one core under the hypervisor)."""
    def alone() -> None:
        subprocess.run([sys.executable, "-c", LOOP], check=True)

    def pair() -> None:
        for process in [subprocess.Popen([sys.executable, "-c", LOOP]) for _ in range(2)]:
            process.wait()

    times: dict[str, list[float]] = {"alone": [], "pair": []}
    for _ in range(repeat):
        for label, run in (("alone", alone), ("pair", pair)):
            started = time.perf_counter()
            run()
            times[label].append(time.perf_counter() - started)
    return statistics.median(times["alone"]), statistics.median(times["pair"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--space", default="world", choices=("world", "channel"))
    parser.add_argument("--suggested", action="store_true",
                        help="reduce at the suggested K (cheap takes) instead of the tolerance")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask LocalCluster")
    parser.add_argument("--takes", type=int, default=12)
    args = parser.parse_args()
    command = [sys.executable, "-m", "sp_core.cli", "batch"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    extra = ["--suggested"] if args.suggested else []
    configs = CONFIGS[:2] if args.no_dask else CONFIGS
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        takes = make_takes(Path(tmp), args.takes)
        times: dict[str, list[float]] = {label: [] for label, _, _ in configs}
        take_seconds: dict[str, list[float]] = {label: [] for label, _, _ in configs}
        cpu: dict[str, list[float]] = {label: [] for label, _, _ in configs}
        for r in range(args.repeat):
            for c, (label, _, flags) in enumerate(configs):
                out = Path(tmp) / f"out-{c}-{r}"
                used = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                subprocess.run([*command, *map(str, takes), "--out", str(out), "--space",
                                args.space, *extra, *flags], check=True, capture_output=True,
                               env=env)
                times[label].append(time.perf_counter() - started)
                now = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[label].append(now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime)
                loads.append(os.getloadavg()[0])
                with open(out / "summary.csv", newline="") as summary:
                    take_seconds[label] += [float(row["seconds"])
                                            for row in csv.DictReader(summary)]
        results = [(label, workers, statistics.median(times[label]),
                    statistics.median(cpu[label]), statistics.fmean(take_seconds[label]))
                   for label, workers, _ in configs]
    alone, pair = machine_scaling(args.repeat)
    base, base_take = results[0][2], results[0][4]
    work = "the suggested K" if args.suggested else "default options"
    print(f"{len(takes)} takes of 400 frames, {work}, {args.space} fit, median of "
          f"{args.repeat} runs; 1-minute load average {min(loads):.2f}-{max(loads):.2f}\n")
    print("| executor | wall time (s) | takes per minute | speed-up over 1 worker | CPU (s) | "
          "mean take (s) | speed-up without start-up |")
    print("|---|---|---|---|---|---|---|")
    for label, workers, seconds, used, take in results:
        print(f"| {label} | {seconds:.2f} | {60 * len(takes) / seconds:.1f} | "
              f"{base / seconds:.2f}x | {used:.2f} | {take:.3f} | "
              f"{workers * base_take / take:.2f}x |")
    print(f"\nThe machine: two copies of a fixed Python loop at once {pair:.2f} s, one alone "
          f"{alone:.2f} s: {2 * alone / pair:.2f}x the throughput of one (the most two workers "
          "can gain here).")


if __name__ == "__main__":
    main()
