"""``salient-poses batch``: reduce many clips in parallel processes, one summary row each."""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

from sp_core.errors import SalientPosesError

if TYPE_CHECKING:
    from sp_core.reduction import Reduction

SUMMARY_FIELDS = ("clip", "frames", "keys", "mean_mm", "max_mm", "seconds", "status")


def collect_inputs(inputs: list[str]) -> list[Path]:
    """The .bvh files named, and those inside named folders (sorted), without repeats."""
    found: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix.lower() == ".bvh"))
        else:
            found.append(path)
    unique: dict[Path, None] = dict.fromkeys(found)
    return list(unique)


def _output_stem(path: Path, taken: set[str]) -> str:
    stem = path.stem
    name, n = stem, 2
    while name in taken:  # two inputs with one name in different folders
        name = f"{stem}_{n}"
        n += 1
    taken.add(name)
    return name


def reduce_one(path: str, stem: str, out: str, args: argparse.Namespace) -> dict[str, object]:
    """Reduce one clip and write its outputs; never raises (failures become a status)."""
    from sp_core.cli import reduce_from_args
    from sp_core.io.keys import write_reduced_bvh, write_reduction_json

    started = time.perf_counter()
    row: dict[str, object] = {"clip": path, "frames": "", "keys": "", "mean_mm": "",
                              "max_mm": "", "seconds": "", "status": "ok"}
    try:
        clip, reduction, _ = reduce_from_args(argparse.Namespace(**vars(args)), path)
        write_reduction_json(reduction, Path(out) / f"{stem}.keys.json", path, clip.fps)
        write_reduced_bvh(clip, reduction, Path(out) / f"{stem}.reduced.bvh")
        row.update(reduction_row(reduction))
    except (SalientPosesError, OSError) as exc:
        message = str(exc) if isinstance(exc, SalientPosesError) else f"{exc.strerror}: " \
            f"{exc.filename}"
        row["status"] = f"failed: {message}"
    except Exception as exc:  # noqa: BLE001 - one bad clip must not stop the batch
        row["status"] = f"failed: internal error {type(exc).__name__}: {exc}"
    row["seconds"] = f"{time.perf_counter() - started:.3f}"
    return row


def _progress(done: int, total: int, failed: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
                     f"{f', {failed} failed' if failed else ''}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run_batch(args: argparse.Namespace) -> int:
    """Reduce every input; write DIR/summary.csv; 1 if any clip failed, else 0."""
    from sp_core.cli import UsageError

    paths = collect_inputs(args.inputs)
    if not paths:
        raise UsageError("no .bvh files found in the inputs")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    jobs = [(str(p), _output_stem(p, taken)) for p in paths]
    options = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "func"})
    workers = args.workers if args.workers else None
    rows: dict[str, dict[str, object]] = {}
    failed = 0
    _progress(0, len(jobs), 0)
    if workers == 1 or len(jobs) == 1:
        for path, stem in jobs:
            rows[path] = reduce_one(path, stem, str(out), options)
            failed += rows[path]["status"] != "ok"
            _progress(len(rows), len(jobs), failed)
    else:
        # spawn, not fork: numba's OpenMP threads do not survive a fork
        with ProcessPoolExecutor(max_workers=workers,
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(reduce_one, path, stem, str(out), options): path
                       for path, stem in jobs}
            for future in as_completed(futures):
                path = futures[future]
                try:
                    rows[path] = future.result()
                except Exception as exc:  # noqa: BLE001 - a crashed worker fails its clip only
                    rows[path] = {"clip": path, "status": f"failed: worker crashed "
                                                          f"({type(exc).__name__}: {exc})"}
                failed += rows[path]["status"] != "ok"
                _progress(len(rows), len(jobs), failed)
    write_summary(out, [rows[path] for path, _ in jobs])
    print(f"{len(jobs) - failed} of {len(jobs)} clips reduced; summary in {out / 'summary.csv'}")
    return 1 if failed else 0


# ----------------------------------------------------------------- host batches (mayapy, mobupy)
def add_host_batch_options(parser: argparse.ArgumentParser) -> None:
    """Options of the in-host batch scripts (the keyframe choice and the fitting of ``reduce``,
    plus the layer to create)."""
    from sp_core.fitting import FIT_SPACES, SMOOTHNESS, TANGENT_MODES

    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--keys", type=int, metavar="K")
    which.add_argument("--ratio", type=float, metavar="R")
    which.add_argument("--suggested", action="store_true", help="the default")
    parser.add_argument("--nodes", metavar="N1,N2,..",
                        help="roots of the hierarchies to reduce (default: the top level)")
    parser.add_argument("--tangents", choices=TANGENT_MODES, default="unified")
    parser.add_argument("--smoothness", type=float, default=SMOOTHNESS)
    parser.add_argument("--space", choices=FIT_SPACES, default="world")
    parser.add_argument("--residual", action="store_true", help="also write the residual layer")
    parser.add_argument("--layer", default="salientPoses", help="name of the new layer")


def run_host_batch(inputs: list[str], out: Path,
                   reduce_one: Callable[[str, Path], dict[str, object]]) -> int:
    """Run ``reduce_one(path, out)`` on every input, report progress, write
    ``out/summary.csv``; 1 if any failed."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, path in enumerate(inputs, 1):
        started = time.perf_counter()
        try:
            row = reduce_one(path, out)
        except SalientPosesError as exc:
            row = {"clip": path, "status": f"failed: {exc}"}
        except Exception as exc:  # noqa: BLE001 - one bad scene must not stop the batch
            row = {"clip": path, "status": f"failed: {type(exc).__name__}: {exc}"}
        row.setdefault("clip", path)
        row.setdefault("status", "ok")
        row["seconds"] = f"{time.perf_counter() - started:.3f}"
        rows.append(row)
        print(f"[{i}/{len(inputs)}] {path}: {row['status']}", flush=True)
    write_summary(out, rows)
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"{len(rows) - failed} of {len(rows)} reduced; summary in {out / 'summary.csv'}")
    return 1 if failed else 0


def reduction_row(reduction: Reduction) -> dict[str, object]:
    """The summary columns of one reduction: frames of its range, keyframes, errors in mm."""
    return {"frames": len(reduction.frames), "keys": reduction.curves.n_keys,
            "mean_mm": f"{reduction.metrics.mean_mm:.4f}",
            "max_mm": f"{reduction.metrics.max_mm:.4f}"}


def write_summary(out: Path, rows: list[dict[str, object]]) -> None:
    """``out/summary.csv``: one row per input, columns :data:`SUMMARY_FIELDS`."""
    with open(out / "summary.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_FIELDS, restval="")
        writer.writeheader()
        writer.writerows(rows)
