"""``salient-poses batch``: one reduce job per take, resumable, on a process pool or Dask.

Everything that can be checked is checked before the first take starts (options, the output
folder, outputs that would replace an input or files this batch did not write, the memory the
workers would need). Each take's outputs are written atomically; a take that fails is recorded
and the rest go on; ``summary.csv`` and ``summary.json`` list every take.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from sp_core.batch.executors import cores, run_dask, run_local
from sp_core.batch.manifest import Manifest, checksum
from sp_core.batch.take import reduce_one, reduction_row  # noqa: F401 - re-exported
from sp_core.errors import OptionError
from sp_core.io.atomic import OutputError, remove_stale_partials, write_text
from sp_core.io.readers import READERS, supported
from sp_core.jobs import Job, guard_outputs
from sp_core.options import Options

SUMMARY_FIELDS = ("clip", "frames", "keys", "pose_keys", "corrective_keys", "total_keys",
                  "mean_mm", "max_mm", "seconds", "status")
OUTPUT_SUFFIXES = (".reduced.bvh", ".keys.json")
#: share of the machine's memory the workers' analyses may use together
MEMORY_SHARE = 0.8


def collect_inputs(inputs: list[str], out: Path | None = None) -> list[Path]:
    """The motion files named, and those inside named folders (sorted), without repeats and
    without a batch's own outputs: a folder walk skips the output folder ``out`` and files named
    like batch outputs (``*.reduced.bvh``); files named explicitly are always taken."""
    found: list[Path] = []
    out_real = Path(os.path.realpath(out)) if out is not None else None
    for item in inputs:
        path = Path(item)
        if not path.is_dir():
            found.append(path)
            continue
        for candidate in sorted(path.rglob("*")):
            real = Path(os.path.realpath(candidate))
            if not supported(candidate) or candidate.name.lower().endswith(OUTPUT_SUFFIXES):
                continue
            if out_real is not None and out_real != Path(os.path.realpath(path)) and \
                    out_real in real.parents:
                continue
            found.append(candidate)
    return list(dict.fromkeys(found))


def _output_stem(path: Path, taken: set[str]) -> str:
    stem = path.stem
    name, n = stem, 2
    while name in taken:  # two inputs with one name in different folders
        name = f"{stem}_{n}"
        n += 1
    taken.add(name)
    return name


def batch_jobs(paths: list[Path], out: Path, options: Options) -> list[Job]:
    """One reduce job per input, writing ``out/STEM.keys.json`` and ``out/STEM.reduced.bvh``.

    The jobs may replace their outputs: :func:`run_batch` has decided which files are the
    batch's own (its manifest) or may go (``--overwrite``) before any take starts.
    """
    taken: set[str] = set()
    jobs = []
    for path in paths:
        stem = _output_stem(path, taken)
        jobs.append(Job(str(path), options.replace(json=str(out / f"{stem}.keys.json"),
                                                   bvh=str(out / f"{stem}.reduced.bvh"),
                                                   overwrite=True), "reduce"))
    return jobs


def write_summary(out: Path, rows: list[dict[str, object]],
                  extra: dict[str, Any] | None = None) -> None:
    """``out/summary.csv`` (columns :data:`SUMMARY_FIELDS`) and ``out/summary.json`` (the same
    rows with counts), both atomic."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=SUMMARY_FIELDS, restval="", lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_text(out / "summary.csv", text.getvalue())
    counts = {"takes": len(rows),
              "ok": sum(r.get("status") == "ok" for r in rows),
              "failed": sum(str(r.get("status", "")).startswith("failed") for r in rows)}
    write_text(out / "summary.json", json.dumps({**counts, **(extra or {}), "rows": rows},
                                                indent=1) + "\n")


class _Reporter:
    """Progress on a terminal (a tqdm bar with done / failed), quiet on a pipe, or one JSON
    line per event with ``--json-log``."""

    def __init__(self, total: int, skipped: int, json_log: bool) -> None:
        self.json_log = json_log
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
        print(json.dumps({"event": name, **fields}), flush=True)

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


def _check_memory(options: Options, workers: int) -> None:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return
    need = workers * options.analysis.memory_gib
    if need > MEMORY_SHARE * total:
        raise OptionError(f"{workers} workers x --memory-gib {options.analysis.memory_gib:g} = "
                          f"{need:.1f} GiB, more than {MEMORY_SHARE:.0%} of this machine's "
                          f"{total:.1f} GiB; lower --workers or --memory-gib")


