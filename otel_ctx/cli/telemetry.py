"""The one place the CLI wires the telemetry layer: which exporter, and how a ticket's run is observed.

Embedded by default: spans and metrics are still produced (the code path users run in
production), but exported nowhere unless ``--otlp``, ``--prometheus-port`` or the
standard ``OTEL_*`` variables ask for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from otel_ctx.cli.errors import CliError
from otel_ctx.demo.agent import RoundFitter, RunOpener
from otel_ctx.demo.workload import Ticket
from otel_ctx.engine.fitter import ContextFitter

DEFAULT_OTLP_ENDPOINT = "http://localhost:4317"
DEFAULT_OTLP_HTTP_ENDPOINT = "http://localhost:4318"
DEFAULT_SERVICE_NAME = "otel-ctx-demo"
AGENT_NAME = "sundry-support"
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
    """What the demo runs tickets through, and how to flush it at the end."""

    opener: RunOpener
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
    """Configure the global providers for this process and return the run opener to use."""
    from otel_ctx.telemetry import configure, run

    def opener(fitter: ContextFitter, ticket: Ticket) -> AbstractContextManager[RoundFitter]:
        return run(
            fitter,
            task_type=ticket.task_type,
            conversation_id=ticket.ticket_id,
            agent_name=AGENT_NAME,
            model=fitter.model,
        )

    if service_name is None and not os.environ.get("OTEL_SERVICE_NAME"):
        service_name = DEFAULT_SERVICE_NAME
    kwargs: dict[str, object] = {"service_name": service_name, "task_types": tuple(task_types)}
    #: Per-signal choices, passed as values: the process environment is never written.
    traces: str | None = None
    metrics: str | None = None
    if otlp is not None:
        # An explicit OTEL_<SIGNAL>_EXPORTER=none still turns that signal off.
        traces = "none" if _env_off("OTEL_TRACES_EXPORTER") else "otlp"
        metrics = "none" if _env_off("OTEL_METRICS_EXPORTER") else "otlp"
        # A bare --otlp passes no endpoint: the exporters then use OTEL_EXPORTER_OTLP_ENDPOINT
        # or their protocol's default port (4317 for gRPC, 4318 for http/protobuf).
        kwargs.update(endpoint=otlp or None)
    if prometheus_port is not None:
        metrics = "prometheus"
        kwargs.update(prometheus_port=prometheus_port, prometheus_host=prometheus_host)
    exporter: str | None
    if otlp is not None:
        exporter = "otlp"
        kwargs.update(traces_exporter=traces, metrics_exporter=metrics)
    elif prometheus_port is not None:
        exporter = "prometheus"  # spans go where OTEL_TRACES_EXPORTER says, else nowhere
    elif env_asks_for_export():
        exporter = None  # the OTEL_* variables decide
    else:
        exporter = "none"
    try:
        handle = configure(exporter, **kwargs)  # type: ignore[arg-type]
    except ValueError as exc:  # an exporter name or protocol the SDK does not know
        raise CliError(f"telemetry: {exc}") from exc
    destination = describe(exporter, otlp, handle, traces=traces, metrics=metrics)
    return TelemetrySession(opener=opener, destination=destination, _handle=handle)


def _env_off(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "none"


def default_otlp_endpoint() -> str:
    """Where a bare ``--otlp`` sends: what the OTLP exporters themselves fall back to."""
    configured = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if configured:
        return configured
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
    return DEFAULT_OTLP_HTTP_ENDPOINT if protocol == "http/protobuf" else DEFAULT_OTLP_ENDPOINT


def describe(
    exporter: str | None,
    otlp: str | None,
    handle: object,
    *,
    traces: str | None = None,
    metrics: str | None = None,
) -> str:
    address = getattr(handle, "prometheus_address", None)
    parts = []
    if exporter == "none":
        return "none (embedded; --otlp or --prometheus-port to export)"
    if otlp is not None:
        signals = [s for s, c in (("spans", traces), ("metrics", metrics)) if c == "otlp"]
        what = " and ".join(signals) or "nothing (OTEL_*_EXPORTER=none)"
        parts.append(f"OTLP to {otlp or default_otlp_endpoint()} ({what})")
    if address is not None:
        parts.append(f"Prometheus metrics on http://{address[0]}:{address[1]}/metrics")
    if exporter is None:
        parts.append("as the OTEL_* variables say")
    return ", ".join(parts) or str(exporter)
