"""Thread pools of BLAS, OpenMP and numba, limited where several would fight over the cores.

Two situations need a limit:

- **Small dense algebra** (the world fit's block solves, 72-144 unknowns per block): BLAS
  threads cost more than they give. On a loaded two-core machine OpenBLAS's spinning threads
  made a batch of 144 x 144 solves about 8x slower with two threads than with one. A whole
  reduction runs with one BLAS thread for a second reason: OpenBLAS splits some products
  differently with more threads, so the fit's results differed in the last digits between
  machines with different core counts, and the corrective keys' greedy choices follow such
  digits (the sample's reduction with 1 and 2 BLAS threads differed by up to 2e-10 mm).
- **Batch workers**: N worker processes on N cores must each use ``cores // N`` threads, or
  every worker starts one thread per core and they busy-wait against each other.

Environment variables only act before a library loads, so workers get both: the variables
(set around the pool's start, :func:`thread_environment`) and a run-time limit in the worker
itself (:func:`pin_process`, via threadpoolctl and ``numba.set_num_threads``).

A batch's workers share the cores again at its end: when fewer takes are left than workers,
the idle workers' cores go to the takes still running (:func:`follow_budget`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

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


#: OpenBLAS kernels by the vector instructions they need, widest first: names every
#: OpenBLAS since 0.3 knows (``OPENBLAS_CORETYPE``; an unknown name only prints a warning).
_BLAS_KERNELS = (("SkylakeX", {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}),
                 ("Haswell", {"avx2", "fma"}))


def blas_kernels(flags: set[str] | None = None) -> str | None:
    """Make OpenBLAS use the kernels of this processor's vector width (unless the user chose).

    OpenBLAS built for every x86 processor (numpy's wheels) picks its kernels by the CPU's
    model number and falls back to its oldest, SSE3 ("Prescott"), for a model newer than it
    knows: numpy 1.26's OpenBLAS 0.3.23 on a 2024 Xeon (Emerald Rapids, model 207) ran a
    matrix product at 31 instead of 152 GFLOP/s, and the sample's default ``reduce`` took
    about a tenth longer. ``OPENBLAS_CORETYPE`` chooses the kernels instead; it is read when
    the library loads, so this runs on ``import sp_core``, and does nothing in a process
    (a host's Python) that loaded numpy before.

    Parameters
    ----------
    flags : set of str, optional
        The processor's feature flags; read from ``/proc/cpuinfo`` (Linux) when not given.

    Returns
    -------
    str or None
        The kernels chosen, or None when the choice is left to OpenBLAS (the user set one,
        no flags could be read, or the processor has neither AVX-512 nor AVX2 with FMA).
    """
    if "OPENBLAS_CORETYPE" in os.environ:
        return None
    if flags is None:
        flags = _cpu_flags()
    for name, needs in _BLAS_KERNELS:
        if needs <= flags:
            os.environ["OPENBLAS_CORETYPE"] = name
            return name
    return None


def _numpy_blas_kernels() -> str | None:
    """The kernels numpy's OpenBLAS runs in this process (None: numpy not loaded yet, or its
    BLAS is not OpenBLAS)."""
    if "numpy" not in sys.modules:
        return None
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a dependency
        return None
    for pool in threadpool_info():
        if pool.get("internal_api") == "openblas" and "numpy" in pool.get("filepath", ""):
            return pool.get("architecture") or None
    return None


def _cpu_flags() -> set[str]:
    """The first processor's feature flags in ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def cores() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def thread_environment(threads: int, numba_pool: int | None = None) -> Iterator[int]:
    """Set every pool's thread variable to ``threads`` for processes started in the block.

    ``numba_pool`` sizes numba's pool instead (``NUMBA_NUM_THREADS``, fixed when numba loads)
    for processes that limit their numba threads at run time (:func:`pin_process`) and may be
    given more later (:func:`follow_budget`).
    """
    threads = max(1, int(threads))
    saved = {name: os.environ.get(name) for name in (*THREAD_VARIABLES, "OPENBLAS_CORETYPE")}
    os.environ.update({name: str(threads) for name in THREAD_VARIABLES})
    if numba_pool is not None:
        os.environ["NUMBA_NUM_THREADS"] = str(max(threads, int(numba_pool)))
    kernels = _numpy_blas_kernels()
    if kernels:  # the workers' results to the last digit as this process's (blas_kernels)
        os.environ["OPENBLAS_CORETYPE"] = kernels
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
        set_numba_threads(threads)


def set_numba_threads(threads: int) -> None:
    """Let numba kernels launched from this thread use ``threads`` threads (at most its pool)."""
    import numba

    numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))


