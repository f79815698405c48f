"""How Maya reads a module description (.mod) file, from Autodesk's "Maya module paths, folders
and versions", "Installing the module" and "Sample module file" pages (see FACTS.md).

Not Maya code: a reader of the documented syntax, enough to check what install.py writes.
"""

from __future__ import annotations

import os
from pathlib import Path


def module_environment(mod_file: Path, maya_version: str) -> dict[str, list[str]]:
    """Variables Maya would set from ``mod_file`` for ``maya_version``.

    - ``+ [MAYAVERSION:v] name version path``: a module for Maya ``v``; ``path`` is absolute or
      relative to the .mod file's folder.
    - ``VAR+:=value`` appends ``value`` *relative to the module root*; ``VAR+=value`` appends
      ``value`` as written; ``VAR:=value`` / ``VAR=value`` set it likewise.
    - Maya adds the module's ``scripts`` folder to ``PYTHONPATH`` and ``MAYA_SCRIPT_PATH`` and
      its ``plug-ins`` folder to ``MAYA_PLUG_IN_PATH``.
    """
    env: dict[str, list[str]] = {}
    root: Path | None = None
    for raw in mod_file.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("+", "-")):
            fields = line[1:].split()
            conditions = [f for f in fields if ":" in f and f.split(":")[0].isupper()]
            rest = [f for f in fields if f not in conditions]
            versions = [c.split(":", 1)[1] for c in conditions if c.startswith("MAYAVERSION:")]
            if line.startswith("-") or (versions and maya_version not in versions):
                root = None
                continue
            path = Path(rest[2])
            root = path if path.is_absolute() else mod_file.parent / path
            for folder, names in (("scripts", ("PYTHONPATH", "MAYA_SCRIPT_PATH")),
                                  ("plug-ins", ("MAYA_PLUG_IN_PATH",))):
                for name in names:
                    env.setdefault(name, []).append(str(root / folder))
            continue
        if root is None:
            continue
        for operator in ("+:=", ":=", "+=", "="):
            if operator in line:
                name, value = (part.strip() for part in line.split(operator, 1))
                if ":" in operator:  # relative to the module root, joined as text
                    value = os.path.normpath(f"{root}{os.sep}{value}")
                values = env.setdefault(name, [])
                if "+" not in operator:
                    values.clear()
                values.append(value)
                break
    return env
