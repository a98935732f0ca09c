"""The per-task-type drill-down: one task type at a time, round by round and at the tail."""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart, heatmap, stat
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import prometheus as prom_m

import otel_ctx.grafana._alerts as alerts
import otel_ctx.grafana._conventions as conventions
import otel_ctx.grafana._panels as p
import otel_ctx.grafana._promql as q
from otel_ctx import names

UID = conventions.TASK_TYPE_UID
TITLE = "otel-ctx · Task type drill-down"


def _stat(
    title: str, description: str, expr: str, unit: str, steps: tuple[tuple[float, str], ...] = ()
) -> stat.Panel:
    built: stat.Panel = (
        p.panel(stat.Panel, title, description, p.query(expr, instant=True), size=(4, 4))
        .unit(unit)
        .thresholds(p.thresholds("green" if steps else "blue", *steps))
        .color_mode(common_m.BigValueColorMode("value"))
        .graph_mode(common_m.BigValueGraphMode("none"))
        .reduce_options(p.reduce_last())
    )
    return built


def _glance() -> list[p.PanelBuilder]:
    settings = alerts.current()
    overflow = {q.OUTCOME: names.OUTCOME_OVERFLOW}
    compacted = {q.OUTCOME: names.OUTCOME_COMPACTED}
    return [
        _stat(
            "Fits per second",
            "Fitted or observed requests per second over the selected time range.",
            q.rate_sum(names.FITS.prometheus, window=q.RANGE),
            "ops",
        ),
        _stat(
            "Overflow rate",
            "Share of fits whose pinned floor alone exceeded the budget (time range).",
            q.ratio(names.FITS, [], q.RANGE, overflow),
            "percentunit",
            ((settings.overflow_warn, "orange"), (settings.overflow_ratio, "red")),
        ),
        _stat(
            "Compaction rate",
            "Share of fits that dropped history to fit (time range).",
            q.ratio(names.FITS, [], q.RANGE, compacted),
            "percentunit",
            ((0.25, "orange"), (0.5, "red")),
        ),
        _stat(
            "p95 utilization",
            "95th percentile of estimate ÷ budget over the time range; 100% is the budget.",
            q.histogram_quantile(0.95, names.UTILIZATION, window=q.RANGE),
            "percentunit",
            ((settings.utilization_threshold, "orange"), (1.0, "red")),
        ),
        _stat(
            "Mean budget (tokens)",
            "min(context length, request limit) − reserved output − safety margin, averaged over the "
            "fits of the time range (their budgets' total ÷ their number).",
            q.tokens_per_fit_exact(q.RANGE, **{q.COMPONENT: names.COMPONENT_BUDGET}),
            "short",
        ),
        _stat(
            "Estimate accuracy",
            "Mean provider-reported ÷ estimated input tokens; above 1.0 the estimate is low.",
            q.histogram_mean(names.ESTIMATE_ACCURACY, [], q.RANGE),
            "none",
            ((1 + (settings.drift_ratio - 1) / 2, "orange"), (settings.drift_ratio, "red")),
        ),
    ]


def _growth() -> list[p.PanelBuilder]:
    summed = {q.COMPONENT: q.one_of(names.SUMMED_COMPONENTS)}
    by_round = f"{q.ROUND}\\{q.COMPONENT}"
    return [
        p.panel(
            barchart.Panel,
            "What grows round by round: each component's share of the budget by round (time range)",
            "One stacked bar per round of a run (1st, 2nd, …, `N+`), split by breakdown line, as a "
            "share of the budget (100%: the budget is full). The part that grows from bar to bar is "
            "what fills the window as a run goes on: usually "
            f"`{names.transcript_role_component('tool')}` (tool results) or "
            f"`{names.transcript_role_component('assistant')}` (tool calls and answers).",
            p.table_query(q.share_of_budget(names.ROUND_TOKENS, [q.ROUND, q.COMPONENT], q.RANGE, **summed)),
            size=(12, 10),
        )
        .with_transformation(p.matrix(q.ROUND, q.COMPONENT))
        .with_transformation(p.transform("sortBy", sort=[{"field": by_round}]))
        .x_field(by_round)
        .stacking(common_m.StackingMode("normal"))
        .unit("percentunit")
        .decimals(1)
        .legend(p.legend_table()),
        p.panel(
            barchart.Panel,
            "The heavy requests: mean tokens per component by outcome (time range)",
            "One stacked bar per outcome: what a request that fitted whole, one that was compacted and "
            "one whose pinned floor overflowed carried on average, split by breakdown line. What is "
            "big when a request is big: a line much larger in the overflowed bar than in the `fit` "
            "bar (an occasional huge tool result or skill) calls for caps and per-skill limits more "
            "than for a bigger budget.",
            p.table_query(q.tokens_per_fit([q.OUTCOME, q.COMPONENT], q.RANGE, **summed)),
            size=(12, 10),
        )
        .with_transformation(p.matrix(q.OUTCOME, q.COMPONENT))
        .x_field(f"{q.OUTCOME}\\{q.COMPONENT}")
        .stacking(common_m.StackingMode("normal"))
        .unit("short")
        .decimals(0)
        .legend(p.legend_table()),
    ]


