"""Never lose a take: inputs are never written, outputs are whole or absent, bad input is
refused with one line before any work (issue 15)."""

from __future__ import annotations

import csv
import errno
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from choices import SUGGESTED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sp_core.cli import main
from sp_core.errors import OptionError, ReductionError, SelectionError
from sp_core.io.atomic import PARTIAL, OutputError, atomic_open, output_set, write_text
from sp_core.io.bvh import read_bvh, write_bvh
from sp_core.options import Options
from sp_core.session import Session
from sp_core.standalone import StandaloneHost

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


@pytest.fixture(scope="module")
def short_clip(tmp_path_factory) -> Path:
    """The sample's first 240 frames: quick to analyse, still real mocap."""
    path = tmp_path_factory.mktemp("clips") / "take.bvh"
    write_bvh(read_bvh(ROOT / "examples" / "cmu_131_01.bvh").sub_range(0, 239), path)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------ outputs that are inputs
@pytest.mark.parametrize("command, flag", [
    ("reduce", "--bvh"), ("reduce", "--json"), ("analyze", "--json"), ("info", "--json"),
])
@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_an_output_that_is_the_input_is_refused(short_clip, tmp_path, capsys, command, flag,
                                                link):
    take = tmp_path / "take.bvh"
    take.write_bytes(short_clip.read_bytes())
    target = take
    if link == "symlink":
        target = tmp_path / "alias.bvh"
        target.symlink_to(take)
    elif link == "hardlink":
        target = tmp_path / "hard.bvh"
        os.link(take, target)
    before = digest(take)
    extra = ["--keys", "10"] if command == "reduce" else []
    code, out, err = run([command, str(take), *extra, flag, str(target), "--overwrite"], capsys)
    assert code == 2
    if flag == "--json":  # (refused sooner: a clip is no .json file)
        assert err == f"salient-poses: error: --json must be a .json file name, got {target}\n"
    else:
        assert err == f"salient-poses: error: {flag} {target} is an input of this command; " \
                      "refusing to overwrite it (choose another file name)\n"
    assert digest(take) == before and out == ""


def test_propagate_refuses_to_write_over_its_input(short_clip, tmp_path, capsys):
    take = tmp_path / "take.bvh"
    take.write_bytes(short_clip.read_bytes())
    edit = tmp_path / "edit.json"
    edit.write_text('{"offsets": {"Hips.Zrotation": 10}}')
    before = digest(take)
    code, _, err = run(["propagate", str(take), "--frame", "100", "--edit", str(edit),
                        "--bvh", str(take)], capsys)
    assert code == 2 and "is an input of this command" in err and digest(take) == before
    code, _, err = run(["propagate", str(take), "--frame", "100", "--edit", str(edit),
                        "--bvh", str(tmp_path / "out.bvh"), "--falloff", str(edit)], capsys)
    assert code == 2 and f"--falloff {edit}" in err or "must be a .csv" in err


def test_existing_outputs_need_overwrite(short_clip, tmp_path, capsys):
    out = tmp_path / "keys.json"
    out.write_text("an earlier result\n")
    code, _, err = run(["reduce", str(short_clip), "--keys", "8", "--json", str(out)], capsys)
    assert code == 2
    assert err == f"salient-poses: error: --json {out} exists; add --overwrite to replace it\n"
    assert out.read_text() == "an earlier result\n"
    code, printed, err = run(["reduce", str(short_clip), "--keys", "8", "--json", str(out),
                              "--overwrite"], capsys)
    assert code == 0, err
    assert json.loads(out.read_text())["frames"][0] == 0
    assert printed.endswith(f"\nWrote {out}\n")  # what was written, where the user looks


