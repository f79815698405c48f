"""Call ``install()`` from a PythonStartup script (written by ``install.py --mobu``) to add the
Salient Poses menu when MotionBuilder starts."""

from __future__ import annotations


def install() -> None:
    from mobu_plugin import ui

    ui.install_menu()
