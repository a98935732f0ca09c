"""LangChain message lists: the rules the chat models enforce, and random lists that obey them.

A LangChain transcript goes to a provider through a chat model, so it must satisfy
what the providers document for tool calling, in LangChain's terms:

* every ``tool_calls`` entry of an ``AIMessage`` is answered by a ``ToolMessage``
  with the same ``tool_call_id`` before the next human/AI/system message;
* every ``ToolMessage`` answers a call of the ``AIMessage`` right before its run of
  tool messages, at most once;
* ``SystemMessage`` only at the start (Anthropic's chat model sends it as the
  top-level system prompt and rejects one in the middle);
* the first message after the system messages is the user's (the ticket).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


def violations(messages: Sequence[BaseMessage]) -> list[str]:
    """Every rule the list breaks (empty: a chat model sends it as is)."""
    out: list[str] = []
    open_calls: list[str] = []
    answered: set[str] = set()
    started = False
    seen_first = False
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            if started:
                out.append(f"messages[{i}]: a system message after the conversation started")
            continue
        if not seen_first:
            seen_first = True
            if not isinstance(m, HumanMessage):
                out.append(f"messages[{i}]: the conversation must start with the user's message")
        started = True
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_calls:
                out.append(f"messages[{i}]: ToolMessage {m.tool_call_id!r} answers no open call")
            elif m.tool_call_id in answered:
                out.append(f"messages[{i}]: call {m.tool_call_id!r} answered twice")
            answered.add(m.tool_call_id)
            continue
        missing = [c for c in open_calls if c not in answered]
        if missing:
            out.append(f"messages[{i}]: tool calls {missing} were never answered")
        open_calls, answered = [], set()
        if isinstance(m, AIMessage) and m.tool_calls:
            open_calls = [str(c["id"]) for c in m.tool_calls]
    missing = [c for c in open_calls if c not in answered]
    if missing:
        out.append(f"end: tool calls {missing} were never answered")
    return out


_WORDS = st.sampled_from(
    [
        "the",
        "order",
        "shipped",
        "late",
        "carrier",
        "refund",
        "invoice",
        "deploy",
        "pod",
        "restart",
        "error",
        "timeout",
        "ticket",
        "escalate",
        "résumé",
        "東京",
        "✓",
        "42",
    ]
)
_text = st.lists(_WORDS, min_size=1, max_size=60).map(" ".join)


@st.composite
def transcripts(draw: st.DrawFn, max_exchanges: int = 12) -> list[BaseMessage]:
    """A random valid LangChain transcript: system, ticket, then AI/tool/human exchanges."""
    ids = iter(range(1_000_000))
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(_text)))
    out.append(HumanMessage(draw(_text)))
    for _ in range(draw(st.integers(0, max_exchanges))):
        calls: list[dict[str, Any]] = [
            {"name": "lookup", "args": {"q": draw(_text)}, "id": f"call_{next(ids)}", "type": "tool_call"}
            for _ in range(draw(st.integers(0, 3)))
        ]
        content: Any = draw(_text) if draw(st.booleans()) or not calls else ""
        if content and draw(st.integers(0, 4)) == 0:
            content = [{"type": "text", "text": content}]
        out.append(AIMessage(content=content, tool_calls=calls))
        for c in calls:
            big = draw(st.integers(0, 3)) == 0
            body = draw(_text) * (draw(st.integers(10, 40)) if big else 1)
            out.append(ToolMessage(body, tool_call_id=c["id"], name="lookup"))
        if not calls or draw(st.booleans()):
            out.append(HumanMessage(draw(_text)))
    return out
