"""Quality and speed of the reduction for every tangent mode and fitting space.

Usage: ``.venv/bin/python benchmarks/bench_reduction.py [--repeat 3]``

Keys: the line-max selection at 5 % and 10 % of the frames. Rows: the finite-difference
baseline (the published plug-in: keys at the same frames, slopes from central differences of
the dense data), then each mode in channel and world space: mean and max joint error in mm (the
character scaled to 1.7 m) over every frame and node, and the fit time (median of ``--repeat``
runs for channel fits; world fits run once). Clips: the bundled sample (994 frames, 96
channels) and a 1,100-frame version of it (the motion continued backwards), the size named in
the speed targets.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sp_core.fitting import (  # noqa: E402
    TANGENT_MODES,
    Fit,
    _Basis,
    _third_lengths,
    difference_slopes,
    joint_errors,
)
from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.reduction import reduce  # noqa: E402
from sp_core.selection import SelectionSpace  # noqa: E402

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"


def baseline_errors(clip, frames) -> np.ndarray:
    rows = np.asarray(frames) - clip.first_frame
    values = clip.unwrapped().channels
    fit = Fit(difference_slopes(values, rows)[:, None, :], *_third_lengths(rows, values.shape[1]))
    basis = _Basis(rows, values, fit.out_length, fit.in_length)
    return joint_errors(clip, basis.evaluate(fit.slopes, 1), clip.positions)


def fit_seconds(result) -> float:
    """Time of the fit itself (channel fit plus world refinement), without metrics and I/O."""
    return result.timings["channel_s"] + result.timings["world_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sample = read_bvh(SAMPLE)
    longer = sample.with_channels(np.concatenate([sample.channels,
                                                  sample.channels[::-1][1:107]]))
    reduce(sample, [0, 50, 100], space="world")  # warm-up (numba, imports)
    for name, clip in (("sample, 994 frames", sample), ("1,100 frames", longer)):
        space = SelectionSpace.from_clip(clip, max_keys=round(0.1 * clip.n_frames))
        scale = clip.mm_per_unit()
        for ratio in (0.05, 0.10):
            keys = round(ratio * clip.n_frames)
            frames = space.keyframes(keys)
            base = baseline_errors(clip, frames) * scale
            print(f"\n{name}, {keys} keys ({ratio:.0%}), 96 channels")
            print(f"{'mode':<10}{'space':<9}{'mean mm':>9}{'max mm':>9}{'× base':>8}{'time s':>9}")
            print(f"{'baseline':<10}{'-':<9}{base.mean():9.2f}{base.max():9.1f}{1:8.2f}{'-':>9}")
            for mode in TANGENT_MODES:
                for fit_space in ("channel", "world"):
                    runs = [reduce(clip, frames, mode, space=fit_space)
                            for _ in range(args.repeat if fit_space == "channel" else 1)]
                    m = runs[0].metrics
                    fit_time = statistics.median(fit_seconds(r) for r in runs)
                    print(f"{mode:<10}{fit_space:<9}{m.mean_mm:9.2f}{m.max_mm:9.1f}"
                          f"{m.mean_mm / base.mean():8.2f}{fit_time:9.3f}")


if __name__ == "__main__":
    main()
