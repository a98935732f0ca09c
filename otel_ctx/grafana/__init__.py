"""Grafana dashboards as code, generated from :mod:`otel_ctx.names`, and the push to a Grafana.

Needs the ``dashboards`` extra (``pip install 'otel-ctx[dashboards]'``): the generator
is built with grafana-foundation-sdk and the push with grafana-client.
"""

from __future__ import annotations

from otel_ctx.grafana._alerts import AlertSettings
from otel_ctx.grafana._alerts import write as write_alerts
from otel_ctx.grafana._push import GrafanaTarget, PushError, push
from otel_ctx.grafana._render import (
    DASHBOARDS,
    Drift,
    build_dashboards,
    check,
    iter_panels,
    queries,
    render,
    variable_queries,
    write,
)

__all__ = [
    "DASHBOARDS",
    "AlertSettings",
    "Drift",
    "GrafanaTarget",
    "PushError",
    "build_dashboards",
    "check",
    "iter_panels",
    "push",
    "queries",
    "render",
    "variable_queries",
    "write",
    "write_alerts",
]
