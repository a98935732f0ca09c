"""The overview dashboard: what fills the window, when the floor overflowed, per task type and model."""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart, bargauge, stat, table, text
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import text as text_m

import otel_ctx.grafana._alerts as alerts
import otel_ctx.grafana._conventions as conventions
import otel_ctx.grafana._jaeger as jaeger
import otel_ctx.grafana._panels as p
import otel_ctx.grafana._promql as q
import otel_ctx.grafana._slo as slo
from otel_ctx import names

UID = conventions.OVERVIEW_UID
TITLE = "otel-ctx · Context budget overview"
_OVERFLOW = {q.OUTCOME: names.OUTCOME_OVERFLOW}
_BY_TASK = p.legend(q.TASK_TYPE)


def _overflow_panels() -> list[p.PanelBuilder]:
    settings = alerts.current()
    warn, bad = settings.overflow_warn, settings.overflow_ratio
    return [
        p.panel(
            stat.Panel,
            "Overflow rate (time range)",
            "Share of fits in the selected time range whose pinned floor alone exceeded the budget, "
            "per task type. An overflowed request was not sent as-is: the agent escalated "
            "(ContextOverflow) or sent it over budget. Green below "
            f"{warn:.0%}, orange from {warn:.0%}, red from {bad:.0%}.",
            p.query(q.ratio(names.FITS, [q.TASK_TYPE], q.RANGE, _OVERFLOW), _BY_TASK, instant=True),
            size=(6, 8),
        )
        .unit("percentunit")
        .decimals(1)
        .thresholds(p.thresholds("green", (warn, "orange"), (bad, "red")))
        .color_mode(common_m.BigValueColorMode("background"))
        .graph_mode(common_m.BigValueGraphMode("none"))
        .text_mode(common_m.BigValueTextMode("value_and_name"))
        .reduce_options(p.reduce_last())
        .no_value("no fits"),
        p.series(
            "Overflow rate by task type",
            f"Overflowed fits ÷ all fits per task type, over time (each point the last "
            f"{names.DASHBOARD_WINDOW}; the overflow alert averages its own, longer window). A step up "
            "after a deploy usually means a bigger system prompt, tool schema or "
            "skill set for that task type, or a budget that shrank; the dashed line is the red threshold.",
            p.query(q.recorded_ratio(names.FITS, [q.TASK_TYPE], _OVERFLOW), _BY_TASK),
            size=(9, 8),
            unit="percentunit",
        )
        .axis_soft_max(bad * 2)
        .thresholds(p.thresholds("transparent", (bad, "red")))
        .thresholds_style(p.dashed()),
        p.series(
            "Overflowed fits (exemplars link to traces)",
            "How many fits overflowed in each interval (one bar per step, a minute or more), per task "
            "type: each overflow is counted in one bar only, so the legend's sum is the time range's "
            "count. Exemplars are on: hover a "
            "diamond and click the trace link (the Prometheus data source's exemplar link to Jaeger) "
            "to open the run that overflowed. No diamonds? Metrics must reach Prometheus with "
            "exemplars (Collector → OpenMetrics scrape or remote write).",
            p.query(
                q.increase_sum(names.FITS.prometheus, [q.TASK_TYPE], q.INTERVAL, **_OVERFLOW),
                _BY_TASK,
                exemplar=True,
            ),
            size=(9, 8),
            unit="short",
            legend=("sum",),
            stack=80,
        )
        .interval(q.MIN_COUNT_INTERVAL)
        .decimals(0)
        .draw_style(common_m.GraphDrawStyle("bars")),
        _overflow_table(),
        p.panel(
            text.Panel,
            "Recent overflowed runs of ${" + q.VAR_SERVICE + "} in Jaeger",
            "One link per selected service: Jaeger's search needs a service name.",
            size=(12, 8),
        )
        .mode(text_m.TextMode("markdown"))
        .content(_jaeger_markdown())
        .repeat(q.VAR_SERVICE)
        .repeat_direction("h")
        .max_per_row(2),
    ]


