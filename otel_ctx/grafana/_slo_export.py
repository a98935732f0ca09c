"""The SLOs of :mod:`otel_ctx.grafana._slo` for the SLO tools a team may already run: a Sloth
spec (``prometheus/v1``), Sloth's Kubernetes ``PrometheusServiceLevel`` and OpenSLO v1.

Each SLO is one objective of one task type, with the events :mod:`otel_ctx.grafana._slo`
counts (its :func:`~otel_ctx.grafana._slo.bad_events` and
:func:`~otel_ctx.grafana._slo.all_events`, per service and task type), narrowed to the task
types the objective holds for. The queries are the ones otel-ctx's own rules divide, so a
tool that generates its rules from them measures the same ratio.

Sloth derives its burn-rate factors from a table of alert windows per SLO period: its
built-in 28-day table asks for 2% of the budget in an hour (13.44×), where otel-ctx pages at
14.4× (its factors, :data:`~otel_ctx.grafana._slo.BURN_WINDOWS`, are the 30-day table's, at
any window). So the Sloth export carries its own ``AlertWindows`` file per window, whose
budget shares give exactly otel-ctx's factors and windows, and the spec files are split by
window: Sloth takes one SLO period per run (``--default-slo-period``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

import otel_ctx.grafana._kubernetes as k8s
import otel_ctx.grafana._naming as naming
import otel_ctx.grafana._promql as q
import otel_ctx.grafana._slo as slo

#: Sloth's ``service`` (its ``sloth_service`` label) and the OpenSLO Service's name.
SERVICE = "otel-ctx"
SLOTH_VERSION = "prometheus/v1"
SLOTH_K8S_API = "sloth.slok.dev/v1"
OPENSLO_API = "openslo/v1"
#: The folder of the Sloth export that holds the alert windows (``--slo-period-windows-path``).
WINDOWS_DIR = "sloth-windows"
#: Sloth's alert name per kind of objective; Sloth tells page from ticket by ``sloth_severity``.
ALERT_NAMES = {
    slo.OVERFLOW: "ContextBudgetOverflowBudgetBurn",
    slo.CEILING: "ContextBudgetCeilingBudgetBurn",
}
#: The ``severity`` label of each Sloth alert: ``page`` or ``ticket``, as otel-ctx's own
#: error-budget alerts label theirs, so one route serves either set of rules.
SEVERITY_LABELS = {slo.PAGE: slo.PAGE, slo.TICKET: slo.TICKET}
#: Sloth's spec keys for the page and ticket alerts, by severity.
_SLOTH_ALERT_KEYS = {slo.PAGE: "page_alert", slo.TICKET: "ticket_alert"}
#: Sloth's plugin chain that checks the queries as MetricsQL instead of PromQL (vmalert evaluates
#: the rules), then generates as by default.
VICTORIAMETRICS_PLUGINS = (
    "sloth.dev/contrib/validate_victoria_metrics/v1",
    "sloth.dev/core/sli_rules/v1",
    "sloth.dev/core/metadata_rules/v1",
    "sloth.dev/core/alert_rules/v1",
)

#: A window no generated expression holds, written where Sloth's ``{{.window}}`` goes: the
#: queries are generated, narrowed and renamed as PromQL, then the window becomes the template.
_WINDOW_MARK = "987654s"
_SLOTH_WINDOW = "{{.window}}"
#: A selector read over the marked window: ``name{matchers}[987654s]``.
_MARKED = re.compile(
    r"(?<![\w:\"])([A-Za-z_:][A-Za-z0-9_:]*)(\{[^{}]*\})?\[" + re.escape(_WINDOW_MARK) + r"\]"
)
#: A name both Sloth and OpenSLO accept for an SLO: a DNS label (lower-case alphanumerics, ``-`` inside).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

_DESCRIPTIONS = {
    slo.OVERFLOW: (
        "Share of the {task} fits whose pinned floor fits the request budget and that the "
        "provider did not refuse for the context window."
    ),
    slo.CEILING: "Share of the finished {task} tickets (agent runs) the per-run token ceiling did not stop.",
}


class ExportError(ValueError):
    """Objectives that cannot be written for a tool (a name it cannot hold); says which."""


def slo_name(objective: slo.Objective) -> str:
    """The SLO's name in every export: :attr:`~otel_ctx.grafana._slo.Objective.name`, lower-cased,
    with anything but ``a-z0-9-`` as ``-`` (OpenSLO's names are DNS labels; Sloth's a subset)."""
    name = re.sub(r"[^a-z0-9-]+", "-", objective.name.lower()).strip("-")
    if not _NAME.fullmatch(name) or len(name) > 63:
        raise ExportError(f"objective {objective.name!r} has no name an SLO tool accepts")
    return name


def _checked(objectives: Sequence[slo.Objective]) -> Sequence[slo.Objective]:
    seen: dict[str, slo.Objective] = {}
    for objective in objectives:
        name = slo_name(objective)
        if name in seen:
            raise ExportError(
                f"objectives {seen[name].name!r} and {objective.name!r} get the same SLO name {name!r}"
            )
        seen[name] = objective
    return objectives


def _narrow(expr: str, matcher: Mapping[str, str]) -> str:
    """Every selector read over the marked window narrowed by ``matcher`` (label -> ``=value``)."""
    if not matcher:
        return expr
    extra = ", ".join(label + body for label, body in matcher.items())

    def narrowed(match: re.Match[str]) -> str:
        name, braces = match.group(1), match.group(2)
        inner = f"{braces[1:-1]}, {extra}" if braces and braces[1:-1].strip() else extra
        return f"{name}{{{inner}}}[{_WINDOW_MARK}]"

    return _MARKED.sub(narrowed, expr)


def _events(
    which: str, objective: slo.Objective, objectives: Iterable[slo.Objective], names_: str, backend: str
) -> str:
    """The objective's bad (``which="bad"``) or all events per second, per service and task type,
    over the marked window, narrowed to its task types and spelt for ``names_``."""
    with q.for_backend(backend):
        build = slo.bad_events if which == "bad" else slo.all_events
        expr = _narrow(build(objective.kind, _WINDOW_MARK), slo.task_matcher(objective, objectives))
    return naming.promql(expr, rule=True) if names_ == naming.UTF8 else expr


def sli_queries(
    objective: slo.Objective, objectives: Iterable[slo.Objective], names_: str, backend: str
) -> tuple[str, str]:
    """Sloth's ``error_query`` and ``total_query``: events per second over ``{{.window}}``."""
    table = tuple(objectives)
    error, total = (_events(which, objective, table, names_, backend) for which in ("bad", "all"))
    return error.replace(_WINDOW_MARK, _SLOTH_WINDOW), total.replace(_WINDOW_MARK, _SLOTH_WINDOW)


