"""The fit engine: count, cap and compact a request against its budget, and explain it.

Format-neutral and free of OpenTelemetry: requests are read into the request model
(:mod:`otel_ctx.engine._model`) by the dialect adapters in :mod:`otel_ctx.adapters`,
which implement the engine's :mod:`otel_ctx.engine._dialect` contract. The engine
imports no adapter and importing it loads no telemetry; ``otel_ctx.ContextFitter``
(:mod:`otel_ctx._fitting`) picks each request's dialect and hands the engine one
:class:`FitRequest` naming it. Wrappers that forward a caller's keywords type them with
:class:`FitOptions` (``fit``), :class:`MeasureOptions` (``measure``) or :class:`RequestParts`.
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
