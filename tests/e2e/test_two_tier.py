"""The fleet's trace path for real: agents → a gateway Collector → two tail-sampling Collectors → Jaeger.

Tail sampling decides on a whole trace, so a fleet with more than one sampling Collector must
bring every span of a trace to the same one. The gateway tier (``stack/otelcol-gateway.yaml``)
does that with the load-balancing exporter, routing spans by trace id over a static list of
tier-2 Collectors; each of those runs the stack's own ``stack/otelcol.yaml`` unchanged. Every
server is the one ``make servers`` builds (stack/build-servers.sh); as in
``tests/e2e/test_collector.py``, only the addresses are rendered to 127.0.0.1 ports, and each
Collector gets one more config file that turns on its own metrics (a scrape port), so the test
can read what each Collector received and decided.

The workload (``tests/e2e_workload.py --otlp --span-ids``) runs a thousand support-desk tickets
(each ticket one trace of 2 to 12 spans; some overflow, some hit their run ceiling) and reports
the ids of every span each run ended with. The test checks:

- every overflowed or ceiling-stopped run is in Jaeger with every span it emitted;
- of the other runs, exactly the ones the probabilistic policy's hash keeps are in Jaeger, each
  whole, and their number is within four standard deviations of the configured share (binomial);
- both tier-2 Collectors received spans, every trace was decided by one of them only (their
  trace counts add up to the runs, not more), and their span counts add up to what the agent sent;
- the exemplars Prometheus stores from the tier-2 Collector's remote write (what the dashboards'
  exemplar links open) resolve in Jaeger exactly when their run was kept.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import support
import yaml
from test_collector import (
    CEILING_STOP,
    COLLECTOR_CONFIG,
    SAMPLE_PERCENT_VARIABLE,
    Ports,
    lay_out,
    probabilistic_keeps,
    render,
)

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts

ROOT = support.ROOT
GATEWAY_CONFIG = ROOT / "stack" / "otelcol-gateway.yaml"
GATEWAY = "otel-gateway"
SERVICE = "otel-ctx-e2e-two-tier"
#: Seed 5's first thousand tickets: 36 overflow and 30 others hit their run ceiling.
WORKLOAD_SEED = 5
WORKLOAD_TICKETS = 1000
#: The workload stops early after this long (the test then fails: the share's n would differ).
WORKLOAD_SECONDS = 90.0
#: The share of the other runs the tier-2 Collectors keep in this test (the shipped default is
#: 10%). Of the 934 other runs: 233.5 expected, a standard deviation of 13.2.
SAMPLE_PERCENT = 25
#: How far from the expected share the kept count may fall, in standard deviations.
SIGMAS = 4
#: The Collector's own metrics this test reads (Prometheus names, without a _total suffix).
ACCEPTED_SPANS = "otelcol_receiver_accepted_spans"
SENT_SPANS = "otelcol_exporter_sent_spans"
NEW_TRACES = "otelcol_processor_tail_sampling_new_trace_id_received"
DECIDED_TRACES = "otelcol_processor_tail_sampling_global_count_traces_sampled"


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def tier2_hosts(gateway: dict[str, Any]) -> list[str]:
    """The tier-2 Collectors the gateway routes traces to: its static resolver's host names."""
    (exporter,) = gateway["service"]["pipelines"]["traces"]["exporters"]
    hostnames: list[str] = gateway["exporters"][exporter]["resolver"]["static"]["hostnames"]
    return [h.rpartition(":")[0] for h in hostnames]


