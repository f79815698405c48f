"""Salient Poses engine (host-independent)."""

import functools
import os
import stat
import sys
import tempfile

from sp_core.threads import blas_kernels, passive_waiting


@functools.cache  # (the package metadata is read from disk; a batch asks per take)
def version() -> str:
    """This installation's version of salient-poses (its package metadata), or ``"unknown"``
    when it runs from a bare checkout that was never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("salient-poses")
    except PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown"


def _user_cache() -> str:
    """Where numba keeps a user's kernels when it cannot write next to the modules (its
    ``appdirs.user_cache_dir("numba")``, by platform)."""
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numba")
    if sys.platform == "win32":
        return os.path.join(os.environ.get("LOCALAPPDATA") or os.path.expanduser("~"),
                            "numba", "Cache")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "numba")


def _private_folder(path: str) -> bool:
    """``path`` is (now) a folder of this user's that no one else may write: numba reads its
    index files with pickle, so a folder another account can write would run their code."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        status = os.lstat(path)
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or status.st_uid == os.getuid()
    return stat.S_ISDIR(status.st_mode) and mine and not status.st_mode & 0o022


def _numba_cache_fallback() -> None:
    """Give numba a cache folder it can write where it would find none.

    numba keeps compiled kernels next to the modules (``sp_core/__pycache__``, where
    ``install.py`` compiles them) when that folder is writable, else in the user's cache
    (:func:`_user_cache`). An install owned by another account, run by a user whose home is
    not writable (a farm's service account), has neither: every ``@njit(cache=True)`` then
    failed at import ("no locator available"), before any message could be given. Such a user
    gets a private folder under the system's temporary folder instead (the kernels compile on
    the first run there; a folder of that name another account made is not used: a new one
    is, for this process). ``NUMBA_CACHE_DIR``, if set, is left alone.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if os.access(os.path.join(here, "__pycache__"), os.W_OK) or os.access(here, os.W_OK):
        return
    user = _user_cache()
    try:
        os.makedirs(user, exist_ok=True)
        if os.access(user, os.W_OK):
            return
    except OSError:
        pass
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = os.path.join(tempfile.gettempdir(), f"salient-poses-numba-{uid}")
    if not _private_folder(folder):
        folder = tempfile.mkdtemp(prefix="salient-poses-numba-")
    os.environ["NUMBA_CACHE_DIR"] = folder
    numba = sys.modules.get("numba")
    if numba is not None:  # imported before us: its config was read already
        numba.config.CACHE_DIR = folder


_numba_cache_fallback()
passive_waiting()
blas_kernels()