def _overflow_table() -> table.Panel:
    """The overflowed fits per service, task type and model, each row a link to its runs in Jaeger."""
    overflowed = q.increase_sum(names.FITS.prometheus, [q.JOB, q.TASK_TYPE, q.MODEL], q.RANGE, **_OVERFLOW)
    link = jaeger.overflow_search_url(
        "${" + q.VAR_JAEGER_URL + "}",
        "${__data.fields." + q.JOB + "}",
        {names.TASK_TYPE: "${__data.fields." + q.TASK_TYPE + "}"},
    )
    where: table.Panel = (
        p.panel(
            table.Panel,
            "Where floors overflowed: click a row to list the runs in Jaeger",
            "Overflowed fits in the selected time range per service, task type and model, most "
            "first (0: overflowed before this range). Click a row: the link opens Jaeger's search "
            f"for the traces tagged `{names.OUTCOME}=overflow` and that task type, in that service, "
            f"over the same time range: `{names.SPAN_FIT}` spans of `otel_ctx.run()` and "
            f"`{names.SPAN_OBSERVE}` spans of instrumented SDK calls alike.",
            p.table_query(f"sort_desc(\n{overflowed}\n)"),
            size=(12, 8),
        )
        .with_transformation(p.renamed({"Value": "overflowed fits"}))
        .decimals(0)
        .data_links(
            [dash_b.DashboardLink("List these overflowed runs in Jaeger").url(link).target_blank(True)]
        )
    )
    return where


def _jaeger_markdown() -> str:
    url = jaeger.overflow_search_url("${" + q.VAR_JAEGER_URL + "}", "${" + q.VAR_SERVICE + ":percentencode}")
    return "\n".join(
        [
            f"**[Open the overflowed runs of `${{{q.VAR_SERVICE}}}` in Jaeger]({url})** "
            "(this dashboard's time range, newest first).",
            "",
            f"Each hit is a trace with a span tagged `{names.OUTCOME}=overflow` (one round), with a "
            f"`{names.EVENT_FLOOR_OVERFLOW}` event carrying the estimate and the budget: a "
            f"`{names.SPAN_FIT}` span under the `{names.SPAN_RUN}` span of `otel_ctx.run()`, or a "
            f"`{names.SPAN_OBSERVE}` span of an instrumented SDK call (the zero-code path). The span "
            "attributes are the breakdown "
            f"(`{names.TRANSCRIPT_TOKENS}`, `{names.TOOL_SCHEMA_TOKENS}`, "
            f"`{names.SYSTEM_PROMPT_TOKENS}`, `{names.SKILLS_TOKENS}` against "
            f"`{names.BUDGET}`).",
            "",
            f"To narrow to one task type, add the tag `{names.TASK_TYPE}=<task type>` in Jaeger's "
            "search form, or click a row of the table on the left.",
            "",
            f"Jaeger UI: `${{{q.VAR_JAEGER_URL}}}` (change it in the *Jaeger UI* box at the top).",
        ]
    )


