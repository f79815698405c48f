"""Render the panel pictures of docs/ offscreen from the sample clip.

Usage: ``.venv/bin/python tools/panel_screenshots.py [--out docs]``

Writes ``panel_keyframes.png`` (the panel docked 350 px wide after Analyze, at the default K,
the smallest within the default tolerance, with its reconstruction error), ``panel_setup.png``
(its Setup tab) and ``view.png`` (``salient-poses view --keys 20 --screenshot``). Options are
the defaults: the user's saved panel settings are neither read nor changed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6 import QtCore  # noqa: E402

from sp_core.session import Session  # noqa: E402
from sp_core.standalone import StandaloneHost  # noqa: E402
from sp_core.ui.app import ensure_qapp, save_grab  # noqa: E402
from sp_core.ui.main_window import run_viewer  # noqa: E402
from sp_core.ui.panel import SalientPosesPanel  # noqa: E402

SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"
#: A narrow dock, as Maya users keep it.
WIDTH, HEIGHT = 350, 900


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    app = ensure_qapp()
    with tempfile.TemporaryDirectory() as scratch:
        settings = QtCore.QSettings(str(Path(scratch) / "panel.ini"),
                                    QtCore.QSettings.Format.IniFormat)
        panel = SalientPosesPanel(Session(StandaloneHost.from_file(SAMPLE, first_frame=1001)),
                                  settings=settings)
        panel.resize(WIDTH, HEIGHT)
        panel.show()
        panel.start_analysis()
        deadline = time.monotonic() + 300
        while not panel.settled and time.monotonic() < deadline:
            app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
            time.sleep(0.005)
        app.processEvents()
        save_grab(panel, str(out / "panel_keyframes.png"))
        panel.tabs.setCurrentIndex(1)
        app.processEvents()
        save_grab(panel, str(out / "panel_setup.png"))
        panel.close()
    run_viewer(str(SAMPLE), first_frame=1001, keys=20, screenshot=str(out / "view.png"))
    print(f"wrote {out / 'panel_keyframes.png'}, {out / 'panel_setup.png'}, {out / 'view.png'}")
    sys.stdout.flush()
    # PySide6 and pyqtgraph can crash while tearing down at interpreter exit; nothing is left
    # to save, so leave at once
    os._exit(0)


if __name__ == "__main__":
    main()
