"""Time BVH parsing and forward kinematics; print a table (medians of repeated runs).

Usage: ``.venv/bin/python benchmarks/bench_bvh.py [--repeat 5] [--big-frames 100000]``

Cases: the bundled sample (994 frames, 96 channels) and a long file made by repeating its motion
(default 100,000 frames). Each case also runs once in a fresh process to report peak memory.
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


def make_long_file(frames: int, path: Path) -> None:
    import numpy as np

    clip = read_bvh(SAMPLE, unwrap=False)
    reps = -(-frames // clip.n_frames)
    long = clip.with_channels(np.tile(clip.channels, (reps, 1))[:frames])
    write_bvh(long, path)


def time_case(path: Path, repeat: int) -> tuple[float, float, int, int]:
    parse, fk = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        clip = read_bvh(path)
        t1 = time.perf_counter()
        clip.positions  # noqa: B018 - computes and caches forward kinematics
        t2 = time.perf_counter()
        parse.append(t1 - t0)
        fk.append(t2 - t1)
    return statistics.median(parse), statistics.median(fk), clip.n_frames, clip.n_channels


def peak_rss_mb(path: Path) -> float:
    code = (f"import resource, sys; sys.path.insert(0, {str(ROOT)!r}); "
            f"from sp_core.io.bvh import read_bvh; c = read_bvh({str(path)!r}); c.positions; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--big-frames", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "long.bvh"
        make_long_file(args.big_frames, big)
        rows = [("sample", SAMPLE, args.repeat), (f"{args.big_frames} frames", big, 3)]
        print(f"{'case':<16}{'frames':>9}{'channels':>10}{'file MB':>9}{'parse s':>10}"
              f"{'FK s':>9}{'peak MB':>9}")
        for label, path, repeat in rows:
            parse, fk, frames, channels = time_case(path, repeat)
            size = path.stat().st_size / 1e6
            print(f"{label:<16}{frames:>9}{channels:>10}{size:>9.1f}{parse:>10.4f}{fk:>9.4f}"
                  f"{peak_rss_mb(path):>9.0f}")


if __name__ == "__main__":
    main()
