"""Salient Poses for Autodesk Maya (adapter over sp_core; `maya` is imported lazily)."""
