"""PromQL for the dashboards, spelled from the names registry.

Every metric and label name below comes from :mod:`otel_ctx.names`; the only names
written here are Prometheus's own (``job``, ``le``) and Grafana's template variables.
The variable conventions (``$service``/``$task_type``/``$model``, ``$__rate_interval``)
are shared with the alert rules and the end-to-end test, which substitutes ``.*`` and a
fixed window for them.

The backend the queries are written for (:func:`for_backend`, default Prometheus) decides how a
histogram is read. Prometheus keeps an exponential histogram pushed over OTLP as one native
histogram series, read with ``histogram_count``/``histogram_sum`` beside the classic
``_bucket{le}``/``_sum``/``_count`` series with ``or``. VictoriaMetrics has no native histogram
type: it stores an exponential histogram as ``_bucket`` series with a ``vmrange`` label (a
range of values each) beside ``_sum`` and ``_count``, and MetricsQL knows neither
``histogram_count`` nor ``histogram_sum`` (an expression naming one is rejected whole). For it
every histogram is read from its ``_bucket``/``_sum``/``_count`` series, the buckets grouped by
``le`` and ``vmrange`` both (whichever a process sends; MetricsQL's ``histogram_quantile`` reads
either), and no ``or`` arm reads a native histogram.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from otel_ctx import names
from otel_ctx.grafana._naming import quote, suffixes

#: Prometheus's scrape-job label; through the Collector it carries the OTel service name.
JOB = "job"
#: Prometheus's histogram bucket bound label.
LE = "le"
#: VictoriaMetrics's bucket label for a histogram it keeps as value ranges (``vmrange="1.0e2...1.2e2"``).
VMRANGE = "vmrange"

#: The backends the queries and rules can be written for.
PROMETHEUS = "prometheus"
VICTORIAMETRICS = "victoriametrics"
BACKENDS = (PROMETHEUS, VICTORIAMETRICS)

_BACKEND: ContextVar[str] = ContextVar("otel_ctx_promql_backend", default=PROMETHEUS)


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def backend() -> str:
    """The backend the queries are being written for (:data:`PROMETHEUS` unless in :func:`for_backend`)."""
    return _BACKEND.get()


@contextmanager
def for_backend(name: str) -> Iterator[str]:
    """Write the queries (dashboards and rules) built inside for ``name`` (:data:`BACKENDS`)."""
    token = _BACKEND.set(check_backend(name))
    try:
        yield name
    finally:
        _BACKEND.reset(token)


def native() -> bool:
    """True where an exponential histogram is one native histogram series (Prometheus)."""
    return backend() == PROMETHEUS


def rate(selector_: str, window: str) -> str:
    """The per-second rate of a counter (or histogram) series over ``window``.

    Prometheus: ``rate(s[w])``. VictoriaMetrics: ``increase_pure(s[w]) / w``, the increase counted
    from 0 for a series that begins inside the window, over the window's length. MetricsQL's own
    ``rate`` divides a series' increase by the time its samples span, so a series that begins
    inside the window (a new process, label set or bucket) reads as its rate over its own life,
    and drops out with a single sample; a sparse bucket then outweighs its neighbours and a
    quantile shifts. An otel-ctx series starts at 0 with its process (OpenTelemetry's cumulative
    temporality), so counting its first sample as an increase is what happened; only a series
    VictoriaMetrics first sees long after its process started (an agent running before the
    storage took its metrics) puts its whole count into its first window. MetricsQL reads a
    duration as its seconds (``/ 2m`` is ``/ 120``), Grafana's interval macros included.
    """
    if native():
        return f"rate({selector_}[{window}])"
    return f"increase_pure({selector_}[{window}]) / {window}"


def increase(selector_: str, window: str) -> str:
    """A counter's increase over ``window`` (VictoriaMetrics: counted from 0, see :func:`rate`)."""
    if native():
        return f"increase({selector_}[{window}])"
    return f"increase_pure({selector_}[{window}])"


def bucket_labels() -> tuple[str, ...]:
    """The labels a histogram's ``_bucket`` series keep their bucket in: ``le``, and on
    VictoriaMetrics ``vmrange`` too (an exponential histogram's buckets)."""
    return (LE,) if native() else (LE, VMRANGE)


TASK_TYPE = names.prometheus_label(names.TASK_TYPE)
MODEL = names.prometheus_label(names.GEN_AI_REQUEST_MODEL)
COMPONENT = names.prometheus_label(names.COMPONENT)
OUTCOME = names.prometheus_label(names.OUTCOME)
ROUND = names.prometheus_label(names.ROUND)
PERFORMER = names.prometheus_label(names.TRIM_PERFORMER)

