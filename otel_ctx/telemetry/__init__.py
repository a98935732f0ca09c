"""The OpenTelemetry layer: a FitResult as span attributes and histogram metrics.

The fit engine never imports this package; this package never changes a fit. Every
name it emits comes from :mod:`otel_ctx.names`.
"""

from __future__ import annotations

from otel_ctx.telemetry._content import capture_content
from otel_ctx.telemetry._emitter import Emitter, component_values, span_attributes
from otel_ctx.telemetry._exporters import ExportSettings, views
from otel_ctx.telemetry._labels import LabelPolicy
from otel_ctx.telemetry._observe import observe, observed
from otel_ctx.telemetry._run import Run, current_run, run, start_counters
from otel_ctx.telemetry._setup import TelemetryHandle, configure, create_providers, install
from otel_ctx.telemetry._trim import TrimReport, compare

__all__ = [
    "Emitter",
    "ExportSettings",
    "LabelPolicy",
    "Run",
    "TelemetryHandle",
    "TrimReport",
    "capture_content",
    "compare",
    "component_values",
    "configure",
    "create_providers",
    "current_run",
    "install",
    "observe",
    "observed",
    "run",
    "span_attributes",
    "start_counters",
    "views",
]
