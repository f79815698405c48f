"""Batches as jobs: same results on a process pool and a Dask cluster, resumable after a kill,
one bad take never stops the others (issue 21)."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sp_core.cli import main
from sp_core.errors import OptionError
from sp_core.io.atomic import PARTIAL
from sp_core.io.bvh import read_bvh, write_bvh
from sp_core.options import command_line_options

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def takes(tmp_path_factory) -> Path:
    """Four short takes cut from the sample, and one malformed file."""
    folder = tmp_path_factory.mktemp("takes")
    clip = read_bvh(ROOT / "examples" / "cmu_131_01.bvh")
    for i, start in enumerate((0, 200, 400, 600)):
        write_bvh(clip.sub_range(start, start + 179), folder / f"take{i}.bvh")
    text = (folder / "take0.bvh").read_text().splitlines()
    text[12] = "    OFFSET 1.0 oops 2.0"
    (folder / "broken.bvh").write_text("\n".join(text) + "\n")
    return folder


def outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.name.endswith((".keys.json", ".reduced.bvh"))}


def rows(folder: Path) -> dict[str, dict]:
    record = json.loads((folder / "summary.json").read_text())
    return {Path(r["clip"]).name: r for r in record["rows"]}


BASE = ["--keys", "12", "--tangents", "broken"]


def test_a_bad_take_is_reported_with_its_line_and_the_rest_complete(takes, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["batch", str(takes), "--out", str(out), *BASE, "--workers", "1"]) == 1
    summary = rows(out)
    assert [name for name, r in summary.items() if r["status"] == "ok"] == [
        "take0.bvh", "take1.bvh", "take2.bvh", "take3.bvh"]
    assert summary["broken.bvh"]["status"].startswith(f"failed: {takes / 'broken.bvh'}, line 13:")
    # on screen too: the take and why, once
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "broken.bvh" in line] == [summary["broken.bvh"]["status"]]
    record = json.loads((out / "summary.json").read_text())
    assert (record["takes"], record["ok"], record["failed"]) == (5, 4, 1)
    # numbers as numbers, for pipelines that read the JSON
    assert all(isinstance(summary["take0.bvh"][field], float)
               for field in ("mean_mm", "max_mm", "seconds"))
    assert 0 < summary["take0.bvh"]["mean_mm"] < summary["take0.bvh"]["max_mm"]
    csv_rows = (out / "summary.csv").read_text().splitlines()
    assert csv_rows[0] == ("clip,frames,keys,pose_keys,corrective_keys,total_keys,mean_mm,"
                           "max_mm,seconds,status,notes,keys_json,reduced_bvh")
    assert len(csv_rows) == 6
    # which files are a take's
    assert summary["take0.bvh"]["keys_json"] == str(out / "take0.keys.json")
    assert summary["take0.bvh"]["reduced_bvh"] == str(out / "take0.reduced.bvh")
    # a failed take wrote none (a pipeline following the columns found no file)
    assert summary["broken.bvh"]["keys_json"] == summary["broken.bvh"]["reduced_bvh"] == ""
    assert not (out / "broken.keys.json").exists()


def test_dask_cluster_gives_the_same_files_as_the_process_pool(takes, tmp_path):
    pool, cluster = tmp_path / "pool", tmp_path / "cluster"
    inputs = [str(takes / f"take{i}.bvh") for i in range(4)]
    assert main(["batch", *inputs, "--out", str(pool), *BASE, "--workers", "2"]) == 0
    assert main(["batch", *inputs, "--out", str(cluster), *BASE, "--scheduler", "local:2"]) == 0
    assert outputs(pool) == outputs(cluster) and len(outputs(pool)) == 8
    assert json.loads((cluster / "summary.json").read_text())["scheduler"] == "local:2"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="other systems always spawn")
def test_the_command_forks_its_workers_and_a_process_that_ran_kernels_spawns(takes, tmp_path):
    """Forked workers start with the command's imports, but GNU OpenMP's threads do not
    survive a fork: once numba's parallel kernels have run, the pool spawns."""
    code = ("import sys; from sp_core.batch.executors import pool_context; "
            "from sp_core.io.bvh import read_bvh; from sp_core.selection import SelectionSpace; "
            "before = pool_context().get_start_method(); "
            "SelectionSpace.from_clip(read_bvh(sys.argv[1])); "
            "print(before, pool_context().get_start_method())")
    result = subprocess.run([sys.executable, "-c", code, str(takes / "take0.bvh")],
                            capture_output=True, text=True, timeout=300)
    assert result.stdout.split() == ["fork", "spawn"], result.stderr
    # the same files from two forked workers as from one worker in this process
    inputs = [str(takes / f"take{i}.bvh") for i in range(4)]
    forked, alone = tmp_path / "forked", tmp_path / "alone"
    result = subprocess.run([sys.executable, "-m", "sp_core.cli", "batch", *inputs, "--out",
                             str(forked), *BASE, "--workers", "2"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert main(["batch", *inputs, "--out", str(alone), *BASE, "--workers", "1"]) == 0
    assert outputs(forked) == outputs(alone) and len(outputs(alone)) == 8


def test_one_worker_writes_the_same_files_as_a_pool_with_the_default_options(takes, tmp_path):
    """The default world fit and corrective keys: the command's own process (one worker) and
    a pool of two agree byte for byte (the pool's workers run one BLAS thread each; so does
    the single worker, whose numba kernels still use every core)."""
    inputs = [str(takes / f"take{i}.bvh") for i in range(2)]
    alone, pool = tmp_path / "alone", tmp_path / "pool"
    assert main(["batch", *inputs, "--out", str(alone), "--workers", "1"]) == 0
    assert main(["batch", *inputs, "--out", str(pool), "--workers", "2"]) == 0
    assert outputs(alone) == outputs(pool) and len(outputs(pool)) == 4


def test_a_killed_batch_resumes_with_only_the_missing_takes(takes, tmp_path):
    out = tmp_path / "out"
    inputs = [str(takes / f"take{i}.bvh") for i in range(4)]
    command = [sys.executable, "-m", "sp_core.cli", "batch", *inputs, "--out", str(out), *BASE,
               "--workers", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(out.glob("*.reduced.bvh"))) < 2:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {p.name for p in out.glob("*.reduced.bvh")}
    assert 2 <= len(finished) < 4
    stamps = {name: (out / name).stat().st_mtime_ns for name in finished}
    # the re-run: no --overwrite needed (the manifest says the files are the batch's own)
    result = subprocess.run([*command, "--json-log"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["event"] == "start" and events[-1]["event"] == "finished"
    redone = {Path(e["clip"]).name for e in events if e["event"] == "take"}
    skipped = events[0]["skipped"]
    assert skipped >= 1 and len(redone) + skipped == 4
    for name, stamp in stamps.items():  # a take recorded as done is not redone
        take = name.replace(".reduced.bvh", ".bvh")
        if take not in redone:
            assert (out / name).stat().st_mtime_ns == stamp
    assert len(list(out.glob("*.reduced.bvh"))) == 4
    assert not list(out.glob(f".*{PARTIAL}"))
    assert all(r["status"] == "ok" for r in rows(out).values())


def test_changed_inputs_and_options_are_redone(takes, tmp_path, capsys):
    work = tmp_path / "in"
    work.mkdir()
    for i in range(2):
        (work / f"take{i}.bvh").write_bytes((takes / f"take{i}.bvh").read_bytes())
    out = tmp_path / "out"
    args = ["batch", str(work), "--out", str(out), *BASE, "--workers", "1"]
    assert main(args) == 0
    capsys.readouterr()
    # one take changes: only it is redone
    clip = read_bvh(takes / "take2.bvh")
    write_bvh(clip, work / "take1.bvh")
    assert main(args) == 0
    assert "2 of 2 takes reduced (1 done earlier, skipped)" in capsys.readouterr().out
    # other options: everything is redone
    assert main([*args[:-4], "--keys", "10", "--workers", "1"]) == 0
    assert "2 of 2 takes reduced;" in capsys.readouterr().out
    assert json.loads((out / "take0.keys.json").read_text())["options"]["keys"]["keys"] == 10


def test_a_finished_batch_run_again_on_a_pool_has_nothing_to_do(takes, tmp_path, capsys):
    """Every take done: the pool of two gets no job and the batch only reports."""
    out = tmp_path / "out"
    args = ["batch", str(takes / "take0.bvh"), str(takes / "take1.bvh"), "--out", str(out),
            *BASE]
    assert main([*args, "--workers", "1"]) == 0
    capsys.readouterr()
    assert main([*args, "--workers", "2"]) == 0
    assert "2 of 2 takes reduced (2 done earlier, skipped)" in capsys.readouterr().out


def test_memory_per_worker_is_checked_before_work(takes, tmp_path, capsys):
    """Each worker may use --memory-gib; no more workers start than there are takes, so
    those are counted (64 workers for one take were refused as needing 256 GiB)."""
    inputs = [str(takes / f"take{i}.bvh") for i in range(4)]
    assert main(["batch", *inputs, "--out", str(tmp_path / "o"),
                 "--workers", "64", "--memory-gib", "64"]) == 2
    err = capsys.readouterr().err
    assert "4 workers x --memory-gib 64 = 256.0 GiB, more than 80% of this machine's" in err
    assert not (tmp_path / "o").exists()
    assert main(["batch", inputs[0], "--out", str(tmp_path / "one"), *BASE,
                 "--workers", "64", "--memory-gib", "4"]) == 0
    assert main(["batch", str(takes / "take0.bvh"), "--out", str(tmp_path / "o"),
                 "--scheduler", "local:0"]) == 2
    assert "--scheduler local:N needs N >= 1 worker processes, got local:0" in \
        capsys.readouterr().err


def test_the_in_host_batch_reports_failures_as_the_standalone_batch_does(tmp_path, capsys):
    """A scene that fails with a file error or an engine error gets the same one-line reason
    as a take of the standalone batch (an OSError as its reason and file, the options an
    error names as flags); anything else is an internal error; the other scenes continue."""
    from sp_core.batch.host import run_host_batch
    from sp_core.errors import SelectionError
    from sp_core.options import Options

    def reduce_one(path: str, copy: Path) -> dict[str, object]:
        if path.endswith("a.mb"):
            raise PermissionError(13, "Permission denied", str(copy))
        if path.endswith("b.mb"):
            raise SelectionError("raise max_keys or max_span", options=("max_keys", "max_span"))
        if path.endswith("c.mb"):
            raise KeyError("joint")
        return {"keys": 3}

    options = Options().replace(out=str(tmp_path / "out"))
    scenes = [str(tmp_path / name) for name in ("a.mb", "b.mb", "c.mb", "d.mb")]
    assert run_host_batch(scenes, options, reduce_one) == 1
    rows = {Path(row["clip"]).name: row["status"]
            for row in json.loads((tmp_path / "out" / "summary.json").read_text())["rows"]}
    assert rows == {"a.mb": f"failed: Permission denied: {tmp_path / 'out' / 'a.mb'}",
                    "b.mb": "failed: raise --max-keys or --max-span",
                    "c.mb": "failed: internal error KeyError: 'joint'", "d.mb": "ok"}


# ------------------------------------------------------------------ a pipeline TD's audit
def test_ctrl_c_inside_a_kernel_stops_the_batch_instead_of_failing_the_take(monkeypatch):
    """Ctrl-C while a numba kernel runs comes back as a SystemError whose cause is the
    KeyboardInterrupt: a one-worker batch recorded a failed take and went on."""
    from sp_core.batch import take
    from sp_core.jobs import Job
    from sp_core.options import Options

    def interrupted_kernel(job):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(<function kernel>) returned a result with an "
                              "exception set") from exc

    monkeypatch.setattr(take, "run_job", interrupted_kernel)
    with pytest.raises(KeyboardInterrupt):
        take.reduce_one(Job("take.bvh", Options(), "reduce"))
    monkeypatch.setattr(take, "run_job", lambda job: 1 / 0)  # a real internal error fails alone
    assert take.reduce_one(Job("take.bvh", Options(), "reduce"))["status"] == (
        "failed: internal error ZeroDivisionError: division by zero")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # (a thread that ended meanwhile)
            continue
        found += [int(t) for t in text]
    return found


def _forked(pid: int, line: bytes) -> list[int]:
    """The children of ``pid`` whose command line is ``line`` (forked, not exec'd), those that
    end while they are read left out."""
    found = []
    for child in _children(pid):
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes() == line:
                found.append(child)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_a_killed_pool_worker_fails_its_take_only(takes, tmp_path):
    """The kernel's OOM killer ends one worker: every take of the batch failed
    (BrokenProcessPool), the running one, the other worker's and those not started."""
    out = tmp_path / "out"
    # twelve takes (the default options: under a second each), so that the workers are still
    # busy when one is killed (with four, the batch could end before a worker was seen)
    folder = tmp_path / "takes"
    folder.mkdir()
    inputs = []
    for copy in range(3):
        for i in range(4):
            inputs.append(str(folder / f"take{i}_{copy}.bvh"))
            Path(inputs[-1]).write_bytes((takes / f"take{i}.bvh").read_bytes())
    command = [sys.executable, "-m", "sp_core.cli", "batch", *inputs, "--out", str(out),
               "--workers", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    # (the command's line as given, not read from /proc at once: read before the child's
    # exec it is pytest's own, which no worker has, and the test waited for a worker in vain)
    own = b"".join(arg.encode() + b"\0" for arg in command)
    deadline = time.monotonic() + 120
    killed = False
    seen = False
    while time.monotonic() < deadline and not killed and process.poll() is None:
        for child in _forked(process.pid, own):
            if not seen:  # into its first take
                seen = True
                time.sleep(0.5)
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:  # (a fork gone since: one about to exec, a CI run saw)
                continue
            killed = True
            break
        time.sleep(0.05)
    assert killed, "no pool worker seen"
    process.communicate(timeout=300)
    statuses = [r["status"] for r in rows(out).values()]
    assert len(statuses) == len(inputs)
    assert sum(s == "ok" for s in statuses) >= len(inputs) - 1
    assert all(s == "ok" or s.startswith("failed: worker crashed") for s in statuses)


def test_inputs_are_taken_once_absolute_without_hidden_files_and_must_exist(takes, tmp_path,
                                                                          monkeypatch):
    from sp_core.batch.run import collect_inputs
    from sp_core.errors import OptionError

    folder = tmp_path / "library"
    folder.mkdir()
    (folder / "walk.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    (folder / "alias.bvh").symlink_to(folder / "walk.bvh")
    (folder / "._walk.bvh").write_bytes(b"\x00\x05\x16\x07 macOS resource fork")
    monkeypatch.chdir(tmp_path)
    found = collect_inputs(["library", str(folder / "walk.bvh")])
    assert found == [folder / "alias.bvh"]  # one file, by the first name found, absolute
    with pytest.raises(OptionError, match="^input librray does not exist$"):
        collect_inputs(["librray"])


def test_a_rerun_keeps_each_clips_outputs_however_the_paths_are_spelled(takes, tmp_path,
                                                                       monkeypatch, capsys):
    """Resuming with absolute paths instead of relative ones refused the batch's own files; a
    clip of the same name added in another folder took over an existing clip's outputs."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    (tmp_path / "b" / "walk.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(["batch", "b", "--out", "out", *BASE, "--workers", "1"]) == 0
    first = (tmp_path / "out" / "walk.keys.json").read_bytes()
    (tmp_path / "a" / "walk.bvh").write_bytes((takes / "take1.bvh").read_bytes())
    capsys.readouterr()
    assert main(["batch", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                 str(tmp_path / "out"), *BASE, "--workers", "1"]) == 0
    assert "2 of 2 takes reduced (1 done earlier, skipped)" in capsys.readouterr().out
    assert (tmp_path / "out" / "walk.keys.json").read_bytes() == first  # still b's
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["rows"]
    assert [(r["clip"], Path(r["keys_json"]).name) for r in summary] == [
        (str(tmp_path / "a" / "walk.bvh"), "walk_2.keys.json"),
        (str(tmp_path / "b" / "walk.bvh"), "walk.keys.json")]


def test_a_folder_with_files_the_batch_did_not_write_is_refused(takes, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("the TD's own notes\n")
    inputs = [str(takes / "take0.bvh"), "--out", str(out), *BASE, "--workers", "1"]
    assert main(["batch", *inputs]) == 2
    assert f"{out} already holds 1 file(s) this batch did not write (e.g. " \
           f"{out / 'summary.csv'})" in capsys.readouterr().err
    (out / "summary.csv").unlink()
    (out / "manifest.json").write_text("{not json")
    assert main(["batch", *inputs]) == 2
    assert f"{out / 'manifest.json'} is not this tool's batch manifest or is damaged" in \
        capsys.readouterr().err
    assert main(["batch", *inputs, "--overwrite"]) == 0


@pytest.mark.parametrize("flags, message", [
    (["--scheduler", "local:2", "--workers", "1"],
     "--workers sizes the local process pool; with --scheduler the cluster's workers run the "
     "takes (local:N starts N); drop one of them"),
    (["--scheduler", "foo"], "--scheduler takes local:N or a running scheduler's address such "
                             "as tcp://HOST:8786, got 'foo'"),
    (["--scheduler", "tcp://127.0.0.1:notaport"], "--scheduler takes local:N or a running "
     "scheduler's address such as tcp://HOST:8786, got 'tcp://127.0.0.1:notaport'"),
])
def test_scheduler_options_that_cannot_work_are_refused_before_anything(takes, tmp_path, capsys,
                                                                          flags, message):
    out = tmp_path / "out"
    assert main(["batch", str(takes / "take0.bvh"), "--out", str(out), *flags]) == 2
    assert capsys.readouterr().err == f"salient-poses: error: {message}\n"
    assert not out.exists()


def test_an_address_where_no_scheduler_answers_is_said_within_the_deadline():
    """Something listening that is not a Dask scheduler (its dashboard, a web server): the
    client waited for ever."""
    import socket

    from sp_core.batch.executors import connect
    from sp_core.errors import OptionError

    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never answers
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(OptionError, match=f"^--scheduler tcp://127.0.0.1:{port}: no Dask "
                                              "scheduler there"):
            connect(f"tcp://127.0.0.1:{port}", seconds=1.0)
        assert time.monotonic() - started < 10.0


POOL_SCRIPT = """
import os, sys
from sp_core.batch import executors
from sp_core.jobs import Job
from sp_core.options import Options
executors.reduce_one = lambda job: {"clip": job.input, "status": "ok"}  # a take of no time
if sys.argv[2] == "dying":  # every worker ends as it starts
    executors.start_worker = lambda *args: os._exit(3)
rows = []
executors.run_local([Job(f"t{i}.bvh", Options(), "reduce") for i in range(int(sys.argv[1]))],
                    2, lambda job, row: rows.append(row["status"]))
print(len(rows), sorted(set(rows)))
"""


@pytest.mark.parametrize("takes, workers, printed", [
    # thousands of takes: the workers said which take they start through a pipe the batch
    # read only at the end; it filled at about 3,500 takes and the batch stood still
    (6000, "working", "6000 ['ok']"),
    # workers that die as they start: the batch started new pools for ever
    (3, "dying", "3 [\"failed: worker crashed (the pool's processes ended as they started)\"]"),
])
def test_the_pool_ends_with_many_takes_and_with_workers_that_cannot_start(takes, workers,
                                                                          printed):
    done = subprocess.run([sys.executable, "-c", POOL_SCRIPT, str(takes), workers],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.strip() == printed, done.stderr


def test_a_manifest_whose_takes_claim_one_output_is_not_trusted(takes, tmp_path):
    """An earlier version gave two clips of one name in two folders the same outputs, one
    after the other: the manifest said both were done, with one clip's keys in the file."""
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "take.bvh").write_bytes((takes / f"take{ord(name) % 2}.bvh")
                                                   .read_bytes())
    out = tmp_path / "out"
    assert main(["batch", str(tmp_path / "x"), "--out", str(out), *BASE, "--workers", "1"]) == 0
    record = json.loads((out / "manifest.json").read_text())
    (entry,) = record["takes"].values()
    record["takes"][str(tmp_path / "y" / "take.bvh")] = entry  # what the old version left
    (out / "manifest.json").write_text(json.dumps(record))
    assert main(["batch", str(tmp_path / "x"), str(tmp_path / "y"), "--out", str(out), *BASE,
                 "--workers", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped"] == 0
    assert [Path(r["keys_json"]).name for r in summary["rows"]] == ["take.keys.json",
                                                                    "take_2.keys.json"]


def test_an_ipv6_scheduler_address_is_taken():
    from sp_core.batch.run import _workers
    from sp_core.options import Options

    for address in ("tcp://[::1]:8786", "[fe80::1]:8786", "tcp://head:8786"):
        assert _workers(Options().replace(scheduler=address)) == 1


def test_take_chooses_the_fbx_takes_of_a_mixed_folder_and_reads_bvh_whole(tmp_path, capsys):
    """A shoot's folder of BVH and FBX files: ``--take`` is the FBX files' take; a BVH file,
    which has one motion, is read whole (its reader alone refuses a take); a folder with no FBX
    file refuses ``--take`` before any take runs."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    data = ROOT / "tests" / "data"
    for name in ("two_takes.fbx", "cmu_131_01_walk.bvh"):
        (mixed / name).write_bytes((data / name).read_bytes())
    out = tmp_path / "out"
    args = ["--keys", "8", "--take", "Walk|Walk", "--root", "Hips", "--workers", "1"]
    assert main(["batch", str(mixed), "--out", str(out), *args]) == 0
    err = capsys.readouterr().err
    assert ("--take 'Walk|Walk' applies to the 1 input(s) with takes (.fbx); the other 1 "
            "(e.g. cmu_131_01_walk.bvh) are read whole") in err
    summary = rows(out)
    assert {r["status"] for r in summary.values()} == {"ok"}
    fbx = json.loads((out / "two_takes.keys.json").read_text())
    assert fbx["options"]["input"]["take"] == "Walk|Walk"
    bvh = json.loads((out / "cmu_131_01_walk.keys.json").read_text())
    assert bvh["options"]["input"]["take"] is None

    only_bvh = tmp_path / "bvh"
    only_bvh.mkdir()
    (only_bvh / "walk.bvh").write_bytes((data / "cmu_131_01_walk.bvh").read_bytes())
    assert main(["batch", str(only_bvh), "--out", str(tmp_path / "o2"), *args]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "--take chooses a take of a file that holds several (.fbx); none of the 1 input(s) "
        "does: drop --take")
    assert not (tmp_path / "o2").exists()


def test_a_cluster_without_workers_is_said_and_so_is_a_worker_joining(takes, tmp_path, capsys,
                                                                      monkeypatch):
    """Dask holds the takes until a worker comes: a cluster with none looked like a hung
    batch (a progress bar standing still). The batch says it is waiting, and goes on when a
    worker joins."""
    import threading

    from distributed import LocalCluster

    from sp_core.batch import executors

    monkeypatch.setattr(executors, "NO_WORKER_SECONDS", 0.5)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                      host="127.0.0.1", protocol="tcp") as cluster:
        address = cluster.scheduler_address
        joins = threading.Timer(4.0, lambda: cluster.scale(1))
        joins.start()
        try:
            code = main(["batch", str(takes / "take1.bvh"), "--out", str(tmp_path / "out"),
                         *BASE, "--scheduler", address])
        finally:
            joins.cancel()
    assert code == 0
    err = capsys.readouterr().err
    assert (f"waiting for a worker: the cluster at {address} has had none for ") in err
    assert (f"s; start one (dask worker {address}) or press Ctrl-C to end the batch with its "
            "summary") in err
    assert f"a worker joined {address}; the takes go on" in err
    assert rows(tmp_path / "out")["take1.bvh"]["status"] == "ok"


def test_a_take_output_that_is_another_input_is_refused_even_with_overwrite(takes, tmp_path,
                                                                            capsys):
    """``walk.bvh`` and the user's own ``walk.reduced.bvh`` in one batch into their folder:
    walk's output would replace the other input (which the batch then read as a take)."""
    folder = tmp_path / "mocap"
    folder.mkdir()
    (folder / "walk.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    (folder / "walk.reduced.bvh").write_bytes((takes / "take1.bvh").read_bytes())
    before = (folder / "walk.reduced.bvh").read_bytes()
    for extra in ([], ["--overwrite"]):
        assert main(["batch", str(folder / "walk.bvh"), str(folder / "walk.reduced.bvh"),
                     "--out", str(folder), *BASE, "--workers", "1", *extra]) == 2
        assert capsys.readouterr().err == (
            f"salient-poses: error: output {folder / 'walk.reduced.bvh'} is an input of this "
            "command; refusing to overwrite it (choose another file name)\n")
        assert (folder / "walk.reduced.bvh").read_bytes() == before


def test_a_rerun_whose_glob_names_an_output_goes_on(takes, tmp_path, capsys):
    """``batch mocap/*.bvh --out mocap`` run twice: the second glob names walk's output,
    which nothing writes again (walk is done), so the batch goes on (it refused it as an
    input in the way)."""
    folder = tmp_path / "mocap"
    folder.mkdir()
    (folder / "walk.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    assert main(["batch", str(folder / "walk.bvh"), "--out", str(folder), *BASE,
                 "--workers", "1"]) == 0
    reduced = (folder / "walk.reduced.bvh").read_bytes()
    capsys.readouterr()
    assert main(["batch", *sorted(map(str, folder.glob("*.bvh"))), "--out", str(folder),
                 *BASE, "--workers", "1"]) == 0
    assert "2 of 2 takes reduced (1 done earlier, skipped)" in capsys.readouterr().out
    assert (folder / "walk.reduced.bvh").read_bytes() == reduced


def test_an_audit_of_the_batchs_machine_readable_outputs(takes, tmp_path, capsys):
    """A pipeline TD's audit: two batches into one folder at once both ended with exit 0 and
    a manifest and summaries that kept one batch's takes; a ``--json-log`` reader that stopped
    reading ended the batch with exit 1, no word and the previous summary in place; the log's
    take events lacked the summary's output files; in the keyposes + breakdowns mode the
    summary's ``keys`` counted the breakdowns; ``mean_mm`` held scene units where the size is
    unknown."""
    import csv

    from sp_core.batch.run import _folder_lock

    out = tmp_path / "out"
    out.mkdir()
    inputs = [str(takes / "take0.bvh"), str(takes / "take1.bvh")]
    with _folder_lock(out):  # a batch running there
        assert main(["batch", *inputs, "--out", str(out), "--suggested"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"salient-poses: error: another batch is writing into {out}; wait for it to end or "
        "choose another --out")
    assert not (out / "manifest.json").exists()
    # a file system without locks (NFS mounted nolock: ENOLCK) is written without one
    import errno
    import fcntl

    def no_locks(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    nfs = tmp_path / "nfs"
    original = fcntl.flock
    fcntl.flock = no_locks
    try:
        assert main(["batch", inputs[0], "--out", str(nfs), "--suggested"]) == 0
    finally:
        fcntl.flock = original
    capsys.readouterr()
    # a log reader that reads one line and goes
    command = [sys.executable, "-m", "sp_core.cli", "batch", *inputs, "--out", str(out),
               "--suggested", "--json-log"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert json.loads(process.stdout.readline())["event"] == "start"
    process.stdout.close()
    assert process.wait(timeout=120) == 0
    assert b"the --json-log reader closed standard output" in process.stderr.read()
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    # a failed take is still said on stderr when the log's reader went
    failing = subprocess.Popen([*command[:-5], str(takes / "broken.bvh"), "--out",
                                str(tmp_path / "failing"), "--suggested", "--json-log"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    failing.stdout.readline()
    failing.stdout.close()
    assert failing.wait(timeout=120) == 1
    assert b"failed: " in failing.stderr.read()
    # every take event carries the row of the summary, output files included
    again = tmp_path / "again"
    done = subprocess.run([*command[:-4], "--out", str(again), "--suggested", "--json-log"],
                          capture_output=True, text=True, timeout=120)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    taken = [e for e in events if e["event"] == "take"]
    assert sorted(e["keys_json"] for e in taken) == [str(again / "take0.keys.json"),
                                                   str(again / "take1.keys.json")]
    # layered: keys is K, the keyposes
    layered = tmp_path / "layered"
    assert main(["batch", inputs[0], "--out", str(layered), "--layered", "--leading",
                 "RightWrist", "--space", "channel"]) == 0
    row = next(csv.DictReader((layered / "summary.csv").open()))
    record = json.loads((layered / "take0.keys.json").read_text())
    assert int(row["keys"]) == record["labels"].count("keypose") < len(record["frames"])
    # one joint: no mm
    one = tmp_path / "one.bvh"
    one.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 6 Xposition Yposition "
                   "Zposition Zrotation Xrotation Yrotation\n}\nMOTION\nFrames: 30\nFrame "
                   "Time: 0.0333333\n" + "\n".join(f"{i * 0.5} {10 + i % 7} 0 {3 * i} 0 {i}"
                                                   for i in range(30)) + "\n")
    single = tmp_path / "single"
    assert main(["batch", str(one), "--out", str(single)]) == 0
    row = next(csv.DictReader((single / "summary.csv").open()))
    assert row["mean_mm"] == row["max_mm"] == "" and row["status"] == "ok"
    metrics = json.loads((single / "one.keys.json").read_text())["metrics"]
    assert metrics["mean_mm"] is None and metrics["mean"] > 0


# ------------------------------------------------------------------ audit of the batch (2)
def test_batches_sharing_a_cluster_get_their_own_results(takes, tmp_path):
    """Dask gives a submission whose key it holds already the task it has: with keys
    ``take-0``... a batch on a cluster another batch used at the same time got that batch's
    rows (and wrote no file)."""
    from distributed import Client, LocalCluster

    other_row = {"clip": "/elsewhere/other.bvh", "status": "ok", "keys": 99}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None, host="127.0.0.1", protocol="tcp") as cluster, \
            Client(cluster) as other:
        # the other batch's first take, held by its client while this batch runs
        held = other.submit(dict, other_row, key="take-0", pure=False)
        assert held.result() == other_row
        out = tmp_path / "out"
        assert main(["batch", str(takes / "take1.bvh"), "--out", str(out), *BASE,
                     "--scheduler", cluster.scheduler_address]) == 0
        held.release()
    row = rows(out)["take1.bvh"]
    assert row["clip"] == str(takes / "take1.bvh") and row["keys"] == 12
    assert (out / "take1.reduced.bvh").exists()


def test_a_take_that_fails_on_a_rerun_keeps_no_outputs_of_the_earlier_run(takes, tmp_path,
                                                                         capsys):
    """Run 2 with other options fails one take: its run-1 files stayed in --out beside run 2's,
    the manifest listing them under run 2's options."""
    folder = tmp_path / "mocap"
    folder.mkdir()
    (folder / "walk.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    write_bvh(read_bvh(takes / "take1.bvh").sub_range(0, 99), folder / "short.bvh")
    out = tmp_path / "out"
    args = ["batch", str(folder), "--out", str(out), *BASE, "--workers", "1"]
    assert main(args) == 0
    assert (out / "short.keys.json").exists() and (out / "short.reduced.bvh").exists()
    assert main([*args, "--range", "0:150"]) == 1  # short has 100 frames
    assert not (out / "short.keys.json").exists() and not (out / "short.reduced.bvh").exists()
    assert (out / "walk.keys.json").exists() and (folder / "short.bvh").exists()
    summary = rows(out)
    assert summary["short.bvh"]["status"].startswith("failed")
    assert summary["short.bvh"]["keys_json"] == summary["short.bvh"]["reduced_bvh"] == ""
    entry = json.loads((out / "manifest.json").read_text())["takes"][str(folder / "short.bvh")]
    assert (entry["status"], entry["outputs"]) == ("failed", [])
    # the next run keeps the take's name and needs no --overwrite
    capsys.readouterr()
    assert main(args) == 0
    assert rows(out)["short.bvh"]["keys_json"] == str(out / "short.keys.json")


def test_takes_in_a_linked_folder_are_taken_once_and_a_link_cycle_ends(takes, tmp_path):
    """A shoot folder linking in another day's folder: its takes were left out without a word
    (``Path.rglob`` does not follow links to folders)."""
    from sp_core.batch.run import collect_inputs

    day2 = tmp_path / "day2"
    day2.mkdir()
    for name in ("run.bvh", "walk.bvh"):
        (day2 / name).write_bytes((takes / "take0.bvh").read_bytes() + name.encode())
    shoot = tmp_path / "shoot"
    shoot.mkdir()
    (shoot / "own.bvh").write_bytes((takes / "take1.bvh").read_bytes())
    (shoot / "linked_day").symlink_to(day2)
    (shoot / "same_day").symlink_to(day2)  # the same folder twice: its takes once
    (day2 / "loop").symlink_to(shoot)  # a cycle
    assert collect_inputs([str(shoot)]) == [shoot / "linked_day" / "run.bvh",
                                            shoot / "linked_day" / "walk.bvh",
                                            shoot / "own.bvh"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes (POSIX)")
def test_a_named_pipe_and_an_overlong_output_name_fail_their_takes_only(takes, tmp_path):
    """A named pipe called ``*.bvh`` blocked the batch before any take (read for its
    checksum); a take whose output name would be over 255 bytes refused the whole batch with
    a bare "File name too long"."""
    folder = tmp_path / "mocap"
    folder.mkdir()
    (folder / "ok.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    long_take = folder / ("L" * 245 + ".bvh")
    long_take.write_bytes((takes / "take1.bvh").read_bytes())
    os.mkfifo(folder / "pipe.bvh")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "sp_core.cli", "batch", str(folder), "--out",
                           str(out), *BASE, "--workers", "1"],
                          capture_output=True, text=True, timeout=60)  # (it blocked for ever)
    assert done.returncode == 1, done.stderr
    summary = rows(out)
    assert summary["ok.bvh"]["status"] == "ok"
    assert summary["pipe.bvh"]["status"] == (
        f"failed: {folder / 'pipe.bvh'} is not a regular file (a named pipe); a take is read "
        "from a file")
    assert summary[long_take.name]["status"].startswith(f"failed: {long_take}: its output name ")
    assert "would be 257 bytes, more than the 255 a file name may have in" in \
        summary[long_take.name]["status"]
    assert f"failed: {folder / 'pipe.bvh'} is not a regular file" in done.stderr
    assert "2 failed" in done.stdout


def _slow_take(job):
    """A take of a second (the Dask worker of the test below runs in the test's process)."""
    time.sleep(1.0)
    return {"clip": job.input, "status": "ok"}


def test_a_scheduler_lost_mid_batch_is_said_once_and_leaves_the_takes_pending(
        takes, tmp_path, capsys, monkeypatch):
    """A scheduler that died mid-batch failed every take not done ("worker lost ...
    scheduler-connection-lost") with Dask's traceback: a resume would not know they never ran."""
    import threading

    from distributed import Client, LocalCluster

    from sp_core.batch import executors, run

    monkeypatch.setattr(executors, "reduce_one", _slow_take)
    # the client tries to reconnect for its timeout (20 s) before Dask cancels the futures
    monkeypatch.setattr(run, "connect", lambda address: Client(address, timeout="1s"))
    inputs = [str(takes / f"take{i}.bvh") for i in range(4)]
    out = tmp_path / "out"
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                           dashboard_address=None, host="127.0.0.1", protocol="tcp")
    dies = threading.Timer(1.5, lambda: cluster.sync(cluster.scheduler.close))
    dies.start()
    try:
        code = main(["batch", *inputs, "--out", str(out), *BASE, "--scheduler",
                     cluster.scheduler_address])
    finally:
        dies.cancel()
        with contextlib.suppress(Exception):  # (its scheduler gone, it waits 30 s by default)
            cluster.close(timeout=1)
    assert code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "failed:" not in err
    assert err.count(f"the connection to the Dask scheduler at {cluster.scheduler_address} "
                     "was lost: ") == 1
    statuses = [r["status"] for r in rows(out).values()]
    assert "not run: scheduler lost" in statuses
    assert set(statuses) <= {"ok", "not run: scheduler lost"}
    manifest = json.loads((out / "manifest.json").read_text())["takes"]
    assert {e["status"] for e in manifest.values()} <= {"ok", "pending"}
    assert "pending" in {e["status"] for e in manifest.values()}


def test_outputs_record_the_tool_version_and_another_versions_takes_are_redone(
        takes, tmp_path, capsys):
    """Nothing said which version made a folder's files, and a resume trusted the takes of
    any version."""
    from sp_core import version

    out = tmp_path / "out"
    args = ["batch", str(takes / "take0.bvh"), "--out", str(out), *BASE, "--workers", "1"]
    assert main(args) == 0
    record = json.loads((out / "manifest.json").read_text())
    assert record["tool_version"] == version() != "unknown"
    assert json.loads((out / "summary.json").read_text())["tool_version"] == version()
    (entry,) = record["takes"].values()
    entry["tool_version"] = "0.0.1"  # what an older installation recorded
    (out / "manifest.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"note: {out / 'manifest.json'} records takes made by salient-poses "
                            f"0.0.1, not {version()}: they are redone\n")
    assert "1 of 1 takes reduced;" in captured.out
    assert main(args) == 0  # done by this version now
    assert "(1 done earlier, skipped)" in capsys.readouterr().out


def test_a_batch_refused_after_making_its_folder_leaves_no_folder(takes, tmp_path, capsys,
                                                                  monkeypatch):
    """An unreachable scheduler is found only once the folder is made and locked: the batch
    left an empty folder holding its ``.salient-poses.lock``."""
    from sp_core.batch import run
    from sp_core.errors import OptionError

    def unreachable(address):
        raise OptionError(f"--scheduler {address}: no Dask scheduler there")

    monkeypatch.setattr(run, "connect", unreachable)
    out = tmp_path / "new" / "out"
    assert main(["batch", str(takes / "take0.bvh"), "--out", str(out), *BASE, "--scheduler",
                 "tcp://127.0.0.1:1"]) == 2
    assert "no Dask scheduler there" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    # a folder that was there stays, as it was
    (tmp_path / "mine").mkdir()
    assert main(["batch", str(takes / "take0.bvh"), "--out", str(tmp_path / "mine"), *BASE,
                 "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert (tmp_path / "mine").is_dir()


def test_a_local_cluster_starts_no_more_workers_than_takes_and_leaves_port_8787_alone(
        takes, tmp_path, monkeypatch):
    """`local:4` with one take started four worker processes (the pool starts none without a
    take), and the cluster's scheduler took port 8787 for its HTTP server though the
    dashboard is off (a busy 8787 printed a warning on every batch)."""
    import socket

    import distributed

    started = {}
    real = distributed.LocalCluster

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            started.update(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", Recorded)
    with socket.socket() as busy:  # 8787 in use, as by another Dask on the node
        try:
            busy.bind(("127.0.0.1", 8787))
            busy.listen()
        except OSError:
            pass  # (already in use: the same situation)
        out = tmp_path / "out"
        assert main(["batch", str(takes / "take0.bvh"), "--out", str(out), *BASE,
                     "--scheduler", "local:4"]) == 0
    assert started["n_workers"] == 1
    assert started["scheduler_kwargs"]["dashboard_address"] == ":0"


def test_a_presets_workers_gives_way_to_a_scheduler_flag(takes, tmp_path):
    """A shared preset with `[batch] workers = 1` and `--scheduler local:1` on the command line
    was refused, naming a --workers the user never typed; the flag overrides the preset, as
    elsewhere, and a preset holding both is refused naming the preset."""
    preset = tmp_path / "farm.toml"
    preset.write_text("[batch]\nworkers = 1\n")
    out = tmp_path / "out"
    assert main(["batch", str(takes / "take0.bvh"), "--out", str(out), *BASE,
                 "--preset", str(preset), "--scheduler", "local:1"]) == 0
    both = tmp_path / "both.toml"
    both.write_text('[batch]\nworkers = 1\nscheduler = "local:1"\n')
    with pytest.raises(OptionError, match=f"preset {both}: workers sizes the local process"):
        command_line_options(argparse.Namespace(), [], both)


def test_a_rerun_says_what_it_replaces_and_keeps_an_output_edited_by_hand(takes, tmp_path,
                                                                          capsys):
    """A re-run with other options replaced every output without a word, and one edited by
    hand too (a review of the command line)."""
    out = tmp_path / "out"
    args = ["batch", str(takes / "take0.bvh"), str(takes / "take1.bvh"), "--out", str(out),
            "--space", "channel", "--workers", "1"]
    assert main([*args, "--keys", "4"]) == 0
    capsys.readouterr()
    assert main([*args, "--keys", "5"]) == 0
    err = capsys.readouterr().err
    assert "note: 2 take(s) done earlier with other options or input bytes are redone and " \
           f"their outputs replaced (e.g. {takes / 'take0.bvh'})" in err
    assert len(json.loads((out / "take0.keys.json").read_text())["frames"]) == 5
    edited = out / "take0.keys.json"
    edited.write_text('{"hand": "edited"}\n')
    for keys in ("5", "6"):  # done earlier with the same options, or to be redone
        assert main([*args, "--keys", keys]) == 2
        assert (f"{out} holds 1 output(s) changed since this batch wrote them (e.g. {edited}: "
                "edited by hand?); add --overwrite to replace them, or move them away"
                ) in capsys.readouterr().err
        assert edited.read_text() == '{"hand": "edited"}\n'
    assert main([*args, "--keys", "6", "--overwrite"]) == 0
    assert len(json.loads(edited.read_text())["frames"]) == 6


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="acts as another account, which needs root")
def test_a_shared_folder_stays_open_to_other_accounts_and_a_closed_one_is_named(tmp_path):
    """The lock a batch leaves was opened for appending, so another account's batch into a
    folder both may write was refused as "not writable" (a review of the batch); a folder the
    account may not write into is named as such (it said "Permission denied:
    OUT/.salient-poses.lock"). Run as the account nobody, in a forked child."""
    import tempfile

    from sp_core.batch import run
    from sp_core.io.atomic import OutputError

    top = Path(tempfile.mkdtemp(dir="/tmp"))  # (pytest's own folders are root's alone)
    try:
        top.chmod(0o755)
        shared, closed = top / "shared", top / "closed"
        shared.mkdir(mode=0o777)
        shared.chmod(0o777)
        closed.mkdir(mode=0o755)
        with run._folder_lock(shared):
            pass  # root's batch: its lock stays
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            code = 9
            try:
                os.setgid(65534)
                os.setuid(65534)
                with run._folder_lock(shared):
                    code = 8
                try:
                    with run._folder_lock(closed):
                        pass
                except OutputError as exc:
                    code = 0 if str(exc) == (f"--out {closed} is not writable: Permission "
                                             "denied") else 7
            finally:
                os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    finally:
        import shutil

        shutil.rmtree(top)


def test_a_folder_walk_says_what_it_leaves_out(takes, tmp_path, capsys, monkeypatch):
    """A user's jump.reduced.bvh and an unreadable subfolder were left out without a word."""
    folder = tmp_path / "shoot"
    (folder / "day2").mkdir(parents=True)
    (folder / "take0.bvh").write_bytes((takes / "take0.bvh").read_bytes())
    (folder / "jump.reduced.bvh").write_bytes((takes / "take1.bvh").read_bytes())
    real_walk = os.walk

    def walk(top, *args, onerror=None, **kwargs):  # (root reads every folder: refuse one)
        for entry in real_walk(top, *args, onerror=onerror, **kwargs):
            if entry[0].endswith("day2"):
                onerror(PermissionError(13, "Permission denied", entry[0]))
                continue
            yield entry

    monkeypatch.setattr(os, "walk", walk)
    out = tmp_path / "out"
    assert main(["batch", str(folder), "--out", str(out), *BASE, "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert ("note: left out 1 file(s) named like a batch's output (e.g. "
            f"{folder / 'jump.reduced.bvh'}); name them as inputs to reduce them") in err
    assert f"note: cannot read folder {folder / 'day2'} (Permission denied): its takes are " \
           "left out" in err
    assert sorted(rows(out)) == ["take0.bvh"]


# ------------------------------------------------------------ a second review of the batch
def test_an_out_folder_above_the_inputs_leaves_none_out(takes, tmp_path, capsys):
    """`--out shoot` with the takes in shoot/raw: every file under --out was skipped, so the
    raw takes were refused as "no motion files" alone, or left out without a word beside
    another input."""
    from sp_core.batch.run import collect_inputs

    shoot = tmp_path / "shoot"
    (shoot / "raw").mkdir(parents=True)
    for i in range(2):
        (shoot / "raw" / f"take{i}.bvh").write_bytes((takes / f"take{i}.bvh").read_bytes())
    assert [p.name for p in collect_inputs([str(shoot / "raw")], shoot)] == [
        "take0.bvh", "take1.bvh"]
    # an output folder inside the folder walked is still left out (its files are outputs)
    (shoot / "raw" / "out").mkdir()
    (shoot / "raw" / "out" / "take9.bvh").write_bytes((takes / "take2.bvh").read_bytes())
    assert [p.name for p in collect_inputs([str(shoot / "raw")], shoot / "raw" / "out")] == [
        "take0.bvh", "take1.bvh"]
    (shoot / "raw" / "out" / "take9.bvh").unlink()
    assert main(["batch", str(shoot / "raw"), str(takes / "take3.bvh"), "--out", str(shoot),
                 *BASE, "--workers", "1"]) == 0
    assert sorted(rows(shoot)) == ["take0.bvh", "take1.bvh", "take3.bvh"]


def test_a_file_name_that_is_not_utf8_is_reduced_and_summarised(takes, tmp_path, capsys):
    """A Latin-1 name from a Windows share (café.bvh as bytes): the take failed as an internal
    error and the summary was never written."""
    folder = tmp_path / "share"
    folder.mkdir()
    name = os.fsdecode(b"caf\xe9.bvh")
    (folder / name).write_bytes((takes / "take0.bvh").read_bytes())
    out = tmp_path / "out"
    assert main(["batch", str(folder), "--out", str(out), *BASE, "--workers", "1"]) == 0
    record = json.loads((out / "summary.json").read_text())
    assert [(Path(r["clip"]).name, r["status"]) for r in record["rows"]] == [(name, "ok")]
    # the CSV keeps the name's own bytes: read back as file names are, it names the file
    with open(out / "summary.csv", encoding="utf-8", errors="surrogateescape") as handle:
        assert Path(list(csv.DictReader(handle))[0]["clip"]).exists()
    assert os.fsencode(name[:-4]) + b".keys.json" in os.listdir(os.fsencode(out))


def test_the_default_workers_fit_the_memory(monkeypatch):
    """16 cores and 32 GiB: the default (one worker per core at --memory-gib 2) was refused
    as needing 32 GiB; a --workers typed is still checked."""
    from sp_core.batch import run
    from sp_core.options import Options

    monkeypatch.setattr(run, "cores", lambda: 16)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 32 * 1024**3 // 4096}
    monkeypatch.setattr(run.os, "sysconf", lambda name: pages[name])
    assert run._workers(Options()) == 12  # 80 % of 32 GiB at 2 GiB each
    assert run._workers(Options().replace(memory_gib=0.5)) == 16
    assert run._workers(Options().replace(memory_gib=64)) == 1
    run._check_memory(Options(), 12)
    with pytest.raises(OptionError, match="16 workers x --memory-gib 2 = 32.0 GiB"):
        run._check_memory(Options(), run._workers(Options().replace(workers=16)))


def test_a_presets_scheduler_gives_way_to_a_workers_flag(tmp_path):
    """`[batch] scheduler = "local:1"` in a shared preset and `--workers 2` typed was refused
    ("drop one of them"), which a command line cannot do to a preset."""
    preset = tmp_path / "farm.toml"
    preset.write_text('[batch]\nscheduler = "local:1"\n')
    namespace = argparse.Namespace(workers="2")
    options = command_line_options(namespace, ["workers", "scheduler"], preset)
    assert (options.batch.workers, options.batch.scheduler) == (2, None)
    kept = command_line_options(argparse.Namespace(), ["workers", "scheduler"], preset)
    assert kept.batch.scheduler == "local:1"


@pytest.mark.parametrize("damage", [{"outputs": 5}, {"row": "x"}, {"status": None},
                                    {"sums": [1]}])
def test_a_manifest_with_a_field_of_the_wrong_type_is_damaged(takes, tmp_path, capsys, damage):
    """It failed as an internal error (TypeError), --overwrite or not."""
    out = tmp_path / "out"
    args = ["batch", str(takes / "take0.bvh"), "--out", str(out), *BASE, "--workers", "1"]
    assert main(args) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    for entry in manifest["takes"].values():
        entry.update(damage)
    (out / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(args) == 2
    assert "manifest.json is not this tool's batch manifest or is damaged (a take's record " \
           "holds a value of the wrong type); add --overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0


def test_a_long_manifest_is_not_saved_after_every_take(tmp_path, monkeypatch):
    """It was written whole after every take: a library of 10,000 takes rewrote a 10 MB file
    10,000 times (each save 0.6 s). A quick save still follows every take (a killed batch's
    re-run skips every take that finished)."""
    from sp_core.batch import manifest as module
    from sp_core.jobs import Job
    from sp_core.options import Options

    clock = [100.0]
    saves = []
    real = module.write_text
    cost = [0.0]

    def write_text(*args, **kwargs):
        saves.append(clock[0])
        clock[0] += cost[0]  # (what the save takes)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "write_text", write_text)
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    record = module.Manifest(tmp_path)
    jobs = [Job(str(tmp_path / f"t{i}.bvh"), Options()) for i in range(40)]
    record.plan(jobs, {job.input: "sha" for job in jobs})
    for job in jobs[:20]:  # quick saves: one per take
        clock[0] += 0.25
        record.record(job, {"status": "ok"})
    assert len(saves) == 1 + 20
    cost[0] = 0.5  # a save takes 0.5 s: the next one waits 2.5 s (10 takes)
    for job in jobs[20:]:
        clock[0] += 0.25
        record.record(job, {"status": "ok"})
    assert len(saves) == 1 + 20 + 2
    record.save()
    assert all(e["status"] == "ok" for e in
               json.loads((tmp_path / "manifest.json").read_text())["takes"].values())


def test_the_in_host_batch_names_copies_of_scenes_with_one_name_apart(tmp_path):
    """a/shot.ma and b/shot.ma: the second copy was refused as the first's output, and no scene
    ran; they are shot.ma and shot_2.ma, as the standalone batch names its takes."""
    from sp_core.batch.host import run_host_batch
    from sp_core.options import Options

    saved = {}

    def reduce_one(path: str, copy: Path) -> dict[str, object]:
        saved[path] = copy.name
        copy.write_text(path)
        return {"keys": 3}

    scenes = [str(tmp_path / "a" / "shot.ma"), str(tmp_path / "b" / "shot.ma"),
              str(tmp_path / "c" / "Shot.ma"), str(tmp_path / "a" / "other.mb")]
    options = Options().replace(out=str(tmp_path / "out"))
    assert run_host_batch(scenes, options, reduce_one) == 0
    assert saved == dict(zip(scenes, ["shot.ma", "shot_2.ma", "Shot_3.ma", "other.mb"],
                             strict=True))


def test_a_scheduler_port_out_of_range_is_refused_at_once():
    """tcp://127.0.0.1:99999 waited 20 s for a scheduler that cannot be there."""
    from sp_core.batch.run import _workers
    from sp_core.options import Options

    with pytest.raises(OptionError) as caught:
        _workers(Options().replace(scheduler="tcp://127.0.0.1:99999"))
    assert str(caught.value) == ("--scheduler tcp://127.0.0.1:99999: port 99999 is not a port "
                                 "(1 to 65535)")
    assert _workers(Options().replace(scheduler="tcp://127.0.0.1:8786")) == 1
