"""Salient Poses engine (host-independent)."""

import os
import tempfile

from sp_core.threads import passive_waiting


def _numba_cache_fallback() -> None:
    """Give numba a cache folder it can write where it would find none.

    numba keeps compiled kernels next to the modules (``sp_core/__pycache__``, where
    ``install.py`` compiles them) when that folder is writable, else in the user's cache
    (``~/.cache/numba``). An install owned by another account, run by a user whose home is not
    writable (a farm's service account), has neither: every ``@njit(cache=True)`` then failed
    at import ("no locator available"), before any message could be given. Such a user gets a
    folder of their own under the system's temporary folder instead (the kernels compile on
    the first run there). ``NUMBA_CACHE_DIR``, if set, is left alone.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    if os.access(os.path.join(here, "__pycache__"), os.W_OK) or os.access(here, os.W_OK):
        return
    user = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "numba")
    try:
        os.makedirs(user, exist_ok=True)
        if os.access(user, os.W_OK):
            return
    except OSError:
        pass
    uid = os.getuid() if hasattr(os, "getuid") else 0
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(),
                                                 f"salient-poses-numba-{uid}")


_numba_cache_fallback()
passive_waiting()
