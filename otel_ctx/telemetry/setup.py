"""``otel_ctx.configure()``: an SDK setup for applications that have none.

Library code in otel-ctx uses only the global OpenTelemetry API. This module is the
one place that builds and installs SDK providers, and only when asked: a TracerProvider
and a MeterProvider exporting where an :class:`ExportSettings` value (or the standard
``OTEL_*`` variables) say, each installed *only if the application has not installed its
own* (its own SDK code, or ``opentelemetry-instrument``), which it never replaces.
Choosing the exporters is :mod:`otel_ctx.telemetry.exporters`' job.

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
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace

from otel_ctx.telemetry.emitter import default_emitter
from otel_ctx.telemetry.exporters import (
    DEFAULT_EXPORT_TIMEOUT_S,
    ENV_HISTOGRAM_AGGREGATION,
    EXPONENTIAL_HISTOGRAM,
    ExporterName,
    ExportSettings,
    OtlpProtocol,
    distributions_from_env,
    push_metric_reader,
    sdk_disabled,
    serve_prometheus,
    span_exporter,
    span_processor_options,
    views,
)
from otel_ctx.telemetry.labels import DEFAULT_MAX_ROUND, DEFAULT_MAX_TASK_TYPES, LabelPolicy

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
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


def create_providers(
    settings: ExportSettings | None = None,
    *,
    extra_metric_readers: Iterable[MetricReader] = (),
    traces: bool = True,
    metrics_: bool = True,
    labels: LabelPolicy | None = None,
) -> TelemetryHandle:
    """Build (but do not install) the providers :func:`configure` would install.

    ``labels``: the label bounds the emitter will use; the meter provider's cardinality
    limits are their worst case (see :func:`views`).

    For applications that keep otel-ctx off the global providers:
    ``Emitter(tracer_provider=h.tracer_provider, meter_provider=h.meter_provider)``.
    Under ``OTEL_SDK_DISABLED=true`` the handle holds no provider and nothing is started.
    """
    settings = settings or ExportSettings()
    if sdk_disabled():
        return TelemetryHandle(exporter="disabled", export_timeout=settings.effective_timeout)
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attrs: dict[str, str] = dict(settings.resource_attributes or {})
    if settings.service_name is not None:
        attrs[SERVICE_NAME] = settings.service_name
    # Resource.create merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME under what is given here.
    resource = Resource.create(attrs)
    if SERVICE_INSTANCE_ID not in resource.attributes:
        # Two processes of one service must not write the same series: through the Collector
        # their counters would overwrite each other. A random id per process, as the resource
        # conventions recommend, unless the deployment names the instance itself.
        resource = resource.merge(Resource({SERVICE_INSTANCE_ID: str(uuid.uuid4())}))
    handle = TelemetryHandle(
        exporter=settings.exporter or settings.metrics_exporter or settings.traces_exporter or "env",
        export_timeout=settings.effective_timeout,
    )

    if traces:
        spans = span_exporter(settings)
        tp = TracerProvider(resource=resource, shutdown_on_exit=False)
        if spans is not None:
            tp.add_span_processor(BatchSpanProcessor(spans, **span_processor_options(settings)))
        handle.tracer_provider = tp

    if metrics_:
        choice = settings.choice("metrics")
        readers: list[MetricReader] = list(extra_metric_readers)
        if choice == "prometheus":
            endpoint = serve_prometheus(settings)
            readers.append(endpoint.reader)
            handle._server, handle._server_thread = endpoint.server, endpoint.thread
            handle.prometheus_address = endpoint.address
        else:
            reader = push_metric_reader(settings, choice)
            if reader is not None:
                readers.append(reader)
        handle.distributions = settings.distributions()
        handle.meter_provider = MeterProvider(
            resource=resource,
            metric_readers=readers,
            views=views(labels, native=handle.distributions),
            shutdown_on_exit=False,
        )
    if handle.tracer_provider is not None or handle.meter_provider is not None:
        atexit.register(handle._at_exit)
    return handle


_lock = threading.Lock()
_handle: TelemetryHandle | None = None


def _app_has_tracer_provider() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _app_has_meter_provider() -> bool:
    """True when the global meter provider is a real one the application installed.

    The API hands out a placeholder until one is set; its class is not public, so the
    check names what an application installs (the SDK's provider, or the API's no-op
    one). Anything else is caught after the fact: :func:`install` checks that its
    provider became the global one.
    """
    from opentelemetry.sdk.metrics import MeterProvider

    return isinstance(metrics.get_meter_provider(), (MeterProvider, metrics.NoOpMeterProvider))


def install(settings: ExportSettings | None = None, labels: LabelPolicy | None = None) -> TelemetryHandle:
    """:func:`configure` with its settings as values: the export settings and the label bounds.

    Idempotent: a second call returns the first call's handle. A provider the
    application already installed is left alone (the handle then holds ``None`` for it).
    """
    global _handle
    with _lock:
        if _handle is not None:
            logger.debug("otel-ctx telemetry: configure() called again; keeping the first setup")
            return _handle
        settings = settings or ExportSettings()
        # Decided (and a contradiction refused) before anything changes or starts.
        distributions = settings.distributions()
        policy = labels or LabelPolicy()
        emitter = default_emitter()
        emitter.labels = policy
        emitter.distributions = distributions
        want_traces = not _app_has_tracer_provider()
        want_metrics = not _app_has_meter_provider()
        handle = create_providers(settings, traces=want_traces, metrics_=want_metrics, labels=policy)
        if handle.tracer_provider is not None:
            trace.set_tracer_provider(handle.tracer_provider)
        if handle.meter_provider is not None:
            metrics.set_meter_provider(handle.meter_provider)
            if metrics.get_meter_provider() is not handle.meter_provider:
                # An application's provider of a kind the check above does not know won.
                handle.meter_provider.shutdown(timeout_millis=0)
                handle.meter_provider = None
                want_metrics = False
        if not want_metrics and distributions and not distributions_from_env():
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
    ``exporter`` (e.g. spans over OTLP, metrics for Prometheus to scrape).

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
    The same as :func:`install` with an :class:`ExportSettings` and a :class:`LabelPolicy`.
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
