#!/usr/bin/env python3
"""Install Salient Poses.

Usage
-----
``python3 install.py --standalone``
    Create ``.venv`` in this checkout and install the project into it (editable) with its ``ui``
    and ``dev`` extras. Running it again only reinstalls when ``pyproject.toml`` changed.
``python3 install.py --standalone --dry-run``
    Print every command it would run and write nothing.

Only the standard library is used here: this script runs before anything is installed. It is
built as a *plan* of steps (commands and files) that is either printed (``--dry-run``) or carried
out, so that the Maya and MotionBuilder targets can add their own steps later.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import venv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP_NAME = ".salient-poses-install"
STANDALONE_EXTRAS = "ui,dev"


class InstallError(Exception):
    """A problem the user can fix; printed as one line, exit status 2."""


@dataclass
class Step:
    """One thing the installer does: a description and how to do it."""

    describe: str
    run: Callable[[], None]


@dataclass
class Plan:
    """Ordered steps; printed by ``--dry-run``, executed otherwise."""

    steps: list[Step] = field(default_factory=list)

    def add(self, describe: str, run: Callable[[], None]) -> None:
        self.steps.append(Step(describe, run))

    def command(self, argv: list[str], cwd: Path = ROOT) -> None:
        def run() -> None:
            result = subprocess.run(argv, cwd=cwd)
            if result.returncode != 0:
                raise InstallError(f"command failed with status {result.returncode}: "
                                   + " ".join(argv))
        self.add("run: " + " ".join(argv), run)

    def execute(self, dry_run: bool) -> None:
        for step in self.steps:
            print(("[dry-run] " if dry_run else "") + step.describe, flush=True)
            if not dry_run:
                step.run()


def venv_python(env_dir: Path) -> Path:
    """Path of the interpreter inside a virtual environment (Windows or POSIX layout)."""
    if os.name == "nt":
        return env_dir / "Scripts" / "python.exe"
    return env_dir / "bin" / "python"


def _fingerprint(extras: str) -> str:
    """What an installed venv was built from: the project metadata and the extras."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(extras.encode())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def plan_standalone(plan: Plan, env_dir: Path = VENV, extras: str = STANDALONE_EXTRAS) -> None:
    """Add the steps that create ``env_dir`` and install the project into it."""
    python = venv_python(env_dir)
    if not python.exists():
        plan.add(f"create virtual environment {env_dir}",
                 lambda: venv.EnvBuilder(with_pip=True, clear=False).create(env_dir))
    stamp = env_dir / STAMP_NAME
    fingerprint = _fingerprint(extras)
    if stamp.exists() and stamp.read_text().strip() == fingerprint:
        plan.add(f"{env_dir} is up to date (pyproject.toml unchanged)", lambda: None)
        return
    plan.command([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                  "--upgrade", "pip", "setuptools>=64", "wheel"])
    plan.command([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                  "-e", f"{ROOT}[{extras}]"])
    plan.add(f"write {stamp}", lambda: stamp.write_text(fingerprint + "\n"))


def main(argv: list[str] | None = None) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script may be started by any python3
        print(f"install.py: error: Python 3.11 or newer is needed, this is "
              f"{sys.version.split()[0]}; run it with python3.11", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--standalone", action="store_true",
                        help="create .venv in this checkout and install the project with its "
                             "extras")
    parser.add_argument("--dry-run", action="store_true",
                        help="print every step it would take and change nothing")
    args = parser.parse_args(argv)

    plan = Plan()
    try:
        if args.standalone:
            plan_standalone(plan)
        plan.execute(args.dry_run)
    except InstallError as exc:
        print(f"install.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
