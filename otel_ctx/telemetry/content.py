"""Opt-in content capture: message text leaves the process only when the operator says so.

Read on every emission rather than once at import so an operator can flip it for a
running process (and tests can), and so importing otel-ctx never decides it early.
"""

from __future__ import annotations

import json
import os
from typing import Any

from otel_ctx import names

_TRUE = frozenset({"true", "1", "yes", "on"})


def capture_content() -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is set to true."""
    return os.environ.get(names.ENV_CAPTURE_CONTENT, "").strip().lower() in _TRUE


def messages_json(messages: list[dict[str, Any]]) -> str:
    """The request as JSON for the opt-in content event (values that are not JSON become strings)."""
    return json.dumps(messages, ensure_ascii=False, default=str)
