"""Where spans and metrics go: the export settings, and the SDK exporters they choose.

The SDK's classes read their own variables: the OTLP exporters ``OTEL_EXPORTER_OTLP_*``
(endpoint, headers, compression, certificates, the per-signal forms), the span processor
``OTEL_BSP_*``, the metric reader ``OTEL_METRIC_EXPORT_*``. This module picks the classes
(which the SDK leaves to ``opentelemetry-instrument``), hands them what was given as a value,
and otel-ctx's shorter defaults where no variable speaks: a 5 s export timeout (the SDK's
is 10 s), so a collector that is down or never answers is given up on soon, and a 15 s
metric period (the SDK's is 60 s), so a 1m rate window has points. It installs nothing
and starts nothing but a Prometheus endpoint when asked for one.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from otel_ctx import names
from otel_ctx.telemetry._labels import LabelPolicy

if TYPE_CHECKING:
    # The SDK is imported where it is used: `import otel_ctx` stays on the API alone.
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.metrics.view import View

logger = logging.getLogger("otel_ctx.telemetry")

ExporterName = Literal["otlp", "console", "prometheus", "none"]
OtlpProtocol = Literal["grpc", "http/protobuf"]
Signal = Literal["traces", "metrics"]

#: Seconds an OTLP export may take before it is abandoned (unless OTEL_EXPORTER_OTLP_TIMEOUT says).
DEFAULT_EXPORT_TIMEOUT_S = 5.0
#: Metric export period (unless OTEL_METRIC_EXPORT_INTERVAL says); short enough for 1m rate windows.
DEFAULT_EXPORT_INTERVAL_MS = 15_000
DEFAULT_PROMETHEUS_PORT = 9464
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"
#: The standard variable that makes an OTLP metric exporter's histograms exponential, and the
#: value that does. otel-ctx reads it as the switch for its per-round distributions too.
ENV_HISTOGRAM_AGGREGATION = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
EXPONENTIAL_HISTOGRAM = "base2_exponential_bucket_histogram"
#: Buckets per exponential histogram point (the SDK's default). The scale drops until a point's
#: range fits: 160 buckets over 1..100,000 tokens still leave each bucket 9% wide at most.
EXPONENTIAL_MAX_SIZE = 160
#: The finest scale recorded: Prometheus's native histograms go no finer (buckets 0.27% wide),
#: so a finer one is only scaled down on the way. The Collector's remote-write translator
#: (0.161) misplaces counts that follow empty buckets when it scales down: measured in
#: tests/e2e/test_native.py, where each quantile must sit in the right bucket.
EXPONENTIAL_MAX_SCALE = 8
#: Overrides :data:`EXPONENTIAL_MAX_SCALE` (an integer, -10..20). A store that adds up buckets
#: only where their bounds are identical (VictoriaMetrics: docs/sre-guide.md) needs every series
#: at one scale: 3 keeps 160 buckets over 20 doublings, so no otel-ctx histogram scales down.
ENV_EXPONENTIAL_MAX_SCALE = "OTEL_CTX_EXPONENTIAL_MAX_SCALE"

_OTLP = "opentelemetry.exporter.otlp.proto"
#: The OTLP exporter class per signal and protocol (the SDK leaves the choice to its configurator).
_OTLP_EXPORTERS = {
    ("traces", "grpc"): (f"{_OTLP}.grpc.trace_exporter", "OTLPSpanExporter"),
    ("metrics", "grpc"): (f"{_OTLP}.grpc.metric_exporter", "OTLPMetricExporter"),
    ("traces", "http/protobuf"): (f"{_OTLP}.http.trace_exporter", "OTLPSpanExporter"),
    ("metrics", "http/protobuf"): (f"{_OTLP}.http.metric_exporter", "OTLPMetricExporter"),
}


@dataclass(frozen=True)
class ExportSettings:
    """Where and how to export, as one value: the export arguments of
    :func:`otel_ctx.configure`, which says what each means. ``None`` fields defer to the
    ``OTEL_*`` variables."""

    exporter: ExporterName | None = None
    traces_exporter: ExporterName | None = None
    metrics_exporter: ExporterName | None = None
    service_name: str | None = None
    resource_attributes: Mapping[str, str] | None = None
    endpoint: str | None = None
    protocol: OtlpProtocol | None = None
    headers: Mapping[str, str] | None = None
    export_timeout: float | None = None
    export_interval_millis: int | None = None
    prometheus_port: int | None = None
    prometheus_host: str | None = None
    #: ``None``: on when :data:`ENV_HISTOGRAM_AGGREGATION` asks for exponential histograms and
    #: metrics are pushed (the Prometheus scrape endpoint's text format has no native histograms).
    native_histograms: bool | None = None

    def distributions(self) -> bool:
        """Whether native histograms are on; ``ValueError`` when asked for on the scrape endpoint."""
        scraped = self.choice("metrics") == "prometheus"
        if self.native_histograms and scraped:
            raise ValueError(
                "native_histograms=True needs pushed metrics (otlp or console): the Prometheus "
                "scrape endpoint cannot expose native histograms"
            )
        if self.native_histograms is not None:
            return self.native_histograms
        return not scraped and distributions_from_env()

    def choice(self, signal: Signal) -> str:
        """The exporter for ``signal``; ``ValueError`` naming where an unknown name came from."""
        variable = f"OTEL_{signal.upper()}_EXPORTER"
        given = (self.traces_exporter if signal == "traces" else self.metrics_exporter) or self.exporter
        if given is None:
            choice = (env(variable) or "otlp").lower()
        elif given == "prometheus" and signal == "traces":
            # Prometheus takes no spans: traces go where OTEL_TRACES_EXPORTER says, else nowhere.
            choice = (env(variable) or "none").lower()
        else:
            choice = given
        allowed = [e for e in get_args(ExporterName) if signal == "metrics" or e != "prometheus"]
        if choice not in allowed:
            source = "exporter=" if given else variable
            raise ValueError(f"{signal} exporter {choice!r} (from {source}) is not one of {allowed}")
        return choice

    @property
    def effective_timeout(self) -> float:
        """Seconds one export may take: given, else OTEL_EXPORTER_OTLP_TIMEOUT as the exporters
        read it, else the default."""
        if self.export_timeout is not None:
            return self.export_timeout
        try:
            value = float(env("OTEL_EXPORTER_OTLP_TIMEOUT") or DEFAULT_EXPORT_TIMEOUT_S)
        except ValueError:
            return DEFAULT_EXPORT_TIMEOUT_S
        return value if value > 0 else DEFAULT_EXPORT_TIMEOUT_S

    def otlp_protocol(self, signal: Signal) -> OtlpProtocol:
        """The OTLP protocol for ``signal``: given, else the standard variables, else gRPC."""
        value = (
            self.protocol
            or env(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
            or env("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "grpc"
        )
        if value not in get_args(OtlpProtocol):
            raise ValueError(f"OTLP protocol {value!r} is not one of {list(get_args(OtlpProtocol))}")
        return "grpc" if value == "grpc" else "http/protobuf"


def env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def sdk_or_ours(variable: str, given: float | None, default: float) -> float | None:
    """``given``; else ``None`` where ``variable`` is set, for the SDK class that reads it to
    read it; else otel-ctx's ``default``."""
    return given if given is not None else None if env(variable) else default


