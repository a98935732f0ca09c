"""In-memory SDK providers wired to an otel-ctx Emitter, for the telemetry tests.

Global providers can be set once per process, so in-process tests inject explicit
providers into an :class:`~otel_ctx.telemetry.Emitter` instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_ctx.telemetry import Emitter, LabelPolicy, views


class Capture:
    """A tracer and meter provider that keep everything they are given."""

    def __init__(self, labels: LabelPolicy | None = None) -> None:
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(
            metric_readers=[self.reader], views=views(), shutdown_on_exit=False
        )
        self.emitter = Emitter(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, labels=labels
        )

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.span_exporter.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]

    def metrics(self) -> dict[str, Metric]:
        data = self.reader.get_metrics_data()
        out: dict[str, Metric] = {}
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out[m.name] = m
        return out

    def points(self, metric: str) -> list[Any]:
        m = self.metrics().get(metric)
        return [] if m is None else list(m.data.data_points)

    def exported_text(self) -> Iterator[str]:
        """Every exported string: span names, attributes, events, resources, metric names/labels."""
        for s in self.spans():
            yield s.to_json()
        data = self.reader.get_metrics_data()
        if data is not None:
            yield data.to_json()

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def attrs_of(point: Any) -> dict[str, Any]:
    return dict(point.attributes or {})


def dump(obj: Any) -> str:
    return json.dumps(obj, default=str)
