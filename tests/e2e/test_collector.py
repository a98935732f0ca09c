"""The SRE's path for real: demo workload → OTLP → the real Collector → Jaeger and Prometheus.

The servers are the ones ``make servers`` builds from their Go modules at the versions
docker-compose.yml pins (stack/build-servers.sh), and they run the stack's own config files,
laid out as the compose file mounts them. The only change is the addresses: every
``host:port`` a service listens on or dials (``0.0.0.0:4317``, ``jaeger:4317``,
``otel-collector:8889``...) becomes a free port on 127.0.0.1, and a test below proves
nothing else differs. Alert rules are the generator's fast variant (same expressions,
one-minute windows, ``for: 0s``), as in the SDK-path test, so they fire within the test.

The workload (``tests/e2e_workload.py --otlp``) runs support-desk tickets through
``otel_ctx.run`` and exports spans and metrics over OTLP/gRPC to the Collector, which
tail-samples the traces into Jaeger and pushes the metrics (with exemplars) to Prometheus's
remote-write receiver. The test then checks what an SRE relies on: every dashboard query
and alert answers, exemplars lead to traces Jaeger has, the Jaeger links in the alert and the
dashboards list exactly the overflowed runs, and the sampler kept exactly the traces its
policy says.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import support
import yaml

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _jaeger as jaeger
from otel_ctx.grafana import _promql as promql

ROOT = support.ROOT
COMPOSE_FILE = ROOT / "docker-compose.yml"
MANIFEST = ROOT / "stack" / "otelcol-builder.yaml"
COLLECTOR_CONFIG = ROOT / "stack" / "otelcol.yaml"
#: Every Collector config the stack ships: the Collector, and the gateway tier of a fleet
#: (tests/e2e/test_two_tier.py). stack/otelcol-builder.yaml builds exactly what they use.
COLLECTOR_CONFIGS = (COLLECTOR_CONFIG, ROOT / "stack" / "otelcol-gateway.yaml")
#: The compose services the test runs (Grafana cannot run here; the load service is the workload).
SERVICES = ("otel-collector", "jaeger", "prometheus")
#: The zero-code agent's service: its overflowed calls are context_budget.observe spans.
ZERO_CODE_SERVICE = "otel-ctx-e2e-zero-code"
SERVICE = "otel-ctx-e2e-collector"
WINDOW = support.E2E_WINDOW
TEST_OVERFLOW_RATIO = 0.001
#: Seed 23's first 60 tickets include five disputes whose pinned floor overflows.
WORKLOAD_SEED = 23
WORKLOAD_TICKETS = 60
WORKLOAD_SECONDS = 30.0
#: The share of non-overflowed runs the Collector keeps in this test (the shipped default is
#: 10%): large enough that both kept and dropped runs occur among ~55.
SAMPLE_PERCENT = 40
#: The variable stack/otelcol.yaml reads the share from.
SAMPLE_PERCENT_VARIABLE = "OTEL_CTX_TRACE_SAMPLE_PERCENT"
#: The run span's stop value when its run ceiling stopped it.
CEILING_STOP = names.STOPS[2]

TASK = names.prometheus_label(names.TASK_TYPE)
OUTCOME = names.prometheus_label(names.OUTCOME)


# --- the compose services, rendered to 127.0.0.1 ------------------------------------------------


def _compose() -> dict[str, Any]:
    model: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return model


def _address_pattern(services: list[str]) -> re.Pattern[str]:
    """``host:port`` where the host is a listen-anywhere address or a compose service name."""
    hosts = "|".join(re.escape(h) for h in ["0.0.0.0", "localhost", *sorted(services, key=len, reverse=True)])
    return re.compile(rf"(?<![\w.-])(?P<host>{hosts}):(?P<port>\d{{2,5}})(?!\d)")


class Ports:
    """One free 127.0.0.1 port per (service, port) the configs name, shared across files."""

    def __init__(self) -> None:
        self._ports: dict[tuple[str, int], int] = {}

    def __call__(self, service: str, port: int) -> int:
        if (service, port) not in self._ports:
            self._ports[(service, port)] = support.free_port()
        return self._ports[(service, port)]


def render(text: str, service: str, ports: Ports, services: list[str]) -> str:
    """A config file of ``service`` with every address on 127.0.0.1: nothing else changes.

    ``0.0.0.0:P`` and ``localhost:P`` are the service's own port P; ``other:P`` is service
    ``other``'s port P, so a dialler and its listener get the same port.
    """

    def replace(match: re.Match[str]) -> str:
        host = match["host"]
        owner = service if host in ("0.0.0.0", "localhost") else host
        return f"127.0.0.1:{ports(owner, int(match['port']))}"

    return _address_pattern(services).sub(replace, text)


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of a service's ``./src:/target[:ro]`` mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = str(volume).split(":")
        if source.startswith("."):
            mounts[target] = (ROOT / source).resolve()
    return mounts


@dataclass
class Laid:
    """A compose service's files under ``root`` as the container sees them, and its command."""

    root: Path
    command: list[str]
    rendered: dict[Path, Path] = field(default_factory=dict)  # repository file -> rendered copy


