"""``otel_ctx.configure()``: an SDK setup for applications that have none.

Library code in otel-ctx uses only the global OpenTelemetry API. This module is the
one place that builds and installs SDK providers, and only when asked, each *only if the
application has not installed its own* (which it never replaces). The exporters are chosen
in :mod:`otel_ctx.telemetry._exporters`; the SDK's classes read their own variables.

Failure is bounded by construction: spans and metrics leave on background threads (a
BatchSpanProcessor, a PeriodicExportingMetricReader) and every exporter has a short timeout,
so a collector that is down or never answers costs the fit nothing.
``OTEL_SDK_DISABLED=true`` builds nothing.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace

from otel_ctx.telemetry._emitter import default_emitter
from otel_ctx.telemetry._exporters import (
    DEFAULT_EXPORT_INTERVAL_MS,
    DEFAULT_EXPORT_TIMEOUT_S,
    ENV_HISTOGRAM_AGGREGATION,
    EXPONENTIAL_HISTOGRAM,
    ExporterName,
    ExportSettings,
    OtlpProtocol,
    distributions_from_env,
    push_exporter,
    sdk_disabled,
    sdk_or_ours,
    serve_prometheus,
    views,
)
from otel_ctx.telemetry._labels import DEFAULT_MAX_ROUND, DEFAULT_MAX_TASK_TYPES, LabelPolicy

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

logger = logging.getLogger("otel_ctx.telemetry")


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
    #: True when every otel-ctx histogram is exponential and the per-round line distributions
    #: are recorded (``native_histograms``, or the standard aggregation variable with OTLP).
    distributions: bool = False
    _server: Any = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Export what is buffered now (e.g. before a short-lived process exits).

        Returns within ``timeout_millis`` (default: the export timeout) even if a collector
        never answers (the flush then carries on in the background); False if anything did
        not finish. Never raises.
        """
        ms = self._millis(timeout_millis)
        providers = (self.tracer_provider, self.meter_provider)
        return _at_once("force_flush", ms, [partial(p.force_flush, ms) for p in providers if p is not None])

    def shutdown(self, timeout_millis: int | None = None) -> bool:
        """Flush and stop what configure() started (never the application's providers).

        Returns within ``timeout_millis`` (default: the export timeout), abandoning an export
        still waiting then (False). Never raises. Run at interpreter exit if not called before.
        """
        if self._stopped:
            return True
        self._stopped = True
        atexit.unregister(self.shutdown)
        ms = self._millis(timeout_millis)
        calls: list[Callable[[], object]] = []
        if self.tracer_provider is not None:
            calls.append(self.tracer_provider.shutdown)  # takes no timeout: _at_once bounds it
        if self.meter_provider is not None:
            calls.append(partial(self.meter_provider.shutdown, timeout_millis=ms))
        ok = _at_once("shutdown", ms, calls)
        if self._server is not None:
            try:
                self._server.shutdown()
                self._server.server_close()
            except Exception:
                logger.warning("otel-ctx telemetry: stopping the Prometheus endpoint failed", exc_info=True)
                ok = False
            self._server = None
        return ok

    def _millis(self, timeout_millis: int | None) -> int:
        return round(self.export_timeout * 1000) if timeout_millis is None else timeout_millis


def _at_once(what: str, timeout_millis: int, calls: list[Callable[[], object]]) -> bool:
    """Run ``calls`` on threads of their own, waiting at most ``timeout_millis`` in total: the
    SDK's own flush and shutdown run one provider after the other, each waiting out its export
    in flight (the span flush with no timeout at all). True if all finished and none failed."""
    results: list[bool] = []

    def one(call: Callable[[], object]) -> None:
        try:
            out = call()
            results.append(out is None or bool(out))
        except Exception:
            logger.warning("otel-ctx telemetry: %s failed", what, exc_info=True)
            results.append(False)

    threads = [threading.Thread(target=one, args=(c,), name=f"otel-ctx-{what}", daemon=True) for c in calls]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_millis / 1000
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        logger.warning("otel-ctx telemetry: %s did not finish within %d ms", what, timeout_millis)
        return False
    return all(results)


