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
from otel_ctx.ledger import RunCeilingReached
from otel_ctx.presets import SUPPORT_DESK, support_desk_policies
from otel_ctx.pricing import PriceTable, Usage
from otel_ctx.result import FitResult
from otel_ctx.sources import DATA_CLASSES, Source, SourceInfo
from otel_ctx.telemetry import TelemetryHandle, configure, observe, observed, run

__version__ = "0.1.0"

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
    "PriceTable",
    "RunCeilingReached",
    "Source",
    "SourceInfo",
    "TelemetryHandle",
    "UnknownTaskTypeError",
    "Usage",
    "__version__",
    "configure",
    "observe",
    "observed",
    "run",
    "support_desk_policies",
]