def share_of_cores(running: int) -> int:
    """Threads per worker when ``running`` workers share this process's cores (at least 1)."""
    return max(1, cores() // max(1, running))


def follow_budget(budget: Any, interval: float = 0.1) -> None:
    """Make this process's numba kernels use ``budget.value`` threads whenever it changes.

    ``budget`` is a shared integer (``multiprocessing.Value``) that the batch raises when
    workers fall idle at its end, so the last takes get the free cores. numba's thread count
    belongs to the thread that launches the kernels, here the main thread, so a watcher
    thread polls the value and asks the main thread to adopt it (``_thread.interrupt_main``
    runs this process's ``SIGUSR1`` handler there at its next Python instruction, after the
    kernel in progress; no signal is sent, and nothing happens before the handler is set).
    A kernel's results do not depend on its thread count (see :mod:`sp_core._kernels`).
    BLAS stays as pinned: the engine's solves are too small to gain from threads.

    Parameters
    ----------
    budget : multiprocessing.Value of int
        Threads this worker's kernels may use from now on.
    interval : float
        Seconds between looks at the value.
    """
    import _thread

    if not hasattr(signal, "SIGUSR1"):  # pragma: no cover - Windows: the workers stay pinned
        return

    def adopt(signum: int, frame: object) -> None:
        # an exception here would surface in whatever the main thread was running (a take)
        with contextlib.suppress(Exception):
            set_numba_threads(budget.value)

    signal.signal(signal.SIGUSR1, adopt)

    def watch() -> None:
        seen = budget.value
        while True:
            time.sleep(interval)
            if budget.value != seen:
                seen = budget.value
                _thread.interrupt_main(signal.SIGUSR1)

    threading.Thread(target=watch, daemon=True, name="salient-poses-thread-budget").start()


#: Held by the thread inside a :func:`single_threaded_blas` block (re-entrant: a reduction's
#: fit nests one inside its own).
_ONE_BLAS_THREAD = threading.RLock()
#: Blocks entered and not left by the thread holding :data:`_ONE_BLAS_THREAD` (changed only
#: under it).
_blocks_held = 0


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """One BLAS thread inside the block (small dense solves, reproducible reductions; see
    the module docstring); also a decorator.

    BLAS's thread count belongs to the process, not to a thread, so the blocks of different
    threads take turns: a block that ended while another thread's was running used to
    restore the count of before in the middle of the other one (the panel's error estimate
    beside Apply, or beside the tolerance search's fits), whose results then depended on
    when it ended. OpenBLAS also ignored a restore made from a thread other than the one
    that set the limit, so the limit cannot be shared by counting its users either.

    Without threadpoolctl (a host's Python where it was not installed) the block runs with
    whatever BLAS has: slower on busy cores, results that may differ in the last digits.
    """
    global _blocks_held
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; hosts install it too
        yield
        return
    with _ONE_BLAS_THREAD:
        # a block inside this thread's own has the limit already: setting it again costs a
        # scan of the process's libraries (0.8 ms; five of a default reduce's ten blocks)
        limit = threadpool_limits(limits=1, user_api="blas") if not _blocks_held \
            else contextlib.nullcontext()
        with limit:
            _blocks_held += 1
            try:
                yield
            finally:
                _blocks_held -= 1


#: Held by a thread while its parallel kernel runs, where numba's threading layer is its own
#: work queue (:class:`TakingTurns`).
_KERNEL_TURNS = threading.Lock()
#: Whether numba's threading layer lets threads launch kernels at once (None: no kernel has
#: run, the layer is not chosen yet).
_layer_threadsafe: bool | None = None


class TakingTurns:
    """A parallel numba kernel that takes turns with the others where numba's threading layer
    cannot run two at once.

    numba runs ``parallel=True`` kernels on TBB, OpenMP or, where neither library loads, its
    own work queue, which terminates the process when two Python threads launch kernels at
    the same time ("Concurrent access has been detected"; numba's threading-layer docs). pip's
    numba has no OpenMP or TBB on some platforms (macOS without ``libomp``), and the panel
    and the hosts run analyses and estimates in worker threads beside each other: there a
    host application would be killed with the user's scene. So the kernels take turns under
    one lock until the first has run and numba names its layer, and go on taking turns if
    that is the work queue; on OpenMP and TBB they run at once, the lock no longer taken.

    Attributes of the kernel (``signatures``, ``py_func``) are the wrapped dispatcher's.
    """

    def __init__(self, kernel: Callable[..., Any]) -> None:
        self.kernel = kernel
        self.__doc__ = kernel.__doc__
        self.__name__ = getattr(kernel, "__name__", "kernel")

    def __call__(self, *args: Any) -> Any:
        global _layer_threadsafe
        if _layer_threadsafe:
            return self.kernel(*args)
        with _KERNEL_TURNS:
            result = self.kernel(*args)
            if _layer_threadsafe is None:
                _layer_threadsafe = _threadsafe_layer()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)


def _threadsafe_layer() -> bool | None:
    """Whether the threading layer numba chose lets threads launch kernels at once (None: it
    has chosen none yet)."""
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region launched yet
        return None
    return layer != "workqueue"
