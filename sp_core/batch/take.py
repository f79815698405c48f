"""One take of a batch: run its job, turn the outcome into a summary row, never raise."""

from __future__ import annotations

import time

from sp_core.errors import SalientPosesError, said
from sp_core.jobs import Job, run_job
from sp_core.options import flag_of
from sp_core.reduction import Reduction


def reduction_row(reduction: Reduction) -> dict[str, object]:
    """The summary columns of one reduction: frames of its range, keyframes, keys written
    (pose keys, corrective keys and their total), errors in mm of what is written (numbers,
    rounded to 0.1 µm; none where the character's size is unknown: they were scene units)
    and the notes of its analysis and fit (a long take's window, a still take), joined by
    "; ". ``keys`` is K: in the keyposes + breakdowns mode the keyposes, as K counts them
    everywhere else (it held the breakdowns too)."""
    m = reduction.metrics
    return {"frames": len(reduction.frames), "keys": reduction.curves.k,
            "pose_keys": m.pose_keys, "corrective_keys": m.corrective_keys,
            "total_keys": m.keys,
            "mean_mm": round(m.mean_mm, 4) if m.scaled else None,
            "max_mm": round(m.max_mm, 4) if m.scaled else None,
            "notes": "; ".join(reduction.notes)}


def reduce_one(job: Job) -> dict[str, object]:
    """Run one batch job; never raises (failures become a status with the message)."""
    started = time.perf_counter()
    row: dict[str, object] = {"clip": job.input, "status": "ok"}
    try:
        result = run_job(job)
        assert result.reduction is not None
        row.update(reduction_row(result.reduction))
    except (SalientPosesError, OSError) as exc:
        row["status"] = f"failed: {said(exc, flag_of)}"  # a command line's batch: its flags
    except Exception as exc:  # noqa: BLE001 - one bad clip must not stop the batch
        stop = interrupted(exc)
        if stop is not None:
            raise stop from exc
        row["status"] = f"failed: internal error {type(exc).__name__}: {exc}"
    row["seconds"] = round(time.perf_counter() - started, 3)
    return row


def interrupted(error: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or the batch's SIGTERM, a ``KeyboardInterrupt`` too) that ``error`` came of,
    if any: a numba kernel that the signal interrupts returns as a ``SystemError`` ("returned a
    result with an exception set") whose cause is the interrupt, which a take's "never raise"
    would otherwise take for a failure."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
