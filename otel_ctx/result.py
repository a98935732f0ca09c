"""The outcome of one fit: what to send, and why it looks like that."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from otel_ctx.breakdown import Breakdown
from otel_ctx.errors import ContextOverflow

Outcome = Literal["fit", "compacted", "overflow"]
Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FitResult:
    """What :meth:`ContextFitter.fit` decided.

    ``messages`` is the transcript to send, in the caller's order, with the caller's own
    dict objects for every message it did not touch (capped tool results and a summary
    are new dicts). ``request_messages()`` adds the system prompt and skills messages in
    front, exactly as they were counted.
    """

    messages: list[Message]
    outcome: Outcome
    breakdown: Breakdown
    task_type: str | None
    calibration: float
    dropped_turns: int = 0
    kept_turns: int = 0
    dropped_messages: int = 0
    #: Indexes into the caller's list of the messages compaction removed.
    dropped_indices: tuple[int, ...] = ()
    capped_tool_results: int = 0
    #: Uncalibrated prompt tokens of the request as sent (what the provider should report).
    raw_tokens: int = 0
    model: str = ""
    encoding: str = ""
    summary: Message | None = None
    prefix_messages: tuple[Message, ...] = field(default=())

    @property
    def compacted(self) -> bool:
        """True when history was dropped (also on overflow, where everything droppable went)."""
        return self.dropped_turns > 0

    def request_messages(self) -> list[Message]:
        """The full message list for the provider: system prompt, skills, then the transcript."""
        return [*self.prefix_messages, *self.messages]

    def raise_for_overflow(self) -> FitResult:
        """Raise :class:`ContextOverflow` when the pinned floor does not fit; else return self."""
        if self.outcome == "overflow":
            raise ContextOverflow(self)
        return self