def _utilization_buckets() -> str:
    """The recorded utilization buckets for a heatmap: the bucket rates, or the native histogram's
    rate where it is native; on VictoriaMetrics ``prometheus_buckets`` turns the ``vmrange``
    buckets of an exponential histogram into ``le`` ones (the heatmap's format), and keeps
    ``le`` buckets as they are."""
    if not q.native():
        return f"prometheus_buckets(\n  {q.recorded_sum(names.UTILIZATION, q.bucket_labels(), '_bucket')}\n)"
    return f"{q.recorded_sum(names.UTILIZATION, [q.LE], '_bucket')}\nor\n{q.recorded_sum(names.UTILIZATION)}"


def _edge() -> list[p.PanelBuilder]:
    dropped = q.rate_sum(names.DROPPED_TURNS_METRIC.prometheus)
    compactions = q.rate_sum(names.FITS.prometheus, **{q.OUTCOME: names.OUTCOME_COMPACTED})
    return [
        p.panel(
            heatmap.Panel,
            "Utilization distribution over time",
            "Fits per second in each utilization bucket, from the recorded rates (darker: more). A "
            "band hugging 100% is compaction working at the edge; anything above 100% overflowed.",
            p.query(_utilization_buckets(), p.legend(q.LE), fmt=prom_m.PromQueryFormat("heatmap")),
            size=(12, 9),
        )
        .calculate(False)
        .y_axis(heatmap_b.YAxisConfig().unit("percentunit")),
        p.series(
            "Headroom left: p5 and p50 (share of the budget)",
            "Budget minus estimate as a share of the budget (1 − utilization), for the tightest 5% of "
            "fits and the median, from the recorded utilization rates. p5 at 0 means at least one "
            "request in twenty is at (or over) the budget.",
            p.query(f"clamp_min(1 - {q.recorded_quantile(0.95, names.UTILIZATION)}, 0)", "p5 headroom"),
            p.query(f"clamp_min(1 - {q.recorded_quantile(0.5, names.UTILIZATION)}, 0)", "p50 headroom"),
            size=(12, 9),
            unit="percentunit",
            legend=("mean", "min"),
        ).decimals(1),
        p.outcomes_per_second(
            "Outcomes per second", "Fits by outcome, stacked: `fit`, `compacted`, `overflow`.", span=12
        ),
        p.series(
            "Turns dropped per compaction",
            "Dropped turns ÷ compacted fits: how much history one compaction throws away. Rising "
            "means the budget is getting tighter relative to the floor (system prompt, tools, "
            "skills, pinned turns).",
            p.query(f"{dropped}\n/\n({compactions} > 0)", "turns per compaction"),
            size=(12, 8),
            unit="short",
            legend=None,
        ).decimals(1),
    ]


#: What a distribution panel shows where the metrics carry no distributions (scraped from the SDK,
#: or pushed without exponential buckets): it says so rather than showing another number.
NEEDS_DISTRIBUTIONS = (
    "No distributions: they need metrics pushed over OTLP with "
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=base2_exponential_bucket_histogram "
    "(or configure(native_histograms=True)) into a Prometheus with native histograms on "
    "(they are per task type: the model filter does not narrow them)"
)
#: The lines whose tokens the distribution panels show (the budget is a setting, not a load).
DISTRIBUTION_LINES: tuple[str, ...] = tuple(c for c in names.LINE_COMPONENTS if c != names.COMPONENT_BUDGET)
#: The tool results' line: what the tool-result cap bounds.
TOOL_RESULTS = names.transcript_role_component("tool")


def _known(expr: str) -> str:
    """``expr >= 0``: drops the NaN a native histogram's quantile or fraction is in an interval
    with no request (a round no run reached), which would show as a number in some panels."""
    return f"{expr} >= 0"