def lay_out(tmp: Path, ports: Ports, rules: Path) -> dict[str, Laid]:
    """Every mount of the three services, config files rendered, paths moved under ``tmp``."""
    compose = _compose()["services"]
    services = list(compose)
    laid = {}
    for name in SERVICES:
        service = compose[name]
        root = tmp / name
        entry = Laid(root, [])
        for target, source in _bind_mounts(service).items():
            dest = root / target.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source == ROOT / "dashboards" / "alerts.yml":
                # The fast variant of the same rules (one-minute windows, for: 0s).
                dest.write_bytes(rules.read_bytes())
            elif source.parent == ROOT / "stack":
                dest.write_text(
                    render(source.read_text(encoding="utf-8"), name, ports, services), encoding="utf-8"
                )
                entry.rendered[source] = dest
            else:
                dest.write_bytes(source.read_bytes())
        # The compose command with its container paths moved under the service's folder.
        for arg in service.get("command") or []:
            flag, sep, value = str(arg).partition("=")
            entry.command.append(
                f"{flag}={root / value.lstrip('/')}" if sep and value.startswith("/") else arg
            )
        laid[name] = entry
    return laid


# --- what the Collector's sampler keeps ---------------------------------------------------------


def _policies(config: dict[str, Any]) -> list[dict[str, Any]]:
    policies: list[dict[str, Any]] = config["processors"]["tail_sampling"]["policies"]
    return policies


def _fnv1a_64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def probabilistic_keeps(trace_id: str, salt: str, percent: float) -> bool:
    """The Collector's probabilistic tail-sampling policy, decided the way it decides.

    FNV-1a of the salt then the 16 trace-id bytes, kept when at most ``percent`` of the
    64-bit range (a hash within one unit of the boundary is a 2**-60 chance).
    """
    threshold = int((2**64 - 1) * Fraction(percent / 100))
    return _fnv1a_64(salt.encode() + bytes.fromhex(trace_id)) <= threshold


# --- the running stack --------------------------------------------------------------------------