VAR_DATASOURCE = "datasource"
VAR_SERVICE = "service"
VAR_TASK_TYPE = "task_type"
VAR_MODEL = "model"
VAR_JAEGER_URL = "jaeger_url"
#: The per-result cap the tool-results distribution is compared with (tokens).
VAR_TOOL_RESULT_CAP = "tool_result_cap"

RATE = "$__rate_interval"
RANGE = "$__range"
#: The step between two points of a panel: a count per point over exactly one step counts
#: each event once (``$__rate_interval`` is several steps long, so bars over it overlap).
INTERVAL = "$__interval"
#: The shortest step a per-interval count panel takes: a window must span metric exports.
MIN_COUNT_INTERVAL = "1m"


#: Every series name (raw and recorded) of the metrics kept per task type only (the series budget):
#: the ``$model`` filter does not apply to them, so a panel reading one keeps answering when a
#: model is picked.
_WITHOUT_MODEL = frozenset(
    series
    for metric in names.ALL_METRICS
    if names.GEN_AI_REQUEST_MODEL not in metric.attributes
    for suffix in suffixes(metric)
    for series in (metric.series(suffix), names.recorded(metric, suffix))
)


def selector(metric: str, **matchers: str) -> str:
    """``metric{job=~"$service", <task_type>=~"$task_type", <model>=~"$model", extra...}``.

    The model matcher is left out for a metric that has no model label. Extra matchers are
    ``label=value`` (exact) or, when the value starts with ``~``, ``label=~regex``
    (``!``: ``label!=value``).
    """
    parts = [
        f"{JOB}=~{quote('$' + VAR_SERVICE)}",
        f"{TASK_TYPE}=~{quote('$' + VAR_TASK_TYPE)}",
    ]
    if metric not in _WITHOUT_MODEL:
        parts.append(f"{MODEL}=~{quote('$' + VAR_MODEL)}")
    for label, value in matchers.items():
        if value.startswith("~"):
            parts.append(f"{label}=~{quote(value[1:])}")
        elif value.startswith("!"):
            parts.append(f"{label}!={quote(value[1:])}")
        else:
            parts.append(f"{label}={quote(value)}")
    return f"{metric}{{{', '.join(parts)}}}"


def matching(series: str, matchers: Mapping[str, str] | None = None) -> str:
    """``series{label="value", ...}``: exact matchers and no dashboard variables (the alert rules)."""
    if not matchers:
        return series
    return f"{series}{{{', '.join(f'{label}={quote(value)}' for label, value in matchers.items())}}}"


def summed(expr: str, group: Iterable[str] = ()) -> str:
    """``sum by (group) (expr)``."""
    return f"sum{by(group)} ({expr})"


def number(value: float) -> str:
    """A PromQL literal without a trailing ``.0`` (``20``, ``0.05``)."""
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> float:
    """A PromQL duration (``10m``, ``1h30m``) in seconds."""
    parts = _DURATION.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a PromQL duration: {duration!r}")
    return sum(int(n) * _SECONDS[u] for n, u in parts)


def one_of(values: Iterable[str]) -> str:
    """A regex matcher value (for :func:`selector`) matching exactly these label values."""
    return "~" + "|".join(re.escape(v) for v in values)


def by(labels: Iterable[str]) -> str:
    joined = ", ".join(labels)
    return f" by ({joined})" if joined else ""


def rate_sum(metric: str, group: Iterable[str] = (), window: str = RATE, **matchers: str) -> str:
    """``sum by (group) (rate(selector[window]))``."""
    return f"sum{by(group)} ({rate(selector(metric, **matchers), window)})"


def increase_sum(metric: str, group: Iterable[str] = (), window: str = RATE, **matchers: str) -> str:
    return f"sum{by(group)} ({increase(selector(metric, **matchers), window)})"


def native_sum(
    metric: names.Metric,
    group: Iterable[str] = (),
    window: str = RATE,
    fn: str = "",
    *,
    over: str = "rate",
    **matchers: str,
) -> str:
    """``sum by (group) (fn(rate(metric[window])))`` over a native histogram (``fn``:
    ``histogram_sum``/``histogram_count``, or nothing for the histograms themselves; ``over``:
    ``rate`` or ``increase``)."""
    inner = f"{over}({selector(metric.prometheus, **matchers)}[{window}])"
    return f"sum{by(group)} ({fn}({inner}))" if fn else f"sum{by(group)} ({inner})"


def histogram_count(
    metric: names.Metric,
    group: Iterable[str] = (),
    window: str = RATE,
    *,
    over: str = "rate",
    **matchers: str,
) -> str:
    """Observations per second of a histogram: its ``_count`` rate, or its native histogram's count."""
    summed_ = increase_sum if over == "increase" else rate_sum
    classic = summed_(metric.series("_count"), group, window, **matchers)
    if not native():
        return classic
    return or_native(classic, native_sum(metric, group, window, "histogram_count", over=over, **matchers))


