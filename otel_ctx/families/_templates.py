"""ChatML (Qwen), DeepSeek, Gemma, GLM and Cohere Command templates, as their published chat
templates render a request (the Jinja templates shipped beside each model's weights).

Each ``render_*`` writes one request onto a :class:`Rendering`: markers the tokenizer holds as
one token go through ``special()``, everything else through ``text()``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.families import _vision as vision
from otel_ctx.families._render import Rendering, calls, content_text, functions, py_json

QWEN_TOOLS_HEAD = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
QWEN_TOOLS_TAIL = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
#: Reasoning a model wrote in an earlier reply, which DeepSeek-R1's and Qwen3's templates drop.
_THINK = re.compile(r"^.*?</think>\s*", re.DOTALL)


def _messages(body: Mapping[str, Any]) -> Sequence[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, Sequence) and not isinstance(messages, str) else ()


def _tools(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return functions(body.get("tools")) if body.get("tool_choice") != "none" else []


def _thinking_off(body: Mapping[str, Any]) -> bool:
    """Thinking turned off (``reasoning_effort: "none"`` or the template's ``enable_thinking``)."""
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, Mapping) and kwargs.get("enable_thinking") is False:
        return True
    return body.get("reasoning_effort") == "none"


def render_chatml(r: Rendering, body: Mapping[str, Any]) -> None:
    """Qwen 2.5 / Qwen 3: ``<|im_start|>role\\n ... <|im_end|>\\n``; tools in the system message;
    with thinking off, Qwen 3's reply opens with an empty ``<think>`` block."""
    messages = _messages(body)
    r.images = [vision.qwen_vl(*size) if size else None for size in vision.image_sizes(messages)]
    tools = _tools(body)
    start = 0
    system = None
    if messages and isinstance(messages[0], Mapping) and messages[0].get("role") in ("system", "developer"):
        system = content_text(messages[0].get("content"))
        start = 1
        r.at = 0
    if tools:
        r.special()
        r.text("system\n")
        if system:
            r.text(system + "\n\n")
        r.tool_text(QWEN_TOOLS_HEAD)
        for fn in tools:
            r.tool_text("\n" + py_json({"type": "function", "function": dict(fn)}))
        r.tool_text(QWEN_TOOLS_TAIL)
        r.special()
        r.text("\n")
    elif system is not None:
        r.special()
        r.text("system\n" + system)
        r.special()
        r.text("\n")
    in_results = False
    for i in range(start, len(messages)):
        m = messages[i]
        if not isinstance(m, Mapping):
            continue
        role = str(m.get("role", "user"))
        if role in ("tool", "function"):
            r.at = i
            if not in_results:
                r.special()
                r.text("user")
            r.text("\n<tool_response>\n" + content_text(m.get("content")) + "\n</tool_response>")
            in_results = True
            continue
        if in_results:
            r.special()
            r.text("\n")
            in_results = False
        r.at = i
        text = content_text(m.get("content"))
        if role == "assistant":
            text = _THINK.sub("", text)
        r.special()
        r.text(role + "\n" + text)
        for k, (name, args) in enumerate(calls(m)):
            lead = "\n" if text or k else ""
            r.text(
                lead
                + '<tool_call>\n{"name": "'
                + name
                + '", "arguments": '
                + py_json(args)
                + "}\n</tool_call>"
            )
        r.special()
        r.text("\n")
    if in_results:
        r.special()
        r.text("\n")
    r.at = None
    r.special()
    r.text("assistant\n")
    if _thinking_off(body):
        r.special(2)  # <think> ... </think>
        r.text("\n\n")
        r.text("\n\n")


