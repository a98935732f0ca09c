"""Cohere chat: v2 (``messages``, OpenAI-like) and v1 (``message``, ``chat_history``,
``preamble``, ``tools`` with ``parameter_definitions``). Cohere bills the text of the messages,
documents and tools, not its template's framing; it publishes no offline tokenizer, so the count
is an estimate (the Command family's ratio over ``cl100k_base``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.adapters._base import ARRAY, Adapter, ReadContext, as_mapping
from otel_ctx.adapters._chat_like import ChatLikeAdapter
from otel_ctx.families._render import content_text

BUILT_ON = "openai"
_ROLES = {
    "user": "user",
    "chatbot": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "user",
}


def _claims(body: Mapping[str, Any]) -> bool | None:
    return (
        True if isinstance(body.get("message"), str) or "chat_history" in body or "preamble" in body else None
    )


def _text(m: Mapping[str, Any]) -> str:
    """Everything of a message Cohere bills, as text (calls and results as their JSON)."""
    text = m.get("content", m.get("message"))
    out = content_text(text) if not isinstance(text, str) else text
    if isinstance(text, ARRAY):
        out += "".join(
            json.dumps(p.get("document"), default=str)
            for p in text
            if isinstance(p, Mapping) and "document" in p
        )
    for key in ("tool_calls", "tool_results", "tool_plan"):
        if m.get(key):
            out += m[key] if isinstance(m[key], str) else json.dumps(m[key], default=str)
    return out


def _message(raw: Any) -> dict[str, Any]:
    m = as_mapping(raw) or {}
    role = _ROLES.get(str(m.get("role", "user")).lower(), "user")
    return {"role": role, "content": _text(m)}


def _tool(raw: Any) -> Any:
    t = as_mapping(raw)
    if t is None or "function" in t or "parameter_definitions" not in t:
        return raw
    return {
        "type": "function",
        "function": {
            "name": t.get("name"),
            "description": t.get("description"),
            "parameters": t.get("parameter_definitions"),
        },
    }


def _convert(body: Mapping[str, Any], ctx: ReadContext) -> tuple[dict[str, Any], Sequence[Any]]:
    converted: dict[str, Any] = {"model": body.get("model")}
    if isinstance(body.get("tools"), ARRAY):
        converted["tools"] = [_tool(t) for t in body["tools"]]
    if isinstance(body.get("messages"), ARRAY):
        items = list(body["messages"])
        messages = [_message(m) for m in items]
    else:  # v1
        history = body.get("chat_history")
        items = list(history) if isinstance(history, ARRAY) else []
        messages = [_message(m) for m in items]
        if isinstance(body.get("message"), str):
            items.append(body["message"])
            messages.append({"role": "user", "content": body["message"]})
        if isinstance(body.get("preamble"), str):
            messages.insert(0, {"role": "system", "content": body["preamble"]})
            items.insert(0, {"preamble": body["preamble"]})
    if isinstance(body.get("documents"), ARRAY) and body["documents"]:
        messages.append({"role": "system", "content": json.dumps(body["documents"], default=str)})
        items.append({"documents": body["documents"]})
    converted["messages"] = messages
    return converted, items


def _write_back(body: Mapping[str, Any], kept: list[Any], blocks: list[str]) -> Any:
    out = dict(body)
    if isinstance(body.get("messages"), ARRAY):
        out["messages"] = [{"role": "system", "content": b} for b in blocks] + [
            k for k in kept if not (isinstance(k, Mapping) and "documents" in k)
        ]
        return out
    if "chat_history" in body:
        out["chat_history"] = [
            k for k in kept if isinstance(k, Mapping) and "preamble" not in k and "documents" not in k
        ]
    return out


class CohereAdapter(ChatLikeAdapter):
    provider = "cohere"


def build(chat: Adapter) -> ChatLikeAdapter:
    """The Cohere dialect, reading through ``chat`` (the Chat Completions adapter)."""
    return CohereAdapter(chat, _convert, _write_back, _claims)
