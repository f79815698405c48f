"""Run mypy on the host adapters against the official API stubs.

``maya-stubs`` is a regular stub package, but ``motionbuilder-stubs`` installs bare
``pyfbsdk*.pyi`` files into site-packages, where mypy does not look (PEP 561 finds only
``*-stubs`` packages and typed packages). This links those files into a temporary folder on
``MYPYPATH`` and runs mypy with the settings in pyproject.toml.

Usage: ``.venv/bin/python tools/typecheck.py [mypy arguments]``
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path


def motionbuilder_stub_files() -> list[Path]:
    dist = metadata.distribution("motionbuilder-stubs")
    return [Path(str(dist.locate_file(f))) for f in dist.files or [] if str(f).endswith(".pyi")]


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        for stub in motionbuilder_stub_files():
            os.symlink(stub, Path(folder) / stub.name)
        env = dict(os.environ, MYPYPATH=folder)
        return subprocess.run([sys.executable, "-m", "mypy", *sys.argv[1:]], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
