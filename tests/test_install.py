"""install.py for Maya and MotionBuilder against temporary folders and fake host interpreters."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER_SETUP = "import mytools\nmytools.start()\n"


@pytest.fixture()
def install(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("install_under_test", ROOT / "install.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("USERPROFILE", str(tmp_path / "home"))
    monkeypatch.delenv("MAYA_APP_DIR", raising=False)
    monkeypatch.setattr(module, "MANIFEST", tmp_path / "manifest.json")
    (tmp_path / "home").mkdir()
    return module


def fake_host_python(folder: Path, name: str) -> tuple[Path, Path]:
    """A stand-in for mayapy/mobupy: logs its arguments; ``-m pip install --target X a b``
    creates X/a, X/b; ``-c CODE`` runs CODE with this test's Python."""
    log = folder / f"{name}.log"
    script = folder / name
    script.write_text(f"""#!{sys.executable}
import os, subprocess, sys
with open({str(log)!r}, "a") as handle:
    handle.write(" ".join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
if args[:3] == ["-m", "pip", "install"]:
    target = args[args.index("--target") + 1]
    for package in [a for a in args[args.index("--target") + 2:]]:
        os.makedirs(os.path.join(target, package), exist_ok=True)
elif args[:1] == ["-c"]:
    sys.exit(subprocess.run([{sys.executable!r}, "-c", args[1]]).returncode)
""")
    script.chmod(0o755)
    return script, log


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_maya_install_is_idempotent_and_uninstall_restores_everything(install, tmp_path,
                                                                      capsys):
    scripts = tmp_path / "home" / "maya" / "2026" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "userSetup.py").write_text(USER_SETUP)
    before = snapshot(tmp_path / "home")
    mayapy, log = fake_host_python(tmp_path, "mayapy")
    prefix = tmp_path / "studio" / "salient-poses"
    args = ["--maya", "--maya-version", "2026", "--mayapy", str(mayapy), "--prefix", str(prefix)]

    assert install.main([*args, "--dry-run"]) == 0
    assert snapshot(tmp_path / "home") == before and not prefix.exists()
    assert not log.exists() and not install.MANIFEST.exists()
    planned = capsys.readouterr().out
    assert "[dry-run] write " + str(tmp_path / "home" / "maya" / "modules") in planned

    assert install.main(args) == 0
    module = (tmp_path / "home" / "maya" / "modules" / "SalientPoses.mod").read_text()
    assert module.splitlines() == [f"+ MAYAVERSION:2026 SalientPoses 1.0 {prefix}",
                                   f"PYTHONPATH+:={prefix}",
                                   f"PYTHONPATH+:={prefix / '.hosts/maya-2026/site-packages'}"]
    setup = (scripts / "userSetup.py").read_text()
    assert setup.startswith(USER_SETUP) and setup.count(install.BEGIN) == 1
    assert "maya_plugin.startup.install()" in setup
    assert (prefix / "sp_core" / "selection.py").exists()
    assert (prefix / "examples" / "cmu_131_01.bvh").exists()
    assert "--target " + str(prefix / ".hosts" / "maya-2026" / "site-packages") in \
        log.read_text()
    installed = snapshot(tmp_path)

    assert install.main(args) == 0  # twice: nothing changes, nothing is re-run
    assert snapshot(tmp_path) == installed
    assert "up to date" in capsys.readouterr().out

    assert install.main(["--check", "--mayapy", str(mayapy), "--prefix", str(prefix),
                         "--maya-version", "2026"]) == 0
    assert "imports the engine" in capsys.readouterr().out

    assert install.main(["--uninstall", "--maya"]) == 0
    assert snapshot(tmp_path / "home") == before
    assert not (tmp_path / "studio").exists()  # created by the install, so removed
    assert not (tmp_path / "home" / "maya" / "modules").exists()
    assert scripts.exists()  # the user's own folder stays
    assert not install.MANIFEST.exists()


def test_mobu_startup_script_and_missing_host_python(install, tmp_path, capsys):
    startup = tmp_path / "startup"
    missing = tmp_path / "no" / "mobupy"
    assert install.main(["--mobu", "--startup-dir", str(startup), "--mobupy", str(missing)]) == 0
    script = (startup / "salient_poses_startup.py").read_text()
    assert "mobu_plugin.startup.install()" in script and repr(str(ROOT)) in script
    out = capsys.readouterr().out
    assert f"host Python {missing} not found; install the dependencies yourself with:" in out
    assert f"{missing} -m pip install" in out
    assert install.main(["--uninstall"]) == 0
    assert not startup.exists()


def test_unwritable_or_impossible_folders_are_clear_errors(install, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code = install.main(["--maya", "--no-deps", "--modules-dir", str(blocker / "modules")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("install.py: error: cannot write ") and "is a file, not a folder" in err
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert install.main(["--mobu", "--no-deps", "--startup-dir", str(locked / "s")]) == 2
        assert "is not writable" in capsys.readouterr().err


def test_nothing_to_do_is_a_usage_error(install, capsys):
    with pytest.raises(SystemExit) as exit_info:
        install.main([])
    assert exit_info.value.code == 2
    assert "say what to do" in capsys.readouterr().err
