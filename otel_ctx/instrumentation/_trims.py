"""What the provider cut from a request on its side, read off the response.

Anthropic's context management edits the context on the server: ``clear_tool_uses_*``
and ``clear_thinking_*`` edits come back in ``context_management.applied_edits`` with
the tokens they cleared, a ``compact_*`` edit as a ``compaction`` content block (and a
``compaction`` entry in ``usage.iterations``), and a request too large for the window
ends with ``stop_reason: "model_context_window_exceeded"``. The request body shows none
of this, so the round's estimate covers more than the provider counted: each cut is
recorded as a trim by the provider, and the usage of such a call never teaches the
calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from otel_ctx import names
from otel_ctx.instrumentation._core import field_of, int_or_0
from otel_ctx.telemetry._trim import Trim

if TYPE_CHECKING:
    from otel_ctx.instrumentation._core import Round

OVERFLOW_STOP = "model_context_window_exceeded"


@dataclass(slots=True)
class AnthropicCuts:
    """Accumulates, over a response or its stream events, what the server cut."""

    #: (cleared input tokens, items cleared) per applied edit.
    edits: list[tuple[int, int]] = field(default_factory=list)
    compacted: bool = False
    #: Input tokens of the last sampling iteration (the context after compaction), if reported.
    last_iteration_input: int | None = None
    overflow: bool = False

    #: Read by the round as a reader's (see ``_core.Reader``): what the usage leaves unsaid here is
    #: only what the server cut, so the round is numbered and recorded as any other.
    continues = False
    round_number = 0
    conversation_id = None
    pending = False
    figure_source = names.FIGURE_REQUEST

    def settle(self, round_: Round, reported: int | None) -> None:
        """Each cut a trim by the provider; an overflow its event and count. A call whose context
        the provider edited teaches the calibration nothing (its usage is not of our estimate)."""
        if not self.any:
            return
        round_.like_with_like = False
        task = round_.result.task_type
        for kind, before, after, items in self.trims(round_.result.breakdown.estimated, reported):
            round_.record.trim(Trim(names.PERFORMER_PROVIDER, kind, before, after, items), task)
        if self.overflow:
            round_.record.provider_overflow(task)

    def see(self, obj: Any) -> None:
        kind = field_of(obj, "type")
        if kind == "message_start":
            obj, kind = field_of(obj, "message"), "message"
        if kind == "message":
            self._message(obj)
        elif kind == "content_block_start":
            block = field_of(obj, "content_block")
            if field_of(block, "type") == "compaction":
                self.compacted = True
        elif kind == "message_delta":
            if field_of(field_of(obj, "delta"), "stop_reason") == OVERFLOW_STOP:
                self.overflow = True
            self._managed(field_of(obj, "context_management"))
            self._iterations(field_of(obj, "usage"))

    def _message(self, message: Any) -> None:
        if field_of(message, "stop_reason") == OVERFLOW_STOP:
            self.overflow = True
        for block in field_of(message, "content") or ():
            if field_of(block, "type") == "compaction":
                self.compacted = True
        self._managed(field_of(message, "context_management"))
        self._iterations(field_of(message, "usage"))

    def _managed(self, managed: Any) -> None:
        edits = field_of(managed, "applied_edits") if managed is not None else None
        if not edits:
            return
        self.edits = []  # a stream may repeat them; the last report is the whole list
        for edit in edits:
            uses, turns = field_of(edit, "cleared_tool_uses"), field_of(edit, "cleared_thinking_turns")
            items = int_or_0(uses) or int_or_0(turns)
            self.edits.append((int_or_0(field_of(edit, "cleared_input_tokens")), items))

    def _iterations(self, usage: Any) -> None:
        iterations = field_of(usage, "iterations") if usage is not None else None
        if not iterations:
            return
        for entry in iterations:
            if field_of(entry, "type") == "compaction":
                self.compacted = True
            elif field_of(entry, "type") == "message":
                self.last_iteration_input = int_or_0(field_of(entry, "input_tokens"))

    @property
    def any(self) -> bool:
        return bool(self.edits) or self.compacted or self.overflow

    def trims(self, estimated: int, reported: int | None) -> list[tuple[str, int, int, int]]:
        """``(kind, tokens before, tokens after, items removed)`` of each cut, once each.

        An edit's tokens are the provider's own (the reported input is what was left);
        a compaction goes from the request as sent to what the last iteration counted.
        """
        out: list[tuple[str, int, int, int]] = []
        before = reported + sum(c for c, _ in self.edits) if reported is not None else estimated
        for cleared, items in self.edits:
            out.append(("edit", before, before - cleared, items))
            before -= cleared
        if self.compacted:
            left = self.last_iteration_input if self.last_iteration_input is not None else reported
            out.append(("compaction", estimated, left if left is not None else 0, 0))
        return out
