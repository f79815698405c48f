"""install.py for Maya and MotionBuilder against temporary folders and fake host interpreters."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fake_maya"))
from maya_module import module_environment  # noqa: E402

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
    mod_file = tmp_path / "home" / "maya" / "modules" / "SalientPoses-2026.mod"
    module_root = prefix / "maya_plugin" / "module"
    assert mod_file.read_text().splitlines() == [
        f"+ MAYAVERSION:2026 SalientPoses 1.0 {module_root}", "PYTHONPATH+:=../..",
        "PYTHONPATH+:=../../.hosts/maya-2026/site-packages"]
    env = module_environment(mod_file, "2026")  # what Maya makes of it
    assert env["PYTHONPATH"] == [str(module_root / "scripts"), str(prefix),
                                 str(prefix / ".hosts" / "maya-2026" / "site-packages")]
    assert (Path(env["PYTHONPATH"][1]) / "maya_plugin" / "host.py").exists()
    assert (Path(env["PYTHONPATH"][0]) / "userSetup.py").exists()  # the module's own
    assert (Path(env["MAYA_PLUG_IN_PATH"][0]) / "salientPoses.py").exists()
    assert module_environment(mod_file, "2025") == {}
    assert (scripts / "userSetup.py").read_text() == USER_SETUP  # the user's file: untouched
    assert f"{mayapy} {prefix / 'maya_plugin' / 'selftest.py'}" in capsys.readouterr().out
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
    """A mobupy given that does not exist is refused (the install went on without its
    dependencies); MotionBuilder not in its standard place prints the command to run."""
    startup = tmp_path / "startup"
    missing = tmp_path / "no" / "mobupy"
    assert install.main(["--mobu", "--startup-dir", str(startup), "--mobupy", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"install.py: error: --mobupy {missing}: no such file (the host's Python; or give "
        "--no-deps to install without the dependencies)\n")
    assert not startup.exists()
    assert install.main(["--mobu", "--startup-dir", str(startup)]) == 0
    script = (startup / "salient_poses_startup.py").read_text()
    assert "mobu_plugin.startup.install()" in script and repr(str(ROOT)) in script
    out = capsys.readouterr().out
    default = install.default_mobupy("2025")
    assert f"host Python {default} not found; install the dependencies yourself with:" in out
    assert f"{install.shown([str(default)])} -m pip install" in out
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


def clean_mobupy(folder: Path) -> Path:
    """A stand-in for mobupy that is a real, clean Python (a venv without site packages of its
    own beyond the standard library): ``-m pip install --target X pkgs`` links those packages
    (and what numba needs) from this test's environment into X; anything else runs in the clean
    interpreter."""
    import sysconfig
    import venv

    env = folder / "mobu-python"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    ours = Path(sysconfig.get_paths()["purelib"])
    script = folder / "mobupy"
    script.write_text(f"""#!{sys.executable}
import os, sys
args = sys.argv[1:]
if args[:3] == ["-m", "pip", "install"]:
    target = args[args.index("--target") + 1]
    os.makedirs(target, exist_ok=True)
    wanted = args[args.index("--target") + 2:] + ["llvmlite", "numpy.libs", "scipy.libs"]
    for name in wanted:
        source = os.path.join({str(ours)!r}, name)
        if os.path.exists(source) and not os.path.exists(os.path.join(target, name)):
            os.symlink(source, os.path.join(target, name))
    sys.exit(0)
