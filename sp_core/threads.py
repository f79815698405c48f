"""Thread pools of BLAS, OpenMP and numba, limited where several would fight over the cores.

Two situations need a limit:

- **Small dense algebra** (the world fit's block solves, 72-144 unknowns per block): BLAS
  threads cost more than they give. On a loaded two-core machine OpenBLAS's spinning threads
  made a batch of 144 x 144 solves about 8x slower with two threads than with one.
- **Batch workers**: N worker processes on N cores must each use ``cores // N`` threads, or
  every worker starts one thread per core and they busy-wait against each other.

Environment variables only act before a library loads, so workers get both: the variables
(set around the pool's start, :func:`thread_environment`) and a run-time limit in the worker
itself (:func:`pin_process`, via threadpoolctl and ``numba.set_num_threads``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

#: Environment variables that size thread pools when their library loads.
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS")


def passive_waiting() -> None:
    """Let idle OpenMP threads sleep instead of spin (unless the user chose otherwise).

    numba's parallel kernels run on OpenMP; by default its idle threads spin, and on shared or
    busy cores they steal the cycles the working threads need: the sample's selection took
    1.5-6.7 s instead of 0.4-0.6 s on a loaded two-core machine. libgomp reads the variable
    when it loads, so this runs on ``import sp_core``, before numba is imported.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def cores() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def thread_environment(threads: int) -> Iterator[int]:
    """Set every pool's thread variable to ``threads`` for processes started in the block."""
    threads = max(1, int(threads))
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update({name: str(threads) for name in THREAD_VARIABLES})
    try:
        yield threads
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def pin_process(threads: int) -> None:
    """Limit this process's BLAS/OpenMP pools and numba to ``threads`` from now on.

    numba's limit is per thread and applies to kernels launched from the calling thread;
    its pool size itself comes from ``NUMBA_NUM_THREADS`` (see :func:`thread_environment`).
    """
    threads = max(1, int(threads))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; the environment still applies
        pass
    else:
        threadpool_limits(threads)
    if "numba" in sys.modules:
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """One BLAS thread inside the block (small dense solves; see the module docstring).

    Without threadpoolctl (a host's Python where it was not installed) the block runs with
    whatever BLAS has: slower on busy cores, same results.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; hosts install it too
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
