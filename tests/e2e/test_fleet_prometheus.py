"""A fleet against the real Prometheus: a hundred agent processes' series, every dashboard query and alert.

``tests/fleet_workload.py`` serves a hundred agents' worth of otel-ctx metrics (real
emitters, each at the full spread of label sets) as a hundred scrape targets of one
service, each with its own ``instance`` label; a real Prometheus scrapes them with the
shipped recording and alert rules loaded (the fast variant: same expressions, five-minute
windows). The test prints the series Prometheus holds and every dashboard query's latency
(figures to read, never asserted), and checks the answers: the per-service sums, the
overflow share across the fleet, the alerts.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import support
import yaml
from test_prometheus import Stack, _value

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
JOB = "fleet-agent"
AGENTS = 100
#: The rules' window: the workload is one burst, and the alert must still see it after the
#: dashboard queries have run (the panels are evaluated at the pinned time, one minute wide).
WINDOW = "5m"
SCRAPE = "2s"
#: Between the fleet's dispute overflow share (6.25%) and the share on the agents that
#: overflow at all (12.5%): an alert summed per service fires, one per process would too;
#: the signal's value tells them apart.
OVERFLOW_RATIO = 0.05

TASK = names.prometheus_label(names.TASK_TYPE)
OUTCOME = names.prometheus_label(names.OUTCOME)
COMPONENT = names.prometheus_label(names.COMPONENT)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = support.prometheus_tool("prometheus")
    tmp = tmp_path_factory.mktemp("fleet")
    prom_port, agents_port = support.free_port(), support.free_port()
    rules = alerts.write(tmp / "rules.yml", alerts.AlertSettings.fast(WINDOW, overflow_ratio=OVERFLOW_RATIO))
    config = {
        "global": {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE, "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": JOB,
                # One server, a path per agent; the instance label tells the agents apart.
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{agents_port}"],
                        "labels": {"__metrics_path__": f"/metrics/{i}", "instance": f"agent-{i}"},
                    }
                    for i in range(AGENTS)
                ],
            }
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    report_path, start_file = tmp / "report.json", tmp / "start"
    logs = {name: (tmp / f"{name}.log").open("wb") for name in ("agents", "prometheus")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    procs: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    try:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).parents[1] / "fleet_workload.py"),
                    f"--port={agents_port}",
                    f"--agents={AGENTS}",
                    f"--report={report_path}",
                    f"--start-file={start_file}",
                    "--seconds=240",
                ],
                stdout=logs["agents"],
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                stdout=logs["prometheus"],
                stderr=subprocess.STDOUT,
            )
        )
        stack = Stack(f"http://127.0.0.1:{prom_port}", {}, timeout=90.0)

        def alive() -> None:
            for proc, name in zip(procs, logs):
                if proc.poll() is not None:
                    log = (tmp / f"{name}.log").read_text(errors="replace")[-3000:]
                    pytest.fail(f"{name} exited with {proc.returncode}:\n{log}")

        def all_scraped() -> bool:
            alive()
            got = stack.query(f'count(count by (instance) ({names.FITS.prometheus}{{job="{JOB}"}}))')
            return bool(got) and int(_value(got[0])) == AGENTS

        def ready() -> bool:
            alive()
            with urllib.request.urlopen(f"{stack.base}/-/ready", timeout=2) as response:
                return response.status == 200

        support.wait("Prometheus to be ready", 30, ready)
        # Fits start only after every agent was scraped once: rate() needs the values before them.
        support.wait(f"Prometheus to scrape all {AGENTS} agents", 150, all_scraped)
        start_file.touch()

        def report() -> dict[str, Any] | None:
            alive()
            loaded: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
            return loaded

        stack.report = support.wait("the agents to run their workload", 60, report)
        full_spread = int(stack.report["full_spread_fits"])
        total = full_spread + sum(f["count"] for f in stack.report["fits"])

        def final_scrape() -> bool:
            got = stack.query(f'sum({names.FITS.prometheus}{{job="{JOB}"}})')
            return bool(got) and int(_value(got[0])) == total

        support.wait("Prometheus to scrape every agent's last fits", 30, final_scrape)
        # Two rule evaluations later, every recorded rate includes the last scrape.
        time.sleep(2)
        stack.at = time.time()
        print(f"\nfleet: {AGENTS} agents ready and scraped in {time.monotonic() - started:.0f} s")
        yield stack
    finally:
        for proc in reversed(procs):
            support.stop(proc)
        for log in logs.values():
            log.close()


def _dispute_share(stack: Stack) -> float:
    fits = {(f["task_type"], f["outcome"]): f["count"] for f in stack.report["fits"]}
    dispute = sum(n for (task, _), n in fits.items() if task == "dispute")
    return fits.get(("dispute", "overflow"), 0) / dispute


def test_the_fleet_series_are_what_a_hundred_processes_make(fleet: Stack) -> None:
    started = time.perf_counter()
    tsdb = fleet.get("/api/v1/status/tsdb")
    print(f"\nfleet: TSDB status in {time.perf_counter() - started:.1f} s")
    head = int(tsdb["headStats"]["numSeries"])
    ours = int(_value(fleet.query('count({__name__=~"context_budget_.*"})')[0]))
    per_agent = {
        s["metric"]["instance"]: _value(s)
        for s in fleet.query('count by (instance) ({__name__=~"context_budget_.*"})')
    }
    # The per-round metrics, at full spread on every agent; the per-run ones vary with the runs.
    per_round = {
        s["metric"]["instance"]: _value(s)
        for s in fleet.query(
            'count by (instance) ({__name__=~"context_budget_.*", '
            '__name__!~"context_budget_(run_|ceiling).*"})'
        )
    }
    recorded = int(_value(fleet.query('count({__name__=~"job:.*"})')[0]))
    print(
        f"\nfleet series: {head} in Prometheus's head, {ours} otel-ctx series from {len(per_agent)} "
        f"agents ({ours / len(per_agent):.0f} each), {recorded} recorded-rule series"
    )
    print(
        f"fleet series per agent: {min(per_agent.values()):.0f}-{max(per_agent.values()):.0f} in all, "
        f"{min(per_round.values()):.0f} of them per-round metrics at full spread"
    )
    assert len(per_agent) == AGENTS
    # Every agent serves the full spread of the per-round metrics, within the per-process budget.
    assert len(set(per_round.values())) == 1
    assert next(iter(per_round.values())) <= 1_500
    # The recording rules fold the processes away: one series per label set, not a hundred.
    assert recorded * 10 < ours


def test_every_dashboard_query_answers_over_the_fleet_and_its_latency_is_reported(fleet: Stack) -> None:
    rows = []
    empty = []
    for dashboard, title, expr in support.panel_queries():
        query = support.substitute(expr)
        started = time.perf_counter()
        result = fleet.query(query)
        elapsed = time.perf_counter() - started
        rows.append((elapsed, dashboard, title, len(result)))
        if support.needs_distributions(expr):
            # Scraped from the SDK: no native histograms, so nothing rather than another number.
            assert not result, (dashboard, title)
            continue
        if not result:
            empty.append(f"{dashboard}: {title}")
        assert all(math.isfinite(_value(s)) and _value(s) >= 0 for s in result), (title, result[:3])
    print("\nfleet dashboard query latency (loaded 2-core machine; read, not asserted):")
    for elapsed, dashboard, title, count in sorted(rows, reverse=True):
        print(f"  {elapsed * 1000:8.1f} ms  {count:4d} series  {dashboard}: {title[:70]}")
    assert not empty, "panel queries with no data over the fleet:\n" + "\n".join(empty)


def test_the_overflow_panels_show_the_fleet_share(fleet: Stack) -> None:
    """Summed over a hundred processes: the dispute share is the fleet's, the others 0."""
    expected = _dispute_share(fleet)
    fits = {(f["task_type"], f["outcome"]): f["count"] for f in fleet.report["fits"]}
    overall = fits[("dispute", "overflow")] / sum(fits.values())
    checked = 0
    for dashboard, title, expr in support.panel_queries():
        if not title.startswith("Overflow rate"):
            continue
        result = fleet.query(support.substitute(expr))
        checked += 1
        if not any(TASK in s["metric"] for s in result):  # the drill-down's one number: all task types
            (only,) = result
            assert _value(only) == pytest.approx(overall, rel=0.1), (dashboard, title)
            continue
        shares = {s["metric"][TASK]: _value(s) for s in result}
        assert set(shares) == {"dispute", "returns", "status"}, (dashboard, title)
        # rate() extrapolates each agent's series on its own: close to the counted share, not equal.
        assert shares["dispute"] == pytest.approx(expected, rel=0.1), (dashboard, title)
        assert shares["returns"] == shares["status"] == 0, (dashboard, title)
    assert checked >= 3