os.execv({str(python)!r}, [{str(python)!r}, *args])
""")
    script.chmod(0o755)
    return script


def test_mobupy_runs_the_batch_and_selftest_modules_from_a_clean_shell(install, tmp_path,
                                                                       capsys):
    mobupy = clean_mobupy(tmp_path)
    clean = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home")}
    imports = [str(mobupy), "-c", "import mobu_plugin.batch, mobu_plugin.selftest"]
    # before: a clean mobupy cannot import the engine's dependencies (finding 1)
    before = subprocess.run(imports, env=clean, capture_output=True, text=True, cwd=tmp_path)
    assert before.returncode != 0 and "ModuleNotFoundError" in before.stderr
    prefix = tmp_path / "studio"
    startup = tmp_path / "startup"
    assert install.main(["--mobu", "--mobupy", str(mobupy), "--prefix", str(prefix),
                         "--startup-dir", str(startup)]) == 0
    pth = [p for p in (tmp_path / "mobu-python").rglob("salient_poses.pth")]
    assert len(pth) == 1
    assert pth[0].read_text().splitlines() == [
        str(prefix), str(prefix / ".hosts" / "mobu-2025" / "site-packages")]
    after = subprocess.run(imports, env=clean, capture_output=True, text=True, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    usage = subprocess.run([str(mobupy), "-m", "mobu_plugin.batch", "--help"], env=clean,
                           capture_output=True, text=True, cwd=tmp_path)
    assert usage.returncode == 0 and "mobupy -m mobu_plugin.batch" in usage.stdout
    # the self-test module starts MotionBuilder's standalone Python first
    selftest = subprocess.run([str(mobupy), "-m", "mobu_plugin.selftest"], env=clean,
                              capture_output=True, text=True, cwd=tmp_path)
    assert "No module named 'pyfbstandalone'" in selftest.stderr
    assert install.main(["--uninstall", "--mobu"]) == 0
    assert not pth[0].exists() and not startup.exists() and not prefix.exists()


def test_mobu_startup_folder_follows_motionbuilder_python_startup(install, tmp_path,
                                                                  monkeypatch, capsys):
    first, second = tmp_path / "pipeline" / "startup", tmp_path / "other"
    monkeypatch.setenv("MOTIONBUILDER_PYTHON_STARTUP", os.pathsep.join([str(first),
                                                                       str(second)]))
    assert install.main(["--mobu", "--no-deps", "--mobupy", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert (first / "salient_poses_startup.py").exists() and not second.exists()
    assert "the first folder of MOTIONBUILDER_PYTHON_STARTUP" in out
    assert "could not ask" in out and "PYTHONPATH" in out
    monkeypatch.delenv("MOTIONBUILDER_PYTHON_STARTUP")
    assert install.main(["--uninstall", "--mobu"]) == 0
    assert install.main(["--mobu", "--no-deps", "--mobupy", str(tmp_path / "none"),
                         "--dry-run"]) == 0
    default = tmp_path / "home" / "Documents" / "MB" / "2025" / "config" / "PythonStartup"
    assert f"{default} (the user PythonStartup folder)" in capsys.readouterr().out
def test_the_old_mod_file_put_nothing_on_pythonpath(tmp_path):
    """Finding 5: ``+:=`` with an absolute path is joined to the module root."""
    mod_file = tmp_path / "SalientPoses.mod"
    mod_file.write_text(f"+ MAYAVERSION:2025 SalientPoses 1.0 {ROOT}\nPYTHONPATH+:={ROOT}\n")
    (path,) = module_environment(mod_file, "2025")["PYTHONPATH"][1:]
    assert path != str(ROOT) and not (Path(path) / "maya_plugin").exists()


def test_the_standalone_install_brings_blender_wherever_bpy_has_a_wheel(install, tmp_path):
    """The README's test command installs bpy (the extra ``blender``) exactly where the Blender
    tests refuse to skip, so CI runs them for real."""
    import tomllib

    from host_contract import bpy_wheel_exists
    from packaging.requirements import Requirement

    assert "blender" in install.STANDALONE_EXTRAS.split(",")
    plan = install.Plan()
    install.plan_standalone(plan, env_dir=tmp_path / "env")
    assert any(shlex.split(step.describe)[-1].endswith(f"[{install.STANDALONE_EXTRAS}]")
               for step in plan.steps if step.describe.startswith("run: "))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (line,) = project["optional-dependencies"]["blender"]
    requirement = Requirement(line)
    assert requirement.name == "bpy" and str(requirement.specifier) == "<4.6,>=4.5"
    for machine, python, wheel in (("x86_64", "3.11", True), ("AMD64", "3.11", True),
                                   ("arm64", "3.11", True), ("aarch64", "3.11", False),
                                   ("x86_64", "3.12", False)):
        environment = {"platform_machine": machine, "python_version": python}
        assert requirement.marker.evaluate(environment) is wheel
    assert requirement.marker.evaluate() is bpy_wheel_exists()


def test_blender_install_writes_an_addon_blender_can_read_and_uninstall_removes_it(
        install, tmp_path, capsys):
    import ast

    import blender_addon

    python = tmp_path / "blender-python"
    log = tmp_path / "blender-python.log"
    python.write_text(f"""#!{sys.executable}