def create_providers(
    settings: ExportSettings | None = None,
    *,
    extra_metric_readers: Iterable[MetricReader] = (),
    traces: bool = True,
    metrics_: bool = True,
    labels: LabelPolicy | None = None,
) -> TelemetryHandle:
    """Build (but do not install) the providers :func:`configure` would install.

    ``labels``: the emitter's label bounds, whose worst case sets the meter provider's
    cardinality limits (see :func:`views`). For applications that keep otel-ctx off the global
    providers: ``Emitter(tracer_provider=h.tracer_provider, meter_provider=h.meter_provider)``.
    """
    settings = settings or ExportSettings()
    handle = TelemetryHandle(
        exporter=settings.exporter or settings.metrics_exporter or settings.traces_exporter or "env",
        export_timeout=settings.effective_timeout,
    )
    if sdk_disabled():
        handle.exporter = "disabled"
        return handle
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = _resource(settings)
    # shutdown_on_exit=False: one bounded shutdown of both at exit (TelemetryHandle.shutdown).
    if traces:
        choice = settings.choice("traces")
        handle.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        if choice != "none":
            # Queue size, batch size and delay are the SDK's, or what OTEL_BSP_* say.
            exporter = push_exporter(settings, "traces", choice)
            handle.tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    if metrics_:
        choice = settings.choice("metrics")
        readers: list[MetricReader] = list(extra_metric_readers)
        if choice == "prometheus":
            reader, handle._server, handle.prometheus_address = serve_prometheus(settings)
            readers.append(reader)
        elif choice != "none":
            exporter = push_exporter(settings, "metrics", choice)
            given = settings.export_interval_millis
            period = sdk_or_ours("OTEL_METRIC_EXPORT_INTERVAL", given, DEFAULT_EXPORT_INTERVAL_MS)
            readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=period))
        handle.distributions = settings.distributions()
        handle.meter_provider = MeterProvider(
            resource=resource,
            metric_readers=readers,
            views=views(labels, native=handle.distributions),
            shutdown_on_exit=False,
        )
    if handle.tracer_provider is not None or handle.meter_provider is not None:
        atexit.register(handle.shutdown)
    return handle


def _resource(settings: ExportSettings) -> Resource:
    """The settings' service name and attributes over what Resource.create reads from
    OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, and a service.instance.id."""
    from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource

    attrs: dict[str, str] = dict(settings.resource_attributes or {})
    if settings.service_name is not None:
        attrs[SERVICE_NAME] = settings.service_name
    resource = Resource.create(attrs)
    if SERVICE_INSTANCE_ID not in resource.attributes:
        # Two processes of one service must not write the same series: through the Collector
        # their counters would overwrite each other. A random id per process, as the resource
        # conventions recommend, unless the deployment names the instance itself. Recent SDKs'
        # Resource.create adds one already; the older ones this package supports do not.
        resource = resource.merge(Resource({SERVICE_INSTANCE_ID: str(uuid.uuid4())}))
    return resource


_lock = threading.Lock()
_handle: TelemetryHandle | None = None


def _app_has_meter_provider() -> bool:
    """True when the application installed a meter provider: the API's placeholder class is not
    public, so this names what an application installs (the SDK's, or the API's no-op one);
    :func:`install` catches any other kind after the fact."""
    from opentelemetry.sdk.metrics import MeterProvider

    return isinstance(metrics.get_meter_provider(), (MeterProvider, metrics.NoOpMeterProvider))


def install(settings: ExportSettings | None = None, labels: LabelPolicy | None = None) -> TelemetryHandle:
    """:func:`configure` with its settings as values: the export settings and the label bounds."""
    global _handle
    with _lock:
        if _handle is not None:
            logger.debug("otel-ctx telemetry: configure() called again; keeping the first setup")
            return _handle
        settings = settings or ExportSettings()
        # Decided (and a contradiction refused) before anything changes or starts.
        distributions = settings.distributions()
        emitter = default_emitter()
        emitter.labels = policy = labels or LabelPolicy()
        emitter.distributions = distributions
        own_tracer = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        own_meter = _app_has_meter_provider()
        handle = create_providers(settings, traces=not own_tracer, metrics_=not own_meter, labels=policy)
        if handle.tracer_provider is not None:
            trace.set_tracer_provider(handle.tracer_provider)
        if handle.meter_provider is not None:
            metrics.set_meter_provider(handle.meter_provider)
            if metrics.get_meter_provider() is not handle.meter_provider:
                # An application's provider of a kind the check above does not know won.
                handle.meter_provider.shutdown(timeout_millis=0)
                handle.meter_provider, own_meter = None, True
        if own_meter and distributions and not distributions_from_env():
            # The application's own meter provider decides the aggregation: without the
            # standard variable its histograms keep explicit buckets, and a distribution per
            # line and round would cost a series per bucket. Stay with the per-round counter.
            logger.warning(
                "otel-ctx telemetry: native_histograms=True ignored: the application's own meter "
                "provider is in use; set %s=%s (or add otel_ctx.telemetry.views(native=True) to "
                "it) to record the distributions",
                ENV_HISTOGRAM_AGGREGATION,
                EXPONENTIAL_HISTOGRAM,
            )
            emitter.distributions = handle.distributions = False
        own = [what for what, is_own in (("tracer", own_tracer), ("meter", own_meter)) if is_own]
        if own:
            logger.info("otel-ctx telemetry: using the application's own %s provider", " and ".join(own))
        _handle = handle
        return handle


