"""Mistral: the request as Mistral's instruction format writes it, in the Tekken vocabulary
(splintr-rs ships it): ``<s>``, ``[SYSTEM_PROMPT]…[/SYSTEM_PROMPT]``, the tools as a JSON list in
``[AVAILABLE_TOOLS]…[/AVAILABLE_TOOLS]`` before the last user message, ``[INST]…[/INST]``, a
reply closed by ``</s>``, calls after ``[TOOL_CALLS]`` and results in ``[TOOL_RESULTS]…``.

The current API models write a call as ``[TOOL_CALLS]name[ARGS]{…}`` and a result as its bare
text (tokenizer v13); the 2024 models as JSON lists with call ids (v7). Mistral Small 4 and
Magistral Small state their reasoning setting in every request (``[MODEL_SETTINGS]``, v15).
Checked against ``mistral-common``'s own rendering: the same count on every recorded body but
one, where this one matches the bill.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.families import _vision as vision
from otel_ctx.families._render import Rendering, calls, content_text, functions

#: Pixtral 12B's encoder (16-pixel patches, images up to 1024 pixels); the later vision models
#: (Mistral Medium 3, Small 3.1, Pixtral Large) merge 14-pixel patches two by two, up to 1540.
PIXTRAL_12B = vision.mistral(16, 1024)
PIXTRAL = vision.mistral(28, 1540)
#: The 2024 models, served with the tokenizer version whose calls are JSON lists with ids.
LEGACY_CALLS = ("pixtral-12b", "mistral-tiny", "open-mistral", "open-mixtral", "mixtral", "mistral-7b")
#: The models whose tokenizer (v15) states the reasoning setting in every request.
SETTINGS_MODELS = ("mistral-small-latest", "mistral-small-26", "mistral-small-4", "magistral-small")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _tool_list(tools: Any) -> str:
    """The tools as Mistral lists them: type, then the function's name, description, parameters."""
    out = []
    for fn in functions(tools):
        kept = {k: fn[k] for k in ("name", "description", "parameters") if k in fn}
        out.append({"type": "function", "function": kept})
    return _dumps(out)


def _thinking(r: Rendering, content: Any) -> None:
    """A reply's ``thinking`` parts, as Magistral reads them back: ``[THINK]…[/THINK]``."""
    if not isinstance(content, Sequence) or isinstance(content, str):
        return
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "thinking":
            r.special(2)
            r.text(content_text(part.get("thinking")))


def _call(r: Rendering, m: Mapping[str, Any], legacy: bool) -> None:
    made = calls(m)
    if legacy:
        ids = [c.get("id") if isinstance(c, Mapping) else None for c in m.get("tool_calls") or ()]
        r.special()  # [TOOL_CALLS]
        r.text(_dumps([{"name": n, "arguments": a, "id": i} for (n, a), i in zip(made, ids)]))
        return
    for name, args in made:
        r.special(2)  # [TOOL_CALLS] ... [ARGS]
        r.text(name)
        r.text(_dumps(args))


def render_mistral(r: Rendering, body: Mapping[str, Any]) -> None:
    raw = body.get("messages")
    messages: Sequence[Any] = raw if isinstance(raw, Sequence) and not isinstance(raw, str) else ()
    model = str(body.get("model", "")).rsplit("/", 1)[-1]
    rule = PIXTRAL_12B if model.startswith("pixtral-12b") else PIXTRAL
    r.images = [rule(*size) if size else None for size in vision.image_sizes(messages)]
    legacy = model.startswith(LEGACY_CALLS)
    tools = body.get("tools") if body.get("tool_choice") != "none" else None
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"), default=-1
    )
    r.special()  # <s>
    if model.startswith(SETTINGS_MODELS):
        effort = body.get("reasoning_effort")
        r.special(2)  # [MODEL_SETTINGS] ... [/MODEL_SETTINGS]
        r.text(_dumps({"reasoning_effort": effort if isinstance(effort, str) else "none"}))
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            continue
        r.at = i
        role = m.get("role")
        text = content_text(m.get("content"))
        if role in ("system", "developer"):
            r.special(2)  # [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT]
            r.text(text)
        elif role == "assistant":
            _thinking(r, m.get("content"))
            r.text(text)
            if calls(m):
                _call(r, m, legacy)
            r.special()  # </s>
        elif role in ("tool", "function"):
            r.special(2)  # [TOOL_RESULTS] ... [/TOOL_RESULTS]
            r.text(_dumps({"content": text, "call_id": m.get("tool_call_id")}) if legacy else text)
        else:
            if i == last_user and functions(tools):
                r.at = None
                r.special(2)  # [AVAILABLE_TOOLS] ... [/AVAILABLE_TOOLS]
                r.tool_text(_tool_list(tools))
                r.at = i
            r.special(2)  # [INST] ... [/INST]
            r.text(text)
    r.at = None
