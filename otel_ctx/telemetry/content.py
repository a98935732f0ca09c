"""Opt-in content capture: message text leaves the process only when the operator says so.

Read on every emission rather than once at import so an operator can flip it for a
running process (and tests can), and so importing otel-ctx never decides it early.
"""

from __future__ import annotations

import json
import os
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from otel_ctx import names

_TRUE = frozenset({"true", "1", "yes", "on"})


def capture_content() -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is set to true."""
    return os.environ.get(names.ENV_CAPTURE_CONTENT, "").strip().lower() in _TRUE


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
