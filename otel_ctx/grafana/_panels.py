"""Small builders shared by the dashboards: data source, targets, variables, thresholds.

Every panel and query points at the ``${datasource}`` variable rather than a data
source uid, so the same JSON works in any Grafana whatever its Prometheus is called.

The SDK's option enums are called with their value (``common_m.StackingMode("normal")``): they
derive from ``enum.StrEnum`` (Python 3.11), so under the project's mypy floor (3.10) a member
reads as a plain ``str``, while a call reads as the enum under both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.cog import variants as cog_variants
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import prometheus as prom_m

import otel_ctx.grafana._alerts as alerts
import otel_ctx.grafana._conventions as conventions
import otel_ctx.grafana._promql as q
from otel_ctx import names

#: Any panel builder (timeseries, stat, table, ...): they all build a dashboard panel.
PanelBuilder = Builder[dash_m.Panel]

DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${" + q.VAR_DATASOURCE + "}")
#: Tag shared by every shipped dashboard; dashboard links list the others by it.
TAG = "otel-ctx"

_REF_IDS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_P = TypeVar("_P", bound=PanelBuilder)


def panel(
    kind: Callable[[], _P], title: str, description: str, *queries: prom_b.Dataquery, size: tuple[int, int]
) -> _P:
    """A panel of ``kind`` with its title, description and ``size`` (its width in the dashboard's
    24 columns, its height), reading ``queries`` (if any) from the templated data source; each
    panel adds its own options to it."""
    built: Any = kind()
    built = built.title(title).description(description).span(size[0]).height(size[1])
    if queries:
        built = built.datasource(DATASOURCE).targets(targets(*queries))
    typed: _P = built
    return typed


def series(
    title: str,
    description: str,
    *queries: prom_b.Dataquery,
    size: tuple[int, int],
    unit: str,
    floor: bool = True,
    legend: tuple[str, ...] | None = ("mean", "max"),
    stack: int | None = None,
    tooltip: bool = False,
) -> timeseries.Panel:
    """A time series in ``unit``: from 0 unless not ``floor``, with a table legend of ``legend``'s
    calculations (none: Grafana's default legend). ``stack`` stacks the series at that fill
    opacity, and stacked panels (or ``tooltip``) list every series in the tooltip."""
    built: timeseries.Panel = panel(timeseries.Panel, title, description, *queries, size=size).unit(unit)
    if floor:
        built = built.min(0)
    if legend is not None:
        built = built.legend(legend_table(*legend))
    if stack is not None:
        built = built.fill_opacity(stack).stacking(stacked())
    if stack is not None or tooltip:
        built = built.tooltip(tooltip_all())
    return built


def targets(*queries: prom_b.Dataquery) -> list[Builder[cog_variants.Dataquery]]:
    """Give the queries refIds A, B, ... and the templated data source."""
    return [t.ref_id(_REF_IDS[i]).datasource(DATASOURCE) for i, t in enumerate(queries)]


def query(
    expr: str,
    legend: str = "",
    *,
    instant: bool = False,
    exemplar: bool = False,
    fmt: prom_m.PromQueryFormat | None = None,
) -> prom_b.Dataquery:
    """One PromQL target; ``exemplar`` asks Grafana to fetch exemplars (trace links) too."""
    t: prom_b.Dataquery = prom_b.Dataquery().expr(expr).legend_format(legend or "__auto")
    t = t.instant() if instant else t.range()
    if fmt is not None:
        t = t.format(fmt)
    if exemplar:
        t = t.exemplar(True)
    return t


def table_query(expr: str) -> prom_b.Dataquery:
    """An instant query whose labels become table columns."""
    return query(expr, instant=True, fmt=prom_m.PromQueryFormat("table"))


def legend(label: str) -> str:
    return "{{" + label + "}}"


def thresholds(base: str, *steps: tuple[float, str]) -> dash_b.ThresholdsConfig:
    # Typed locals: under mypy's 3.10 floor the SDK's ``Self`` returns read as Any.
    built: dash_b.ThresholdsConfig = (
        dash_b.ThresholdsConfig()
        .mode(dash_m.ThresholdsMode("absolute"))
        .steps(
            [dash_m.Threshold(value=None, color=base)]
            + [dash_m.Threshold(value=v, color=c) for v, c in steps]
        )
    )
    return built


def legend_table(*calcs: str) -> common_b.VizLegendOptions:
    built: common_b.VizLegendOptions = (
        common_b.VizLegendOptions()
        .display_mode(common_m.LegendDisplayMode("table"))
        .placement(common_m.LegendPlacement("bottom"))
        .show_legend(True)
        .calcs(list(calcs))
    )
    return built


def tooltip_all() -> common_b.VizTooltipOptions:
    """Every series in the tooltip, biggest first: what stacked panels need to be read."""
    built: common_b.VizTooltipOptions = (
        common_b.VizTooltipOptions()
        .mode(common_m.TooltipDisplayMode("multi"))
        .sort(common_m.SortOrder("desc"))
    )
    return built


def reduce_last() -> common_b.ReduceDataOptions:
    built: common_b.ReduceDataOptions = common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False)
    return built


def label_values(metric: str, label: str, *filters: tuple[str, str]) -> str:
    """``label_values(metric{filters}, label)``: a variable's options, cascading on earlier ones."""
    sel = ", ".join(f'{lab}=~"${var}"' for lab, var in filters)
    return f"label_values({metric}{{{sel}}}, {label})" if sel else f"label_values({metric}, {label})"


def variables(*, multi_task_type: bool = True) -> list[dash_b.QueryVariable | dash_b.DatasourceVariable]:
    """The four shared template variables: data source, service, task type, model.

    Options come from the fits counter (every fit and every observe increments it, so
    every task type and model that was ever seen is there), each cascading on the
    ones before it.
    """
    fits = names.FITS.prometheus
    service = (q.JOB, q.VAR_SERVICE)
    task = (q.TASK_TYPE, q.VAR_TASK_TYPE)

    def query_var(name: str, label: str, expr: str, description: str) -> dash_b.QueryVariable:
        built: dash_b.QueryVariable = (
            dash_b.QueryVariable(name)
            .label(label)
            .description(description)
            .datasource(DATASOURCE)
            .query(expr)
            .refresh(dash_m.VariableRefresh(2))
            .sort(dash_m.VariableSort(1))
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(dash_m.VariableOption(selected=True, text=["All"], value=["$__all"]))
        )
        return built

    task_var = query_var(
        q.VAR_TASK_TYPE,
        "Task type",
        label_values(fits, q.TASK_TYPE, service),
        "Task type the budget was chosen for (`other`: outside the configured set).",
    )
    if not multi_task_type:
        task_var = task_var.multi(False).include_all(False).current(dash_m.VariableOption(text="", value=""))
    return [
        dash_b.DatasourceVariable(q.VAR_DATASOURCE)
        .label("Data source")
        .description("The Prometheus that scrapes otel-ctx metrics.")
        .type("prometheus"),
        query_var(
            q.VAR_SERVICE,
            "Service",
            label_values(fits, q.JOB),
            "The Prometheus job label: the OpenTelemetry service.name of the agent.",
        ),
        task_var,
        query_var(
            q.VAR_MODEL,
            "Model",
            label_values(fits, q.MODEL, service, task),
            "The model the requests were fitted for (gen_ai.request.model).",
        ),
    ]


def jaeger_variable() -> dash_b.TextBoxVariable:
    """Where Jaeger's UI is, as the browser sees it: editable on the dashboard; by default the
    alert settings' (the alerts' jaeger links and the dashboards' open the same Jaeger)."""
    url = alerts.current().jaeger_url
    return text_variable(
        q.VAR_JAEGER_URL, "Jaeger UI", "Base URL of the Jaeger UI the trace links open.", url
    )


def text_variable(name: str, label: str, description: str, value: str) -> dash_b.TextBoxVariable:
    """A text box the viewer edits on the dashboard, starting at ``value``."""
    built: dash_b.TextBoxVariable = (
        dash_b.TextBoxVariable(name)
        .label(label)
        .description(description)
        .default_value(value)
        .current(dash_m.VariableOption(text=value, value=value))
    )
    return built


def dashboard_links() -> list[Builder[dash_m.DashboardLink]]:
    return [
        dash_b.DashboardLink("otel-ctx dashboards")
        .type(dash_m.DashboardLinkType("dashboards"))
        .tags([TAG])
        .as_dropdown(True)
        .include_vars(True)
        .keep_time(True),
        dash_b.DashboardLink("Jaeger: search traces")
        .type(dash_m.DashboardLinkType("link"))
        .icon("external link")
        .tooltip("Open Jaeger's search page")
        .url("${" + q.VAR_JAEGER_URL + "}/search")
        .target_blank(True),
    ]


def alert_annotation() -> dash_b.AnnotationQuery:
    """The shipped alerts' firing periods as red regions on every time-series panel.

    A step in a panel and the alert it set off line up on one time axis: when it fired, and
    when it resolved.
    """
    built: dash_b.AnnotationQuery = (
        dash_b.AnnotationQuery()
        .name("otel-ctx alerts firing")
        .datasource(DATASOURCE)
        .expr(alerts.firing_selector())
        .enable(True)
        .icon_color("red")
    )
    return built


def dashboard(
    title: str,
    uid: str,
    description: str,
    *,
    multi_task_type: bool,
    sections: Sequence[tuple[str, Sequence[PanelBuilder]]],
) -> dash_b.Dashboard:
    """A shipped dashboard: the shared settings, variables and links, then a row per section."""
    board: dash_b.Dashboard = (
        dash_b.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([TAG])
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dash_m.DashboardCursorSync(1))
        .editable()
        .links(dashboard_links())
    )
    board = board.annotation(alert_annotation())
    for variable in (*variables(multi_task_type=multi_task_type), jaeger_variable()):
        board = board.with_variable(variable)
    for section_title, section in sections:
        board = board.with_row(dash_b.Row(section_title))
        for panel in section:
            board = board.with_panel(panel)
    return board


