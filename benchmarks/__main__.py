"""Every performance target of issue 20 in one table, each beside a reference run.

Usage: ``.venv/bin/python -m benchmarks [--repeat 3] [--quick]``

The machine is shared, so absolute seconds wander; every row has a reference measured in the
same run (the slow exact path, or the cost floor such as starting Python), and the ratio is
what to compare between runs. Times are medians of ``--repeat`` runs unless a row says
otherwise. ``--quick`` skips the batch rows and the long takes (10,000 and 50,000 frames;
``bench_long_takes.py`` measures every length from 1,000 frames and draws the plot).

The detailed per-area scripts remain: ``bench_reduction.py`` (quality of every tangent mode),
``bench_selection.py``, ``bench_batch.py`` and the others in this folder.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# sp_core before numpy: it chooses OpenBLAS's kernels, which numpy's import loads
# isort: off
from sp_core import reduction  # noqa: E402
from sp_core.fitting import TANGENT_MODES, fit_channels, refine_world  # noqa: E402
from sp_core.io.bvh import read_bvh  # noqa: E402
from sp_core.jobs import Job, run_job  # noqa: E402
from sp_core.options import Options, corrective_plan  # noqa: E402
from sp_core.reduction import constant_channels  # noqa: E402
import numpy as np  # noqa: E402
# isort: on

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"
ROWS: list[tuple[str, str, str, str, str]] = []


def median_time(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def row(target: str, goal: str, measured: str, reference: str, ratio: str) -> None:
    ROWS.append((target, goal, measured, reference, ratio))
    print(f"  {target}: {measured} (goal {goal}; reference {reference}; {ratio})", flush=True)


def long_clip(n_frames: int):
    """The sample continued with itself played backwards (continuous poses) to n frames."""
    clip = read_bvh(SAMPLE)
    parts, total = [], 0
    while total < n_frames:
        parts.append(clip.channels if len(parts) % 2 == 0 else clip.channels[::-1])
        total += len(parts[-1])
    return clip.with_channels(np.concatenate(parts)[:n_frames])


def dense_reduce() -> Callable[[], None]:
    """Swap reduce()'s world fit for the dense-Jacobian reference; returns the undo."""
    original = reduction.refine_world
    reduction.refine_world = functools.partial(refine_world, jacobian="dense")

    def undo() -> None:
        reduction.refine_world = original
    return undo


def bench_reduce(repeat: int) -> None:
    # the suggested K: the work the target was set on (one analysis, one world fit)
    job = Job(str(SAMPLE), Options().replace(tolerance=None), "reduce")
    run_job(job)  # warm: imports, kernels from the cache
    fast = median_time(lambda: run_job(job), repeat)
    result = run_job(job)
    undo = dense_reduce()
    try:
        slow = median_time(lambda: run_job(job), 1)
        reference = run_job(job)
    finally:
        undo()
    m, r = result.reduction.metrics, reference.reduction.metrics
    row(f"`reduce --suggested` on the sample (994 frames, K = {result.keys}), warm", "≤ 1.0 s",
        f"{fast:.2f} s", f"dense-Jacobian world fit {slow:.2f} s", f"{slow / fast:.1f}× faster")
    row("… its errors (mean / max mm)", "no worse than the dense fit",
        f"{m.mean_mm:.2f} / {m.max_mm:.1f}", f"{r.mean_mm:.2f} / {r.max_mm:.1f}",
        f"{m.mean_mm / r.mean_mm:.3f} / {m.max_mm / r.max_mm:.3f}")
    # today's default: the smallest K within the default tolerance, plus corrective keys
    tolerance_row(Options(), "default `reduce` (K by the 2 mm / 20 mm tolerance, corrective "
                  "keys), warm", "≤ 1.0 s (set for one fit)", repeat)
    # a tolerance whose max decides K: the corrective stages miss it at K after K
    tolerance_row(Options().replace(tolerance=(3.0, 20.0)), "`reduce --tolerance 3,20` (the "
                  "max decides K), warm", "—", repeat)