def sdk_disabled() -> bool:
    """True when ``OTEL_SDK_DISABLED`` is ``true`` (the standard switch for every signal)."""
    return (env("OTEL_SDK_DISABLED") or "").lower() == "true"


def distributions_from_env() -> bool:
    """True when the standard variable asks OTLP exporters for exponential histograms."""
    return (env(ENV_HISTOGRAM_AGGREGATION) or "").lower() == EXPONENTIAL_HISTOGRAM


def exponential_max_scale() -> int:
    """The finest scale an exponential histogram starts at: :data:`ENV_EXPONENTIAL_MAX_SCALE`, or
    :data:`EXPONENTIAL_MAX_SCALE` (also when the variable is not an integer in -10..20, with a
    warning)."""
    raw = env(ENV_EXPONENTIAL_MAX_SCALE)
    if raw is None:
        return EXPONENTIAL_MAX_SCALE
    with contextlib.suppress(ValueError):
        if -10 <= (scale := int(raw)) <= 20:
            return scale
    logger.warning(
        "otel-ctx telemetry: %s=%r is not an integer in -10..20; using %d",
        ENV_EXPONENTIAL_MAX_SCALE,
        raw,
        EXPONENTIAL_MAX_SCALE,
    )
    return EXPONENTIAL_MAX_SCALE


