"""``salient-poses batch``: one reduce job per take, resumable, on a process pool or Dask.

Everything that can be checked is checked before the first take starts (options, the output
folder, outputs that would replace an input or files this batch did not write, the memory the
workers would need). Each take's outputs are written atomically; a take that fails is recorded
and the rest go on; ``summary.csv`` and ``summary.json`` list every take.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sp_core import version
from sp_core.batch.executors import SchedulerLost, connect, cores, run_dask, run_local
from sp_core.batch.manifest import MANIFEST, Manifest, checksum
from sp_core.batch.take import reduce_one, reduction_row  # noqa: F401 - re-exported
from sp_core.errors import OptionError
from sp_core.io.atomic import (
    OutputError,
    OutputGuard,
    file_identity,
    remove_stale_partials,
    write_text,
)
from sp_core.io.readers import READERS, TAKE_FORMATS, has_takes, supported
from sp_core.jobs import Job
from sp_core.options import Options

#: The summary's columns of any batch's take (the in-host batches' too) ...
TAKE_FIELDS = ("clip", "frames", "keys", "pose_keys", "corrective_keys", "total_keys",
               "mean_mm", "max_mm", "seconds", "status", "notes")
#: ... and of the standalone batch's, whose takes' files are named in its folder (two clips of
#: one name: STEM_2...)
SUMMARY_FIELDS = (*TAKE_FIELDS, "keys_json", "reduced_bvh")
#: The files a batch writes into its folder besides the takes' outputs.
OWN_FILES = ("summary.csv", "summary.json", MANIFEST)
#: The file a running batch holds locked in its folder (kept: see :func:`_folder_lock`).
LOCK = ".salient-poses.lock"
#: What ``--scheduler`` takes besides ``local:N``: a scheduler's address.
SCHEDULER_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss|ucx)://)?(?:\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+)"
                               r":\d{1,5}$")  # (an IPv6 host in brackets)
OUTPUT_SUFFIXES = (".reduced.bvh", ".keys.json")
#: share of the machine's memory the workers' analyses may use together
MEMORY_SHARE = 0.8


def collect_inputs(inputs: list[str], out: Path | None = None,
                   notes: list[str] | None = None) -> list[Path]:
    """The motion files named, and those inside named folders (sorted), as absolute paths
    (a Dask worker may run in another folder), each file once however it is reached (its
    path, a symlink or a hard link: the first name found is kept), without a batch's own
    outputs and without hidden files: a folder walk skips the output folder ``out``, files
    named like batch outputs (``*.reduced.bvh``) and names starting with a dot (macOS's
    ``._take.bvh``); files named explicitly are always taken. ``notes``, if given, gets one
    line for the files named like outputs and one per folder that could not be read (both
    were left out without a word).

    Raises
    ------
    OptionError
        A named input does not exist (a mistyped folder fails no take: it stops the batch
        before any starts).
    """
    found: list[Path] = []
    out_real = Path(os.path.realpath(out)) if out is not None else None
    like_outputs: list[Path] = []
    unread: list[str] = []
    for item in inputs:
        path = Path(os.path.abspath(item))
        if not path.exists():
            raise OptionError(f"input {item} does not exist")
        if not path.is_dir():
            found.append(path)
            continue
        walked = Path(os.path.realpath(path))
        # the output folder is skipped where it lies inside the folder walked; an output folder
        # above it (the shoot's root, the raw takes in a folder of it) holds the whole walk
        skip_out = out_real is not None and walked in out_real.parents
        for candidate in _walk(path, unread):
            real = Path(os.path.realpath(candidate))
            if not supported(candidate) \
                    or any(part.startswith(".") for part in candidate.relative_to(path).parts):
                continue
            if skip_out and out_real in real.parents:
                continue
            if candidate.name.lower().endswith(OUTPUT_SUFFIXES):
                if out_real is None or real.parent != out_real:  # (this batch's: no news)
                    like_outputs.append(candidate)
                continue
            found.append(candidate)
    if notes is not None and like_outputs:
        notes.append(f"note: left out {len(like_outputs)} file(s) named like a batch's output "
                     f"(e.g. {like_outputs[0]}); name them as inputs to reduce them")
    if notes is not None:
        notes += [f"note: cannot read folder {folder}: its takes are left out"
                  for folder in unread]
    seen: set[tuple[int, int] | str] = set()
    unique = []
    for path in found:
        # (an unreadable file, whose take says why, by its resolved path)
        identity = file_identity(path) or os.path.realpath(path)
        if identity not in seen:
            seen.add(identity)
            unique.append(path)
    return unique


def _walk(folder: Path, unread: list[str] | None = None) -> list[Path]:
    """Every file under ``folder`` (sorted), through links to folders too: a shoot's folder
    often links in another day's (``Path.rglob`` does not follow them, and those takes were
    left out without a word). A folder reached again (a link to a folder above it, two links
    to one folder) is walked once, so a link cycle ends. A folder that cannot be listed is
    added to ``unread`` (with why)."""
    files = []
    seen: set[str] = set()

    def cannot(exc: OSError) -> None:
        if unread is not None:
            unread.append(f"{exc.filename} ({exc.strerror or exc})")

    for top, folders, names in os.walk(folder, followlinks=True, onerror=cannot):
        real = os.path.realpath(top)
        if real in seen:
            folders[:] = []
            continue
        seen.add(real)
        folders.sort()
        files += [Path(top, name) for name in names]
    return sorted(files)


def batch_jobs(paths: list[Path], out: Path, options: Options,
               manifest: Manifest | None = None) -> list[Job]:
    """One reduce job per input, writing ``out/STEM.keys.json`` and ``out/STEM.reduced.bvh``.

    Two inputs with one name get ``STEM_2``, ``STEM_3``, ... in the order found; a name the
    ``manifest`` gave an input in an earlier run stays that input's, so adding a clip of the
    same name elsewhere does not move another clip's outputs. The jobs may replace their
    outputs: :func:`run_batch` has decided which files are the batch's own (its manifest) or
    may go (``--overwrite``) before any take starts.
    """
    given = manifest.stems(out) if manifest is not None else {}
    taken = set(given.values())
    jobs = []
    for path in paths:
        stem = given.get(os.path.realpath(path))
        if stem is None:
            stem = name = path.stem
            n = 2
            while stem in taken:  # two inputs with one name in different folders
                stem = f"{name}_{n}"
                n += 1
            taken.add(stem)
        # --take chooses among an FBX file's takes; a BVH file's one motion is read whole
        take = options.input.take if has_takes(path) else None
        jobs.append(Job(str(path), options.replace(json=str(out / f"{stem}.keys.json"),
                                                   bvh=str(out / f"{stem}.reduced.bvh"),
                                                   take=take, overwrite=True), "reduce"))
    return jobs


def _take_note(paths: list[Path], take: str | None) -> str | None:
    """What ``--take`` does in a batch of ``paths``: a line for a folder that mixes files with
    takes (FBX) and without (BVH), whose motion is read whole; None if it applies to all.

    Raises
    ------
    OptionError
        No input has takes, so ``--take`` would choose nothing.
    """
    if take is None:
        return None
    without = [p for p in paths if not has_takes(p)]
    if not without:
        return None
    formats = ", ".join(sorted(TAKE_FORMATS))
    if len(without) == len(paths):
        raise OptionError(f"--take chooses a take of a file that holds several ({formats}); "
                          f"none of the {len(paths)} input(s) does: drop --take")
    return (f"--take {take!r} applies to the {len(paths) - len(without)} input(s) with takes "
            f"({formats}); the other {len(without)} (e.g. {without[0].name}) are read whole")


def write_summary(out: Path, rows: list[dict[str, object]],
                  extra: dict[str, Any] | None = None,
                  fields: tuple[str, ...] = SUMMARY_FIELDS) -> None:
    """``out/summary.csv`` (columns ``fields``) and ``out/summary.json`` (the same rows with
    counts), both atomic."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=fields, restval="", lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    # (a file name that is not UTF-8, from a Windows share, keeps its own bytes: the path in
    # the CSV names the file; strict UTF-8 stopped the batch before its summary)
    write_text(out / "summary.csv", text.getvalue(), errors="surrogateescape")
    counts = {"takes": len(rows),
              "ok": sum(r.get("status") == "ok" for r in rows),
              "failed": sum(str(r.get("status", "")).startswith("failed") for r in rows)}
    write_text(out / "summary.json", json.dumps({**counts, **(extra or {}), "rows": rows},
                                                indent=1) + "\n")