import os, re, sys
with open({str(log)!r}, "a") as handle:
    handle.write(" ".join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
target = args[args.index("--target") + 1]
for requirement in args[args.index("--target") + 2:]:
    os.makedirs(os.path.join(target, re.split("[=<>]", requirement)[0].replace("-", "_")))
""")
    python.chmod(0o755)
    addons = tmp_path / "home" / "blender" / "addons"
    prefix = tmp_path / "studio"
    args = ["--blender", "--addons-dir", str(addons), "--blender-python", str(python),
            "--prefix", str(prefix)]
    assert install.main(args) == 0
    loader = addons / "salient_poses" / "__init__.py"
    # Blender reads bl_info from the file's syntax tree, without running it
    (assignment,) = [node for node in ast.parse(loader.read_text()).body
                     if isinstance(node, ast.Assign) and node.targets[0].id == "bl_info"]
    assert ast.literal_eval(assignment.value) == blender_addon.bl_info
    site = prefix / ".hosts" / "blender-4.5" / "site-packages"
    assert log.read_text().split() == ["-m", "pip", "install", "--disable-pip-version-check",
                                       "-q", "--upgrade", "--target", str(site), "scipy",
                                       "numba", "threadpoolctl", "tomli-w", "tqdm", "ufbx==0.0.5"]
    # run as Blender runs it: the add-on's functions come from the installed copy
    code = (f"import runpy; module = runpy.run_path({str(loader)!r}); "
            "print(module['register'].__module__, module['register'].__code__.co_filename)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={"PATH": os.environ.get("PATH", "")})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["blender_addon", str(prefix / "blender_addon" / "__init__.py")]
    assert "selftest.main([])" in capsys.readouterr().out
    installed = snapshot(tmp_path)
    assert install.main(args) == 0  # twice: nothing changes, nothing is re-run
    assert snapshot(tmp_path) == installed and len(log.read_text().splitlines()) == 1
    assert install.main(["--uninstall", "--blender"]) == 0
    assert not (tmp_path / "home" / "blender").exists() and not prefix.exists()
    assert not install.MANIFEST.exists()


def test_blender_extension_bundles_and_lists_the_given_wheels(install, tmp_path):
    import tomllib
    import zipfile

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("scipy-1.16.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "numba-0.62.0-cp311-cp311-manylinux_2_28_x86_64.whl"):
        (wheels / name).write_bytes(b"wheel " + name.encode())
    out = tmp_path / "dist" / "salient_poses.zip"
    assert install.main(["--blender-extension", str(out), "--wheels", str(wheels)]) == 0
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        manifest = tomllib.loads(archive.read("blender_manifest.toml").decode())
        init = archive.read("__init__.py").decode()
    assert manifest["wheels"] == sorted(f"./wheels/{w.name}" for w in wheels.iterdir())
    assert {"wheels/" + w.name for w in wheels.iterdir()} <= names
    assert {"lib/sp_core/selection.py", "lib/blender_addon/host.py"} <= names
    assert not any("__pycache__" in n for n in names)
    assert "blender_addon.register()" in init and "blender_addon.unregister()" in init
    assert install.main(["--blender-extension", str(out), "--wheels",
                         str(tmp_path / "empty")]) == 2


def test_a_user_who_can_write_neither_the_install_nor_a_home_gets_a_kernel_cache(monkeypatch,
                                                                                 tmp_path):
    """A farm's service account (home not writable) running an install it does not own:
    numba found no cache folder and every import of the engine failed ("cannot cache
    function 'line_rows': no locator available")."""
    import numba

    import sp_core

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.setattr(sp_core.os, "access", lambda path, mode: False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(sp_core.tempfile, "tempdir", str(tmp_path / "tmp"))
    sp_core._numba_cache_fallback()
    folder = tmp_path / "tmp" / f"salient-poses-numba-{os.getuid()}"
    assert os.environ["NUMBA_CACHE_DIR"] == str(folder)
    assert numba.config.CACHE_DIR == str(folder)  # numba was imported first: told too
    assert folder.stat().st_mode & 0o777 == 0o700
    # a folder of that name anyone may write (another account's trap: numba unpickles its
    # index files) is not used
    folder.chmod(0o777)
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    sp_core._numba_cache_fallback()
    chosen = Path(os.environ["NUMBA_CACHE_DIR"])
    assert chosen != folder and chosen.parent == tmp_path / "tmp"
    assert chosen.stat().st_mode & 0o777 == 0o700
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/chosen")  # one set by the user stays
    sp_core._numba_cache_fallback()
    assert os.environ["NUMBA_CACHE_DIR"] == "/chosen"


def test_a_module_of_cached_kernels_calls_no_numba_function_of_another_file():
    """numba's cache of a kernel follows the kernel's own source file only: a kernel compiled
    with a numba function of another file kept running that function's old code after that
    file changed (the corrective stage's kernels, in a file of their own, inlined the world
    fit's forward-kinematics steps from sp_core/_fit_kernels.py: a ``git pull`` changing only
    the steps would have left the two kinematics apart). A module with cached kernels imports
    no module of the engine that has numba functions (plain Python, such as the kernels'
    turn-taking wrapper of sp_core/threads.py, is not compiled into them)."""
    import ast

    def cached(tree: ast.Module) -> bool:  # an @njit(..., cache=True) function in it
        return any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "njit"
                   and any(k.arg == "cache" for k in d.keywords)
                   for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                   for d in node.decorator_list)

    trees = {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text())
             for path in (ROOT / "sp_core").rglob("*.py")}
    modules = {name: tree for name, tree in trees.items() if cached(tree)}
    assert set(modules) >= {"sp_core/_kernels.py", "sp_core/_fit_kernels.py"}  # (found)

    def jitted(tree: ast.Module) -> bool:  # any numba-decorated function in it
        return any(getattr(d.func if isinstance(d, ast.Call) else d, "id", "") in
                   ("njit", "jit", "intrinsic", "vectorize", "guvectorize")
                   for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                   for d in node.decorator_list)

    def tree_of(module: str) -> ast.Module:
        path = module.replace(".", "/")
        return trees.get(f"{path}.py") or trees[f"{path}/__init__.py"]

    for name, tree in modules.items():
        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            elif isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
        engine = [module for module in names if module.split(".")[0] == "sp_core"
                  and jitted(tree_of(module))]
        assert engine == [], f"{name} imports {engine}"


def test_mobupy_site_is_never_the_users_shared_site_packages(install, tmp_path, monkeypatch):
    """MotionBuilder's own site-packages not writable (under Program Files): no ``.pth`` in the
    user site-packages, which every Python of that version reads before its own packages (it
    would import this install's numpy and scipy); the PYTHONPATH to set is said instead."""
    python = tmp_path / "mobupy"
    python.write_text(f"#!/bin/sh\necho '{{\"purelib\": \"{tmp_path / 'lib'}\"}}'\n")
    python.chmod(0o755)
    assert install.mobupy_site(python) == tmp_path / "lib"
    with monkeypatch.context() as patch:
        patch.setattr(install.os, "access", lambda path, mode: False)
        assert install.mobupy_site(python) is None
    # an earlier install's .pth there (recorded in the manifest) is removed on the next one
    old = tmp_path / "home" / ".local" / "site-packages" / "salient_poses.pth"
    old.parent.mkdir(parents=True)
    old.write_text("/somewhere\n")
    install.Manifest().record({"target": "mobu", "kind": "file", "path": str(old)})
    monkeypatch.setattr(install, "mobupy_site", lambda python: None)
    assert install.main(["--mobu", "--no-deps", "--startup-dir", str(tmp_path / "startup"),
                         "--mobupy", str(python)]) == 0
    assert not old.exists() and str(old) not in install.MANIFEST.read_text()


# ------------------------------------------------------- found by a review of the installer
def test_what_install_py_did_not_write_is_never_replaced_or_removed(install, tmp_path, capsys):
    """A --prefix into a studio folder replaced its examples/ (and uninstall removed it); a
    user's own SalientPoses module, add-on or start-up script of the same name was overwritten
    and then deleted; a file changed since the install was deleted by the uninstall."""
    studio = tmp_path / "studio"
    (studio / "examples").mkdir(parents=True)
    (studio / "examples" / "studio_walk.bvh").write_text("mine")
    assert install.main(["--maya", "--no-deps", "--prefix", str(studio)]) == 2
    assert capsys.readouterr().err == (
        f"install.py: error: {studio / 'examples'} is in the way: this account's installs did "
        "not make it and it is not this checkout's copy (a folder of yours, or another "
        "version's?); choose another --prefix or move it away\n")
    assert sorted(p.name for p in studio.iterdir()) == ["examples"]  # (refused before any copy)
    assert (studio / "examples" / "studio_walk.bvh").read_text() == "mine"
    modules = tmp_path / "home" / "maya" / "modules"
    modules.mkdir(parents=True)
    (modules / "SalientPoses-2025.mod").write_text("+ SalientPoses 0.9 /studio/old\n")
    assert install.main(["--maya", "--no-deps"]) == 2
    assert capsys.readouterr().err == (
        f"install.py: error: {modules / 'SalientPoses-2025.mod'} is in the way: install.py did "
        "not write it (a file of yours?); move it away or give --modules-dir\n")
    assert (modules / "SalientPoses-2025.mod").read_text() == "+ SalientPoses 0.9 /studio/old\n"
    (modules / "SalientPoses-2025.mod").unlink()
    startup = tmp_path / "startup"
    assert install.main(["--maya", "--mobu", "--no-deps", "--startup-dir", str(startup)]) == 0
    script = startup / "salient_poses_startup.py"
    script.write_text(script.read_text() + "print('studio tweak')\n")  # the user's change
    assert install.main(["--mobu", "--no-deps", "--startup-dir", str(startup)]) == 2
    assert "was changed since install.py wrote it; move your version away" in \
        capsys.readouterr().err
    assert install.main(["--check"]) == 0  # (a change is said, not a problem)
    assert f"mobu: file {script} (CHANGED since written)" in capsys.readouterr().out
    assert install.main(["--uninstall"]) == 0
    assert f"keep {script}: changed since install.py wrote it (yours now)" in \
        capsys.readouterr().out
    assert script.read_text().endswith("print('studio tweak')\n")
    assert not (modules / "SalientPoses-2025.mod").exists() and modules.exists()


def test_installs_for_two_maya_versions_and_two_hosts_on_one_prefix_coexist(install, tmp_path,
                                                                          capsys, monkeypatch):
    """A second Maya version replaced the first's module file; uninstalling Maya removed the
    --prefix copy the Blender add-on loads; a relative --prefix was written as given (read
    relative to the .mod file, or to Blender's working folder); uninstall removed the empty
    folders the user made inside a folder the install had created."""
    monkeypatch.chdir(tmp_path)
    addons = tmp_path / "addons"
    for version in ("2024", "2025"):
        assert install.main(["--maya", "--maya-version", version, "--no-deps",
                             "--prefix", "studio"]) == 0
    assert install.main(["--blender", "--no-deps", "--prefix", "studio",
                         "--addons-dir", str(addons)]) == 0
    modules = tmp_path / "home" / "maya" / "modules"
    prefix = tmp_path / "studio"
    for version in ("2024", "2025"):
        env = module_environment(modules / f"SalientPoses-{version}.mod", version)
        assert env["PYTHONPATH"][1] == str(prefix)
    assert repr(str(prefix)) in (addons / "salient_poses" / "__init__.py").read_text()
    (tmp_path / "home" / "maya" / "projects" / "default").mkdir(parents=True)  # the user's
    assert install.main(["--uninstall", "--maya"]) == 0
    out = capsys.readouterr().out
    assert f"keep {prefix / 'sp_core'} (the blender install uses it)" in out
    assert (prefix / "sp_core" / "selection.py").exists() and not modules.exists()
    assert (tmp_path / "home" / "maya" / "projects" / "default").is_dir()
    assert install.main(["--uninstall", "--blender"]) == 0
    assert not prefix.exists() and not addons.exists()


def test_the_manifest_is_each_users_own(install, tmp_path, monkeypatch, capsys):
    """It was kept in the checkout, shared: one user's --uninstall removed another user's
    install. A checkout's old shared manifest gives each user their own entries."""
    monkeypatch.setattr(install, "MANIFEST", None)
    monkeypatch.setattr(install, "LEGACY_MANIFEST", tmp_path / "legacy.json")
    homes = {}
    for user in ("ann", "bob"):
        homes[user] = tmp_path / user
        homes[user].mkdir()
        monkeypatch.setenv("HOME", str(homes[user]))
        assert install.main(["--maya", "--no-deps"]) == 0
    assert install.main(["--uninstall", "--maya"]) == 0  # bob's
    assert not (homes["bob"] / "maya" / "modules").exists()
    assert (homes["ann"] / "maya" / "modules" / "SalientPoses-2025.mod").exists()
    assert (homes["ann"] / ".salient-poses" / "install-manifest.json").exists()
    assert not (homes["bob"] / ".salient-poses").exists()
    # an old install's shared manifest: ann's entries become hers
    old = homes["ann"] / "maya" / "modules" / "SalientPoses.mod"
    old.write_text("+ MAYAVERSION:2025 SalientPoses 1.0 x\n")
    install.LEGACY_MANIFEST.write_text(json.dumps({"entries": [
        {"target": "maya", "kind": "file", "path": str(old)}]}))
    monkeypatch.setenv("HOME", str(homes["ann"]))
    assert install.main(["--maya", "--no-deps"]) == 0  # (its 2025 module would load twice)
    assert f"remove {old} (an earlier install's, for 2025)" in capsys.readouterr().out
    assert not old.exists() and not install.LEGACY_MANIFEST.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--maya", "--maya-version", "2O25", "--no-deps"],
     "--maya-version '2O25' is not a version (e.g. 2025)"),
    (["--blender", "--blender-version", "45", "--no-deps"],
     "--blender-version '45' is not a version (e.g. 4.5)"),
    (["--uninstall", "--standalone"], "--uninstall removes the host installs; the standalone "
     "install is {venv}: delete that folder to remove it"),
])
def test_arguments_that_cannot_work_are_one_line_errors(install, argv, message, capsys):
    assert install.main(argv) == 2
    assert capsys.readouterr().err == \
        f"install.py: error: {message.format(venv=install.VENV)}\n"