def test_the_breakdown_still_closes_over_the_fleet(fleet: Stack) -> None:
    for _dashboard, title, expr in support.panel_queries():
        if not title.startswith("Mean breakdown by task type"):
            continue
        by_task: dict[str, dict[str, float]] = {}
        for s in fleet.query(support.substitute(expr)):
            by_task.setdefault(s["metric"][TASK], {})[s["metric"][COMPONENT]] = _value(s)
        assert set(by_task) == {"dispute", "returns", "status"}
        for task, lines in by_task.items():
            summed = sum(lines[c] for c in names.SUMMED_COMPONENTS)
            assert summed == pytest.approx(lines[names.COMPONENT_ESTIMATED], rel=0.01), task
        return
    pytest.fail("no breakdown matrix panel")


def test_the_alerts_fire_per_service_for_the_fleet(fleet: Stack) -> None:
    expected = _dispute_share(fleet)
    signal = alerts.signals(alerts.AlertSettings.fast(WINDOW))[alerts.OVERFLOW_RATE]
    values = {s["metric"][TASK]: _value(s) for s in fleet.query(signal)}
    # The fleet's share, not the 12.5% of the agents that overflow: the alert is per service.
    assert values["dispute"] == pytest.approx(expected, rel=0.1)

    def firing() -> list[dict[str, Any]] | None:
        found = [
            a
            for a in fleet.get("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alerts.OVERFLOW_RATE and a["state"] == "firing"
        ]
        return found or None

    active = support.wait(f"{alerts.OVERFLOW_RATE} to fire", 15, firing)
    assert [(a["labels"]["job"], a["labels"][TASK]) for a in active] == [(JOB, "dispute")]
    assert "instance" not in active[0]["labels"]  # one alert for the service, not one per process
    every = fleet.get("/api/v1/alerts")["alerts"]
    assert not [a for a in every if a["labels"]["alertname"] == alerts.TELEMETRY_ABSENT]
    for rule in [r for r in alerts.build()["groups"][0]["rules"] if "alert" in r]:
        started = time.perf_counter()
        result = fleet.query(rule["expr"])
        print(f"\nfleet alert expression {rule['alert']}: {(time.perf_counter() - started) * 1000:.1f} ms")
        assert all(math.isfinite(_value(s)) for s in result), rule["alert"]


def test_the_agents_serve_through_the_sdk_exporter(fleet: Stack) -> None:
    """The targets are the SDK's own Prometheus exposition, not a hand-written one."""
    got = fleet.query(f'count(target_info{{job="{JOB}"}})')
    assert got and int(_value(got[0])) == AGENTS
    body = urllib.request.urlopen(f"{fleet.base}/api/v1/targets", timeout=10).read()
    targets = json.loads(body)["data"]["activeTargets"]
    assert len({t["labels"]["instance"] for t in targets}) == AGENTS
