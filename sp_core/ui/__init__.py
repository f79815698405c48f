"""PySide6 user interface (the `ui` extra). Only this package imports Qt."""
