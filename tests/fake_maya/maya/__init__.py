"""A strict fake of the ``maya`` package for tests, written from Autodesk's documentation (see
tests/fake_maya/FACTS.md); not Autodesk code. ``maya._scene.STATE`` holds the scene."""
