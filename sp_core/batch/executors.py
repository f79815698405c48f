"""Where batch jobs run: a local process pool (default) or a Dask cluster.

Both run :func:`sp_core.batch.run.reduce_one` on each job and call ``on_done(job, row)`` in this
process as jobs finish, in any order; the results are the same either way. Every worker uses
``cores // workers`` threads for numba and BLAS, so workers do not fight over the cores; in the
process pool, once fewer takes are left than workers, the takes still running get the idle
workers' cores for their numba kernels (:func:`sp_core.threads.follow_budget`), so the end of
a batch does not leave cores idle while the last takes finish.

The pool forks its workers when that is safe (:func:`pool_context`): a forked worker starts
with this process's imports and ends without tearing them down, which matters when a take
costs about as much as starting a Python with numpy, scipy and numba (the suggested K).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from sp_core.batch.take import reduce_one
from sp_core.jobs import Job
from sp_core.threads import (
    cores,
    follow_budget,
    pin_process,
    share_of_cores,
    single_threaded_blas,
    thread_environment,
)

OnDone = Callable[[Job, dict[str, object]], None]


@contextlib.contextmanager
def worker_threads(workers: int, numba_pool: int | None = None) -> Iterator[int]:
    """Environment for worker processes started inside the block: ``cores // workers``
    threads each (numba and BLAS read it when they load, which is why it is set before the
    workers start rather than inside them); ``numba_pool`` sizes numba's pool instead, for
    workers that pin their numba threads at run time and may be given more."""
    with thread_environment(share_of_cores(workers), numba_pool) as threads:
        yield threads


def start_worker(parent: int, threads: int, budget: Any = None) -> None:
    """Worker initialiser: pin the thread pools (:func:`sp_core.threads.pin_process`), end
    with the parent (:func:`die_with_parent`) and, given a shared ``budget``, let numba use
    as many threads as it says (:func:`sp_core.threads.follow_budget`)."""
    pin_process(threads)
    die_with_parent(parent)
    if budget is not None:
        follow_budget(budget)


def die_with_parent(parent: int) -> None:
    """End this worker when the batch process ends, however it ends.

    Linux delivers SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``); elsewhere, and
    as a second guard, a thread notices the worker being re-parented. Ctrl-C is left to the
    parent, which stops the workers itself after writing the summary.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True, name="salient-poses-parent-watch").start()


def pool_context() -> multiprocessing.context.BaseContext:
    """How the pool starts its workers: ``fork`` when it is safe here, else ``spawn``.

    A spawned worker imports numpy, scipy, numba and the engine again (0.4 s on the two-core
    machine, after the parent's own 0.4 s) and tears them down at the end (0.15 s); at the
    suggested K a 400-frame take costs 0.25 s, so two spawned workers gave 1.29x one and two
    forked ones 1.56x. Forking is safe only while this process runs no other thread: numba's
    parallel kernels start GNU OpenMP threads that a forked child does not have (its next
    parallel kernel would hang), and a lock held by another Python thread stays locked in the
    child. So the batch command, which forks before running any kernel, forks; a process that
    has analysed something already (a test run, an embedding application) spawns. Not Linux:
    spawn.
    """
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    kernels_ran = parallel is not None and getattr(parallel, "_is_initialized", True)
    if sys.platform.startswith("linux") and threading.active_count() == 1 and not kernels_ran:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def run_local(jobs: list[Job], workers: int, on_done: OnDone) -> None:
    """Run ``jobs`` in this process (one worker) or a pool of ``workers`` processes."""
    if workers == 1 or len(jobs) <= 1:  # nothing to share (a resumed batch may have no job)
        # one BLAS thread for the whole take, as in a pool's workers (a reduction and the
        # line costs' Gram bands limit themselves; this covers whatever else uses BLAS):
        # BLAS threads gave one worker no speed (3 takes: 10.8 s with two, 10.5 s with one,
        # and 3.6 CPU seconds less); numba's kernels keep every core
        with single_threaded_blas():
            for job in jobs:
                on_done(job, reduce_one(job))
        return
    workers = min(workers, len(jobs))  # no worker without a take (a forked pool starts all)
    left = len(jobs)
    context = pool_context()

    def done(job: Job, row: dict[str, object]) -> None:
        # fewer takes left than workers: the idle workers' cores go to the takes still running
        nonlocal left
        left -= 1
        budget.value = share_of_cores(min(workers, left))
        on_done(job, row)

    # spawned workers start on demand, so the thread environment stays set until the pool is
    # done; a forked worker's numba has read its pool size in this process already; either
    # way numba's pool has a thread per core and pin_process limits it at run time
    with worker_threads(workers, numba_pool=cores()) as threads:
        budget = context.Value("i", threads, lock=False)
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                   initializer=start_worker,
                                   initargs=(os.getpid(), threads, budget))
        try:
            futures = {pool.submit(reduce_one, job): job for job in jobs}
            _collect(as_completed(futures), futures, done, "worker crashed")
        except BaseException:
            stop_pool(pool)
            raise
        pool.shutdown(wait=True)


def _collect(completed: Iterable[Any], futures: dict[Any, Job], on_done: OnDone,
             lost: str) -> None:
    """Hand each finished future's row to ``on_done``; a worker that died fails its take only."""
    for future in completed:
        job = futures[future]
        try:
            row = future.result()
        except Exception as exc:  # noqa: BLE001 - one lost worker must not stop the batch
            row = {"clip": job.input, "status": f"failed: {lost} ({type(exc).__name__}: {exc})"}
        on_done(job, row)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Kill the workers now (a kernel in a worker would not notice a gentler request)."""
    processes = list(getattr(pool, "_processes", {}).values())
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(timeout=2)


def run_dask(jobs: list[Job], scheduler: str, on_done: OnDone) -> None:
    """Run ``jobs`` on Dask: ``local:N`` starts a LocalCluster of N single-threaded worker
    processes; anything else is the address of a running scheduler."""
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError as exc:  # pragma: no cover - distributed is a dependency
        from sp_core.errors import OptionError

        raise OptionError(f"--scheduler needs dask.distributed: {exc}") from None
    count = int(scheduler.partition(":")[2]) if scheduler.startswith("local:") else 0
    with contextlib.ExitStack() as stack:
        if count:
            stack.enter_context(worker_threads(count))  # for the workers the cluster starts
            cluster = stack.enter_context(LocalCluster(
                n_workers=count, threads_per_worker=1, processes=True, dashboard_address=None,
                host="127.0.0.1", silence_logs=40))
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(Client(scheduler, timeout="20s"))
        futures = {client.submit(reduce_one, job, pure=False, key=f"take-{i}"): job
                   for i, job in enumerate(jobs)}
        try:
            _collect(dask_completed(list(futures)), futures, on_done, "worker lost")
        except BaseException:
            client.cancel(list(futures), force=True)
            raise
