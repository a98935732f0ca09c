"""gpt-oss: the harmony format its hosts (Groq, Cerebras, OpenRouter, Bedrock, Ollama) render.

Every request opens with the system header the hosts send whether or not the caller wrote a
system message (the model's identity, knowledge cutoff, current date, reasoning effort and the
valid channels); the caller's system text and the tools go into a developer message, the tools
as a TypeScript-like namespace. Counted with ``o200k_base`` (harmony's ordinary text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.families._render import Rendering, calls, content_text, functions

SYSTEM_HEADER = (
    "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
    "Current date: 2025-06-28\n\nReasoning: {effort}\n\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
)
#: The hosts' system headers differ by a few tokens (measured: Groq's and OpenRouter's 4 more
#: than Cerebras' and Bedrock's on the same body); half the spread is counted, flagged estimate.
HOST_SPREAD = 2
TOOLS_CHANNEL = "\nCalls to these tools must go to the commentary channel: 'functions'."


def _ts_type(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    if isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return _ts_type(schema.get("items")) + "[]"
    if kind in ("number", "integer"):
        return "number"
    if kind in ("string", "boolean"):
        return str(kind)
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return "{\n" + "".join(_property(k, v, schema) for k, v in schema["properties"].items()) + "}"
    return "any" if kind is None else "object"


def _property(name: str, schema: Any, parent: Mapping[str, Any]) -> str:
    required = parent.get("required") or ()
    desc = schema.get("description") if isinstance(schema, Mapping) else None
    head = f"// {desc}\n" if isinstance(desc, str) else ""
    return f"{head}{name}{'' if name in required else '?'}: {_ts_type(schema)},\n"


def namespace(tools: Sequence[Mapping[str, Any]]) -> str:
    out = "# Tools\n\n## functions\n\nnamespace functions {\n\n"
    for fn in tools:
        desc = fn.get("description")
        if isinstance(desc, str) and desc:
            out += f"// {desc}\n"
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        if isinstance(props, Mapping) and props:
            assert isinstance(params, Mapping)
            body = "".join(_property(k, v, params) for k, v in props.items())
            out += f"type {fn.get('name')} = (_: {{\n{body}}}) => any;\n\n"
        else:
            out += f"type {fn.get('name')} = () => any;\n\n"
    return out + "} // namespace functions"


def render_harmony(r: Rendering, body: Mapping[str, Any]) -> None:
    messages = body.get("messages") or ()
    tools = functions(body.get("tools")) if body.get("tool_choice") != "none" else []
    effort = body.get("reasoning_effort")
    r.special(3)  # <|start|>system<|message|> (``system`` is one token in o200k_harmony)
    r.text(SYSTEM_HEADER.format(effort=effort if isinstance(effort, str) else "medium"))
    r.special(1 + HOST_SPREAD)  # <|end|>, and half the hosts' spread
    system = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
    ]
    fmt = body.get("response_format")
    schema = fmt.get("json_schema") if isinstance(fmt, Mapping) else None
    if tools:
        r.text(TOOLS_CHANNEL)
    if system or tools or isinstance(schema, Mapping):
        r.special(3)  # <|start|>developer<|message|>
        r.text("# Instructions\n\n" if system else "")
        for k, i in enumerate(system):
            r.at = i
            r.text(("\n" if k else "") + content_text(messages[i].get("content")))
        r.at = None
        if tools:
            r.tool_text(("\n\n" if system else "") + namespace(tools))
        if isinstance(schema, Mapping):
            desc = schema.get("description")
            text = f"# Response Formats\n\n## {schema.get('name', '')}\n\n"
            text += (f"// {desc}\n" if isinstance(desc, str) else "") + json.dumps(
                schema.get("schema"), separators=(",", ":")
            )
            r.tool_text(("\n\n" if system or tools else "") + text)
        r.special()  # <|end|>
    names: dict[str, str] = {}
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") in ("system", "developer"):
            continue
        r.at = i
        role = m.get("role")
        if role == "assistant":
            # A reply that makes calls is rendered as its calls alone (its text, reasoning written
            # into the content included, is not read back); a reply without calls is its text, as sent.
            made = calls(m)
            text = "" if made else content_text(m.get("content"))
            if text:
                r.special(5)  # <|start|>assistant<|channel|>final<|message|> ... <|end|>
                r.text(text)
            for k, (name, args) in enumerate(made):
                ids = m.get("tool_calls") or ()
                call_id = ids[k].get("id") if k < len(ids) and isinstance(ids[k], Mapping) else None
                if isinstance(call_id, str):
                    names[call_id] = name
                r.special(4)  # <|start|>assistant ...<|channel|> ...<|message|> ... <|call|>
                r.text(f" to=functions.{name}")
                r.text("commentary json")
                r.text(args if isinstance(args, str) else json.dumps(args))
        elif role in ("tool", "function"):
            name = names.get(str(m.get("tool_call_id")), str(m.get("name") or ""))
            r.special(4)  # <|start|> ... <|channel|> ... <|message|> ... <|end|>
            r.text(f"functions.{name} to=assistant")
            r.text("commentary")
            r.text(content_text(m.get("content")))
        else:
            r.special(3)  # <|start|>user<|message|> ... <|end|>
            r.text(content_text(m.get("content")))
    r.at = None
    r.special(2)  # <|start|>assistant
