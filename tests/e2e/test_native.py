"""Native histograms for real: demo workload → OTLP (exponential buckets) → the real Collector →
remote write → a real Prometheus with native histograms on.

The servers and their config files are the stack's, laid out and rendered to 127.0.0.1 exactly
as ``tests/e2e/test_collector.py`` does (its helpers are reused); the workload pushes native
histograms (``tests/e2e_workload.py --native``) and reports every round's breakdown lines. The
test then checks what the distributions promise: each line's p95 by round and task type, read
with ``histogram_quantile``, lies in the histogram bucket that holds the same quantile computed
from the workload's own fits (the histogram's resolution), every dashboard query and alert
answers, every panel target answers the workload's own number (within 5 % of the same target over
the totals the workload pushed, or, where a rate cannot count what a series' first push held, of
those totals counted from each series' first sample; a quantile or a share over a bound in the
bucket that holds the workload's own observations), the series one process stores at the full
3 task types × 3 models spread are what the bench counts (within the budget), and exemplars
still lead to the runs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import e2e_values as values
import pytest
import support
from test_collector import SAMPLE_PERCENT, SAMPLE_PERCENT_VARIABLE, Ports, lay_out

from bench import series_paths
from otel_ctx import grafana, names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana._promql import seconds

ROOT = support.ROOT
SERVICE = "otel-ctx-e2e-native"
#: The full-spread process (bench.series_paths), counted in the TSDB.
SPREAD_SERVICE = "otel-ctx-e2e-native-spread"
WINDOW = support.E2E_WINDOW
WORKLOAD_SEED = 23
WORKLOAD_TICKETS = 60
WORKLOAD_SECONDS = 30.0
QUANTILE = 0.95
#: How far a panel may be from the workload's own number.
TOLERANCE = 0.05
#: Seconds after the workload's start when the panels are read (:func:`_read_late`).
READ_AFTER = 55.0
#: Seconds after the run when every evaluation of the recorded rates (2m windows) in a panel's
#: one-minute time range has held all of it (:func:`_settled`).
SETTLED = 70.0

COMPONENT = names.prometheus_label(names.COMPONENT)
ROUND = names.prometheus_label(names.ROUND)
TASK = names.prometheus_label(names.TASK_TYPE)


@dataclass
class NativeStack:
    prometheus: str
    report: dict[str, Any]
    started: float
    at: float = 0.0
    #: When the workload ran its last ticket (it writes the report right after).
    finished: float = 0.0

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = urllib.parse.urlencode({"query": expr, "time": f"{at or self.at:.3f}"})
        try:
            with urllib.request.urlopen(f"{self.prometheus}/api/v1/query?{params}", timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as err:
            pytest.fail(f"Prometheus rejected the query: {err.read().decode()}\n{expr}")
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.prometheus}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    # No Jaeger: nothing here reads traces (the Collector's trace export retries in vain).
    binaries = support.built_servers("otelcol")
    prometheus = support.prometheus_tool("prometheus")
    tmp = tmp_path_factory.mktemp("native-e2e")
    ports = Ports()
    jaeger_base = f"http://127.0.0.1:{ports('jaeger', 16686)}"
    rules = alerts.write(tmp / "fast-rules.yml", alerts.AlertSettings.fast(WINDOW, jaeger_url=jaeger_base))
    laid = lay_out(tmp, ports, rules)
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    child_env = {**clean_env, "PYTHONPATH": os.pathsep.join([str(ROOT), clean_env.get("PYTHONPATH", "")])}
    prom_base = f"http://127.0.0.1:{ports('prometheus', 9090)}"
    otlp = f"http://127.0.0.1:{ports('otel-collector', 4317)}"
    report_path = tmp / "report.json"
    children = support.Children(tmp, frozenset({"spread"}))
    procs, check_alive, ok = children.procs, children.check_alive, children.ok

    try:
        procs.append(
            (
                "prometheus",
                _start(
                    [
                        prometheus,
                        *laid["prometheus"].command,
                        f"--web.listen-address=127.0.0.1:{ports('prometheus', 9090)}",
                    ],
                    tmp / "prometheus.log",
                ),
            )
        )
        procs.append(
            (
                "otel-collector",
                _start(
                    [str(binaries["otelcol"]), *laid["otel-collector"].command],
                    tmp / "otel-collector.log",
                    {**clean_env, SAMPLE_PERCENT_VARIABLE: str(SAMPLE_PERCENT)},
                ),
            )
        )
        support.wait("Prometheus to be ready", 30, lambda: ok(f"{prom_base}/-/ready"))
        support.wait(
            "the Collector's health check",
            60,
            lambda: ok(f"http://127.0.0.1:{ports('otel-collector', 13133)}/"),
        )
        started = time.time()
        procs.append(
            (
                "workload",
                _start(
                    [
                        sys.executable,
                        str(Path(__file__).parents[1] / "e2e_workload.py"),
                        f"--otlp={otlp}",
                        "--native",
                        f"--service={SERVICE}",
                        f"--seed={WORKLOAD_SEED}",
                        f"--tickets={WORKLOAD_TICKETS}",
                        f"--seconds={WORKLOAD_SECONDS}",
                        f"--report={report_path}",
                    ],
                    tmp / "workload.log",
                    child_env,
                ),
            )
        )
        spread = subprocess.run(
            [sys.executable, "-m", "bench.series_paths", f"--otlp={otlp}", f"--service={SPREAD_SERVICE}"],
            cwd=ROOT,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert spread.returncode == 0, spread.stdout + spread.stderr

        def report() -> dict[str, Any] | None:
            check_alive()
            loaded: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
            return loaded

        built = NativeStack(
            prom_base, support.wait("the workload to finish", WORKLOAD_SECONDS + 60, report), started
        )
        built.finished = report_path.stat().st_mtime
        total = sum(f["count"] for f in built.report["fits"])
        lines = len(built.report["lines"])
        assert lines == total

        def arrived() -> bool:
            built.at = time.time()
            fits = built.query(f'sum({names.FITS.prometheus}{{job="{SERVICE}"}})')
            counts = built.query(
                f"sum(histogram_count({names.LINE_TOKENS.prometheus}"
                f'{{job="{SERVICE}", {COMPONENT}="{names.COMPONENT_ESTIMATED}"}}))'
            )
            return bool(fits and counts) and int(float(fits[0]["value"][1])) == total == round(
                float(counts[0]["value"][1])
            )

        support.wait("Prometheus to hold the workload's last fits through remote write", 60, arrived)
        built.at = time.time()
        yield built
    finally:
        for _, proc in reversed(procs):
            support.stop(proc)


# --- the quantiles ------------------------------------------------------------------------


def _bucket_holding(histogram: dict[str, Any], value: float) -> tuple[float, float]:
    """The (lower, upper) bounds of the native histogram bucket that holds ``value``."""
    for _rule, lower, upper, count in histogram["buckets"]:
        lo, hi = float(lower), float(upper)
        if float(count) > 0 and lo <= value <= hi:
            return lo, hi
    raise AssertionError(f"no bucket holds {value}: {histogram['buckets']}")


def _check_quantiles(
    stack: NativeStack,
    metric: names.Metric,
    group: tuple[str, ...],
    observed: dict[tuple[str, ...], list[float]],
) -> int:
    """Each group's p95 from Prometheus lies in the bucket holding the fits' own p95; count and
    sum are the fits' exactly. Returns the groups checked."""
    by = ", ".join(group)
    selector = f'{metric.prometheus}{{job="{SERVICE}"}}'
    histograms = {
        tuple(s["metric"][label] for label in group): s["histogram"][1]
        for s in stack.query(f"sum by ({by}) ({selector})")
    }
    estimates = {
        tuple(s["metric"][label] for label in group): float(s["value"][1])
        for s in stack.query(f"histogram_quantile({QUANTILE}, sum by ({by}) ({selector}))")
    }
    assert set(histograms) == set(observed), (sorted(histograms), sorted(observed))
    for key, own in observed.items():
        histogram = histograms[key]
        assert int(float(histogram["count"])) == len(own), key
        assert float(histogram["sum"]) == pytest.approx(sum(own), rel=1e-9), key
        exact = values.nearest_rank(own, QUANTILE)
        lower, upper = _bucket_holding(histogram, exact)
        tolerance = 1e-9 * max(1.0, abs(upper))
        assert lower - tolerance <= estimates[key] <= upper + tolerance, (
            key,
            exact,
            estimates[key],
            lower,
            upper,
        )
    return len(observed)


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_each_lines_p95_by_round_and_task_type_is_the_fits_own_within_the_resolution(
    stack: NativeStack,
) -> None:
    observed: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for row in stack.report["lines"]:
        for line, value in row["lines"].items():
            observed[(line, row["round"], row["task_type"])].append(float(value))
    checked = _check_quantiles(stack, names.LINE_TOKENS, (COMPONENT, ROUND, TASK), observed)
    # Every line of every round of every task type the workload reached.
    assert checked == len(names.LINE_COMPONENTS) * len(
        {(r["round"], r["task_type"]) for r in stack.report["lines"]}
    )
    print(f"p95 within the bucket of the fits' own p95: {checked} line x round x task type groups")


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_utilization_p95_by_round_and_task_type_is_the_fits_own_within_the_resolution(
    stack: NativeStack,
) -> None:
    observed: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for row in stack.report["lines"]:
        observed[(row["round"], row["task_type"])].append(float(row["utilization"]))
    assert _check_quantiles(stack, names.ROUND_UTILIZATION, (ROUND, TASK), observed)