def run_batch(inputs: list[str], options: Options) -> int:
    """Reduce every input into ``options.batch.out``; 1 if any take failed, 130 if
    interrupted, else 0. Takes already done with the same input and options are skipped."""
    batch = options.batch
    assert batch.out is not None
    out = Path(batch.out)
    paths = collect_inputs(inputs, out)
    if not paths:
        raise OptionError(f"no motion files ({', '.join(sorted(READERS))}) found in the inputs "
                          "(the output folder's own files are not inputs)")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a folder")
    workers = batch.workers or cores()
    if batch.scheduler is not None and batch.scheduler.startswith("local:"):
        count = batch.scheduler.partition(":")[2]
        if not count.isdigit() or int(count) < 1:
            raise OptionError(f"--scheduler local:N needs N >= 1 worker processes, got "
                              f"{batch.scheduler}")
        workers = int(count)
    _check_memory(options, workers if batch.scheduler is None or
                  batch.scheduler.startswith("local:") else 1)
    jobs = batch_jobs(paths, out, options)
    out.mkdir(parents=True, exist_ok=True)
    for job in jobs:  # an input named like an output, a symlink into out: refused up front
        guard_outputs(job)
    manifest = Manifest(out)
    foreign = [p for job in jobs for _, p in job.outputs()
               if Path(p).exists() and not manifest.owns(p)]
    if foreign and not options.output.overwrite:
        raise OutputError(f"{out} already holds {len(foreign)} file(s) this batch did not write "
                          f"(e.g. {foreign[0]}); add --overwrite to replace them or choose "
                          "another --out")
    sums: dict[str, str] = {}
    for job in jobs:
        try:
            sums[job.input] = checksum(job.input)
        except OSError as exc:
            sums[job.input] = f"unreadable: {exc.strerror}"
    earlier = {job.input: manifest.done(job, sums[job.input]) for job in jobs}
    todo = [job for job in jobs if earlier[job.input] is None]
    remove_stale_partials(out)
    manifest.plan(todo, sums)
    rows: dict[str, dict[str, object]] = {}
    reporter = _Reporter(len(jobs), len(jobs) - len(todo), batch.json_log)

    def finished(job: Job, row: dict[str, object]) -> None:
        rows[job.input] = row
        manifest.record(job, row)
        reporter.done(row)

    interrupted = False
    try:
        if batch.scheduler is None:
            run_local(todo, workers, finished)
        else:
            run_dask(todo, batch.scheduler, finished)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        reporter.close()
    remove_stale_partials(out)
    summary = []
    for job in jobs:
        if earlier[job.input] is not None:
            summary.append({**earlier[job.input], "resumed": True})
        else:
            summary.append(rows.get(job.input, {"clip": job.input,
                                                "status": "not run: interrupted"}))
    write_summary(out, summary, {"skipped": len(jobs) - len(todo), "interrupted": interrupted,
                                 "scheduler": batch.scheduler or f"local pool of {workers}"})
    done = sum(row["status"] == "ok" for row in summary)
    failed = sum(str(row["status"]).startswith("failed") for row in summary)
    if batch.json_log:
        reporter.event("finished", takes=len(jobs), ok=done, failed=failed,
                       skipped=len(jobs) - len(todo), interrupted=interrupted)
    if interrupted:
        print(f"interrupted: {done} of {len(jobs)} takes reduced before Ctrl-C; summary in "
              f"{out / 'summary.csv'}", file=sys.stderr)
        return 130
    if not batch.json_log:
        for row in summary:  # which take and why, where the user looks (the CSV has them too)
            status = str(row["status"])
            if status.startswith("failed"):
                reason = status.removeprefix("failed: ")
                clip = str(row["clip"])
                print(f"failed: {reason if clip in reason else f'{clip}: {reason}'}",
                      file=sys.stderr)
        skipped = len(jobs) - len(todo)
        print(f"{done} of {len(jobs)} takes reduced"
              + (f" ({skipped} done earlier, skipped)" if skipped else "")
              + (f", {failed} failed" if failed else "") + f"; summary in {out / 'summary.csv'}")
    return 1 if failed else 0
