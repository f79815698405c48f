"""Cost of one K change in the standalone window (the panel's budget is 16 ms per change).

Usage: ``.venv/bin/python benchmarks/bench_panel.py [--repeat 200]``

Measures, on the sample clip with the viewer attached (offscreen, software rendering): the
panel's immediate response to a K change (slider, spin box, label, graph marker and readout),
the panel's repaint, and the preview in the standalone host (keyframe ticks and ghost poses
updated, viewer repainted), for K drawn at random; medians and 95th percentiles.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6 import QtCore  # noqa: E402

from sp_core.standalone import StandaloneHost  # noqa: E402
from sp_core.ui.app import ensure_qapp  # noqa: E402
from sp_core.ui.main_window import MainWindow, wait_for_analysis  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    ensure_qapp()
    host = StandaloneHost.from_file(ROOT / "examples" / "cmu_131_01.bvh")
    settings = QtCore.QSettings(str(Path("/tmp") / "bench_panel.ini"),
                                QtCore.QSettings.Format.IniFormat)
    window = MainWindow(host, settings=settings)
    window.resize(1400, 900)
    window.show()
    window.panel.start_analysis()
    wait_for_analysis(window)
    panel, session = window.panel, window.session
    rng = np.random.default_rng(0)
    panel_times, paint_times, preview_times = [], [], []
    for k in rng.integers(2, 120, args.repeat):
        start = time.perf_counter()
        panel.request_k(int(k))
        panel._preview_timer.stop()  # the preview is measured on its own below
        widgets = time.perf_counter()
        panel.repaint()
        painted = time.perf_counter()
        session.set_k(int(k))
        window.viewer.repaint()
        done = time.perf_counter()
        panel_times.append(widgets - start)
        paint_times.append(painted - widgets)
        preview_times.append(done - painted)
    for name, times in (("panel widgets (slider, spin, graph marker)", panel_times),
                        ("panel repaint (offscreen, software)", paint_times),
                        ("preview: ticks + ghosts + viewer repaint", preview_times)):
        ms = np.array(times) * 1000
        print(f"{name:<44} median {statistics.median(ms):6.2f} ms, 95th percentile "
              f"{np.percentile(ms, 95):6.2f} ms")
    window.close()
    sys.stdout.flush()
    # PySide6 and pyqtgraph can crash while tearing down at interpreter exit; nothing is left
    # to save, so leave at once
    os._exit(0)


if __name__ == "__main__":
    main()