def render_deepseek(r: Rendering, body: Mapping[str, Any]) -> None:
    """DeepSeek V3 / R1: ``<｜User｜>`` and ``<｜Assistant｜>`` markers, the system text first,
    earlier replies' reasoning dropped; tool calls and results in their own markers."""
    messages = _messages(body)
    r.special()  # <｜begin▁of▁sentence｜>
    for i, m in enumerate(messages):
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer"):
            r.at = i
            r.text(content_text(m.get("content")))
    in_results = False
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            continue
        r.at = i
        role = m.get("role")
        if role in ("system", "developer"):
            continue
        if role in ("tool", "function"):
            if not in_results:
                r.special()  # <｜tool▁outputs▁begin｜>
            r.special(2)  # <｜tool▁output▁begin｜> ... <｜tool▁output▁end｜>
            r.text(content_text(m.get("content")))
            in_results = True
            continue
        if in_results:
            r.special()  # <｜tool▁outputs▁end｜>
            in_results = False
        if role == "assistant":
            r.special()  # <｜Assistant｜>
            r.text(_THINK.sub("", content_text(m.get("content"))))
            made = calls(m)
            if made:
                r.special()  # <｜tool▁calls▁begin｜>
                for name, args in made:
                    r.special(3)  # <｜tool▁call▁begin｜>function<｜tool▁sep｜> ... <｜tool▁call▁end｜>
                    r.text("function" + name + "\n```json\n" + py_json(args) + "\n```")
                r.special()  # <｜tool▁calls▁end｜>
            r.special()  # <｜end▁of▁sentence｜>
        else:
            r.special()  # <｜User｜>
            r.text(content_text(m.get("content")))
    r.at = None
    if in_results:
        r.special()
    r.special()  # <｜Assistant｜>
    for fn in _tools(body):  # hosts that take tools describe them as JSON (not in the published template)
        r.tool_text(py_json(dict(fn)))


def render_gemma(r: Rendering, body: Mapping[str, Any]) -> None:
    """Gemma 3: the system text opens the first user turn; the model's role is ``model``."""
    messages = _messages(body)
    start = 0
    system = ""
    if messages and isinstance(messages[0], Mapping) and messages[0].get("role") in ("system", "developer"):
        r.at = 0
        system = content_text(messages[0].get("content")) + "\n\n"
        start = 1
    r.special()  # <bos>
    for i in range(start, len(messages)):
        m = messages[i]
        if not isinstance(m, Mapping):
            continue
        r.at = i
        role = "model" if m.get("role") == "assistant" else "user"
        r.special()  # <start_of_turn>
        r.text(role + "\n" + (system if i == start else "") + content_text(m.get("content")).strip())
        r.special()  # <end_of_turn>
        r.text("\n")
    r.at = None
    r.special()
    r.text("model\n")


def render_glm(r: Rendering, body: Mapping[str, Any]) -> None:
    """GLM-4: ``[gMASK]<sop>``, then ``<|role|>`` markers each followed by a newline and the text."""
    r.special(2)
    tools = _tools(body)
    if tools:
        r.special()
        r.text("\n# Tools\n\n")
        for fn in tools:
            r.tool_text(py_json(dict(fn)) + "\n")
    for i, m in enumerate(_messages(body)):
        if not isinstance(m, Mapping):
            continue
        r.at = i
        r.special()
        text = content_text(m.get("content"))
        if m.get("role") == "assistant":
            text = _THINK.sub("", text)
        r.text("\n" + text)
        for name, args in calls(m):
            r.text("\n" + name + "\n" + py_json(args))
    r.at = None
    r.special()


def render_cohere(r: Rendering, body: Mapping[str, Any]) -> None:
    """Command: Cohere bills the messages' and tools' text without its template's framing."""
    for i, m in enumerate(_messages(body)):
        r.at = i
        if isinstance(m, Mapping):
            r.text(content_text(m.get("content")))
            for name, args in calls(m):
                r.text(name + py_json(args))
    r.at = None
    for fn in _tools(body):
        r.tool_text(py_json(dict(fn)))


