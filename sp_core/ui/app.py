"""Getting a QApplication, also on machines without a display (CI, render farms, batch)."""

from __future__ import annotations

import os
import sys


def ensure_qapp():  # -> QtWidgets.QApplication
    """The running QApplication, or a new one (offscreen when no display is available)."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import QtWidgets

    app = QtWidgets.QApplication.instance()
    return app if app is not None else QtWidgets.QApplication([])