def or_native(classic: str, native_: str) -> str:
    """``classic or native_`` where histograms can be native, else ``classic``.

    Each histogram is classic (``_bucket``/``_sum``/``_count`` series) where metrics are scraped
    from the SDK and native where they are pushed with exponential buckets; a process has one
    or the other, so the two arms never both answer for one label set.
    """
    return f"(\n  {classic}\n  or\n  {native_}\n)" if native() else classic


def histogram_mean(
    metric: names.Metric, group: Iterable[str] = (), window: str = RATE, **matchers: str
) -> str:
    """Mean of a histogram over the window: rate of ``_sum`` over rate of ``_count`` (of the
    native histogram's sum over its count where the histogram is native).

    The denominator is filtered to ``> 0`` so an idle window drops the series instead of
    showing NaN.
    """
    group = tuple(group)
    num = or_native(
        rate_sum(metric.series("_sum"), group, window, **matchers),
        native_sum(metric, group, window, "histogram_sum", **matchers),
    )
    return f"{num}\n/\n({histogram_count(metric, group, window, **matchers)} > 0)"


def histogram_quantile(
    q: float, metric: names.Metric, group: Iterable[str] = (), window: str = RATE, **matchers: str
) -> str:
    """A quantile from the classic buckets' rates or, where the histogram is native, from its own
    rate: ``histogram_quantile`` reads both kinds in one vector."""
    group = tuple(group)
    return quantile(
        str(q),
        lambda le: rate_sum(metric.series("_bucket"), (*group, *le), window, **matchers),
        native_sum(metric, group, window, **matchers),
    )


def quantile(q: str, buckets: Callable[[tuple[str, ...]], str], histogram: str) -> str:
    """``histogram_quantile`` over the classic buckets (``buckets`` of the bucket labels) or, where
    the histogram is native, over them or the native ``histogram``: it reads both kinds in one
    vector."""
    if not native():
        return f"histogram_quantile({q},\n  {buckets(bucket_labels())}\n)"
    return f"histogram_quantile({q},\n  {buckets((LE,))}\n  or\n  {histogram}\n)"


def distribution_rate(
    metric: names.Metric, group: Iterable[str] = (), window: str = RATE, **matchers: str
) -> str:
    """``sum by (group) (rate(<distribution>[window]))``: a native histogram per group (on
    VictoriaMetrics the ``_bucket`` rates by ``vmrange``, which its histogram functions read).

    The distributions carry no model label (the series budget), so like every per-task metric
    they take no model matcher: a panel keeps answering, per task type, whatever model is picked.
    """
    if not native():
        buckets = selector(metric.series("_bucket"), **matchers)
        return f"sum{by((*group, VMRANGE))} ({rate(buckets, window)})"
    return f"sum{by(group)} (rate({selector(metric.prometheus, **matchers)}[{window}]))"


def ratio(counter: names.Metric, group: Iterable[str], window: str, numerator: dict[str, str]) -> str:
    """Share of a counter's rate that matches ``numerator``, per group, 0 when none matched.

    A counter series for an outcome only exists after its first increment, so a plain
    division would show nothing (not 0) for a task type that never overflowed; the
    ``or ... * 0`` arm fills those in.
    """
    group = tuple(group)
    return share_or_zero(
        rate_sum(counter.prometheus, group, window, **numerator), rate_sum(counter.prometheus, group, window)
    )


def share_or_zero(part: str, total: str) -> str:
    """``part / total`` where the total is above 0, and 0 where it is and the part is missing."""
    total = f"({total} > 0)"
    return f"(\n  {part}\n  /\n  {total}\n)\nor\n{total} * 0"


def recorded_sum(
    metric: names.Metric,
    group: Iterable[str] = (),
    suffix: str = "",
    window: str | None = None,
    **matchers: str,
) -> str:
    """``sum by (group) (<recorded rate>{selector})``: a precomputed rate, already summed over processes.

    With a ``window``, the rate summed over every evaluation in it (``sum_over_time``): what a
    ratio over the dashboard's time range reads instead of ``increase()`` over every process's
    raw samples. The sum is the total over the window times one constant (the recording
    interval over the recorded rate's window), the same for every series, so only a ratio of
    two such sums means anything: the ratio of the totals. Both sides must be recorded over the
    same window (:data:`otel_ctx.names.DASHBOARD_WINDOW`, as every rate a dashboard reads is).
    ``avg_over_time`` would divide each series by its own number of samples, so a series that
    lived for part of the window (a model or outcome first seen late) would weigh as if it had
    run all along; a sum weighs every evaluation once.
    """
    series = selector(names.recorded(metric, suffix), **matchers)
    if window is not None:
        series = f"sum_over_time({series}[{window}])"
    expr = f"sum{by(group)} ({series})"
    if metric is names.ROUND_TOKENS:
        # Where the line distributions are on they replace the per-round counter: the same
        # totals are their recorded sums.
        return f"(\n  {expr}\n  or\n  {recorded_sum(names.LINE_TOKENS, group, '_sum', window, **matchers)}\n)"
    return expr


