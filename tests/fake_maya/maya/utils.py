"""Fake ``maya.utils``: deferred calls run at once (there is no idle queue in tests)."""

from __future__ import annotations


def executeDeferred(function, *args) -> None:  # noqa: N802
    function(*args)