def configure(
    exporter: ExporterName | None = None,
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    endpoint: str | None = None,
    protocol: OtlpProtocol | None = None,
    headers: Mapping[str, str] | None = None,
    export_timeout: float | None = None,
    export_interval_millis: int | None = None,
    prometheus_port: int | None = None,
    prometheus_host: str | None = None,
    traces_exporter: ExporterName | None = None,
    metrics_exporter: ExporterName | None = None,
    task_types: Iterable[str] | None = None,
    max_round: int = DEFAULT_MAX_ROUND,
    max_task_types: int = DEFAULT_MAX_TASK_TYPES,
    models: Iterable[str] | None = None,
    resolutions: Iterable[str] = (),
    native_histograms: bool | None = None,
) -> TelemetryHandle:
    """Set up tracing and metrics for otel-ctx where the application has not.

    ``exporter``: ``"otlp"`` (``endpoint``/``protocol``/``headers`` or the standard
    ``OTEL_EXPORTER_OTLP_*`` variables; gRPC to localhost:4317 by default), ``"console"``,
    ``"prometheus"`` (a scrape endpoint on ``prometheus_host:prometheus_port``, default
    127.0.0.1:9464 or ``OTEL_EXPORTER_PROMETHEUS_HOST/PORT``; spans then go where
    ``OTEL_TRACES_EXPORTER`` says, else nowhere) or ``"none"``. ``None`` reads
    ``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER`` (default ``otlp``).
    ``traces_exporter`` / ``metrics_exporter`` choose for one signal and win over
    ``exporter`` (e.g. spans over OTLP, metrics for Prometheus to scrape). Each argument wins
    over its variable; where neither is set, exports give up after ``export_timeout`` 5 s and
    metrics leave every 15 s (``export_interval_millis``). Every other variable the SDK's
    exporters, span processor and metric reader read applies as under ``opentelemetry-instrument``.

    ``task_types`` adds to the fitters' task types in the set that metric labels keep
    (others become ``other``); ``max_round`` is the last round with its own label;
    ``resolutions`` adds the application's own run resolutions (a few) to the built-in ones.
    ``models`` are the model names metric labels keep; the first 8 others keep theirs too
    (with ``models`` given, only variants of known families such as ``gpt-4.1-mini``), later
    ones become ``other``. Name the models the deployment uses: each one multiplies the
    series of every metric that carries the model (docs/fleet.md has the figures).

    ``native_histograms=True`` records every otel-ctx histogram as an exponential one (one
    native-histogram series per label set in Prometheus, Mimir, Thanos, Grafana Cloud) and
    adds each breakdown line per round and task type as a distribution
    (``context_budget.line_tokens``, ``context_budget.round_utilization``) in place of the
    per-round counter. Pushed metrics only: with ``"prometheus"`` it raises ``ValueError``.
    ``None`` follows ``OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=
    base2_exponential_bucket_histogram`` (ignored on the scrape endpoint).

    Idempotent: a second call returns the first call's handle. A provider the
    application already installed is left alone (the handle then holds ``None`` for it).
    """
    return install(
        ExportSettings(
            exporter,
            traces_exporter=traces_exporter,
            metrics_exporter=metrics_exporter,
            service_name=service_name,
            resource_attributes=resource_attributes,
            endpoint=endpoint,
            protocol=protocol,
            headers=headers,
            export_timeout=export_timeout,
            export_interval_millis=export_interval_millis,
            prometheus_port=prometheus_port,
            prometheus_host=prometheus_host,
            native_histograms=native_histograms,
        ),
        LabelPolicy(
            task_types=task_types,
            max_round=max_round,
            max_task_types=max_task_types,
            models=models,
            resolutions=resolutions,
        ),
    )


__all__ = ["ExportSettings", "TelemetryHandle", "configure", "create_providers", "install", "views"]
