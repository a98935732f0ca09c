"""Ollama's own API: ``/api/chat`` (``messages``, ``tools``) and ``/api/generate`` (``prompt``,
``system``, ``raw``). Ollama renders the model's chat template and bills ``prompt_eval_count``;
the messages are read as Chat Completions ones (tool calls carry their arguments as an object
and no id; a tool result answers the call before it), the template is the model family's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.adapters._base import ARRAY, Adapter, ReadContext, as_mapping
from otel_ctx.adapters._chat_like import ChatLikeAdapter
from otel_ctx.families._render import HOST

BUILT_ON = "openai"


def _claims(body: Mapping[str, Any]) -> bool | None:
    if isinstance(body.get("prompt"), str) and "messages" not in body:
        return True if "options" in body or "raw" in body or "system" in body else None
    return None


def _message(raw: Any, i: int, open_calls: list[str], ctx: ReadContext) -> dict[str, Any]:
    m = as_mapping(raw)
    if m is None:
        return {"role": "user", "content": ""}
    out: dict[str, Any] = {k: v for k, v in m.items() if k in ("role", "content", "name")}
    if not isinstance(out.get("content"), (str, type(None))):
        out["content"] = json.dumps(out.get("content"), default=str)
    if m.get("images"):
        ctx.unknown("images in an Ollama message (priced by the model's vision encoder)")
    calls = m.get("tool_calls")
    if isinstance(calls, ARRAY) and calls:
        made = []
        for k, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, Mapping) else None
            fn = fn if isinstance(fn, Mapping) else {}
            args = fn.get("arguments", {})
            call_id = f"call_{i}_{k}"
            open_calls.append(call_id)
            made.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": str(fn.get("name", "")),
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        out["tool_calls"] = made
    if out.get("role") == "tool":
        if open_calls:
            out["tool_call_id"] = open_calls.pop(0)
        else:  # a result no call asked for: read as the user's text
            out["role"] = "user"
    return out


def _convert(body: Mapping[str, Any], ctx: ReadContext) -> tuple[dict[str, Any], Sequence[Any]]:
    converted: dict[str, Any] = {"model": body.get("model"), HOST: "ollama"}
    if isinstance(body.get("tools"), ARRAY):
        converted["tools"] = body["tools"]
    messages = body.get("messages")
    if isinstance(messages, ARRAY):
        open_calls: list[str] = []
        converted["messages"] = [_message(m, i, open_calls, ctx) for i, m in enumerate(messages)]
        return converted, list(messages)
    # /api/generate: the prompt as the user's message under the system text (``raw``: as written).
    prompt = body.get("prompt")
    out: list[dict[str, Any]] = []
    if isinstance(body.get("system"), str) and body["system"]:
        out.append({"role": "system", "content": body["system"]})
    out.append({"role": "user", "content": prompt if isinstance(prompt, str) else ""})
    if body.get("raw") is True:
        converted["raw"] = True
    converted["messages"] = out
    return converted, out  # nothing of a generate body is dropped (see _write_back)


def _write_back(body: Mapping[str, Any], kept: list[Any], blocks: list[str]) -> Any:
    if not isinstance(body.get("messages"), ARRAY):
        return body  # a generate body has no transcript to fit
    out = dict(body)
    out["messages"] = [{"role": "system", "content": b} for b in blocks] + kept
    return out


class OllamaAdapter(ChatLikeAdapter):
    provider = "ollama"


def build(chat: Adapter) -> ChatLikeAdapter:
    """The Ollama dialect, reading through ``chat`` (the Chat Completions adapter)."""
    return OllamaAdapter(chat, _convert, _write_back, _claims)
