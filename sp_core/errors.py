"""Errors the user can cause, each with a message that says what to do.

Every exception the tool raises on purpose derives from :class:`SalientPosesError`; the command
line turns them into one readable line and exit status 2, and the panel shows them in its status
line. Anything else reaching the user is a bug.
"""

from __future__ import annotations


class SalientPosesError(Exception):
    """Base of every error caused by input, options or the host scene."""


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


def one_line(exc: Exception) -> str:
    """The message a user sees for an expected failure: ours as they are, an OSError as its
    reason and the file it concerns, if it names one."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)
