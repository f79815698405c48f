"""The manifest of a batch's output folder: what each take's job was, and whether it is done.

``OUT/manifest.json`` records, per input, the input's checksum, the options digest, the
outputs and the status. A re-run skips a take whose record is ``ok`` with the same checksum,
the same options and its outputs present, and redoes everything else (changed, failed,
interrupted). Outputs planned in the manifest belong to the batch, so a re-run may replace them
without ``--overwrite``, unless one was changed since the batch wrote it (its checksum, recorded
when its take finished, differs: an edit by hand is the user's file).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from sp_core import version
from sp_core.io.atomic import write_text
from sp_core.jobs import Job

MANIFEST = "manifest.json"
VERSION = 1
#: Time between two saves of the records of finished takes as a multiple of what the last save
#: took (:meth:`Manifest.record`): at most a sixth of a batch's time goes to saving.
SAVE_RATIO = 5.0
#: What each take's record holds.
FIELDS = frozenset({"checksum", "options", "outputs", "status", "row"})


def checksum(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _well_typed(entry: dict[str, Any]) -> bool:
    """A take's record holds what this module reads of it, of the types it reads."""
    return (all(isinstance(entry[key], str) for key in ("checksum", "options", "status"))
            and isinstance(entry["row"], dict) and isinstance(entry["outputs"], list)
            and all(isinstance(output, str) for output in entry["outputs"])
            and isinstance(entry.get("sums") or {}, dict))


def _same(path: str | Path) -> str:
    """How the manifest compares paths: resolved (a re-run may spell them another way:
    absolute, relative, through a symlink)."""
    return os.path.realpath(path)


