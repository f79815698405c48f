"""The error-against-K graph saved as a PNG (command line and docs); pyqtgraph, offscreen."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sp_core.selection import SelectionSpace
from sp_core.ui.app import ensure_qapp, save_widget_png


def save_error_plot(space: SelectionSpace, path: str | Path, log: bool = True,
                    title: str = "", width: int = 1200, unit: str = "pose units",
                    suggestions: dict | None = None) -> None:
    """Plot error(K) for the whole selection space with the suggestions marked, save as PNG.

    Parameters
    ----------
    space : SelectionSpace
    path : str or Path
        Output ``.png``.
    log : bool
        Logarithmic error axis (cliffs are easier to see).
    title : str
    unit : str
        What the errors are in (:func:`sp_core.poses.error_unit`).
    width : int
        Image width in pixels.
    suggestions : dict, optional
        The run's suggested K and cliffs (default the space's at the default accuracy and
        significance; see :func:`sp_core.jobs.suggested_record`).
    """
    ensure_qapp()
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="k")
    widget = pg.PlotWidget()
    plot = widget.getPlotItem()
    plot.setTitle(title or f"{space.cost.name}, compose={space.compose}: error against K",
                  size="12pt")
    plot.setContentsMargins(10, 10, 20, 10)
    plot.setLabel("bottom", "keyframes K")
    plot.setLabel("left", f"error ({unit})")
    plot.showGrid(x=True, y=True, alpha=0.3)
    keys, errors = space.key_counts, space.errors
    ok = np.isfinite(errors) & ((errors > 0) if log else True)
    plot.setLogMode(x=False, y=log)
    plot.plot(keys[ok], errors[ok], pen=pg.mkPen((40, 90, 160), width=2))
    legend = plot.addLegend(offset=(-10, 10))
    # (the run's, with its accuracy and significance: the default ones put the star
    # elsewhere than the summary said)
    suggestions = suggestions or space.suggestions()
    cliffs = [k for k in suggestions["cliffs"] if ok[k - space.min_keys]]
    if cliffs:
        ys = [space.error(k) for k in cliffs]
        item = pg.ScatterPlotItem(cliffs, np.log10(ys) if log else ys, symbol="o", size=10,
                                  brush=pg.mkBrush(230, 140, 20), pen=pg.mkPen("k"))
        plot.addItem(item)
        legend.addItem(item, "cliffs: " + ", ".join(map(str, cliffs)))
    k = suggestions["threshold"]
    if ok[k - space.min_keys]:
        y = space.error(k)
        item = pg.ScatterPlotItem([k], [np.log10(y) if log else y], symbol="star", size=18,
                                  brush=pg.mkBrush(200, 30, 30), pen=pg.mkPen("k"))
        plot.addItem(item)
        legend.addItem(item, f"suggested: K = {k}")
    if not ok.any():  # (a still clip: empty axes said nothing)
        from sp_core.ui.graph import NOTHING_TO_DRAW

        plot.setLogMode(x=False, y=False)  # (log lines between 1 and 10 for no cost)
        plot.setYRange(0, 1)
        plot.setXRange(space.min_keys, max(space.max_keys, space.min_keys + 1))
        note = pg.TextItem(NOTHING_TO_DRAW, color="k", anchor=(0.5, 0.5))
        note.setPos((space.min_keys + max(space.max_keys, space.min_keys + 1)) / 2, 0.5)
        plot.addItem(note)
        plot.getAxis("left").setStyle(showValues=False)
    widget.resize(width, int(width * 0.55))
    save_widget_png(widget, str(path), width)