# --- what is stored ---------------------------------------------------------------------------


def _native_series() -> set[str]:
    """The families a native-path process stores: counters, each histogram as one native series,
    the distributions; not the per-round counter they replace."""
    return {m.prometheus for m in names.ALL_METRICS if m is not names.ROUND_TOKENS}


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_every_histogram_arrives_native_and_nothing_twice(stack: NativeStack) -> None:
    seen = {s["metric"]["__name__"] for s in stack.query(f'count by (__name__) ({{job="{SERVICE}"}})')}
    assert support.stored(seen) == _native_series()
    # One sample per series per timestamp: a second path (a scrape of the Collector) would add
    # series under another job or duplicate samples, which Prometheus would count here.
    jobs = {s["metric"].get("job") for s in stack.query('count by (job) ({__name__=~"context_budget_.*"})')}
    assert jobs == {SERVICE, SPREAD_SERVICE}


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_one_process_at_three_task_types_by_three_models_stores_what_the_bench_counts(
    stack: NativeStack,
) -> None:
    counted = stack.query(f'count({{job="{SPREAD_SERVICE}", __name__=~"context_budget_.*"}})')
    stored = int(float(counted[0]["value"][1]))
    expected = sum(series_paths.native_points().values())
    assert stored == expected
    assert stored <= series_paths.TARGET
    print(f"series stored for one process at 3 x 3 (Prometheus TSDB, native histograms): {stored}")