def recorded_ratio(counter: names.Metric, group: Iterable[str], numerator: dict[str, str]) -> str:
    """:func:`ratio` on the recorded rate of ``counter``."""
    group = tuple(group)
    return share_or_zero(recorded_sum(counter, group, **numerator), recorded_sum(counter, group))


def recorded_quantile(q: float, metric: names.Metric, group: Iterable[str] = (), **matchers: str) -> str:
    """A quantile of a histogram from its recorded bucket rates, or its recorded native rate."""
    group = tuple(group)
    return quantile(
        str(q),
        lambda le: recorded_sum(metric, (*group, *le), "_bucket", **matchers),
        recorded_sum(metric, group, **matchers),
    )


def _per(num: str, den: str, join: Iterable[str]) -> str:
    """``num / den`` matched on ``join`` (the labels of ``num`` beyond it stay on the left)."""
    return f"{num}\n/ on({', '.join(join)}) group_left()\n({den} > 0)"


def tokens_per_fit(group: Iterable[str] = (), window: str | None = None, **matchers: str) -> str:
    """Mean tokens per fitted request: the recorded tokens rate over the recorded fits rate, per group.

    ``group`` may hold the component; the fits side is grouped by the rest. An outcome
    matcher applies to both sides (both carry the outcome), a component matcher to the
    tokens. With a ``window``, over that window (see :func:`recorded_sum`).
    """
    return _tokens_per_fit(lambda metric, g, m: recorded_sum(metric, g, window=window, **m), group, matchers)


def _tokens_per_fit(
    summed_: Callable[[names.Metric, tuple[str, ...], dict[str, str]], str],
    group: Iterable[str],
    matchers: dict[str, str],
) -> str:
    """The tokens ÷ the fits, each summed by ``summed_``: the fits grouped and matched without the
    component."""
    group = tuple(group)
    fits_matchers = {k: v for k, v in matchers.items() if k != COMPONENT}
    join = tuple(g for g in group if g != COMPONENT)
    return _per(summed_(names.TOKENS, group, matchers), summed_(names.FITS, join, fits_matchers), join)


def tokens_per_fit_exact(window: str, group: Iterable[str] = (), **matchers: str) -> str:
    """Mean tokens per fitted request over ``window`` from the raw counters: the tokens' increase
    over the fits' increase, per group (``group`` may hold the component, as in
    :func:`tokens_per_fit`).

    Each process's counters are read over exactly the window, so the ratio is the totals' ratio
    whatever part of the window a series lived in: where every fit had one budget it reads that
    budget. It reads raw series (one per process), so it is for a few lines (one component), not
    the whole breakdown over a fleet, which :func:`tokens_per_fit` reads from the recorded rates.
    """
    return _tokens_per_fit(
        lambda metric, g, m: increase_sum(metric.prometheus, g, window, **m), group, matchers
    )


def per_fit(metric: names.Metric, group: Iterable[str] = (), window: str = RATE) -> str:
    """A counter's rate per fitted request (per round), per group: ``group`` may hold labels the
    fits counter does not have (they stay on the left)."""
    group = tuple(group)
    fits_labels = set(names.FITS.attributes)
    join = tuple(g for g in group if g in {names.prometheus_label(a) for a in fits_labels})
    return _per(
        rate_sum(metric.prometheus, group, window), rate_sum(names.FITS.prometheus, join, window), join
    )


def share_of_budget(metric: names.Metric, group: Iterable[str], window: str, **matchers: str) -> str:
    """Tokens of the matched lines ÷ tokens of the budget line over the window, per group.

    A ratio of totals is the ratio of means (both sides count the same requests), so no
    request count is needed. ``group`` may hold the component; the budget side is grouped by
    the rest. Reads the metric's recorded rate.
    """
    group = tuple(group)
    join = tuple(g for g in group if g != COMPONENT)
    budget = recorded_sum(metric, join, window=window, **{COMPONENT: names.COMPONENT_BUDGET})
    return _per(recorded_sum(metric, group, window=window, **matchers), budget, join)
