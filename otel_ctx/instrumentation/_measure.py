"""The one place the instrumentor asks the engine for a breakdown.

``measure(fitter, body, provider)`` is the observe-only measure of a whole request
body in its provider's dialect: nothing capped or dropped, problems with the
transcript recorded rather than raised. The engine's ``measure_request`` does that
for every dialect; until a fitter has it, the bodies are read here into the
Chat Completions shape the current fitter measures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_ctx.engine import ContextFitter, FitResult


def measure(fitter: ContextFitter, body: Mapping[str, Any], provider: str) -> FitResult:
    """The breakdown of ``body`` exactly as it will be sent (``provider``: the dialect)."""
    measure_request = getattr(fitter, "measure_request", None)
    if measure_request is not None:
        result: FitResult = measure_request(body, provider=provider)
        return result
    messages, tools, system = _as_chat(body, provider)
    return fitter.measure(messages, tools=tools, system_prompt=system)


# --- reading the three dialects as Chat Completions (until the engine reads them) ---------------


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


_CHAT_ONLY = frozenset({"function_call", "refusal", "audio"})


def _as_chat(
    body: Mapping[str, Any], provider: str
) -> tuple[list[dict[str, Any]], list[Any] | None, str | None]:
    if provider == "openai":
        messages = []
        for m in body.get("messages") or []:
            # Plain dicts pass as they are: a later round then costs its new messages only.
            if m.__class__ is not dict or m.get("role") == "function" or not _CHAT_ONLY.isdisjoint(m):
                m = dict(_plain(m))
                if m.get("role") == "function":
                    m = {"role": "user", "content": _text(m.get("content"))}
                for key in _CHAT_ONLY:
                    m.pop(key, None)
            messages.append(m)
        return messages, _plain(body.get("tools")) or None, None
    plain = _plain(dict(body))
    if provider == "openai-responses":
        return _responses(plain)
    return _anthropic(plain)


def _function_tools(tools: Any, schema_key: str) -> list[dict[str, Any]] | None:
    out = []
    for t in tools or []:
        if t.get("type", "function") == "function" or schema_key in t:
            fn = t.get("function") or t
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": fn.get("name", ""),
                        "description": fn.get("description", ""),
                        "parameters": fn.get(schema_key) or fn.get("parameters") or {},
                    },
                }
            )
    return out or None


def _responses(b: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any] | None, str | None]:
    items = b.get("input")
    messages: list[dict[str, Any]] = []
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    for item in items if isinstance(items, list) else []:
        kind = item.get("type", "message")
        if kind == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
            role = item.get("role", "user")
            messages.append(
                {
                    "role": role if role in ("system", "developer", "user", "assistant") else "user",
                    "content": _text(content),
                }
            )
        elif kind == "function_call":
            call = {
                "id": item.get("call_id", ""),
                "type": "function",
                "function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")},
            }
            if messages and messages[-1].get("tool_calls") and messages[-1]["role"] == "assistant":
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id", ""),
                    "content": _text(item.get("output")),
                }
            )
        else:
            messages.append({"role": "user", "content": _text(item)})
    return messages, _function_tools(b.get("tools"), "parameters"), b.get("instructions")


def _anthropic(b: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any] | None, str | None]:
    system = b.get("system")
    if isinstance(system, list):
        system = "\n\n".join(s.get("text", "") for s in system if isinstance(s, Mapping))
    messages: list[dict[str, Any]] = []
    for m in b.get("messages") or []:
        content = m.get("content")
        role = m.get("role", "user")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text", ""))
            elif kind == "tool_use":
                calls.append(
                    {
                        "id": block.get("id", ""),
                        "type": "function",
                        "function": {"name": block.get("name", ""), "arguments": _text(block.get("input"))},
                    }
                )
            elif kind == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(p.get("text", "") for p in inner if isinstance(p, Mapping))
                results.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id", ""),
                        "content": _text(inner if inner is not None else ""),
                    }
                )
            else:
                texts.append(_text(block))
        messages.extend(results)
        if texts or not (calls or results):
            messages.append({"role": role, "content": "".join(texts)})
        if calls:
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    return messages, _function_tools(b.get("tools"), "input_schema"), system
