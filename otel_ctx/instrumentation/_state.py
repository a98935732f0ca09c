"""What the instrumentation's modules share while ``instrument()`` is in force.

The observer every wrapper books its rounds with, and the hook a ``task`` block calls to open
its ticket-view run: set by the instrumentor, read here by the modules below it, so this leaf
keeps the dependencies running one way, from the instrumentor down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from otel_ctx.instrumentation._core import Observer
    from otel_ctx.telemetry._run import Books


class TaskRun(Protocol):
    """The run a ``task`` block opened: read through ``task.run``, closed once when the block exits."""

    @property
    def run(self) -> Books: ...

    def close(self, exc: BaseException | None) -> None:
        """Record the run, whether the block returned (``exc`` None) or raised ``exc``."""


#: Called as a task block is entered, with its task type, conversation id and run ceiling:
#: the run it opened, or None (nested in another run, say). The task block knows only this
#: signature, so the task context needs none of the ticket view's code.
RunOpener: TypeAlias = Callable[[str | None, str | None, int | None], TaskRun | None]

#: One value, set and read whole, so a reader never sees one instrumentation's observer with
#: another's hook.
_active: tuple[Observer, RunOpener] | None = None


def activate(observer: Observer, open_run: RunOpener) -> None:
    """``instrument()``: ``observer`` is the active one, and task blocks open runs through ``open_run``."""
    global _active
    _active = (observer, open_run)


def deactivate() -> None:
    """``uninstrument()``: no observer; task blocks open no run (those open still close)."""
    global _active
    _active = None


def active_observer() -> Observer | None:
    """The observer of the current instrumentation (None when not instrumented)."""
    active = _active
    return active[0] if active is not None else None


def run_opener() -> RunOpener | None:
    """What a task block entered now calls to open its run (None when not instrumented)."""
    active = _active
    return active[1] if active is not None else None