@dataclass
class CollectorStack:
    prometheus: str
    jaeger: str
    report: dict[str, Any]
    config: dict[str, Any]
    started_ms: int
    #: Unix time queries are evaluated at: just after the final scrape.
    at: float = 0.0
    #: What the zero-code agent (``e2e_zero_code_workload.py``) did: its tickets' trace ids.
    zero_code: dict[str, Any] = field(default_factory=dict)

    def get(self, base: str, path: str, **params: str) -> Any:
        url = f"{base}{path}?{urllib.parse.urlencode(params)}" if params else f"{base}{path}"
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def prom(self, path: str, **params: str) -> Any:
        body = self.get(self.prometheus, path, **params)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        try:
            data = self.prom("/api/v1/query", query=expr, time=f"{self.at:.3f}")
        except urllib.error.HTTPError as err:
            pytest.fail(f"Prometheus rejected the query: {err.read().decode()}\n{expr}")
        result: list[dict[str, Any]] = data["result"]
        return result

    def jaeger_traces(self, url: str) -> set[int]:
        """Trace ids of a Jaeger query-API answer (``/api/traces?...``)."""
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        return {int(t["traceID"], 16) for t in body["data"] or []}

    def jaeger_has(self, trace_id: str) -> bool:
        try:
            with urllib.request.urlopen(f"{self.jaeger}/api/traces/{trace_id}", timeout=10) as response:
                return bool(json.loads(response.read())["data"])
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return False
            raise

    def runs(self, *, overflowed: bool | None = None, task_type: str | None = None) -> set[int]:
        return {
            int(r["trace_id"], 16)
            for r in self.report["runs"]
            if (overflowed is None or r["overflowed"] == overflowed)
            and (task_type is None or r["task_type"] == task_type)
        }

    def kept_by_policy(self) -> set[int]:
        """The runs the shipped policy keeps: every overflowed or ceiling-stopped run, and the
        share of the rest."""
        (share,) = [p["probabilistic"] for p in _policies(self.config) if p["type"] == "probabilistic"]
        return {
            int(r["trace_id"], 16)
            for r in self.report["runs"]
            if r["overflowed"]
            or r["stop"] == CEILING_STOP
            or probabilistic_keeps(r["trace_id"], share["hash_salt"], SAMPLE_PERCENT)
        }

    def fits(self) -> dict[tuple[str, str], int]:
        return {(f["task_type"], f["outcome"]): int(f["count"]) for f in self.report["fits"] if f["count"]}


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorStack]:
    binaries = support.built_servers()
    prometheus = support.prometheus_tool("prometheus")
    tmp = tmp_path_factory.mktemp("collector-e2e")
    ports = Ports()
    jaeger_base = f"http://127.0.0.1:{ports('jaeger', 16686)}"
    rules = alerts.write(
        tmp / "fast-rules.yml",
        alerts.AlertSettings.fast(WINDOW, overflow_ratio=TEST_OVERFLOW_RATIO, jaeger_url=jaeger_base),
    )
    laid = lay_out(tmp, ports, rules)
    collector_config = yaml.safe_load(
        laid["otel-collector"].rendered[COLLECTOR_CONFIG].read_text(encoding="utf-8")
    )
    # The children must not pick up an exporter setup from the developer's shell.
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    prom_base = f"http://127.0.0.1:{ports('prometheus', 9090)}"
    report_path = tmp / "report.json"
    children = support.Children(tmp)
    procs, check_alive, ok = children.procs, children.check_alive, children.ok

    try:
        procs.append(
            ("jaeger", _start([str(binaries["jaeger"]), *laid["jaeger"].command], tmp / "jaeger.log"))
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
        support.wait("Jaeger's query API", 60, lambda: ok(f"{jaeger_base}/api/services"))
        support.wait(
            "the Collector's health check",
            60,
            lambda: ok(f"http://127.0.0.1:{ports('otel-collector', 13133)}/"),
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
                        f"--otlp=http://127.0.0.1:{ports('otel-collector', 4317)}",
                        f"--service={SERVICE}",
                        f"--seed={WORKLOAD_SEED}",
                        f"--tickets={WORKLOAD_TICKETS}",
                        f"--seconds={WORKLOAD_SECONDS}",
                        f"--report={report_path}",
                    ],
                    tmp / "workload.log",
                    clean_env,
                ),
            )
        )

        # A zero-code agent beside it: bare SDK calls against the fake provider, a task block a ticket.
        zero_code_report = tmp / "zero-code-report.json"
        procs.append(
            (
                "zero-code",
                _start(
                    [
                        sys.executable,
                        str(Path(__file__).parents[1] / "e2e_zero_code_workload.py"),
                        f"--otlp=http://127.0.0.1:{ports('otel-collector', 4317)}",
                        f"--service={ZERO_CODE_SERVICE}",
                        f"--report={zero_code_report}",
                    ],
                    tmp / "zero-code.log",
                    {**clean_env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parents[1])])},
                ),
            )
        )

        def report() -> dict[str, Any] | None:
            check_alive()
            loaded: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
            return loaded

        def zero_code() -> dict[str, Any] | None:
            check_alive()
            loaded: dict[str, Any] = json.loads(zero_code_report.read_text(encoding="utf-8"))
            return loaded

        partial = CollectorStack(
            prom_base,
            jaeger_base,
            support.wait("the workload to finish its tickets", WORKLOAD_SECONDS + 30, report),
            collector_config,
            started_ms,
        )
        total = sum(partial.fits().values())

        def final_scrape() -> bool:
            partial.at = time.time()
            got = partial.query(f'sum({names.FITS.prometheus}{{job="{SERVICE}"}})')
            return bool(got) and int(float(got[0]["value"][1])) == total

        support.wait("Prometheus to scrape the workload's last fits through the Collector", 45, final_scrape)
        partial.zero_code = support.wait("the zero-code agent to finish its tickets", 120, zero_code)
        partial.at = time.time()
        yield partial
    finally:
        for _, proc in reversed(procs):
            support.stop(proc)


