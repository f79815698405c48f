#!/usr/bin/env python3
"""Install Salient Poses.

Usage
-----
``python3 install.py --standalone``
    Create ``.venv`` in this checkout and install the project into it (editable) with its ``ui``,
    ``cluster``, ``dev`` and ``blender`` extras (``bpy``, Blender as a Python module, where a
    wheel exists for the platform). Running it again only reinstalls when ``pyproject.toml``
    changed.
``python3 install.py --maya [--maya-version 2025] [--modules-dir DIR] [--mayapy PATH]``
    Write ``SalientPoses-<version>.mod`` into Maya's user modules folder (one per Maya version,
    so that installing for 2025 leaves the install for 2024) (its module is
    ``maya_plugin/module`` of this checkout, or of a copy under ``--prefix``; the module's own
    ``scripts/userSetup.py`` loads the plug-in and adds the menu, the user's file is not touched),
    and pip-install numpy, scipy, numba and pyqtgraph with ``mayapy`` into the checkout's
    ``.hosts/maya-<version>/site-packages`` (``--no-deps`` skips it; without ``mayapy`` the
    command is printed).
``python3 install.py --mobu [--mobu-version 2025] [--startup-dir DIR] [--mobupy PATH]``
    Install the dependencies with ``mobupy`` into the checkout's own ``site-packages``, write a
    ``salient_poses.pth`` into mobupy's site-packages (so ``mobupy -m mobu_plugin.batch`` and
    ``mobupy -m mobu_plugin.selftest`` work from a clean shell) and a start-up script that adds
    the menu into a documented PythonStartup folder (``--startup-dir``, else the first folder of
    ``MOTIONBUILDER_PYTHON_STARTUP``, else the user PythonStartup folder).
``python3 install.py --blender [--blender-version 4.5] [--addons-dir DIR] [--blender-python PATH]``
    Write a small add-on ``salient_poses`` into Blender's user add-ons folder that puts the
    checkout (or its copy under ``--prefix``) and ``.hosts/blender-<version>/site-packages`` on
    ``sys.path`` and registers ``blender_addon``; pip-install scipy, numba and the engine's
    other dependencies with Blender's own Python into that site folder (Blender ships numpy;
    without ``--blender-python`` the command is printed). Then enable *Salient Poses* in
    Preferences > Add-ons.
``python3 install.py --blender-extension OUT.zip (--wheels DIR | --no-wheels)``
    Build a Blender extension (4.2+; *Get Extensions > Install from Disk*): the manifest, an
    ``__init__.py`` that registers the bundled ``blender_addon``, and ``sp_core`` with the
    self-test's clip under ``lib/``. ``--wheels DIR`` bundles the ``.whl`` files found there
    (scipy, numba, ... for the target platform, from ``pip download``) and lists them in the
    manifest, so that Blender installs them (an extension must bring its dependencies);
    ``--no-wheels`` is for a Blender whose Python has them already.
``python3 install.py --uninstall [--maya] [--mobu] [--blender]``
    Remove exactly what was installed for this user (recorded in the user's
    ``~/.salient-poses/install-manifest.json``): a file only while it holds what was written
    (one changed since is kept and named), a folder only once empty, a copy under ``--prefix``
    only when no other host's install still uses it.
``python3 install.py --check``
    Report what is installed where and whether the hosts' Pythons import the engine.
``--dry-run``
    Print every file it would write and every command it would run; write nothing.

Running any of them twice changes nothing the second time. A file or folder that is in the way
and was not written by install.py (the user's own ``SalientPoses.mod``, a studio folder under
``--prefix``) is never replaced: the install stops and names it. Only the standard library is used
here: this script runs before anything is installed. It is built as a *plan* of steps (commands
and files) that is either printed (``--dry-run``) or carried out.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP_NAME = ".salient-poses-install"
STANDALONE_EXTRAS = "ui,cluster,dev,blender"


class InstallError(Exception):
    """A problem the user can fix; printed as one line, exit status 2."""


def shown(argv: list[str]) -> str:
    """A command as the user's shell takes it (paths with spaces quoted: Maya's default
    ``C:/Program Files/...`` was printed unquoted, not runnable as shown)."""
    return subprocess.list2cmdline(argv) if os.name == "nt" else shlex.join(argv)


def absolute(path: str) -> Path:
    """A path given on the command line, made absolute: written relative into a ``.mod`` file
    or an add-on, it was read relative to the file, or to the host's working folder."""
    return Path(os.path.abspath(os.path.expanduser(path)))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
            result = _run(argv, cwd=cwd)
            if result.returncode != 0:
                raise InstallError(f"command failed with status {result.returncode}: "
                                   + shown(argv))
        self.add("run: " + shown(argv), run)

    def execute(self, dry_run: bool) -> None:
        for step in self.steps:
            print(("[dry-run] " if dry_run else "") + step.describe, flush=True)
            if not dry_run:
                step.run()


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run``, with a program that cannot be started said in one line."""
    try:
        return subprocess.run(argv, **kwargs)
    except OSError as exc:
        raise InstallError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def _nothing() -> None:
    pass


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


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
    else:
        plan.command([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                      "--upgrade", "pip", "setuptools>=64", "wheel"])
        plan.command([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                      "-e", f"{ROOT}[{extras}]"])
        plan.add(f"write {stamp}", functools.partial(_write, stamp, fingerprint + "\n"))
    # numba kernels compiled into their cache and sp_core's modules to bytecode now, not in
    # the user's first analysis (about 1 s when both are already current)
    plan.command([str(python), "-m", "sp_core.warm"])


# ----------------------------------------------------------------------------- host installs
PACKAGES = ("sp_core", "maya_plugin", "mobu_plugin", "blender_addon", "examples")
HOST_DEPENDENCIES = ("numpy", "scipy", "numba", "threadpoolctl", "pyqtgraph")
#: What Blender's Python lacks (it ships numpy; the panel is Blender's own, no Qt): pip
#: requirement → the folder (or single-file module) it installs.
BLENDER_DEPENDENCIES = {"scipy": "scipy", "numba": "numba", "threadpoolctl": "threadpoolctl",
                        "tomli-w": "tomli_w", "tqdm": "tqdm", "ufbx==0.0.5": "ufbx"}
#: The manifest's path where a test or a caller sets one (default: the user's, see
#: :func:`user_manifest`).
MANIFEST: Path | None = None
#: Where installs before 2026-11-30 kept their manifest: in the checkout, shared by every user
#: (one user's uninstall removed another's install).
LEGACY_MANIFEST = ROOT / ".salient-poses-manifest.json"
BEGIN = "# >>> Salient Poses (added by install.py; removed by install.py --uninstall) >>>"
END = "# <<< Salient Poses <<<"


def home() -> Path:
    """The user's home folder (``HOME``, or ``USERPROFILE`` on Windows)."""
    value = os.environ.get("USERPROFILE" if os.name == "nt" else "HOME")
    return absolute(value) if value else Path.home()


