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


def save_grab(widget, path: str) -> None:
    """Save what ``widget`` shows as a PNG at ``path``, atomically (see
    :mod:`sp_core.io.atomic`).

    Raises
    ------
    OutputError
        The folder is missing or the file cannot be written.
    OSError
        The picture could not be encoded (``QPixmap.save`` only returned False: the viewer
        said "Wrote" of a file it never wrote).
    """
    from PySide6 import QtCore

    from sp_core.io.atomic import atomic_open

    data = QtCore.QByteArray()
    buffer = QtCore.QBuffer(data)
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not widget.grab().save(buffer, "PNG"):
        raise OSError(f"cannot encode the picture of the window for {path}")
    buffer.close()
    with atomic_open(path, "wb") as handle:
        handle.write(data.data())
