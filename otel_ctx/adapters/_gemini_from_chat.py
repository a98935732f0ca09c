"""A Chat Completions request as the ``generateContent`` body a router sends Gemini for it.

LiteLLM takes Chat Completions whatever the model, and for a Gemini model (its ``gemini/…`` and
``vertex_ai/…`` routes) sends Gemini the same request in Gemini's own shape: system messages as
the system instruction, consecutive messages of one kind as one content, assistant tool calls
as function calls, tool messages as function responses of their own content (a JSON object as
itself, other text as ``{"content": …}``), tools as function
declarations. Measured in that shape, the request is counted as Gemini bills it rather than
with OpenAI's per-message framing. What cannot be mapped (an unknown part) is kept as text, so
a body LiteLLM accepts is never refused here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from otel_ctx.adapters._media import data_url_payload


def _text_parts(content: Any) -> list[dict[str, Any]]:
    """A message's content as Gemini parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, (list, tuple)):
        return [{"text": str(content)}]
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"text": item})
            continue
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append({"text": item["text"]})
        elif kind == "image_url":
            url = item.get("image_url")
            url = url.get("url") if isinstance(url, Mapping) else url
            parts.append(_media(str(url or ""), "image/jpeg"))
        elif kind == "input_audio" and isinstance(item.get("input_audio"), Mapping):
            audio = item["input_audio"]
            parts.append(
                {
                    "inlineData": {
                        "mimeType": f"audio/{audio.get('format') or 'wav'}",
                        "data": audio.get("data") or "",
                    }
                }
            )
        elif kind == "file" and isinstance(item.get("file"), Mapping):
            file = item["file"]
            data = file.get("file_data") or file.get("file_id") or ""
            parts.append(_media(str(data), str(file.get("format") or "application/pdf")))
        else:
            parts.append({"text": json.dumps(item, ensure_ascii=False, default=str)})
    return parts


def _media(url: str, default_mime: str) -> dict[str, Any]:
    found = data_url_payload(url)
    if found is not None:
        mime, data = found
        return {"inlineData": {"mimeType": mime or default_mime, "data": data}}
    return {"fileData": {"mimeType": default_mime, "fileUri": url}}


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"arguments": raw}
    return raw if raw is not None else {}


def _response(content: str) -> Any:
    """A tool's answer as the response object: a JSON object as itself, anything else as text."""
    try:
        found = json.loads(content)
    except ValueError:
        return {"content": content}
    return found if isinstance(found, dict) else {"content": content}


def gemini_body(chat: Mapping[str, Any], *, vertex: bool = False) -> dict[str, Any]:
    """The Gemini body for a Chat Completions request (``model`` carried over); one for Vertex
    carries Vertex's own ``labels`` field, so it is counted as Vertex bills."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # a tool call's id -> its function's name, for the responses

    kinds: list[str] = []  # what each content holds: tool results are never merged with user text

    def add(role: str, parts: list[dict[str, Any]], kind: str = "") -> None:
        kind = kind or role
        if not parts:
            return
        if contents and kinds[-1] == kind:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
            kinds.append(kind)

    for m in chat.get("messages") or ():
        if not isinstance(m, Mapping):
            continue
        role = m.get("role")
        if role in ("system", "developer"):
            system.extend(_text_parts(m.get("content")))
        elif role == "assistant":
            parts = _text_parts(m.get("content"))
            for call in m.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(fn, Mapping):
                    name = str(fn.get("name") or "")
                    names[str(call.get("id"))] = name
                    parts.append({"functionCall": {"name": name, "args": _args(fn.get("arguments"))}})
            fc = m.get("function_call")
            if isinstance(fc, Mapping):
                parts.append(
                    {"functionCall": {"name": str(fc.get("name") or ""), "args": _args(fc.get("arguments"))}}
                )
            add("model", parts)
        elif role in ("tool", "function"):
            name = names.get(str(m.get("tool_call_id")), str(m.get("name") or ""))
            content = m.get("content")
            if not isinstance(content, str):
                content = "".join(p.get("text", "") for p in _text_parts(content))
            add("user", [{"functionResponse": {"name": name, "response": _response(content)}}], "tool")
        else:
            add("user", _text_parts(m.get("content")))
    body: dict[str, Any] = {"model": chat.get("model"), "contents": contents}
    if vertex:
        body["labels"] = {}
    if system:
        body["systemInstruction"] = {"parts": system}
    declarations = []
    for tool in chat.get("tools") or ():
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            decl: dict[str, Any] = {"name": fn["name"], "description": fn.get("description") or ""}
            if fn.get("parameters") is not None:
                decl["parameters"] = fn["parameters"]
            declarations.append(decl)
    if declarations:
        body["tools"] = [{"functionDeclarations": declarations}]
    fmt = chat.get("response_format")
    if isinstance(fmt, Mapping) and isinstance(fmt.get("json_schema"), Mapping):
        schema = fmt["json_schema"].get("schema")
        if schema is not None:
            body["generationConfig"] = {"responseMimeType": "application/json", "responseSchema": schema}
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens")
    if isinstance(limit, int):
        body.setdefault("generationConfig", {})["maxOutputTokens"] = limit
    return body
