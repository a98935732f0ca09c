"""End to end against the real Prometheus: every dashboard query and alert, on live demo data.

A subprocess (``tests/e2e_workload.py``) runs support-desk tickets through
``otel_ctx.run`` with ``configure(exporter="prometheus")``; a real Prometheus scrapes it
every second with the shipped alert rules loaded (the generator's fast variant: the
same expressions, ``for: 0s`` and one-minute windows). Then every panel query of every
committed dashboard and every alert expression goes through Prometheus's HTTP API.
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import support
import yaml

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _conventions as conventions
from otel_ctx.grafana import _slo as slo
from otel_ctx.grafana import build_dashboards

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = support.DASHBOARDS
SERVICE = "otel-ctx-e2e"
#: The real CLI as the compose stack's load service runs it, scraped alongside.
CLI_SERVICE = "otel-ctx-demo-cli"
#: The instrumentor on real SDKs making provider and framework trims (tests/e2e_trims.py).
TRIMS_SERVICE = "otel-ctx-e2e-trims"
WINDOW = support.E2E_WINDOW
#: Any overflow in the window fires the test's overflow alert; task types that never overflow must not.
TEST_OVERFLOW_RATIO = 0.001
#: Seed 23's tickets 13, 17, 34, 38 and 48 are disputes whose pinned floor overflows; 60 tickets
#: at 10/s take ~6 s. Several, spread out: rate() cannot see a counter series' first value, so
#: the alert needs overflows after the first one to see an increase.
#: Seed 23's damage claims T00009 and T00016 run into the 60,000-token ceiling: any stop fires.
TEST_CEILING_STOP_RATIO = 0.001
#: USD: seed 23's disputes cost $0.08-0.15 a ticket (p95 above $0.10), returns under $0.09.
TEST_COST_THRESHOLD = 0.1
#: The ceiling stops come early in the workload (tickets 9 and 16): on a loaded machine the
#: workload can outlast one minute, so the ticket alerts look back further.
TICKET_WINDOW = "5m"
WORKLOAD_SEED = 23
WORKLOAD_TICKETS = 60
WORKLOAD_SECONDS = 30.0
#: Every otel-ctx series of a few hundred fits is ~15k lines (~4 MB): a 1 s timeout is too short
#: for the SDK's exporter on a busy 2-core machine.
SCRAPE = "3s"
TASK = names.prometheus_label(names.TASK_TYPE)
OUTCOME = names.prometheus_label(names.OUTCOME)
COMPONENT = names.prometheus_label(names.COMPONENT)


#: The objectives the test's rules enforce: disputes promise 99.9% (the workload overflows a few
#: percent of their fits: a burn far over the fast page's 14.4x, as a deploy that breaks one task
#: type would), every other task type keeps its default (the workload overflows none of theirs).
TEST_OBJECTIVES = slo.merged(slo.DEFAULT_OBJECTIVES, [slo.Objective("dispute", 0.999)])

#: The rules the test's Prometheus loads: the shipped expressions, fast windows, test thresholds.
STACK_SETTINGS = alerts.AlertSettings.fast(
    WINDOW,
    objectives=TEST_OBJECTIVES,
    overflow_ratio=TEST_OVERFLOW_RATIO,
    ceiling_stop_ratio=TEST_CEILING_STOP_RATIO,
    cost_threshold=TEST_COST_THRESHOLD,
    ceiling_window=TICKET_WINDOW,
    cost_window=TICKET_WINDOW,
)


@dataclass
class Stack:
    base: str
    report: dict[str, Any]
    #: Unix time queries are evaluated at: just after the final scrape, so a slow machine
    #: running the tests later still sees the workload inside every one-minute window.
    at: float | None = None
    #: Seconds an HTTP call may take (a fleet's worth of series on a busy machine needs more).
    timeout: float = 10.0

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=self.timeout) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query; a PromQL error fails with Prometheus's message and the expression."""
        try:
            params = {"query": expr} if self.at is None else {"query": expr, "time": f"{self.at:.3f}"}
            data = self.get("/api/v1/query", **params)
        except urllib.error.HTTPError as err:
            pytest.fail(f"Prometheus rejected the query: {err.read().decode()}\n{expr}")
        assert data["resultType"] == "vector", expr
        result: list[dict[str, Any]] = data["result"]
        return result

    def fits(self) -> dict[tuple[str, str], int]:
        return {(f["task_type"], f["outcome"]): int(f["count"]) for f in self.report["fits"] if f["count"]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = support.prometheus_tool("prometheus")
    tmp = tmp_path_factory.mktemp("e2e")
    prom_port, metrics_port, cli_port = support.free_port(), support.free_port(), support.free_port()
    trims_port = support.free_port()
    rules = alerts.write(tmp / "rules.yml", STACK_SETTINGS)
    config = {
        "global": {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE, "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        # The job name plays the service, as the Collector's job label does in the stack.
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            for job, port in ((SERVICE, metrics_port), (CLI_SERVICE, cli_port), (TRIMS_SERVICE, trims_port))
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    report_path = tmp / "report.json"
    start_file = tmp / "start"
    trims_done = tmp / "trims-done"
    procs: list[subprocess.Popen[bytes]] = []
    logs = {name: (tmp / f"{name}.log").open("wb") for name in ("workload", "prometheus", "cli", "trims")}
    # The children must not pick up an exporter setup from the developer's shell.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    try:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).parents[1] / "e2e_workload.py"),
                    f"--port={metrics_port}",
                    f"--service={SERVICE}",
                    f"--seed={WORKLOAD_SEED}",
                    f"--tickets={WORKLOAD_TICKETS}",
                    f"--seconds={WORKLOAD_SECONDS}",
                    f"--report={report_path}",
                    f"--start-file={start_file}",
                ],
                stdout=logs["workload"],
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                    "--enable-feature=exemplar-storage",
                ],
                stdout=logs["prometheus"],
                stderr=subprocess.STDOUT,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from otel_ctx.cli import main; main()",
                    "demo",
                    "--forever",
                    "--rate=10",
                    f"--seed={WORKLOAD_SEED}",
                    f"--prometheus-port={cli_port}",
                    f"--service-name={CLI_SERVICE}",
                ],
                stdout=logs["cli"],
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).parents[1] / "e2e_trims.py"),
                    f"--port={trims_port}",
                    f"--service={TRIMS_SERVICE}",
                    f"--start-file={start_file}",
                    f"--done-file={trims_done}",
                ],
                stdout=logs["trims"],
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        base = f"http://127.0.0.1:{prom_port}"

        def ready() -> bool | None:
            for proc, name in zip(procs, logs):
                if proc.poll() is not None:
                    log = (tmp / f"{name}.log").read_text(errors="replace")[-3000:]
                    pytest.fail(f"{name} exited with {proc.returncode}:\n{log}")
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                return response.status == 200

        support.wait("Prometheus to be ready", 20, ready)

        def scraped() -> bool:
            ready()
            got = Stack(base, {}).query(f'up{{job="{SERVICE}"}} == 1')
            return bool(got)

        # Fits start only after a first scrape: rate() needs the counters' values before them.
        support.wait("Prometheus's first scrape of the workload", 20, scraped)
        start_file.touch()

        def report() -> dict[str, Any] | None:
            ready()
            loaded: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
            return loaded

        partial = Stack(
            base, support.wait("the workload to finish its tickets", WORKLOAD_SECONDS + 30, report)
        )
        total = sum(partial.fits().values())

        def final_scrape() -> bool:
            # The workload's last fits are in Prometheus once the counters add up to its report.
            got = partial.query(f'sum({names.FITS.prometheus}{{job="{SERVICE}"}})')
            return bool(got) and int(float(got[0]["value"][1])) == total

        support.wait("Prometheus to scrape the workload's last fits", 20, final_scrape)

        def trims_scraped() -> bool:
            # Both batches of trims by others are done and scraped (a second increase for rate()).
            if not trims_done.exists():
                return False
            per = f'sum({names.TRIMS.prometheus}{{job="{TRIMS_SERVICE}"}})'
            got = partial.query(per)
            return bool(got) and _value(got[0]) >= 4

        support.wait("Prometheus to scrape the trims by others", 60, trims_scraped)

        def trims_recorded() -> bool:
            # The recording rules have evaluated on the trims process's last scrape too.
            got = partial.query(f'sum({names.recorded(names.FITS)}{{job="{TRIMS_SERVICE}"}}) > 0')
            return bool(got)

        support.wait("the recording rules to see the trims process", 20, trims_recorded)
        time.sleep(1.5)  # one more evaluation of every rule after it
        partial.at = time.time()
        yield partial
    finally:
        for proc in reversed(procs):
            support.stop(proc)
        for log in logs.values():
            log.close()