def test_overwrite_replaces_a_links_file_and_writes_a_pipe_in_place(short_clip, tmp_path,
                                                                    capsys):
    # a symlink stays a link to the new file; a named pipe (as /dev/null, a device) is written
    # to, not swapped for a regular file, and needs no --overwrite: nothing is replaced
    real = tmp_path / "real.json"
    real.write_text("an earlier result\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    code, _, err = run(["reduce", str(short_clip), "--keys", "8", "--json", str(link),
                        "--overwrite"], capsys)
    assert code == 0, err
    assert link.is_symlink() and json.loads(real.read_text())["frames"][0] == 0
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    code, _, err = run(["reduce", str(short_clip), "--keys", "8", "--json", str(pipe)], capsys)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert received and json.loads(received[0])["frames"][0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe.json", "real.json"]


@pytest.mark.parametrize("args, message", [
    (["--residual", "res.bvh"], "--residual must be a .npy file name, got "),
    (["--bvh", "out.txt"], "--bvh must be a .bvh file name, got "),
])
def test_outputs_must_carry_their_suffix(short_clip, tmp_path, capsys, args, message):
    args = [args[0], str(tmp_path / args[1])]
    code, _, err = run(["reduce", str(short_clip), "--keys", "8", *args], capsys)
    assert code == 2 and message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_two_outputs_cannot_share_a_file(short_clip, tmp_path, capsys):
    same = str(tmp_path / "x.json")
    code, _, err = run(["analyze", str(short_clip), "--json", same, "--plot",
                        str(tmp_path / "x.png")], capsys)
    assert code == 0, err
    code, _, err = run(["reduce", str(short_clip), "--keys", "5", "--json", same,
                        "--overwrite", "--bvh", str(tmp_path / "x.bvh")], capsys)
    assert code == 0, err


def test_missing_folder_is_refused_before_any_work(short_clip, tmp_path, capsys):
    started = time.perf_counter()
    code, out, err = run(["reduce", str(short_clip), "--json",
                          str(tmp_path / "nope" / "k.json")], capsys)
    assert code == 2 and out == ""
    assert err == (f"salient-poses: error: cannot write --json {tmp_path / 'nope' / 'k.json'}: "
                   f"folder {tmp_path / 'nope'} does not exist\n")
    assert time.perf_counter() - started < 5  # refused without analysing (which takes longer)


def test_reduce_without_outputs_says_nothing_was_written(short_clip, capsys):
    code, out, _ = run(["reduce", str(short_clip), "--keys", "6", "--space", "channel"], capsys)
    assert code == 0
    assert out.rstrip().endswith("Nothing written: add --json, --bvh or --residual to save the "
                                 "result.")


# ----------------------------------------------------------------------- batch and outputs
def test_batch_never_reduces_its_own_outputs(short_clip, tmp_path, capsys):
    folder = tmp_path / "takes"
    folder.mkdir()
    (folder / "walk.bvh").write_bytes(short_clip.read_bytes())
    args = ["batch", str(folder), "--out", str(folder), "--keys", "6", "--space", "channel",
            "--workers", "1"]
    assert main(args) == 0
    written = [".salient-poses.lock", "manifest.json", "summary.csv", "summary.json",
               "walk.bvh", "walk.keys.json", "walk.reduced.bvh"]
    assert sorted(p.name for p in folder.iterdir()) == written
    stamp = (folder / "walk.keys.json").stat().st_mtime_ns
    capsys.readouterr()
    code, out, _ = run(args, capsys)  # the same batch again: done, nothing redone
    assert code == 0 and "1 of 1 takes reduced (1 done earlier, skipped)" in out
    assert (folder / "walk.keys.json").stat().st_mtime_ns == stamp
    assert main([*args, "--overwrite"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == written
    # an output folder inside the inputs is skipped entirely
    out_folder = folder / "reduced"
    for _ in range(2):
        assert main(["batch", str(folder), "--out", str(out_folder), "--keys", "6", "--space",
                     "channel", "--workers", "1"]) == 0
    assert sorted(p.name for p in out_folder.iterdir()) == [
        ".salient-poses.lock", "manifest.json", "summary.csv", "summary.json", "walk.keys.json",
        "walk.reduced.bvh"]


def test_batch_refuses_files_it_did_not_write(short_clip, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "take.keys.json").write_text("someone else's\n")
    code, _, err = run(["batch", str(short_clip), "--out", str(out), "--keys", "6"], capsys)
    assert code == 2 and err == (f"salient-poses: error: {out} already holds 1 file(s) this "
                                 f"batch did not write (e.g. {out / 'take.keys.json'}); add "
                                 "--overwrite to replace them or choose another --out\n")
    assert (out / "take.keys.json").read_text() == "someone else's\n"


def test_batch_checks_its_options_before_any_work(short_clip, tmp_path, capsys):
    code, _, err = run(["batch", str(short_clip), "--out", str(tmp_path / "o"), "--workers",
                        "-1"], capsys)
    assert code == 2 and err == "salient-poses: error: --workers must be a whole number >= 1, " \
                                "got -1\n"
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------- atomic writes
def test_a_full_disk_names_the_file_and_leaves_nothing(short_clip, tmp_path, capsys,
                                                       monkeypatch):
    import sp_core.io.atomic as atomic

    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    target = tmp_path / "r.bvh"
    code, _, err = run(["reduce", str(short_clip), "--keys", "6", "--space", "channel",
                        "--bvh", str(target)], capsys)
    monkeypatch.setattr(atomic.os, "fsync", real_fsync)
    assert code == 2
    assert err == f"salient-poses: error: cannot write {target}: No space left on device\n"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "keep.json"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(target, "w") as handle:
        handle.write("new, half")
        raise RuntimeError("crash in the middle")
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target]
    with pytest.raises(OutputError, match=f"cannot write {tmp_path / 'no' / 'x'}: folder"):
        with atomic_open(tmp_path / "no" / "x"):
            pass


def test_a_replaced_file_keeps_its_permissions_and_a_long_name_can_be_written(tmp_path):
    """--overwrite made a private (600) file world-readable (644); a valid name of 245
    characters was refused as too long (its hidden temporary's name was 265)."""
    private = tmp_path / "private.json"
    private.write_text("old\n")
    private.chmod(0o600)
    write_text(private, "new\n")
    assert private.read_text() == "new\n" and stat.S_IMODE(private.stat().st_mode) == 0o600
    long_names = [tmp_path / ("k" * 240 + end) for end in (".json", "x.json")]
    with output_set():  # (two long names alike in their first 200 bytes, written together)
        for i, path in enumerate(long_names):
            write_text(path, f"{i}\n")
    assert [p.read_text() for p in long_names] == ["0\n", "1\n"]
    assert sorted(tmp_path.iterdir()) == sorted([private, *long_names])


def test_an_interrupted_write_keeps_the_whole_old_set_of_outputs(short_clip, tmp_path,
                                                                  monkeypatch):
    """Ctrl-C while ``reduce --overwrite`` writes its three outputs: every old file stays (the
    keys JSON was new and the BVH and residual old, a set that belongs to no run), and no
    temporary is left; then a run that ends replaces all three."""
    import sp_core.io.keys as keys
    from sp_core.jobs import Job, run_job

    paths = {name: tmp_path / f"out.{name}" for name in ("json", "bvh", "npy")}
    for path in paths.values():
        path.write_text("old\n")
    options = Options().replace(keys=6, space="channel", json=str(paths["json"]),
                                bvh=str(paths["bvh"]), residual=str(paths["npy"]),
                                overwrite=True)
    real = keys.write_reduced_bvh

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(keys, "write_reduced_bvh", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_job(Job(str(short_clip), options))
    assert sorted(tmp_path.iterdir()) == sorted(paths.values())
    assert all(path.read_text() == "old\n" for path in paths.values())
    monkeypatch.setattr(keys, "write_reduced_bvh", real)
    run_job(Job(str(short_clip), options))
    assert sorted(tmp_path.iterdir()) == sorted(paths.values())
    assert not any(path.read_bytes() == b"old\n" for path in paths.values())


def test_an_interrupted_plot_keeps_the_old_analysis_json_too(short_clip, tmp_path,
                                                              monkeypatch, capsys):
    """`analyze --json --plot`: Ctrl-C while the plot is drawn leaves the old JSON (it was
    renamed before the plot was drawn) and nothing beside them."""
    import sp_core.ui.error_plot as error_plot

    paths = [tmp_path / "a.json", tmp_path / "a.png"]
    for path in paths:
        path.write_text("old\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(error_plot, "save_error_plot", interrupted)
    assert main(["analyze", str(short_clip), "--json", str(paths[0]), "--plot", str(paths[1]),
                 "--overwrite"]) == 130
    assert capsys.readouterr().err == "salient-poses: interrupted\n"
    assert sorted(tmp_path.iterdir()) == paths and all(p.read_text() == "old\n" for p in paths)


def test_a_process_that_ignores_ctrl_c_keeps_ignoring_it_while_it_writes(tmp_path):
    """A batch's pool worker ignores Ctrl-C (its parent stops it); its writes turned it into
    an exception in the worker."""
    from sp_core.io.atomic import output_set

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with output_set(), atomic_open(tmp_path / "a.json") as handle:
            handle.write("new\n")
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (tmp_path / "a.json").read_text() == "new\n"


def test_a_set_whose_second_rename_fails_names_the_file_already_replaced(tmp_path):
    """The first rename done, the second fails (its target became a folder): the message says
    which file was replaced after all (it named the failing one only, by its resolved path),
    and no temporary is left."""
    from sp_core.io.atomic import output_set

    first, second = tmp_path / "a.json", tmp_path / "a.bvh"
    first.write_text("old\n")
    with pytest.raises(OutputError) as raised, output_set():
        with atomic_open(first) as handle:
            handle.write("new\n")
        with atomic_open(second) as handle:
            handle.write("new\n")
        second.mkdir()
    assert str(raised.value) == f"cannot write {second}: Is a directory ({first} already " \
                                "replaced)"
    assert first.read_text() == "new\n" and sorted(tmp_path.iterdir()) == [second, first]


def test_a_batch_on_a_full_disk_leaves_no_partial_summary(short_clip, tmp_path, monkeypatch):
    import sp_core.io.atomic as atomic
    from sp_core.batch import write_summary

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OutputError, match="summary.csv: No space left on device"):
        write_summary(tmp_path, [{"clip": "x", "status": "ok"}])
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ inputs never change (property)
SUBCOMMANDS = [
    ["info", "{clip}", "--json", "{out}/i.json", "--positions", "{out}/p.npy"],
    ["analyze", "{clip}", "--json", "{out}/a.json", "--max-keys", "20"],
    ["reduce", "{clip}", "--keys", "7", "--json", "{out}/k.json", "--bvh", "{out}/r.bvh",
     "--residual", "{out}/res.npy", "--space", "channel"],
    ["propagate", "{clip}", "--frame", "100", "--edit", "{out}/../edit.json", "--bvh",
     "{out}/e.bvh", "--falloff", "{out}/w.csv", "--eigen", "4"],
    ["batch", "{clip}", "--out", "{out}/batch", "--keys", "5", "--space", "channel",
     "--workers", "1"],
]


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(SUBCOMMANDS), overwrite=st.booleans(),
       onto_input=st.sampled_from([None, "--json", "--bvh", "--out"]))
def test_no_command_ever_changes_an_input(short_clip, tmp_path, command, overwrite,
                                          onto_input):
    """Whatever the command and however its outputs are aimed, the input's bytes stay."""
    work = tmp_path / f"run{time.monotonic_ns()}"
    out = work / "out"
    out.mkdir(parents=True)
    clip = work / "take.bvh"
    clip.write_bytes(short_clip.read_bytes())
    (work / "edit.json").write_text('{"offsets": {"Hips.Zrotation": 10}}')
    args = [a.format(clip=clip, out=out) for a in command]
    if onto_input in args:
        args[args.index(onto_input) + 1] = str(clip if onto_input != "--out" else work)
    before = {p: digest(p) for p in (clip, work / "edit.json")}
    main(args + (["--overwrite"] if overwrite else []))
    assert {p: digest(p) for p in before} == before
    assert not list(work.rglob(f"*{PARTIAL}"))


# ----------------------------------------------------------------------- kills and Ctrl-C
def _spawn(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "sp_core.cli", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


@pytest.mark.parametrize("delay", [0.3, 0.9, 1.5, 2.2, 3.0])
def test_sigkill_leaves_outputs_absent_old_or_complete(short_clip, tmp_path, delay):
    reference = tmp_path / "reference"
    reference.mkdir()
    outputs = {"--json": "k.json", "--bvh": "r.bvh", "--residual": "res.npy"}
    base = ["reduce", str(short_clip), "--keys", "9", "--tangents", "broken"]
    # the reference runs in a fresh process too: a test process that has loaded other native
    # libraries (bpy sets its own floating-point modes) may round the last digit differently
    made = _spawn([*base, *[a for f, n in outputs.items() for a in (f, str(reference / n))]],
                  tmp_path)
    _, err = made.communicate(timeout=600)
    assert made.returncode == 0, err
    work = tmp_path / "work"
    work.mkdir()
    for name in outputs.values():  # an earlier run's files, to be replaced
        (work / name).write_bytes(b"old")
    process = _spawn([*base, *[a for f, n in outputs.items() for a in (f, str(work / n))],
                      "--overwrite"], tmp_path)
    time.sleep(delay)
    process.kill()
    process.wait()
    for name in outputs.values():
        data = (work / name).read_bytes()
        assert data == b"old" or _same_result(data, (reference / name).read_bytes(), name), name
    leftovers = [p.name for p in work.iterdir() if p.name not in outputs.values()]
    assert all(name.endswith(PARTIAL) for name in leftovers)
    # the next write of the same file clears what the killed writer left
    assert main([*base, "--json", str(work / "k.json"), "--overwrite"]) == 0
    assert not list(work.glob(f".k.json.*{PARTIAL}"))


def _same_result(data: bytes, reference: bytes, name: str) -> bool:
    """Complete and equal to a reference run (files depend only on input and options)."""
    return data == reference


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(status.parent.name))
    return found


def _command_line(pid: int) -> str | None:
    """The process' command line, None once it has gone (a child may end while we look)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None


def _state(pid: int) -> str | None:
    """The process' state letter (``Z``: a zombie), None once it has gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _batch_folder(short_clip: Path, tmp_path: Path, count: int) -> Path:
    folder = tmp_path / "takes"
    folder.mkdir()
    for i in range(count):
        (folder / f"take{i}.bvh").write_bytes(short_clip.read_bytes())
    return folder


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to find the workers")
def test_workers_die_with_a_killed_batch(short_clip, tmp_path):
    folder = _batch_folder(short_clip, tmp_path, 6)
    process = _spawn(["batch", str(folder), "--out", str(tmp_path / "out"), "--workers", "2"],
                     tmp_path)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        # forked workers carry the batch's command line, spawned ones spawn_main's; a spawning
        # pool also has a resource tracker, which is not a worker
        workers = [c for c, line in ((c, _command_line(c)) for c in _children(process.pid))
                   if line is not None and "resource_tracker" not in line]
        time.sleep(0.1)
    assert len(workers) == 2
    process.kill()
    process.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    alive = [w for w in workers if _state(w) not in (None, "Z")]
    assert alive == []


@pytest.mark.parametrize("sent_signal, status, said", [
    (signal.SIGINT, 130, "Ctrl-C"),  # the terminal sends it to the whole group
    # what a farm's manager sends to stop a job (the batch died without a summary)
    (signal.SIGTERM, 143, "SIGTERM")])
def test_ctrl_c_stops_a_batch_and_writes_what_finished(short_clip, tmp_path, sent_signal,
                                                        status, said):
    folder = _batch_folder(short_clip, tmp_path, 8)
    out = tmp_path / "out"
    process = _spawn(["batch", str(folder), "--out", str(out), "--workers", "2", "--keys", "8"],
                     tmp_path)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list(out.glob("*.reduced.bvh"))) < 2:
        time.sleep(0.05)
    time.sleep(0.3)  # the parent has heard of the finished clips
    os.killpg(process.pid, sent_signal)
    sent = time.monotonic()
    _, err = process.communicate(timeout=30)
    stopped = time.monotonic() - sent
    assert process.returncode == status, err
    assert stopped < 10.0, stopped  # the remaining takes are not waited for (generous: CI is busy)
    assert f"takes reduced before {said}; summary in" in err.decode()
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8
    done = [r for r in rows if r["status"] == "ok"]
    assert done and any(r["status"] == "not run: interrupted" for r in rows)
    assert all(r["status"] in ("ok", "not run: interrupted") for r in rows)  # none "crashed"
    assert not list(out.glob(f".*{PARTIAL}"))
    for row in done:  # every output of a finished clip is complete
        assert read_bvh(row["reduced_bvh"]).n_frames == 240


def test_ctrl_c_ends_an_analysis_at_once(tmp_path):
    long = tmp_path / "long.bvh"
    write_bvh(_longer(read_bvh(ROOT / "examples" / "cmu_131_01.bvh"), 4), long)
    # the exact space (both limits given: no automatic window) of the slowest cost, far longer
    # than 4 s (the default line-sse analysis of this take now ends within 4 s)
    process = _spawn(["analyze", str(long), "--json", str(tmp_path / "a.json"),
                      "--max-keys", "1500", "--max-span", "3975", "--cost", "curve-max"],
                     tmp_path)
    time.sleep(4.0)  # inside the kernels by now
    os.killpg(process.pid, signal.SIGINT)
    sent = time.monotonic()
    process.communicate(timeout=60)
    assert time.monotonic() - sent < 5.0  # the whole analysis takes far longer; CI may be busy
    assert process.returncode in (-signal.SIGINT, 130)
    assert not (tmp_path / "a.json").exists() and not list(tmp_path.glob(f".*{PARTIAL}"))


def _rebuilt(clip, channels: np.ndarray, offsets: np.ndarray | None = None):
    from sp_core.clip import Clip

    return Clip(clip.node_names, clip.parents, clip.offsets if offsets is None else offsets,
                clip.end_sites, clip.channel_names, channels, clip.fps, clip.frame_time,
                name=clip.name)


def _longer(clip, times: int):
    return _rebuilt(clip, np.concatenate([clip.raw_channels] * times))


# --------------------------------------------------------------------- values that mean nothing
@pytest.mark.parametrize("args, message", [
    (["--keys", "0"], "--keys must be a whole number >= 2, got 0"),
    (["--keys", "-3"], "--keys must be a whole number >= 2, got -3"),
    (["--keys", "1"], "--keys must be a whole number >= 2, got 1"),
    (["--keys", "100000"], "--keys 100000: frames 0..239 hold 2 to 240 keyframes"),
    (["--ratio", "0"], "--ratio must be a number in (0, 1], got 0"),
    (["--max-keys", "0"], "--max-keys must be a whole number >= 2, got 0"),
    (["--max-keys", "-1"], "--max-keys must be a whole number >= 2, got -1"),
    (["--keys", "30", "--max-keys", "20"], "--keys 30 is more than --max-keys 20"),
    (["--layered", "--leading", "Head", "--accuracy", "nan"],
     "--accuracy must be a number in (0, 1], got nan"),
    (["--layered", "--leading", "Head", "--accuracy", "-1"],
     "--accuracy must be a number in (0, 1], got -1"),
    (["--layered", "--leading", "Head", "--significance", "nan"],
     "--significance must be a number in [0, 1), got nan"),
    (["--leading", "Head"], "--leading is used only with --layered"),
    (["--frames", "0,100,239", "--pins", "50"], "--frames gives the keys itself: --pins"),
    (["--frames", "0,100,239", "--range", "0:200"], "--frames gives the keys itself: --range"),
    (["--frames", "0,100,239", "--layered"], "--frames gives the keys itself: --layered"),
    # a frame given twice is a typo more likely than a wish (it was dropped without a word)
    (["--frames", "0,100,100,239"], "--frames lists frame 100 twice; give each frame once"),
    (["--pins", "50,60,50,60"], "--pins lists frames 50, 60 twice; give each frame once"),
    (["--layered", "--leading", "Head", "--pins", "50"],
     "--pins is not supported with --layered"),
    (["--layered", "--leading", "Head", "--cost", "line-max"],
     "--cost is not supported with --layered"),
    # typed, a default is as unused as any other value (both were run without a word)
    (["--layered", "--leading", "Head", "--cost", "line-sse"],
     "--cost is not supported with --layered"),
    (["--layered", "--leading", "Head", "--tolerance", "2,20"],
     "--tolerance does not apply with --layered"),
    (["--world-iterations", "-1"], "--world-iterations must be a whole number in [1, 100]"),
    (["--time-scale", "nan"], "--time-scale must be a number in [0, 1e+06], got nan"),
])
def test_bad_values_are_refused_with_one_line(short_clip, tmp_path, capsys, args, message):
    code, out, err = run(["reduce", str(short_clip), *args, "--json",
                          str(tmp_path / "k.json")], capsys)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--eigen", "1"], "--eigen must be a whole number in [2, 500], got 1"),
    (["--eigen", "-1"], "--eigen must be a whole number in [2, 500], got -1"),
    (["--sigma", "0"], "--sigma must be a number in [1e-06, 1e+06], got 0"),
])
def test_bad_wand_values_are_refused(short_clip, tmp_path, capsys, args, message):
    (tmp_path / "edit.json").write_text('{"offsets": {"Hips.Zrotation": 10}}')
    code, _, err = run(["propagate", str(short_clip), "--frame", "10", "--edit",
                        str(tmp_path / "edit.json"), "--bvh", str(tmp_path / "e.bvh"), *args],
                       capsys)
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "e.bvh").exists()


