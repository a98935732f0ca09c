"""One request as the engine takes it, and the keywords the entry points share.

Every entry point builds one :class:`FitRequest`, so a new option is a field here and the line
of the engine that reads it. Wrappers forward their caller's keywords typed as
``**options: Unpack[FitOptions]`` (or :class:`MeasureOptions`, :class:`RequestParts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._dialect import Adapter
from otel_ctx.engine._sources import SourcesLike

#: The caller's pins: indexes into its transcript items, or a predicate ``(index, item) -> bool``.
Pinned = Iterable[int] | Callable[[int, Any], bool] | None


class RequestParts(TypedDict, total=False):
    """What a bare transcript is sent with: its tool definitions and the caller's system text."""

    tools: Sequence[Any] | None
    system_prompt: str | None
    #: Named texts joined to the system prompt.
    snippets: SourcesLike
    #: Named texts sent as a block of their own, the way the dialect sends a system prompt.
    skills: SourcesLike


class MeasureOptions(RequestParts, total=False):
    """The keywords ``measure`` shares with its wrappers: the request's parts and its task type."""

    task_type: str | None


class FitOptions(MeasureOptions, total=False):
    """The keywords of ``fit``: those of ``measure`` and the caller's pins (never dropped)."""

    pinned: Pinned


@dataclass(frozen=True, slots=True)
class FitRequest:
    """One request for the engine: what to read, in which dialect, and what to do with it.

    ``items`` is a bare transcript, read with its ``tools``; without it, ``body`` is a whole
    request body. ``observe`` measures the request as given: nothing is capped or dropped,
    and a transcript rule the provider enforces is recorded on the result, not raised.
    ``policy`` is a budget of the caller's (an observed call's own window) in place of the
    task type's.
    """

    adapter: Adapter
    body: Any = None
    items: Sequence[Any] | None = None
    tools: Sequence[Any] | None = None
    system_prompt: str | None = None
    snippets: SourcesLike = None
    skills: SourcesLike = None
    task_type: str | None = None
    pinned: Pinned = None
    policy: BudgetPolicy | None = None
    observe: bool = False
