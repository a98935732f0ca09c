"""What a panel target should answer, from what the end-to-end workload did.

Shared by the end-to-end tests that hold every panel target to the workload's own number
(``tests/e2e/test_victoriametrics.py``, ``tests/e2e/test_otlp_prometheus.py``,
``tests/e2e/test_native.py``): a Prometheus dashboard target rewritten over the totals the workload
pushed (:func:`totals`), and a quantile or a share over a bound held to the workload's own
observations within the resolution of its histogram (:func:`within_resolution`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from otel_ctx import names
from otel_ctx.grafana import _promql as q

LABEL = names.prometheus_label
TASK = LABEL(names.TASK_TYPE)
ROUND = LABEL(names.ROUND)
COMPONENT = LABEL(names.COMPONENT)
RESOLUTION = LABEL(names.RESOLUTION)

#: A group of series: its labels, sorted, without the name and the bucket labels.
Key = tuple[tuple[str, str], ...]
#: One group's buckets: (lower, upper, count), the count of that bucket alone.
Buckets = dict[Key, list[tuple[float, float, float]]]

#: ``rate(s[w])`` and ``increase(s[w])`` of one selector.
_ROLLUP = re.compile(r"\b(rate|increase)\(([a-zA-Z_:][\w:]*(?:\{[^{}]*\})?)\[(\w+)\]\)")
#: A recorded series with its matchers, inside ``sum_over_time(...[w])`` or bare.
_RECORDED = r"(job:[\w:]+)(\{[^{}]*\})?"
_SUMMED = re.compile(r"sum_over_time\(" + _RECORDED + r"\[\w+\]\)")
_BARE = re.compile(r"(?<![\w:])" + _RECORDED)
_RAW = re.compile(r"([a-zA-Z_][\w]*)(\{[^{}]*\})?\[")

QUANTILE = re.compile(r"histogram_(quantile|fraction)\(([\d.]+),")
HISTOGRAM = re.compile(r"(?:job:)?(context_budget_\w+?)(?:_bucket\b|:rate|\{)")
GROUP = re.compile(r"sum by \(([^)]*)\)")
MATCHER = re.compile(r'(\w+)(=|!=)"([^"]*)"')


def _inline(rules: Mapping[str, str], record: str, matchers: str | None) -> str:
    """A recorded series as the expression that records it, its matchers moved onto the raw series."""
    expr = rules[record]
    if matchers:
        inner = matchers[1:-1]

        def merged(m: re.Match[str]) -> str:
            own = (m.group(2) or "{}")[1:-1]
            return f"{m.group(1)}{{{', '.join(x for x in (own, inner) if x)}}}["

        expr = _RAW.sub(merged, expr, count=1)
    return f"({expr})"


def totals(
    expr: str,
    rules: Mapping[str, str],
    *,
    from_first_sample: bool = False,
    native: Collection[str] = (),
) -> str:
    """A Prometheus panel expression (variables substituted) over the totals the workload pushed.

    Every series of the workload begins at 0 inside the window the test reads (it ran for seconds
    just before), so a counter's increase over the window is its last value and a rate is that
    over the window's seconds: ``rate(s[w])`` becomes ``s / w``, ``increase(s[w])`` becomes ``s``,
    a recorded series the expression recording it (rewritten alike), and the sum over the time
    range of one (only ever read in a ratio of two such sums) that same rate. What this reads is
    what the workload did, without any rate's extrapolation or a first sample's loss.

    With ``from_first_sample`` each series counts from its first sample in the window instead
    (``s - min_over_time(s[w])``: a counter, a classic bucket, a sum or a count never falls):
    what Prometheus's own rate counts of a series pushed without a zero before it (an OTLP push
    or a remote write of a cumulative series holds, at its first sample, everything observed
    before that export, which no rate sees as an increase), without the rate's extrapolation.
    A native histogram (its series named in ``native``) has no least sample: its count and its
    sum are counted alike over a one-second subquery, and a rate of the histogram itself (a
    heatmap's) becomes that of its count, the number a heatmap's series is compared by; a
    quantile over one then answers nothing.
    """
    expr = _SUMMED.sub(lambda m: _inline(rules, m.group(1), m.group(2)), expr)
    expr = _BARE.sub(lambda m: _inline(rules, m.group(1), m.group(2)), expr)

    if from_first_sample and native:
        names_ = "|".join(re.escape(n) for n in native)
        selector = rf"((?:{names_})(?:\{{[^{{}}]*\}})?)\[(\w+)\]"

        def grown(part: str, series: str, window: str, rate: bool) -> str:
            counted = f"({part}({series}) - min_over_time({part}({series})[{window}:1s]))"
            return f"({counted} / {q.number(q.seconds(window))})" if rate else counted

        expr = re.sub(
            rf"\b(histogram_sum|histogram_count)\((rate|increase)\({selector}\)\)",
            lambda m: grown(m.group(1), m.group(3), m.group(4), m.group(2) == "rate"),
            expr,
        )
        expr = re.sub(
            rf"\b(rate|increase)\({selector}\)",
            lambda m: grown("histogram_count", m.group(2), m.group(3), m.group(1) == "rate"),
            expr,
        )

    def counted(m: re.Match[str]) -> str:
        series, window = m.group(2), m.group(3)
        grown = f"({series} - min_over_time({series}[{window}]))" if from_first_sample else f"({series})"
        return f"({grown} / {q.number(q.seconds(window))})" if m.group(1) == "rate" else grown

    return _ROLLUP.sub(counted, expr)


def window(expr: str) -> str:
    """The window of the rates a target reads: a recorded series' (``job:<series>:rate2m``) or
    the first range's (``[1m]``)."""
    found = re.search(r"job:[\w:]+:rate(\w+)|\[(\w+)\]", expr)
    assert found is not None, expr
    return found.group(1) or found.group(2)


def recorded(expr: str) -> bool:
    """A target over recorded rates (a target reads those or raw series, never both: they are read
    at different moments)."""
    reads = "job:" in expr
    assert not reads or not re.search(r"\b(rate|increase)\(", expr), expr
    return reads


def key(sample: Mapping[str, Any], rename: Callable[[str], str] = str, *, buckets: bool = False) -> Key:
    """A result's labels (each through ``rename``) without the name, and without the bucket labels
    unless ``buckets`` (a heatmap's ``le`` buckets, each its own series)."""
    dropped = ("__name__",) if buckets else ("__name__", "le", "vmrange")
    return tuple(sorted((rename(k), v) for k, v in sample["metric"].items() if k not in dropped))


def value(sample: Mapping[str, Any]) -> float:
    """A sample's number; a native histogram's (a heatmap's rate, a recorded native rate) is its count."""
    if "histogram" in sample:
        return float(sample["histogram"][1]["count"])
    return float(sample["value"][1])


def deviation(got: float, truth: float) -> float:
    """How far ``got`` is from ``truth``, as a share of the larger of the two."""
    if got == truth:
        return 0.0
    return abs(got - truth) / max(abs(truth), abs(got), 1e-12)


def nearest_rank(values: list[float], quantile: float) -> float:
    """The quantile as a histogram ranks it: the ceil(q·n)-th smallest value."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


#: Histogram -> (report table, the row's value): what the workload observed into it.
_OBSERVED: dict[str, tuple[str, Callable[[Mapping[str, Any]], list[tuple[dict[str, str], Any]]]]] = {
    names.UTILIZATION.prometheus: ("rounds", lambda row: [({}, row["utilization"])]),
    names.ROUND_UTILIZATION.prometheus: ("lines", lambda row: [({}, row["utilization"])]),
    names.LINE_TOKENS.prometheus: (
        "lines",
        lambda row: [({COMPONENT: c}, v) for c, v in row["lines"].items()],
    ),
    names.RUN_COST.prometheus: ("runs", lambda row: [({}, row["cost"])]),
    names.RUN_TOKENS.prometheus: ("runs", lambda row: [({}, row["tokens"])]),
}


def group(expr: str) -> list[str]:
    """The labels the first ``sum by`` of ``expr`` keeps, without the bucket labels (none: a sum
    of everything)."""
    found = GROUP.search(expr)
    if found is None:
        return []
    return [g for g in found.group(1).split(", ") if g not in ("le", "vmrange")]


def observations(report: Mapping[str, Any], metric: str, expr: str) -> dict[Key, list[float]] | None:
    """The workload's own observations into ``metric``, grouped as ``expr`` groups them and
    filtered by its exact matchers; ``None`` for a histogram the report does not list."""
    if metric not in _OBSERVED:
        return None
    table, values = _OBSERVED[metric]
    by = group(expr)
    exact = MATCHER.findall(expr)
    out: dict[Key, list[float]] = {}
    for row in report[table]:
        base = {TASK: row["task_type"], ROUND: row.get("round", ""), RESOLUTION: row.get("resolution", "")}
        for extra, observed in values(row):
            labels = {**base, **extra}
            if any((labels.get(label) == v) != (op == "=") for label, op, v in exact if label in labels):
                continue
            out.setdefault(tuple(sorted((g, str(labels[g])) for g in by)), []).append(float(observed))
    return out


def classic_buckets(samples: Sequence[Mapping[str, Any]], by: list[str]) -> Buckets:
    """Classic (cumulative ``le``) bucket samples, per group of ``by``, as separate buckets."""
    cumulative: dict[Key, list[tuple[float, float]]] = {}
    for sample in samples:
        labels = sample["metric"]
        k = tuple(sorted((g, labels.get(g, "")) for g in by))
        cumulative.setdefault(k, []).append((float(labels["le"]), value(sample)))
    out: Buckets = {}
    for k, bounds in cumulative.items():
        lower, below = -math.inf, 0.0
        for upper, count in sorted(bounds):
            out.setdefault(k, []).append((lower, upper, count - below))
            lower, below = upper, count
    return out


def native_buckets(samples: Sequence[Mapping[str, Any]], by: list[str]) -> Buckets:
    """Native histogram samples, per group of ``by``: each populated bucket's bounds and count."""
    out: Buckets = {}
    for sample in samples:
        k = tuple(sorted((g, sample["metric"].get(g, "")) for g in by))
        for _rule, lower, upper, count in sample["histogram"][1].get("buckets", []):
            out.setdefault(k, []).append((float(lower), float(upper), float(count)))
    return out


def within_resolution(
    expr: str,
    answers: Mapping[Key, float],
    observed: Mapping[Key, list[float]],
    buckets: Buckets,
    *,
    neighbours: bool = False,
    lacking: Mapping[Key, float] | None = None,
) -> list[str]:
    """A quantile (or a share over a bound) against the workload's own observations: it lies in a
    bucket that holds the observations' own nearest-rank quantile (the share: between the shares
    over the two bounds of the bucket the bound falls in). With ``neighbours`` the bucket either
    side of it too (where the rank can fall one bucket early or late). ``lacking``: how many of a
    group's observations the histogram read does not hold, not knowing which (a rate's, without
    what each series' first push held): the quantile of the rest ranks between the
    observations' own at the same rank and that many ranks later, the share over a bound
    between the shares of the rest with all of them above it and with none. What is out, one
    line each.
    """
    found = QUANTILE.search(expr)
    assert found is not None, expr
    flipped = expr.startswith("clamp_min(1 - ")
    out = []
    for k, answer in answers.items():
        values = sorted(observed[k])
        n = len(values)
        missed = round((lacking or {}).get(k, 0.0))
        assert 0 <= missed < n, (k, missed, n)
        kept = n - missed
        answer = 1 - answer if flipped else answer
        held = [(lo, hi) for lo, hi, count in buckets[k] if count > 0]
        if found.group(1) == "quantile":
            exact = float(found.group(2)) * kept
            rank = max(1, math.ceil(exact - 1e-9))  # in floats 0.95 × 20 may be a hair off 19
            # histogram_quantile ranks at q × count. Where that is an observation's own rank, the
            # quantile sits on the bound above it, and a sum of rates (each series extrapolated by
            # its own factor) can carry it a hair over that bound, into the next observation's bucket.
            on_bound = abs(exact - rank) < 1e-9 and rank + missed < n
            first, last = values[rank - 1], values[rank - 1 + missed + on_bound]
            ordered = sorted(set(held), key=lambda b: (b[1], b[0]))
            at = [i for i, (lo, hi) in enumerate(ordered) if lo <= first <= hi or lo <= last <= hi]
            assert at, (k, first, last, ordered)
            step = 1 if neighbours else 0
            low = ordered[max(0, min(at) - step)][0]
            high = ordered[min(len(ordered) - 1, max(at) + step)][1]
        else:
            bound = float(found.group(2))
            straddling = [(lo, hi) for lo, hi in held if lo < bound < hi] or [(bound, bound)]
            above_high = sum(v > min(lo for lo, _ in straddling) for v in values)
            above_low = sum(v > max(hi for _, hi in straddling) for v in values)
            low = max(0, above_low - missed) / kept
            high = min(kept, above_high) / kept
        slack = 1e-9 * max(1.0, abs(low), abs(high))
        if not low - slack <= answer <= high + slack:
            out.append(f"{k}: {answer} not in [{low}, {high}]")
    return out
