"""The fit engine: count, cap and compact a request against its budget, and explain it.

Format-neutral and free of OpenTelemetry: dialect adapters read requests into the request
model through the :mod:`otel_ctx.engine._dialect` contract, and ``otel_ctx.ContextFitter``
hands the engine one :class:`FitRequest` naming the adapter.
"""

from otel_ctx.engine._breakdown import Breakdown
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._calibration import Calibration
from otel_ctx.engine._errors import (
    InvalidMessageError,
    InvalidPolicyError,
    InvalidRequestError,
    InvalidToolSchemaError,
    OtelCtxError,
    TooDeeplyNestedError,
    TranscriptRuleError,
    UnknownProviderError,
    UnknownTaskTypeError,
)
from otel_ctx.engine._fitter import ExactCounter, Fitter
from otel_ctx.engine._model import Block, Part, RequestModel, Turn
from otel_ctx.engine._request import FitOptions, FitRequest, MeasureOptions, Pinned, RequestParts
from otel_ctx.engine._result import ContextOverflow, FitResult
from otel_ctx.engine._sources import DATA_CLASSES, Source, SourceInfo

__all__ = [
    "DATA_CLASSES",
    "Block",
    "Breakdown",
    "BudgetPolicy",
    "Calibration",
    "ContextOverflow",
    "ExactCounter",
    "FitOptions",
    "FitRequest",
    "FitResult",
    "Fitter",
    "InvalidMessageError",
    "InvalidPolicyError",
    "InvalidRequestError",
    "InvalidToolSchemaError",
    "MeasureOptions",
    "OtelCtxError",
    "Part",
    "Pinned",
    "RequestModel",
    "RequestParts",
    "Source",
    "SourceInfo",
    "TooDeeplyNestedError",
    "TranscriptRuleError",
    "Turn",
    "UnknownProviderError",
    "UnknownTaskTypeError",
]
