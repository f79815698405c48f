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


def save_widget_png(widget, path: str, width: int) -> None:
    """Show a pyqtgraph widget at its final size (offscreen without a display), export its scene
    as a PNG ``width`` pixels wide, and dispose of it."""
    import pyqtgraph.exporters

    widget.show()  # lays the plot out at its final size before export
    ensure_qapp().processEvents()
    exporter = pyqtgraph.exporters.ImageExporter(widget.scene())
    exporter.parameters()["width"] = width
    exporter.export(path)
    widget.close()
    widget.deleteLater()
