"""Llama 3.x and Llama 4 chat templates, as Meta's published templates render a request.

Llama 3.1-3.3 open every request with a system header holding a date block ("Cutting Knowledge
Date: December 2023 / Today Date: ...") even when the request has no system message, and put
tools in the first user message; Llama 3.0 has no date block. Llama 4 uses ``<|header_start|>``
markers; the hosts serving it with tools (Groq) write a tool-use prompt of their own around each
function's JSON that no published template shows: a constant measured from their bills, so such
a count is an estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.families import _vision as vision
from otel_ctx.families._render import HOST, Rendering, calls, content_text, functions, py_json

DATE_BLOCK = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
TOOLS_IN_USER = (
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n\nRespond in the format "
    '{"name": function name, "parameters": dictionary of argument name and its value}.'
    "Do not use variables.\n\n"
)
#: The tool-use prompt Llama 4's hosts add around the functions' JSON (not published: measured
#: on Groq's bills of one tool and of two, with and without calls).
LLAMA4_TOOL_PROMPT = 653


def _header(r: Rendering, role: str, llama4: bool) -> None:
    r.special()  # <|start_header_id|> / <|header_start|>
    r.text(role)
    r.special()  # <|end_header_id|> / <|header_end|>
    r.text("\n\n")


def render(r: Rendering, body: Mapping[str, Any], *, date_block: bool, llama4: bool = False) -> None:
    messages: Sequence[Any] = body.get("messages") or ()
    tools = functions(body.get("tools")) if body.get("tool_choice") != "none" else []
    if body.get("raw") is True:  # Ollama's raw prompt: the text as written, no template
        for i, m in enumerate(messages):
            r.at = i
            r.text(content_text(m.get("content")) if isinstance(m, Mapping) else "")
        r.at = None
        return
    if body.get(HOST) == "ollama":
        date_block = date_block and bool(tools)  # Ollama's Llama 3.1 template: only with tools
    r.special()  # <|begin_of_text|>
    first = messages[0] if messages and isinstance(messages[0], Mapping) else None
    start = 0
    if first is not None and first.get("role") in ("system", "developer"):
        start = 1
        r.at = 0
    if date_block or start:
        _header(r, "system", llama4)
        if date_block:
            if tools:
                r.text("Environment: ipython\n")
            r.text(DATE_BLOCK)
        if start:
            r.text(content_text(messages[0].get("content")).strip())
        r.special()  # <|eot_id|>
    tools_pending = bool(tools) and not llama4
    if tools and llama4:
        r.at = None
        r.tools += LLAMA4_TOOL_PROMPT
        r.tokens += LLAMA4_TOOL_PROMPT
        for fn in tools:
            r.tool_text(py_json(dict(fn)))
    for i in range(start, len(messages)):
        m = messages[i]
        if not isinstance(m, Mapping):
            continue
        r.at = i
        role = str(m.get("role", "user"))
        if role in ("tool", "function"):
            role = "ipython"
        _header(r, role, llama4)
        if role == "user" and tools_pending:
            tools_pending = False
            r.tool_text(TOOLS_IN_USER)
            for fn in tools:
                r.tool_text(py_json({"type": "function", "function": dict(fn)}, indent=4) + "\n\n")
        made = calls(m)
        if made:
            for name, args in made:
                r.text(py_json({"name": name, "parameters": args}))
        else:
            r.text(content_text(m.get("content")).strip())
        r.special()  # <|eot_id|> / <|eot|>
    r.at = None
    _header(r, "assistant", llama4)


def render_llama3(r: Rendering, body: Mapping[str, Any]) -> None:
    """Llama 3.0: no date block."""
    render(r, body, date_block=False)


def render_llama31(r: Rendering, body: Mapping[str, Any]) -> None:
    """Llama 3.1, 3.2, 3.3: the date block opens every request."""
    render(r, body, date_block=True)


def render_llama4(r: Rendering, body: Mapping[str, Any]) -> None:
    render(r, body, date_block=False, llama4=True)
    r.images = [
        vision.llama4(*size) if size else None for size in vision.image_sizes(body.get("messages") or ())
    ]
