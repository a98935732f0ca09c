"""The Anthropic Messages API's documented request rules, and random requests that obey them.

The rules come from the Messages API reference (the ``messages`` and ``system``
parameters) and the tool-use guide ("Handle tool calls"):

* ``messages`` holds ``user`` and ``assistant`` messages only; there is no ``system``
  role, the system prompt is the top-level ``system`` (a string or text blocks).
* Consecutive ``user`` or ``assistant`` messages are combined into a single turn, so
  every rule below is checked on the combined turns.
* A ``tool_use`` block is answered by a ``tool_result`` (same id) in the very next
  turn, which is the user's; a ``tool_result`` answers a ``tool_use`` of the assistant
  turn right before it; in that user turn the ``tool_result`` blocks come first.
* Server tools (``server_tool_use``) are run by the provider: their results are blocks
  of the same assistant message.
* The first message is the user's: older versions of the reference required it and an
  agent's transcript starts with the user's request; a fit must keep it that way.

:func:`violations` lists every broken rule (empty when the request is valid), so a
failing property shows all problems at once. The hypothesis strategies build random
valid requests: tool loops with nested tool results, thinking blocks, images,
documents, server tool blocks, ``cache_control`` metadata, system as blocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

#: Content blocks a request may carry, per role (the request-side union of the reference).
USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
ASSISTANT_BLOCKS = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"}
)
SERVER_RESULT_TYPES = frozenset(
    {"web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result"}
)


def _get(block: Any, key: str) -> Any:
    if isinstance(block, Mapping):
        return block.get(key)
    return getattr(block, key, None)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, Sequence) else []


def combined_turns(messages: Sequence[Any]) -> list[tuple[str, list[Any], list[int]]]:
    """``(role, blocks, message indexes)`` per turn after consecutive same-role messages combine."""
    turns: list[tuple[str, list[Any], list[int]]] = []
    for i, m in enumerate(messages):
        role = _get(m, "role")
        blocks = _blocks(_get(m, "content"))
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
            turns[-1][2].append(i)
        else:
            turns.append((role, blocks, [i]))
    return turns


def violations(body: Mapping[str, Any]) -> list[str]:
    """Every documented rule ``body`` breaks (empty list: the API accepts its shape)."""
    out: list[str] = []
    system = body.get("system")
    if (
        system is not None
        and not isinstance(system, str)
        and (not isinstance(system, Sequence) or not all(_get(b, "type") == "text" for b in system))
    ):
        out.append("system: must be a string or a list of text blocks")
    messages = body.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        return [*out, "messages: must be a non-empty list"]
    for i, m in enumerate(messages):
        role = _get(m, "role")
        if role not in ("user", "assistant"):
            out.append(f"messages[{i}].role: {role!r} (only user and assistant; system is top-level)")
            continue
        content = _get(m, "content")
        if not isinstance(content, str) and (not isinstance(content, Sequence) or not content):
            out.append(f"messages[{i}].content: must be a string or a non-empty list of blocks")
            continue
        allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
        for j, b in enumerate(_blocks(content)):
            kind = _get(b, "type")
            if kind not in allowed:
                out.append(f"messages[{i}].content[{j}]: a {kind!r} block in a {role} message")
        if role == "assistant":
            out.extend(_server_pairs(i, _blocks(content)))
    if out:
        return out
    if _get(messages[0], "role") != "user":
        out.append("messages[0]: the first message must be the user's")
    seen_ids: set[str] = set()
    turns = combined_turns(messages)
    for t, (role, blocks, idx) in enumerate(turns):
        where = f"messages[{idx[0]}]" if len(idx) == 1 else f"messages[{idx[0]}..{idx[-1]}]"
        if role == "assistant":
            uses = [_get(b, "id") for b in blocks if _get(b, "type") == "tool_use"]
            for u in uses:
                if u in seen_ids:
                    out.append(f"{where}: tool_use id {u!r} used twice")
                seen_ids.add(u)
            if uses:
                nxt = turns[t + 1] if t + 1 < len(turns) else None
                answered = (
                    [_get(b, "tool_use_id") for b in nxt[1] if _get(b, "type") == "tool_result"]
                    if nxt is not None
                    else []
                )
                missing = [u for u in uses if u not in answered]
                if missing:
                    out.append(f"{where}: tool_use {missing} not answered by the next turn")
            continue
        results = [
            (k, _get(b, "tool_use_id")) for k, b in enumerate(blocks) if _get(b, "type") == "tool_result"
        ]
        if not results:
            continue
        prev = turns[t - 1] if t > 0 else None
        asked = (
            {_get(b, "id") for b in prev[1] if _get(b, "type") == "tool_use"} if prev is not None else set()
        )
        ids = [r for _, r in results]
        for r in ids:
            if r not in asked:
                out.append(f"{where}: tool_result {r!r} answers no tool_use of the turn before")
        if len(set(ids)) != len(ids):
            out.append(f"{where}: a tool_use answered twice")
        if [k for k, _ in results] != list(range(len(results))):
            out.append(f"{where}: tool_result blocks must come first in the turn")
    return out


def _server_pairs(i: int, blocks: list[Any]) -> list[str]:
    uses = {_get(b, "id") for b in blocks if _get(b, "type") == "server_tool_use"}
    return [
        f"messages[{i}]: {_get(b, 'type')} answers no server_tool_use of the same message"
        for b in blocks
        if _get(b, "type") in SERVER_RESULT_TYPES and _get(b, "tool_use_id") not in uses
    ]


def alternates(messages: Sequence[Any]) -> bool:
    """True when no two consecutive messages have the same role."""
    roles = [_get(m, "role") for m in messages]
    return all(a != b for a, b in itertools.pairwise(roles))


# -- random valid requests ---------------------------------------------------------------

_WORDS = st.sampled_from(
    [
        "the",
        "order",
        "shipped",
        "late",
        "because",
        "a",
        "carrier",
        "lost",
        "track",
        "refund",
        "invoice",
        "widget",
        "deploy",
        "pod",
        "restart",
        "log",
        "error",
        "timeout",
        "customer",
        "ticket",
        "escalate",
        "résumé",
        "naïve",
        "東京",
        "✓",
        "{json}",
        "42",
    ]
)
_text = st.lists(_WORDS, min_size=1, max_size=80).map(" ".join)
_CACHE = {"type": "ephemeral"}


def _with_cache(block: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 5)) == 0:
        return {**block, "cache_control": dict(_CACHE)}
    return block


@st.composite
def _user_extra(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "text", "image", "document", "document_text"]))
    if kind == "image":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        }
    if kind == "document":
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
            "title": "runbook.pdf",
        }
    if kind == "document_text":
        return {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": draw(_text)},
        }
    return _with_cache({"type": "text", "text": draw(_text)}, draw)


@st.composite
def _user_message(draw: st.DrawFn, results: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    blocks = list(results)
    if not blocks or draw(st.booleans()):
        if not blocks and draw(st.booleans()) and draw(st.booleans()):
            return {"role": "user", "content": draw(_text)}
        blocks += draw(st.lists(_user_extra(), min_size=1, max_size=2))
    return {"role": "user", "content": blocks}


@st.composite
def _tool_result(draw: st.DrawFn, use_id: str) -> dict[str, Any]:
    big = draw(st.integers(0, 3)) == 0
    text = draw(_text) * (draw(st.integers(10, 40)) if big else 1)
    shape = draw(st.sampled_from(["string", "blocks", "image"]))
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id}
    if shape == "string":
        block["content"] = text
    elif shape == "blocks":
        block["content"] = [{"type": "text", "text": text}]
    else:
        block["content"] = [
            {"type": "text", "text": text},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
        ]
    if draw(st.integers(0, 6)) == 0:
        block["is_error"] = True
    return _with_cache(block, draw)


@st.composite
def _assistant_message(draw: st.DrawFn, ids: Any, may_call: bool) -> tuple[dict[str, Any], list[str]]:
    blocks: list[dict[str, Any]] = []
    if draw(st.integers(0, 3)) == 0:
        blocks.append({"type": "thinking", "thinking": draw(_text), "signature": "c2ln"})
    if draw(st.integers(0, 8)) == 0:
        blocks.append({"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"})
    if draw(st.integers(0, 6)) == 0:
        sid = f"srvtoolu_{next(ids)}"
        blocks.append(
            {"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": draw(_text)}}
        )
        blocks.append(
            {
                "type": "web_search_tool_result",
                "tool_use_id": sid,
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://example.com/status",
                        "title": draw(_text),
                        "encrypted_content": "ZW5j",
                        "page_age": None,
                    }
                ],
            }
        )
    if draw(st.booleans()) or not blocks:
        blocks.append({"type": "text", "text": draw(_text)})
    uses: list[str] = []
    if may_call:
        for _ in range(draw(st.integers(0, 3))):
            uid = f"toolu_{next(ids)}"
            uses.append(uid)
            blocks.append(
                {"type": "tool_use", "id": uid, "name": "lookup", "input": {"q": draw(_text), "n": 3}}
            )
    if len(blocks) == 1 and blocks[0]["type"] == "text" and draw(st.booleans()):
        return {"role": "assistant", "content": blocks[0]["text"]}, uses
    return {"role": "assistant", "content": blocks}, uses


TOOLS = [
    {
        "name": "lookup",
        "description": "Look an order up by a free-text query.",
        "input_schema": {
            "type": "object",
            "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["q"],
        },
    },
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
]


@st.composite
def messages_requests(draw: st.DrawFn, max_exchanges: int = 12) -> dict[str, Any]:
    """A random valid Messages API request body: a user ticket, then assistant/user exchanges."""
    counter = iter(range(1_000_000))
    messages: list[dict[str, Any]] = [draw(_user_message())]
    for _ in range(draw(st.integers(0, max_exchanges))):
        assistant, uses = draw(_assistant_message(counter, True))
        messages.append(assistant)
        results = [draw(_tool_result(u)) for u in uses]
        messages.append(draw(_user_message(results)))
    if draw(st.integers(0, 4)) == 0:  # ends with the assistant's answer (or a prefill)
        assistant, _ = draw(_assistant_message(counter, False))
        messages.append(assistant)
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 1024, "messages": messages}
    system = draw(st.sampled_from(["none", "string", "blocks"]))
    if system == "string":
        body["system"] = draw(_text)
    elif system == "blocks":
        body["system"] = [
            {"type": "text", "text": draw(_text)},
            {"type": "text", "text": draw(_text), "cache_control": dict(_CACHE)},
        ]
    if draw(st.booleans()):
        body["tools"] = TOOLS if draw(st.booleans()) else TOOLS[:1]
    if draw(st.booleans()):
        body["temperature"] = 0.2
    return body
