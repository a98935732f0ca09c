"""Dashboards as JSON: deterministic rendering, the committed files, and their queries.

The JSON is what Grafana's file provisioning and the dashboards HTTP API both take
(a dashboard model, no ``id``, a stable ``uid``). Rendering is deterministic (sorted
keys, two-space indent, a trailing newline, panel ids numbered in layout order) so the
committed files can be compared byte for byte with what the code generates.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder

import otel_ctx.grafana._alerts as alerts
import otel_ctx.grafana._cost as cost
import otel_ctx.grafana._naming as naming
import otel_ctx.grafana._overview as overview
import otel_ctx.grafana._promql as promql
import otel_ctx.grafana._task_type as task_type

#: File name → the function that builds it; the order is the order they are listed/pushed in.
DASHBOARDS: dict[str, Callable[[], dash_b.Dashboard]] = {
    f"{overview.UID}.json": overview.build,
    f"{task_type.UID}.json": task_type.build,
    f"{cost.UID}.json": cost.build,
}


def _to_dict(board: dash_b.Dashboard) -> dict[str, Any]:
    model: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder, sort_keys=True))
    for number, panel in enumerate(iter_panels(model), start=1):
        panel["id"] = number
    return model


def build_dashboards(
    settings: alerts.AlertSettings = alerts.DEFAULT_SETTINGS,
    names: str = naming.UNDERSCORE,
    backend: str = promql.PROMETHEUS,
) -> dict[str, dict[str, Any]]:
    """Every shipped dashboard as a JSON model, keyed by its file name (``<uid>.json``).

    ``settings`` are the alert rules' settings: the panels' thresholds and the Jaeger URL
    come from the same place as the rules', so a changed threshold moves both. ``names`` is how
    the Prometheus names the series: underscore names, or UTF-8 ones (:mod:`.naming`).
    ``backend`` is what answers the queries: Prometheus, or VictoriaMetrics (MetricsQL, its
    histograms as ``vmrange`` buckets: :mod:`.promql`).
    """
    alerts.check_target(names, backend)
    with alerts.using(settings), promql.for_backend(backend):
        models = {filename: _to_dict(build()) for filename, build in DASHBOARDS.items()}
    return naming.dashboards(models, names)


def render(model: Mapping[str, Any]) -> str:
    """The canonical text of a dashboard file."""
    return json.dumps(model, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def iter_panels(model: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel in layout order, rows and the panels inside collapsed rows included."""
    for panel in model.get("panels") or ():
        yield panel
        yield from iter_panels(panel)


def queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, PromQL expr)`` for every query of every panel, in layout order.

    Hidden targets are included (Grafana still runs them for expressions); text and row
    panels have none. Template variables are left as written (``$service``,
    ``$__rate_interval``, ...): substitute them before sending to Prometheus.
    """
    found: list[tuple[str, str]] = []
    for panel in iter_panels(dashboard):
        for target in panel.get("targets") or ():
            expr = target.get("expr")
            if isinstance(expr, str) and expr.strip():
                found.append((str(panel.get("title", "")), expr))
    return found


def variable_queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(variable name, query)`` for the query-type template variables (``label_values(...)``)."""
    found: list[tuple[str, str]] = []
    for variable in (dashboard.get("templating") or {}).get("list") or ():
        if variable.get("type") == "query":
            query = variable.get("query")
            text = query.get("query") if isinstance(query, Mapping) else query
            if isinstance(text, str):
                found.append((str(variable.get("name")), text))
    return found


@dataclass(frozen=True)
class Drift:
    """One file that differs from what the code generates (or should not be there)."""

    path: Path
    problem: str


def write(
    out: Path,
    settings: alerts.AlertSettings = alerts.DEFAULT_SETTINGS,
    names: str = naming.UNDERSCORE,
    backend: str = promql.PROMETHEUS,
) -> list[Path]:
    """Write every dashboard under ``out`` (created if needed); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, model in build_dashboards(settings, names, backend).items():
        path = out / filename
        path.write_text(render(model), encoding="utf-8")
        written.append(path)
    return written


def check(
    out: Path,
    settings: alerts.AlertSettings = alerts.DEFAULT_SETTINGS,
    names: str = naming.UNDERSCORE,
    backend: str = promql.PROMETHEUS,
) -> list[Drift]:
    """Differences between the files under ``out`` and what the code generates now."""
    drift = []
    expected = build_dashboards(settings, names, backend)
    for filename, model in expected.items():
        path = out / filename
        if not path.is_file():
            drift.append(Drift(path, "missing"))
        elif path.read_text(encoding="utf-8") != render(model):
            drift.append(Drift(path, "differs from the generated dashboard"))
    for path in sorted(out.glob("otel-ctx-*.json")) if out.is_dir() else ():
        if path.name not in expected:
            drift.append(Drift(path, "is not generated by any dashboard (stale?)"))
    return drift