def test_python_api_refuses_nan_k_float_frames_and_bad_iterations(sample_clip):
    session = Session(StandaloneHost(sample_clip.sub_range(0, 199)), SUGGESTED)
    session.analyze()
    for bad in (float("nan"), 2.5, "x", True):
        with pytest.raises(OptionError, match="K must be a whole number"):
            session.set_k(bad)
    with pytest.raises(OptionError, match=r"K must be a whole number in \[2, 100\] for this "
                                          r"analysis, got 500"):
        session.set_k(500)
    with pytest.raises(SelectionError, match="K must be a whole number, got nan"):
        session.space.error(float("nan"))
    from sp_core.reduction import reduce

    with pytest.raises(ReductionError, match="keyframes must be whole frame numbers, got 10.5"):
        reduce(sample_clip, [0, 10.5, 100])
    with pytest.raises(ReductionError, match="world_iterations must be a whole number >= 1, "
                                             "got -1"):
        reduce(sample_clip, [0, 100], world_iterations=-1)


# ------------------------------------------------------------------------------- crashes
def _clip_text(frames: int) -> str:
    text = (ROOT / "examples" / "cmu_131_01.bvh").read_text()
    head, motion = text.split("MOTION")
    rows = motion.strip().splitlines()
    return head + f"MOTION\nFrames: {frames}\n{rows[1]}\n" + "".join(
        r + "\n" for r in rows[2:2 + frames])