#: A rate over the marked window: Prometheus's ``rate(s[w])``, VictoriaMetrics's
#: ``increase_pure(s[w]) / w`` (:func:`otel_ctx.grafana._promql.rate`).
_RATE = re.compile(
    r"(?:rate|increase_pure)\(((?:[^()\[\]]|\{[^{}]*\})*?)\["
    + re.escape(_WINDOW_MARK)
    + r"\]\)(?: / "
    + re.escape(_WINDOW_MARK)
    + r")?"
)


def counter_queries(
    objective: slo.Objective, objectives: Iterable[slo.Objective], names_: str, backend: str
) -> tuple[str, str]:
    """OpenSLO's ``bad`` and ``total`` queries: the same sums over the counters themselves
    (``counter: true``: the SLO tool takes their increase over its own windows)."""
    table = tuple(objectives)
    out = []
    for which in ("bad", "all"):
        expr = _RATE.sub(r"\1", _events(which, objective, table, names_, backend))
        if _WINDOW_MARK in expr:  # pragma: no cover - a rate written some other way
            raise ExportError(f"cannot read the counters of {objective.name!r} from {expr!r}")
        out.append(expr)
    return out[0], out[1]


def _percent(share: float) -> float:
    return round(share * 100, 10)


def _alerting(objective: slo.Objective, names_: str, runbook_url: str) -> dict[str, Any]:
    alert = ALERT_NAMES[objective.kind]
    task = "{{ $labels." + q.TASK_TYPE + " }}"
    job = "{{ $labels." + q.JOB + " }}"
    summary = (
        f"{job}: {task} is spending its {objective.kind} error budget too fast "
        f"(objective {_percent(objective.objective):g}% over {objective.window})"
    )
    return {
        "name": alert,
        "annotations": {
            # Under UTF-8 names a dotted label is read with index (a Go template field cannot be).
            "summary": naming.template(summary) if names_ == naming.UTF8 else summary,
            "runbook_url": f"{runbook_url}#{alert.lower()}",
        },
        **{
            key: {"labels": {"severity": SEVERITY_LABELS[severity]}}
            for severity, key in _SLOTH_ALERT_KEYS.items()
        },
    }


