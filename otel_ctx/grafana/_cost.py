"""The ticket view: what a ticket costs, how close it comes to its ceiling, and how it ends.

Per-request budgets are revisited with cost figures next to resolution figures: this
dashboard puts the cost per ticket (p50/p95) beside the resolution rate, per task type,
with the tokens a ticket spends against its run ceiling and the share of runs the
ceiling stopped.
"""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import table, timeseries

import otel_ctx.grafana._alerts as alerts
import otel_ctx.grafana._conventions as conventions
import otel_ctx.grafana._panels as p
import otel_ctx.grafana._promql as q
from otel_ctx import names

UID = conventions.COST_UID
TITLE = "otel-ctx · Cost and resolution"

RESOLUTION = names.prometheus_label(names.RESOLUTION)
RESOLVED = names.RESOLUTIONS[0]
USD = "currencyUSD"
RESOLUTION_COLORS = {
    "resolved": "green",
    "escalated": "orange",
    "abandoned": "purple",
    "unresolved": "blue",
    "error": "red",
}


def _runs_rate(group: list[str], window: str = q.RATE, **matchers: str) -> str:
    return q.histogram_count(names.RUN_TOKENS, group, window, **matchers)


def ceiling_share(window: str = q.RATE) -> str:
    """Per task type: ceiling stops ÷ finished runs (0 when none stopped; the counter starts at 0)."""
    stops = q.rate_sum(names.CEILING_STOPS.prometheus, [q.TASK_TYPE], window)
    return f"{stops}\n/\n({_runs_rate([q.TASK_TYPE], window)} > 0)"


def resolution_rate(window: str = q.RATE) -> str:
    """Per task type: runs that ended ``resolved`` ÷ finished runs (0 when none resolved)."""
    resolved = _runs_rate([q.TASK_TYPE], window, **{RESOLUTION: RESOLVED})
    return q.share_or_zero(resolved, _runs_rate([q.TASK_TYPE], window))


def _timeseries(
    title: str, description: str, unit: str, *queries: prom_b.Dataquery, stack: int | None = None
) -> timeseries.Panel:
    return p.series(title, description, *queries, size=(12, 9), unit=unit, stack=stack, tooltip=True)


def _quantiles(metric: names.Metric) -> tuple[prom_b.Dataquery, prom_b.Dataquery]:
    """The p50 and p95 of a per-run histogram, per task type."""
    return (
        p.query(q.histogram_quantile(0.5, metric, [q.TASK_TYPE]), f"p50 {p.legend(q.TASK_TYPE)}"),
        p.query(q.histogram_quantile(0.95, metric, [q.TASK_TYPE]), f"p95 {p.legend(q.TASK_TYPE)}"),
    )


#: The columns of the table beside the cost, in the order of its queries: name and field options.
_COLUMNS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Runs", {"decimals": 0}),
    ("Resolution rate", {"unit": "percentunit"}),
    ("Mean cost per ticket", {"unit": USD}),
    ("p95 cost per ticket", {"unit": USD}),
    ("Mean tokens per ticket", {"unit": "short", "decimals": 0}),
)


def _cost_panels() -> list[p.PanelBuilder]:
    rename = {f"Value #{ref}": name for ref, (name, _) in zip("ABCDE", _COLUMNS)}
    beside: table.Panel = (
        p.panel(
            table.Panel,
            "Resolution rate beside cost per ticket (time range)",
            "One row per task type over the selected time range: finished runs, the share that "
            "ended `resolved`, the mean and p95 cost per ticket, and the mean tokens per ticket. "
            "A budget is worth raising where resolution is low and cost is low; worth cutting "
            "where cost is high and resolution would not move.",
            p.table_query(q.histogram_count(names.RUN_TOKENS, [q.TASK_TYPE], q.RANGE, over="increase")),
            p.table_query(resolution_rate(q.RANGE)),
            p.table_query(q.histogram_mean(names.RUN_COST, [q.TASK_TYPE], q.RANGE)),
            p.table_query(q.histogram_quantile(0.95, names.RUN_COST, [q.TASK_TYPE], q.RANGE)),
            p.table_query(q.histogram_mean(names.RUN_TOKENS, [q.TASK_TYPE], q.RANGE)),
            size=(12, 9),
        )
        .with_transformation(p.transform("merge"))
        .with_transformation(p.renamed({q.TASK_TYPE: "Task type", **rename}))
        .decimals(3)
    )
    for name, options in _COLUMNS:
        beside = beside.override_by_name(name, p.field_config(options))
    cost = _timeseries(
        "Cost per ticket: p50 and p95 by task type",
        "What one finished run (a ticket) cost, from the provider's reported usage at the price "
        "table's list prices (cached prompt tokens at the cached rate), else from the estimate. "
        "The blended cost per ticket falls when the largest task type gets the smallest budget.",
        USD,
        *_quantiles(names.RUN_COST),
    )
    return [cost, beside]


def _ceiling_panels() -> list[p.PanelBuilder]:
    ceiling_warn = alerts.current().ceiling_stop_ratio
    ends = _timeseries(
        "How tickets end: finished runs per second by resolution",
        f"Stacked by `{names.RESOLUTION}`: `resolved`, `escalated` (an overflow or the ceiling "
        "stopped it, or the agent handed it over), `abandoned`, `unresolved`, `error` (the run "
        "raised), and any resolutions of your own.",
        "ops",
        p.query(_runs_rate([RESOLUTION]), p.legend(RESOLUTION)),
        stack=40,
    )
    return [
        _timeseries(
            "Tokens per ticket against the ceiling: p50 and p95 of spent ÷ ceiling",
            "What a finished run spent (prompts and answers) as a share of its task type's run "
            "ceiling; 100% is the ceiling. A typical ticket should sit well inside it; the ceiling is "
            "for the worst ones, which it stops before the crossing request is sent.",
            "percentunit",
            *_quantiles(names.RUN_CEILING_UTILIZATION),
        )
        .thresholds(p.thresholds("green", (0.9, "orange"), (1.0, "red")))
        .thresholds_style(p.dashed()),
        _timeseries(
            "Tokens per ticket: p50 and p95 by task type",
            "Tokens one finished run spent, prompts and answers, from reported usage where recorded.",
            "short",
            *_quantiles(names.RUN_TOKENS),
        ),
        _timeseries(
            "Share of runs stopped by the ceiling",
            "Runs whose next request would have crossed the run ceiling (the agent escalated "
            f"instead) ÷ finished runs, per task type. Orange from {ceiling_warn:.0%}, where the "
            "alert warns.",
            "percentunit",
            p.query(ceiling_share(), p.legend(q.TASK_TYPE)),
        )
        .thresholds(p.thresholds("green", (ceiling_warn, "orange"), (2 * ceiling_warn, "red")))
        .thresholds_style(p.dashed()),
        p.fixed_colors(ends, RESOLUTION_COLORS),
    ]


def build() -> dash_b.Dashboard:
    return p.dashboard(
        TITLE,
        UID,
        "The ticket's view: cost per ticket beside resolution by task type, tokens per ticket "
        "against the run ceiling, and the runs the ceiling stopped.",
        multi_task_type=True,
        sections=[
            ("Cost per ticket beside resolution", _cost_panels()),
            ("Tokens against the ceiling, and how tickets end", _ceiling_panels()),
        ],
    )
