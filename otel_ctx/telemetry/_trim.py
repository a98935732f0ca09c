"""What someone else's trimmer did: compare the messages it got with those it returned.

A trimmer such as LangChain's ``trim_messages(strategy="last")`` keeps the newest
messages that fit and says nothing about what it dropped. Two of its drops break an
agent silently: the original ticket (the first user message: the agent forgets what
it was asked) and the call of a tool result it kept (the provider rejects a result
that answers no call, or the model reads an answer to a question it cannot see).
:func:`compare` finds both, and how many messages and turns went, without reading
any text.

Messages are matched by identity first (trimmers return the caller's objects), then
by equality, in order. A turn is what compaction drops whole: a message, or an
assistant message that makes tool calls together with the results that answer them.
Chat Completions dicts, Anthropic Messages dicts (tool calls and results as content
blocks), Responses items and LangChain messages are all read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_ctx import names


@dataclass(frozen=True, slots=True)
class Trim:
    """One cut of the context, in the vocabulary every performer shares.

    ``performer`` is one of ``names.PERFORMERS`` (otel-ctx, the provider, the agent
    framework, the agent's own trimmer) and ``kind`` one of ``names.TRIM_KINDS``, so the
    counter's labels stay bounded whoever reports the trim. Token counts, never text.
    """

    performer: str
    kind: str
    tokens_before: int
    tokens_after: int
    items_removed: int = 0

    def __post_init__(self) -> None:
        if self.performer not in names.PERFORMERS:
            raise ValueError(f"performer must be one of {names.PERFORMERS}, got {self.performer!r}")
        if self.kind not in names.TRIM_KINDS:
            raise ValueError(f"kind must be one of {names.TRIM_KINDS}, got {self.kind!r}")

    @property
    def removed(self) -> int:
        """Tokens the cut removed (never negative)."""
        return max(0, self.tokens_before - self.tokens_after)

    def attributes(self) -> dict[str, AttributeValue]:
        return {
            names.TRIM_PERFORMER: self.performer,
            names.TRIM_KIND: self.kind,
            names.TRIM_TOKENS_BEFORE: self.tokens_before,
            names.TRIM_TOKENS_AFTER: self.tokens_after,
            names.TRIM_ITEMS_REMOVED: self.items_removed,
        }


@dataclass(frozen=True, slots=True)
class TrimReport:
    """What a trimmer removed from one request."""

    dropped_messages: int
    dropped_turns: int
    #: The first user message of the input is not in the output.
    ticket_dropped: bool
    #: Tool results in the output whose call is not in the output.
    orphaned_tool_results: int


def _field(m: Any, key: str) -> Any:
    return m.get(key) if isinstance(m, Mapping) else getattr(m, key, None)


def _shape(m: Any) -> tuple[str, list[str], list[str]]:
    """``(speaker, call ids opened, call ids answered)`` of one message in any dialect."""
    lc_type = None if isinstance(m, Mapping) else getattr(m, "type", None)
    if lc_type is not None:  # a LangChain message
        role = {"human": "user", "ai": "assistant", "tool": "tool"}.get(str(lc_type), str(lc_type))
        calls = [str(_field(c, "id")) for c in (getattr(m, "tool_calls", None) or [])]
        answer = getattr(m, "tool_call_id", None) if role == "tool" else None
        return role, calls, [str(answer)] if answer is not None else []
    kind = _field(m, "type")
    if kind == "function_call":  # Responses API items
        return "assistant", [str(_field(m, "call_id"))], []
    if kind == "function_call_output":
        return "tool", [], [str(_field(m, "call_id"))]
    role = str(_field(m, "role"))
    calls = [str(_field(c, "id")) for c in (_field(m, "tool_calls") or [])]
    answers = [str(_field(m, "tool_call_id"))] if role == "tool" else []
    content = _field(m, "content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        for block in content:
            btype = _field(block, "type")
            if btype == "tool_use":
                calls.append(str(_field(block, "id")))
            elif btype == "tool_result":
                answers.append(str(_field(block, "tool_use_id")))
    return role, calls, answers


def _is_ticket(role: str, answers: list[str], m: Any) -> bool:
    if role != "user":
        return False
    if not answers:
        return True
    content = _field(m, "content")  # a user turn of tool results alone is not the ticket
    return isinstance(content, Sequence) and any(
        _field(b, "type") not in ("tool_result", None) for b in content if not isinstance(b, str)
    )


def _match(before: Sequence[Any], after: Sequence[Any]) -> list[bool]:
    """Which of ``before`` survive into ``after`` (an in-order match, identity first)."""
    kept = [False] * len(before)
    position = {id(m): i for i, m in enumerate(before)}
    j = 0
    for m in after:
        i = position.get(id(m))
        if i is None or i < j or kept[i]:
            i = next((k for k in range(j, len(before)) if not kept[k] and _equal(before[k], m)), None)
        if i is not None:
            kept[i] = True
            j = i + 1
    return kept


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def compare(before: Sequence[Any], after: Sequence[Any]) -> TrimReport:
    """The :class:`TrimReport` of a trimmer that turned ``before`` into ``after``."""
    kept = _match(before, after)
    shapes = [_shape(m) for m in before]
    dropped_turns = 0
    i, n = 0, len(before)
    while i < n:
        j = i + 1
        open_ids = set(shapes[i][1])
        while j < n and open_ids and shapes[j][2] and not open_ids.isdisjoint(shapes[j][2]):
            open_ids.difference_update(shapes[j][2])
            j += 1
        if not all(kept[i:j]):
            dropped_turns += 1
        i = j
    ticket = next((k for k, (r, _, a) in enumerate(shapes) if _is_ticket(r, a, before[k])), None)
    declared: set[str] = set()
    orphaned = 0
    for m in after:
        _, calls, answers = _shape(m)
        orphaned += sum(1 for a in answers if a not in declared)
        declared.update(calls)
    return TrimReport(
        dropped_messages=kept.count(False),
        dropped_turns=dropped_turns,
        ticket_dropped=ticket is not None and not kept[ticket],
        orphaned_tool_results=orphaned,
    )