def _value(sample: dict[str, Any]) -> float:
    return float(sample["value"][1])


# --- the workload did what the test needs -------------------------------------------------


def test_the_workload_overflowed_some_disputes_and_not_everything(stack: Stack) -> None:
    fits = stack.fits()
    assert stack.report["escalated"] >= 1
    overflowed = {task for (task, outcome) in fits if outcome == "overflow"}
    assert "dispute" in overflowed
    assert overflowed != {task for task, _ in fits}, "some task type must never overflow"


def test_prometheus_counters_equal_what_the_workload_did(stack: Stack) -> None:
    got = {
        (s["metric"][TASK], s["metric"][OUTCOME]): round(_value(s))
        for s in stack.query(f'sum by ({TASK}, {OUTCOME}) ({names.FITS.prometheus}{{job="{SERVICE}"}})')
    }
    # Every outcome of a task type is started at 0, so the first overflow shows in rate().
    assert {k: v for k, v in got.items() if v} == stack.fits()
    seen_tasks = {task for task, _ in stack.fits()}
    assert set(got) == {(task, outcome) for task in seen_tasks for outcome in names.OUTCOMES}


def test_metric_names_in_prometheus_are_the_registry_names(stack: Stack) -> None:
    seen = set(stack.get("/api/v1/label/__name__/values"))
    expected = support.registry_series()
    assert support.stored(seen) == expected
    per_job = {s["metric"]["__name__"] for s in stack.query(f'count by (__name__) ({{job="{SERVICE}"}})')}
    assert support.stored(per_job) == expected

    # ... and the real CLI's demo (the compose load service's command) exports the same names.
    # It starts at its own pace: wait for it, querying now rather than at the pinned time.
    def cli_names() -> set[str] | None:
        query = f'count by (__name__) ({{job="{CLI_SERVICE}"}})'
        found = {s["metric"]["__name__"] for s in stack.get("/api/v1/query", query=query)["result"]}
        return found if support.stored(found) == expected else None

    support.wait("the CLI demo's metrics in Prometheus", 20, cli_names)


