"""The manifest of a batch's output folder: what each take's job was, and whether it is done.

``OUT/manifest.json`` records, per input, the input's checksum, the options digest, the
outputs and the status. A re-run skips a take whose record is ``ok`` with the same checksum,
the same options and its outputs present, and redoes everything else (changed, failed,
interrupted). Outputs planned in the manifest belong to the batch, so a re-run may replace them
without ``--overwrite``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sp_core.io.atomic import write_text
from sp_core.jobs import Job

MANIFEST = "manifest.json"
VERSION = 1


def checksum(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Manifest:
    """Load, query and update ``out/manifest.json`` (written atomically after every change).

    Parameters
    ----------
    out : Path
        The batch's output folder.
    """

    def __init__(self, out: Path) -> None:
        self.path = out / MANIFEST
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            try:
                record = json.loads(self.path.read_text(encoding="utf-8"))
                if record.get("version") == VERSION:
                    self.entries = dict(record["takes"])
            except (OSError, ValueError, KeyError, TypeError):
                self.entries = {}  # unreadable: every take is redone, nothing is trusted

    def owns(self, path: str) -> bool:
        """``path`` is an output this batch planned or wrote."""
        return any(path in entry["outputs"] for entry in self.entries.values())

    def done(self, job: Job, sha: str) -> dict[str, Any] | None:
        """The recorded summary row if ``job`` is done for this input and these options."""
        entry = self.entries.get(job.input)
        if entry is None or entry["status"] != "ok" or entry["checksum"] != sha or \
                entry["options"] != job.options.digest():
            return None
        if sorted(entry["outputs"]) != sorted(p for _, p in job.outputs()) or \
                not all(Path(p).exists() for p in entry["outputs"]):
            return None
        return dict(entry["row"])

    def plan(self, jobs: list[Job], sums: dict[str, str]) -> None:
        """Record ``jobs`` as pending (their outputs become the batch's own) and save."""
        for job in jobs:
            self.entries[job.input] = {"checksum": sums[job.input],
                                       "options": job.options.digest(),
                                       "outputs": [p for _, p in job.outputs()],
                                       "status": "pending", "row": {}}
        self.save()

    def record(self, job: Job, row: dict[str, object]) -> None:
        """Record a finished job's status and summary row, and save."""
        entry = self.entries[job.input]
        entry["status"] = "ok" if row.get("status") == "ok" else "failed"
        entry["row"] = row
        self.save()

    def save(self) -> None:
        write_text(self.path, json.dumps({"version": VERSION, "takes": self.entries},
                                         indent=1) + "\n")