DSML = "｜DSML｜"
#: DeepSeek V3.2's tool section (its published ``encoding_dsv32``), the functions' JSON after it.
DEEPSEEK_V32_TOOLS = (
    "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
    f'You can invoke functions by writing a "<{DSML}function_calls>" block like the following as part of '
    f"your reply to the user:\n<{DSML}function_calls>\n"
    f'<{DSML}invoke name="$FUNCTION_NAME">\n'
    f'<{DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>\n'
    f'...\n</{DSML}invoke>\n<{DSML}invoke name="$FUNCTION_NAME2">\n...\n</{DSML}invoke>\n'
    f"</{DSML}function_calls>\n\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, while lists "
    'and objects should use JSON format. The "string" attribute should be set to "true" for string type '
    'parameters and "false" for other types (numbers, booleans, arrays, objects).\n\n'
    "If the thinking_mode is enabled, then after function results you should strongly consider outputting "
    f"a thinking block. Here is an example:\n\n<{DSML}function_calls>\n...\n</{DSML}function_calls>\n\n"
    "<function_results>\n...\n</function_results>\n\n<think>...thinking about results</think>\n\n"
    "Here are the functions available in JSONSchema format:\n<functions>\n"
)


def _dsml_call(name: str, args: Any) -> str:
    params = args if isinstance(args, Mapping) else {}
    lines = [
        f'<{DSML}parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
        f"{v if isinstance(v, str) else py_json(v)}</{DSML}parameter>"
        for k, v in params.items()
    ]
    return f'<{DSML}invoke name="{name}">\n' + "\n".join(lines) + f"\n</{DSML}invoke>"


def _dsml_text(r: Rendering, text: str, *, tools: bool = False) -> None:
    """Text holding DSML markers, counted as text: the vocabulary shipped (V3's) has no such
    token, so this errs high by a few tokens a marker (measured: 5-13% over on V3.2's bills)."""
    (r.tool_text if tools else r.text)(text)


def render_deepseek_v32(r: Rendering, body: Mapping[str, Any]) -> None:
    """DeepSeek V3.2 (the DeepSeek API's ``deepseek-chat`` and ``deepseek-reasoner``): the tools in
    the system text, each user turn closed by ``</think>`` (``<think>`` on the last one when
    thinking), calls in DSML, results in ``<function_results>``; earlier reasoning dropped."""
    messages = _messages(body)
    tools = _tools(body)
    r.special()  # <｜begin▁of▁sentence｜>
    systems = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
    ]
    for k, i in enumerate(systems):
        r.at = i
        r.text(("\n\n" if k else "") + content_text(messages[i].get("content")))
    r.at = None
    if tools:
        text = ("\n\n" if systems else "") + DEEPSEEK_V32_TOOLS + "\n".join(py_json(dict(fn)) for fn in tools)
        _dsml_text(r, text + "\n</functions>\n", tools=True)
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or i in systems:
            continue
        r.at = i
        role = m.get("role")
        if role in ("tool", "function"):
            prev = messages[i - 1] if i else None
            if not (isinstance(prev, Mapping) and prev.get("role") in ("tool", "function")):
                r.text("\n\n<function_results>")
            r.text("\n<result>" + content_text(m.get("content")) + "</result>")
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if not (isinstance(nxt, Mapping) and nxt.get("role") in ("tool", "function")):
                r.text("\n</function_results>\n\n")
                r.special()  # <think> or </think>
            continue
        if role == "assistant":
            made = calls(m)
            r.text(content_text(m.get("content")) if not made else "")
            if made:
                calls_text = "\n".join(_dsml_call(n, a) for n, a in made)
                _dsml_text(r, f"\n\n<{DSML}function_calls>\n" + calls_text + f"\n</{DSML}function_calls>")
            r.special()  # <｜end▁of▁sentence｜>
        else:
            r.special(3)  # <｜User｜> ... <｜Assistant｜> and <think> / </think>
            r.text(content_text(m.get("content")))
    r.at = None
