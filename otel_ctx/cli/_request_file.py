"""Reading one request body from a file or stdin, with errors a user can act on.

The body may be any dialect the fit reads (OpenAI Chat Completions, OpenAI Responses,
Anthropic Messages); the engine tells them apart, and ``--provider`` settles a body
that could be more than one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from otel_ctx.cli._errors import CliError
from otel_ctx.cli._input import DEFAULT_MAX_INPUT_BYTES, read_input

#: The body keys that hold the room reserved for the answer, per dialect.
OUTPUT_LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


@dataclass(frozen=True)
class ChatRequest:
    """A request body (any dialect) and the parts of it the command line needs before the fit."""

    source: str
    body: dict[str, Any]
    model: str | None
    max_output_tokens: int | None


def parse_request(label: str, text: str) -> ChatRequest:
    if not text.strip():
        raise CliError(f"{label}: empty; expected a JSON request body ('messages' or 'input')")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{label}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        # The parser recurses once per level of [ or {: no request is nested this deep.
        raise CliError(f"{label}: JSON nested too deeply to be a request body") from None
    if not isinstance(body, dict):
        raise CliError(
            f"{label}: expected a JSON object (a request body with 'messages' or 'input'), "
            f"got {_json_type(body)}"
        )
    if "messages" not in body and "input" not in body and "contents" not in body:
        raise CliError(
            f"{label}: no 'messages', 'input' or 'contents' key; expected a Chat Completions, Responses, "
            "Anthropic Messages or Gemini generate_content body"
        )
    messages = body.get("messages", [])
    if not isinstance(messages, list):
        raise CliError(f"{label}: 'messages' must be a list of messages, got {_json_type(messages)}")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise CliError(f"{label}: 'tools' must be a list of tool definitions, got {_json_type(tools)}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise CliError(f"{label}: 'model' must be a string, got {_json_type(model)}")
    max_out: int | None = None
    for key in OUTPUT_LIMIT_KEYS:
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CliError(f"{label}: {key!r} must be a non-negative integer, got {value!r}")
        max_out = value
        break
    if max_out is None and "contents" in body:
        # Gemini keeps it in the config (generationConfig in the REST body).
        from otel_ctx.adapters._google_genai import requested_output

        max_out = requested_output(body)
    if max_out is None and ("inferenceConfig" in body or "textGenerationConfig" in body):
        # Bedrock keeps it in inferenceConfig (Converse, Nova) or the vendor's own field (Titan).
        from otel_ctx.adapters._bedrock import requested_output as bedrock_output

        max_out = bedrock_output(body)
    return ChatRequest(label, body, model, max_out)


def load_request(path: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> ChatRequest:
    """The request body of a path, or of stdin for ``-``; at most ``max_bytes`` are read."""
    label, data = read_input(path, max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(f"{label}: not UTF-8 text (byte {exc.start})") from None
    return parse_request(label, text)


#: A JSON value's type as the errors name it (bool before int: a boolean is an int to Python).
_JSON_TYPES = ((list, "an array"), (str, "a string"), (bool, "a boolean"), ((int, float), "a number"))


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "an object")