def fixed_colors(panel: timeseries.Panel, colors: Mapping[str, str]) -> timeseries.Panel:
    """Each named series in its own fixed colour (outcomes, resolutions), on every board alike."""
    for name, color in colors.items():
        panel = panel.override_by_name(name, field_config({"color": {"mode": "fixed", "fixedColor": color}}))
    return panel


def field_config(options: Mapping[str, Any]) -> list[dash_m.DynamicConfigValue]:
    """The field options an override sets: option id -> value."""
    return [dash_m.DynamicConfigValue(id_val=key, value=value) for key, value in options.items()]


def stacked() -> common_b.StackingConfig:
    built: common_b.StackingConfig = common_b.StackingConfig().mode(common_m.StackingMode("normal"))
    return built


def dashed() -> common_b.GraphThresholdsStyleConfig:
    """Thresholds drawn as dashed lines across a time series."""
    built: common_b.GraphThresholdsStyleConfig = common_b.GraphThresholdsStyleConfig().mode(
        common_m.GraphThresholdsStyleMode("dashed")
    )
    return built


def transform(kind: str, **options: Any) -> dash_m.DataTransformerConfig:
    """One of Grafana's transformations (``organize``, ``sortBy``, ``merge``, ...) with its options."""
    return dash_m.DataTransformerConfig(id_val=kind, options=options)


def renamed(columns: Mapping[str, str]) -> dash_m.DataTransformerConfig:
    """An instant query's table without its time column, ``columns`` renamed (old -> new name)."""
    return transform("organize", excludeByName={"Time": True}, renameByName=dict(columns))


def matrix(row: str, column: str) -> dash_m.DataTransformerConfig:
    """Rows by one label, a column per value of another: what a table or stacked bars read."""
    return transform("groupingToMatrix", columnField=column, rowField=row, valueField="Value")


def outcomes_per_second(
    title: str, description: str, *, span: int, legend_calcs: tuple[str, ...] | None = None
) -> timeseries.Panel:
    """Fits per second stacked by outcome, each outcome in its colour."""
    fits = series(
        title,
        description,
        query(q.recorded_sum(names.FITS, [q.OUTCOME]), legend(q.OUTCOME)),
        size=(span, 8),
        unit="ops",
        legend=legend_calcs,
        stack=40,
    )
    return fixed_colors(fits, conventions.OUTCOME_COLORS)