# --- every panel and alert --------------------------------------------------------------------


def _native_records() -> set[str]:
    """The native recording rules of the rules the stack loads (the fast settings)."""
    fast = alerts.AlertSettings.fast(WINDOW)
    return {r["record"] for r in alerts.recording_rules(fast)} & alerts.native_records(fast)


def _after_the_first_rates(stack: NativeStack) -> float:
    """A moment when the recording rules (evaluated every 15 s over one-minute windows) hold rates
    of the workload: their first evaluation after its last fits arrived, well inside the window.

    On a loaded machine the Collector's remote write or a rule evaluation can come a few seconds
    late: then a later evaluation is waited for (still inside the window), up to 40 s.
    """
    when = stack.at + 16.0
    time.sleep(max(0.0, when + 1.0 - time.time()))
    records = _native_records()
    deadline = time.time() + 40.0
    while time.time() < deadline:
        if all(stack.query(f'{r}{{job="{SERVICE}"}}', when) for r in records):
            break
        time.sleep(2.0)
        when = time.time() - 1.0
    return when


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_every_panel_query_answers_on_the_native_path(stack: NativeStack) -> None:
    when = _after_the_first_rates(stack)
    support.assert_panel_queries_answer(lambda expr: stack.query(expr, when), distributions=True)


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_native_recording_rules_and_every_alert_evaluate(stack: NativeStack) -> None:
    # Histograms nobody reads through a recording rule are not recorded. The stack loads the rules
    # of the fast settings (their windows are in the rules' names).
    fast = alerts.AlertSettings.fast(WINDOW)
    recorded = _native_records()
    assert recorded

    when = _after_the_first_rates(stack)
    missing = {r for r in recorded if not stack.query(f'{r}{{job="{SERVICE}"}}', when)}
    assert not missing, "native recording rules without a rate"
    support.assert_shipped_alerts_evaluate(lambda expr: stack.query(expr, when))
    for name, signal in alerts.signals(fast).items():
        assert stack.query(signal, when), f"{name}: no value on the native path"