def _description(objective: slo.Objective) -> str:
    task = "every other task type's" if objective.task_type == slo.ANY_TASK_TYPE else objective.task_type
    return _DESCRIPTIONS[objective.kind].format(task=task)


def windows_of(objectives: Iterable[slo.Objective]) -> tuple[str, ...]:
    """The objectives' windows (SLO periods), in the order they first appear."""
    return tuple(dict.fromkeys(o.window for o in objectives))


def sloth_slos(
    objectives: Sequence[slo.Objective],
    names_: str = naming.UNDERSCORE,
    backend: str = q.PROMETHEUS,
    runbook_url: str = "docs/sre-guide.md",
) -> list[dict[str, Any]]:
    """One Sloth SLO (``prometheus/v1`` keys) per objective, in the table's order."""
    out = []
    for objective in _checked(objectives):
        error, total = sli_queries(objective, objectives, names_, backend)
        out.append(
            {
                "name": slo_name(objective),
                "objective": _percent(objective.objective),
                "description": _description(objective),
                "labels": {"slo_kind": objective.kind},
                "sli": {"events": {"error_query": error, "total_query": total}},
                "alerting": _alerting(objective, names_, runbook_url),
            }
        )
    return out


def _plugins(backend: str) -> dict[str, Any]:
    if backend != q.VICTORIAMETRICS:
        return {}
    return {"slo_plugins": {"overridePrevious": True, "chain": [{"id": p} for p in VICTORIAMETRICS_PLUGINS]}}


def sloth_spec(
    objectives: Sequence[slo.Objective],
    window: str,
    names_: str = naming.UNDERSCORE,
    backend: str = q.PROMETHEUS,
    runbook_url: str = "docs/sre-guide.md",
) -> dict[str, Any]:
    """The Sloth spec of the objectives over ``window`` (Sloth takes one SLO period per run)."""
    chosen = [o for o in objectives if o.window == window]
    slos = sloth_slos(objectives, names_, backend, runbook_url)
    return {
        "version": SLOTH_VERSION,
        "service": SERVICE,
        **_plugins(backend),
        "slos": [spec for spec, o in zip(slos, objectives) if o in chosen],
    }


def alert_windows(window: str, burn: Sequence[slo.BurnWindow] = slo.BURN_WINDOWS) -> dict[str, Any]:
    """Sloth's ``AlertWindows`` for an SLO period of ``window`` with otel-ctx's burn windows.

    Sloth's factor is the budget share spent in the long window times the period over that
    window, so the share that gives factor ``f`` is ``f × long ÷ period``.
    """
    period = q.seconds(window)
    pages = [b for b in burn if b.severity == slo.PAGE]
    tickets = [b for b in burn if b.severity == slo.TICKET]
    if len(pages) != 2 or len(tickets) != 2:
        raise ExportError("Sloth's alert windows are two page and two ticket conditions")

    def pair(quick: slo.BurnWindow, slow: slo.BurnWindow) -> dict[str, Any]:
        return {
            name: {
                "errorBudgetPercent": round(b.factor * q.seconds(b.long) / period * 100, 12),
                "shortWindow": b.short,
                "longWindow": b.long,
            }
            for name, b in (("quick", quick), ("slow", slow))
        }

    ordered = [sorted(group, key=lambda b: q.seconds(b.long)) for group in (pages, tickets)]
    return {
        "apiVersion": SLOTH_K8S_API,
        "kind": "AlertWindows",
        "spec": {"sloPeriod": window, "page": pair(*ordered[0]), "ticket": pair(*ordered[1])},
    }


def sloth_filename(window: str) -> str:
    return f"{SERVICE}-slos-{window}.yml"


