"""Salient Poses for Autodesk MotionBuilder (adapter over sp_core; `pyfbsdk` is imported lazily)."""
