"""The in-host batches (``mayapy -m maya_plugin.batch``, ``mobupy -m mobu_plugin.batch``): flags
generated from the options schema, one job per opened scene, the standalone batch's summary."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sp_core.batch.run import TAKE_FIELDS, write_summary
from sp_core.batch.take import interrupted
from sp_core.errors import OptionError, SalientPosesError, said
from sp_core.io.atomic import OutputGuard
from sp_core.jobs import Job
from sp_core.options import (
    HOST,
    Options,
    add_arguments,
    command_line_options,
    flag_of,
    host_fields,
)

HOST_BATCH_OPTIONS = host_fields()


def add_host_batch_options(parser: argparse.ArgumentParser) -> None:
    """Flags of the in-host batch scripts: every option that reaches the hosts, generated from
    the schema, plus ``--preset``."""
    parser.add_argument("--preset", metavar="FILE.toml",
                        help="options from a TOML or JSON preset (flags override it)")
    add_arguments(parser, HOST_BATCH_OPTIONS, required=("out",), front=HOST)


def host_batch_options(args: argparse.Namespace) -> Options:
    """The options of a parsed in-host batch command line; a bad value ends the command with
    one line naming the option and exit status 2, before any scene opens (as argparse does)."""
    try:
        return command_line_options(args, HOST_BATCH_OPTIONS, args.preset)
    except OptionError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None


def run_host_batch(inputs: list[str], options: Options,
                   reduce_one: Callable[[str, Path], dict[str, object]]) -> int:
    """Run ``reduce_one(path, copy)`` on every input scene (``copy``: the path its reduced
    copy is saved to), report progress, write ``out/summary.csv``; 1 if any failed.

    Scenes are saved into ``out`` under their own names (:func:`copy_names`): an input is
    never overwritten, and an existing copy only with ``overwrite``; both are checked before
    the first scene opens.
    """
    assert options.batch.out is not None
    out = Path(options.batch.out)
    guard = OutputGuard(inputs, options.output.overwrite)
    out.mkdir(parents=True, exist_ok=True)
    copies = copy_names(inputs, out)
    for path, copy in zip(inputs, copies, strict=True):
        guard.claim(copy, f"the reduced copy of {path}")
    rows = []
    for i, (path, copy) in enumerate(zip(inputs, copies, strict=True), 1):
        started = time.perf_counter()
        try:
            row = reduce_one(path, copy)
        except (SalientPosesError, OSError) as exc:  # as the standalone batch says them
            row = {"clip": path, "status": f"failed: {said(exc, flag_of)}"}
        except Exception as exc:  # noqa: BLE001 - one bad scene must not stop the batch
            stop = interrupted(exc)
            if stop is not None:
                raise stop from exc
            row = {"clip": path, "status": f"failed: internal error {type(exc).__name__}: {exc}"}
        row.setdefault("clip", path)
        row.setdefault("status", "ok")
        row["seconds"] = round(time.perf_counter() - started, 3)
        rows.append(row)
        print(f"[{i}/{len(inputs)}] {path}: {row['status']}", flush=True)
    write_summary(out, rows, fields=TAKE_FIELDS)
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"{len(rows) - failed} of {len(rows)} reduced; summary in {out / 'summary.csv'}")
    return 1 if failed else 0


def copy_names(inputs: list[str], out: Path) -> list[Path]:
    """Where each input scene's reduced copy is saved: ``out`` / its file name, and for the
    second of one name (``a/shot.ma``, ``b/shot.ma``: sequences keep their shots' names)
    ``shot_2.ma``, ``shot_3.ma``... in the order given, as the standalone batch names its
    takes (the second was refused as the first's output, and no scene ran)."""
    taken: set[str] = set()
    copies = []
    for path in inputs:
        name = Path(path)
        stem, n = name.stem, 1
        while stem.lower() in taken:  # (a case-insensitive file system holds one of both)
            n += 1
            stem = f"{name.stem}_{n}"
        taken.add(stem.lower())
        copies.append(out / f"{stem}{name.suffix}")
    return copies


def host_job(options: Options) -> Job:
    """The job an in-host batch runs on each opened scene: reduce and apply as layers."""
    return Job("", options, "reduce", apply=True)
