"""The OpenTelemetry layer: a FitResult as span attributes and histogram metrics.

The fit engine never imports this package; this package never changes a fit. Every
name it emits comes from :mod:`otel_ctx.names`.
"""

from __future__ import annotations

from otel_ctx.telemetry._run import Run, current_run, run, start_counters
from otel_ctx.telemetry.content import capture_content
from otel_ctx.telemetry.emitter import Emitter, component_values, span_attributes
from otel_ctx.telemetry.exporters import ExportSettings, views
from otel_ctx.telemetry.labels import LabelPolicy
from otel_ctx.telemetry.observe import observe, observed
from otel_ctx.telemetry.setup import TelemetryHandle, configure, create_providers, install

__all__ = [
    "Emitter",
    "ExportSettings",
    "LabelPolicy",
    "Run",
    "TelemetryHandle",
    "capture_content",
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
