"""Thread-pool limits: the environment for workers, run-time BLAS limits, compiled kernels."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sp_core.threads import THREAD_VARIABLES, single_threaded_blas, thread_environment


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_thread_environment_sets_every_pool_and_restores_the_user_values(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    with thread_environment(3) as threads:
        assert threads == 3
        assert all(os.environ[name] == "3" for name in THREAD_VARIABLES)
    assert os.environ["OMP_NUM_THREADS"] == "7"
    assert "MKL_NUM_THREADS" not in os.environ


def test_thread_environment_can_size_numbas_pool_apart(monkeypatch):
    """Pool workers pin numba at run time and may be given more threads: its pool is sized
    to ``numba_pool``, every other pool to ``threads``."""
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    with thread_environment(1, numba_pool=4):
        assert os.environ["NUMBA_NUM_THREADS"] == "4"
        assert all(os.environ[name] == "1" for name in THREAD_VARIABLES
                   if name != "NUMBA_NUM_THREADS")
    assert "NUMBA_NUM_THREADS" not in os.environ


def test_single_threaded_blas_limits_inside_the_block_only():
    import numpy as np

    np.ones((4, 4)) @ np.ones((4, 4))  # BLAS loaded
    before = _blas_threads()
    assert before, "numpy's BLAS is visible to threadpoolctl"
    with single_threaded_blas():
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_a_block_inside_a_block_keeps_the_limit_and_the_outer_one_restores_it(monkeypatch):
    """A block nested in the same thread's block (a reduction's fit inside the reduction)
    sets no limit of its own (no scan of the libraries): BLAS has one thread until the outer
    block ends, also after the inner one ended, and the count of before after it."""
    import numpy as np
    import threadpoolctl

    np.ones((4, 4)) @ np.ones((4, 4))  # BLAS loaded
    before = _blas_threads()
    limits = []
    real = threadpoolctl.threadpool_limits
    monkeypatch.setattr(threadpoolctl, "threadpool_limits",
                        lambda **kw: limits.append(kw) or real(**kw))
    with single_threaded_blas():
        with single_threaded_blas():
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before
    assert limits == [{"limits": 1, "user_api": "blas"}]
    with single_threaded_blas():  # the count of blocks held went back to none
        pass
    assert len(limits) == 2


def test_single_threaded_blas_blocks_of_two_threads_take_turns():
    """A block that ends while another thread's runs must not give that one its BLAS threads
    back: the blocks take turns, so the later one starts its limit after the earlier one
    restored the count (without the turns, it saw two threads here after the other ended,
    and a reduction run beside the panel's estimates differed in the last digits of its mean
    error in one run of three)."""
    import numpy as np

    np.ones((4, 4)) @ np.ones((4, 4))  # BLAS loaded
    before = _blas_threads()
    first_in, first_out = threading.Event(), threading.Event()
    seen: list[list[int]] = []

    def first() -> None:
        with single_threaded_blas():
            first_in.set()
            time.sleep(0.3)  # the second thread asks for its block meanwhile
        first_out.set()

    def second() -> None:
        first_in.wait(timeout=30)
        with single_threaded_blas():
            first_out.wait(timeout=30)  # the first block has ended by now
            seen.append(_blas_threads())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert seen and set(seen[0]) == {1}
    assert _blas_threads() == before


def test_workers_see_passive_openmp_and_pinned_pools():
    """A process like a batch worker: sp_core sets OMP_WAIT_POLICY unless the user chose,
    and pin_process limits BLAS and numba at run time."""
    code = ("import os, numpy, numba; import sp_core; from sp_core.threads import pin_process; "
            "pin_process(1); from threadpoolctl import threadpool_info; "
            "print(os.environ['OMP_WAIT_POLICY'], numba.get_num_threads(), "
            "sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip().split(maxsplit=2)
    assert out == ["PASSIVE", "1", "[1]"]
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip().split(maxsplit=2)
    assert out[0] == "ACTIVE"


def test_warm_up_runs_every_kernel_path():
    from sp_core import warm

    assert warm.warm() > 0.0


def test_install_compiles_every_module_of_the_package_to_bytecode(tmp_path):
    # Python reads the files even where PYTHONDONTWRITEBYTECODE keeps it from writing them
    import importlib.util
    import shutil

    from sp_core import warm

    package = tmp_path / "sp_core"
    shutil.copytree(Path(warm.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    sources = sorted(package.rglob("*.py"))
    assert len(sources) > 30
    assert warm.compile_bytecode(str(package))
    missing = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).is_file()]
    assert missing == []



def test_the_warm_up_command_compiles_the_installed_package(monkeypatch, capsys):
    from sp_core import warm

    compiled: list[str | None] = []
    monkeypatch.setattr(warm, "warm", lambda: 0.0)
    monkeypatch.setattr(warm, "compile_bytecode",
                        lambda package=None: compiled.append(package) or False)
    warm.main()
    assert compiled == [None]  # the default: the installed sp_core
    assert "not compiled to bytecode" in capsys.readouterr().out


def test_share_of_cores_gives_every_core_to_the_workers_still_running(monkeypatch):
    from sp_core import threads

    monkeypatch.setattr(threads, "cores", lambda: 4)
    assert [threads.share_of_cores(n) for n in (4, 3, 2, 1, 0)] == [1, 1, 2, 4, 4]
    monkeypatch.setattr(threads, "cores", lambda: 1)
    assert threads.share_of_cores(2) == 1


def _numba_threads() -> int:
    import numba

    return numba.get_num_threads()


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")
@pytest.mark.parametrize("method", ["spawn", "fork"] if sys.platform.startswith("linux")
                         else ["spawn"])
def test_a_worker_adopts_the_thread_budget_its_batch_sets(method):
    """A pool worker pinned to one thread uses more once the shared budget grows (the end of
    a batch), up to numba's pool, which the batch sizes to the cores."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numba

    from sp_core.batch.executors import start_worker

    if method == "fork" and threading.active_count() > 1:
        pytest.skip("forking is unsafe with other threads running")
    context = multiprocessing.get_context(method)
    budget = context.Value("i", 1, lock=False)
    with thread_environment(1, numba_pool=2), \
            ProcessPoolExecutor(1, mp_context=context, initializer=start_worker,
                                initargs=(os.getpid(), 1, budget)) as pool:
        assert pool.submit(_numba_threads).result(timeout=120) == 1
        pool_size = 2 if method == "spawn" else min(2, numba.config.NUMBA_NUM_THREADS)
        budget.value = 2
        deadline = time.monotonic() + 60
        seen = 1
        while seen != pool_size and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = pool.submit(_numba_threads).result(timeout=120)
        assert seen == pool_size
        budget.value = 1  # and back: the budget is followed both ways
        deadline = time.monotonic() + 60
        while seen != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = pool.submit(_numba_threads).result(timeout=120)
        assert seen == 1