def maya_app_dir() -> Path:
    """``MAYA_APP_DIR`` or the platform default (Autodesk's documented locations)."""
    if os.environ.get("MAYA_APP_DIR"):
        return absolute(os.environ["MAYA_APP_DIR"])
    if sys.platform == "win32":
        return home() / "Documents" / "maya"
    if sys.platform == "darwin":
        return home() / "Library" / "Preferences" / "Autodesk" / "maya"
    return home() / "maya"


def default_mayapy(version: str) -> Path:
    if sys.platform == "win32":
        return Path(f"C:/Program Files/Autodesk/Maya{version}/bin/mayapy.exe")
    if sys.platform == "darwin":
        return Path(f"/Applications/Autodesk/maya{version}/Maya.app/Contents/bin/mayapy")
    return Path(f"/usr/autodesk/maya{version}/bin/mayapy")


def default_mobu_startup(version: str) -> Path:
    """The user configuration's PythonStartup folder: ``FBSystem.GetPythonStartupPath`` documents
    ``<UserConfigDir>/config/PythonStartup`` as a folder whose scripts run at start-up, and the
    SDK's *Directory Structure* page puts the user configuration in Documents/MB/<version>."""
    return home() / "Documents" / "MB" / version / "config" / "PythonStartup"


def mobu_startup_dir(args: argparse.Namespace) -> tuple[Path, str]:
    """Where the start-up script goes, and which documented mechanism makes MotionBuilder run
    it: ``--startup-dir``, else the first folder of ``MOTIONBUILDER_PYTHON_STARTUP`` (folders
    MotionBuilder adds to its startup path), else the user PythonStartup folder."""
    if args.startup_dir:
        return absolute(args.startup_dir), \
            "--startup-dir (make sure it is a PythonStartup folder)"
    listed = [p for p in os.environ.get("MOTIONBUILDER_PYTHON_STARTUP", "").split(os.pathsep)
              if p]
    if listed:
        return absolute(listed[0]), "the first folder of MOTIONBUILDER_PYTHON_STARTUP"
    return default_mobu_startup(args.mobu_version), "the user PythonStartup folder"


MOBUPY_SITE = ("import json, sysconfig; print(json.dumps({'purelib': "
               "sysconfig.get_paths()['purelib']}))")


