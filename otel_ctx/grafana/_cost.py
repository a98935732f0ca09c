"""The ticket view: what a ticket costs, how close it comes to its ceiling, and how it ends.

Per-request budgets are revisited with cost figures next to resolution figures: this
dashboard puts the cost per ticket (p50/p95) beside the resolution rate, per task type,
with the tokens a ticket spends against its run ceiling and the share of runs the
ceiling stopped.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import table, timeseries
from grafana_foundation_sdk.models import dashboard as dash_m

import otel_ctx.grafana._alerts as alerts
import otel_ctx.grafana._conventions as conventions
import otel_ctx.grafana._options as o
import otel_ctx.grafana._panels as p
import otel_ctx.grafana._promql as q
from otel_ctx import names

UID = conventions.COST_UID
TITLE = "otel-ctx · Cost and resolution"

RESOLUTION = names.prometheus_label(names.RESOLUTION)
RESOLVED = names.RESOLUTIONS[0]
#: Orange from this share of runs stopped by the ceiling, red from twice it.
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
    total = f"({_runs_rate([q.TASK_TYPE], window)} > 0)"
    part = _runs_rate([q.TASK_TYPE], window, **{RESOLUTION: RESOLVED})
    return f"(\n  {part}\n  /\n  {total}\n)\nor\n{total} * 0"


def _timeseries(title: str, description: str, unit: str) -> timeseries.Panel:
    built: timeseries.Panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(p.DATASOURCE)
        .unit(unit)
        .min(0)
        .tooltip(p.tooltip_all())
        .legend(p.legend_table("mean", "max"))
        .span(12)
        .height(9)
    )
    return built


def _cost_panels() -> list[p.PanelBuilder]:
    cost = _timeseries(
        "Cost per ticket: p50 and p95 by task type",
        "What one finished run (a ticket) cost, from the provider's reported usage at the price "
        "table's list prices (cached prompt tokens at the cached rate), else from the estimate. "
        "The blended cost per ticket falls when the largest task type gets the smallest budget.",
        USD,
    ).targets(
        p.targets(
            p.query(q.histogram_quantile(0.5, names.RUN_COST, [q.TASK_TYPE]), f"p50 {p.legend(q.TASK_TYPE)}"),
            p.query(
                q.histogram_quantile(0.95, names.RUN_COST, [q.TASK_TYPE]), f"p95 {p.legend(q.TASK_TYPE)}"
            ),
        )
    )
    beside = (
        table.Panel()
        .title("Resolution rate beside cost per ticket (time range)")
        .description(
            "One row per task type over the selected time range: finished runs, the share that "
            "ended `resolved`, the mean and p95 cost per ticket, and the mean tokens per ticket. "
            "A budget is worth raising where resolution is low and cost is low; worth cutting "
            "where cost is high and resolution would not move."
        )
        .datasource(p.DATASOURCE)
        .targets(
            p.targets(
                p.table_query(q.histogram_count(names.RUN_TOKENS, [q.TASK_TYPE], q.RANGE, over="increase")),
                p.table_query(resolution_rate(q.RANGE)),
                p.table_query(q.histogram_mean(names.RUN_COST, [q.TASK_TYPE], q.RANGE)),
                p.table_query(q.histogram_quantile(0.95, names.RUN_COST, [q.TASK_TYPE], q.RANGE)),
                p.table_query(q.histogram_mean(names.RUN_TOKENS, [q.TASK_TYPE], q.RANGE)),
            )
        )
        .with_transformation(dash_m.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            dash_m.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {"Time": True},
                    "renameByName": {
                        q.TASK_TYPE: "Task type",
                        "Value #A": "Runs",
                        "Value #B": "Resolution rate",
                        "Value #C": "Mean cost per ticket",
                        "Value #D": "p95 cost per ticket",
                        "Value #E": "Mean tokens per ticket",
                    },
                },
            )
        )
        .override_by_name("Runs", [dash_m.DynamicConfigValue(id_val="decimals", value=0)])
        .override_by_name("Resolution rate", [dash_m.DynamicConfigValue(id_val="unit", value="percentunit")])
        .override_by_name("Mean cost per ticket", [dash_m.DynamicConfigValue(id_val="unit", value=USD)])
        .override_by_name("p95 cost per ticket", [dash_m.DynamicConfigValue(id_val="unit", value=USD)])
        .override_by_name(
            "Mean tokens per ticket",
            [
                dash_m.DynamicConfigValue(id_val="unit", value="short"),
                dash_m.DynamicConfigValue(id_val="decimals", value=0),
            ],
        )
        .decimals(3)
        .span(12)
        .height(9)
    )
    return [cost, beside]


def _ceiling_panels() -> list[p.PanelBuilder]:
    ceiling_warn = alerts.current().ceiling_stop_ratio
    against = _timeseries(
        "Tokens per ticket against the ceiling: p50 and p95 of spent ÷ ceiling",
        "What a finished run spent (prompts and answers) as a share of its task type's run "
        "ceiling; 100% is the ceiling. A typical ticket should sit well inside it; the ceiling is "
        "for the worst ones, which it stops before the crossing request is sent.",
        "percentunit",
    ).targets(
        p.targets(
            p.query(
                q.histogram_quantile(0.5, names.RUN_CEILING_UTILIZATION, [q.TASK_TYPE]),
                f"p50 {p.legend(q.TASK_TYPE)}",
            ),
            p.query(
                q.histogram_quantile(0.95, names.RUN_CEILING_UTILIZATION, [q.TASK_TYPE]),
                f"p95 {p.legend(q.TASK_TYPE)}",
            ),
        )
    )
    against = against.thresholds(p.thresholds("green", (0.9, "orange"), (1.0, "red"))).thresholds_style(
        common_b.GraphThresholdsStyleConfig().mode(o.THRESHOLDS_DASHED)
    )
    tokens = _timeseries(
        "Tokens per ticket: p50 and p95 by task type",
        "Tokens one finished run spent, prompts and answers, from reported usage where recorded.",
        "short",
    ).targets(
        p.targets(
            p.query(
                q.histogram_quantile(0.5, names.RUN_TOKENS, [q.TASK_TYPE]), f"p50 {p.legend(q.TASK_TYPE)}"
            ),
            p.query(
                q.histogram_quantile(0.95, names.RUN_TOKENS, [q.TASK_TYPE]), f"p95 {p.legend(q.TASK_TYPE)}"
            ),
        )
    )
    stopped = (
        _timeseries(
            "Share of runs stopped by the ceiling",
            "Runs whose next request would have crossed the run ceiling (the agent escalated "
            f"instead) ÷ finished runs, per task type. Orange from {ceiling_warn:.0%}, where the "
            "alert warns.",
            "percentunit",
        )
        .targets(p.targets(p.query(ceiling_share(), p.legend(q.TASK_TYPE))))
        .thresholds(p.thresholds("green", (ceiling_warn, "orange"), (2 * ceiling_warn, "red")))
        .thresholds_style(common_b.GraphThresholdsStyleConfig().mode(o.THRESHOLDS_DASHED))
    )
    ends = (
        _timeseries(
            "How tickets end: finished runs per second by resolution",
            f"Stacked by `{names.RESOLUTION}`: `resolved`, `escalated` (an overflow or the ceiling "
            "stopped it, or the agent handed it over), `abandoned`, `unresolved`, `error` (the run "
            "raised), and any resolutions of your own.",
            "ops",
        )
        .targets(p.targets(p.query(_runs_rate([RESOLUTION]), p.legend(RESOLUTION))))
        .fill_opacity(40)
        .stacking(common_b.StackingConfig().mode(o.STACK_NORMAL))
    )
    ends = p.fixed_colors(ends, RESOLUTION_COLORS)
    return [against, tokens, stopped, ends]


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