def views(labels: LabelPolicy | None = None, *, native: bool = False) -> list[View]:
    """One View per otel-ctx instrument: its buckets and an explicit cardinality limit.

    Each limit is the instrument's worst case under ``labels`` (the product of its labels'
    bounds), so otel-ctx's own labels never reach the SDK's ``otel.metric.overflow`` series.
    Add these to your own ``MeterProvider(views=...)`` if your SDK ignores the instruments'
    bucket advisory, with the :class:`LabelPolicy` you configured. ``native=True`` makes every
    otel-ctx histogram exponential (one native-histogram series per label set instead of one
    per bucket): only where metrics are pushed over OTLP. Its finest scale is
    :func:`exponential_max_scale`.
    """
    from opentelemetry.sdk.metrics.view import (
        ExplicitBucketHistogramAggregation,
        ExponentialBucketHistogramAggregation,
        View,
    )

    policy = labels or LabelPolicy()
    exponential = ExponentialBucketHistogramAggregation(
        max_size=EXPONENTIAL_MAX_SIZE, max_scale=exponential_max_scale()
    )
    return [
        View(
            instrument_name=m.name,
            meter_name=names.INSTRUMENTATION_SCOPE,
            aggregation=(exponential if native else ExplicitBucketHistogramAggregation(boundaries=m.buckets))
            if m.kind == "histogram"
            else None,
            aggregation_cardinality_limit=policy.worst_case(m),
        )
        for m in names.ALL_METRICS
    ]


def push_exporter(settings: ExportSettings, signal: Signal, choice: str) -> Any:
    """The SDK's console exporter for ``signal``, or its OTLP one over the chosen protocol."""
    if choice == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter() if signal == "traces" else ConsoleMetricExporter()
    protocol = settings.otlp_protocol(signal)
    module, name = _OTLP_EXPORTERS[(signal, protocol)]
    endpoint = settings.endpoint
    path = f"/v1/{signal}"
    if endpoint is not None and protocol == "http/protobuf" and not endpoint.rstrip("/").endswith(path):
        # The HTTP exporters add the signal's path to OTEL_EXPORTER_OTLP_ENDPOINT, never to a value.
        endpoint = endpoint.rstrip("/") + path
    return getattr(importlib.import_module(module), name)(
        endpoint=endpoint,
        headers=dict(settings.headers) if settings.headers else None,
        timeout=sdk_or_ours("OTEL_EXPORTER_OTLP_TIMEOUT", settings.export_timeout, DEFAULT_EXPORT_TIMEOUT_S),
    )


def serve_prometheus(settings: ExportSettings) -> tuple[MetricReader, Any, tuple[str, int] | None]:
    """A pull reader on its own registry, the HTTP server serving it and the address it serves on.

    Its own registry keeps the endpoint to otel-ctx's metrics (plus ``target_info``) and
    lets a test or a second handle in one process serve another port without clashing. A port
    that cannot be bound leaves no server and no address: the metrics stay readable in-process,
    and the agent runs on.
    """
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    port = settings.prometheus_port
    if port is None:
        port = int(env("OTEL_EXPORTER_PROMETHEUS_PORT") or DEFAULT_PROMETHEUS_PORT)
    host = settings.prometheus_host or env("OTEL_EXPORTER_PROMETHEUS_HOST") or DEFAULT_PROMETHEUS_HOST
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError:
        logger.warning(
            "otel-ctx telemetry: cannot serve Prometheus metrics on %s:%s", host, port, exc_info=True
        )
        return reader, None, None
    return reader, server, (host, int(server.server_address[1]))