def _component_panels() -> list[p.PanelBuilder]:
    summed = q.one_of(names.SUMMED_COMPONENTS)
    with_headroom = q.one_of((*names.SUMMED_COMPONENTS, names.COMPONENT_HEADROOM))
    return [
        p.series(
            "Which component fills the window: mean tokens per request vs the budget",
            "Mean tokens per fitted request, stacked by breakdown line: the transcript split by role "
            f"(`{names.transcript_role_component('tool')}` are tool results), the tool schema, the "
            "system prompt and injected skills. The stack's top is the mean estimate; the dashed red "
            "line is the mean budget. Pick one task type for a like-for-like budget: with several "
            "selected, both are averaged across them.",
            p.query(q.tokens_per_fit([q.COMPONENT], **{q.COMPONENT: summed}), p.legend(q.COMPONENT)),
            p.query(q.tokens_per_fit([], **{q.COMPONENT: names.COMPONENT_BUDGET}), names.COMPONENT_BUDGET),
            size=(16, 10),
            unit="short",
            legend=("mean", "lastNotNull"),
            stack=60,
        )
        .decimals(0)
        .line_width(1)
        .override_by_query(
            "B",
            [
                dash_m.DynamicConfigValue(id_val="custom.stacking", value={"mode": "none", "group": "B"}),
                dash_m.DynamicConfigValue(id_val="custom.fillOpacity", value=0),
                dash_m.DynamicConfigValue(id_val="custom.lineWidth", value=2),
                dash_m.DynamicConfigValue(
                    id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}
                ),
                dash_m.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": "red"}),
            ],
        ),
        p.panel(
            bargauge.Panel,
            "Share of the budget by component (time range)",
            "Each line's mean tokens ÷ the mean budget over the selected time range. `headroom` is "
            "what was left unused; when the bars add up past 100% the requests overflowed. The "
            "biggest bar is the first place to cut.",
            p.query(
                q.share_of_budget(names.TOKENS, [q.COMPONENT], q.RANGE, **{q.COMPONENT: with_headroom}),
                p.legend(q.COMPONENT),
                instant=True,
            ),
            size=(8, 10),
        )
        .unit("percentunit")
        .decimals(1)
        .min(0)
        .max(1)
        .display_mode(common_m.BarGaugeDisplayMode("gradient"))
        .orientation(common_m.VizOrientation("horizontal"))
        .reduce_options(p.reduce_last())
        .thresholds(p.thresholds("green", (0.5, "orange"), (0.8, "red"))),
        p.panel(
            table.Panel,
            "Mean breakdown by task type (time range)",
            "Mean tokens of every breakdown line, one row per task type: the transcript and its "
            "split by role, tool schema, system prompt, skills, their sum (`estimated`), the "
            "`budget` and what it was carved from (`reserved_output`, `safety_margin`), and "
            "`headroom`/`overflow` (budget minus estimate, split by sign).",
            p.table_query(q.tokens_per_fit([q.TASK_TYPE, q.COMPONENT], q.RANGE)),
            size=(24, 7),
        )
        .with_transformation(p.matrix(q.TASK_TYPE, q.COMPONENT))
        .with_transformation(
            p.transform("organize", indexByName={f"{q.TASK_TYPE}\\{q.COMPONENT}": 0} | _column_order())
        )
        .unit("short")
        .decimals(0),
    ]


def _column_order() -> dict[str, int]:
    return {component: i + 1 for i, component in enumerate(names.COMPONENTS)}


def _utilization_panels() -> list[p.PanelBuilder]:
    near = alerts.current().utilization_threshold
    return [
        p.series(
            "Utilization p50 / p95 by task type",
            "Estimated request tokens ÷ budget. 1.0 (red line) is the budget: p95 near it means one "
            "request in twenty is being compacted or overflowing. Exemplars on p95 link to traces. "
            "Quantiles are interpolated inside the histogram's buckets (fine between 0.5 and 1.2).",
            p.query(q.histogram_quantile(0.5, names.UTILIZATION, [q.TASK_TYPE]), "p50 " + _BY_TASK),
            p.query(
                q.histogram_quantile(0.95, names.UTILIZATION, [q.TASK_TYPE]), "p95 " + _BY_TASK, exemplar=True
            ),
            size=(12, 9),
            unit="percentunit",
            legend=("mean", "max", "lastNotNull"),
        )
        .axis_soft_max(1.1)
        .thresholds(p.thresholds("transparent", (near, "orange"), (1.0, "red")))
        .thresholds_style(p.dashed()),
        p.panel(
            barchart.Panel,
            "Share of the budget used, by round (time range)",
            "How fast a run fills the window: the estimate ÷ the budget in the 1st, 2nd, … round of a "
            "run, over all requests of that round (the last bar collects the rounds past the "
            "configured maximum, `N+`). A staircase that reaches 100% within a few rounds means "
            "compaction starts early; look at what grows with the drill-down dashboard.",
            p.table_query(
                q.share_of_budget(
                    names.ROUND_TOKENS, [q.ROUND], q.RANGE, **{q.COMPONENT: q.one_of(names.SUMMED_COMPONENTS)}
                )
            ),
            size=(12, 9),
        )
        .with_transformation(p.renamed({"Value": "share of the budget"}))
        .with_transformation(p.transform("sortBy", sort=[{"field": q.ROUND}]))
        .x_field(q.ROUND)
        .unit("percentunit")
        .min(0)
        .show_value(common_m.VisibilityMode("auto"))
        .thresholds(p.thresholds("green", (near, "orange"), (1.0, "red")))
        .color_scheme(dash_b.FieldColor().mode(dash_m.FieldColorModeId("thresholds"))),
    ]


