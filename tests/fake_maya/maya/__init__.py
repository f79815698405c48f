"""A small fake of the ``maya`` package for tests (see cmds.py); not Autodesk code."""
