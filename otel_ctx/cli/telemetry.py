"""The one place the CLI wires the telemetry layer: where spans and metrics go.

Embedded by default: spans and metrics are still produced (the code path users run in
production), but exported nowhere unless ``--otlp``, ``--prometheus-port`` or the
standard ``OTEL_*`` variables ask for it. The choice is passed to the telemetry layer as
a value; the process environment is never written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from otel_ctx.cli.errors import CliError

if TYPE_CHECKING:
    from otel_ctx.telemetry import ExportSettings, TelemetryHandle
    from otel_ctx.telemetry.exporters import ExporterName

DEFAULT_OTLP_ENDPOINT = "http://localhost:4317"
DEFAULT_OTLP_HTTP_ENDPOINT = "http://localhost:4318"
DEFAULT_SERVICE_NAME = "otel-ctx-demo"
#: Any of these set means the user configured exporting through the environment.
_OTEL_EXPORT_VARS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@dataclass
class TelemetrySession:
    """Where telemetry goes, and how to flush it at the end."""

    #: Human-readable: where telemetry goes ("none", "OTLP to ...", "Prometheus on ...").
    destination: str
    _handle: object | None = None

    def force_flush(self) -> None:
        flush = getattr(self._handle, "force_flush", None)
        if flush is not None:
            flush()

    def shutdown(self) -> None:
        """Flush and stop exporters (bounded by the exporters' timeouts); idempotent."""
        shutdown = getattr(self._handle, "shutdown", None)
        self._handle = None
        if shutdown is not None:
            shutdown()


def env_asks_for_export() -> bool:
    return any(os.environ.get(v, "").strip() for v in _OTEL_EXPORT_VARS)


def start(
    *,
    otlp: str | None,
    prometheus_port: int | None,
    prometheus_host: str | None,
    service_name: str | None,
    task_types: Iterable[str],
) -> TelemetrySession:
    """Configure the global providers for this process."""
    from otel_ctx.telemetry import ExportSettings, LabelPolicy, install

    if service_name is None and not os.environ.get("OTEL_SERVICE_NAME"):
        service_name = DEFAULT_SERVICE_NAME
    # Per-signal choices, passed as values: the process environment is never written.
    traces: ExporterName | None = None
    metrics: ExporterName | None = None
    if otlp is not None:
        # An explicit OTEL_<SIGNAL>_EXPORTER=none still turns that signal off.
        traces = "none" if _env_off("OTEL_TRACES_EXPORTER") else "otlp"
        metrics = "none" if _env_off("OTEL_METRICS_EXPORTER") else "otlp"
    if prometheus_port is not None:
        metrics = "prometheus"
    if otlp is not None:
        # A bare --otlp passes no endpoint: the exporters then use OTEL_EXPORTER_OTLP_ENDPOINT
        # or their protocol's default port (4317 for gRPC, 4318 for http/protobuf).
        settings = ExportSettings(
            "otlp",
            traces_exporter=traces,
            metrics_exporter=metrics,
            endpoint=otlp or None,
            prometheus_port=prometheus_port,
            prometheus_host=prometheus_host,
        )
    elif prometheus_port is not None:
        # Spans go where OTEL_TRACES_EXPORTER says, else nowhere.
        settings = ExportSettings(
            "prometheus", prometheus_port=prometheus_port, prometheus_host=prometheus_host
        )
    elif env_asks_for_export():
        settings = ExportSettings()  # the OTEL_* variables decide
    else:
        settings = ExportSettings("none")
    settings = replace(settings, service_name=service_name)
    try:
        handle = install(settings, LabelPolicy(task_types=tuple(task_types)))
    except ValueError as exc:  # an exporter name or protocol the SDK does not know
        raise CliError(f"telemetry: {exc}") from exc
    return TelemetrySession(destination=describe(settings, handle), _handle=handle)


def _env_off(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "none"


def default_otlp_endpoint() -> str:
    """Where a bare ``--otlp`` sends: what the OTLP exporters themselves fall back to."""
    configured = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if configured:
        return configured
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
    return DEFAULT_OTLP_HTTP_ENDPOINT if protocol == "http/protobuf" else DEFAULT_OTLP_ENDPOINT


def describe(settings: ExportSettings, handle: TelemetryHandle) -> str:
    """Where telemetry goes, in a few words, for the demo's first line."""
    exporter, address = settings.exporter, handle.prometheus_address
    if exporter == "none":
        return "none (embedded; --otlp or --prometheus-port to export)"
    parts = []
    if exporter == "otlp":
        chosen = (("spans", settings.traces_exporter), ("metrics", settings.metrics_exporter))
        what = " and ".join(s for s, c in chosen if c == "otlp") or "nothing (OTEL_*_EXPORTER=none)"
        parts.append(f"OTLP to {settings.endpoint or default_otlp_endpoint()} ({what})")
    if address is not None:
        parts.append(f"Prometheus metrics on http://{address[0]}:{address[1]}/metrics")
    if exporter is None:
        parts.append("as the OTEL_* variables say")
    return ", ".join(parts) or str(exporter)