# --- the build and the configs (fast) ------------------------------------------------------------


def _manifest() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return data


def _used_components(config: dict[str, Any]) -> dict[str, set[str]]:
    """Component types per kind that the config's service actually uses (``type/name`` -> type)."""
    service = config["service"]
    used: dict[str, set[str]] = {kind: set() for kind in ("receivers", "processors", "exporters")}
    for pipeline in service["pipelines"].values():
        for kind in used:
            used[kind] |= {c.split("/")[0] for c in pipeline.get(kind, [])}
    used["extensions"] = {c.split("/")[0] for c in service.get("extensions", [])}
    return used


def test_the_servers_are_built_at_the_versions_compose_pins() -> None:
    images = {
        s["image"].rpartition(":")[0]: s["image"].rpartition(":")[2] for s in _compose()["services"].values()
    }
    collector = images["otel/opentelemetry-collector-contrib"]
    manifest = _manifest()
    assert manifest["dist"]["version"] == collector
    for kind in ("receivers", "processors", "exporters", "extensions"):
        for component in manifest[kind]:
            module, version = component["gomod"].split()
            # Components ship as v0.<minor> with the release; nothing mixed from another release.
            assert version == f"v{collector}", module
    result = subprocess.run(
        ["bash", str(ROOT / "stack" / "build-servers.sh"), "--paths"],
        capture_output=True,
        text=True,
        check=False,
    )
    paths = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert f"/otelcol-{collector}-" in paths["otelcol"]
    assert f"/jaeger-{images['jaegertracing/jaeger']}-" in paths["jaeger"]


