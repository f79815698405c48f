"""Files written whole or not at all, and outputs that can never replace an input.

Every file the tool writes goes through :func:`atomic_open`: the content is written to a hidden
temporary file in the target's folder, flushed to disk, then renamed over the target in one
step. A crash, a kill or a full disk therefore leaves either the old file or the complete new
one under the target's name, never a truncated file that looks complete. A SIGKILL can leave
the hidden temporary (``.NAME.<pid>.partial``); the next write of the same target removes it.
Inside :func:`output_set` the renames wait for the end of the block, so the several files of
one command replace the old ones together: an interruption before then leaves every old file.
A symlink is followed (the file it points to is replaced; the link stays), and a target that
is not a regular file (``/dev/null``, ``/dev/stdout``, a named pipe) is written in place:
renaming a file over it would replace the device or pipe itself.

:class:`OutputGuard` checks a command's outputs before any work starts: an output may not be an
input (same path, symlink or hard link), may not replace an existing file unless asked to, and
its folder must exist. A device or pipe (``/dev/null``) is written to, never replaced, and needs
no ``--overwrite``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from sp_core.errors import SalientPosesError

PARTIAL = ".partial"


class OutputError(SalientPosesError):
    """An output cannot or may not be written; the message names the file."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's live process
        return True
    return True


def remove_stale_partials(folder: Path, name: str = "*") -> list[Path]:
    """Delete hidden temporaries of ``name`` in ``folder`` left by killed writers."""
    removed = []
    for partial in folder.glob(f".{name}.*{PARTIAL}"):
        pid = partial.name[: -len(PARTIAL)].rpartition(".")[2]
        if pid.isdigit() and (int(pid) == os.getpid() or _pid_alive(int(pid))):
            continue
        with contextlib.suppress(OSError):
            partial.unlink()
            removed.append(partial)
    return removed


@contextlib.contextmanager
def sigint_handler(handler: Any) -> Iterator[None]:
    """Handle Ctrl-C with ``handler`` inside the block (main thread only; elsewhere a no-op).

    Commands run with ``signal.SIG_DFL`` so Ctrl-C ends them at once, even inside a compiled
    kernel; :func:`atomic_open` switches back to ``KeyboardInterrupt`` while it writes, so its
    temporary is removed. A process that ignores Ctrl-C (``SIG_IGN``: a batch's pool workers,
    which their parent stops) keeps ignoring it.
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # (a process that ignores Ctrl-C, a batch's pool worker, leaves it to its parent)
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: Per thread: the renames an :func:`output_set` holds back (temporary, target, the path as
#: given).
_HELD = threading.local()


@contextlib.contextmanager
def output_set() -> Iterator[None]:
    """Files written with :func:`atomic_open` inside the block replace their targets together,
    when the block ends: one command's outputs (keys JSON, BVH, residual) are then all new or
    all old. Ctrl-C while they are written leaves every old file (it left the first output new
    and the others old); an error removes the temporaries. The renames themselves are not
    interrupted (Ctrl-C is held for those microseconds, and acted on after them), nor is the
    removal of the temporaries. A rename that fails (the target became a folder, a read-only
    remount) after others succeeded leaves those replaced: the error names them.
    """
    held: list[tuple[Path, Path, str]] = []  # (temporary, target, the path as given)
    outer = getattr(_HELD, "renames", None)
    _HELD.renames = held
    pressed: list[object] = []

    def hold(*_args: object) -> None:
        pressed.append(True)

    # Ctrl-C is an exception for the whole block (not a kill between two of its files: the
    # temporaries written so far are removed), then held, with no moment of the command's
    # own handler (SIG_DFL) in between
    with sigint_handler(signal.default_int_handler):
        try:
            yield
        except BaseException:
            with sigint_handler(hold):
                _remove([temporary for temporary, _target, _given in held])
            raise
        finally:
            _HELD.renames = outer
        if outer is not None:  # (a set inside a set: the outer one renames)
            outer.extend(held)
            return
        with sigint_handler(hold):
            done: list[str] = []
            for temporary, target, given in held:
                try:
                    os.replace(temporary, target)
                except OSError as exc:
                    _remove([left for left, _target, _given in held])
                    replaced = f" ({', '.join(done)} already replaced)" if done else ""
                    raise OutputError(f"cannot write {given}: {exc.strerror or exc}{replaced}"
                                      ) from None
                done.append(given)
    if pressed:
        raise KeyboardInterrupt


def _remove(paths: Iterable[Path]) -> None:
    """Delete ``paths`` that exist (temporaries), ignoring those already gone."""
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any
                ) -> Iterator[IO[Any]]:
    """Open ``path`` for writing so it appears whole or not at all.

    Parameters
    ----------
    path : str or path-like
    mode : {"w", "wb"}
    **kwargs
        Passed to :func:`open` (``encoding``, ``newline``).

    Raises
    ------
    OutputError
        The folder is missing or the write failed (full disk, permissions); the message names
        ``path``; nothing is left behind.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes only, mode {mode!r}")
    given = Path(path)
    if _is_stream(given):
        try:
            with open(given, mode, **kwargs) as handle:
                yield handle
        except OSError as exc:
            raise OutputError(f"cannot write {given}: {exc.strerror or exc}") from None
        return
    target = Path(os.path.realpath(given))  # (the link's file, not the link)
    folder = target.parent
    if not folder.is_dir():
        why = "is a file, not a folder" if folder.exists() else "does not exist"
        raise OutputError(f"cannot write {given}: folder {folder} {why}")
    stem = _stem(target.name)
    remove_stale_partials(folder, stem)
    temporary = folder / f".{stem}.{os.getpid()}{PARTIAL}"
    with sigint_handler(signal.default_int_handler):
        try:
            with open(temporary, mode, **kwargs) as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileNotFoundError):
                # a file replaced keeps its permissions (a private 600 file became 644)
                os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
            held = getattr(_HELD, "renames", None)
            if held is None:
                os.replace(temporary, target)
            else:
                held.append((temporary, target, str(given)))
        except OSError as exc:
            _remove([temporary])
            raise OutputError(f"cannot write {given}: {exc.strerror or exc}") from None
        except BaseException:
            _remove([temporary])
            raise


