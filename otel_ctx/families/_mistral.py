"""Mistral: the request as Mistral's own library renders it (``mistral-common``, the
``open-weight`` extra): system prompt, ``[AVAILABLE_TOOLS]``, ``[INST]`` turns, tool calls and
results, with the Tekken vocabulary its API models use.

Without the library the count is Tekken text plus two markers a message, an estimate.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from otel_ctx.families import _vision as vision
from otel_ctx.families._render import Rendering, calls, content_text


@functools.cache
def _tokenizer() -> Any:
    """Mistral's Tekken tokenizer with its instruction renderer, from the file the wheel ships."""
    from importlib import resources

    import mistral_common  # the open-weight extra, loaded on the first Mistral count
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    path = resources.files(mistral_common).joinpath("data/tekken_240911.json")
    with resources.as_file(path) as file:
        return MistralTokenizer.from_file(str(file))


def _text_only(messages: Any) -> list[Any]:
    """Messages with their text parts joined (media are priced by the adapter)."""
    out = []
    for m in messages:
        if isinstance(m, Mapping) and not isinstance(m.get("content"), (str, type(None))):
            m = {**m, "content": content_text(m.get("content"))}
        out.append(m)
    return out


def _encoded(messages: list[Any], tools: Any) -> int:
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    request = ChatCompletionRequest.from_openai(messages=messages, tools=tools or None)
    return len(_tokenizer().encode_chat_completion(request).tokens)


#: Pixtral 12B's encoder (16-pixel patches, images up to 1024 pixels); the later vision models
#: (Mistral Medium 3, Small 3.1, Pixtral Large) merge 14-pixel patches two by two, up to 1540.
PIXTRAL_12B = vision.mistral(16, 1024)
#: The 2024 models, served with the tokenizer version whose calls are JSON lists with ids.
LEGACY_CALLS = ("pixtral-12b", "mistral-tiny", "open-mistral", "open-mixtral", "mixtral", "mistral-7b")
#: The models whose tokenizer (v15) states the reasoning setting in every request,
#: ``[MODEL_SETTINGS]{"reasoning_effort": ...}[/MODEL_SETTINGS]``.
SETTINGS_MODELS = ("mistral-small", "magistral-small")
PIXTRAL = vision.mistral(28, 1540)


def _current_calls(r: Rendering, messages: list[Any]) -> None:
    """Mistral's API models write calls and results the current way (tokenizer v13:
    ``[TOOL_CALLS]name[ARGS]{...}``, ``[TOOL_RESULTS]text[/TOOL_RESULTS]``), not as the JSON
    lists with call ids the bundled tokenizer's version writes: the difference is taken off."""
    text = r.counter.text
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        made = calls(m)
        if m.get("role") == "assistant" and made:
            ids = [c.get("id") if isinstance(c, Mapping) else None for c in m.get("tool_calls") or ()]
            old = [{"name": n, "arguments": a, "id": i} for (n, a), i in zip(made, ids)]
            r.tokens -= text(json.dumps(old, ensure_ascii=False))
            for k, (name, args) in enumerate(made):
                r.special(1 if k else 0)  # [TOOL_CALLS] (the first is in the rendering)
                r.special()  # [ARGS]
                r.text(name)
                r.text(json.dumps(args, ensure_ascii=False))
        elif m.get("role") == "tool":
            content = content_text(m.get("content"))
            old_result = {"content": content, "call_id": m.get("tool_call_id")}
            r.tokens -= text(json.dumps(old_result, ensure_ascii=False))
            r.text(content)


def render_mistral(r: Rendering, body: Mapping[str, Any]) -> None:
    raw = body.get("messages") or ()
    rule = PIXTRAL_12B if "pixtral-12b" in str(body.get("model", "")) else PIXTRAL
    r.images = [rule(*size) if size else None for size in vision.image_sizes(raw)]
    messages = _text_only(raw)
    tools = body.get("tools") if body.get("tool_choice") != "none" else None
    try:
        total = _encoded(messages, tools)
        bare = _encoded(messages, None) if tools else total
    except ImportError:
        r.exact = False
        r.special(1 + 2 * len(messages))
        for m in messages:
            if isinstance(m, Mapping):
                r.text(content_text(m.get("content")))
        return
    except Exception:
        r.exact = False
        for m in messages:
            if isinstance(m, Mapping):
                r.text(content_text(m.get("content")))
        r.special(1 + 2 * len(messages))
        return
    r.tokens += total
    r.tools += total - bare
    if not str(body.get("model", "")).startswith(LEGACY_CALLS):
        _current_calls(r, messages)
    if str(body.get("model", "")).startswith(SETTINGS_MODELS):
        effort = body.get("reasoning_effort")
        r.special(2)  # [MODEL_SETTINGS] ... [/MODEL_SETTINGS]
        r.text(json.dumps({"reasoning_effort": effort if isinstance(effort, str) else "none"}))