def _activity_panels() -> list[p.PanelBuilder]:
    drift = alerts.current().drift_ratio
    compacted = {q.OUTCOME: names.OUTCOME_COMPACTED}
    return [
        p.outcomes_per_second(
            "Fits per second by outcome",
            "Every fitted or observed request, stacked by outcome: `fit` (sent whole), `compacted` "
            "(history dropped to fit), `overflow` (the pinned floor alone did not fit).",
            span=8,
            legend_calcs=("mean", "lastNotNull"),
        ),
        p.series(
            "Compactions and dropped turns per second",
            "Compactions: fits that dropped history to stay under budget. Dropped turns: how many "
            "turns those compactions removed. Many dropped turns per compaction means runs lose a "
            "lot of context at once: a bigger budget or a summarizer may answer better.",
            p.query(q.recorded_sum(names.FITS, [q.TASK_TYPE], **compacted), "compactions · " + _BY_TASK),
            p.query(
                q.rate_sum(names.DROPPED_TURNS_METRIC.prometheus, [q.TASK_TYPE]),
                "dropped turns · " + _BY_TASK,
            ),
            size=(8, 8),
            unit="ops",
        ),
        p.series(
            "Capped tool results per second",
            "Tool results cut to the task type's cap at the tool boundary, before they enter the "
            "transcript. Steady capping is the cap doing its job; a jump means a tool started "
            "returning much more (a bigger page, a verbose error).",
            p.query(q.rate_sum(names.CAPPED_TOOL_RESULTS_METRIC.prometheus, [q.TASK_TYPE]), _BY_TASK),
            size=(8, 8),
            unit="ops",
        ),
        p.series(
            "Estimate accuracy: provider-reported ÷ estimated input tokens",
            "1.0 means the local tiktoken estimate matched what the provider billed. Above 1.0 the "
            "estimate is low and requests can overflow at the provider although they fit here; the "
            "calibration factor corrects for it over time. Only runs that record usage appear.",
            p.query(q.histogram_mean(names.ESTIMATE_ACCURACY, [q.TASK_TYPE]), "mean " + _BY_TASK),
            p.query(q.histogram_quantile(0.95, names.ESTIMATE_ACCURACY, [q.TASK_TYPE]), "p95 " + _BY_TASK),
            size=(16, 8),
            unit="none",
            floor=False,
        )
        .decimals(3)
        .thresholds(p.thresholds("transparent", (1 + (drift - 1) / 2, "orange"), (drift, "red")))
        .thresholds_style(p.dashed()),
        p.series(
            "Calls otel-ctx could not measure (share of all calls)",
            "Instrumented calls otel-ctx could not measure ÷ all fitted or observed calls, by reason "
            f"(`{names.UNOBSERVED_REASON}`): `invalid_request` (the request reader refused a body "
            "the provider may accept), `invalid_policy` (no budget for the task type), "
            "`measure_error` (a defect of otel-ctx) or `telemetry_error`. Each such call went on "
            f"unchanged and has a `{names.SPAN_OBSERVE}` span with the reason and no breakdown; "
            "every other panel leaves them out, so above 0 they under-count. The unmeasured "
            "calls carry no model: pick every model for a true share.",
            p.query(unmeasured_share(), p.legend(_REASON)),
            size=(8, 8),
            unit="percentunit",
        )
        .axis_soft_max(0.01)
        .thresholds(p.thresholds("transparent", (0.01, "red")))
        .thresholds_style(p.dashed()),
    ]


#: The reason label of the unmeasured-calls counter.
_REASON = names.prometheus_label(names.UNOBSERVED_REASON)


def unmeasured_share(window: str = q.RATE) -> str:
    """Unmeasured calls ÷ all calls (measured ones are fits), by reason, over the selected task types.

    The unmeasured counter starts every reason at 0, so an idle reason reads 0, not nothing;
    the ``or vector(0)`` arm keeps the total where no call of the selection went unmeasured.
    """
    unmeasured = names.UNOBSERVED_CALLS.prometheus
    total = (
        f"(\n  {q.rate_sum(names.FITS.prometheus, (), window)}\n  +\n"
        f"  ({q.rate_sum(unmeasured, (), window)} or vector(0))\n)"
    )
    return f"{q.rate_sum(unmeasured, [_REASON], window)}\n/ on() group_left()\n({total} > 0)"