# --- the numbers are plausible ------------------------------------------------------------


def test_components_add_up_to_the_estimate_and_the_transcript_to_its_roles(stack: Stack) -> None:
    tokens_sum = names.TOKENS.prometheus

    def per_task(components: tuple[str, ...]) -> dict[str, float]:
        regex = json.dumps("|".join(re.escape(c) for c in components))  # a PromQL string literal
        expr = f'sum by ({TASK}) ({tokens_sum}{{job="{SERVICE}", {COMPONENT}=~{regex}}})'
        return {s["metric"][TASK]: _value(s) for s in stack.query(expr)}

    estimated = per_task((names.COMPONENT_ESTIMATED,))
    assert set(estimated) == {task for task, _ in stack.fits()}
    summed = per_task(names.SUMMED_COMPONENTS)
    roles = per_task(tuple(names.transcript_role_component(r) for r in names.ROLES))
    transcript = per_task((names.COMPONENT_TRANSCRIPT,))
    for task, total in estimated.items():
        assert total > 0
        assert summed[task] == pytest.approx(total, rel=1e-9), task
        assert roles[task] == pytest.approx(transcript[task], rel=1e-9), task


def test_alert_signals_have_plausible_values(stack: Stack) -> None:
    fits = stack.fits()
    signals = alerts.signals(alerts.AlertSettings.fast(WINDOW))

    def of_workload(expr: str) -> list[dict[str, Any]]:
        # The signals group by job: keep the workload's, whose fits the report counts.
        return [s for s in stack.query(expr) if s["metric"]["job"] == SERVICE]

    # Counters start at 0, so every task type has a ratio: above 0 exactly where floors overflowed.
    ratios = {s["metric"][TASK]: _value(s) for s in of_workload(signals[alerts.OVERFLOW_RATE])}
    assert set(ratios) == {task for task, _ in fits}
    overflowed = {task for (task, outcome) in fits if outcome == "overflow"}
    assert {task for task, ratio in ratios.items() if ratio > 0} == overflowed
    assert all(0 <= ratio < 1 for ratio in ratios.values()), ratios

    p95 = {s["metric"][TASK]: _value(s) for s in of_workload(signals[alerts.UTILIZATION_NEAR_BUDGET])}
    assert set(p95) == {task for task, _ in fits}
    assert all(0 < v <= 4 for v in p95.values()), p95

    accuracy = [_value(s) for s in of_workload(signals[alerts.ESTIMATE_DRIFT])]
    assert accuracy
    # The demo reports exactly what was sent, so the calibrated estimate stays near 1.
    assert all(0.5 < v < 2 for v in accuracy), accuracy


