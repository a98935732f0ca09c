"""The one place the CLI wires the telemetry layer: where spans and metrics go.

Embedded by default: spans and metrics are still produced (the code path users run in
production), but exported nowhere unless ``--otlp``, ``--prometheus-port`` or the
standard ``OTEL_*`` variables ask for it. The choice is passed to the telemetry layer as
a value; the process environment is never written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from otel_ctx.cli._errors import CliError

if TYPE_CHECKING:
    from otel_ctx.telemetry import ExportSettings, TelemetryHandle
    from otel_ctx.telemetry._exporters import ExporterName

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
    """Where telemetry goes, and how to stop it at the end."""

    #: Human-readable: where telemetry goes ("none", "OTLP to ...", "Prometheus on ...").
    destination: str
    _handle: TelemetryHandle | None = None

    def shutdown(self) -> None:
        """Flush and stop exporters (bounded by the exporters' timeouts); idempotent."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.shutdown()


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


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

    if service_name is None and not _env("OTEL_SERVICE_NAME"):
        service_name = DEFAULT_SERVICE_NAME
    if otlp is not None:
        # Per-signal choices; an explicit OTEL_<SIGNAL>_EXPORTER=none still turns that signal off.
        # A bare --otlp passes no endpoint: the exporters then use OTEL_EXPORTER_OTLP_ENDPOINT
        # or their protocol's default port (4317 for gRPC, 4318 for http/protobuf).
        traces: ExporterName = "none" if _env("OTEL_TRACES_EXPORTER").lower() == "none" else "otlp"
        metrics: ExporterName = "none" if _env("OTEL_METRICS_EXPORTER").lower() == "none" else "otlp"
        settings = ExportSettings(
            "otlp",
            traces_exporter=traces,
            metrics_exporter="prometheus" if prometheus_port is not None else metrics,
            endpoint=otlp or None,
            service_name=service_name,
            prometheus_port=prometheus_port,
            prometheus_host=prometheus_host,
        )
    elif prometheus_port is not None:
        # Spans go where OTEL_TRACES_EXPORTER says, else nowhere.
        settings = ExportSettings(
            "prometheus",
            service_name=service_name,
            prometheus_port=prometheus_port,
            prometheus_host=prometheus_host,
        )
    else:
        # The OTEL_* variables decide where they ask for export; otherwise nothing leaves.
        asked = any(_env(v) for v in _OTEL_EXPORT_VARS)
        settings = ExportSettings(None if asked else "none", service_name=service_name)
    try:
        handle = install(settings, LabelPolicy(task_types=tuple(task_types)))
    except ValueError as exc:  # an exporter name or protocol the SDK does not know
        raise CliError(f"telemetry: {exc}") from exc
    return TelemetrySession(destination=describe(settings, handle), _handle=handle)


def default_otlp_endpoint() -> str:
    """Where a bare ``--otlp`` sends: what the OTLP exporters themselves fall back to."""
    if _env("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    http = _env("OTEL_EXPORTER_OTLP_PROTOCOL") == "http/protobuf"
    return DEFAULT_OTLP_HTTP_ENDPOINT if http else DEFAULT_OTLP_ENDPOINT


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
