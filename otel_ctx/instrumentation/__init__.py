"""Zero-code instrumentation: every OpenAI, Anthropic and Google Gen AI call becomes a budget round.

``opentelemetry-instrument python agent.py`` finds :class:`OtelCtxInstrumentor` through
the ``opentelemetry_instrumentor`` entry point; in code, ``otel_ctx.instrument()`` does
the same. Each model request the OpenAI or Anthropic SDK sends (``create``, ``stream``,
``parse``, their ``beta.*`` twins, raw and streaming responses; sync or async), each
request Google Gen AI's ``models.generate_content`` / ``generate_content_stream`` send,
and each LiteLLM ``completion`` / ``responses`` call is measured as sent, emitted as a
``context_budget.observe`` span with the breakdown and its metrics, and, when the
provider reports usage, fed back into the estimate's calibration. The call itself is
never changed.
"""

from __future__ import annotations

from otel_ctx._models import ENV_MODELS
from otel_ctx.instrumentation._config import (
    ENV_CONTEXT_WINDOW,
    ENV_LANGCHAIN,
    ENV_MAX_CONVERSATIONS,
    ENV_POLICIES,
    ENV_RESERVED_OUTPUT,
    ENV_TASK_TYPE,
    TaskPolicy,
)
from otel_ctx.instrumentation._context import carry, current_task, task
from otel_ctx.instrumentation._instrumentor import CONFIG_KEYS, OtelCtxInstrumentor, instrument, uninstrument
from otel_ctx.instrumentation._sdk import Target
from otel_ctx.instrumentation._state import active_observer

__all__ = [
    "CONFIG_KEYS",
    "ENV_CONTEXT_WINDOW",
    "ENV_LANGCHAIN",
    "ENV_MAX_CONVERSATIONS",
    "ENV_MODELS",
    "ENV_POLICIES",
    "ENV_RESERVED_OUTPUT",
    "ENV_TASK_TYPE",
    "OtelCtxInstrumentor",
    "Target",
    "TaskPolicy",
    "active_observer",
    "carry",
    "current_task",
    "instrument",
    "task",
    "uninstrument",
]