def _stem(name: str) -> str:
    """What a target's hidden temporary is named after: its file name, or past 200 bytes the
    first 180 (whole characters) and a digest of the whole, so that ``.NAME.<pid>.partial``
    fits the file system's 255 bytes (a valid name of 245 characters was refused as too long)
    and two long names never share a temporary."""
    raw = os.fsencode(name)  # (a name that is not UTF-8 holds surrogates: its own bytes)
    if len(raw) <= 200:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return raw[:180].decode("utf-8", errors="ignore") + "~" + digest


def write_text(path: str | os.PathLike[str], text: str, errors: str = "strict") -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) atomically; ``errors`` as :func:`open`'s."""
    with atomic_open(path, "w", encoding="utf-8", newline="\n", errors=errors) as handle:
        handle.write(text)


def _is_stream(path: Path) -> bool:
    """``path`` exists and is not a regular file or folder (a device, a pipe, a socket),
    following symlinks: it is written in place, never replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, the same for every name of it (symlinks, hard
    links); None if it cannot be read."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


class OutputGuard:
    """Checks outputs against the inputs and existing files before any work starts.

    Parameters
    ----------
    inputs : iterable of path-like
        Files the command reads: never written, whatever path names them.
    overwrite : bool
        Existing files (other than inputs) may be replaced.
    """

    def __init__(self, inputs: Iterable[str | os.PathLike[str]], overwrite: bool = False
                 ) -> None:
        self.inputs = [Path(p) for p in inputs]
        self._input_ids = {i for i in map(file_identity, self.inputs) if i is not None}
        self._input_paths = {os.path.realpath(p) for p in self.inputs}
        self.overwrite = overwrite
        self.claimed: dict[str, str] = {}

    def is_input(self, path: str | os.PathLike[str]) -> bool:
        """``path`` names an input: the same path, a symlink to it or a hard link."""
        target = Path(path)
        return (os.path.realpath(target) in self._input_paths
                or file_identity(target) in self._input_ids)

    def claim(self, path: str | os.PathLike[str], label: str) -> Path:
        """Check that ``path`` may be written as ``label``'s output; returns it.

        Raises
        ------
        OutputError
            ``path`` is an input, another output, an existing file without ``overwrite``, a
            folder, or its folder does not exist.
        """
        target = Path(path)
        if self.is_input(target):
            raise OutputError(f"{label} {target} is an input of this command; refusing to "
                              "overwrite it (choose another file name)")
        real = os.path.realpath(target)
        if real in self.claimed:
            raise OutputError(f"{label} {target} is also the output of "
                              f"{self.claimed[real]}; give each output its own file")
        if target.is_dir():
            raise OutputError(f"{label} {target} is a folder; give a file name")
        if not target.parent.is_dir():
            why = "is a file, not a folder" if target.parent.exists() else "does not exist"
            raise OutputError(f"cannot write {label} {target}: folder {target.parent} {why}")
        if not os.access(target.parent, os.W_OK):
            raise OutputError(f"cannot write {label} {target}: folder {target.parent} is not "
                              "writable")
        # (a device or pipe such as /dev/null is written to, not replaced)
        if target.exists() and not self.overwrite and not _is_stream(target):
            raise OutputError(f"{label} {target} exists; add --overwrite to replace it")
        self.claimed[real] = label
        return target