def test_a_damaged_manifest_and_a_missing_file_are_said(install, tmp_path, capsys):
    assert install.main(["--maya", "--no-deps"]) == 0
    mod_file = tmp_path / "home" / "maya" / "modules" / "SalientPoses-2025.mod"
    mod_file.unlink()
    assert install.main(["--check"]) == 1  # a file the host needs is gone
    assert f"maya: file {mod_file} (MISSING)" in capsys.readouterr().out
    install.MANIFEST.write_text('{"entries": [')
    assert install.main(["--check"]) == 2
    assert capsys.readouterr().err.startswith(
        f"install.py: error: {install.MANIFEST} is damaged (")


def test_accounts_sharing_a_prefix_and_an_old_shared_manifest(install, tmp_path, monkeypatch,
                                                              capsys):
    """A second review: a second account could not install into a shared --prefix (its copy,
    identical, was "in the way") and took its .pth / copies over, so one account's uninstall
    removed the other's; an old shared manifest was handed over by a --dry-run or a --check
    (both wrote files), its relative paths against the folder install.py ran in (an uninstall
    removed the user's folder of that name there), and its outermost folders left their empty
    folders behind; a host Python that cannot run, or a failing pip, left a traceback or a
    --check of the wrong install."""
    monkeypatch.setattr(install, "MANIFEST", None)
    monkeypatch.setattr(install, "LEGACY_MANIFEST", tmp_path / "legacy.json")
    studio = tmp_path / "studio"
    for user in ("ann", "bob"):
        (tmp_path / user).mkdir()
        monkeypatch.setenv("HOME", str(tmp_path / user))
        assert install.main(["--maya", "--no-deps", "--prefix", str(studio)]) == 0
    assert install.main(["--uninstall"]) == 0  # bob's: the copy ann made stays
    assert (studio / "sp_core" / "selection.py").exists()
    monkeypatch.setenv("HOME", str(tmp_path / "ann"))
    assert install.main(["--uninstall"]) == 0
    assert not studio.exists()
    # an old install's shared manifest: a relative path, and an outermost folder
    ann = tmp_path / "ann"
    made = ann / "maya" / "modules" / "SalientPoses.mod"
    made.parent.mkdir(parents=True)
    made.write_text("+ MAYAVERSION:2024 SalientPoses 1.0 x\n")
    (ann / "maya" / "scripts").mkdir()  # (an empty folder the old install made)
    legacy = [{"target": "maya", "kind": "file", "path": str(made)},
              {"target": "maya", "kind": "folder", "path": str(ann / "maya")},
              {"target": "maya", "kind": "tree", "path": "pfx/sp_core"}]
    install.LEGACY_MANIFEST.write_text(json.dumps({"entries": legacy}))
    before = install.LEGACY_MANIFEST.read_text()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "pfx" / "sp_core").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    assert install.main(["--uninstall", "--dry-run"]) == 0
    assert install.main(["--check"]) == 0
    assert install.LEGACY_MANIFEST.read_text() == before
    assert not (ann / ".salient-poses").exists()
    capsys.readouterr()
    assert install.main(["--uninstall"]) == 0
    assert not (ann / "maya").exists() and (elsewhere / "pfx" / "sp_core").is_dir()
    assert json.loads(install.LEGACY_MANIFEST.read_text())["entries"] == legacy[2:]
    # a host Python that cannot run; a pip that fails: the install's folders still recorded
    script = tmp_path / "mayapy"
    script.write_text("#!/bin/sh\nexit 1\n")
    assert install.main(["--maya", "--mayapy", str(script)]) == 2
    assert capsys.readouterr().err == (f"install.py: error: --mayapy {script}: not a program "
                                       "this account may run (the host's Python)\n")
    script.chmod(0o755)
    assert install.main(["--maya", "--mayapy", str(script), "--prefix", str(studio)]) == 2
    assert "installing the dependencies with" in capsys.readouterr().err
    assert install.main(["--check"]) == 1
    assert f"from {studio}" in capsys.readouterr().out