def _printed_with_blas_threads(code: str, threads: int) -> str:
    """What ``code`` prints in a fresh interpreter whose OpenBLAS starts ``threads`` threads."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, env=env, check=True).stdout


def test_an_analysis_is_the_same_whatever_blas_threads_the_machine_has():
    """The line costs' Gram bands are BLAS products: with two threads their last digits
    differed from one thread's (up to 2e-11 on the sample), and the tables with them."""
    code = ("import hashlib; from sp_core.io.bvh import read_bvh; "
            "from sp_core.poses import pose_matrix; from sp_core.selection import SelectionSpace; "
            "p = pose_matrix(read_bvh('examples/cmu_131_01.bvh')); "
            "s = SelectionSpace(p - p.mean(axis=0)); "
            "print(hashlib.sha1(s._table.tobytes() + s.errors.tobytes()).hexdigest())")
    outputs = {_printed_with_blas_threads(code, threads) for threads in (1, 2)}
    assert len(outputs) == 1, outputs


def test_a_reduction_is_the_same_whatever_blas_threads_the_machine_has():
    """The fit and the corrective keys run with one BLAS thread: with two, OpenBLAS splits
    products differently and the sample's corrective stage chose other keys (4,455 keys in
    all instead of 4,384), so the same command gave another result on another machine."""
    code = ("import hashlib; from sp_core.io.bvh import read_bvh; "
            "from sp_core.reduction import reduce; "
            "clip = read_bvh('examples/cmu_131_01.bvh'); "
            "r = reduce(clip, range(0, 994, 22), corrective_budget='5%', "
            "corrective_stop_mm=20.0); "
            "print(hashlib.sha1(r.reduced.tobytes() + r.residual.tobytes()).hexdigest(), "
            "r.metrics.keys)")
    outputs = {_printed_with_blas_threads(code, threads) for threads in (1, 2)}
    assert len(outputs) == 1, outputs


