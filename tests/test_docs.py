"""Every command and Python example shown in the README and the user guide runs.

Shell lines are run as written, with ``CLIP.bvh`` and ``mocap/`` standing for the bundled sample
(``CLIP.fbx`` for its Blender FBX export in tests/data),
``edit.json`` for the edit shown next to it and ``studio.toml`` for the guide's preset
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
    shutil.copy(ROOT / "tests" / "data" / "cmu_131_01_240.fbx", tmp_path / "CLIP.fbx")
    (tmp_path / "mocap").mkdir()
    shutil.copy(sample_path, tmp_path / "mocap" / "walk.bvh")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "home").mkdir()
    (tmp_path / "edit.json").write_text('{"offsets": {"RightShoulder.Zrotation": 30}}')
    # the preset the guide shows is the one its --preset example reads
    (tmp_path / "studio.toml").write_text(blocks(ROOT / "docs" / "guide.md", "toml")[0])
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


# ------------------------------------------------------------------ links and help text
ALL_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchor_of(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces → -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def relative_links() -> list[tuple[Path, str]]:
    found = []
    for doc in ALL_DOCS:
        prose = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        found += [(doc, target) for target in LINK.findall(prose)
                  if not re.match(r"[a-z]+:", target)]
    return found


def test_the_link_checker_sees_the_docs_links():
    targets = {target for _doc, target in relative_links()}
    assert {"docs/guide.md", "view.png", "selection.md#keyposes-and-breakdowns"} <= targets


@pytest.mark.parametrize(("doc", "target"), relative_links(),
                         ids=[f"{d.name}:{t}" for d, t in relative_links()])
def test_every_link_in_the_docs_resolves(doc, target):
    path, _, anchor = target.partition("#")
    file = (doc.parent / path).resolve() if path else doc
    assert file.is_relative_to(ROOT) and file.exists(), f"{doc.name} links to missing {target}"
    if anchor:
        headings = re.findall(r"^#+\s+(.*)$", file.read_text(), flags=re.M)
        assert anchor in {anchor_of(h) for h in headings}, f"{doc.name}: no heading #{anchor}"


def test_every_command_line_option_has_help():
    import argparse

    from sp_core.cli import build_parser

    parser = build_parser()
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0]
    assert {"analyze", "reduce", "view", "batch"} <= set(commands.choices)
    for sub in commands.choices.values():  # every --help renders (a stray % would raise)
        assert "--help" in sub.format_help()
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, sub in commands.choices.items() for action in sub._actions
               if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()]
    assert missing == []
    version = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and re.search(r"\d+\.\d+", version.stdout)


def test_docs_say_what_the_product_does():
    maya = (ROOT / "docs" / "maya.md").read_text()
    assert "does not produce them" not in maya and "Maya breakdown keys" in maya
    assert "next issues" not in (ROOT / "docs" / "panel.md").read_text()
    assert "later" not in next(line for line in (ROOT / "README.md").read_text().splitlines()
                               if line.startswith("install.py "))


def test_what_to_expect_quotes_the_engine(sample_clip):
    """The guide's figures for the sample: the suggested K and its channel-fit error, and the
    default choice (tolerance, keys and errors at the K it quotes)."""
    from sp_core.options import DEFAULT_TOLERANCE, Options, corrective_plan
    from sp_core.reduction import reduce
    from sp_core.selection import SelectionSpace

    text = (ROOT / "docs" / "guide.md").read_text()
    section = text[text.index("### What to expect"):text.index("## 2. Command line")]
    analysis = Options().analysis  # the CLI's defaults, not the engine API's
    space = SelectionSpace.from_clip(sample_clip, cost=analysis.cost, compose=analysis.compose)
    k = space.suggestions()["threshold"]
    metrics = reduce(sample_clip, space.keyframes(k), space="channel").metrics
    assert f"| `--suggested` (threshold rule) | {k} " in section
    assert f"{metrics.mean_mm:.1f} / {metrics.max_mm:.0f} mm at K = {k}" in section
    # the default row: the schema's tolerance, and the engine's result at the K it quotes
    mean_tol, max_tol = DEFAULT_TOLERANCE
    row = next(line for line in section.splitlines() if line.startswith("| default:"))
    assert f"within {mean_tol:g} mm / {max_tol:g} mm" in row
    quoted_k = int(row.split("|")[2])
    budget, stop = corrective_plan(Options())
    default = reduce(sample_clip, space.keyframes(quoted_k), corrective_budget=budget,
                     corrective_stop_mm=stop).metrics
    assert default.mean_mm <= mean_tol and default.max_mm <= max_tol
    assert f"{default.pose_keys} + {default.corrective_keys} corrective" in row
    assert f"| {default.mean_mm:.2f} mm | {default.max_mm:.2f} mm" in row


def test_the_reduce_json_example_quotes_the_command_it_names(sample_path, capsys):
    """formats.md's `reduce --json` example showed an older run's errors (mean 23.34 mm, max
    291.49 mm where the command gives 21.89 / 253.01)."""
    import json

    from sp_core.cli import main

    text = (ROOT / "docs" / "formats.md").read_text()
    section = text[text.index("## `salient-poses reduce --json`"):
                   text.index("## `salient-poses reduce --bvh")]
    assert "From `salient-poses reduce examples/cmu_131_01.bvh --suggested --json -`" in section
    assert main(["reduce", str(sample_path), "--suggested", "--json", "-"]) == 0
    record = json.loads(capsys.readouterr().out)
    m = record["metrics"]
    assert (f'"metrics": {{"mean_mm": {m["mean_mm"]:.2f}, "max_mm": {m["max_mm"]:.2f}, '
            f'"mean": {m["mean"]:.3f}, "max": {m["max"]:.3f},') in section
    assert f'"worst_frame": {m["worst_frame"]}, "keys": {m["keys"]},' in section
    assert f"({len(record['frames'])} keys;" in section
    first = record["channels"][0]["keys"][0]
    assert f"[{', '.join(f'{v:.2f}' if isinstance(v, float) else str(v) for v in first)}" \
        in section


def test_for_fbx_input_the_residual_completes_the_curves_not_the_bvh(tmp_path):
    """formats.md's caveat: the BVH written for an FBX input folds the joint orients in, so
    only the keys' curves + the residual give back the channels read."""
    import numpy as np

    from sp_core.io.bvh import read_bvh
    from sp_core.jobs import Job, load_clip, run_job
    from sp_core.options import Options

    text = (ROOT / "docs" / "formats.md").read_text()
    assert "the BVH's channels + residual are not the original, but the `--json` keys' curves " \
        "evaluated on\nevery frame + residual are (to 1e-12)" in text
    source = str(ROOT / "tests" / "data" / "cmu_131_01_240.fbx")
    options = Options().replace(keys=10, space="channel", bvh=str(tmp_path / "r.bvh"),
                                residual=str(tmp_path / "r.npy"))
    reduction = run_job(Job(source, options, "reduce")).reduction
    clip, residual = load_clip(source), np.load(tmp_path / "r.npy")
    curves = reduction.curves.evaluate(clip.frames.astype(float))
    np.testing.assert_allclose(curves + residual, clip.channels, rtol=0, atol=1e-12)
    bvh = read_bvh(tmp_path / "r.bvh")
    assert np.abs(bvh.channels + residual - clip.channels).max() > 1.0