def test_the_built_collector_has_exactly_the_components_the_config_uses() -> None:
    otelcol = support.built_servers("otelcol")["otelcol"]
    result = subprocess.run(
        [str(otelcol), "components"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    listed = yaml.safe_load(result.stdout)
    built = {
        kind: {c["name"] for c in listed.get(kind) or []}
        for kind in ("receivers", "processors", "exporters", "extensions")
    }
    # The stack's Collector and the fleet's gateway tier in front of it: one build runs both.
    used: dict[str, set[str]] = {kind: set() for kind in built}
    for config in COLLECTOR_CONFIGS:
        for kind, types in _used_components(yaml.safe_load(config.read_text(encoding="utf-8"))).items():
            used[kind] |= types
    # A component may answer to a deprecated alias too (otlp for otlp_grpc): compare what is used.
    for kind, types in used.items():
        assert types <= built[kind], (kind, types - built[kind])
    assert sum(len(c) for kind, c in _manifest().items() if kind in built) == sum(
        len(t) for t in used.values()
    )


def test_the_collector_validates_the_shipped_config_and_rejects_a_broken_one(tmp_path: Path) -> None:
    otelcol = support.built_servers("otelcol")["otelcol"]

    def validate(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(otelcol), "validate", f"--config={path}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    shipped = validate(COLLECTOR_CONFIG)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    # The check can fail: a misspelt sampler setting is refused, naming it.
    text = COLLECTOR_CONFIG.read_text(encoding="utf-8")
    assert "    num_traces:" in text
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("    num_traces:", "    num_tracez:"), encoding="utf-8")
    refused = validate(broken)
    assert refused.returncode != 0
    assert "num_tracez" in refused.stdout + refused.stderr


def test_the_sampler_keeps_every_overflowed_run_by_the_registrys_names() -> None:
    policies = _policies(yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8")))
    keep = [p for p in policies if p["type"] == "string_attribute"]
    assert [(p["string_attribute"]["key"], p["string_attribute"]["values"]) for p in keep] == [
        (names.OUTCOME, [names.OUTCOME_OVERFLOW]),
        (names.STOP, [CEILING_STOP]),
    ]
    assert not any(p["string_attribute"].get("invert_match") for p in keep)
    (share,) = [p["probabilistic"] for p in policies if p["type"] == "probabilistic"]
    # The share is configurable; its default is what the README says.
    assert share["sampling_percentage"] == f"${{env:{SAMPLE_PERCENT_VARIABLE}:-10}}"
    assert {p["type"] for p in policies} == {"string_attribute", "probabilistic"}
    # compose passes the share through from .env to the Collector.
    environment = _compose()["services"]["otel-collector"]["environment"]
    assert environment[SAMPLE_PERCENT_VARIABLE] == f"${{{SAMPLE_PERCENT_VARIABLE}:-10}}"


def test_rendering_for_the_test_changes_only_addresses(tmp_path: Path) -> None:
    ports = Ports()
    rules = alerts.write(tmp_path / "rules.yml", alerts.AlertSettings.fast(WINDOW))
    laid = lay_out(tmp_path / "laid", ports, rules)
    services = list(_compose()["services"])
    address = _address_pattern(services)
    loopback = re.compile(r"127\.0\.0\.1:\d+")
    rendered_files = [(src, dst) for entry in laid.values() for src, dst in entry.rendered.items()]
    assert {src.name for src, _ in rendered_files} >= {"otelcol.yaml", "jaeger.yaml", "prometheus.yml"}

    def diff(a: Any, b: Any, where: str) -> list[tuple[str, Any, Any]]:
        if isinstance(a, dict) and isinstance(b, dict):
            assert a.keys() == b.keys(), where
            return [d for k in a for d in diff(a[k], b[k], f"{where}.{k}")]
        if isinstance(a, list) and isinstance(b, list):
            assert len(a) == len(b), where
            return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{where}[{i}]")]
        return [] if a == b else [(where, a, b)]

    changed = 0
    for source, dest in rendered_files:
        original = yaml.safe_load(source.read_text(encoding="utf-8"))
        rendered = yaml.safe_load(dest.read_text(encoding="utf-8"))
        for where, before, after in diff(original, rendered, source.name):
            # Only whole host:port values (or a URL's authority) moved to loopback.
            assert isinstance(before, str) and isinstance(after, str), where
            assert address.sub("ADDR", before) == loopback.sub("ADDR", after), (where, before, after)
            changed += 1
        # Nothing the test's servers would dial or bind is left on a compose host name.
        assert not address.search(dest.read_text(encoding="utf-8")), dest
    assert changed >= 8  # the collector's 5, Jaeger's 4, Prometheus's 2 addresses at least
    # Dialler and listener meet: the collector sends traces to the port Jaeger's OTLP receiver has.
    collector = yaml.safe_load(laid["otel-collector"].rendered[COLLECTOR_CONFIG].read_text())
    jaeger = yaml.safe_load(laid["jaeger"].rendered[ROOT / "stack" / "jaeger.yaml"].read_text())
    (trace_exporter,) = collector["service"]["pipelines"]["traces"]["exporters"]
    assert (
        collector["exporters"][trace_exporter]["endpoint"]
        == jaeger["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    )


# --- 1. every dashboard query and alert answers through the Collector ------------------------


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_metric_names_through_the_collector_are_the_sdk_paths(stack: CollectorStack) -> None:
    query = f'count by (__name__) ({{job="{SERVICE}"}})'
    seen = {s["metric"]["__name__"] for s in stack.query(query)}
    # The same registry-derived set the SDK-exporter test (tests/e2e/test_prometheus.py) asserts.
    assert support.stored(seen) == support.registry_series()
    # ... and the labels the dashboards filter on are the registry's attributes, renamed alike.
    series = stack.prom("/api/v1/series", **{"match[]": f'{{job="{SERVICE}"}}'})
    allowed = {
        "__name__",
        "job",
        "instance",
        "le",
        "otel_scope_name",
        "otel_scope_version",
        "otel_scope_schema_url",
    }
    for metric in names.METRICS:
        labels = {names.prometheus_label(a) for a in metric.attributes}
        suffixes = ("_bucket", "_sum", "_count") if metric.kind == "histogram" else ("",)
        names_of_metric = {metric.series(x) for x in suffixes}
        found = [set(s) for s in series if s["__name__"] in names_of_metric]
        assert found, metric.prometheus
        for keys in found:
            assert keys - allowed <= labels, (metric.prometheus, sorted(keys - allowed - labels))


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_counters_through_the_collector_equal_what_the_workload_did(stack: CollectorStack) -> None:
    got = {
        (s["metric"][TASK], s["metric"][OUTCOME]): round(float(s["value"][1]))
        for s in stack.query(f'sum by ({TASK}, {OUTCOME}) ({names.FITS.prometheus}{{job="{SERVICE}"}})')
    }
    assert {k: v for k, v in got.items() if v} == stack.fits()


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_every_panel_query_answers_through_the_collector(stack: CollectorStack) -> None:
    # The over-time panels read recorded rates, which this Prometheus evaluates every 15 s: query
    # at the first evaluation that saw the workload (well inside the one-minute windows).
    recorded = f'{{__name__=~"job:.*", job="{SERVICE}"}}'
    support.wait(
        "the recording rules' first rates", 45, lambda: stack.prom("/api/v1/query", query=recorded)["result"]
    )
    when = f"{max(stack.at, time.time()):.3f}"

    def query(expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = stack.prom("/api/v1/query", query=expr, time=when)["result"]
        return result

    support.assert_panel_queries_answer(query)


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_every_alert_evaluates_and_the_overflow_alert_fires(stack: CollectorStack) -> None:
    support.assert_shipped_alerts_evaluate(stack.query)
    overflowed = {task for (task, outcome) in stack.fits() if outcome == names.OUTCOME_OVERFLOW}
    assert overflowed

    def firing() -> set[str] | None:
        found = {
            a["labels"][TASK]
            for a in stack.prom("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alerts.OVERFLOW_RATE
            and a["labels"].get("job") == SERVICE
            and a["state"] == "firing"
        }
        return found if found == overflowed else None

    # The stack's Prometheus evaluates rules every 15 s.
    support.wait(f"{alerts.OVERFLOW_RATE} to fire for {sorted(overflowed)}", 45, firing)


# --- 2. exemplars in Prometheus lead to traces in Jaeger ------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_histogram_exemplars_in_prometheus_are_traces_jaeger_returns(stack: CollectorStack) -> None:
    buckets = "|".join(m.series("_bucket") for m in names.METRICS if m.kind == "histogram")
    data = stack.prom(
        "/api/v1/query_exemplars",
        query=f'{{__name__=~"{buckets}", job="{SERVICE}"}}',
        start=f"{stack.started_ms / 1000:.3f}",
        end=f"{time.time():.3f}",
    )
    trace_ids = {
        e["labels"]["trace_id"]
        for series in data
        if series["seriesLabels"]["__name__"].endswith("_bucket")
        for e in series["exemplars"]
    }
    assert trace_ids, "no exemplar on any histogram series"
    runs = {int(t, 16) for t in trace_ids}
    assert runs <= stack.runs(), "exemplars that are not the workload's runs"
    kept = stack.kept_by_policy()
    assert runs & kept, "no exemplar of a kept run"
    # Exemplars of kept runs open their trace; those the sampler dropped are gone, as it decided.
    support.wait(
        "Jaeger to hold the kept runs' traces",
        60,
        lambda: stack.jaeger_traces(_all_traces_url(stack)) >= kept,
    )
    for trace_id in sorted(trace_ids):
        assert stack.jaeger_has(trace_id) == (int(trace_id, 16) in kept), trace_id
    print(
        f"exemplars: {len(trace_ids)} runs on histogram series, {len(runs & kept)} of them kept and in Jaeger"
    )


# --- 3. the Jaeger links of the alert and the dashboards list the overflowed runs ------------


def _api(url: str) -> str:
    """A Jaeger UI search URL as a query-API call: the same parameters on ``/api/traces``."""
    parts = urllib.parse.urlsplit(url)
    assert parts.path.endswith("/search"), url
    return urllib.parse.urlunsplit(parts._replace(path=parts.path[: -len("/search")] + "/api/traces"))


def _all_traces_url(stack: CollectorStack) -> str:
    return f"{stack.jaeger}/api/traces?" + urllib.parse.urlencode({"service": SERVICE, "limit": "1000"})


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_overflow_alerts_jaeger_link_lists_exactly_the_overflowed_runs(stack: CollectorStack) -> None:
    overflowed = stack.runs(overflowed=True)
    assert 0 < len(overflowed) <= 20  # fewer than the alert's link lists (jaeger.SEARCH_LIMIT)

    def annotations() -> list[str] | None:
        found = [
            a["annotations"]["jaeger"]
            for a in stack.prom("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alerts.OVERFLOW_RATE and a["labels"].get("job") == SERVICE
        ]
        return found or None

    links = support.wait(f"{alerts.OVERFLOW_RATE} to be active", 45, annotations)
    support.wait(
        "Jaeger to hold the overflowed runs",
        60,
        lambda: stack.jaeger_traces(_all_traces_url(stack)) >= overflowed,
    )
    for link in links:
        assert link.startswith(f"{stack.jaeger}/search?"), link
        assert stack.jaeger_traces(_api(link)) == overflowed, link


def _dashboard_jaeger_links() -> list[str]:
    """Every Jaeger search with tags in the committed dashboards (links and markdown)."""
    found: list[str] = []
    pattern = re.compile(r"\$\{" + promql.VAR_JAEGER_URL + r"\}/search\?[^\s)\"']+")

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            found.extend(m for m in pattern.findall(value) if "tags=" in m)

    for path in support.DASHBOARDS:
        walk(json.loads(path.read_text(encoding="utf-8")))
    return found


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_dashboards_jaeger_links_list_exactly_the_overflowed_runs(stack: CollectorStack) -> None:
    links = _dashboard_jaeger_links()
    assert len(links) >= 2  # the table's per-row link and the per-service markdown link
    support.wait(
        "Jaeger to hold the overflowed runs",
        60,
        lambda: stack.jaeger_traces(_all_traces_url(stack)) >= stack.runs(overflowed=True),
    )
    window = {"${__from}": str(stack.started_ms - 60_000), "${__to}": str(int(time.time() * 1000) + 60_000)}
    checked = 0
    for link in links:
        # What Grafana fills in at click time: the variables and the clicked row's fields.
        url = link.replace("${" + promql.VAR_JAEGER_URL + "}", stack.jaeger)
        url = url.replace("${" + promql.VAR_SERVICE + ":percentencode}", urllib.parse.quote(SERVICE, safe=""))
        url = url.replace("${__data.fields." + promql.JOB + "}", urllib.parse.quote(SERVICE, safe=""))
        for placeholder, value in window.items():
            url = url.replace(placeholder, value)
        row_field = "${__data.fields." + promql.TASK_TYPE + "}"
        task_types = sorted({r["task_type"] for r in stack.report["runs"]}) if row_field in url else [None]
        for task in task_types:
            final = url.replace(row_field, task) if task is not None else url
            assert "${" not in final, final
            # The link asks for what the dashboard says: overflowed fits (of the row's task type).
            params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(final).query))
            # By tag alone: no operation, so run()'s fit spans and zero-code observe spans both match.
            assert params["service"] == SERVICE and "operation" not in params, final
            tags = {names.OUTCOME: names.OUTCOME_OVERFLOW, **({names.TASK_TYPE: task} if task else {})}
            assert json.loads(params["tags"]) == tags, final
            expected = stack.runs(overflowed=True, task_type=task)
            assert stack.jaeger_traces(_api(final)) == expected, (final, task)
            checked += 1
    assert checked > len(links)
    print(f"dashboard Jaeger links: {len(links)} links, {checked} searches, each exactly the overflowed runs")


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_trace_links_find_exactly_the_overflowed_tickets_of_a_zero_code_agent(
    stack: CollectorStack,
) -> None:
    """The same links, for an agent under the instrumentor: its overflowed rounds are
    ``context_budget.observe`` spans, and each ticket (a task block) is one trace."""
    runs = stack.zero_code["runs"]
    overflowed = {int(r["trace_id"], 16) for r in runs if r["overflowed"]}
    assert overflowed and len(overflowed) < len(runs)
    every = f"{stack.jaeger}/api/traces?" + urllib.parse.urlencode(
        {"service": ZERO_CODE_SERVICE, "limit": "1000"}
    )
    support.wait(
        "Jaeger to hold the zero-code agent's overflowed tickets",
        60,
        lambda: stack.jaeger_traces(every) >= overflowed,
    )
    settings = alerts.AlertSettings(jaeger_url=stack.jaeger)
    alert_link = jaeger.overflow_search_url(settings.jaeger_url, ZERO_CODE_SERVICE, lookback="1h")
    assert stack.jaeger_traces(_api(alert_link)) == overflowed, alert_link
    window = {"${__from}": str(stack.started_ms - 60_000), "${__to}": str(int(time.time() * 1000) + 60_000)}
    for link in _dashboard_jaeger_links():
        url = link.replace("${" + promql.VAR_JAEGER_URL + "}", stack.jaeger)
        url = url.replace("${" + promql.VAR_SERVICE + ":percentencode}", ZERO_CODE_SERVICE)
        url = url.replace("${__data.fields." + promql.JOB + "}", ZERO_CODE_SERVICE)
        url = url.replace("${__data.fields." + promql.TASK_TYPE + "}", "returns")
        for placeholder, value in window.items():
            url = url.replace(placeholder, value)
        assert "${" not in url, url
        assert stack.jaeger_traces(_api(url)) == overflowed, url


# --- 4. the sampler keeps every overflowed or ceiling-stopped run and the share of the rest -----------


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_tail_sampling_keeps_every_overflowed_or_stopped_run_and_the_share_of_the_rest(
    stack: CollectorStack,
) -> None:
    everything = stack.runs()
    overflowed = stack.runs(overflowed=True)
    stopped = {int(r["trace_id"], 16) for r in stack.report["runs"] if r["stop"] == CEILING_STOP}
    expected = stack.kept_by_policy()
    assert len(everything) == stack.report["tickets"]
    assert overflowed and stopped, "the workload must overflow and hit a run ceiling"
    assert overflowed | stopped <= expected

    support.wait(
        "Jaeger to hold every kept run",
        60,
        lambda: stack.jaeger_traces(_all_traces_url(stack)) >= expected,
    )
    # Decisions are final once the runs' roots arrived; a little longer shows nothing more arrives.
    time.sleep(3)
    in_jaeger = stack.jaeger_traces(_all_traces_url(stack))
    rest = everything - overflowed - stopped
    kept_rest = in_jaeger & rest
    print(
        f"tail sampling: {len(everything)} runs; {len(overflowed)} overflowed and {len(stopped)} "
        f"ceiling-stopped, all kept: {overflowed | stopped <= in_jaeger}; {len(kept_rest)} of the "
        f"other {len(rest)} kept at {SAMPLE_PERCENT}%"
    )
    assert overflowed | stopped <= in_jaeger
    assert in_jaeger == expected, (sorted(in_jaeger - expected), sorted(expected - in_jaeger))
    # Both sides of the share occurred, so the count above tested a decision, not a pass-through.
    assert 0 < len(kept_rest) < len(rest)