def _trim_panels() -> list[p.PanelBuilder]:
    who = p.legend(q.PERFORMER) + " · " + p.legend(q.TASK_TYPE)
    return [
        p.series(
            "Who trims the window: tokens removed per round",
            "Tokens cut from the context per fitted or observed request, by who cut them: `otel_ctx` "
            "(its own compaction), `provider` (server-side edits, compaction and truncation, read off "
            "the response), `framework` (LangChain middleware and LangGraph hooks) "
            "or `agent` (the agent's own trimmer, seen through observed()). A provider or framework "
            "line that grows means the window is fuller than the requests the agent builds show.",
            p.query(q.per_fit(names.TRIMMED_TOKENS, [q.PERFORMER, q.TASK_TYPE]), who),
            size=(16, 8),
            unit="short",
            stack=40,
        ).decimals(0),
        p.series(
            "Trims and provider window stops per second",
            "Trims per second by performer, and requests the provider stopped because the context "
            "window was exceeded (an overflow the provider saw, whatever the estimate said: the "
            "breakdown of such a round is missing what the provider counted).",
            p.query(q.rate_sum(names.TRIMS.prometheus, [q.PERFORMER]), "trims · " + p.legend(q.PERFORMER)),
            p.query(
                q.rate_sum(names.PROVIDER_OVERFLOWS.prometheus, [q.TASK_TYPE]),
                "provider window stops · " + p.legend(q.TASK_TYPE),
            ),
            size=(8, 8),
            unit="ops",
        ),
    ]


def _slo_selector(series: str) -> str:
    """``series{job=~"$service", <task type>=~"$task_type"}``: an SLO record, filtered (it has no
    model label: the objectives are per task type)."""
    return f'{series}{{{q.JOB}=~"${q.VAR_SERVICE}", {q.TASK_TYPE}=~"${q.VAR_TASK_TYPE}"}}'


def _per_task(expr: str) -> str:
    return q.summed(expr, (q.JOB, q.TASK_TYPE))


def _burn(window: str) -> str:
    """The overflow burn rate over ``window`` per service and task type: error ratio ÷ budget.

    Both sides are summed to the service and task type first, so they match one to one without
    an ``on`` list, and a Prometheus whose series lack the task type label (the other naming)
    answers nothing instead of refusing duplicate match groups."""
    ratio = _per_task(_slo_selector(slo.ratio_record(slo.OVERFLOW, window)))
    return f"{ratio}\n/\n{_per_task(_slo_selector(slo.budget_record(slo.OVERFLOW)))}"


_KIND_TEXT = {slo.OVERFLOW: "overflow (share of fits)", slo.CEILING: "ceiling (share of tickets)"}


