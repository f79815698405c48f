"""Every command and Python example shown in the README and the user guide runs.

Shell lines are run as written, with ``CLIP.bvh`` and ``mocap/`` standing for the bundled sample
and ``edit.json`` for the edit shown next to it
(the two set-up lines at the top of the README are what ``.ci/run`` itself runs; the interactive
``view`` without ``--screenshot`` opens a window and is only checked to parse). install.py lines
run with ``--dry-run`` in a temporary home.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "docs" / "guide.md"]
SCRIPT = Path(sys.executable).with_name("salient-poses")


def blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.S)


def shell_lines() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for block in blocks(doc, "bash"):
            for line in block.splitlines():
                line = re.split(r"\s{2,}#", line)[0].strip()
                if line and "&&" not in line:
                    found.append((doc.name, line))
    return found


def python_blocks() -> list[tuple[str, str]]:
    return [(doc.name, code) for doc in DOCS for code in blocks(doc, "python")]


@pytest.fixture()
def workspace(tmp_path, sample_path):
    shutil.copy(sample_path, tmp_path / "CLIP.bvh")
    (tmp_path / "mocap").mkdir()
    shutil.copy(sample_path, tmp_path / "mocap" / "walk.bvh")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "home").mkdir()
    (tmp_path / "edit.json").write_text('{"offsets": {"RightShoulder.Zrotation": 30}}')
    return tmp_path


@pytest.mark.parametrize(("doc", "line"), shell_lines(),
                         ids=[f"{d}:{line[:60]}" for d, line in shell_lines()])
def test_shell_commands_in_the_docs_run(doc, line, workspace):
    argv = shlex.split(line)
    env = dict(os.environ, HOME=str(workspace / "home"), QT_QPA_PLATFORM="offscreen")
    if argv[0] == ".venv/bin/salient-poses":
        argv[0] = str(SCRIPT)
        if argv[1] == "view" and "--screenshot" not in argv:
            argv.append("--help")  # interactive: it would wait for the user
    elif argv[:2] == ["python3", "install.py"]:
        argv[:2] = [sys.executable, str(ROOT / "install.py")]
        if "--check" not in argv:
            argv.append("--dry-run")
    else:
        pytest.fail(f"{doc} shows a command this test does not know how to run: {line}")
    result = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize(("doc", "code"), python_blocks(),
                         ids=[f"{d}:{i}" for i, (d, _c) in enumerate(python_blocks())])
def test_python_examples_in_the_docs_run(doc, code, workspace):
    result = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True,
                            text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 0, f"{doc}:\n{code}\n{result.stderr}"
