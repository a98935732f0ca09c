"""The tool-call rules of a Chat Completions transcript, checked while its messages are counted.

The API enforces them: a tool result must answer an open call of the assistant message right
before it, and only once; every call must be answered before the next message that is not a
tool result; a call id is used once. ``fit`` raises the :class:`TranscriptRuleError` that names
the message (the provider would reject the request anyway); observe-only paths record it.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_ctx.adapters._base import rule
from otel_ctx.engine._dialect import ReadContext
from otel_ctx.engine._errors import TranscriptRuleError, shown
from otel_ctx.engine._model import Turn

#: The prefix of the call ids of the legacy ``function_call`` (no real id can start so). It pairs
#: with a function message by name, which the API does not enforce: only tool calls are checked.
LEGACY = "\x00function:"


class ChatCalls:
    """The calls a transcript has made so far, and those of the last assistant message still open."""

    __slots__ = ("at", "declared", "pending")

    def __init__(self, declared: dict[str, int]) -> None:
        #: Call id -> the message that made it, in the order made (so by message).
        self.declared = declared
        #: The calls of the assistant message being answered: id -> answered yet.
        self.pending: dict[str, bool] = {}
        #: That assistant message.
        self.at = -1

    def resume(self, turns: Sequence[Turn]) -> None:
        """The calls still open after ``turns`` (read in an earlier round, every rule held)."""
        j = len(turns) - 1
        while j >= 0 and turns[j].role == "tool":
            j -= 1
        if j < 0:
            return
        pending = {c: False for c in turns[j].calls if not c.startswith(LEGACY)}
        for t in turns[j + 1 :]:
            pending[t.answers[0]] = True
        self.pending, self.at = pending, j

    def is_open(self, call_id: str) -> bool:
        """``call_id`` is a call of the message before, not answered yet."""
        return self.pending.get(call_id) is False

    def answer(self, call_id: str, here: str, i: int, ctx: ReadContext) -> bool:
        """Message ``i`` answers ``call_id``: True when that is an open call, else the problem said."""
        pending = self.pending
        if pending.get(call_id) is False:
            pending[call_id] = True
            return True
        ctx.problem(_orphan(here, i, call_id, self.declared, call_id in pending))
        return False

    def declare(self, ids: Sequence[str], here: str, i: int, ctx: ReadContext) -> None:
        """Message ``i`` makes the calls ``ids``: a call id used before is said."""
        declared = self.declared
        for k, call_id in enumerate(ids):
            if call_id in declared or call_id in ids[:k]:
                first = declared.get(call_id, i)
                rule(
                    ctx,
                    f"{here}.tool_calls[{k}].id",
                    f"call id {shown(call_id)} is already used by messages[{first}]",
                    i,
                )
            else:
                declared[call_id] = i

    def group_answered(self, turn: Turn) -> bool:
        """``turn`` answered the last open call of a parallel group (more than one call)."""
        pending = self.pending
        return bool(turn.answers) and len(pending) > 1 and False not in pending.values()

    def after(self, turn: Turn, i: int, ctx: ReadContext) -> None:
        """Message ``i`` was read as ``turn``: a message that is no tool result closes the calls
        before it (an unanswered one is said), and opens its own."""
        if turn.role == "tool":
            return
        if self.pending:
            self.close(i, ctx)
        if turn.calls:
            self.pending = {c: False for c in turn.calls if not c.startswith(LEGACY)}
            self.at = i

    def close(self, before: int, ctx: ReadContext) -> None:
        """The open calls end before message ``before``: those not answered are said."""
        missing = [call for call, done in self.pending.items() if not done]
        self.pending = {}
        if missing:
            ids = ", ".join(repr(c) for c in missing)
            rule(
                ctx,
                f"messages[{self.at}].tool_calls",
                f"tool call(s) {ids} never answered: every call needs a tool message "
                f"right after the assistant message (before messages[{before}])",
                self.at,
            )


def _orphan(
    here: str, index: int, call_id: str, declared: dict[str, int], duplicate: bool
) -> TranscriptRuleError:
    """The error for a tool result that answers no open call of the assistant message before it."""
    where = f"{here}.tool_call_id"
    if duplicate:
        problem = f"tool call {shown(call_id)} is already answered by an earlier tool message"
    elif call_id in declared:
        problem = (
            f"answers tool call {shown(call_id)} of messages[{declared[call_id]}], but tool results "
            "must directly follow the assistant message that made the calls"
        )
    else:
        problem = f"no earlier assistant message declared tool call {shown(call_id)}"
    return TranscriptRuleError(where, problem, index=index)