def sloth_files(
    objectives: Sequence[slo.Objective],
    names_: str = naming.UNDERSCORE,
    backend: str = q.PROMETHEUS,
    runbook_url: str = "docs/sre-guide.md",
) -> dict[str, str]:
    """Relative path -> text: a Sloth spec per window and the alert windows of each."""
    out: dict[str, str] = {}
    for window in windows_of(objectives):
        out[sloth_filename(window)] = _dump(sloth_spec(objectives, window, names_, backend, runbook_url))
    for window in windows_of(objectives):
        out[f"{WINDOWS_DIR}/{window}.yml"] = _dump(alert_windows(window))
    return out


#: The ``prometheus/v1`` keys the CRD spells in camel case.
_SNAKE = frozenset({"error_query", "total_query", "page_alert", "ticket_alert", "slo_plugins"})


def _camel(spec: Any) -> Any:
    """A ``prometheus/v1`` spec in the CRD's spelling (``error_query`` -> ``errorQuery``)."""
    if isinstance(spec, Mapping):
        return {
            (re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k) if k in _SNAKE else k): _camel(v)
            for k, v in spec.items()
        }
    if isinstance(spec, list):
        return [_camel(v) for v in spec]
    return spec


def prometheus_service_levels(
    objectives: Sequence[slo.Objective],
    options: k8s.Options,
    names_: str = naming.UNDERSCORE,
    backend: str = q.PROMETHEUS,
    runbook_url: str = "docs/sre-guide.md",
) -> list[dict[str, Any]]:
    """Sloth's ``PrometheusServiceLevel`` objects, one per window (``otel-ctx-28d``): the Sloth
    controller (or ``sloth generate``) turns each into a PrometheusRule."""
    out = []
    for window in windows_of(objectives):
        spec = sloth_spec(objectives, window, names_, backend, runbook_url)
        body = {key: value for key, value in spec.items() if key != "version"}
        name = k8s.check_name(f"{SERVICE}-{window}", "PrometheusServiceLevel name")
        out.append(
            {
                "apiVersion": SLOTH_K8S_API,
                "kind": "PrometheusServiceLevel",
                "metadata": k8s._metadata(name, options),
                "spec": _camel(body),
            }
        )
    return out


def openslo(
    objectives: Sequence[slo.Objective], names_: str = naming.UNDERSCORE, backend: str = q.PROMETHEUS
) -> list[dict[str, Any]]:
    """OpenSLO v1: the Service, then per objective its SLI (a ratio of bad to total events,
    Prometheus counters) and its SLO (rolling window, occurrences, the objective as a target)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": OPENSLO_API,
            "kind": "Service",
            "metadata": {"name": SERVICE, "displayName": "otel-ctx context budget"},
            "spec": {"description": "LLM agents' context budgets, per service (job) and task type."},
        }
    ]
    for objective in _checked(objectives):
        name = slo_name(objective)
        bad, total = counter_queries(objective, objectives, names_, backend)
        docs.append(
            {
                "apiVersion": OPENSLO_API,
                "kind": "SLI",
                "metadata": {"name": f"{name}-sli"},
                "spec": {
                    "description": _description(objective),
                    "ratioMetric": {
                        "counter": True,
                        "bad": _source(bad),
                        "total": _source(total),
                    },
                },
            }
        )
        docs.append(
            {
                "apiVersion": OPENSLO_API,
                "kind": "SLO",
                "metadata": {"name": name},
                "spec": {
                    "description": _description(objective),
                    "service": SERVICE,
                    "indicatorRef": f"{name}-sli",
                    "timeWindow": [{"duration": objective.window, "isRolling": True}],
                    "budgetingMethod": "Occurrences",
                    "objectives": [{"displayName": _display(objective), "target": objective.objective}],
                },
            }
        )
    return docs


def _display(objective: slo.Objective) -> str:
    """``overflow dispute``, ``ceiling *``: the objective as a dashboard lists it."""
    return f"{objective.kind} {objective.task_type}"


def _source(query: str) -> dict[str, Any]:
    return {"metricSource": {"type": "Prometheus", "spec": {"query": query}}}


def _dump(document: Mapping[str, Any]) -> str:
    return yaml.dump(
        dict(document), Dumper=k8s.BlockDumper, sort_keys=False, allow_unicode=True, width=10_000
    )


def dump_all(documents: Iterable[Mapping[str, Any]]) -> str:
    """Several documents as one YAML stream (``---`` between them)."""
    return k8s.dump(documents)