def test_blas_kernels_follow_the_processors_vector_width(monkeypatch):
    from sp_core import threads

    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    avx512 = {"sse3", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq",
              "avx512vl"}
    assert threads.blas_kernels(avx512) == "SkylakeX"
    assert os.environ["OPENBLAS_CORETYPE"] == "SkylakeX"
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    # an AVX-512 subset without the byte/word instructions (Xeon Phi) is not Skylake-X
    assert threads.blas_kernels({"avx2", "fma", "avx512f", "avx512cd"}) == "Haswell"
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert threads.blas_kernels({"sse3", "avx"}) is None
    assert threads.blas_kernels(set()) is None
    assert "OPENBLAS_CORETYPE" not in os.environ
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Zen")  # the user's choice stays
    assert threads.blas_kernels(avx512) is None
    assert os.environ["OPENBLAS_CORETYPE"] == "Zen"


def test_numpys_openblas_runs_the_kernels_sp_core_chose(monkeypatch):
    """In a process that imports sp_core before numpy (the command line, batch workers)."""
    from sp_core import threads

    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    chosen = threads.blas_kernels()
    if chosen is None:
        pytest.skip("this processor has neither AVX-512 nor AVX2 with FMA")
    code = ("import sp_core, numpy; from threadpoolctl import threadpool_info; "
            "print(sorted({p['architecture'] for p in threadpool_info() "
            "if 'libopenblas' in p['filepath']}))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == f"['{chosen}']"


def test_workers_run_the_blas_kernels_of_the_process_that_starts_them(monkeypatch):
    """A batch started from a process that loaded numpy before sp_core (a host's Python)
    gets its workers' results to the last digit as that process's own."""
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_info

    mine = [p["architecture"] for p in threadpool_info()
            if p["internal_api"] == "openblas" and "numpy" in p["filepath"]]
    if not mine:
        pytest.skip("numpy's BLAS here is not OpenBLAS")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott" if mine[0] != "Prescott" else "Haswell")
    code = ("import sp_core, numpy; from threadpoolctl import threadpool_info; "
            "print([p['architecture'] for p in threadpool_info() "
            "if p['internal_api'] == 'openblas' and 'numpy' in p['filepath']])")
    with thread_environment(1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert out == str(mine)
    assert os.environ["OPENBLAS_CORETYPE"] == ("Prescott" if mine[0] != "Prescott"
                                               else "Haswell")


def test_kernels_of_two_threads_take_turns_on_numbas_own_work_queue(sample_path):
    """Where numba has neither OpenMP nor TBB (pip's numba on macOS without libomp) it runs
    its kernels on its own work queue, which terminates the process when two threads launch
    kernels at once (a host application with the user's scene): the kernels take turns
    there. Run with that layer forced, two threads' forward kinematics and selections end
    (without the turns the process aborted: "Concurrent access has been detected")."""
    script = f"""
import threading, numba
from sp_core.io.bvh import read_bvh
from sp_core.selection import SelectionSpace
clip = read_bvh({str(sample_path)!r})
part = clip.sub_range(0, 299)
def work():
    for _ in range(5):
        clip.forward_kinematics(clip.channels)
        SelectionSpace.from_clip(part)
threads = [threading.Thread(target=work) for _ in range(2)]
[t.start() for t in threads]
[t.join() for t in threads]
print("layer", numba.threading_layer())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["layer", "workqueue"]
