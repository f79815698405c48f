"""Shared fixtures: the bundled sample clip and small hand-made BVH texts."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

import sp_core  # noqa: F401  (before numpy: it chooses OpenBLAS's kernels)

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import settings  # noqa: E402

# CI must pass or fail the same way on every run: property tests draw the same examples each
# time. HYPOTHESIS_PROFILE=explore draws new ones (run it when you change an engine module).
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    # a kernel numba cannot cache would recompile in every process: fail instead
    config.addinivalue_line("filterwarnings", "error::numba.core.errors.NumbaWarning")


ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "cmu_131_01.bvh"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def sample_clip():
    from sp_core.io.bvh import read_bvh

    return read_bvh(SAMPLE)


@pytest.fixture(autouse=True)
def _garbage_collection_released(request):
    """A test's panel tasks turn Python's automatic garbage collection off while they run
    (:class:`sp_core.ui.worker._UiThreadCollector`), and a timer of the Qt event loop turns it
    back on: after a test that ran no event loop since its last task ended, it is turned on
    here, so that the tests after it run with it as usual. After a test with widgets, their
    garbage is collected here, on the main thread: left to the collector, another thread
    (a Dask client's event loop, kept by the batch tests) could destroy them, which Qt
    allows on the main thread only."""
    yield
    worker = sys.modules.get("sp_core.ui.worker")
    if worker is not None and not any(task.running for task in worker._LIVE):
        worker._COLLECTOR.release()
    if "qtbot" in request.fixturenames:
        gc.collect()
