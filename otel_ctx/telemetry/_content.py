"""Opt-in content capture: message text leaves the process only when the operator says so.

Read on every emission rather than once at import so an operator can flip it for a
running process (and tests can), and so importing otel-ctx never decides it early.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from otel_ctx import names

_TRUE = frozenset({"true", "1", "yes", "on"})


def _env_reader(name: str) -> Callable[[], str | None]:
    """A reader of one environment variable that costs a dict lookup when it is unset.

    ``os.environ.get`` of an unset variable raises and catches two ``KeyError`` inside; asked
    every round, that was a few percent of an instrumented call. CPython's ``os.environ``
    keeps its values in ``_data`` (what ``os.environ[...] = ...``, ``monkeypatch.setenv`` and
    ``mock.patch.dict`` change), so reading it there sees every change; anywhere it does not,
    the plain lookup is used.
    """
    env = os.environ
    data = getattr(env, "_data", None)
    encode = getattr(env, "encodekey", None)
    decode = getattr(env, "decodevalue", None)
    if isinstance(data, dict) and callable(encode) and callable(decode):
        key = encode(name)

        def read() -> str | None:
            raw = data.get(key)
            return None if raw is None else str(decode(raw))

        return read
    return lambda: os.environ.get(name)


_capture_setting = _env_reader(names.ENV_CAPTURE_CONTENT)


def capture_content() -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is set to true."""
    value = _capture_setting()
    return value is not None and value.strip().lower() in _TRUE


def messages_json(messages: list[dict[str, Any]]) -> str:
    """The request as JSON for the opt-in content event (values that are not JSON become strings)."""
    return json.dumps(messages, ensure_ascii=False, default=str)


def exception_type(exc: BaseException) -> str:
    """``module.QualName`` (bare for builtins), as the OpenTelemetry SDK names exception types."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if not module or module == "builtins" else f"{module}.{cls.__qualname__}"


def record_exception(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc``, its type always, its message and trace only when opted in.

    A summariser's or the agent's own exception can quote the conversation (``ValueError(f"bad
    reply: {text}")``), and a stack trace ends with that message: without the content
    opt-in only the type goes on the span (event, ``error.type`` and the status).
    """
    kind = exception_type(exc)
    span.set_attribute(names.ERROR_TYPE, kind)
    if capture_content():
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {exc}"))
    else:
        span.add_event(names.EVENT_EXCEPTION, {names.EXCEPTION_TYPE: kind})
        span.set_status(Status(StatusCode.ERROR, kind))