def tolerance_row(options: Options, target: str, goal: str, repeat: int) -> None:
    """A row for the sample's `reduce` with ``options`` (K by a tolerance), against its floor:
    the reduction it writes, at the K it found, done once."""
    job = Job(str(SAMPLE), options, "reduce")
    seconds = median_time(lambda: run_job(job), repeat)
    d = run_job(job)
    m = d.reduction.metrics
    budget, stop = corrective_plan(options)
    clip = read_bvh(SAMPLE)
    frames = d.reduction.curves.frames
    alone = median_time(lambda: reduction.reduce(clip, frames, corrective_budget=budget,
                                                 corrective_stop_mm=stop), repeat)
    row(target, goal, f"{seconds:.2f} s: K = {d.keys}, {m.corrective_keys} corrective keys, "
        f"{m.mean_mm:.2f} / {m.max_mm:.1f} mm",
        f"the reduction at K = {d.keys} alone (world fit and corrective keys): {alone:.2f} s",
        f"{seconds / alone:.1f}× it")


def bench_world_fit(n_frames: int, repeat: int) -> None:
    clip = long_clip(n_frames).unwrapped()
    free = ~constant_channels(clip.channels)
    rows = np.linspace(0, n_frames - 1, round(0.05 * n_frames)).round().astype(np.int64)
    per_iteration = {}
    key_values = Options().fit.key_values  # the default fit, key-value rounds included
    for mode in TANGENT_MODES:
        def world(mode: str = mode, jacobian: str = "tree", iterations: int = 12,
                  key_values: str = key_values) -> object:
            fit = fit_channels(clip.channels, rows, mode, key_values=key_values)
            fit.slopes[:, :, ~free] = 0.0
            return refine_world(clip, rows, fit, mode, iterations=iterations, free=free,
                                jacobian=jacobian, key_values=key_values)
        seconds = median_time(world, repeat)
        if mode in ("unified", "broken"):
            # one slope iteration of each path (no key-value rounds): the dense one takes
            # minutes for 12
            one = functools.partial(world, iterations=1, key_values="captured")
            tree_one = median_time(one, repeat)
            dense_one = median_time(functools.partial(one, jacobian="dense"), 1)
            per_iteration[mode] = (tree_one, dense_one)
            reference = f"1 iteration: dense {dense_one:.2f} s, tree {tree_one:.2f} s"
            ratio = f"{dense_one / tree_one:.1f}× per iteration"
        else:
            reference, ratio = "—", "—"
        row(f"world fit, {n_frames:,} frames, {len(rows)} keys, {mode} (channel start "
            f"included, {key_values} key values)", "≤ 5 s", f"{seconds:.2f} s", reference, ratio)


def largest_gap(work: Callable[[], object]) -> tuple[float, float]:
    """(largest gap between 5 ms timer ticks of this thread, seconds of work) while ``work``
    runs in another thread: how long an event loop would stall."""
    import threading

    done = threading.Event()
    took = [0.0]

    def worker() -> None:
        started = time.perf_counter()
        work()
        took[0] = time.perf_counter() - started
        done.set()

    thread = threading.Thread(target=worker)
    last, gap = time.perf_counter(), 0.0
    thread.start()
    while not done.is_set():
        time.sleep(0.005)
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    thread.join()
    return gap, took[0]


def bench_gil() -> None:
    from sp_core.selection import SelectionSpace

    clip = long_clip(5000)
    clip.positions  # noqa: B018 - forward kinematics outside the measured stall
    SelectionSpace.from_clip(clip.sub_range(0, 199))  # kernels loaded
    stall, took = largest_gap(lambda: SelectionSpace.from_clip(clip))
    idle, _ = largest_gap(lambda: time.sleep(min(took, 3.0)))
    row("largest stall of a 5 ms timer during a 5,000-frame analysis in a thread",
        "≤ 50 ms", f"{1000 * stall:.0f} ms (analysis {took:.1f} s)",
        f"timer beside a sleeping thread: {1000 * idle:.0f} ms", "—")
    # what the panel's preview and Apply run in their worker: the world fit (scipy, LAPACK and
    # Python between the kernels) and the corrective stage, as the tolerance's checks run them
    frames = np.linspace(0, 4999, 250).round().astype(int)
    stall, took = largest_gap(lambda: reduction.reduce(clip, frames, corrective_budget="5%",
                                                       corrective_stop_mm=20.0))
    row("largest stall of a 5 ms timer during a 5,000-frame world fit + corrective keys "
        "(250 keys) in a thread", "≤ 50 ms", f"{1000 * stall:.0f} ms (fits {took:.1f} s)",
        f"timer beside a sleeping thread: {1000 * idle:.0f} ms", "—")