def test_every_recording_rule_records_the_raw_rate_summed_over_processes(stack: Stack) -> None:
    """Each recorded rate is there, per service, wherever the raw rate it precomputes is above 0."""
    settings = STACK_SETTINGS
    # The loaded rules' own names: each recorded rate is named by its window.
    for rule in alerts.recording_rules(settings):
        if rule["record"] in alerts.native_records(settings):
            continue  # nothing native is scraped from the SDK: tests/e2e/test_native.py checks these
        if names.PROVIDER_OVERFLOWS.prometheus in rule["expr"]:
            continue  # no provider refuses the workload's windows: the rate is there, and 0
        raw = {s["metric"]["job"]: _value(s) for s in stack.query(f"sum by (job) ({rule['expr']})")}
        recorded = {s["metric"]["job"]: _value(s) for s in stack.query(f"sum by (job) ({rule['record']})")}
        assert raw.get(SERVICE, 0) > 0, rule
        # Evaluated up to a second before the pinned time: present and positive, not equal.
        assert {job for job, v in raw.items() if v > 0} <= {job for job, v in recorded.items() if v > 0}, rule


# --- the alerts -----------------------------------------------------------------------


def test_every_shipped_alert_expression_evaluates(stack: Stack) -> None:
    """The committed rules run as written (ten-minute windows: they may not fire on 10 s of data)."""
    support.assert_shipped_alerts_evaluate(stack.query)


