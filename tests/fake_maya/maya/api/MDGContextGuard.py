"""Fake ``maya.api.MDGContextGuard``: evaluation inside the block happens in the context's time."""

from __future__ import annotations

from maya._scene import STATE
from maya.api.OpenMaya import MDGContext


class MDGContextGuard:
    """Scoping object that makes ``context`` the current evaluation context."""

    def __init__(self, context: MDGContext) -> None:
        if not isinstance(context, MDGContext):
            raise TypeError("MDGContextGuard takes an MDGContext")
        self._context = context
        self._saved: float | None = None

    def __enter__(self) -> MDGContextGuard:
        STATE.calls["MDGContextGuard"] += 1
        self._saved = STATE.context_time
        time = self._context.time
        STATE.context_time = None if time is None else time.seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.context_time = self._saved