def mobupy_site(python: Path) -> Path | None:
    """The site-packages folder of MotionBuilder's Python where a ``.pth`` file puts this
    checkout and the dependencies on its path; None if it cannot be asked or written (an
    install under Program Files). Not the user site-packages: every Python of that version
    reads it, before its own packages, and would import this install's numpy and scipy."""
    try:
        result = subprocess.run([str(python), "-c", MOBUPY_SITE], capture_output=True,
                                text=True, timeout=120)
        folders = json.loads(result.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None
    purelib = Path(folders["purelib"])
    writable = purelib
    while not writable.exists():
        writable = writable.parent
    return purelib if os.access(writable, os.W_OK) else None


def default_mobupy(version: str) -> Path:
    if sys.platform == "win32":
        return Path(f"C:/Program Files/Autodesk/MotionBuilder {version}/bin/x64/mobupy.exe")
    return Path(f"/usr/autodesk/MotionBuilder{version}/bin/linux_64/mobupy")


def user_manifest() -> Path:
    """The user's manifest of what install.py wrote (per user, for every checkout)."""
    return home() / ".salient-poses" / "install-manifest.json"


class Manifest:
    """What install.py created for this user, so that ``--uninstall`` removes exactly that.

    Each entry is a dict with ``target`` (maya, mobu, blender), ``kind`` (``file`` with the
    ``sha256`` of what was written, ``tree`` a copied folder, ``folder`` one created, ``block``
    of an old install, ``settings`` where an install put things) and ``path``.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or MANIFEST or user_manifest()
        self.entries: list[dict[str, str]] = []
        #: the old shared manifest's entries left to other users, written once this manifest
        #: is saved (a dry run or a check writes nothing); the paths taken over from it
        self._legacy_rest: list[dict[str, str]] | None = None
        self.adopted: list[str] = []
        if self.path.exists():
            try:
                record = json.loads(self.path.read_text(encoding="utf-8"))
                entries = record["entries"]
                self.adopted = [str(p) for p in record.get("adopted", [])]
                if not isinstance(entries, list) or not all(
                        isinstance(e, dict) and all(isinstance(e.get(k), str)
                                                    for k in ("target", "kind", "path"))
                        for e in entries):
                    raise ValueError("an entry is not a target, a kind and a path")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InstallError(f"{self.path} is damaged ({exc}); move it away (what it "
                                   "listed must then be removed by hand)") from None
            self.entries = entries
        if path is None and MANIFEST is None:
            self._adopt_legacy()

    def _adopt_legacy(self) -> None:
        """Take over this user's entries of the checkout's old shared manifest: those whose
        file is this user's (or gone), with an absolute path (an old install wrote a relative
        ``--prefix`` as given: where it points depends on the folder it ran in, unknown now),
        not taken over before (a checkout the user cannot write keeps them); the others stay
        there for their users."""
        if not LEGACY_MANIFEST.exists():
            return
        try:
            entries = json.loads(LEGACY_MANIFEST.read_text(encoding="utf-8"))["entries"]
            mine = [e for e in entries if Path(e["path"]).is_absolute()
                    and e["path"] not in self.adopted and _owned_by_me(Path(e["path"]))]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return  # (not ours to repair: an older install's file)
        if not mine:
            return
        held = {_key(e) for e in self.entries}
        self.entries += [e for e in mine if _key(e) not in held]
        self.adopted += [e["path"] for e in mine]
        self._legacy_rest = [e for e in entries if e not in mine]

    def find(self, kind: str, path: Path, target: str | None = None) -> list[dict[str, str]]:
        return [e for e in self.entries if e["kind"] == kind and e["path"] == str(path)
                and (target is None or e["target"] == target)]

    def record(self, entry: dict[str, str]) -> None:
        """Add ``entry`` (replacing this target's entry of the same kind and path)."""
        same = [e for e in self.entries if _key(e) == _key(entry)]
        if same == [entry]:
            return
        for old in same:
            self.entries.remove(old)
        self.entries.append(entry)
        self.save()

    def forget(self, entry: dict[str, str]) -> None:
        if entry in self.entries:
            self.entries.remove(entry)
            self.save()

    def save(self) -> None:
        try:
            if self.entries or self.adopted:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                record = {"entries": self.entries,
                          **({"adopted": self.adopted} if self.adopted else {})}
                self.path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            elif self.path.exists():
                self.path.unlink()
                with contextlib.suppress(OSError):  # (its folder, once empty)
                    self.path.parent.rmdir()
        except OSError as exc:
            raise InstallError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        if self._legacy_rest is not None:
            rest, self._legacy_rest = self._legacy_rest, None
            with contextlib.suppress(OSError):  # (a read-only checkout keeps it)
                if rest:
                    LEGACY_MANIFEST.write_text(json.dumps({"entries": rest}, indent=1) + "\n",
                                               encoding="utf-8")
                else:
                    LEGACY_MANIFEST.unlink()


def _changed(entry: dict[str, str]) -> bool:
    """A file entry whose file is there and holds other bytes than install.py wrote (an entry
    of an old install, without a checksum, never counts as changed)."""
    path = Path(entry["path"])
    return bool(entry["kind"] == "file" and entry.get("sha256") and path.is_file()
                and digest(path.read_bytes()) != entry["sha256"])


def _key(entry: dict[str, str]) -> tuple[str, str, str]:
    """What names a manifest entry: its target, kind and path (a file's checksum changes)."""
    return entry["target"], entry["kind"], entry["path"]


def _owned_by_me(path: Path) -> bool:
    """``path`` is this user's, or gone (what an old shared manifest listed for whom)."""
    try:
        return not hasattr(os, "getuid") or path.lstat().st_uid == os.getuid()
    except OSError:
        return True


def _writable_parent(path: Path) -> None:
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise InstallError(f"cannot write {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK):
        raise InstallError(f"cannot write {path}: {folder} is not writable; choose another "
                           "folder with the matching --...-dir option")


def _record_new_folders(manifest: Manifest, target: str, path: Path) -> None:
    """Remember each folder above ``path`` that does not exist yet, outermost first (created
    by us, so uninstall removes each again once it is empty; not the folders the user makes
    inside them later, as removing every empty folder under the outermost one did)."""
    new = []
    folder = path.parent
    while not folder.exists():
        new.append(folder)
        folder = folder.parent
    for folder in reversed(new):
        manifest.record({"target": target, "kind": "folder", "path": str(folder),
                         "each": "yes"})


def _remove_empty_folder(folder: Path, inside: bool = False) -> None:
    """Remove ``folder`` if it holds nothing; ``inside``: the empty folders in it first (an
    old install recorded only the outermost folder it made)."""
    with contextlib.suppress(OSError):
        if inside and folder.is_dir():
            for inner in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
                if not any(inner.iterdir()):
                    inner.rmdir()
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def plan_file(plan: Plan, manifest: Manifest, target: str, path: Path, text: str,
              option: str = "") -> None:
    """Write ``text`` (UTF-8) to ``path`` unless it holds exactly that already. A file in the
    way that install.py did not write, or that was changed since it wrote it, is refused
    (``option``: the flag that chooses another folder): it is the user's.
    """
    data = text.encode("utf-8")
    entry = {"target": target, "kind": "file", "path": str(path), "sha256": digest(data)}
    if path.is_dir():
        raise InstallError(f"cannot write {path}: it is a folder")
    if path.exists():
        try:
            current = path.read_bytes()
        except OSError as exc:
            raise InstallError(f"cannot read {path}: {exc.strerror or exc}") from None
        written = manifest.find("file", path)
        if current == data:
            # (recorded for this target too where this user's install wrote it; the same
            # bytes another account wrote stay theirs: this user's uninstall leaves them)
            plan.add(f"{path} is up to date",
                     functools.partial(manifest.record, entry) if written else _nothing)
            return
        sums = {e.get("sha256") for e in written}
        if not written:
            raise InstallError(f"{path} is in the way: install.py did not write it (a file of "
                               f"yours?); move it away{' or give ' + option if option else ''}")
        if None not in sums and digest(current) not in sums:
            raise InstallError(f"{path} was changed since install.py wrote it; move your "
                               "version away to install over it")
    _writable_parent(path)

    def write() -> None:
        _record_new_folders(manifest, target, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        manifest.record(entry)
    plan.add(f"write {path}", write)


def plan_copy(plan: Plan, manifest: Manifest, target: str, prefix: Path) -> None:
    """Copy the packages into ``prefix`` (for a studio location independent of this checkout).
    A folder of that name that install.py did not make is refused, never replaced."""
    for name in PACKAGES:
        source, destination = ROOT / name, prefix / name
        ours = bool(manifest.find("tree", destination))
        if destination.exists() and not destination.is_dir():
            raise InstallError(f"cannot copy to {destination}: it is a file")
        same = destination.is_dir() and _same_tree(source, destination)
        if destination.exists() and not ours and not same:
            raise InstallError(f"{destination} is in the way: this account's installs did not "
                               "make it and it is not this checkout's copy (a folder of yours, "
                               "or another version's?); choose another --prefix or move it away")
        entry = {"target": target, "kind": "tree", "path": str(destination)}
        if same:
            # recorded for this target too where this user's install made it (another
            # target's uninstall leaves it); another account's copy is used, not taken over
            plan.add(f"{destination} is up to date",
                     functools.partial(manifest.record, entry) if ours else _nothing)
            continue
        _writable_parent(destination)

        def copy(source: Path = source, destination: Path = destination,
                 entry: dict[str, str] = entry) -> None:
            _record_new_folders(manifest, target, destination / "x")
            if destination.exists():
                shutil.rmtree(destination)
            shutil.copytree(source, destination,
                            ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
            manifest.record(entry)
        plan.add(f"copy {source} to {destination}", copy)


def _same_tree(a: Path, b: Path) -> bool:
    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts
                and p.suffix not in (".nbi", ".nbc")}
    return files(a) == files(b)


def plan_settings(plan: Plan, manifest: Manifest, target: str, host_file: Path,
                  paths: dict[str, Path]) -> None:
    """Remember where the install put things (for ``--check`` without the install's flags)."""
    entry = {"target": target, "kind": "settings", "path": str(host_file),
             "root": str(paths["root"]), "site": str(paths["site"]),
             "python": str(paths["python"])}
    plan.add(f"{target}: remember the install's folders and host Python",
             functools.partial(manifest.record, entry))


def plan_dependencies(plan: Plan, manifest: Manifest, target: str, interpreter: Path,
                      site: Path, packages: dict[str, str] | None = None) -> None:
    """pip-install the engine's dependencies with the host's own Python into ``site``
    (``packages``: requirement → installed folder; default :data:`HOST_DEPENDENCIES`)."""
    packages = packages or {name: name for name in HOST_DEPENDENCIES}
    argv = [str(interpreter), "-m", "pip", "install", "--disable-pip-version-check", "-q",
            "--upgrade", "--target", str(site), *packages]
    if not interpreter.exists():
        plan.add(f"{target}: host Python {interpreter} not found; install the dependencies "
                 f"yourself with:\n    {shown(argv)}", lambda: None)
        return
    if site.exists() and all((site / name).exists() or (site / f"{name}.py").exists()
                             for name in packages.values()):
        plan.add(f"{site} already has {', '.join(packages)}", lambda: None)
        return

    def install() -> None:
        _record_new_folders(manifest, target, site / "x")
        result = _run(argv)
        if result.returncode != 0:
            raise InstallError(f"installing the dependencies with {interpreter} failed "
                               f"(status {result.returncode}): {shown(argv)}")
        manifest.record({"target": target, "kind": "tree", "path": str(site)})
    plan.add("run: " + shown(argv), install)


def maya_paths(args: argparse.Namespace) -> dict[str, Path]:
    version = args.maya_version
    app = maya_app_dir()
    home_dir = absolute(args.prefix) if args.prefix else ROOT
    modules = absolute(args.modules_dir) if args.modules_dir else app / "modules"
    return {"module": modules / f"SalientPoses-{version}.mod",
            "module_root": home_dir / "maya_plugin" / "module",
            "site": home_dir / ".hosts" / f"maya-{version}" / "site-packages",
            "root": home_dir,
            "python": absolute(args.mayapy) if args.mayapy else default_mayapy(version)}


def maya_module_text(version: str, module_root: Path) -> str:
    """The ``.mod`` file. Maya puts the module's ``scripts/`` (holding its own ``userSetup.py``,
    which loads the plug-in and adds the menu) on ``PYTHONPATH`` and ``plug-ins/`` on
    ``MAYA_PLUG_IN_PATH``; ``VAR+:=path`` appends a path *relative to the module root*
    (Autodesk, "Sample module file"), here the checkout and its dependencies."""
    return (f"+ MAYAVERSION:{version} SalientPoses 1.0 {module_root}\n"
            "PYTHONPATH+:=../..\n"
            f"PYTHONPATH+:=../../.hosts/maya-{version}/site-packages\n")


def plan_maya(plan: Plan, manifest: Manifest, args: argparse.Namespace) -> None:
    paths = maya_paths(args)
    if args.prefix:
        plan_copy(plan, manifest, "maya", paths["root"])
    plan_file(plan, manifest, "maya", paths["module"],
              maya_module_text(args.maya_version, paths["module_root"]), "--modules-dir")
    # the one .mod file of installs before 2026-11-30 (one version only): for this version
    # it would load the module twice
    single = paths["module"].with_name("SalientPoses.mod")
    for entry in manifest.find("file", single, "maya"):
        try:
            text = single.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text.startswith(f"+ MAYAVERSION:{args.maya_version} "):
            def remove(entry: dict[str, str] = entry) -> None:
                single.unlink(missing_ok=True)
                manifest.forget(entry)
            plan.add(f"remove {single} (an earlier install's, for {args.maya_version})", remove)
    # (recorded before the dependencies: a failing pip leaves --check the install's folders)
    plan_settings(plan, manifest, "maya", paths["module"], paths)
    if not args.no_deps:
        plan_dependencies(plan, manifest, "maya", paths["python"], paths["site"])
    selftest = paths["root"] / "maya_plugin" / "selftest.py"
    plan.add(f"Maya: restart Maya for the Salient Poses menu; prove it with\n"
             f"    {shown([str(paths['python']), str(selftest)])}", lambda: None)


def mobu_paths(args: argparse.Namespace) -> dict[str, Path]:
    version = args.mobu_version
    home_dir = absolute(args.prefix) if args.prefix else ROOT
    return {"startup": mobu_startup_dir(args)[0] / "salient_poses_startup.py",
            "site": home_dir / ".hosts" / f"mobu-{version}" / "site-packages",
            "root": home_dir,
            "python": absolute(args.mobupy) if args.mobupy else default_mobupy(version)}


def plan_mobu(plan: Plan, manifest: Manifest, args: argparse.Namespace) -> None:
    """MotionBuilder: the dependencies installed with mobupy into our own site folder; a
    ``salient_poses.pth`` in mobupy's site-packages naming this checkout and that folder (so
    ``mobupy -m mobu_plugin.batch`` and ``mobupy -m mobu_plugin.selftest`` work from a clean
    shell, and MotionBuilder's embedded Python, the same installation, sees them too); and a
    start-up script in a documented PythonStartup folder that adds the menu."""
    paths = mobu_paths(args)
    folder, mechanism = mobu_startup_dir(args)
    if args.prefix:
        plan_copy(plan, manifest, "mobu", paths["root"])
    plan.add(f"MotionBuilder start-up folder: {folder} ({mechanism})", lambda: None)
    script = ('"""Salient Poses start-up (written by install.py --mobu)."""\n'
              "import sys\n"
              f"for _path in ({str(paths['root'])!r}, {str(paths['site'])!r}):\n"
              "    if _path not in sys.path:\n"
              "        sys.path.append(_path)\n"
              "try:\n    import mobu_plugin.startup\n    mobu_plugin.startup.install()\n"
              "except ImportError as exc:\n    print('Salient Poses is not available:', exc)\n")
    plan_file(plan, manifest, "mobu", paths["startup"], script, "--startup-dir")
    # (recorded before the dependencies: a failing pip leaves --check the install's folders)
    plan_settings(plan, manifest, "mobu", paths["startup"], paths)
    if not args.no_deps:
        plan_dependencies(plan, manifest, "mobu", paths["python"], paths["site"])
    python = paths["python"]
    site = mobupy_site(python) if python.exists() else None
    # a .pth an older install wrote into the user's shared site-packages (under the home
    # folder: every Python of that version reads it first) goes, unless changed since; not
    # the .pth of another MotionBuilder version's install, in its own mobupy's site-packages
    user = home()
    for entry in [e for e in manifest.entries if e["target"] == "mobu" and e["kind"] == "file"
                  and Path(e["path"]).name == "salient_poses.pth"
                  and Path(e["path"]).is_relative_to(user)
                  and (site is None or Path(e["path"]) != site / "salient_poses.pth")
                  and not _changed(e)]:
        def remove(entry: dict[str, str] = entry) -> None:
            Path(entry["path"]).unlink(missing_ok=True)
            manifest.forget(entry)
        plan.add(f"remove {entry['path']} (an earlier install's)", remove)
    if site is None:
        plan.add(f"mobu: could not ask {python} for its site-packages, or cannot write "
                 "there; to run `mobupy -m mobu_plugin.batch` put these two folders on its "
                 f"PYTHONPATH:\n    {paths['root']}\n    {paths['site']}", lambda: None)
        return
    plan_file(plan, manifest, "mobu", site / "salient_poses.pth",
              f"{paths['root']}\n{paths['site']}\n")


def blender_user_dir(version: str) -> Path:
    """Blender's USER folder (Blender manual, "Blender's Directory Layout"): Linux
    ``$XDG_CONFIG_HOME/blender/<v>`` or ``~/.config/blender/<v>``, macOS ``~/Library/Application
    Support/Blender/<v>``, Windows ``%APPDATA%/Blender Foundation/Blender/<v>``; a
    ``BLENDER_USER_RESOURCES`` set replaces it ("can be set to a custom directory to replace
    the default user directory", the same page)."""
    if os.environ.get("BLENDER_USER_RESOURCES"):
        return absolute(os.environ["BLENDER_USER_RESOURCES"])
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else home() / "AppData" / "Roaming"
        return base / "Blender Foundation" / "Blender" / version
    if sys.platform == "darwin":
        return home() / "Library" / "Application Support" / "Blender" / version
    config = os.environ.get("XDG_CONFIG_HOME")
    return (absolute(config) if config else home() / ".config") / "blender" / version


def blender_paths(args: argparse.Namespace) -> dict[str, Path]:
    version = args.blender_version
    home_dir = absolute(args.prefix) if args.prefix else ROOT
    addons = absolute(args.addons_dir) if args.addons_dir else \
        blender_user_dir(version) / "scripts" / "addons"
    return {"addon": addons / "salient_poses" / "__init__.py",
            "site": home_dir / ".hosts" / f"blender-{version}" / "site-packages",
            "root": home_dir,
            "python": absolute(args.blender_python) if args.blender_python
            else Path("<Blender's python>")}


def blender_loader_text(root: Path, site: Path) -> str:
    """The add-on Blender loads: ``bl_info`` written out literally (Blender reads it without
    running the file), then the paths and ``blender_addon``'s register/unregister."""
    # read from the package's syntax tree, as Blender reads it: importing the package wrote
    # its bytecode into the checkout, on a --dry-run too
    source = (ROOT / "blender_addon" / "__init__.py").read_text(encoding="utf-8")
    (assignment,) = [node for node in ast.parse(source).body if isinstance(node, ast.Assign)
                     and getattr(node.targets[0], "id", None) == "bl_info"]
    bl_info = ast.literal_eval(assignment.value)
    return ('"""Salient Poses for Blender (written by install.py --blender; removed by\n'
            'install.py --uninstall --blender)."""\n\n'
            "import sys\n\n"
            f"bl_info = {bl_info!r}\n\n"
            f"for _path in ({str(root)!r}, {str(site)!r}):\n"
            "    if _path not in sys.path:\n"
            "        sys.path.append(_path)\n\n"
            "from blender_addon import register, unregister  # noqa: E402\n")


def plan_blender(plan: Plan, manifest: Manifest, args: argparse.Namespace) -> None:
    paths = blender_paths(args)
    if args.prefix:
        plan_copy(plan, manifest, "blender", paths["root"])
    plan_file(plan, manifest, "blender", paths["addon"],
              blender_loader_text(paths["root"], paths["site"]), "--addons-dir")
    plan_settings(plan, manifest, "blender", paths["addon"], paths)
    if not args.no_deps:
        plan_dependencies(plan, manifest, "blender", paths["python"], paths["site"],
                          BLENDER_DEPENDENCIES)
    plan.add("Blender: enable Salient Poses in Preferences > Add-ons; prove it with\n"
             "    blender -b --python-expr \"from blender_addon import selftest; "
             "selftest.main([])\"", lambda: None)


EXTENSION_INIT = '''"""Salient Poses as a Blender extension (built by install.py).
"""

import os
import sys

_LIB = os.path.join(os.path.dirname(__file__), "lib")  # sp_core and blender_addon
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)

import blender_addon  # noqa: E402


def register():
    try:
        blender_addon.register()
    except ModuleNotFoundError as missing:  # a dependency this Blender's Python lacks
        if not missing.name or missing.name.split(".")[0] in ("sp_core", "blender_addon"):
            raise
        raise RuntimeError(
            f"Salient Poses needs the Python package {missing.name!r}, which this Blender "
            "lacks: install the extension built with the dependencies' wheels (install.py "
            "--blender-extension OUT.zip --wheels DIR)") from missing


def unregister():
    blender_addon.unregister()
'''


def extension_files(wheels: Path | None) -> dict[str, bytes]:
    """Archive name → content of the Blender extension zip."""
    manifest = (ROOT / "blender_addon" / "blender_manifest.toml").read_text()
    found = sorted(wheels.glob("*.whl")) if wheels is not None else []
    if wheels is not None and not found:
        raise InstallError(f"no .whl files in {wheels}")
    if found:  # a top-level key: before the first [table]
        listed = ", ".join(f'"./wheels/{w.name}"' for w in found)
        lines = manifest.splitlines(keepends=True)
        at = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
        lines.insert(at, f"# added by install.py --blender-extension --wheels\n"
                         f"wheels = [{listed}]\n\n")
        manifest = "".join(lines)
    files = {"blender_manifest.toml": manifest.encode(), "__init__.py": EXTENSION_INIT.encode()}
    for package in ("sp_core", "blender_addon"):
        for path in sorted((ROOT / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts \
                    and path.suffix not in (".nbi", ".nbc", ".pyc"):
                files[f"lib/{path.relative_to(ROOT).as_posix()}"] = path.read_bytes()
    # the self-test's clip (blender_addon/selftest.py reads ROOT/examples)
    sample = ROOT / "examples" / "cmu_131_01.bvh"
    files[f"lib/examples/{sample.name}"] = sample.read_bytes()
    for wheel in found:
        files[f"wheels/{wheel.name}"] = wheel.read_bytes()
    return files


def plan_blender_extension(plan: Plan, out: Path, wheels: Path | None,
                           no_wheels: bool = False) -> None:
    import zipfile

    if wheels is None and not no_wheels:
        # an extension must bring its dependencies (Blender manual, Extensions > Add-ons,
        # "Bundle Dependencies"); without them, enabling it fails in a stock Blender
        raise InstallError(
            "--blender-extension needs the dependencies' wheels for the target platform: "
            "download them, e.g.\n    python3 -m pip download --only-binary=:all: "
            "--python-version 3.11 --platform manylinux_2_28_x86_64 -d wheels scipy numba "
            "threadpoolctl tomli-w tqdm ufbx==0.0.5\nand give --wheels wheels (or --no-wheels "
            "for a Blender whose Python has them already)")
    _writable_parent(out)

    def build() -> None:
        files = extension_files(wheels)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, content in files.items():
                archive.writestr(name, content)
        partial.replace(out)
    bundled = f" with the wheels of {wheels}" if wheels else ""
    plan.add(f"write {out} (Blender extension{bundled})", build)
    if wheels is None:
        plan.add("Blender extension without dependency wheels (--no-wheels): the target "
                 "Blender's Python must have scipy, numba, threadpoolctl, tomli-w, tqdm and "
                 "ufbx already", lambda: None)


def plan_uninstall(plan: Plan, manifest: Manifest, targets: set[str]) -> None:
    """Remove what was installed for ``targets``: a file only while it holds what was written
    (one changed since is kept, and said), a copied tree or a folder only when no other
    target's install still lists it, a folder only once empty."""
    entries = [e for e in manifest.entries if e["target"] in targets]
    if not entries:
        plan.add("nothing to uninstall (no manifest entries for "
                 f"{', '.join(sorted(targets))})", lambda: None)
    # what the other targets' installs list: a shared --prefix's copies, folders, ...
    users: dict[tuple[str, str], set[str]] = {}
    for e in manifest.entries:
        if e["target"] not in targets:
            users.setdefault((e["kind"], e["path"]), set()).add(e["target"])
    # files and copies first, then the folders, deepest first (a folder is removed once empty)
    ordered = [e for e in reversed(entries) if e["kind"] != "folder"] + sorted(
        (e for e in entries if e["kind"] == "folder"),
        key=lambda e: len(Path(e["path"]).parts), reverse=True)
    for entry in ordered:
        path = Path(entry["path"])
        if entry["kind"] == "settings":
            plan.add(f"{entry['target']}: forget the install's folders",
                     functools.partial(manifest.forget, entry))
            continue
        others = users.get((entry["kind"], entry["path"]))
        if others:
            plan.add(f"keep {path} (the {' and '.join(sorted(others))} install uses it)",
                     functools.partial(manifest.forget, entry))
            continue
        if _changed(entry):
            plan.add(f"keep {path}: changed since install.py wrote it (yours now)",
                     functools.partial(manifest.forget, entry))
            continue

        def remove(entry: dict[str, str] = entry, path: Path = path) -> None:
            if entry["kind"] == "file" and path.is_file():
                path.unlink()
            elif entry["kind"] == "tree" and path.is_dir():
                shutil.rmtree(path)
            elif entry["kind"] == "folder":
                _remove_empty_folder(path, inside=entry.get("each") != "yes")
                heirs = sorted({e["target"] for e in manifest.entries
                                if e["target"] not in targets and e["kind"] != "settings"
                                and Path(e["path"]).is_relative_to(path)})
                if path.exists() and heirs:
                    # (a --prefix folder made by this install holding another's copies: that
                    # install removes it once empty)
                    manifest.record({**entry, "target": heirs[0]})
            elif entry["kind"] == "block" and path.exists():
                text = path.read_text(encoding="utf-8")
                start, end = text.find(BEGIN), text.find(END)
                if start >= 0 and end >= 0:
                    text = text[:start] + text[end + len(END):].lstrip("\n")
                    if text.strip():
                        path.write_text(text, encoding="utf-8")
                    else:
                        path.unlink()
            manifest.forget(entry)
        what = {"block": "remove the Salient Poses block from",
                "folder": "remove if empty:"}.get(entry["kind"], "remove")
        plan.add(f"{what} {path}", remove)


def check(args: argparse.Namespace, manifest: Manifest) -> int:
    """Report what is installed where and whether the hosts' Pythons import the engine, from
    the folders and host Pythons each install recorded (a host Python given on the command
    line is asked instead); 1 if anything is missing or cannot import."""
    problems = 0
    print(f"checkout: {ROOT}")
    stamp = VENV / STAMP_NAME
    if not stamp.exists():
        state = "not installed"
    elif stamp.read_text().strip() != _fingerprint(STANDALONE_EXTRAS):
        state = "OUT OF DATE (pyproject.toml changed since: run install.py --standalone)"
        problems += 1
    else:
        state = "ready"
    print(f"standalone: {state} ({VENV})")
    for entry in manifest.entries:
        if entry["kind"] == "settings":
            continue
        present = Path(entry["path"]).exists()
        state = "CHANGED since written" if _changed(entry) else "present" if present \
            else "MISSING"
        problems += entry["kind"] != "folder" and not present
        print(f"{entry['target']}: {entry['kind']} {entry['path']} ({state})")
    given = {"maya": args.mayapy, "mobu": args.mobupy, "blender": args.blender_python}
    for target, module in (("maya", "maya_plugin"), ("mobu", "mobu_plugin"),
                           ("blender", "blender_addon")):
        installs = [e for e in manifest.entries
                    if e["target"] == target and e["kind"] == "settings"]
        if not installs and any(e["target"] == target for e in manifest.entries):
            # (an install from before the folders were recorded: the command line's)
            paths = {"maya": maya_paths, "mobu": mobu_paths, "blender": blender_paths}[target](
                args)
            installs = [{"root": str(paths["root"]), "site": str(paths["site"]),
                         "python": str(paths["python"]), "path": "?"}]
        if not installs:
            print(f"{target}: not installed")
            continue
        for install in installs:
            python = absolute(given[target]) if given[target] else Path(install["python"])
            if not python.exists():
                print(f"{target}: host Python {python} not found (give its path to check "
                      "imports)")
                continue
            code = (f"import sys; sys.path[:0] = [{install['root']!r}, {install['site']!r}]; "
                    f"import sp_core.selection, {module}; print('ok')")
            try:
                result = _run([str(python), "-c", code], capture_output=True, text=True)
            except InstallError as exc:
                problems += 1
                print(f"{target}: {exc}")
                continue
            ok = result.returncode == 0 and result.stdout.strip().endswith("ok")
            problems += not ok
            print(f"{target}: {python} "
                  f"{'imports the engine' if ok else 'CANNOT import the engine'} from "
                  f"{install['root']}"
                  + ("" if ok else f": {result.stderr.strip().splitlines()[-1:]}"))
    return 1 if problems else 0


#: What each host's version looks like (Maya and MotionBuilder years, Blender major.minor).
VERSIONS = {"maya_version": re.compile(r"20\d\d"), "mobu_version": re.compile(r"20\d\d"),
            "blender_version": re.compile(r"\d+\.\d+")}


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse a version that names no release (``2O25`` wrote a module no Maya loads) and a
    host Python given that does not exist (the install went on without its dependencies)."""
    for name, pattern in VERSIONS.items():
        if not pattern.fullmatch(getattr(args, name)):
            example = "4.5" if name.startswith("blender") else "2025"
            raise InstallError(f"--{name.replace('_', '-')} {getattr(args, name)!r} is not a "
                               f"version (e.g. {example})")
    if args.no_deps or args.uninstall:
        return
    for flag in ("mayapy", "mobupy", "blender_python"):
        given = getattr(args, flag)
        if given and not absolute(given).is_file():
            raise InstallError(f"--{flag.replace('_', '-')} {given}: no such file (the host's "
                               "Python; or give --no-deps to install without the dependencies)")
        if given and not os.access(absolute(given), os.X_OK):
            raise InstallError(f"--{flag.replace('_', '-')} {given}: not a program this "
                               "account may run (the host's Python)")


def main(argv: list[str] | None = None) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script may be started by any python3
        print(f"install.py: error: Python 3.11 or newer is needed, this is "
              f"{sys.version.split()[0]}; run it with python3.11", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--standalone", action="store_true",
                        help="create .venv in this checkout and install the project with its "
                             "extras")
    parser.add_argument("--maya", action="store_true", help="install into Maya")
    parser.add_argument("--mobu", action="store_true", help="install into MotionBuilder")
    parser.add_argument("--uninstall", action="store_true",
                        help="remove what install.py installed for the named targets (all if "
                             "none is named)")
    parser.add_argument("--check", action="store_true",
                        help="report what is installed where and whether the hosts import it")
    parser.add_argument("--dry-run", action="store_true",
                        help="print every step it would take and change nothing")
    parser.add_argument("--no-deps", action="store_true",
                        help="do not pip-install numpy, scipy, numba, pyqtgraph for the hosts")
    parser.add_argument("--prefix", metavar="DIR",
                        help="copy the packages here and point the hosts at the copy")
    maya = parser.add_argument_group("Maya")
    maya.add_argument("--maya-version", default="2025", metavar="V")
    maya.add_argument("--modules-dir", metavar="DIR",
                      help="where SalientPoses.mod goes (default MAYA_APP_DIR/modules)")
    maya.add_argument("--mayapy", metavar="PATH", help="Maya's Python (default: the standard "
                                                       "install location of that version)")
    mobu = parser.add_argument_group("MotionBuilder")
    mobu.add_argument("--mobu-version", default="2025", metavar="V")
    mobu.add_argument("--startup-dir", metavar="DIR",
                      help="PythonStartup folder (default: the first folder of "
                           "MOTIONBUILDER_PYTHON_STARTUP, else Documents/MB/V/config/"
                           "PythonStartup)")
    mobu.add_argument("--mobupy", metavar="PATH", help="MotionBuilder's Python")
    blender = parser.add_argument_group("Blender")
    blender.add_argument("--blender", action="store_true", help="install into Blender")
    blender.add_argument("--blender-version", default="4.5", metavar="V")
    blender.add_argument("--addons-dir", metavar="DIR",
                         help="Blender's add-ons folder (default: the user scripts folder's "
                              "addons)")
    blender.add_argument("--blender-python", metavar="PATH",
                         help="Blender's own Python (in Blender's folder: <version>/python/bin)")
    blender.add_argument("--blender-extension", metavar="OUT.zip",
                         help="build a Blender extension zip (Install from Disk)")
    blender.add_argument("--wheels", metavar="DIR",
                         help="with --blender-extension: bundle the .whl files of DIR")
    blender.add_argument("--no-wheels", action="store_true",
                         help="with --blender-extension: bundle no wheels (the target "
                              "Blender's Python has the dependencies already)")
    args = parser.parse_args(argv)
    if not (args.standalone or args.maya or args.mobu or args.blender or args.blender_extension
            or args.uninstall or args.check):
        parser.error("say what to do: --standalone, --maya, --mobu, --blender, "
                     "--blender-extension, --uninstall or --check")

    plan = Plan()
    try:
        _check_arguments(args)
        hosts = [plan_host for flag, plan_host in (
            ("maya", plan_maya), ("mobu", plan_mobu), ("blender", plan_blender))
            if getattr(args, flag)]
        # the manifest is read for the host installs only (a damaged one does not stop the
        # standalone install or an extension zip, which it does not list)
        manifest = Manifest() if hosts or args.uninstall or args.check else None
        if args.check:
            assert manifest is not None
            return check(args, manifest)
        if args.uninstall:
            assert manifest is not None
            if args.standalone:
                raise InstallError("--uninstall removes the host installs; the standalone "
                                   f"install is {VENV}: delete that folder to remove it")
            targets = {t for t in ("maya", "mobu", "blender") if getattr(args, t)} or \
                {"maya", "mobu", "blender"}
            plan_uninstall(plan, manifest, targets)
        else:
            if args.standalone:
                plan_standalone(plan)
            for plan_host in hosts:
                assert manifest is not None
                plan_host(plan, manifest, args)
            if args.blender_extension:
                plan_blender_extension(plan, absolute(args.blender_extension),
                                       absolute(args.wheels) if args.wheels else None,
                                       args.no_wheels)
        plan.execute(args.dry_run)
    except InstallError as exc:
        print(f"install.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