def _vector(samples: list[dict[str, Any]]) -> dict[values.Key, float]:
    return {values.key(s, buckets=True): values.value(s) for s in samples if math.isfinite(values.value(s))}


def _service(expr: str) -> str:
    """A dashboard target read for the workload's service alone (the full-spread process pushes
    beside it, and the report lists only the workload's observations)."""
    return support.substitute(expr.replace("$service", SERVICE))


def _quantile_held(
    stack: NativeStack, expr: str, answers: dict[values.Key, float], when: float
) -> list[str] | None:
    """A quantile or a share over a bound against the workload's own observations, within the
    native histogram Prometheus adds up (:func:`values.within_resolution`: the bucket, at the
    coarsest schema of the series summed, that holds the observations' own quantile); ``None``
    where the report lists none."""
    metric = values.HISTOGRAM.search(expr)
    assert metric is not None, expr
    observed = values.observations(stack.report, metric.group(1), expr)
    if observed is None:
        return None
    by = values.group(expr)
    matchers = "".join(
        f', {label}{op}"{v}"' for label, op, v in values.MATCHER.findall(expr) if label == COMPONENT
    )
    selector = f'{metric.group(1)}{{job="{SERVICE}"{matchers}}}'
    total = f"sum by ({', '.join(by)})"
    buckets = values.native_buckets(stack.query(f"{total} ({selector})", when), by)
    # What each series held at its first sample in the window, which the rate never counts.
    first = f"{total} (min_over_time(histogram_count({selector})[{values.window(expr)}:1s]))"
    lacking = {
        tuple(sorted((g, s["metric"].get(g, "")) for g in by)): float(s["value"][1])
        for s in stack.query(first, when)
    }
    return values.within_resolution(expr, answers, observed, buckets, lacking=lacking)


def _settled(stack: NativeStack) -> float:
    """The moment the targets over recorded rates are read: every evaluation in their one-minute
    time range came after the workload's last push, its 2m window holding the whole run (a sum of
    rates over the time range, read in a ratio of two, weighs every evaluation alike: one over
    part of the run would weigh the part its first pushes left out)."""
    when = stack.finished + SETTLED
    assert when - seconds("2m") < stack.started, "the run no longer fits a 2m window"
    time.sleep(max(0.0, when + 2.0 - time.time()))
    return when