def test_the_overflow_alert_fires_for_the_task_types_that_overflowed(stack: Stack) -> None:
    overflowed = {task for (task, outcome) in stack.fits() if outcome == "overflow"}

    def firing() -> set[str] | None:
        found = {
            a["labels"][TASK]
            for a in stack.get("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alerts.OVERFLOW_RATE
            and a["labels"]["job"] == SERVICE
            and a["state"] == "firing"
        }
        return found if found == overflowed else None

    support.wait(f"{alerts.OVERFLOW_RATE} to fire for {sorted(overflowed)}", 15, firing)
    active = [
        a for a in stack.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == alerts.OVERFLOW_RATE
    ]
    for alert in active:
        assert alert["labels"]["severity"] == "warning"
        # Templates rendered with the alert's own labels: a link an on-call can click.
        assert f"var-service={alert['labels']['job']}" in alert["annotations"]["dashboard"]
        assert f"var-task_type={alert['labels'][TASK]}" in alert["annotations"]["dashboard"]
        assert "{{" not in alert["annotations"]["description"]

    # The CLI's forever demo (same seed) overflows disputes too.
    def cli_firing() -> bool:
        return any(
            a["labels"]["alertname"] == alerts.OVERFLOW_RATE
            and a["labels"]["job"] == CLI_SERVICE
            and a["labels"][TASK] == "dispute"
            and a["state"] == "firing"
            for a in stack.get("/api/v1/alerts")["alerts"]
        )

    support.wait(f"{alerts.OVERFLOW_RATE} to fire for the CLI demo's disputes", 20, cli_firing)
    # The ALERTS series carries the same state for dashboards to show.
    alerts_now = f'ALERTS{{alertname="{alerts.OVERFLOW_RATE}", alertstate="firing", job="{SERVICE}"}}'
    series = stack.get("/api/v1/query", query=alerts_now)["result"]  # now, not at the pinned time
    assert {s["metric"][TASK] for s in series} == overflowed
    # The dashboards' alert annotation query, as Grafana sends it for this service, shows them too.
    board = json.loads(DASHBOARDS[0].read_text(encoding="utf-8"))
    (annotation,) = board["annotations"]["list"]
    shown = stack.get("/api/v1/query", query=annotation["expr"].replace("$service", SERVICE))["result"]
    assert {
        s["metric"][TASK] for s in shown if s["metric"]["alertname"] == alerts.OVERFLOW_RATE
    } == overflowed
    # Telemetry is present: the absent alert is not active.
    assert not [
        a
        for a in stack.get("/api/v1/alerts")["alerts"]
        if a["labels"]["alertname"] == alerts.TELEMETRY_ABSENT
    ]


def _objective(task: str, kind: str = slo.OVERFLOW) -> slo.Objective:
    own = {o.task_type: o for o in TEST_OBJECTIVES if o.kind == kind}
    return own.get(task, own[slo.ANY_TASK_TYPE])


def test_the_fast_burn_page_fires_for_exactly_the_task_type_that_burns(stack: Stack) -> None:
    """Disputes overflow a few percent of their fits against a 99.9% objective: the page fires
    for them, with the objective and burn rate in its labels; no other task type pages."""
    overflowed = {task for (task, outcome) in stack.fits() if outcome == "overflow"}
    assert overflowed == {"dispute"}

    def paging() -> list[dict[str, Any]] | None:
        found = [
            a
            for a in stack.get("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alerts.OVERFLOW_FAST_BURN
            and a["labels"]["job"] == SERVICE
            and a["state"] == "firing"
        ]
        return found if {a["labels"][TASK] for a in found} == overflowed else None

    pages = support.wait(f"{alerts.OVERFLOW_FAST_BURN} to fire for {sorted(overflowed)}", 20, paging)
    for alert in pages:
        labels = alert["labels"]
        assert labels["severity"] == slo.PAGE
        assert labels["slo"] == "overflow-dispute" and labels["objective"] == "99.9%"
        assert labels["burn_rate"] in {q_number(b.factor) for b in slo.BURN_WINDOWS if b.severity == slo.PAGE}
        assert float(alert["value"]) > float(labels["burn_rate"])
        assert "{{" not in alert["annotations"]["description"]
        assert "var-task_type=dispute" in alert["annotations"]["dashboard"]
        assert f"service={SERVICE}" in alert["annotations"]["jaeger"]
        assert alert["annotations"]["runbook_url"].endswith("#" + alerts.OVERFLOW_FAST_BURN.lower())
    # The ceiling objective (70% of disputes) is not what burns here: no ceiling page for status.
    assert not [
        a
        for a in stack.get("/api/v1/alerts")["alerts"]
        if a["labels"]["alertname"] in (alerts.OVERFLOW_FAST_BURN, alerts.OVERFLOW_SLOW_BURN)
        and a["labels"][TASK] != "dispute"
    ]


def q_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _panel_expr(title: str) -> list[str]:
    """A panel's queries on the overview built for the test's rules (their windows), for the
    workload's service and every task type."""
    board = build_dashboards(STACK_SETTINGS)[f"{conventions.OVERVIEW_UID}.json"]
    for panel in _panels(board):
        if panel.get("title") == title:
            return [
                t["expr"].replace("$service", SERVICE).replace("$task_type", ".*") for t in panel["targets"]
            ]
    raise AssertionError(f"no panel {title!r}")


def _panels(board: Any) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", ())


def test_the_error_budget_panels_answer_with_the_workloads_figures(stack: Stack) -> None:
    """Budget left = 1 - overflowed/fits ÷ (1 - objective) per task type, from the workload's
    own counts; the burn rate and time left follow; who burns it lists disputes first."""
    fits = collections.Counter[str]()
    bad = collections.Counter[str]()
    for (task, outcome), count in stack.fits().items():
        fits[task] += count
        bad[task] += count if outcome == "overflow" else 0
    (left_expr,) = _panel_expr("Error budget left: overflow (share of fits)")
    left = {s["metric"][TASK]: _value(s) for s in stack.query(left_expr)}
    assert set(left) == set(fits)
    for task, total in fits.items():
        budget = _objective(task).error_budget
        used = bad[task] / total / budget
        if not bad[task]:
            assert left[task] == 1.0, task
            continue
        # The first overflow of a task type starts its series: Prometheus counts from the first
        # sample it scraped, so the used share may come out a scrape's worth short.
        assert 0.6 * used <= 1 - left[task] <= 1.05 * used, (task, left[task], used)
    burn = {
        s["metric"][TASK]: _value(s)
        for expr in _panel_expr("Overflow burn rate by window")
        for s in stack.query(expr)
    }
    assert burn["dispute"] > 14.4
    assert all(burn[t] == 0 for t in fits if not bad[t])
    (seconds_expr,) = _panel_expr("Time until the overflow budget is spent (at the last hour's burn)")
    seconds = {s["metric"][TASK]: _value(s) for s in stack.query(seconds_expr)}
    assert set(seconds) == {"dispute"}  # nothing else burns
    assert seconds["dispute"] == 0.0  # overspent: a 99.9% objective is no match for the workload
    hour = slo.burn_windows(STACK_SETTINGS.slo_burn_window)[0].long
    (who,) = _panel_expr(
        f"Who burns the overflow budget (burn rate over {hour}): click for the breakdown or the runs"
    )
    ranked = stack.query(who)
    assert ranked and ranked[0]["metric"][TASK] == "dispute"


# --- the dashboards -------------------------------------------------------------------


def test_the_dashboards_are_committed() -> None:
    assert DASHBOARDS, "no dashboards/*.json: run `otel-ctx dashboards build`"
    assert any(
        json.loads(p.read_text(encoding="utf-8")).get("uid") == conventions.OVERVIEW_UID for p in DASHBOARDS
    )


def test_every_panel_query_returns_plausible_series(stack: Stack) -> None:
    support.assert_panel_queries_answer(stack.query)


def test_the_round_panels_come_back_in_round_order_as_grafana_sorts_them(stack: Stack) -> None:
    """Grafana sorts the round field as text: the labels Prometheus returns sort as numbers do."""
    round_label = names.prometheus_label(names.ROUND)
    checked = 0
    for _, title, expr in support.panel_queries():
        if round_label not in expr or "by round" not in title.lower():
            continue
        if support.needs_distributions(expr):
            continue  # native histograms only: empty on this scrape path (tests/e2e/test_native.py has them)
        rounds = sorted({s["metric"][round_label] for s in stack.query(support.substitute(expr))})
        assert len(rounds) >= 10, (title, rounds)  # the workload's long tickets run past round 10
        assert rounds == sorted(rounds, key=lambda r: int(r.rstrip("+"))), (title, rounds)
        checked += 1
    assert checked >= 2


def test_panels_that_break_down_by_component_close_on_the_estimate(stack: Stack) -> None:
    """Where a panel's result has every summed component and the estimate, they agree.

    Within 10%, not exactly: rate() extrapolates each series on its own, and a series born
    inside the window extrapolates towards zero by its own first value, so the lines of one
    request extrapolate differently over this test's seconds-long workload. A line left out
    or counted twice (the transcript on top of its roles) is off by far more. The raw counters
    close exactly (test_components_add_up_to_the_estimate...), and over series older than
    the window the panels close within 1% (the fleet test).
    """
    checked = 0
    for dashboard, title, expr in support.panel_queries():
        groups: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
        for sample in stack.query(support.substitute(expr)):
            labels = dict(sample["metric"])
            component = labels.pop(COMPONENT, None)
            if component is not None:
                groups.setdefault(tuple(sorted(labels.items())), {})[component] = _value(sample)
        for key, by_component in groups.items():
            if names.COMPONENT_ESTIMATED in by_component and set(names.SUMMED_COMPONENTS) <= set(
                by_component
            ):
                summed = sum(by_component[c] for c in names.SUMMED_COMPONENTS)
                assert summed == pytest.approx(by_component[names.COMPONENT_ESTIMATED], rel=0.1), (
                    dashboard,
                    title,
                    key,
                )
                checked += 1
    assert checked, "no panel shows the components next to the estimate"


def test_the_who_trims_panel_answers_with_provider_and_framework_trims(stack: Stack) -> None:
    """The performer panel's query, as the dashboard ships it, for a workload where the provider
    and the framework trim (and otel-ctx's own compaction in the support-desk workload)."""
    title = "Who trims the window: tokens removed per round"
    (expr,) = [e for _board, t, e in support.panel_queries() if t == title]
    performer = names.prometheus_label(names.TRIM_PERFORMER)
    removed: dict[str, float] = collections.defaultdict(float)
    for sample in stack.query(support.substitute(expr)):
        removed[sample["metric"][performer]] += _value(sample)
    assert removed[names.PERFORMER_PROVIDER] > 0, removed
    assert removed[names.PERFORMER_FRAMEWORK] > 0, removed
    assert removed[names.PERFORMER_OTEL_CTX] > 0, removed
    assert set(removed) <= set(names.PERFORMERS)  # a bounded label


def test_every_template_variable_finds_values(stack: Stack) -> None:
    for path in DASHBOARDS:
        model = json.loads(path.read_text(encoding="utf-8"))
        for variable in (model.get("templating") or {}).get("list") or []:
            if variable.get("type") != "query":
                continue
            query = variable.get("query")
            text = query.get("query") if isinstance(query, dict) else query
            match = re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)", str(text).strip())
            assert match, f"{path.name}: variable {variable.get('name')} is not label_values(): {text}"
            selector, label = support.substitute(match.group(1)), match.group(2)
            values = stack.get(f"/api/v1/label/{label}/values", **{"match[]": selector})
            assert values, f"{path.name}: variable {variable.get('name')} finds no {label}"
            if label == "job":
                assert SERVICE in values
                assert set(values) <= {SERVICE, CLI_SERVICE, TRIMS_SERVICE}


# --- the ticket view: run metrics, their alerts, the advisor ------------------------------

RESOLUTION = names.prometheus_label(names.RESOLUTION)
STOP = names.prometheus_label(names.STOP)


def _runs(stack: Stack) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = stack.report["runs"]
    return runs


def test_run_metrics_equal_what_the_workload_did(stack: Stack) -> None:
    runs = _runs(stack)
    assert len(runs) == stack.report["tickets"]
    expected_counts: dict[tuple[str, str], int] = {}
    for r in runs:
        key = (r["task_type"], r["resolution"])
        expected_counts[key] = expected_counts.get(key, 0) + 1
    # The workload resolves, escalates (overflow and ceiling) and abandons tickets.
    assert {"resolved", "escalated", "abandoned"} <= {r["resolution"] for r in runs}
    assert {"overflow", "ceiling"} <= {r["stop"] for r in runs}
    counts = stack.query(
        f'sum by ({TASK}, {RESOLUTION}) ({names.RUN_TOKENS.series("_count")}{{job="{SERVICE}"}})'
    )
    got = {(s["metric"][TASK], s["metric"][RESOLUTION]): round(_value(s)) for s in counts}
    assert got == expected_counts
    # Every resolution label is one of the bounded set.
    assert {key[1] for key in got} <= set(names.RESOLUTIONS)
    # Why runs stopped is on the ceiling-utilization histogram (every desk policy has a ceiling).
    by_stop = stack.query(
        f'sum by ({STOP}) ({names.RUN_CEILING_UTILIZATION.series("_count")}{{job="{SERVICE}"}})'
    )
    stops_seen = {s["metric"][STOP]: round(_value(s)) for s in by_stop}
    assert stops_seen == dict(collections.Counter(r["stop"] for r in runs))

    def per_task(expr: str) -> dict[str, float]:
        return {s["metric"][TASK]: _value(s) for s in stack.query(expr)}

    tokens = per_task(f'sum by ({TASK}) ({names.RUN_TOKENS.series("_sum")}{{job="{SERVICE}"}})')
    cost = per_task(f'sum by ({TASK}) ({names.RUN_COST.series("_sum")}{{job="{SERVICE}"}})')
    stops = per_task(f'sum by ({TASK}) ({names.CEILING_STOPS.prometheus}{{job="{SERVICE}"}})')
    for task in {r["task_type"] for r in runs}:
        mine = [r for r in runs if r["task_type"] == task]
        assert tokens[task] == sum(r["tokens"] for r in mine)
        assert cost[task] == pytest.approx(sum(r["cost"] for r in mine), rel=1e-9)
        assert stops[task] == sum(r["stop"] == "ceiling" for r in mine)


def test_the_ticket_alerts_fire_where_the_workload_says(stack: Stack) -> None:
    runs = _runs(stack)
    stopped = {r["task_type"] for r in runs if r["stop"] == "ceiling"}
    assert stopped == {"dispute"}
    signals = alerts.signals(
        alerts.AlertSettings.fast(WINDOW, ceiling_window=TICKET_WINDOW, cost_window=TICKET_WINDOW)
    )
    shares = {
        s["metric"][TASK]: _value(s)
        for s in stack.query(signals[alerts.CEILING_STOP_RATE])
        if s["metric"]["job"] == SERVICE
    }
    assert {task for task, share in shares.items() if share > 0} == stopped
    assert all(0 <= v <= 1 for v in shares.values()), shares
    p95 = {
        s["metric"][TASK]: _value(s)
        for s in stack.query(signals[alerts.COST_PER_TICKET_HIGH])
        if s["metric"]["job"] == SERVICE
    }
    assert set(p95) == {r["task_type"] for r in runs}
    # Above the threshold: the task types whose p95 ticket (from the workload) is in a bucket above it.
    costly = {task for task, value in p95.items() if value > TEST_COST_THRESHOLD}
    assert costly == {"dispute"}

    def firing(alert: str) -> set[str]:
        return {
            a["labels"][TASK]
            for a in stack.get("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alert and a["labels"]["job"] == SERVICE and a["state"] == "firing"
        }

    support.wait(
        f"{alerts.CEILING_STOP_RATE} to fire for {sorted(stopped)}",
        15,
        lambda: firing(alerts.CEILING_STOP_RATE) == stopped or None,
    )
    support.wait(
        f"{alerts.COST_PER_TICKET_HIGH} to fire for dispute",
        15,
        lambda: firing(alerts.COST_PER_TICKET_HIGH) == costly or None,
    )
    for alert in stack.get("/api/v1/alerts")["alerts"]:
        if alert["labels"]["alertname"] in (alerts.CEILING_STOP_RATE, alerts.COST_PER_TICKET_HIGH):
            assert f"/d/{conventions.COST_UID}" in alert["annotations"]["dashboard"]
            assert "{{" not in alert["annotations"]["description"]


def _bucket_of(value_rank: float, values: list[float], bounds: tuple[float, ...]) -> tuple[float, float]:
    """The (lower, upper] histogram bucket that holds the quantile of rank ``value_rank``."""
    lower = 0.0
    for bound in bounds:
        if sum(v <= bound for v in values) >= value_rank:
            return lower, bound
        lower = bound
    return lower, math.inf


def test_the_advisor_reads_the_right_answers_from_prometheus(stack: Stack) -> None:
    """`otel-ctx advise` on the workload: every figure against what the test computes from the report."""
    from otel_ctx.cli import _advise as advise
    from otel_ctx.demo._presets import SUPPORT_DESK_LIMITS, SUPPORT_DESK_RESERVE

    max_overflow, max_compaction = 0.05, 0.2
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from otel_ctx.cli import main; main()",
            "advise",
            f"--prometheus={stack.base}",
            "--window=all",
            f"--service={SERVICE}",
            f"--max-overflow={max_overflow}",
            f"--max-compaction={max_compaction}",
            f"--at={stack.at}",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    advice = {a["task_type"]: a for a in json.loads(proc.stdout)["task_types"]}
    rounds: list[dict[str, Any]] = stack.report["rounds"]
    runs = _runs(stack)
    assert set(advice) == {r["task_type"] for r in rounds}
    for task, a in advice.items():
        mine = [r for r in rounds if r["task_type"] == task]
        n = len(mine)
        n_outcome = {o: sum(r["outcome"] == o for r in mine) for o in names.OUTCOMES}
        assert a["requests"] == n
        assert a["overflow_rate"] == pytest.approx(n_outcome["overflow"] / n)
        assert a["compaction_rate"] == pytest.approx(n_outcome["compacted"] / n)
        assert a["limit"] == SUPPORT_DESK_LIMITS[task]
        assert a["budget"] == SUPPORT_DESK_LIMITS[task] - SUPPORT_DESK_RESERVE
        tickets = [r for r in runs if r["task_type"] == task]
        assert a["tickets"] == len(tickets)
        assert a["cost_per_ticket"] == pytest.approx(sum(r["cost"] for r in tickets) / len(tickets), rel=1e-9)
        estimates = [float(r["estimated"]) for r in mine]
        # The prompt's quantiles come from the utilization buckets scaled by the budget.
        bounds = tuple(b * a["budget"] for b in names.UTILIZATION_BUCKETS)
        for q, got in ((0.5, a["p50_prompt"]), (0.95, a["p95_prompt"])):
            lower, upper = _bucket_of(q * n, estimates, bounds)
            assert lower < got <= upper, (task, q, got, lower, upper)

        # The what-ifs: counted from every round's utilization at each candidate budget.
        util = {o: [r["utilization"] for r in mine if r["outcome"] == o] for o in names.OUTCOMES}
        expected_ok = []
        assert [w["ratio"] for w in a["what_ifs"]] == list(advise.CANDIDATE_RATIOS)
        for w in a["what_ifs"]:
            r = w["ratio"]
            assert w["budget"] == round(a["budget"] * r)
            assert w["limit"] == w["budget"] + SUPPORT_DESK_RESERVE
            if r < 1:
                compacts = n_outcome["compacted"] + n_outcome["overflow"] + sum(u > r for u in util["fit"])
                overflows = n_outcome["overflow"]
            else:
                held = sum(u <= r for u in util["overflow"])
                compacts = n_outcome["compacted"] + n_outcome["overflow"] - held
                overflows = n_outcome["overflow"] - held
            assert w["compaction_rate"] == pytest.approx(compacts / n), (task, r)
            assert w["overflow_rate"] == pytest.approx(overflows / n), (task, r)
            if compacts / n <= max_compaction and overflows / n <= max_overflow:
                expected_ok.append(w["limit"])
        costs = [w["cost_per_ticket"] for w in a["what_ifs"]]
        today = a["what_ifs"][advise.CANDIDATE_RATIOS.index(1.0)]
        assert today["cost_per_ticket"] == pytest.approx(a["cost_per_ticket"], rel=1e-9)
        assert costs == sorted(costs), (task, costs)  # a bigger budget never costs less
        assert a["suggested_limit"] == (min(expected_ok) if expected_ok else None), task
