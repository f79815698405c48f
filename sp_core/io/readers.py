"""One registry of motion-file readers, chosen by file suffix.

Each reader module has ``read_clip(path, first_frame=None, take=None, root=None) -> Clip`` and is
imported only when a file of its type is read (so ``ufbx`` is needed only for FBX).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from sp_core.clip import Clip
from sp_core.errors import ClipFormatError

#: suffix -> module holding ``read_clip``
READERS: dict[str, str] = {
    ".bvh": "sp_core.io.bvh",
    ".fbx": "sp_core.io.fbx",
}

#: suffixes of the formats whose files may hold several takes (``take`` chooses one; a BVH file
#: holds one motion, and its reader refuses a take rather than ignore it)
TAKE_FORMATS = frozenset({".fbx"})


def read_clip(path: str | Path, first_frame: int | None = None, take: str | None = None,
              root: str | None = None) -> Clip:
    """Read any supported motion file.

    Parameters
    ----------
    path : str or path-like
    first_frame : int, optional
        Host frame number of the first frame (default the file's own: the take's start frame
        of an FBX file, 0 for BVH).
    take : str, optional
        The take (animation stack) of a file that holds several (FBX).
    root : str, optional
        The root joint of the skeleton to read; default every root (BVH) or the first
        skeleton root (FBX).

    Raises
    ------
    ClipFormatError
        A folder, an unsupported file type, or whatever the reader finds wrong (file and line
        named).
    """
    suffix = Path(path).suffix.lower()
    if Path(path).is_dir():
        raise ClipFormatError("is a folder, not a motion file (`salient-poses batch FOLDER "
                              "--out OUT` reduces every take in a folder)", str(path))
    if suffix not in READERS:
        raise ClipFormatError(f"unsupported file type {suffix or '(none)'!r}; salient-poses "
                              f"reads {', '.join(sorted(READERS))} files", str(path))
    module = importlib.import_module(READERS[suffix])
    return module.read_clip(path, first_frame=first_frame, take=take, root=root)


def supported(path: str | Path) -> bool:
    """``path`` has a suffix some reader takes."""
    return Path(path).suffix.lower() in READERS


def has_takes(path: str | Path) -> bool:
    """``path`` is of a format whose files may hold several takes (:data:`TAKE_FORMATS`)."""
    return Path(path).suffix.lower() in TAKE_FORMATS