def _read_late(stack: NativeStack) -> float:
    """The moment the panels are read: once the recording rules hold rates of the workload
    (:func:`_after_the_first_rates`), and no earlier than :data:`READ_AFTER` seconds after the
    workload started, so the one-minute windows still hold every sample of it while each series
    has most of a minute's one-second samples behind it: a rate's extrapolation past its first and
    last sample (half an export interval, and up to one) adds at most 1.5 s to what was sampled."""
    assert stack.finished - stack.started < READ_AFTER - 30.0, "the workload ran too long to be read"
    _after_the_first_rates(stack)
    when = max(stack.started + READ_AFTER, time.time() - 1.0)
    time.sleep(max(0.0, when + 1.0 - time.time()))
    records = _native_records()
    assert all(stack.query(f'{r}{{job="{SERVICE}"}}', when) for r in records), "no recorded rate then"
    return when


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_every_panel_target_answers_the_workloads_totals(stack: NativeStack) -> None:
    """Every panel target, read for the workload's service, answers the workload's own number:
    within 5 % of the same target over the totals the workload pushed (:func:`values.totals`,
    read from the same Prometheus), a quantile or a share over a bound in the native bucket that
    holds the workload's own observations where the report lists them (utilization by round and
    task type, each line, run tokens and cost), less what the series' first pushes held.

    Where a target is further than that from the totals, the reason is the first push: the
    Collector remote-writes a cumulative series from its first export on, which holds what the
    process observed before it (of a seconds-long run, up to all of a rare series), and a rate
    starts counting at a series' first sample. Such a target must then be within 5 % of the
    totals counted from each series' first sample (``from_first_sample``; a native histogram by
    its count and sum); a group whose series never grew after their first push has no rate (the
    target answers nothing for it, the count from the first sample is 0). A quantile's histogram
    lacks the first pushes too: it is held to the observations less as many as those held,
    whichever they were (:func:`values.within_resolution`'s ``lacking``).

    Targets over raw series are read inside their one-minute window (:func:`_read_late`), those
    over recorded rates once every evaluation in their time range holds the whole run
    (:func:`_settled`)."""
    early = _read_late(stack)
    later = None
    rules = {r["record"]: r["expr"] for r in alerts.recording_rules(alerts.AlertSettings.fast(WINDOW))}
    native = {m.prometheus for m in names.ALL_METRICS if m.kind == "histogram"}
    rows = []
    for board, title, expr in support.panel_queries(grafana.build_dashboards()):
        where = f"{board}: {title}"
        if any(record in expr for record in alerts.slo_records()):
            continue  # the error-budget row reads ratios of recorded rates: test_prometheus.py checks it
        expr = _service(expr)
        if values.recorded(expr) and later is None:
            later = _settled(stack)
        when = later if values.recorded(expr) else early
        truth_expr = values.totals(expr, rules)
        assert "job:" not in truth_expr and "rate(" not in truth_expr, truth_expr
        counted_expr = values.totals(expr, rules, from_first_sample=True, native=native)
        got, truth, counted = (_vector(stack.query(e, when)) for e in (expr, truth_expr, counted_expr))
        assert got and set(got) <= set(truth), (where, sorted(got), sorted(truth))
        lacking = set(truth) - set(got)
        assert all(counted.get(k, 0.0) == 0.0 for k in lacking), (where, {k: counted.get(k) for k in lacking})
        off_totals = max(values.deviation(got[k], truth[k]) for k in got)
        what = f"{len(got)} series, of the totals {off_totals * 100:.1f} % ({len(lacking)} no rate)"
        if values.QUANTILE.search(expr):
            out = _quantile_held(stack, expr, got, when)
            if out is not None:
                rows.append((where, 1.0 if out else 0.0, f"in its bucket; {what} {out or ''}"))
                continue
        if off_totals <= TOLERANCE:
            rows.append((where, off_totals, f"{what}, the totals"))
            continue
        assert set(got) <= set(counted), (where, sorted(got), sorted(counted))
        off_counted = max(values.deviation(got[k], counted[k]) for k in got)
        rows.append((where, off_counted, f"{what}, from the first samples"))
    for where, worst, what in rows:
        print(f"{worst * 100:6.2f} %  {what}  {where}")
    off = [(where, worst) for where, worst, _ in rows if worst > TOLERANCE]
    assert not off, off


