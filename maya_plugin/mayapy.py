"""Start Maya from a clean ``mayapy`` before anything that needs it is imported.

``mayapy /path/to/checkout/maya_plugin/selftest.py`` (or ``batch.py``) runs the file as a script:
neither the checkout nor its dependencies are on ``sys.path`` yet, and Maya reads its module
files only in ``maya.standalone.initialize()``. Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bootstrap() -> None:
    """Put the checkout on ``sys.path``, start Maya, then add the dependencies that
    ``install.py --maya`` put into ``.hosts/maya-<version>/site-packages``."""
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p != here]  # running a file put maya_plugin/ there
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from maya import cmds, standalone

    standalone.initialize(name="python")
    version = str(cmds.about(version=True)).split()[0].split(".")[0]
    site = ROOT / ".hosts" / f"maya-{version}" / "site-packages"
    if site.is_dir() and str(site) not in sys.path:
        sys.path.append(str(site))
