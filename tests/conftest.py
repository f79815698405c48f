"""Shared fixtures: the bundled sample clip and small hand-made BVH texts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def sample_clip():
    from sp_core.io.bvh import read_bvh

    return read_bvh(SAMPLE)