class _Reporter:
    """Progress on a terminal (a tqdm bar with done / failed), quiet on a pipe, or one JSON
    line per event with ``--json-log``."""

    def __init__(self, total: int, skipped: int, json_log: bool) -> None:
        #: True: events on standard output; None: they were, until its reader closed it
        self.json_log: bool | None = json_log
        self.failed = 0
        self.bar = None
        if json_log:
            self.event("start", takes=total, skipped=skipped)
        elif sys.stderr.isatty():
            from tqdm import tqdm

            class Bar(tqdm):
                # no monitor thread: the pool forks its workers only while no other thread runs
                monitor_interval = 0

            self.bar = Bar(total=total, initial=skipped, unit="take", file=sys.stderr,
                           dynamic_ncols=True, desc="batch")

    def event(self, name: str, **fields: object) -> None:
        if self.json_log is None:
            return
        try:
            print(json.dumps({"event": name, **fields}), flush=True)
        except BrokenPipeError:
            # the log's reader is gone (| head -1): the batch goes on and writes its summary
            # (it ended with exit 1 and no word, the previous run's summary left in place)
            self.json_log = None
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # (Python's own flush at exit fails else)
            os.close(devnull)
            print("the --json-log reader closed standard output; the batch goes on without "
                  "the log and writes its summary", file=sys.stderr)

    def done(self, row: dict[str, object]) -> None:
        self.failed += row["status"] != "ok"
        if self.json_log:
            self.event("take", **row)
        elif self.bar is not None:
            self.bar.set_postfix(failed=self.failed, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _machine_memory() -> float | None:
    """This machine's memory in GiB (None where it cannot be asked)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def _check_memory(options: Options, workers: int) -> None:
    total = _machine_memory()
    if options.keys.frames is not None or total is None:
        return  # keys given: no analysis, whose memory --memory-gib bounds
    need = workers * options.analysis.memory_gib
    if need > MEMORY_SHARE * total:
        raise OptionError(f"{workers} workers x --memory-gib {options.analysis.memory_gib:g} = "
                          f"{need:.1f} GiB, more than {MEMORY_SHARE:.0%} of this machine's "
                          f"{total:.1f} GiB; lower --workers or --memory-gib")


def _default_workers(options: Options) -> int:
    """One worker per core, as many as fit :data:`MEMORY_SHARE` of the memory at
    ``--memory-gib`` each (the default on a 16-core, 32 GiB machine was refused as needing
    32 GiB; only a ``--workers`` typed is refused), at least one."""
    count, total = cores(), _machine_memory()
    if options.keys.frames is not None or total is None:
        return count  # (no analysis: nothing --memory-gib bounds)
    return max(1, min(count, int(MEMORY_SHARE * total // options.analysis.memory_gib)))


def _workers(options: Options) -> int:
    """The worker processes of the batch (the local pool's, or a LocalCluster's).

    Raises
    ------
    OptionError
        ``--workers`` with ``--scheduler`` (the cluster's workers run the takes), or a
        scheduler that is neither ``local:N`` nor an address.
    """
    batch = options.batch
    if batch.scheduler is None:
        return batch.workers or _default_workers(options)
    if batch.workers is not None:
        raise OptionError("--workers sizes the local process pool; with --scheduler the "
                          "cluster's workers run the takes (local:N starts N); drop one of them")
    if batch.scheduler.startswith("local:"):
        count = batch.scheduler.partition(":")[2]
        if not count.isdigit() or int(count) < 1:
            raise OptionError(f"--scheduler local:N needs N >= 1 worker processes, got "
                              f"{batch.scheduler}")
        return int(count)
    if not SCHEDULER_ADDRESS.match(batch.scheduler):
        raise OptionError(f"--scheduler takes local:N or a running scheduler's address such as "
                          f"tcp://HOST:8786, got {batch.scheduler!r}")
    port = int(batch.scheduler.rpartition(":")[2])
    if not 0 < port < 65536:  # (port 99999 waited 20 s for a scheduler that cannot be there)
        raise OptionError(f"--scheduler {batch.scheduler}: port {port} is not a port (1 to "
                          "65535)")
    return 1


class Terminated(KeyboardInterrupt):
    """SIGTERM (what a farm's manager sends to stop a job), taken as Ctrl-C is: the batch
    writes its summary and stops its workers."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signum: int, _frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_batch(inputs: list[str], options: Options, preset: str | None = None) -> int:
    """Reduce every input into ``options.batch.out``; 1 if any take failed, 130 if
    interrupted (143 by SIGTERM), else 0. Takes already done with the same input and options
    are skipped. ``preset``: the options' preset file, an input no take may write over."""
    batch = options.batch
    if batch.out is None:
        raise OptionError("a batch needs out: the folder it writes into")
    out = Path(os.path.abspath(batch.out))  # (a Dask worker may run in another folder)
    workers = _workers(options)
    if batch.scheduler is None and batch.workers is None and workers < cores():
        print(f"note: {workers} workers, not one per core ({cores()}): each may use "
              f"--memory-gib {options.analysis.memory_gib:g}, and {MEMORY_SHARE:.0%} of this "
              "machine's memory holds that many", file=sys.stderr)
    skipped: list[str] = []
    paths = collect_inputs(inputs, out, skipped)
    for line in skipped:
        print(line, file=sys.stderr)
    if not paths:
        raise OptionError(f"no motion files ({', '.join(sorted(READERS))}) found in the inputs "
                          "(the output folder's own files are not inputs)")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a folder")
    take_note = _take_note(paths, options.input.take)
    # (no more workers start than there are takes: 12 workers for 2 takes were refused as
    # needing 24 GiB)
    _check_memory(options, min(workers if batch.scheduler is None or
                               batch.scheduler.startswith("local:") else 1, len(paths)))
    manifest = Manifest(out)
    if manifest.unreadable is not None and not options.output.overwrite:
        raise OutputError(f"{manifest.path} is not this tool's batch manifest or is damaged "
                          f"({manifest.unreadable}); add --overwrite to start the batch afresh "
                          "there or choose another --out")
    made = [folder for folder in (out, *out.parents) if not folder.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make --out {out}: {exc.strerror or exc}") from None
    try:
        with _folder_lock(out):
            # (read again under the lock: a batch that held it may have written it since)
            manifest = Manifest(out)
            return _run_locked(paths, out, options, preset, manifest, take_note, workers)
    except Exception:
        # refused before writing anything (no scheduler at the address...): the folders this
        # batch made go again, rather than an empty one holding only the lock file
        if made and {p.name for p in out.iterdir()} <= {LOCK}:
            with contextlib.suppress(OSError):
                (out / LOCK).unlink(missing_ok=True)
                for folder in made:  # (deepest first)
                    folder.rmdir()
        raise


@contextlib.contextmanager
def _folder_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock for the batch (an advisory ``flock``; where there is none, no
    lock): a second batch into one folder at the same time is refused (both ended with exit 0
    and a manifest and summaries that lost one batch's takes). The file stays: removing it
    would let a batch waiting on the old one run beside one on a new one."""
    try:
        import fcntl
    except ImportError:  # (Windows)
        yield
        return
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out} is not writable: Permission denied")
    try:
        # read-only, and readable by all (flock needs no more): a folder several accounts
        # write into is not locked out by the file another account's batch made
        descriptor = os.open(out / LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
        handle = os.fdopen(descriptor, "rb")
    except OSError as exc:  # (it said "Permission denied: OUT/.salient-poses.lock")
        raise OutputError(f"--out {out} is not writable: {exc.strerror or exc}") from None
    with handle:
        locked = True
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(f"another batch is writing into {out}; wait for it to end or "
                              "choose another --out") from None
        except OSError:  # a file system without locks (NFS mounted nolock): no lock
            locked = False
            print(f"note: {out} cannot be locked here; do not start another batch into it "
                  "while this one runs", file=sys.stderr)
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


#: What a take's input is when it is not a regular file (by ``stat.S_IFMT``).
_NOT_FILES = {stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
              stat.S_IFBLK: "a device", stat.S_IFDIR: "a folder"}


def _cannot_run(job: Job, out: Path) -> str | None:
    """Why ``job`` cannot run (its failed status, naming its input), or None.

    An input that is not a regular file (a named pipe called ``take.bvh`` blocked the batch
    before any take, reading it for its checksum), and an output name longer than the file
    system allows (a 245-character take name: the whole batch was refused with a bare
    "File name too long").
    """
    try:
        mode = os.stat(job.input).st_mode
    except OSError:
        mode = None  # (unreadable: its take says why when it reads it)
    if mode is not None and not stat.S_ISREG(mode):
        kind = _NOT_FILES.get(stat.S_IFMT(mode), "not a file")
        return (f"failed: {job.input} is not a regular file ({kind}); a take is read from a "
                "file")
    try:
        limit = os.pathconf(out, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # pragma: no cover - not POSIX
        limit = 255
    for _flag, path in job.outputs():
        size = len(os.fsencode(os.path.basename(path)))
        if size > limit:
            return (f"failed: {job.input}: its output name {os.path.basename(path)[:24]}... "
                    f"would be {size} bytes, more than the {limit} a file name may have in "
                    f"{out}; rename the input")
    return None


def _discard(paths: list[str], out: Path, keep: set[str]) -> None:
    """Remove the files ``paths`` that are in ``out`` itself and are none of ``keep`` (inputs,
    other takes' outputs; compared by the file, however named); a file that cannot be
    removed stays (the manifest no longer lists it as the take's)."""
    folder = os.path.realpath(out)
    kept = {file_identity(p) for p in keep} - {None}
    for path in dict.fromkeys(paths):
        if os.path.realpath(os.path.dirname(path)) != folder or file_identity(path) in kept:
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)


def _with_outputs(job: Job, row: dict[str, object]) -> dict[str, object]:
    """``row`` with the take's files (two clips of one name: STEM_2...; none for a take that
    wrote none: a failed or interrupted one)."""
    out_files = dict(job.outputs()) if row["status"] == "ok" else {}
    return {**row, "keys_json": out_files.get("--json", ""),
            "reduced_bvh": out_files.get("--bvh", "")}


def _run_locked(paths: list[Path], out: Path, options: Options, preset: str | None,
                manifest: Manifest, take_note: str | None, workers: int) -> int:
    """:func:`run_batch` once its folder is made and locked."""
    batch = options.batch
    jobs = batch_jobs(paths, out, options, manifest)
    # takes that cannot run fail alone, before any reading (a named pipe blocks its reader)
    refused = {job.input: reason for job in jobs
               if (reason := _cannot_run(job, out)) is not None}
    sums: dict[str, str] = {}
    for job in jobs:
        try:
            sums[job.input] = "not read" if job.input in refused else checksum(job.input)
        except OSError as exc:
            sums[job.input] = f"unreadable: {exc.strerror}"
    earlier = {job.input: None if job.input in refused else manifest.done(job, sums[job.input])
               for job in jobs}
    todo = [job for job in jobs if earlier[job.input] is None]
    others = {manifest.version_of(job.input) for job in todo} - {None, version()}
    if others:
        print(f"note: {manifest.path} records takes made by salient-poses "
              f"{', '.join(sorted(map(str, others)))}, not {version()}: they are redone",
              file=sys.stderr)
    runnable = [job for job in todo if job.input not in refused]
    # an input named like an output (any take's: walk.reduced.bvh beside walk.bvh), a symlink
    # into out: refused up front, one guard for the outputs of every take that will run (no
    # flag of its own names a take's output: --out holds them all; the batch replaces its own
    # files itself, and a take done earlier writes nothing: a rerun whose glob now names an
    # output as an input goes on)
    guard = OutputGuard([*map(str, paths), *([preset] if preset else [])], overwrite=True)
    for job in runnable:
        for _flag, path in job.outputs():
            guard.claim(path, "output")
    # (after: an input in the way is refused as such, not offered --overwrite)
    ours = manifest.path.exists() and manifest.unreadable is None
    foreign = [p for job in jobs if job.input not in refused for _, p in job.outputs()
               if Path(p).exists() and not manifest.owns(p)]
    # a summary is the batch's own where its manifest is (a folder of someone else's)
    foreign += [str(out / name) for name in OWN_FILES
                if name != MANIFEST and (out / name).exists() and not ours]
    edited = [p for p in foreign if manifest.edited(p)]
    if edited and not options.output.overwrite:
        raise OutputError(f"{out} holds {len(edited)} output(s) changed since this batch wrote "
                          f"them (e.g. {edited[0]}: edited by hand?); add --overwrite to "
                          "replace them, or move them away")
    if foreign and not options.output.overwrite:
        raise OutputError(f"{out} already holds {len(foreign)} file(s) this batch did not write "
                          f"(e.g. {foreign[0]}); add --overwrite to replace them or choose "
                          "another --out")
    redone = [job for job in runnable if manifest.redone(job, sums[job.input])]
    if redone:
        print(f"note: {len(redone)} take(s) done earlier with other options or input bytes "
              f"are redone and their outputs replaced (e.g. {redone[0].input})",
              file=sys.stderr)
    client = None
    if runnable and batch.scheduler is not None and not batch.scheduler.startswith("local:"):
        client = connect(batch.scheduler)  # (an address with no scheduler changes nothing)
    remove_stale_partials(out)
    # what each take to run had in the folder before: a take that fails removes the files an
    # earlier run made for it (other options or input bytes; the summary listed them as the
    # take's), and those of this run, not the user's files an --overwrite run did not replace
    previous = {job.input: manifest.outputs_of(job.input) for job in todo}
    before = {path: file_identity(path) for job in todo for _, path in job.outputs()}
    inputs = {*(job.input for job in jobs), *([preset] if preset else [])}
    every_output = {path for job in jobs for _, path in job.outputs()}
    manifest.plan(todo, sums)
    if take_note is not None:
        print(take_note, file=sys.stderr)
    rows: dict[str, dict[str, object]] = {}
    reporter = _Reporter(len(jobs), len(jobs) - len(todo), batch.json_log)

    def finished(job: Job, row: dict[str, object]) -> None:
        rows[job.input] = row
        if row["status"] != "ok":
            own = [p for _, p in job.outputs()]
            written = [p for p in own if file_identity(p) not in (None, before[p])]
            _discard([*previous[job.input], *written], out,
                     inputs | (every_output - set(own)))  # (the other takes' outputs)
        manifest.record(job, row)
        reporter.done(_with_outputs(job, row))  # (a log's take event: the summary's row)

    for job in todo:
        if job.input in refused:
            finished(job, {"clip": job.input, "status": refused[job.input]})
    interrupted = terminated = lost = False
    try:
        with _terminate_as_interrupt():
            if not runnable:
                pass  # every take done earlier or refused: no pool, no cluster
            elif batch.scheduler is None:
                run_local(runnable, workers, finished)
            else:
                run_dask(runnable, batch.scheduler, finished, client)
    except SchedulerLost:
        lost = True  # the takes not done stay pending in the manifest: a re-run does them
    except Terminated:
        interrupted = terminated = True
    except KeyboardInterrupt:
        interrupted = True
    finally:
        reporter.close()
        manifest.save()  # (a long manifest's records are not saved after every take)
    remove_stale_partials(out)
    summary = []
    for job in jobs:
        if earlier[job.input] is not None:
            row = {**earlier[job.input], "resumed": True}
        else:
            row = rows.get(job.input, {"clip": job.input, "status": "not run: scheduler lost"
                                       if lost else "not run: interrupted"})
        summary.append(_with_outputs(job, row))
    write_summary(out, summary, {"skipped": len(jobs) - len(todo), "interrupted": interrupted,
                                 "scheduler": batch.scheduler or f"local pool of {workers}",
                                 "tool_version": version()})
    done = sum(row["status"] == "ok" for row in summary)
    failed = sum(str(row["status"]).startswith("failed") for row in summary)
    if reporter.json_log:
        reporter.event("finished", takes=len(jobs), ok=done, failed=failed,
                       skipped=len(jobs) - len(todo), interrupted=interrupted)
    if interrupted:
        print(f"interrupted: {done} of {len(jobs)} takes reduced before "
              f"{'SIGTERM' if terminated else 'Ctrl-C'}; summary in {out / 'summary.csv'}",
              file=sys.stderr)
        return 143 if terminated else 130
    if not reporter.json_log or lost:  # (also when the log's reader went: failures are said)
        for row in summary:  # which take and why, where the user looks (the CSV has them too)
            status = str(row["status"])
            if status.startswith("failed"):
                reason = status.removeprefix("failed: ")
                clip = str(row["clip"])
                print(f"failed: {reason if clip in reason else f'{clip}: {reason}'}",
                      file=sys.stderr)
        if lost:
            print(f"the connection to the Dask scheduler at {batch.scheduler} was lost: "
                  f"{done} of {len(jobs)} takes reduced, {len(jobs) - done - failed} not run "
                  f"(run the command again to do them); summary in {out / 'summary.csv'}",
                  file=sys.stderr)
            return 1
        skipped = len(jobs) - len(todo)
        print(f"{done} of {len(jobs)} takes reduced"
              + (f" ({skipped} done earlier, skipped)" if skipped else "")
              + (f", {failed} failed" if failed else "") + f"; summary in {out / 'summary.csv'}")
    return 1 if failed else 0
