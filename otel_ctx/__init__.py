"""otel-ctx: make an LLM agent's context budget observable.

The fit engine (:class:`ContextFitter`, :class:`BudgetPolicy`, :class:`Breakdown`)
counts, caps and compacts a request against a per-task-type budget and says where
the window went; the telemetry layer emits that breakdown as OpenTelemetry spans
and metrics.
"""

from otel_ctx.breakdown import Breakdown
from otel_ctx.budget import BudgetPolicy
from otel_ctx.errors import (
    ContextOverflow,
    InvalidMessageError,
    InvalidPolicyError,
    InvalidRequestError,
    InvalidToolSchemaError,
    OtelCtxError,
    UnknownTaskTypeError,
)
from otel_ctx.fit import ContextFitter
from otel_ctx.presets import SUPPORT_DESK, support_desk_policies
from otel_ctx.result import FitResult
from otel_ctx.sources import DATA_CLASSES, Source, SourceInfo
from otel_ctx.telemetry import TelemetryHandle, configure, observe, observed, run

__version__ = "0.1.0"

#: Loaded on first use: the instrumentor needs opentelemetry-instrumentation and wrapt (the
#: ``openai``/``anthropic``/``langchain`` extras), which a plain fit must not import.
_INSTRUMENTATION = ("instrument", "uninstrument", "task")


def __getattr__(name: str) -> object:
    if name in _INSTRUMENTATION:
        from otel_ctx import instrumentation

        return getattr(instrumentation, name)
    raise AttributeError(f"module 'otel_ctx' has no attribute {name!r}")


__all__ = [
    "DATA_CLASSES",
    "SUPPORT_DESK",
    "Breakdown",
    "BudgetPolicy",
    "ContextFitter",
    "ContextOverflow",
    "FitResult",
    "InvalidMessageError",
    "InvalidPolicyError",
    "InvalidRequestError",
    "InvalidToolSchemaError",
    "OtelCtxError",
    "Source",
    "SourceInfo",
    "TelemetryHandle",
    "UnknownTaskTypeError",
    "__version__",
    "configure",
    "instrument",
    "observe",
    "observed",
    "run",
    "support_desk_policies",
    "task",
    "uninstrument",
]
