"""Errors the user can cause, each with a message that says what to do.

Every exception the tool raises on purpose derives from :class:`SalientPosesError`; the command
line turns them into one readable line and exit status 2, and the panel shows them in its status
line. Anything else reaching the user is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable


class SalientPosesError(Exception):
    """Base of every error caused by input, options or the host scene.

    Parameters
    ----------
    *args
        The message, as for any exception.
    options : iterable of str, optional
        The options the message names, by their field names (``max_span``) as the Python APIs
        take them; each front says them its own way (:func:`said`): the command lines as
        their flags, the panel as its fields' labels.
    """

    def __init__(self, *args: object, options: Iterable[str] = ()) -> None:
        super().__init__(*args)
        self.options = tuple(options)

    def __reduce__(self) -> tuple[object, ...]:
        # rebuilt from the message, then the attributes (options, a file error's path...):
        # without its own reduce, tblib (installed by dask.distributed, whose workers send
        # errors back pickled) rebuilds an exception with an __init__ through __new__ alone,
        # which MemoryError refuses for CapacityError
        return type(self), self.args, self.__dict__


class Note(str):
    """A note for the user (the window of a long take...) that names options by their field
    names, listed in ``options`` as for :class:`SalientPosesError`. It is a ``str`` anywhere
    else (outputs' JSON, the Python APIs)."""

    options: tuple[str, ...]

    def __new__(cls, text: str, options: Iterable[str] = ()) -> Note:
        note = super().__new__(cls, text)
        note.options = tuple(options)
        return note


class ClipFormatError(SalientPosesError, ValueError):
    """A motion file cannot be read: the message names the file, the line and what was expected.

    Parameters
    ----------
    message : str
        What is wrong and what was expected.
    path : str, optional
        The file being read.
    line : int, optional
        1-based line number in that file.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(where + message)


class ClipError(SalientPosesError, ValueError):
    """A clip is inconsistent or an operation on it is impossible (bad range, unknown node...)."""


class SelectionError(SalientPosesError, ValueError):
    """Bad input to an analysis: non-finite poses, too few frames, bad pins, K out of range..."""


class OptionError(SalientPosesError, ValueError):
    """An unknown cost, an unknown option or an option value outside its declared range."""


class CapacityError(SalientPosesError, MemoryError):
    """An analysis would need more memory than allowed; the message says how much and the fix."""


class ReductionError(SalientPosesError, ValueError):
    """Bad input to a reduction: keyframes outside the clip, unknown tangent mode, NaN values..."""


def said(item: object, name_of: Callable[[str], str]) -> str:
    """An error (as :func:`one_line` gives it) or a note, with each option it names by its
    field name (its ``options``) said as ``name_of(field)``: a flag, a field's label.

    Only the listed options are replaced, and only as whole words, so a message's ordinary
    words (``keys``, ``frames``) stay as they are even where an option has that name.
    """
    text = one_line(item) if isinstance(item, BaseException) else str(item)
    for name in getattr(item, "options", ()):
        spoken = name_of(name).replace("\\", "\\\\")  # a literal replacement
        text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", spoken, text)
    return text


def one_line(exc: BaseException) -> str:
    """The message a user sees for an expected failure: ours as they are, an OSError as its
    reason and the file it concerns, if it names one."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)
