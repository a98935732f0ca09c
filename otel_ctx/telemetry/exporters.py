"""Where spans and metrics go: the export settings, and the SDK exporters they choose.

Kept apart from the providers' lifecycle (:mod:`otel_ctx.telemetry.setup`): this module
only turns an :class:`ExportSettings` value and the standard ``OTEL_*`` variables into
exporters and readers; it installs nothing and starts nothing but a Prometheus endpoint
when asked for one. Every timeout is short, so a collector that is down, refuses or
never answers costs the fit nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from otel_ctx import names
from otel_ctx.telemetry.labels import LabelPolicy

if TYPE_CHECKING:
    # The SDK is imported where it is used: `import otel_ctx` stays on the API alone.
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.metrics.view import View
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger("otel_ctx.telemetry")

ExporterName = Literal["otlp", "console", "prometheus", "none"]
EXPORTERS: tuple[str, ...] = ("otlp", "console", "prometheus", "none")
OtlpProtocol = Literal["grpc", "http/protobuf"]
Signal = Literal["traces", "metrics"]

#: Seconds an OTLP export may take before it is abandoned (unless OTEL_EXPORTER_OTLP_TIMEOUT says).
DEFAULT_EXPORT_TIMEOUT_S = 5.0
#: Metric export period (unless OTEL_METRIC_EXPORT_INTERVAL says); short enough for 1m rate windows.
DEFAULT_EXPORT_INTERVAL_MS = 15_000
DEFAULT_SPAN_QUEUE = 2048
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
#: tests/test_e2e_native.py, where each quantile must sit in the right bucket.
EXPONENTIAL_MAX_SCALE = 8
#: Overrides :data:`EXPONENTIAL_MAX_SCALE` (an integer, -10..20). A store that adds up buckets
#: only where their bounds are identical (VictoriaMetrics: docs/sre-guide.md) needs every series
#: at one scale: 3 keeps 160 buckets over 20 doublings, so no otel-ctx histogram scales down.
ENV_EXPONENTIAL_MAX_SCALE = "OTEL_CTX_EXPONENTIAL_MAX_SCALE"


@dataclass(frozen=True)
class ExportSettings:
    """Where and how to export, as one value. ``None`` fields defer to the ``OTEL_*`` variables.

    ``exporter`` chooses for both signals: ``"otlp"``, ``"console"``, ``"prometheus"``
    (metrics scraped; spans then go where ``OTEL_TRACES_EXPORTER`` says, else nowhere) or
    ``"none"``; ``None`` reads ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` (default
    ``otlp``). ``traces_exporter``/``metrics_exporter`` choose for one signal and win over
    ``exporter`` (spans over OTLP while Prometheus scrapes the metrics, say).
    """

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
    #: Record every histogram as an exponential (native) one and add the per-round line
    #: distributions (``names.DISTRIBUTIONS``) in place of the per-round counter. ``None``:
    #: on when ``OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION`` is
    #: ``base2_exponential_bucket_histogram`` and metrics are pushed (never on the Prometheus
    #: scrape endpoint, whose text format has no native histograms).
    native_histograms: bool | None = None

    def distributions(self) -> bool:
        """Whether native histograms are on; ``ValueError`` when asked for on the scrape endpoint."""
        choice = self.choice("metrics")
        if self.native_histograms is not None:
            if self.native_histograms and choice == "prometheus":
                raise ValueError(
                    "native_histograms=True needs pushed metrics (otlp or console): the Prometheus "
                    "scrape endpoint cannot expose native histograms"
                )
            return self.native_histograms
        return choice != "prometheus" and distributions_from_env()

    def choice(self, signal: Signal) -> str:
        """The exporter for ``signal``; ``ValueError`` naming where an unknown name came from."""
        env_name = "OTEL_TRACES_EXPORTER" if signal == "traces" else "OTEL_METRICS_EXPORTER"
        given = self.traces_exporter if signal == "traces" else self.metrics_exporter
        exporter = given or self.exporter
        if exporter is None:
            choice = (env(env_name) or "otlp").lower()
        elif exporter == "prometheus" and signal == "traces":
            # Prometheus takes no spans: traces go where OTEL_TRACES_EXPORTER says, else nowhere.
            choice = (env(env_name) or "none").lower()
        else:
            choice = exporter
        if choice not in EXPORTERS or (signal == "traces" and choice == "prometheus"):
            allowed = [e for e in EXPORTERS if signal == "metrics" or e != "prometheus"]
            source = "exporter=" if exporter else env_name
            raise ValueError(f"{signal} exporter {choice!r} (from {source}) is not one of {allowed}")
        return choice

    @property
    def timeout(self) -> float | None:
        """The timeout to hand the exporters: given, else theirs from OTEL_EXPORTER_OTLP_TIMEOUT,
        else the default."""
        if self.export_timeout is not None:
            return self.export_timeout
        return None if env("OTEL_EXPORTER_OTLP_TIMEOUT") else DEFAULT_EXPORT_TIMEOUT_S

    @property
    def effective_timeout(self) -> float:
        """The export timeout the exporters will use, in seconds (as the Python exporters read
        OTEL_EXPORTER_OTLP_TIMEOUT)."""
        if self.timeout is not None:
            return self.timeout
        try:
            value = float(env("OTEL_EXPORTER_OTLP_TIMEOUT") or DEFAULT_EXPORT_TIMEOUT_S)
        except ValueError:
            return DEFAULT_EXPORT_TIMEOUT_S
        return value if value > 0 else DEFAULT_EXPORT_TIMEOUT_S

    def otlp_protocol(self, signal: Signal) -> OtlpProtocol:
        value = (
            self.protocol
            or env(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
            or env("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "grpc"
        )
        if value not in ("grpc", "http/protobuf"):
            raise ValueError(f"OTLP protocol {value!r} is not one of ['grpc', 'http/protobuf']")
        return "grpc" if value == "grpc" else "http/protobuf"


def env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def sdk_disabled() -> bool:
    """True when ``OTEL_SDK_DISABLED`` is ``true`` (the standard switch for every signal)."""
    return (env("OTEL_SDK_DISABLED") or "").lower() == "true"


def exponential_max_scale() -> int:
    """The finest scale an exponential histogram starts at: :data:`ENV_EXPONENTIAL_MAX_SCALE`, or
    :data:`EXPONENTIAL_MAX_SCALE` (also when the variable is not an integer in -10..20, with a
    warning)."""
    raw = env(ENV_EXPONENTIAL_MAX_SCALE)
    if raw is None:
        return EXPONENTIAL_MAX_SCALE
    try:
        scale = int(raw)
    except ValueError:
        scale = None
    if scale is None or not -10 <= scale <= 20:
        logger.warning(
            "otel-ctx telemetry: %s=%r is not an integer in -10..20; using %d",
            ENV_EXPONENTIAL_MAX_SCALE,
            raw,
            EXPONENTIAL_MAX_SCALE,
        )
        return EXPONENTIAL_MAX_SCALE
    return scale


def distributions_from_env() -> bool:
    """True when the standard variable asks OTLP exporters for exponential histograms."""
    return (env(ENV_HISTOGRAM_AGGREGATION) or "").lower() == EXPONENTIAL_HISTOGRAM


def views(labels: LabelPolicy | None = None, *, native: bool = False) -> list[View]:
    """One View per otel-ctx instrument: its buckets and an explicit cardinality limit.

    Each limit is the instrument's worst case under ``labels`` (the product of its labels'
    bounds; default: the default bounds), so the labels otel-ctx bounds itself never reach
    the SDK's ``otel.metric.overflow`` series, and an instrument cannot grow past it either.
    Add these to your own ``MeterProvider(views=...)`` if your SDK ignores the bucket
    advisory the instruments carry; pass the :class:`LabelPolicy` you configured. ``native``
    (``views(native=True)``) makes every otel-ctx histogram exponential, one native-histogram series
    per label set in Prometheus instead of one per bucket; use it only where metrics are pushed
    over OTLP. Its finest scale is :func:`exponential_max_scale`.
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


def _http_endpoint(endpoint: str | None, path: str) -> str | None:
    if endpoint is None:
        return None
    return endpoint if endpoint.rstrip("/").endswith(path) else endpoint.rstrip("/") + path


def _otlp(settings: ExportSettings, signal: Signal) -> Any:
    """The OTLP exporter for ``signal`` over the chosen protocol."""
    timeout = settings.timeout
    if settings.otlp_protocol(signal) == "grpc":
        if signal == "traces":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter as Grpc,
            )
        headers = dict(settings.headers) if settings.headers else None
        return Grpc(endpoint=settings.endpoint, headers=headers, timeout=timeout)
    if signal == "traces":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter as Http,
        )
    path = "/v1/traces" if signal == "traces" else "/v1/metrics"
    return Http(endpoint=_http_endpoint(settings.endpoint, path), headers=settings.headers, timeout=timeout)


def span_exporter(settings: ExportSettings) -> SpanExporter | None:
    """The span exporter the settings choose, or ``None`` for ``none``."""
    choice = settings.choice("traces")
    if choice == "none":
        return None
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    exporter: SpanExporter = _otlp(settings, "traces")
    return exporter


def span_processor_options(settings: ExportSettings) -> dict[str, Any]:
    """A bounded queue and a short export timeout, unless the OTEL_BSP_* variables say."""
    return {
        "max_queue_size": None if env("OTEL_BSP_MAX_QUEUE_SIZE") else DEFAULT_SPAN_QUEUE,
        "export_timeout_millis": None
        if env("OTEL_BSP_EXPORT_TIMEOUT")
        else (settings.timeout or DEFAULT_EXPORT_TIMEOUT_S) * 1000,
    }


def push_metric_reader(settings: ExportSettings, choice: str) -> MetricReader | None:
    """A periodic reader for a push exporter (``otlp``, ``console``), or ``None`` for ``none``."""
    if choice == "none":
        return None
    exporter: Any
    if choice == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        exporter = ConsoleMetricExporter()
    else:
        exporter = _otlp(settings, "metrics")
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    interval_ms = settings.export_interval_millis
    if interval_ms is None and env("OTEL_METRIC_EXPORT_INTERVAL") is None:
        interval_ms = DEFAULT_EXPORT_INTERVAL_MS
    timeout_ms = (
        None if env("OTEL_METRIC_EXPORT_TIMEOUT") else (settings.timeout or DEFAULT_EXPORT_TIMEOUT_S) * 1000
    )
    return PeriodicExportingMetricReader(
        exporter, export_interval_millis=interval_ms, export_timeout_millis=timeout_ms
    )


@dataclass
class PrometheusEndpoint:
    """A pull reader and the HTTP server that serves it (``server`` is ``None`` when the port
    could not be bound: the metrics stay readable in-process)."""

    reader: MetricReader
    server: Any = None
    thread: Any = None
    address: tuple[str, int] | None = None


def serve_prometheus(settings: ExportSettings) -> PrometheusEndpoint:
    """A pull reader on its own registry, served by prometheus_client's HTTP server.

    Its own registry keeps the endpoint to otel-ctx's metrics (plus ``target_info``) and
    lets a test or a second handle in one process serve another port without clashing.
    """
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=True)
    endpoint = PrometheusEndpoint(PrometheusMetricReader(registry=registry))
    port = settings.prometheus_port
    if port is None:
        port = int(env("OTEL_EXPORTER_PROMETHEUS_PORT") or DEFAULT_PROMETHEUS_PORT)
    host = settings.prometheus_host or env("OTEL_EXPORTER_PROMETHEUS_HOST") or DEFAULT_PROMETHEUS_HOST
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError:
        # A port clash must not take the agent down; the metrics stay readable in-process.
        logger.warning(
            "otel-ctx telemetry: cannot serve Prometheus metrics on %s:%s", host, port, exc_info=True
        )
    else:
        endpoint.server, endpoint.thread = server, thread
        endpoint.address = (host, int(server.server_address[1]))
    return endpoint
