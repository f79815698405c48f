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
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
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


#: In a pool's worker: a shared byte per take of its round, set as the take starts (see
#: :func:`_reduce_reporting`; shared memory, not a pipe: nothing to fill or block on).
_STARTED: Any = None


def start_worker(parent: int, threads: int, budget: Any = None, started: Any = None) -> None:
    """Worker initialiser: pin the thread pools (:func:`sp_core.threads.pin_process`), end
    with the parent (:func:`die_with_parent`), given a shared ``budget``, let numba use as
    many threads as it says (:func:`sp_core.threads.follow_budget`), and given ``started``
    flags, mark there which takes it starts."""
    global _STARTED
    pin_process(threads)
    die_with_parent(parent)
    if budget is not None:
        follow_budget(budget)
    _STARTED = started


def _reduce_reporting(job: Job, index: int) -> dict[str, object]:
    """:func:`reduce_one` in a pool's worker, first telling the batch that take ``index``
    started (if the worker dies, the batch knows which takes were running in the pool)."""
    if _STARTED is not None:
        _STARTED[index] = 1
    return reduce_one(job)


def die_with_parent(parent: int) -> None:
    """End this worker when the batch process ends, however it ends.

    Linux delivers SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``); elsewhere, and
    as a second guard, a thread notices the worker being re-parented. Ctrl-C and SIGTERM are
    left to the parent, which stops the workers itself after writing the summary (a worker
    ended by them first would look like a crash, and its take would be run again).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (sent to the group: the batch stops us)
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
        pending = list(jobs)
        while pending:
            unfinished, running = _pool_round(pending, workers, context, threads, budget, done)
            if len(unfinished) == len(pending) and not running:
                # no take started: the workers die as they start (not a take's doing)
                for job in unfinished:
                    done(job, {"clip": job.input, "status": LOST_AT_START})
                return
            # a worker died (killed for its memory, a crash): the pool is broken and every take
            # not done with it. Those that were running run again one at a time, each in a
            # pool of its own, so only the one that kills its worker fails; then the rest
            for job in running:
                lost, _ = _pool_round([job], 1, context, threads, budget, done)
                if lost:
                    done(job, {"clip": job.input, "status": LOST})
            pending = [job for job in unfinished if job not in running]


#: A take whose worker process ended without a result, and takes no worker lived to start.
LOST = "failed: worker crashed (its process ended without a result: out of memory, or killed)"
LOST_AT_START = "failed: worker crashed (the pool's processes ended as they started)"


def _pool_round(jobs: list[Job], workers: int, context: Any, threads: int, budget: Any,
                done: OnDone) -> tuple[list[Job], list[Job]]:
    """Run ``jobs`` on a pool of ``workers`` processes until they end or a worker dies;
    returns the jobs not done and, of those, the ones that were running when it died."""
    started = context.RawArray("b", len(jobs))
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context,
                               initializer=start_worker,
                               initargs=(os.getpid(), threads, budget, started))
    finished: set[int] = set()
    broken = False
    try:
        futures = {}
        for i, job in enumerate(jobs):
            futures[pool.submit(_reduce_reporting, job, i)] = i
        for future in as_completed(futures):
            try:
                row = future.result()
            except BrokenProcessPool:
                broken = True
                break
            except Exception as exc:  # noqa: BLE001 - a take that cannot come back fails alone
                row = {"clip": jobs[futures[future]].input,
                       "status": f"failed: worker error ({type(exc).__name__}: {exc})"}
            finished.add(futures[future])
            done(jobs[futures[future]], row)
    except BrokenProcessPool:  # a worker died while the takes were handed out
        broken = True
    except BaseException:
        stop_pool(pool)
        raise
    if broken:
        stop_pool(pool)
    else:
        pool.shutdown(wait=True)
    unfinished = [job for i, job in enumerate(jobs) if i not in finished]
    return unfinished, [job for i, job in enumerate(jobs) if started[i] and i not in finished]


class SchedulerLost(Exception):
    """The batch lost its connection to the Dask scheduler: Dask cancels every future, so the
    takes not done have not failed, they were not run (the batch leaves them pending)."""


def _collect(completed: Iterable[Any], futures: dict[Any, Job], on_done: OnDone,
             lost: str) -> None:
    """Hand each finished future's row to ``on_done``; a worker that died fails its take only.

    Raises
    ------
    SchedulerLost
        The connection to the scheduler is gone (each take not done reported it as a lost
        worker, with Dask's message).
    """
    for future in completed:
        job = futures[future]
        try:
            row = future.result()
        except Exception as exc:  # noqa: BLE001 - one lost worker must not stop the batch
            if getattr(exc, "reason", None) == "scheduler-connection-lost":
                raise SchedulerLost from None
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


def run_dask(jobs: list[Job], scheduler: str, on_done: OnDone, client: Any = None) -> None:
    """Run ``jobs`` on Dask: ``local:N`` starts a LocalCluster of N single-threaded worker
    processes; anything else is the address of a running scheduler (``client``: connected to it
    already, see :func:`connect`; closed at the end)."""
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError as exc:  # pragma: no cover - distributed is a dependency
        from sp_core.errors import OptionError

        raise OptionError(f"--scheduler needs dask.distributed: {exc}") from None
    # no more workers than takes (as the pool), each with its share of the cores
    count = min(int(scheduler.partition(":")[2]), max(len(jobs), 1)) \
        if scheduler.startswith("local:") else 0
    with contextlib.ExitStack() as stack:
        # the client's logger, put back last (after the client closes: closing ends its
        # attempts to reconnect to a lost scheduler, which Dask logs with a traceback)
        client_log = logging.getLogger("distributed.client")
        stack.callback(setattr, client_log, "disabled", client_log.disabled)
        if count:
            stack.enter_context(worker_threads(count))  # for the workers the cluster starts
            # dashboard_address=None turns the dashboard off, but the scheduler's HTTP server
            # (health, metrics) still took port 8787, with a warning when it was in use
            # (distributed's Scheduler.__init__: start_http_server(..., default_port=8787)):
            # any free port for it
            with _children_ignore_ctrl_c():
                cluster = stack.enter_context(LocalCluster(
                    n_workers=count, threads_per_worker=1, processes=True,
                    dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                    host="127.0.0.1", silence_logs=40))
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(client or connect(scheduler))
        # keys unique to this run: Dask hands a submission whose key it holds already the
        # task it has, so ``take-{i}`` gave two batches on one cluster each other's results
        # and a resume the result of an interrupted run with other options
        token = uuid.uuid4().hex
        futures = {client.submit(reduce_one, job, pure=False, key=f"take-{token}-{i}"): job
                   for i, job in enumerate(jobs)}
        done = threading.Event()
        if not count:
            threading.Thread(target=_say_without_workers, args=(client, scheduler, done),
                             daemon=True, name="salient-poses-dask-workers").start()
        try:
            _collect(dask_completed(list(futures)), futures, on_done, "worker lost")
        except SchedulerLost:
            client_log.disabled = True  # (the batch says what happened in one line)
            raise
        except BaseException:
            client.cancel(list(futures), force=True)
            raise
        finally:
            done.set()


@contextlib.contextmanager
def _children_ignore_ctrl_c() -> Iterator[None]:
    """Processes started in the block ignore Ctrl-C, as the pool's workers do: the terminal
    sends it to the whole process group, and a LocalCluster's workers each printed a
    traceback (a hundred lines) while the batch stopped them itself. An ignored SIGINT stays
    ignored across ``exec``, and Python installs no KeyboardInterrupt handler where it is;
    the batch's own handler is put back at the end of the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: Seconds a cluster may have no worker before the batch says it is waiting for one.
NO_WORKER_SECONDS = 10.0


def _say_without_workers(client: Any, scheduler: str, done: threading.Event,
                         seconds: float | None = None) -> None:
    """Say on stderr when the cluster at ``scheduler`` has had no worker for ``seconds``
    (default :data:`NO_WORKER_SECONDS`), and when one joins: Dask holds the takes until a
    worker comes, which looked like a hung batch (a progress bar standing still)."""
    seconds = NO_WORKER_SECONDS if seconds is None else seconds
    since: float | None = None
    said = False
    while not done.wait(min(1.0, seconds / 4)):
        try:
            workers = len(client.scheduler_info().get("workers", {}))
        except Exception:  # noqa: BLE001 - a closing client: nothing left to say
            return
        now = time.monotonic()
        if workers:
            if said:
                print(f"a worker joined {scheduler}; the takes go on", file=sys.stderr,
                      flush=True)
            since, said = None, False
        elif since is None:
            since = now
        elif not said and now - since >= seconds:
            print(f"waiting for a worker: the cluster at {scheduler} has had none for "
                  f"{now - since:.0f} s; start one (dask worker {scheduler}) or press Ctrl-C "
                  "to end the batch with its summary", file=sys.stderr, flush=True)
            said = True


#: Seconds a scheduler's address has to answer.
CONNECT_SECONDS = 20.0


def connect(address: str, seconds: float = CONNECT_SECONDS) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or a one-line error within
    ``seconds`` (and a few more).

    Dask's own timeout covers a port nothing listens on, not one where something else does:
    pointed at a dashboard (8787) or any other server, the client waited for ever (or read
    a reply as a frame length of exbibytes), so the connection is made in a thread given a
    deadline.

    Raises
    ------
    OptionError
        No Dask scheduler answered there.
    """
    from distributed import Client

    from sp_core.errors import OptionError

    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["client"] = Client(address, timeout=f"{seconds:g}s")
        except BaseException as exc:  # noqa: BLE001 - said below, in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=attempt, daemon=True, name="salient-poses-dask-connect")
    thread.start()
    thread.join(seconds + 5.0)
    if "client" in box:
        return box["client"]
    error = box.get("error")
    reason = (f"{type(error).__name__}: {error}".strip() if error is not None
              else f"nothing answered as a scheduler within {seconds:g} s")
    raise OptionError(f"--scheduler {address}: no Dask scheduler there ({reason}); give a "
                      "running scheduler's address (tcp://HOST:8786 by default; 8787 is its "
                      "dashboard) or local:N")