@pytest.mark.parametrize("frames", [0, 1])
@pytest.mark.parametrize("command", [["analyze"], ["reduce", "--keys", "2"]])
def test_empty_and_one_frame_clips_get_a_message(tmp_path, capsys, frames, command):
    path = tmp_path / f"f{frames}.bvh"
    path.write_text(_clip_text(frames))
    code, _, err = run([command[0], str(path), *command[1:]], capsys)
    assert code == 2
    holds = "frames 0..0 hold 1 frame" if frames else "there are no frames"  # (not 0..-1)
    assert err == (f"salient-poses: error: {path}: {holds}; an analysis needs at least 2: "
                   "choose a longer range or another clip\n")


def test_a_two_thousand_joint_chain_reads(tmp_path):
    n = 2000
    lines = ["HIERARCHY", "ROOT j0", "{", "OFFSET 0 0 0",
             "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]
    for i in range(1, n):
        lines += [f"JOINT j{i}", "{", "OFFSET 0 1 0", "CHANNELS 3 Zrotation Xrotation Yrotation"]
    lines += ["End Site", "{", "OFFSET 0 1 0", "}"] + ["}"] * n
    row = " ".join(["0"] * (6 + 3 * (n - 1)))
    path = tmp_path / "chain.bvh"
    path.write_text("\n".join(lines) + "\nMOTION\nFrames: 3\nFrame Time: 0.04\n"
                    + f"{row}\n" * 3)
    clip = read_bvh(path)
    assert clip.n_nodes == n + 1 and clip.parents[-1] == n - 1
    assert clip.positions[0, -1, 1] == pytest.approx(n)


def test_a_five_hundred_joint_chain_is_fitted_in_channel_space_with_a_note(tmp_path):
    """The world fit grows with the cube of the skeleton's channels: a 500-joint chain would take
    minutes, so it is fitted in channel space and the result says so; the sample (a character
    rig) keeps the world fit."""
    from sp_core.reduction import WORLD_FIT_FLOP_LIMIT, reduce, world_fit_flops

    n, frames = 500, 30
    rotations = "CHANNELS 3 Zrotation Xrotation Yrotation"
    lines = ["HIERARCHY", "ROOT j0", "{", "OFFSET 0 0 0", rotations]
    for i in range(1, n):
        lines += [f"JOINT j{i}", "{", "OFFSET 0 1 0", rotations]
    lines += ["End Site", "{", "OFFSET 0 1 0", "}"] + ["}"] * n
    angles = 3.0 * np.sin(np.linspace(0, 3, frames)[:, None] + np.arange(3 * n)[None, :])
    path = tmp_path / "chain.bvh"
    path.write_text("\n".join(lines) + f"\nMOTION\nFrames: {frames}\nFrame Time: 0.04\n"
                    + "".join(" ".join(f"{v:.4f}" for v in row) + "\n" for row in angles))
    chain = read_bvh(path)
    free = np.ones(chain.n_channels, bool)
    assert world_fit_flops(chain, 6, frames, free, 12) > WORLD_FIT_FLOP_LIMIT
    reduction = reduce(chain, [0, 6, 12, 18, 24, 29])
    assert reduction.space == "channel"
    assert reduction.notes[0].startswith("fitted in channel space: a world fit of 1500 channels "
                                         "and 6 keys needs about ")
    sample = read_bvh(ROOT / "examples" / "cmu_131_01.bvh")
    assert world_fit_flops(sample, 100, sample.n_frames, np.ones(sample.n_channels, bool),
                           12) < WORLD_FIT_FLOP_LIMIT / 10


# ------------------------------------------------------------------------------- precision
def test_bvh_round_trip_keeps_tiny_units(sample_clip, tmp_path):
    """A clip in metres x 1e-6 keeps its offsets and values to 1e-9 relative."""
    positions = ~sample_clip.is_rotation_channel()
    channels = sample_clip.raw_channels.copy()
    channels[:, positions] *= 1e-6
    tiny = _rebuilt(sample_clip, channels, sample_clip.offsets * 1e-6)
    write_bvh(tiny, tmp_path / "tiny.bvh", raw=True)
    back = read_bvh(tmp_path / "tiny.bvh")
    np.testing.assert_allclose(back.offsets, tiny.offsets, rtol=1e-9, atol=0)
    np.testing.assert_allclose(back.raw_channels, tiny.raw_channels, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("frames", [0, 1])
def test_the_viewer_refuses_a_clip_it_cannot_show(tmp_path, capsys, frames):
    path = tmp_path / f"f{frames}.bvh"
    path.write_text(_clip_text(frames))
    code, _, err = run(["view", str(path), "--screenshot", str(tmp_path / "v.png")], capsys)
    holds = f"{frames} frame{'s' if frames != 1 else ''}"
    assert code == 2
    assert err == f"salient-poses: error: {path} holds {holds}; the viewer needs at least 2\n"
    assert not (tmp_path / "v.png").exists()