class Manifest:
    """Load, query and update ``out/manifest.json`` (written atomically: when takes are planned,
    as they finish (after every take while saving is quick, see :data:`SAVE_RATIO`), and at the
    batch's end).

    Takes are recorded by their input's resolved path and compared by resolved paths, so a
    re-run that names the inputs or ``--out`` another way still finds its takes. Each take
    records the version of salient-poses that planned it, and counts as done only for that
    version; the file records the version that wrote it last.

    Parameters
    ----------
    out : Path
        The batch's output folder.

    Attributes
    ----------
    unreadable : str or None
        Why an existing ``manifest.json`` could not be read as a batch's (damaged, another
        version, another program's file); None if it was read or there is none.
    """

    def __init__(self, out: Path) -> None:
        self.path = out / MANIFEST
        self.entries: dict[str, dict[str, Any]] = {}
        self.unreadable: str | None = None
        if self.path.exists():
            try:
                record = json.loads(self.path.read_text(encoding="utf-8"))
                if record.get("version") != VERSION:
                    raise ValueError(f"not a version {VERSION} batch manifest")
                self.entries = {_same(name): entry for name, entry in record["takes"].items()}
                if not all(FIELDS <= set(entry) for entry in self.entries.values()):
                    raise ValueError("a take's record is incomplete")
                if not all(map(_well_typed, self.entries.values())):
                    raise ValueError("a take's record holds a value of the wrong type")
                self._index()
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                # (a field of the wrong type, "outputs": 5, failed past this as an internal
                # error, --overwrite or not)
                self.entries = {}  # nothing in it is trusted
                self.unreadable = str(exc) or type(exc).__name__
        if not self.entries:
            self._index()
        self._edited: dict[str, bool] = {}  # (a re-run asks of each output more than once)
        self._saved_at = -float("inf")
        self._saving = 0.0

    def _index(self) -> None:
        """What the records say of the outputs: the checksum of every output a finished take
        wrote, by resolved path; the outputs planned; those two takes claim."""
        self._sums = {_same(path): sha for entry in self.entries.values()
                      for path, sha in dict(entry.get("sums") or {}).items()}
        claims = self._claims()
        # outputs two takes claim (an earlier version named two clips of one name alike): what
        # they hold is one take's, so neither take is done nor keeps the name
        self._shared = {path for path, count in claims.items() if count > 1}
        self._owned = set(claims)

    def _claims(self) -> Counter[str]:
        """How many takes claim each output, by resolved path (resolved once: a batch asks
        of every output of every take)."""
        return Counter(_same(output) for entry in self.entries.values()
                       for output in entry["outputs"])

    def owns(self, path: str) -> bool:
        """``path`` is an output this batch planned or wrote, and not changed since."""
        return _same(path) in self._owned and not self.edited(path)

    def edited(self, path: str) -> bool:
        """``path`` is an output a finished take wrote whose bytes changed since."""
        same = _same(path)
        sha = self._sums.get(same)
        if sha is None or not Path(path).exists():
            return False
        if same not in self._edited:
            try:
                self._edited[same] = checksum(path) != sha
            except OSError:
                self._edited[same] = True  # (unreadable now: not the file the batch wrote)
        return self._edited[same]

    def stems(self, out: Path) -> dict[str, str]:
        """Resolved input path → the name its outputs got in ``out`` (``STEM`` of
        ``STEM.keys.json``), for the inputs recorded."""
        folder = _same(out)
        named = {}
        for name, entry in self.entries.items():
            for output in entry["outputs"]:
                if output.endswith(".keys.json") and _same(Path(output).parent) == folder \
                        and _same(output) not in self._shared:
                    named[name] = Path(output).name[: -len(".keys.json")]
            # a failed take lists no outputs but keeps its name (see :meth:`record`)
            stem = entry.get("stem")
            if not entry["outputs"] and isinstance(stem, str) and \
                    _same(entry.get("folder", "")) == folder:
                named[name] = stem
        return named

    def version_of(self, path: str) -> str | None:
        """The version of salient-poses that planned the take of input ``path`` (``"unknown"``:
        one that did not record it); None if the take has no record."""
        entry = self.entries.get(_same(path))
        return None if entry is None else str(entry.get("tool_version") or "unknown")

    def outputs_of(self, path: str) -> list[str]:
        """The outputs recorded for the take of input ``path`` (none if it has no record)."""
        entry = self.entries.get(_same(path))
        return list(entry["outputs"]) if entry is not None else []

    def done(self, job: Job, sha: str) -> dict[str, Any] | None:
        """The recorded summary row if ``job`` is done for this input and these options."""
        entry = self.entries.get(_same(job.input))
        # another version may reduce the same input and options to other files
        if entry is None or entry["status"] != "ok" or entry["checksum"] != sha or \
                entry["options"] != job.options.digest() or \
                entry.get("tool_version") != version():
            return None
        if sorted(map(_same, entry["outputs"])) != sorted(_same(p) for _, p in job.outputs()) \
                or not all(Path(p).exists() and not self.edited(p) for p in entry["outputs"]) \
                or any(_same(p) in self._shared for p in entry["outputs"]):
            return None
        return {**entry["row"], "clip": job.input}

    def redone(self, job: Job, sha: str) -> bool:
        """``job``'s take was done earlier for other input bytes or options (its outputs are
        replaced)."""
        entry = self.entries.get(_same(job.input))
        return entry is not None and entry["status"] == "ok" and (
            entry["checksum"] != sha or entry["options"] != job.options.digest())

    def plan(self, jobs: list[Job], sums: dict[str, str]) -> None:
        """Record ``jobs`` as pending (their outputs become the batch's own) and save."""
        for job in jobs:
            self.entries[_same(job.input)] = {"checksum": sums[job.input],
                                              "options": job.options.digest(),
                                              "outputs": [p for _, p in job.outputs()],
                                              "status": "pending", "row": {},
                                              "tool_version": version()}
        self._owned = set(self._claims())
        self.save()

    def record(self, job: Job, row: dict[str, object]) -> None:
        """Record a finished job's status and summary row, and save.

        A failed take lists no outputs (the batch removed those of earlier runs: files made
        with other options or input bytes must not look like this run's); the name its
        outputs had is kept, so a re-run gives them the same name.
        """
        entry = self.entries[_same(job.input)]
        entry["status"] = "ok" if row.get("status") == "ok" else "failed"
        entry["row"] = row
        if entry["status"] == "ok":  # (what a re-run may replace: these bytes, no others)
            entry["sums"] = {path: checksum(path) for path in entry["outputs"]
                             if Path(path).exists()}
            for path, sha in entry["sums"].items():
                self._sums[_same(path)] = sha
                self._edited.pop(_same(path), None)
        if entry["status"] == "failed":
            for output in entry["outputs"]:
                if output.endswith(".keys.json"):
                    entry["stem"] = Path(output).name[: -len(".keys.json")]
                    entry["folder"] = str(Path(output).parent)
            entry["outputs"] = []
            entry.pop("sums", None)
            self._owned = set(self._claims())
        # saved once the time since the last save is SAVE_RATIO times what that save took:
        # after every take while the file is small, every few seconds when it holds a library
        # (a whole manifest written per take grew as the square of the takes: a save of
        # 10,000 takes took 0.6 s). The batch saves at its end (:meth:`save`); a take whose
        # record a crash lost is done again by the next run
        if time.monotonic() - self._saved_at >= SAVE_RATIO * self._saving:
            self.save()

    def save(self) -> None:
        started = time.monotonic()
        write_text(self.path, json.dumps({"version": VERSION, "tool_version": version(),
                                          "takes": self.entries}, indent=1) + "\n")
        self._saved_at = time.monotonic()
        self._saving = self._saved_at - started
