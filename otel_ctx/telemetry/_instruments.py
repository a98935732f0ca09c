"""OpenTelemetry instruments made from the registry's metric definitions.

Every instrument otel-ctx creates comes through :func:`create`, so its name, unit,
description, kind and buckets are the ones :mod:`otel_ctx.names` declares, never
spelled again where the instrument is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics

from otel_ctx.names import Metric

Callback = Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]


def create(meter: metrics.Meter, metric: Metric, *, callbacks: Iterable[Callback] | None = None) -> Any:
    """The instrument ``metric`` declares on ``meter``.

    Histograms carry the registry's buckets as an advisory, so an application's own SDK
    (without otel-ctx's Views) uses them too. A counter given ``callbacks`` is observed
    (the SDK reads running totals at export) rather than added to.
    """
    if metric.kind == "histogram":
        return meter.create_histogram(
            metric.name,
            unit=metric.unit,
            description=metric.description,
            # A distribution has no buckets of its own: it is only recorded as an exponential one.
            explicit_bucket_boundaries_advisory=metric.buckets or None,
        )
    if callbacks is not None:
        return meter.create_observable_counter(
            metric.name, callbacks=list(callbacks), unit=metric.unit, description=metric.description
        )
    return meter.create_counter(metric.name, unit=metric.unit, description=metric.description)