def _by_group(
    samples: list[dict[str, Any]], group: tuple[str, ...], pick: int
) -> tuple[float, dict[tuple[str, ...], tuple[float, float]]]:
    """(count, sum) of each series' ``pick``-th histogram in a range result, added up per
    ``group``; and that histogram's timestamp (the latest over the series)."""
    out: dict[tuple[str, ...], tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
    stamp = 0.0
    for s in samples:
        t, histogram = s["histograms"][pick]
        key = tuple(s["metric"][label] for label in group)
        c, total = out[key]
        out[key] = (c + float(histogram["count"]), total + float(histogram["sum"]))
        stamp = max(stamp, float(t))
    return stamp, dict(out)


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_recorded_native_rates_are_the_workloads_own(stack: NativeStack) -> None:
    """Utilization, run tokens and run cost as the recording rules hold them (native histogram
    rates summed to the service) count and add up what the workload observed, within 5 %.

    One rule evaluation is read, 50 s after the workload's last ticket (its window holds the
    last ten seconds of tickets at least). Its rate times the window is the workload's own total
    (its report) less what the series already held at its first sample in that window (a rate
    starts at a series' first sample: the observations made before the first export are never
    an increase); the rest is the rate's extrapolation by up to 1.5 s of one-second exports. A
    rate that lost samples, or was recorded from part of the series, misses this."""
    time.sleep(max(0.0, stack.finished + 55.0 - time.time()))
    resolution = names.prometheus_label(names.RESOLUTION)
    checks = (
        (names.UTILIZATION, stack.report["rounds"], (TASK,), ("task_type",), "utilization"),
        (names.RUN_TOKENS, stack.report["runs"], (TASK, resolution), ("task_type", "resolution"), "tokens"),
        (names.RUN_COST, stack.report["runs"], (TASK,), ("task_type",), "cost"),
    )
    window = seconds(WINDOW)
    for metric, rows, group, key, value in checks:
        record = names.recorded(metric, window=WINDOW)
        evaluated, recorded = _by_group(
            stack.query(f'{record}{{job="{SERVICE}"}}[20s]', stack.finished + 50.0), group, -1
        )
        assert recorded, record
        # What each series held at its first sample inside the evaluation's window.
        _, first = _by_group(
            stack.query(f'{metric.prometheus}{{job="{SERVICE}"}}[{WINDOW}]', evaluated), group, 0
        )
        own: dict[tuple[str, ...], tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
        for row in rows:
            k = tuple(str(row[name]) for name in key)
            own[k] = (own[k][0] + 1, own[k][1] + float(row[value]))
        assert set(recorded) == set(first) <= set(own), (record, sorted(recorded), sorted(own))
        increased = 0.0
        for labels, (count, total) in recorded.items():
            expected_count = own[labels][0] - first[labels][0]
            expected_sum = own[labels][1] - first[labels][1]
            where = (record, labels, count * window, expected_count)
            assert count * window == pytest.approx(expected_count, rel=0.05, abs=1e-9), where
            assert total * window == pytest.approx(expected_sum, rel=0.05, abs=1e-9), where
            increased += expected_count
        assert increased > 0, f"{record}: no increase in the window of the evaluation at {evaluated}"


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_native_histogram_exemplars_are_the_workloads_runs(stack: NativeStack) -> None:
    data = stack.api(
        "/api/v1/query_exemplars",
        query=f'{names.UTILIZATION.prometheus}{{job="{SERVICE}"}}',
        start=f"{stack.started:.3f}",
        end=f"{time.time():.3f}",
    )
    trace_ids = {int(e["labels"]["trace_id"], 16) for series in data for e in series["exemplars"]}
    assert trace_ids, "no exemplar on the native utilization histogram"
    assert trace_ids <= {int(r["trace_id"], 16) for r in stack.report["runs"]}
