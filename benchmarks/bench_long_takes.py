"""Default ``salient-poses analyze`` on long takes: wall time and peak memory against length.

Usage: ``.venv/bin/python benchmarks/bench_long_takes.py [--repeat 3]
[--frames 1000,2000,5000,10000,20000,50000] [--plot docs/perf_long_takes.png]``

Each take is the sample continued with itself played backwards (continuous poses, like a
longer take; see ``benchmarks/__main__.py``), written as a BVH. Every run is a fresh process
(``python -m sp_core.cli analyze TAKE.bvh`` with default options: reading, forward kinematics,
table, DP, suggestions and the printed summary, imports and kernel loading included), started
by a small wrapper process that reports the command's wall time and, through
``resource.getrusage(RUSAGE_CHILDREN)``, its peak resident memory. Rows are medians of
``--repeat`` runs; the plan column is what the automatic window chose (from the ``Analysis``
and ``Note`` lines).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# one child: the command; the wrapper prints its wall time and peak RSS (kB on Linux)
WRAPPER = """
import resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run([sys.executable, "-m", "sp_core.cli", *sys.argv[1:]],
                      capture_output=True, text=True)
seconds = time.perf_counter() - started
if done.returncode:
    sys.exit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(seconds, peak)
print(done.stdout)
"""


def write_take(n_frames: int, folder: Path) -> Path:
    from benchmarks.__main__ import long_clip  # noqa: PLC0415 - one definition of the takes
    from sp_core.io.bvh import write_bvh

    path = folder / f"take_{n_frames}.bvh"
    if not path.exists():
        write_bvh(long_clip(n_frames), path)
    return path


def plan_of(summary: str) -> str:
    """``W = 762, K 15..1000`` from the summary's Analysis and Note lines ("exact" if none)."""
    keys = re.search(r"K (\d+)\.\.(\d+)", summary)
    window = re.search(r"(?:max_span|--max-span) (\d+)\)", summary)
    span = f"W = {int(window.group(1)):,}" if window else "all spans"
    exact = "Note       long take" not in summary
    k = f"K {int(keys.group(1)):,}..{int(keys.group(2)):,}" if keys else "?"
    return ("exact, " if exact else "") + f"{span}, {k}"


def kernel_seconds(summary: str) -> tuple[float, float]:
    """(table + selection seconds measured, the engine's estimate for two idle cores) from the
    summary's Time line."""
    found = re.search(r"table ([\d.]+) s, selection ([\d.]+) s \(estimate for two idle cores "
                      r"([\d.]+) s\)", summary)
    if not found:
        return float("nan"), float("nan")
    return float(found.group(1)) + float(found.group(2)), float(found.group(3))


def run_command(*args: str) -> tuple[float, float, str]:
    """Wall seconds, peak MB and printed summary of one fresh ``salient-poses ARGS`` run."""
    run = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True,
                         text=True, cwd=ROOT)
    if run.returncode:
        raise RuntimeError(run.stderr.strip() or "failed")
    first, _, summary = run.stdout.partition("\n")
    took, peak = first.split()
    return float(took), float(peak) / 1024, summary


def measure(path: Path, repeat: int) -> tuple[float, float, str, float, float]:
    """Median wall seconds, median peak MB, the plan, and the median table + selection
    seconds beside the engine's own estimate for two idle cores, of ``repeat`` fresh runs."""
    seconds, peaks, plan, kernels, estimate = [], [], "", [], 0.0
    for _ in range(repeat):
        took, peak, summary = run_command("analyze", str(path))
        seconds.append(took)
        peaks.append(peak)
        plan = plan_of(summary)
        took_kernels, estimate = kernel_seconds(summary)
        kernels.append(took_kernels)
    return (statistics.median(seconds), statistics.median(peaks), plan,
            statistics.median(kernels), estimate)


def save_plot(rows: list[tuple[int, float, float, str, float, float]], path: Path) -> None:
    """Time and peak memory against frames, with the targets of issue 20 marked."""
    from sp_core.ui.app import ensure_qapp, save_widget_png

    ensure_qapp()
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="k")
    widget = pg.GraphicsLayoutWidget()
    frames = [r[0] for r in rows]
    colour = (40, 90, 160)
    goal = pg.mkPen((200, 30, 30), width=1, style=pg.QtCore.Qt.PenStyle.DashLine)
    for column, (index, label, unit, targets) in enumerate((
            (1, "wall time of default analyze", "s", [(10_000, 10.0), (50_000, 60.0)]),
            (2, "peak memory of the process", "MB", [(10_000, 2048.0), (50_000, 4096.0)]))):
        plot = widget.addPlot(row=0, col=column)
        plot.setTitle(label, size="11pt")
        plot.setLabel("bottom", "frames")
        plot.setLabel("left", f"{label.split(' of')[0]} ({unit})")
        plot.showGrid(x=True, y=True, alpha=0.3)
        legend = plot.addLegend(offset=(10, 10))
        plot.plot(frames, [r[index] for r in rows], pen=pg.mkPen(colour, width=2), symbol="o",
                  symbolBrush=colour, name="measured (median)")
        plot.plot([t[0] for t in targets], [t[1] for t in targets], pen=None, symbol="t",
                  symbolBrush=(200, 30, 30), symbolSize=12, name="goal of issue 20")
        plot.addItem(pg.InfiniteLine(pos=10_000, angle=90, pen=goal))
        plot.addItem(pg.InfiniteLine(pos=50_000, angle=90, pen=goal))
        del legend
    widget.resize(1400, 520)
    save_widget_png(widget, str(path), 1400)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--frames", default="1000,2000,5000,10000,20000,50000")
    parser.add_argument("--plot", type=Path, default=None, help="write the plot here (.png)")
    args = parser.parse_args()
    lengths = [int(f) for f in args.frames.split(",")]
    rows = []
    print(f"{'frames':>7} {'wall s':>8} {'peak MB':>8} {'kernels s':>10} {'estimate s':>11}  plan",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n in lengths:
            seconds, peak, plan, kernels, estimate = measure(write_take(n, Path(tmp)),
                                                             args.repeat)
            rows.append((n, seconds, peak, plan, kernels, estimate))
            print(f"{n:>7,} {seconds:>8.2f} {peak:>8.0f} {kernels:>10.2f} {estimate:>11.2f}  "
                  f"{plan}", flush=True)
    print("\n| frames | wall time (median) | peak memory (median) | table + DP (median) | "
          "engine's estimate for two idle cores | plan |")
    print("|---:|---:|---:|---:|---:|---|")
    for n, seconds, peak, plan, kernels, estimate in rows:
        print(f"| {n:,} | {seconds:.1f} s | {peak:,.0f} MB | {kernels:.1f} s | {estimate:.1f} s "
              f"| {plan} |")
    if args.plot:
        save_plot(rows, args.plot)
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
