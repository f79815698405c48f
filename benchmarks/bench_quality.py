"""Quality at equal key budgets: Salient Poses (pose keys + corrective keys) against Blender's
Graph Editor Decimate and the published plug-in's method, and the default choice of K on each
clip.

Prints one line per clip and budget (see ``bench_quality_decimate.py`` for how each side is
run and counted), the default-K table, and with ``--plot`` saves mean and max error against the
key budget for the three methods (pyqtgraph, offscreen) — the figure of docs/quality.md.

Usage::

    .venv/bin/python benchmarks/bench_quality.py [CLIP.bvh ...] [--keep 0.05,0.1,0.2]
        [--plot docs/quality_vs_budget.png] [--json quality.json]

Blender's side needs ``bpy`` (``.venv/bin/pip install "bpy==4.5.*"``); without it only our side
runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_quality_decimate as versus  # noqa: E402


def default_choice(path: Path) -> dict:
    """The K the default options choose on ``path`` and what it gives."""
    from sp_core.jobs import Job, run_job
    from sp_core.options import Options

    started = time.perf_counter()
    result = run_job(Job(str(path), Options()))
    m = result.reduction.metrics
    return {"clip": path.name, "frames": result.clip["frames"], "k": result.keys,
            "pose_keys": m.pose_keys, "corrective_keys": m.corrective_keys, "keys": m.keys,
            "original_keys": m.original_keys, "mean_mm": m.mean_mm, "max_mm": m.max_mm,
            "seconds": time.perf_counter() - started}


def save_plot(table: list[dict], path: Path) -> None:
    """Mean and max error (log scale) against the key budget, one line per clip and method."""
    from sp_core.ui.app import ensure_qapp, save_widget_png

    ensure_qapp()
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="k")
    widget = pg.GraphicsLayoutWidget()
    clips = sorted({row["clip"] for row in table})
    styles = [pg.QtCore.Qt.PenStyle.SolidLine, pg.QtCore.Qt.PenStyle.DashLine,
              pg.QtCore.Qt.PenStyle.DotLine]
    for column, (measure, label) in enumerate((("mean_mm", "mean"), ("max_mm", "max"))):
        plot = widget.addPlot(row=0, col=column)
        plot.setTitle(f"{label} joint error at equal key budgets", size="11pt")
        plot.setLabel("bottom", "keys kept (% of the original)")
        plot.setLabel("left", f"{label} error (mm at 1.7 m)")
        plot.setLogMode(x=False, y=True)
        plot.showGrid(x=True, y=True, alpha=0.3)
        legend = plot.addLegend(offset=(-10, 10))
        for i, clip in enumerate(clips):
            rows = sorted((r for r in table if r["clip"] == clip), key=lambda r: r["keep"])
            for method, colour in (("ours", (40, 90, 160)), ("blender", (220, 120, 20)),
                                   ("plugin", (110, 170, 80))):
                sides = [r[method] for r in rows if r.get(method)]
                if not sides:
                    continue
                x = [100 * s["keys"] / s["original_keys"] for s in sides]
                y = [s[measure] for s in sides]
                name = {"ours": "Salient Poses", "blender": "Blender Decimate",
                        "plugin": "published plug-in"}[method] + f" ({clip})"
                plot.plot(x, y, pen=pg.mkPen(colour, width=2, style=styles[i % 3]),
                          symbol="o", symbolBrush=colour, name=name)
        del legend
    widget.resize(1400, 560)
    save_widget_png(widget, str(path), 1400)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clips", nargs="*", type=Path, default=versus.CLIPS)
    parser.add_argument("--keep", default=",".join(map(str, versus.KEEP)))
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-default", action="store_true",
                        help="skip the default-K table (its tolerance search takes a while)")
    parser.add_argument("--cost", help="selection cost instead of the default")
    parser.add_argument("--compose", choices=("max", "sum"))
    parser.add_argument("--max-span", type=int)
    args = parser.parse_args(argv)
    keeps = [float(x) for x in args.keep.split(",")]
    selection = {name: value for name, value in (("cost", args.cost), ("compose", args.compose),
                                                 ("max_span", args.max_span))
                 if value is not None}
    try:
        import importlib.util

        have_blender = importlib.util.find_spec("bpy") is not None
    except ValueError:
        have_blender = False
    if have_blender:
        table = versus.compare(list(args.clips), keeps, selection)
    else:
        print("bpy is not installed: Salient Poses only")
        table = [{"clip": p.name, "keep": r["keep"], "ours": r}
                 for p in args.clips for r in versus.salient_poses(p, keeps,
                                                                   selection=selection)]
    defaults = []
    if not args.no_default:
        print("\nDefault choice of K (tolerance mean 2 mm, max 20 mm):")
        for path in args.clips:
            row = default_choice(path)
            defaults.append(row)
            print(f"{row['clip']:24s} K = {row['k']:4d} ({row['pose_keys']} pose + "
                  f"{row['corrective_keys']} corrective keys = "
                  f"{100 * row['keys'] / row['original_keys']:.1f} %): mean "
                  f"{row['mean_mm']:.2f} mm, max {row['max_mm']:.1f} mm, {row['seconds']:.0f} s",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"budgets": table, "defaults": defaults}, indent=1)
                             + "\n")
    if args.plot:
        save_plot(table, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