def _slo_panels() -> list[p.PanelBuilder]:
    """Per task type: the error budget left over the objective's window, the burn rate over each
    alert window, the time left at the last hour's burn, and who burns it (links to the breakdown
    and to the overflowed runs)."""
    settings = alerts.current()
    windows = slo.burn_windows(settings.slo_burn_window)
    legend = "{{" + q.TASK_TYPE + "}}"
    panels: list[p.PanelBuilder] = []
    for kind in slo.KINDS:
        panels.append(
            p.panel(
                stat.Panel,
                f"Error budget left: {_KIND_TEXT[kind]}",
                "Share of each task type's error budget not yet spent over its objective's window "
                "(28 days by default): 1 - error ratio ÷ (1 - objective). 100% untouched, 0 spent, "
                "negative overspent. The objectives are set when the rules are built (see the SRE "
                "guide, 'Error budgets').",
                p.query(_per_task(_slo_selector(slo.remaining_record(kind))), legend, instant=True),
                size=(6, 6),
            )
            .unit("percentunit")
            .decimals(0)
            .thresholds(p.thresholds("red", (0.0, "orange"), (0.25, "green")))
            .color_mode(common_m.BigValueColorMode("background"))
            .graph_mode(common_m.BigValueGraphMode("area"))
            .text_mode(common_m.BigValueTextMode("value_and_name"))
            .reduce_options(p.reduce_last())
            .no_value("no events in the window")
        )
    panels.append(
        p.panel(
            stat.Panel,
            "Time until the overflow budget is spent (at the last hour's burn)",
            "The overflow budget left × the objective's window ÷ the burn rate over the fast page's "
            "long window: how long the budget lasts if the last hour goes on. Nothing shown: "
            "nothing burns.",
            p.query(_per_task(_slo_selector(slo.seconds_left_record(slo.OVERFLOW))), legend, instant=True),
            size=(6, 6),
        )
        .unit("s")
        .decimals(0)
        .thresholds(p.thresholds("red", (2 * 86400.0, "orange"), (7 * 86400.0, "green")))
        .color_mode(common_m.BigValueColorMode("background"))
        .graph_mode(common_m.BigValueGraphMode("none"))
        .text_mode(common_m.BigValueTextMode("value_and_name"))
        .reduce_options(p.reduce_last())
        .no_value("not burning"),
    )
    long_windows = list(dict.fromkeys(b.long for b in windows))
    burn = [p.query(_burn(w), f"{legend} {w}") for w in long_windows]
    page = min(b.factor for b in windows if b.severity == slo.PAGE)
    panels.append(
        p.series(
            "Overflow burn rate by window",
            "Error ratio ÷ error budget per task type over each alert's long window: 1 spends the "
            "budget in exactly the objective's window. The fast-burn page needs "
            + ", ".join(
                f"{q.number(b.factor)}× over {b.long} and {b.short}"
                for b in windows
                if b.severity == slo.PAGE
            )
            + "; the ticket "
            + ", ".join(
                f"{q.number(b.factor)}× over {b.long} and {b.short}"
                for b in windows
                if b.severity == slo.TICKET
            )
            + f". The dashed line is {q.number(page)}×.",
            *burn,
            size=(6, 6),
            unit="x",
        )
        .thresholds(p.thresholds("transparent", (page, "red")))
        .thresholds_style(p.dashed()),
    )
    panels.append(_burners(long_windows[0]))
    return panels


def _burners(window: str) -> table.Panel:
    """Who burns the budget: service and task type by burn rate, each row linking to the task
    type's breakdown and to its overflowed runs in Jaeger."""
    link = jaeger.overflow_search_url(
        "${" + q.VAR_JAEGER_URL + "}",
        "${__data.fields." + q.JOB + "}",
        {names.TASK_TYPE: "${__data.fields." + q.TASK_TYPE + "}"},
    )
    breakdown = (
        f"/d/{conventions.TASK_TYPE_UID}?var-{q.VAR_SERVICE}=${{__data.fields.{q.JOB}}}"
        f"&var-{q.VAR_TASK_TYPE}=${{__data.fields.{q.TASK_TYPE}}}&from=${{__from}}&to=${{__to}}"
    )
    burners: table.Panel = (
        p.panel(
            table.Panel,
            f"Who burns the overflow budget (burn rate over {window}): click for the breakdown or the runs",
            f"Each service and task type by its burn rate over the last {window}, highest first. "
            "Click a row: 'Which component' opens the task type's drill-down (which breakdown line "
            "grew: tool schema, system prompt, skills, tool results), 'Overflowed runs' Jaeger's "
            f"search for its traces tagged `{names.OUTCOME}=overflow` in the same time range.",
            p.table_query(f"sort_desc(\n{_burn(window)}\n)"),
            size=(24, 6),
        )
        .with_transformation(p.renamed({"Value": f"burn rate ({window})"}))
        .decimals(1)
        .data_links(
            [
                dash_b.DashboardLink("Which component: the task type's breakdown").url(breakdown),
                dash_b.DashboardLink("Overflowed runs in Jaeger").url(link).target_blank(True),
            ]
        )
    )
    return burners


def build() -> dash_b.Dashboard:
    return p.dashboard(
        TITLE,
        UID,
        "Where an LLM agent's context window goes, per task type and model, and how often the "
        "pinned floor overflows the budget. Emitted by otel-ctx.",
        multi_task_type=True,
        sections=[
            ("Error budgets: the SLO per task type", _slo_panels()),
            ("When the floor overflowed", _overflow_panels()),
            ("Which component fills the window", _component_panels()),
            ("Utilization", _utilization_panels()),
            ("Compaction, caps, throughput and estimate accuracy", _activity_panels()),
            ("Who trims the window", _trim_panels()),
        ],
    )
