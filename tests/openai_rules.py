"""The transcript rules OpenAI's APIs enforce, written from the API reference.

Chat Completions (``POST /v1/chat/completions``): "An assistant message with
'tool_calls' must be followed by tool messages responding to each 'tool_call_id'";
"messages with role 'tool' must be a response to a preceding message with
'tool_calls'"; call ids are unique; ``tool_calls`` is a non-empty array when present.

Responses (``POST /v1/responses``): every ``function_call_output`` answers a
``function_call`` with the same ``call_id`` earlier in ``input``; every
``function_call`` is answered ("No tool output found for function call ..."); call
ids are unique.

Each validator returns the list of broken rules (empty: the provider would accept it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CHAT_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def _plain(item: Any) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    dumped = item.model_dump(exclude_none=True)
    assert isinstance(dumped, Mapping)
    return dumped


def chat_violations(body: Mapping[str, Any]) -> list[str]:
    messages = [_plain(m) for m in body["messages"]]
    out: list[str] = []
    if not messages:
        out.append("messages must not be empty")
    seen_ids: set[str] = set()
    open_calls: set[str] = set()
    open_at = -1
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in CHAT_ROLES:
            out.append(f"messages[{i}]: unknown role {role!r}")
            continue
        if role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in open_calls:
                out.append(f"messages[{i}]: tool result {call_id!r} answers no call of the message before")
            open_calls.discard(call_id)
            if m.get("tool_calls"):
                out.append(f"messages[{i}]: a tool message carries tool_calls")
            continue
        if open_calls:
            out.append(f"messages[{open_at}]: calls {sorted(open_calls)} not answered before messages[{i}]")
        open_calls = set()
        calls = m.get("tool_calls")
        if calls is not None:
            if role != "assistant":
                out.append(f"messages[{i}]: only assistant messages may call tools")
            if not calls:
                out.append(f"messages[{i}]: tool_calls is an empty list")
            for c in calls:
                cid = c["id"]
                if cid in seen_ids:
                    out.append(f"messages[{i}]: duplicate call id {cid!r}")
                seen_ids.add(cid)
                open_calls.add(cid)
            open_at = i
    if open_calls:
        out.append(f"messages[{open_at}]: calls {sorted(open_calls)} never answered")
    return out


def responses_violations(body: Mapping[str, Any]) -> list[str]:
    raw = body.get("input")
    if isinstance(raw, str):
        return []
    items = [_plain(x) for x in raw or []]
    out: list[str] = []
    declared: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            if item["call_id"] in declared:
                out.append(f"input[{i}]: duplicate call id {item['call_id']!r}")
            declared.add(item["call_id"])
        elif kind == "function_call_output":
            cid = item["call_id"]
            if cid not in declared:
                out.append(f"input[{i}]: output for undeclared call {cid!r}")
            if cid in answered:
                out.append(f"input[{i}]: call {cid!r} answered twice")
            answered.add(cid)
        elif kind in (None, "message") and item.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
        ):
            out.append(f"input[{i}]: unknown role {item.get('role')!r}")
    for cid in sorted(declared - answered):
        out.append(f"call {cid!r} has no function_call_output")
    return out
