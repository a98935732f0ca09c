"""Bedrock Converse bodies as the Anthropic Messages bodies Bedrock turns them into for Claude.

Bedrock serves Claude through Converse by rewriting the request into Anthropic's Messages
format: ``system`` text blocks, ``messages`` whose blocks are ``text``, ``image``,
``document``, ``tool_use``, ``tool_result`` and ``thinking``, ``tools`` with an
``input_schema`` and a ``tool_choice``. Claude then bills what that body holds, so a Converse
body for Claude is counted by mapping it block for block to that body and reading it with the
Anthropic accounting. Each Converse message becomes exactly one Messages message, so turn
``k`` of one is turn ``k`` of the other.

This module is pure data mapping: it neither counts nor checks rules (the readers do), and it
never changes what it is given. Binary payloads (``bytes`` as boto3 takes them) become the
base64 text the Messages API carries, so the media rules read them the same either way.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from otel_ctx.adapters._base import ARRAY, as_mapping
from otel_ctx.adapters._media import pdf_document

#: Converse document formats that are text, as Bedrock hands them to Claude (a text document).
TEXT_FORMATS = frozenset({"txt", "md", "csv", "html", "htm", "xml", "json", "tsv"})


def b64(data: Any) -> str | None:
    """``data`` as base64 text: raw bytes (boto3's) encoded, a string (a recorded body) as it is."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(data)).decode("ascii")
    return data if isinstance(data, str) else None


def raw_bytes(data: Any) -> bytes | None:
    """``data`` as bytes: raw bytes as they are, base64 text decoded (``None`` when it is neither)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        try:
            return base64.b64decode(data, validate=False)
        except ValueError:
            return None
    return None


def _image(image: Mapping[str, Any]) -> dict[str, Any]:
    source = as_mapping(image.get("source")) or {}
    data = b64(source.get("bytes"))
    if data is None:
        # An image in S3 (``s3Location``): the body does not hold it, like an image by URL.
        location = as_mapping(source.get("s3Location")) or {}
        return {"type": "image", "source": {"type": "url", "url": str(location.get("uri", ""))}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": f"image/{image.get('format', 'png')}", "data": data},
    }


def _document(doc: Mapping[str, Any], native_pdf: bool = False, in_result: bool = False) -> dict[str, Any]:
    """A document block: a PDF as Anthropic's base64 PDF, text formats as a text document, what is
    in S3 as a document by URL; other formats (Word, Excel) are converted to text by Bedrock, so
    their bytes stand in for that text (errs high: the binary container is larger)."""
    source = as_mapping(doc.get("source")) or {}
    fmt = str(doc.get("format", "")).lower()
    out: dict[str, Any] = {"type": "document"}
    name = doc.get("name")
    if isinstance(name, str):
        out["title"] = name
    if isinstance(source.get("text"), str):
        out["source"] = {"type": "text", "media_type": "text/plain", "data": source["text"]}
        return out
    content = source.get("content")
    if isinstance(content, ARRAY):
        blocks = [{"type": "text", "text": str(b.get("text", ""))} for b in map(as_mapping, content) if b]
        out["source"] = {"type": "content", "content": blocks}
        return out
    data = source.get("bytes")
    if data is None:
        location = as_mapping(source.get("s3Location")) or {}
        out["source"] = {"type": "url", "url": str(location.get("uri", ""))}
        return out
    if in_result:
        # A document in a tool result reaches Claude as its name only (the bills of tool results
        # holding PDFs of 3 and 900 text tokens are the same).
        out["source"] = {"type": "text", "media_type": "text/plain", "data": ""}
        return out
    if fmt == "pdf" and native_pdf:
        out["source"] = {"type": "base64", "media_type": "application/pdf", "data": b64(data) or ""}
        return out
    if fmt == "pdf":
        # Converse hands Claude a PDF's extracted text, not its page images (the bills of PDFs
        # on Converse are their text and a document's framing).
        pdf = pdf_document(data) if isinstance(data, (str, bytes, bytearray, memoryview)) else None
        if pdf is not None and pdf.parsed:
            out["source"] = {"type": "text", "media_type": "text/plain", "data": "\n".join(pdf.texts)}
        else:
            out["source"] = {"type": "base64", "media_type": "application/pdf", "data": b64(data) or ""}
        return out
    raw = raw_bytes(data) or b""
    out["source"] = {"type": "text", "media_type": "text/plain", "data": raw.decode("utf-8", "replace")}
    return out


def _result_content(content: Any) -> Any:
    if not isinstance(content, ARRAY):
        return content
    out: list[Any] = []
    for raw in content:
        block = as_mapping(raw)
        if block is None:
            out.append(raw)
        elif "text" in block:
            out.append({"type": "text", "text": block["text"]})
        elif "json" in block:
            # A JSON result is given to the model as its JSON text.
            out.append({"type": "text", "text": json.dumps(block["json"], ensure_ascii=False, default=str)})
        elif "image" in block:
            out.append(_image(as_mapping(block["image"]) or {}))
        elif "document" in block:
            out.append(_document(as_mapping(block["document"]) or {}, in_result=True))
        else:
            out.append({"type": "other", **_plain(dict(block))})
    return out


def block(raw: Any, native_pdf: bool = False) -> Any:
    """One Converse content block as the Messages block Bedrock sends Claude; ``None`` for a
    block Claude is not sent (a cache point: metadata, never billed). A block of a kind this
    version does not know goes on as it is (the reader charges its JSON, erring high)."""
    b = as_mapping(raw)
    if b is None:
        return raw
    if "text" in b and isinstance(b["text"], str):
        return {"type": "text", "text": b["text"]}
    if "cachePoint" in b:
        return None
    if "image" in b:
        return _image(as_mapping(b["image"]) or {})
    if "video" in b:
        # Claude takes no video: Bedrock would refuse it; counted as one image, never refused here.
        return _image(as_mapping(b["video"]) or {})
    if "document" in b:
        return _document(as_mapping(b["document"]) or {}, native_pdf)
    if "toolUse" in b:
        use = as_mapping(b["toolUse"]) or {}
        return {
            "type": "tool_use",
            "id": use.get("toolUseId"),
            "name": use.get("name"),
            "input": use.get("input", {}),
        }
    if "toolResult" in b:
        result = as_mapping(b["toolResult"]) or {}
        out = {"type": "tool_result", "tool_use_id": result.get("toolUseId")}
        out["content"] = _result_content(result.get("content"))
        if result.get("status") == "error":
            out["is_error"] = True
        return out
    if "reasoningContent" in b:
        reasoning = as_mapping(b["reasoningContent"]) or {}
        text = as_mapping(reasoning.get("reasoningText"))
        if text is not None:
            return {
                "type": "thinking",
                "thinking": text.get("text", ""),
                "signature": text.get("signature", ""),
            }
        return {"type": "redacted_thinking", "data": b64(reasoning.get("redactedContent")) or ""}
    if "guardContent" in b:
        # Guardrail content reaches the model as its text (the qualifiers are the guardrail's).
        guard = as_mapping(b["guardContent"]) or {}
        text = as_mapping(guard.get("text"))
        if text is not None and isinstance(text.get("text"), str):
            return {"type": "text", "text": text["text"]}
        image = as_mapping(guard.get("image"))
        if image is not None:
            return _image(image)
    # Named by its kind (the Messages reader reads a block by its type).
    return {"type": next((str(k) for k in b if k != "type"), "other"), **_plain(dict(b))}


def _plain(value: Any) -> Any:
    """``value`` with its binary fields as base64 text: a block of a kind this version does not
    know is charged as its JSON, which raw bytes (boto3's) have none of."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b64(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, ARRAY):
        return [_plain(v) for v in value]
    return value


def message(raw: Any, native_pdf: bool = False) -> Any:
    """A Converse message as a Messages message (its role as it is; blocks mapped)."""
    m = as_mapping(raw)
    if m is None:
        return raw
    content = m.get("content")
    if isinstance(content, ARRAY):
        mapped = [block(b, native_pdf) for b in content]
        content = [b for b in mapped if b is not None]
    return {"role": m.get("role"), "content": content}


def system_text(system: Any) -> list[dict[str, Any]]:
    """The ``system`` blocks' text as Messages text blocks (cache points dropped)."""
    out: list[dict[str, Any]] = []
    for raw in system if isinstance(system, ARRAY) else ():
        b = as_mapping(raw)
        if b is None:
            continue
        mapped = block(b)
        if isinstance(mapped, dict) and mapped.get("type") == "text":
            out.append(mapped)
    return out


def tools(config: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """``toolConfig`` as Messages ``tools`` and ``tool_choice`` (cache points dropped)."""
    cfg = as_mapping(config) or {}
    out: list[dict[str, Any]] = []
    raw_tools = cfg.get("tools")
    for raw in raw_tools if isinstance(raw_tools, ARRAY) else ():
        t = as_mapping(raw)
        if t is None or "cachePoint" in t:
            continue
        spec = as_mapping(t.get("toolSpec"))
        if spec is None:
            system_tool = as_mapping(t.get("systemTool")) or {}
            out.append(
                {
                    "type": str(system_tool.get("name", "system_tool")),
                    "name": str(system_tool.get("name", "")),
                }
            )
            continue
        schema = as_mapping(spec.get("inputSchema")) or {}
        tool: dict[str, Any] = {"name": spec.get("name")}
        if spec.get("description"):
            tool["description"] = spec["description"]
        tool["input_schema"] = schema.get("json", {})
        out.append(tool)
    choice = as_mapping(cfg.get("toolChoice"))
    mapped: dict[str, Any] | None = None
    if choice is not None:
        for kind in ("auto", "any", "tool"):
            if kind in choice:
                mapped = {"type": kind}
                tool_choice = as_mapping(choice[kind]) or {}
                if kind == "tool":
                    mapped["name"] = tool_choice.get("name")
    return out, mapped


def output_format(config: Any) -> dict[str, Any] | None:
    """``outputConfig.textFormat`` of type ``json_schema`` as Messages ``output_config``."""
    cfg = as_mapping(config) or {}
    fmt = as_mapping(cfg.get("textFormat")) or {}
    if fmt.get("type") != "json_schema":
        return None
    structure = as_mapping(fmt.get("structure")) or {}
    spec = as_mapping(structure.get("jsonSchema")) or {}
    schema = spec.get("schema")
    if isinstance(schema, str):
        with contextlib.suppress(ValueError):
            schema = json.loads(schema)
    return {"format": {"type": "json_schema", "schema": schema}}


def to_messages_body(body: Mapping[str, Any], model: str, native_pdf: bool = False) -> dict[str, Any]:
    """The Messages body Bedrock makes of the Converse ``body`` for the Claude ``model``
    (``native_pdf``: the model is given a PDF's pages, not only its text)."""
    out: dict[str, Any] = {"model": model}
    messages = body.get("messages")
    out["messages"] = [message(m, native_pdf) for m in messages] if isinstance(messages, ARRAY) else messages
    system = system_text(body.get("system"))
    if system:
        out["system"] = system
    if body.get("toolConfig") is not None:
        tool_list, choice = tools(body.get("toolConfig"))
        if tool_list:
            out["tools"] = tool_list
        if choice is not None:
            out["tool_choice"] = choice
    output = output_format(body.get("outputConfig"))
    if output is not None:
        out["output_config"] = output
    extra = as_mapping(body.get("additionalModelRequestFields")) or {}
    for key in ("thinking", "output_config", "output_format"):
        if key in extra:
            out[key] = extra[key]
    return out