def _round_heatmap(title: str, description: str, by_round: str) -> heatmap.Panel:
    """A heatmap of a distribution's p95, one row per round of a run."""
    built: heatmap.Panel = (
        p.panel(
            heatmap.Panel,
            title,
            description,
            p.query(_known(f"histogram_quantile(0.95, {by_round})"), p.legend(q.ROUND)),
            size=(6, 7),
        )
        .calculate(False)
        .no_value(NEEDS_DISTRIBUTIONS)
    )
    return built


def _line_heatmap(line: str) -> heatmap.Panel:
    return _round_heatmap(
        f"{line}: p95 tokens by round",
        f"Each row is a round of a run (1st, 2nd, …, `N+`); each cell the 95th percentile of the "
        f"`{line}` line's tokens per request in that round and interval, from the line's native "
        "histogram (darker: bigger). A row that darkens late in runs is what fills the window; "
        "a cell far darker than its neighbours is the round where the line blew up.",
        q.distribution_rate(names.LINE_TOKENS, [q.ROUND], **{q.COMPONENT: line}),
    )


def _distributions() -> list[p.PanelBuilder]:
    lines = q.distribution_rate(
        names.LINE_TOKENS, [q.COMPONENT], **{q.COMPONENT: "!" + names.COMPONENT_BUDGET}
    )
    tools = q.distribution_rate(names.LINE_TOKENS, **{q.COMPONENT: TOOL_RESULTS})
    return [
        p.series(
            "Each line per request: p50, p95 and p99 tokens",
            "Percentiles of each breakdown line's tokens per request (every round), from its native "
            "histogram: where the mean of *What fills the window* hides a tool result that is 300 "
            "tokens in most rounds and 4,200 in the one that overflowed, p99 shows it. Within the "
            "histogram's resolution (a few percent).",
            *(
                p.query(
                    _known(f"histogram_quantile({quantile}, {lines})"),
                    f"p{round(quantile * 100)} {p.legend(q.COMPONENT)}",
                )
                for quantile in (0.5, 0.95, 0.99)
            ),
            size=(16, 9),
            unit="short",
            tooltip=True,
        )
        .decimals(0)
        .no_value(NEEDS_DISTRIBUTIONS),
        p.series(
            "Requests whose tool results exceed the cap",
            f"Share of requests whose tool results (`{TOOL_RESULTS}`) add up to more than the "
            f"`${q.VAR_TOOL_RESULT_CAP}` tokens one tool result may keep (the dashboard variable; "
            "set it to the policy's cap): above it, one capped result or several results together "
            "take more than a single result is allowed. From the native histogram "
            "(`histogram_fraction`), within its resolution.",
            p.query(
                _known(f"histogram_fraction(${q.VAR_TOOL_RESULT_CAP}, Inf, {tools})"), "share over the cap"
            ),
            size=(8, 9),
            unit="percentunit",
            legend=None,
        )
        .decimals(1)
        .max(1)
        .no_value(NEEDS_DISTRIBUTIONS),
        _round_heatmap(
            "Utilization by round: p95",
            "Each row is a round of a run; each cell the 95th percentile of estimate ÷ budget in that "
            "round and interval, from the per-round utilization's native histogram (darker: "
            "fuller). The round where the rows reach 100% is where compaction starts.",
            q.distribution_rate(names.ROUND_UTILIZATION, [q.ROUND]),
        ),
        *(_line_heatmap(line) for line in DISTRIBUTION_LINES),
    ]


def build() -> dash_b.Dashboard:
    board: dash_b.Dashboard = p.dashboard(
        TITLE,
        UID,
        "One task type at a time: what grows round by round, the heavy tail of each breakdown "
        "line, and how close requests come to the budget.",
        multi_task_type=False,
        sections=[
            ("${" + q.VAR_TASK_TYPE + "} at a glance", _glance()),
            ("What fills the window", _growth()),
            ("How close to the edge", _edge()),
            ("Distributions by round (native histograms)", _distributions()),
        ],
    )
    cap = p.text_variable(
        q.VAR_TOOL_RESULT_CAP,
        "Tool result cap",
        "Tokens one tool result may keep (the policy's cap; the support desk's by default).",
        str(conventions.TOOL_RESULT_CAP),
    )
    built: dash_b.Dashboard = board.with_variable(cap)
    return built
