"""The one place the instrumentor asks the engine for a breakdown.

``measure(fitter, body, provider)`` is the observe-only measure of a whole request
body in its provider's dialect: nothing capped or dropped, problems with the
transcript recorded rather than raised. The engine's ``measure_request`` does that
for every dialect it has an adapter for; Anthropic Messages, until the engine reads
them itself, are read here into the Chat Completions shape and measured as that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from otel_ctx.engine import UnknownProviderError

if TYPE_CHECKING:
    from otel_ctx.engine import ContextFitter, FitResult


def measure(fitter: ContextFitter, body: Mapping[str, Any], provider: str) -> FitResult:
    """The breakdown of ``body`` exactly as it will be sent (``provider``: the dialect)."""
    from otel_ctx.adapters import adapter_for

    try:
        adapter_for(provider)
    except UnknownProviderError:  # a dialect this installation's engine does not read yet
        messages, tools, system = _as_chat(body, provider)
        return fitter.measure(messages, tools=tools, system_prompt=system)
    return fitter.measure_request(body, provider=provider)


# --- Anthropic Messages as Chat Completions (until the engine reads them) -----------------------


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


def _as_chat(
    body: Mapping[str, Any], provider: str
) -> tuple[list[dict[str, Any]], list[Any] | None, str | None]:
    if provider != "anthropic":
        raise UnknownProviderError("provider", f"no reader for {provider!r}")
    return _anthropic(_plain(dict(body)))


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
