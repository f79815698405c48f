"""Before/after curves of a reduction saved as a PNG: original, reduced, keys marked."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sp_core.clip import Clip
from sp_core.reduction import Reduction
from sp_core.ui.app import ensure_qapp, save_widget_png


def busiest_channels(reduction: Reduction, clip: Clip, count: int = 4) -> list[int]:
    """The animated channels that move the body most over the range (good to look at): the
    channel's range times its scene units per channel unit (a rotation's reach)."""
    from sp_core.fitting import channel_distance_scale

    part = clip.sub_range(int(reduction.frames[0]), int(reduction.frames[-1]))
    motion = np.ptp(part.channels, axis=0) * channel_distance_scale(part)
    motion[~reduction.curves.animated] = -1
    return [int(c) for c in np.argsort(motion)[::-1][:count]]


def save_curve_plot(clip: Clip, reduction: Reduction, path: str | Path,
                    channels: list[int] | None = None, width: int = 1200) -> None:
    """Plot original and reduced curves of a few channels, one row each, keys marked.

    Parameters
    ----------
    clip : Clip
        The original clip.
    reduction : Reduction
    path : str or Path
        Output ``.png``.
    channels : list of int, optional
        Channel indices (default :func:`busiest_channels`).
    width : int
        Image width in pixels.
    """
    ensure_qapp()
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="k")
    channels = busiest_channels(reduction, clip) if channels is None else channels
    part = clip.sub_range(int(reduction.frames[0]), int(reduction.frames[-1])).unwrapped()
    layout = pg.GraphicsLayoutWidget()
    curves = reduction.curves
    fine = np.linspace(curves.frames[0], curves.frames[-1], 8 * len(reduction.frames))
    smooth = curves.evaluate(fine, channels)
    for row, c in enumerate(channels):
        plot = layout.addPlot(row=row, col=0)
        plot.showGrid(x=True, y=True, alpha=0.3)
        plot.setLabel("left", clip.channel_names[c].replace(".", " "))
        if row == 0:
            m = reduction.metrics
            plot.setTitle(f"{clip.name}: {len(curves.frames)} keys, {reduction.tangents} "
                          f"tangents, {reduction.space} fit — {m.said(1, 1)}", size="11pt")
            legend = plot.addLegend(offset=(-10, 5))
        original = plot.plot(part.frames, part.channels[:, c],
                             pen=pg.mkPen((150, 150, 150), width=4))
        reduced = plot.plot(fine, smooth[:, row], pen=pg.mkPen((200, 40, 40), width=1.5))
        keys = pg.ScatterPlotItem(curves.frames, curves.values[:, c], symbol="o", size=7,
                                  brush=pg.mkBrush(30, 80, 200), pen=pg.mkPen("w"))
        plot.addItem(keys)
        if row == 0:
            legend.addItem(original, "original (every frame)")
            legend.addItem(reduced, "reduced")
            legend.addItem(keys, "keys")
        if row == len(channels) - 1:
            plot.setLabel("bottom", "frame")
    layout.resize(width, 220 * len(channels) + 40)
    save_widget_png(layout, str(path), width)