def cancel_latency(work: Callable[[object], object], after: float) -> float | None:
    """Seconds from ``token.cancel()``, called ``after`` seconds into ``work(token)`` running
    in another thread, to the end of that thread; None if the work ended before."""
    import threading

    from sp_core.session import AnalysisCancelled, CancelToken

    token = CancelToken()

    def worker() -> None:
        try:
            work(token)
        except AnalysisCancelled:
            pass

    thread = threading.Thread(target=worker)
    thread.start()
    time.sleep(after)
    if not thread.is_alive():
        thread.join()
        return None
    cancelled = time.perf_counter()
    token.cancel()
    thread.join()
    return time.perf_counter() - cancelled


def bench_cancel(repeat: int) -> None:
    from sp_core.reduction import reduce
    from sp_core.session import Session
    from sp_core.standalone import StandaloneHost

    clip = long_clip(5000)
    clip.positions  # noqa: B018 - forward kinematics outside the measured work
    frames = np.linspace(0, 4999, 250).round().astype(int)

    def analyse(token: object) -> None:
        Session(StandaloneHost(clip)).analyze(cancel=token, choose=False)

    def fit(token: object) -> None:
        reduce(clip, frames, corrective_budget="5%", corrective_stop_mm=20.0,
               progress=lambda fraction, message: token.check())

    # (the analysis takes 0.55-0.9 s on two idle cores: cancelled in its table or its DP)
    for label, work, after in (("default analysis", analyse, 0.3), ("world fit + corrective keys, "
                                                                   "250 keys", fit, 2.0)):
        latencies = [cancel_latency(work, after) for _ in range(repeat)]
        waits = [w for w in latencies if w is not None]
        early = len(latencies) - len(waits)
        row(f"Cancel during a 5,000-frame {label} (cancelled {after:g} s in)", "≤ 0.5 s",
            (f"{statistics.median(waits):.2f} s (worst {max(waits):.2f} s)" if waits else "—")
            + (f"; {early} of {len(latencies)} ended before the cancel" if early else ""),
            "—", "—")


def bench_selection_peak(repeat: int) -> None:
    import selection_peak

    from sp_core.poses import pose_matrix

    result = selection_peak.measure(pose_matrix(long_clip(1102)), repeat)
    row("selection (line-max table + DP, every K ≤ N/2), 1,102 frames", "≤ 0.015× the numpy "
        "reference; ≥ 40 % of peak", f"{result['engine_s']:.3f} s; {result['rate'] / 1e9:.1f} "
        f"GFLOP/s = {100 * result['rate'] / result['peak']:.0f} % of the measured peak "
        f"({result['peak'] / 1e9:.0f} GFLOP/s, numpy matmul)",
        f"numpy reference {result['reference_s']:.1f} s (benchmarks/selection_peak.py)",
        f"{result['engine_s'] / result['reference_s']:.3f}×")


