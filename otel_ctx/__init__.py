"""otel-ctx: make an LLM agent's context budget observable.

The fit engine (:class:`ContextFitter`, :class:`BudgetPolicy`, :class:`Breakdown`)
counts, caps and compacts a request against a per-task-type budget and says where
the window went; the telemetry layer emits that breakdown as OpenTelemetry spans
and metrics.

Names are imported on first use: ``from otel_ctx import ContextFitter`` loads the
engine and the dialect registry only, so an agent that fits without telemetry never
loads OpenTelemetry.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_ctx._fitting import ContextFitter
    from otel_ctx._ledger import RunCeilingReached
    from otel_ctx._pricing import PriceTable, Usage
    from otel_ctx.engine import (
        DATA_CLASSES,
        Breakdown,
        BudgetPolicy,
        ContextOverflow,
        FitResult,
        InvalidMessageError,
        InvalidPolicyError,
        InvalidRequestError,
        InvalidToolSchemaError,
        OtelCtxError,
        Source,
        SourceInfo,
        TooDeeplyNestedError,
        TranscriptRuleError,
        UnknownProviderError,
        UnknownTaskTypeError,
    )
    from otel_ctx.engine._cache import set_cache_budget
    from otel_ctx.instrumentation import carry, instrument, task, uninstrument
    from otel_ctx.telemetry import TelemetryHandle, configure, observe, observed, run

try:
    # The version is written once, in pyproject.toml; the installed metadata carries it.
    __version__ = importlib.metadata.version("otel-ctx")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        (
            "DATA_CLASSES",
            "Breakdown",
            "BudgetPolicy",
            "ContextOverflow",
            "FitResult",
            "InvalidMessageError",
            "InvalidPolicyError",
            "InvalidRequestError",
            "InvalidToolSchemaError",
            "OtelCtxError",
            "Source",
            "SourceInfo",
            "TooDeeplyNestedError",
            "TranscriptRuleError",
            "UnknownProviderError",
            "UnknownTaskTypeError",
        ),
        "otel_ctx.engine",
    ),
    # The engine with each request's dialect picked for it.
    "ContextFitter": "otel_ctx._fitting",
    "set_cache_budget": "otel_ctx.engine._cache",
    "RunCeilingReached": "otel_ctx._ledger",
    "PriceTable": "otel_ctx._pricing",
    "Usage": "otel_ctx._pricing",
    **dict.fromkeys(("TelemetryHandle", "configure", "observe", "observed", "run"), "otel_ctx.telemetry"),
    # The zero-code instrumentor (needs the openai/anthropic/langchain extras).
    **dict.fromkeys(("instrument", "uninstrument", "task", "carry"), "otel_ctx.instrumentation"),
}

__all__ = [
    "DATA_CLASSES",
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
    "TooDeeplyNestedError",
    "TranscriptRuleError",
    "UnknownProviderError",
    "UnknownTaskTypeError",
    "Usage",
    "__version__",
    "carry",
    "configure",
    "instrument",
    "observe",
    "observed",
    "run",
    "set_cache_budget",
    "task",
    "uninstrument",
]


#: The demo's policies, once exported here: they are demo data (:mod:`otel_ctx.demo`), kept under
#: their old names for one release so code written from the 0.3 quickstart still runs, with a warning.
_MOVED = {"SUPPORT_DESK": "otel_ctx.demo", "support_desk_policies": "otel_ctx.demo"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if name in _MOVED:
        warnings.warn(
            f"otel_ctx.{name} is demo data and moved to {_MOVED[name]}: import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    if module is None:
        raise AttributeError(f"module 'otel_ctx' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
