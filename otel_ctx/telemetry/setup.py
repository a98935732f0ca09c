"""``otel_ctx.configure()``: an SDK setup for applications that have none.

Library code in otel-ctx uses only the global OpenTelemetry API. This module is the
one place that touches the SDK, and only when asked: it builds a TracerProvider and a
MeterProvider from the standard ``OTEL_*`` variables and installs each one *only if
the application has not installed its own* (its own SDK code, or
``opentelemetry-instrument``), which it never replaces.

Failure is bounded by construction: spans leave through a BatchSpanProcessor (bounded
queue, background thread), metrics through a PeriodicExportingMetricReader (background
thread), and every exporter has a short timeout, so a collector that is down, refuses
or never answers costs the fit nothing. Shutdown, explicit or at interpreter exit, stops
both providers at once and waits at most the export timeout: the SDK's own exit hooks
would stop them one after the other, each waiting for its in-flight export first.

``OTEL_SDK_DISABLED=true`` builds nothing: no providers, no threads, no endpoint.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import metrics, trace

from otel_ctx import names
from otel_ctx.telemetry.emitter import default_emitter
from otel_ctx.telemetry.labels import DEFAULT_MAX_ROUND, DEFAULT_MAX_TASK_TYPES, LabelPolicy

if TYPE_CHECKING:
    # The SDK is imported where it is used: `import otel_ctx` stays on the API alone.
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.metrics.view import View
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger("otel_ctx.telemetry")

ExporterName = Literal["otlp", "console", "prometheus", "none"]
EXPORTERS: tuple[str, ...] = ("otlp", "console", "prometheus", "none")

#: Seconds an OTLP export may take before it is abandoned (unless OTEL_EXPORTER_OTLP_TIMEOUT says).
DEFAULT_EXPORT_TIMEOUT_S = 5.0
#: Metric export period (unless OTEL_METRIC_EXPORT_INTERVAL says); short enough for 1m rate windows.
DEFAULT_EXPORT_INTERVAL_MS = 15_000
DEFAULT_SPAN_QUEUE = 2048
DEFAULT_PROMETHEUS_PORT = 9464
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"


def views() -> list[View]:
    """One View per otel-ctx histogram with the registry's buckets.

    Add these to your own ``MeterProvider(views=...)`` if your SDK ignores the bucket
    advisory the instruments carry.
    """
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    return [
        View(
            instrument_name=m.name,
            meter_name=names.INSTRUMENTATION_SCOPE,
            aggregation=ExplicitBucketHistogramAggregation(boundaries=m.buckets),
        )
        for m in names.METRICS
        if m.kind == "histogram"
    ]


@dataclass
class TelemetryHandle:
    """What :func:`configure` set up. Providers are ``None`` where the application's own are in use."""

    exporter: str
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    #: ``(host, port)`` of the Prometheus scrape endpoint, when ``exporter="prometheus"``.
    prometheus_address: tuple[str, int] | None = None
    #: Seconds one export may take; :meth:`shutdown` and the exit hook wait no longer.
    export_timeout: float = DEFAULT_EXPORT_TIMEOUT_S
    _server: Any = field(default=None, repr=False)
    _server_thread: Any = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Export what is buffered now (e.g. before a short-lived process exits).

        Returns within ``timeout_millis`` (default: the export timeout) even if a collector
        never answers (the flush then carries on in the background); False if anything did
        not finish. Never raises.
        """
        ms = self._millis(timeout_millis)
        return self._each_provider("force_flush", ms, lambda p: p.force_flush(ms))

    def shutdown(self, timeout_millis: int | None = None) -> bool:
        """Flush and stop what configure() started (never the application's providers).

        Returns within ``timeout_millis`` (default: the export timeout); an export still
        waiting on a collector then is abandoned and False returned. Never raises. Also
        run at interpreter exit when the application has not called it.
        """
        if self._stopped:
            return True
        self._stopped = True
        atexit.unregister(self._at_exit)
        ms = self._millis(timeout_millis)
        ok = self._each_provider("shutdown", ms, _shutdown_within(ms))
        if self._server is not None:
            try:
                self._server.shutdown()
                self._server.server_close()
            except Exception:
                logger.warning("otel-ctx telemetry: stopping the Prometheus endpoint failed", exc_info=True)
                ok = False
            self._server = None
        return ok

    def _each_provider(self, what: str, timeout_millis: int, call: Callable[[Any], object]) -> bool:
        """Run ``call`` on both providers at once, waiting at most ``timeout_millis`` in total:
        the span and the metric exporters each have their own timeout, and waiting for them
        one after the other would double the delay a dead collector causes."""
        results: dict[int, bool] = {}

        def one(i: int, provider: Any) -> None:
            try:
                out = call(provider)
                results[i] = out is None or bool(out)
            except Exception:
                logger.warning("otel-ctx telemetry: %s failed", what, exc_info=True)
                results[i] = False

        providers = [p for p in (self.tracer_provider, self.meter_provider) if p is not None]
        threads = [
            threading.Thread(target=one, args=(i, p), name=f"otel-ctx-{what}", daemon=True)
            for i, p in enumerate(providers)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout_millis / 1000
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        finished = all(not t.is_alive() for t in threads)
        if not finished:
            logger.warning("otel-ctx telemetry: %s did not finish within %d ms", what, timeout_millis)
        return finished and all(results.values())

    def _millis(self, timeout_millis: int | None) -> int:
        return round(self.export_timeout * 1000) if timeout_millis is None else timeout_millis

    def _at_exit(self) -> None:
        # The providers are built with shutdown_on_exit=False: their own hooks would run one
        # after the other, each first waiting out an export in flight (10-24 s for a
        # collector that never answers). One bounded, parallel shutdown instead.
        self.shutdown()


def _shutdown_within(ms: int) -> Callable[[Any], object]:
    def call(provider: Any) -> object:
        # MeterProvider takes a timeout; TracerProvider.shutdown() takes none (the caller's
        # join bounds it).
        from opentelemetry.sdk.metrics import MeterProvider

        return (
            provider.shutdown(timeout_millis=ms)
            if isinstance(provider, MeterProvider)
            else provider.shutdown()
        )

    return call


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _exporter_choice(exporter: str | None, signal: Literal["traces", "metrics"]) -> str:
    env_name = "OTEL_TRACES_EXPORTER" if signal == "traces" else "OTEL_METRICS_EXPORTER"
    if exporter is None:
        choice = (_env(env_name) or "otlp").lower()
    elif exporter == "prometheus" and signal == "traces":
        # Prometheus takes no spans: traces go where OTEL_TRACES_EXPORTER says, else nowhere.
        choice = (_env(env_name) or "none").lower()
    else:
        choice = exporter
    if choice not in EXPORTERS or (signal == "traces" and choice == "prometheus"):
        allowed = [e for e in EXPORTERS if signal == "metrics" or e != "prometheus"]
        source = "exporter=" if exporter else env_name
        raise ValueError(f"{signal} exporter {choice!r} (from {source}) is not one of {allowed}")
    return choice


def _protocol(protocol: str | None, signal: Literal["traces", "metrics"]) -> str:
    value = (
        protocol
        or _env(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or _env("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    )
    if value not in ("grpc", "http/protobuf"):
        raise ValueError(f"OTLP protocol {value!r} is not one of ['grpc', 'http/protobuf']")
    return value


def _timeout_s(export_timeout: float | None) -> float | None:
    if export_timeout is not None:
        return export_timeout
    # The exporters read OTEL_EXPORTER_OTLP_TIMEOUT themselves when it is set.
    return None if _env("OTEL_EXPORTER_OTLP_TIMEOUT") else DEFAULT_EXPORT_TIMEOUT_S


def _effective_timeout_s(timeout: float | None) -> float:
    """The export timeout the exporters will use: given, else OTEL_EXPORTER_OTLP_TIMEOUT
    (seconds, as the Python exporters read it), else the default."""
    if timeout is not None:
        return timeout
    try:
        value = float(_env("OTEL_EXPORTER_OTLP_TIMEOUT") or DEFAULT_EXPORT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_EXPORT_TIMEOUT_S
    return value if value > 0 else DEFAULT_EXPORT_TIMEOUT_S


def sdk_disabled() -> bool:
    """True when ``OTEL_SDK_DISABLED`` is ``true`` (the standard switch for every signal)."""
    return (_env("OTEL_SDK_DISABLED") or "").lower() == "true"


def _http_endpoint(endpoint: str | None, path: str) -> str | None:
    if endpoint is None:
        return None
    return endpoint if endpoint.rstrip("/").endswith(path) else endpoint.rstrip("/") + path


def _span_exporter(
    choice: str, endpoint: str | None, protocol: str | None, headers: Mapping[str, str] | None,
    timeout: float | None,
) -> SpanExporter | None:  # fmt: skip
    if choice == "none":
        return None
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if _protocol(protocol, "traces") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(
            endpoint=endpoint, headers=dict(headers) if headers else None, timeout=timeout
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HTTPSpanExporter

    return HTTPSpanExporter(endpoint=_http_endpoint(endpoint, "/v1/traces"), headers=headers, timeout=timeout)


def _metric_reader(
    choice: str,
    *,
    endpoint: str | None,
    protocol: str | None,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    interval_ms: int | None,
) -> MetricReader | None:
    if choice == "none":
        return None
    exporter: Any
    if choice == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        exporter = ConsoleMetricExporter()
    elif _protocol(protocol, "metrics") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(
            endpoint=endpoint, headers=dict(headers) if headers else None, timeout=timeout
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HTTPMetricExporter,
        )

        exporter = HTTPMetricExporter(
            endpoint=_http_endpoint(endpoint, "/v1/metrics"), headers=headers, timeout=timeout
        )
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if interval_ms is None and _env("OTEL_METRIC_EXPORT_INTERVAL") is None:
        interval_ms = DEFAULT_EXPORT_INTERVAL_MS
    timeout_ms = None if _env("OTEL_METRIC_EXPORT_TIMEOUT") else (timeout or DEFAULT_EXPORT_TIMEOUT_S) * 1000
    return PeriodicExportingMetricReader(
        exporter, export_interval_millis=interval_ms, export_timeout_millis=timeout_ms
    )


def create_providers(
    exporter: ExporterName | None = None,
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    endpoint: str | None = None,
    protocol: Literal["grpc", "http/protobuf"] | None = None,
    headers: Mapping[str, str] | None = None,
    export_timeout: float | None = None,
    export_interval_millis: int | None = None,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
    extra_metric_readers: Iterable[MetricReader] = (),
    traces: bool = True,
    metrics_: bool = True,
    traces_exporter: ExporterName | None = None,
    metrics_exporter: ExporterName | None = None,
) -> TelemetryHandle:
    """Build (but do not install) the providers :func:`configure` would install.

    For applications that keep otel-ctx off the global providers:
    ``Emitter(tracer_provider=h.tracer_provider, meter_provider=h.meter_provider)``.
    Under ``OTEL_SDK_DISABLED=true`` the handle holds no provider and nothing is started.
    """
    timeout = _timeout_s(export_timeout)
    if sdk_disabled():
        return TelemetryHandle(exporter="disabled", export_timeout=_effective_timeout_s(timeout))
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attrs: dict[str, str] = dict(resource_attributes or {})
    if service_name is not None:
        attrs[SERVICE_NAME] = service_name
    # Resource.create merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME under what is given here.
    resource = Resource.create(attrs)
    handle = TelemetryHandle(
        exporter=exporter or metrics_exporter or traces_exporter or "env",
        export_timeout=_effective_timeout_s(timeout),
    )

    if traces:
        span_exporter = _span_exporter(
            _exporter_choice(traces_exporter or exporter, "traces"), endpoint, protocol, headers, timeout
        )
        tp = TracerProvider(resource=resource, shutdown_on_exit=False)
        if span_exporter is not None:
            tp.add_span_processor(
                BatchSpanProcessor(
                    span_exporter,
                    max_queue_size=None if _env("OTEL_BSP_MAX_QUEUE_SIZE") else DEFAULT_SPAN_QUEUE,
                    export_timeout_millis=None
                    if _env("OTEL_BSP_EXPORT_TIMEOUT")
                    else (timeout or 5.0) * 1000,
                )
            )
        handle.tracer_provider = tp

    if metrics_:
        choice = _exporter_choice(metrics_exporter or exporter, "metrics")
        readers: list[MetricReader] = list(extra_metric_readers)
        if choice == "prometheus":
            readers.append(_prometheus(handle, prometheus_port, prometheus_host))
        else:
            reader = _metric_reader(
                choice,
                endpoint=endpoint,
                protocol=protocol,
                headers=headers,
                timeout=timeout,
                interval_ms=export_interval_millis,
            )
            if reader is not None:
                readers.append(reader)
        handle.meter_provider = MeterProvider(
            resource=resource, metric_readers=readers, views=views(), shutdown_on_exit=False
        )
    if handle.tracer_provider is not None or handle.meter_provider is not None:
        atexit.register(handle._at_exit)
    return handle


def _prometheus(handle: TelemetryHandle, port: int | None, host: str | None) -> MetricReader:
    """A pull reader on its own registry, served by prometheus_client's HTTP server.

    Its own registry keeps the endpoint to otel-ctx's metrics (plus ``target_info``) and
    lets a test or a second handle in one process serve another port without clashing.
    """
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    port = port if port is not None else int(_env("OTEL_EXPORTER_PROMETHEUS_PORT") or DEFAULT_PROMETHEUS_PORT)
    host = host or _env("OTEL_EXPORTER_PROMETHEUS_HOST") or DEFAULT_PROMETHEUS_HOST
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError:
        # A port clash must not take the agent down; the metrics stay readable in-process.
        logger.warning(
            "otel-ctx telemetry: cannot serve Prometheus metrics on %s:%s", host, port, exc_info=True
        )
    else:
        handle._server, handle._server_thread = server, thread
        handle.prometheus_address = (host, int(server.server_address[1]))
    return reader


_lock = threading.Lock()
_handle: TelemetryHandle | None = None


def _app_has_tracer_provider() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _app_has_meter_provider() -> bool:
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return not isinstance(metrics.get_meter_provider(), _ProxyMeterProvider)


def configure(
    exporter: ExporterName | None = None,
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    endpoint: str | None = None,
    protocol: Literal["grpc", "http/protobuf"] | None = None,
    headers: Mapping[str, str] | None = None,
    export_timeout: float | None = None,
    export_interval_millis: int | None = None,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
    task_types: Iterable[str] | None = None,
    max_round: int = DEFAULT_MAX_ROUND,
    max_task_types: int = DEFAULT_MAX_TASK_TYPES,
    models: Iterable[str] | None = None,
    resolutions: Iterable[str] = (),
    traces_exporter: ExporterName | None = None,
    metrics_exporter: ExporterName | None = None,
) -> TelemetryHandle:
    """Set up tracing and metrics for otel-ctx where the application has not.

    ``exporter``: ``"otlp"`` (``endpoint``/``protocol``/``headers`` or the standard
    ``OTEL_EXPORTER_OTLP_*`` variables; gRPC to localhost:4317 by default), ``"console"``,
    ``"prometheus"`` (a scrape endpoint on ``prometheus_host:prometheus_port``, default
    127.0.0.1:9464 or ``OTEL_EXPORTER_PROMETHEUS_HOST/PORT``; spans then go where
    ``OTEL_TRACES_EXPORTER`` says, else nowhere) or ``"none"``. ``None`` reads
    ``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER`` (default ``otlp``).

    ``traces_exporter`` / ``metrics_exporter`` choose for one signal and win over
    ``exporter`` (e.g. spans over OTLP, metrics for Prometheus to scrape).

    ``task_types`` adds to the fitters' task types in the set that metric labels keep
    (others become ``other``); ``max_round`` is the last round with its own label;
    ``resolutions`` adds the application's own run resolutions (a few) to the built-in ones.
    ``models`` are the model names metric labels keep besides the model table's; the first
    20 others keep theirs too (with ``models`` given, only variants of known families such
    as ``gpt-4.1-mini``), later ones become ``other``.

    Idempotent: a second call returns the first call's handle. A provider the
    application already installed is left alone (the handle then holds ``None`` for it).
    """
    global _handle
    with _lock:
        if _handle is not None:
            logger.debug("otel-ctx telemetry: configure() called again; keeping the first setup")
            return _handle
        default_emitter().labels = LabelPolicy(
            task_types=task_types,
            max_round=max_round,
            max_task_types=max_task_types,
            models=models,
            resolutions=resolutions,
        )
        want_traces = not _app_has_tracer_provider()
        want_metrics = not _app_has_meter_provider()
        handle = create_providers(
            exporter,
            service_name=service_name,
            resource_attributes=resource_attributes,
            endpoint=endpoint,
            protocol=protocol,
            headers=headers,
            export_timeout=export_timeout,
            export_interval_millis=export_interval_millis,
            prometheus_port=prometheus_port,
            prometheus_host=prometheus_host,
            traces=want_traces,
            metrics_=want_metrics,
            traces_exporter=traces_exporter,
            metrics_exporter=metrics_exporter,
        )
        if handle.tracer_provider is not None:
            trace.set_tracer_provider(handle.tracer_provider)
        if handle.meter_provider is not None:
            metrics.set_meter_provider(handle.meter_provider)
        if not (want_traces and want_metrics):
            logger.info(
                "otel-ctx telemetry: using the application's own %s",
                " and ".join(
                    s
                    for s, own in (("tracer provider", not want_traces), ("meter provider", not want_metrics))
                    if own
                ),
            )
        _handle = handle
        return handle
