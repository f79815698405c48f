"""Fake ``maya.api`` (Python API 2.0 subset)."""