def telemetry_overlay(port: int) -> str:
    """A second config file for a Collector: its own metrics on, served on 127.0.0.1:``port``."""
    return yaml.safe_dump(
        {
            "service": {
                "telemetry": {
                    "metrics": {
                        "level": "detailed",
                        "readers": [
                            {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": port}}}}
                        ],
                    }
                }
            }
        }
    )


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A Prometheus text page as name -> [(labels, value)], ``_total`` dropped from counter names."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name, _, rest = series.partition("{")
        labels = dict(
            (k, v.strip('"'))
            for k, _, v in (pair.partition("=") for pair in rest.rstrip("}").split(",") if pair)
        )
        found.setdefault(name.removesuffix("_total"), []).append((labels, float(value)))
    return found


def total(metrics: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> int:
    return round(
        sum(v for got, v in metrics.get(name, []) if all(got.get(k) == want for k, want in labels.items()))
    )


@dataclass
class Fleet:
    jaeger: str
    prometheus: str
    report: dict[str, Any]
    tier2_config: dict[str, Any]
    #: Each Collector's own metrics page (the gateway's and each tier-2 host's).
    telemetry: dict[str, str]
    started_ms: int
    #: The trace ids of the kept runs and their span ids, as Jaeger returned them.
    in_jaeger: dict[int, set[int]] = field(default_factory=dict)

    def runs(self) -> dict[int, dict[str, Any]]:
        return {int(r["trace_id"], 16): r for r in self.report["runs"]}

    def must_keep(self) -> set[int]:
        return {t for t, r in self.runs().items() if r["overflowed"] or r["stop"] == CEILING_STOP}

    def kept_by_policy(self) -> set[int]:
        (share,) = [
            p["probabilistic"]
            for p in self.tier2_config["processors"]["tail_sampling"]["policies"]
            if p["type"] == "probabilistic"
        ]
        return self.must_keep() | {
            t
            for t, r in self.runs().items()
            if probabilistic_keeps(r["trace_id"], share["hash_salt"], SAMPLE_PERCENT)
        }

    def jaeger_traces(self) -> dict[int, set[int]]:
        """Every trace Jaeger holds for the workload's service, with its span ids."""
        url = f"{self.jaeger}/api/traces?" + urllib.parse.urlencode(
            {"service": SERVICE, "limit": str(2 * WORKLOAD_TICKETS)}
        )
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.loads(response.read())
        return {int(t["traceID"], 16): {int(s["spanID"], 16) for s in t["spans"]} for t in body["data"] or []}

    def jaeger_has(self, trace_id: str) -> bool:
        try:
            with urllib.request.urlopen(f"{self.jaeger}/api/traces/{trace_id}", timeout=10) as response:
                return bool(json.loads(response.read())["data"])
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return False
            raise

    def prom(self, path: str, **params: str) -> Any:
        url = f"{self.prometheus}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    binaries = support.built_servers("otelcol", "jaeger", "prometheus")
    tmp = tmp_path_factory.mktemp("two-tier-e2e")
    ports = Ports()
    gateway_config = _load(GATEWAY_CONFIG)
    hosts = tier2_hosts(gateway_config)
    services = [*_load(ROOT / "docker-compose.yml")["services"], GATEWAY, *hosts]
    jaeger_base = f"http://127.0.0.1:{ports('jaeger', 16686)}"
    prom_base = f"http://127.0.0.1:{ports('prometheus', 9090)}"
    rules = alerts.write(tmp / "fast-rules.yml", alerts.AlertSettings.fast(support.E2E_WINDOW))
    # Jaeger and Prometheus as compose mounts them (the single Collector's files are unused here).
    laid = lay_out(tmp, ports, rules)
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}

    def collector_files(name: str, source: Path) -> list[str]:
        folder = tmp / name
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / source.name
        config.write_text(render(source.read_text(encoding="utf-8"), name, ports, services), encoding="utf-8")
        overlay = folder / "telemetry.yaml"
        overlay.write_text(telemetry_overlay(ports(name, 8888)), encoding="utf-8")
        return [f"--config={config}", f"--config={overlay}"]

    telemetry = {name: f"http://127.0.0.1:{ports(name, 8888)}/metrics" for name in [GATEWAY, *hosts]}
    report_path = tmp / "report.json"
    children = support.Children(tmp)
    procs, check_alive, ok = children.procs, children.check_alive, children.ok

    try:
        procs.append(
            ("jaeger", _start([str(binaries["jaeger"]), *laid["jaeger"].command], tmp / "jaeger.log"))
        )
        procs.append(
            (
                "prometheus",
                _start(
                    [
                        str(binaries["prometheus"]),
                        *laid["prometheus"].command,
                        f"--web.listen-address=127.0.0.1:{ports('prometheus', 9090)}",
                    ],
                    tmp / "prometheus.log",
                ),
            )
        )
        # Tier 2 first, so the gateway's first spans find their Collectors listening.
        for host in hosts:
            procs.append(
                (
                    host,
                    _start(
                        [str(binaries["otelcol"]), *collector_files(host, COLLECTOR_CONFIG)],
                        tmp / f"{host}.log",
                        {**clean_env, SAMPLE_PERCENT_VARIABLE: str(SAMPLE_PERCENT)},
                    ),
                )
            )
        support.wait("Jaeger's query API", 60, lambda: ok(f"{jaeger_base}/api/services"))
        for health in [f"http://127.0.0.1:{ports(host, 13133)}/" for host in hosts]:
            support.wait(f"a tier-2 Collector's health check ({health})", 60, functools.partial(ok, health))
        procs.append(
            (
                GATEWAY,
                _start(
                    [str(binaries["otelcol"]), *collector_files(GATEWAY, GATEWAY_CONFIG)],
                    tmp / f"{GATEWAY}.log",
                    clean_env,
                ),
            )
        )
        support.wait(
            "the gateway's health check", 60, lambda: ok(f"http://127.0.0.1:{ports(GATEWAY, 13133)}/")
        )
        support.wait("Prometheus to be ready", 30, lambda: ok(f"{prom_base}/-/ready"))

        started_ms = int(time.time() * 1000)
        procs.append(
            (
                "workload",
                _start(
                    [
                        sys.executable,
                        str(Path(__file__).parents[1] / "e2e_workload.py"),
                        f"--otlp=http://127.0.0.1:{ports(GATEWAY, 4317)}",
                        f"--service={SERVICE}",
                        f"--seed={WORKLOAD_SEED}",
                        f"--tickets={WORKLOAD_TICKETS}",
                        f"--seconds={WORKLOAD_SECONDS}",
                        "--rate=1000",
                        "--span-ids",
                        f"--report={report_path}",
                    ],
                    tmp / "workload.log",
                    clean_env,
                ),
            )
        )

        def report() -> dict[str, Any] | None:
            check_alive()
            loaded: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
            return loaded

        done = support.wait("the workload to finish its tickets", WORKLOAD_SECONDS + 30, report)
        assert done["tickets"] == WORKLOAD_TICKETS, "the workload ran out of time: the share's n differs"
        found = Fleet(
            jaeger_base,
            prom_base,
            done,
            _load(tmp / hosts[0] / COLLECTOR_CONFIG.name),
            telemetry,
            started_ms,
        )
        kept = found.kept_by_policy()
        # A trace is decided two seconds after its root span arrives; spans leave the agent
        # within five seconds (its batch processor's delay).
        support.wait("Jaeger to hold every kept run", 60, lambda: found.jaeger_traces().keys() >= kept)
        # A little longer shows nothing more arrives: the decisions are final.
        time.sleep(3)
        found.in_jaeger = found.jaeger_traces()
        yield found
    finally:
        for _, proc in reversed(procs):
            support.stop(proc)


# --- the configs (fast) --------------------------------------------------------------------------


def test_the_gateway_routes_traces_by_trace_id_and_metrics_by_resource_to_the_same_tier() -> None:
    gateway = _load(GATEWAY_CONFIG)
    pipelines = gateway["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics"}
    (traces,) = pipelines["traces"]["exporters"]
    (metrics,) = pipelines["metrics"]["exporters"]
    assert traces.split("/")[0] == metrics.split("/")[0] == "load_balancing"
    assert gateway["exporters"][traces]["routing_key"] == "traceID"
    # A process's series through one Collector: two writing one series would interleave its samples.
    assert gateway["exporters"][metrics]["routing_key"] == "resource"
    assert (
        gateway["exporters"][traces]["resolver"]["static"]["hostnames"]
        == gateway["exporters"][metrics]["resolver"]["static"]["hostnames"]
    )
    hosts = tier2_hosts(gateway)
    assert len(hosts) == len(set(hosts)) >= 2
    # The gateway samples nothing: every span it receives is routed on.
    assert "tail_sampling" not in gateway.get("processors", {})
    # Tier 2 is the stack's Collector: OTLP in on the port the gateway dials.
    tier2 = _load(COLLECTOR_CONFIG)
    port = tier2["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].rpartition(":")[2]
    assert all(
        h.endswith(f":{port}") for h in gateway["exporters"][traces]["resolver"]["static"]["hostnames"]
    )


def test_the_collector_validates_the_gateway_config_and_the_telemetry_overlay(tmp_path: Path) -> None:
    otelcol = support.built_servers("otelcol")["otelcol"]
    overlay = tmp_path / "telemetry.yaml"
    overlay.write_text(telemetry_overlay(support.free_port()), encoding="utf-8")
    for configs in ([GATEWAY_CONFIG], [GATEWAY_CONFIG, overlay], [COLLECTOR_CONFIG, overlay]):
        result = subprocess.run(
            [str(otelcol), "validate", *(f"--config={c}" for c in configs)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, (configs, result.stdout + result.stderr)


# --- the fleet running ---------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_every_overflowed_or_ceiling_stopped_run_arrives_whole(fleet: Fleet) -> None:
    runs = fleet.runs()
    must = fleet.must_keep()
    overflowed = {t for t, r in runs.items() if r["overflowed"]}
    stopped = {t for t, r in runs.items() if r["stop"] == CEILING_STOP}
    assert overflowed and stopped, "the workload must overflow and hit a run ceiling"
    missing = must - fleet.in_jaeger.keys()
    partial = {
        t: len(runs[t]["spans"]) - len(fleet.in_jaeger[t])
        for t in must & fleet.in_jaeger.keys()
        if fleet.in_jaeger[t] != {int(s, 16) for s in runs[t]["spans"]}
    }
    print(
        f"two tiers: {len(overflowed)} overflowed and {len(stopped)} ceiling-stopped runs of "
        f"{len(runs)}, {sum(len(runs[t]['spans']) for t in must)} spans; missing {len(missing)}, "
        f"incomplete {len(partial)}"
    )
    assert not missing, sorted(f"{t:032x}" for t in missing)
    assert not partial, partial


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_share_of_the_other_runs_is_kept_whole_and_within_its_binomial_bounds(fleet: Fleet) -> None:
    runs = fleet.runs()
    rest = runs.keys() - fleet.must_keep()
    kept = fleet.kept_by_policy()
    # Exactly the runs the policy's hash keeps, whichever tier-2 Collector decided them.
    assert fleet.in_jaeger.keys() == kept, (
        sorted(f"{t:032x}" for t in fleet.in_jaeger.keys() - kept),
        sorted(f"{t:032x}" for t in kept - fleet.in_jaeger.keys()),
    )
    for trace_id in kept:
        assert fleet.in_jaeger[trace_id] == {int(s, 16) for s in runs[trace_id]["spans"]}, f"{trace_id:032x}"
    kept_rest = len(kept & rest)
    n, p = len(rest), SAMPLE_PERCENT / 100
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    low, high = math.ceil(mean - SIGMAS * sd), math.floor(mean + SIGMAS * sd)
    print(
        f"two tiers: {kept_rest} of the other {n} runs kept at {SAMPLE_PERCENT}% "
        f"(expected {mean:.1f} ± {sd:.1f}, bounds {low}..{high}); "
        f"{len(kept)} traces in Jaeger, each with every span"
    )
    assert low <= kept_rest <= high


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_both_tier2_collectors_sampled_and_no_trace_was_split(fleet: Fleet) -> None:
    runs = fleet.runs()
    emitted = fleet.report["spans"]
    assert emitted == sum(len(r["spans"]) for r in runs.values())  # every span is a run's
    pages = {name: scrape(url) for name, url in fleet.telemetry.items()}
    hosts = [name for name in pages if name != GATEWAY]
    accepted = {h: total(pages[h], ACCEPTED_SPANS) for h in hosts}
    traces = {h: total(pages[h], NEW_TRACES) for h in hosts}
    sampled = {h: total(pages[h], DECIDED_TRACES, sampled="true") for h in hosts}
    decided = {h: total(pages[h], DECIDED_TRACES) for h in hosts}
    to_jaeger = {h: total(pages[h], SENT_SPANS) for h in hosts}
    kept_spans = sum(len(spans) for spans in fleet.in_jaeger.values())
    print(
        f"two tiers: gateway accepted {total(pages[GATEWAY], ACCEPTED_SPANS)} spans of {emitted} sent; "
        + "; ".join(
            f"{h}: {accepted[h]} spans, {traces[h]} traces ({sampled[h]} kept), "
            f"{to_jaeger[h]} spans to Jaeger"
            for h in hosts
        )
    )
    assert total(pages[GATEWAY], ACCEPTED_SPANS) == emitted
    # Every span reached exactly one tier-2 Collector ...
    assert sum(accepted.values()) == emitted, accepted
    # ... and every trace was seen and decided by one of them only: a split trace counts twice.
    assert sum(traces.values()) == len(runs), traces
    assert sum(decided.values()) == len(runs), decided
    assert sum(sampled.values()) == len(fleet.in_jaeger), sampled
    assert sum(to_jaeger.values()) == kept_spans, to_jaeger
    # Both received a fair part (routing is a hash of the trace id over the two).
    assert all(traces[h] > len(runs) / 4 for h in hosts), traces


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_exemplars_through_the_two_tiers_open_the_kept_runs_in_jaeger(fleet: Fleet) -> None:
    """The dashboards' exemplar links open ``/trace/<exemplar trace_id>`` in Jaeger: the exemplars
    Prometheus stores from the tier-2 remote write resolve exactly when their run was kept."""
    buckets = "|".join(m.series("_bucket") for m in names.METRICS if m.kind == "histogram")
    expected = {int(t, 16) for t in (r["trace_id"] for r in fleet.report["runs"])}

    def exemplars() -> set[str] | None:
        data = fleet.prom(
            "/api/v1/query_exemplars",
            query=f'{{__name__=~"{buckets}", job="{SERVICE}"}}',
            start=f"{fleet.started_ms / 1000:.3f}",
            end=f"{time.time():.3f}",
        )
        found = {e["labels"]["trace_id"] for series in data for e in series["exemplars"]}
        return found if found else None

    trace_ids = support.wait("Prometheus to store the runs' exemplars", 45, exemplars)
    assert {int(t, 16) for t in trace_ids} <= expected, "exemplars that are not the workload's runs"
    kept = fleet.kept_by_policy()
    resolved = {t for t in trace_ids if fleet.jaeger_has(t)}
    print(
        f"two tiers: {len(trace_ids)} exemplar trace ids in Prometheus, {len(resolved)} open a trace in "
        f"Jaeger, all of them kept runs: {all(int(t, 16) in kept for t in resolved)}"
    )
    for trace_id in sorted(trace_ids):
        assert (trace_id in resolved) == (int(trace_id, 16) in kept), trace_id
    assert resolved, "no exemplar of a kept run"