def fresh(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - started


def bench_fresh_analyze(repeat: int) -> None:
    command = [str(Path(sys.executable).with_name("salient-poses")), "analyze", str(SAMPLE)]

    def analyze() -> None:
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
    seconds = median_time(analyze, repeat)
    floor = median_time(lambda: fresh("import numpy, scipy.spatial.transform, numba"), repeat)
    row("fresh-process `salient-poses analyze` on the sample", "≤ 1.0 s", f"{seconds:.2f} s",
        f"python + numpy, scipy.spatial, numba imports {floor:.2f} s",
        f"{seconds / floor:.1f}× the import floor")


#: A panel on the take of argv[1] with its settings in argv[2], offscreen.
PANEL = """
import os, sys, time
os.environ['QT_QPA_PLATFORM'] = 'offscreen'
from PySide6 import QtCore
from sp_core.options import Options
from sp_core.session import Session
from sp_core.standalone import StandaloneHost
from sp_core.ui.app import ensure_qapp
from sp_core.ui.panel import SalientPosesPanel
app = ensure_qapp()
session = Session(StandaloneHost.from_file(sys.argv[1]), Options())
panel = SalientPosesPanel(session, settings=QtCore.QSettings(sys.argv[2],
                                                             QtCore.QSettings.Format.IniFormat))
"""

PANEL_WAIT = PANEL + """
panel.show()
for run in range(int(sys.argv[3]) + 1):  # the first run loads the kernels
    panel.graph.set_space(None)
    started = time.perf_counter()
    graph = None
    panel.start_analysis()
    while panel.analysing:
        app.processEvents()
        if graph is None and panel.graph.space is not None:
            graph = time.perf_counter() - started
        time.sleep(0.001)
    done = time.perf_counter() - started
    if run:
        print(graph, done, flush=True)
panel.shutdown()
"""


def bench_panel_wait(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([sys.executable, "-c", PANEL_WAIT, str(SAMPLE),
                              str(Path(tmp) / "panel.ini"), str(repeat)], check=True,
                             capture_output=True, text=True, cwd=ROOT)
    graph, done = np.median([[float(x) for x in line.split()]
                             for line in run.stdout.split("\n") if line.strip()], axis=0)
    row("panel Analyze on the sample, default options (the tolerance chooses K)",
        "—", f"graph after {graph:.2f} s", f"K chosen (search done) after {done:.2f} s",
        f"{graph / done:.2f} of the wait")


PANEL_STALL = PANEL + """
panel.resize(480, 1000)
panel.show()
ticks = []
timer = QtCore.QTimer()
timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
timer.start(5)
def gap(seconds):
    # the largest wait between ticks over an Analyze (seconds None) or an idle while
    ticks.clear()
    started = time.perf_counter()
    if seconds is None:
        panel.start_analysis()
    while (panel.analysing or not panel.settled) if seconds is None \\
            else time.perf_counter() - started < seconds:
        app.processEvents()
        time.sleep(0.001)
    app.processEvents()
    took = time.perf_counter() - started
    return max(b - a for a, b in zip(ticks, ticks[1:])), took
def tab_gap():
    # the largest wait between ticks from showing the Propagate tab to its falloff (the pose
    # graph of the motion just analysed built)
    ticks.clear()
    started = time.perf_counter()
    panel.tabs.setCurrentIndex(2)  # (the Propagate edit page, in its scroll area)
    while panel.wand._building is not None:
        app.processEvents()
        time.sleep(0.001)
    app.processEvents()
    took = time.perf_counter() - started
    assert panel.wand.weights is not None, panel.wand.note.text()
    panel.tabs.setCurrentIndex(0)
    return max(b - a for a, b in zip(ticks, ticks[1:])), took
for run in range(int(sys.argv[3]) + 1):  # the first run loads the kernels
    stall, took = gap(None)
    idle, _ = gap(min(took, 3.0))
    tab_stall, tab_took = tab_gap()
    if run:
        print(stall, took, idle, tab_stall, tab_took, flush=True)
panel.shutdown()
"""


def bench_panel_stall(repeat: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_long_takes import write_take
    with tempfile.TemporaryDirectory() as tmp:
        take = str(write_take(5000, Path(tmp)))
        run = subprocess.run([sys.executable, "-c", PANEL_STALL, take,
                              str(Path(tmp) / "panel.ini"), str(repeat)], check=True,
                             capture_output=True, text=True, cwd=ROOT)
    stall, took, idle, tab_stall, tab_took = np.median(
        [[float(x) for x in line.split()] for line in run.stdout.split("\n") if line.strip()],
        axis=0)
    row("largest stall of the panel's event loop (5 ms timer) over Analyze of a 5,000-frame "
        "take, click to settled (the panel's own work on the UI thread included)", "≤ 50 ms",
        f"{1000 * stall:.0f} ms (Analyze {took:.1f} s)",
        f"the same timer idle: {1000 * idle:.0f} ms", f"{stall / idle:.1f}× idle")
    row("… then the Propagate tab shown, until its falloff shows (the take's pose graph "
        "built)", "≤ 50 ms", f"{1000 * tab_stall:.0f} ms (falloff after {tab_took:.2f} s)",
        f"the same timer idle: {1000 * idle:.0f} ms", f"{tab_stall / idle:.1f}× idle")


def bench_long_analyze(repeat: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_long_takes import measure, write_take

    with tempfile.TemporaryDirectory() as tmp:
        for n, goal in ((10_000, "≤ 10 s, ≤ 2 GB"), (50_000, "≤ 60 s, ≤ 4 GB")):
            target = f"default `salient-poses analyze`, {n:,} frames (fresh process)"
            try:
                seconds, peak, plan, kernels, estimate = measure(write_take(n, Path(tmp)),
                                                                 repeat)
            except RuntimeError as exc:
                row(target, goal, f"failed: {exc}", "—", "—")
                continue
            row(target, goal, f"{seconds:.1f} s, {peak:,.0f} MB peak ({plan})",
                f"table + DP {kernels:.1f} s; the plan's estimate for two idle cores "
                f"{estimate:.1f} s", f"{kernels / estimate:.1f}× the estimate")


def bench_long_reduce() -> None:
    """The default reduce of a 5,000-frame take in a fresh process (once: tens of seconds),
    beside the reduction it writes done once at the K it found."""
    import re

    from bench_long_takes import run_command, write_take

    with tempfile.TemporaryDirectory() as tmp:
        take = str(write_take(5000, Path(tmp)))
        seconds, peak, summary = run_command("reduce", take, "--json", str(Path(tmp) / "r.json"))
        found = re.search(r"Keys .*: K = (\d+)", summary)
        k = int(found.group(1)) if found else 0
        errors = re.search(r"Error +mean ([\d.]+) mm, max ([\d.]+) mm", summary)
        # the fits of the reduction written (its Time line): the floor of any search
        fits = re.search(r"channel fit ([\d.]+) s, world refinement ([\d.]+) s, corrective "
                         r"keys ([\d.]+) s", summary)
    floor = sum(float(x) for x in fits.groups()) if fits else float("nan")
    shown = f"{errors.group(1)} / {errors.group(2)} mm" if errors else "?"
    row("default `salient-poses reduce`, 5,000 frames (fresh process)", "—",
        f"{seconds:.1f} s, {peak:,.0f} MB peak: K = {k}, {shown}",
        f"the reduction at K = {k} alone (its fits): {floor:.1f} s",
        f"{seconds / floor:.1f}× it")


def bench_batch(repeat: int) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_batch import machine_scaling, make_takes

    # this checkout's code, as every other row (the venv's script may import another tree)
    command = [sys.executable, "-m", "sp_core.cli", "batch"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryDirectory() as tmp:
        takes = make_takes(Path(tmp))
        # one worker on every core (what a user would otherwise run: its takes' parallel
        # kernels use the other cores too), and one worker on one core (the scaling of
        # workers alone, N workers on N cores against one on one)
        one_core = [{min(os.sched_getaffinity(0))}] if hasattr(os, "sched_getaffinity") else []
        for label, extra in (("default options", []), ("`--suggested`", ["--suggested"])):
            seconds = {}
            for workers, cores in ((1, None), (2, None), *((1, c) for c in one_core)):
                def batch(workers: int = workers, extra: list[str] = extra,
                          cores: set[int] | None = cores) -> None:
                    out = Path(tempfile.mkdtemp(dir=tmp))
                    subprocess.run([*command, *map(str, takes), "--out", str(out / "o"),
                                    *extra, "--workers", str(workers)], check=True,
                                   capture_output=True, env=env,
                                   preexec_fn=None if cores is None
                                   else lambda: os.sched_setaffinity(0, cores))
                seconds[workers, cores is not None] = median_time(batch, repeat)
            pinned = (f"; on one core: {seconds[1, True]:.2f} s" if one_core else "")
            scaled = (f" ({seconds[1, True] / seconds[2, False]:.2f}× one worker on one core)"
                      if one_core else "")
            alone, pair = machine_scaling(repeat)  # (the load of this row's own minutes)
            row(f"`batch --workers 2`, {len(takes)} takes of 400 frames, {label}",
                "≥ 1.8× one worker", f"{seconds[2, False]:.2f} s",
                f"--workers 1: {seconds[1, False]:.2f} s{pinned}; the machine: two copies "
                f"of a fixed Python loop {2 * alone / pair:.2f}× one",
                f"{seconds[1, False] / seconds[2, False]:.2f}× the throughput{scaled}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="skip the batch rows and the long takes")
    args = parser.parse_args()
    print("measuring …", flush=True)
    bench_reduce(args.repeat)
    bench_world_fit(5000, max(1, args.repeat // 2))
    bench_fresh_analyze(args.repeat)
    bench_selection_peak(args.repeat)
    if not args.quick:
        bench_gil()
        bench_panel_wait(args.repeat)
        bench_panel_stall(args.repeat)
        bench_cancel(args.repeat)
        bench_long_analyze(args.repeat)
        bench_long_reduce()
        bench_batch(args.repeat)
    print("\n| target | goal | measured | reference run | ratio |")
    print("|---|---|---:|---|---|")
    for target, goal, measured, reference, ratio in ROWS:
        print(f"| {target} | {goal} | {measured} | {reference} | {ratio} |")


if __name__ == "__main__":
    main()
