"""VictoriaMetrics single-node and vmalert for real, fed by the stack's own Collector.

The demo workload (``tests/e2e_workload.py --otlp --native``: exponential histograms and the
per-round distributions, as the compose stack's ``load`` service sends, at the one scale
docs/sre-guide.md asks for there: ``OTEL_CTX_EXPONENTIAL_MAX_SCALE=3``) pushes OTLP to the real
Collector built from ``stack/otelcol-builder.yaml``, running the stack's ``stack/otelcol.yaml`` with
its ``prometheus_remote_write`` exporter pointed at VictoriaMetrics's ``/api/v1/write`` (the one
change the guide asks for) and a copy of that exporter into a real Prometheus 3.5 with native
histograms: the same samples in both. VictoriaMetrics and vmalert are the v1.151.0 binaries
``make servers`` builds (``stack/build-servers.sh``); vmalert loads the rules
``alerts.render(backend="victoriametrics")`` writes, with its expression validation on (its
default), evaluates them against VictoriaMetrics and writes the recorded series and ``ALERTS`` back.

Then: vmalert loaded every rule and evaluates each without an error; VictoriaMetrics stores every
histogram as ``_bucket{vmrange}``/``_sum``/``_count`` series; the counters are the workload's
counts; every target of the dashboards built with ``--backend victoriametrics`` answers the
workload's own number (within 5 % of the Prometheus dashboards' same target over the totals the
workload pushed, read from the reference Prometheus; a quantile or a share over a bound in the
bucket that holds the workload's own observations); every recording rule holds series; the
overflow alert fires for the task types whose overflow share is over its threshold, only for those,
and resolves once its window holds none; the telemetry-absent alert never fires while data flows.
"""

from __future__ import annotations

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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import e2e_values as values
import pytest
import support
import yaml

from otel_ctx import grafana, names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _promql as q
from otel_ctx.grafana import _slo as slo

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SERVICE = "otel-ctx-e2e-victoriametrics"
WINDOW = support.E2E_WINDOW
WORKLOAD_SEED = 23
WORKLOAD_TICKETS = 60
WORKLOAD_SECONDS = 30.0
#: Seconds between two evaluations of the rules, in vmalert and in the reference Prometheus.
EVALUATION = 2
#: Any overflow share above 0.1 % fires the overflow alert: seed 23's disputes overflow, others not.
#: Disputes promise 99.9% of fits without an overflow (seed 23 overflows a few percent of them: a
#: burn far over the fast page's), every other task type keeps its default (none overflows).
OBJECTIVES = slo.merged(slo.DEFAULT_OBJECTIVES, [slo.Objective("dispute", 0.999)])
FAST = alerts.AlertSettings.fast(WINDOW, overflow_ratio=0.001, objectives=OBJECTIVES)
VM = q.VICTORIAMETRICS
#: How far a VictoriaMetrics panel may be from the workload's own number.
TOLERANCE = 0.05
#: Seconds after the run when the recorded rates (2m windows) have held all of it for a minute.
SETTLED = 70.0
#: What VictoriaMetrics (v1.151) flags the test sets, and why (docs/sre-guide.md repeats them).
VM_FLAGS = (
    # Instant queries see samples up to now, not up to 30 s ago (the default hides the newest
    # 30 s, for samples still on their way); the test reads right after the last push.
    "-search.latencyOffset=0s",
    # No cached query results: the test reads the same expression at several moments.
    "-search.disableCache",
)
#: vmalert's flags beyond the addresses: validation stays on (-rule.validateExpressions default true).
VMALERT_FLAGS = (
    f"-evaluationInterval={EVALUATION}s",
    # Evaluate at now, not 30 s back (the default, matching VictoriaMetrics's default latency offset).
    "-rule.evalDelay=0s",
    "-notifier.blackhole",
    # Recorded series and ALERTS reach VictoriaMetrics within a second (default 2s).
    "-remoteWrite.flushInterval=1s",
)

#: What docs/sre-guide.md ("VictoriaMetrics") tells an SRE to set on the agents.
WORKLOAD_ENV = {"OTEL_CTX_EXPONENTIAL_MAX_SCALE": "3"}

LABEL = names.prometheus_label
TASK = LABEL(names.TASK_TYPE)
OUTCOME = LABEL(names.OUTCOME)
ROUND = LABEL(names.ROUND)
COMPONENT = LABEL(names.COMPONENT)


@dataclass
class Server:
    base: str

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=20) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as err:
            pytest.fail(f"{self.base} rejected {path} {params}: {err.read().decode(errors='replace')}")
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr, time=f"{at:.3f}")["result"]
        return result


@dataclass
class VmStack:
    vm: Server
    vmalert: Server
    prometheus: Server
    report: dict[str, Any]
    rules: Path
    logs: Path
    at: float = 0.0
    finished: float = 0.0
    first: float = 0.0
    vmalert_cmd: list[str] = field(default_factory=list)

    def fits(self) -> dict[tuple[str, str], int]:
        return {(f["task_type"], f["outcome"]): int(f["count"]) for f in self.report["fits"] if f["count"]}


def _collector_config(ports: dict[str, int]) -> dict[str, Any]:
    """The stack's Collector config with its remote write into VictoriaMetrics, a copy of that
    exporter into the reference Prometheus, every address on 127.0.0.1 and no trace export (no
    Jaeger here)."""
    config: dict[str, Any] = yaml.safe_load(
        (support.ROOT / "stack" / "otelcol.yaml").read_text(encoding="utf-8")
    )
    config["receivers"]["otlp"]["protocols"] = {"grpc": {"endpoint": f"127.0.0.1:{ports['otlp']}"}}
    exporters = config["exporters"]
    write = exporters["prometheus_remote_write"]
    write["endpoint"] = f"http://127.0.0.1:{ports['vm']}/api/v1/write"
    exporters["prometheus_remote_write/reference"] = {
        **write,
        "endpoint": f"http://127.0.0.1:{ports['prometheus']}/api/v1/write",
    }
    del exporters["prometheus"], exporters["otlp_grpc/jaeger"]
    config["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{ports['health']}"
    pipelines = config["service"]["pipelines"]
    del pipelines["traces"]
    pipelines["metrics"]["exporters"] = ["prometheus_remote_write", "prometheus_remote_write/reference"]
    config["processors"].pop("tail_sampling")
    return config


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmStack]:
    binaries = support.built_servers("otelcol", "victoriametrics", "vmalert", "prometheus")
    tmp = tmp_path_factory.mktemp("victoriametrics-e2e")
    ports = {name: support.free_port() for name in ("vm", "vmalert", "prometheus", "otlp", "health")}
    rules = alerts.write(tmp / "vm-rules.yml", FAST, backend=VM)
    reference_rules = alerts.write(tmp / "prometheus-rules.yml", FAST)
    (tmp / "prometheus.yml").write_text(
        yaml.safe_dump(
            {"global": {"evaluation_interval": f"{EVALUATION}s"}, "rule_files": [str(reference_rules)]}
        ),
        encoding="utf-8",
    )
    (tmp / "otelcol.yaml").write_text(yaml.safe_dump(_collector_config(ports)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    child_env = {**env, "PYTHONPATH": os.pathsep.join([str(support.ROOT), env.get("PYTHONPATH", "")])}
    report_path = tmp / "report.json"
    children = support.Children(tmp)
    alive, ok = children.check_alive, children.ok

    def start(name: str, cmd: list[str], environment: dict[str, str] = env) -> None:
        children.start(name, cmd, environment)

    vm = Server(f"http://127.0.0.1:{ports['vm']}")
    vmalert = Server(f"http://127.0.0.1:{ports['vmalert']}")
    prometheus = Server(f"http://127.0.0.1:{ports['prometheus']}")
    vmalert_cmd = [
        str(binaries["vmalert"]),
        f"-rule={rules}",
        f"-datasource.url={vm.base}",
        f"-remoteWrite.url={vm.base}",
        f"-httpListenAddr=127.0.0.1:{ports['vmalert']}",
        *VMALERT_FLAGS,
    ]
    built = VmStack(vm, vmalert, prometheus, {}, rules, tmp, vmalert_cmd=vmalert_cmd)
    try:
        start(
            "victoriametrics",
            [
                str(binaries["victoriametrics"]),
                f"-storageDataPath={tmp / 'vm-data'}",
                f"-httpListenAddr=127.0.0.1:{ports['vm']}",
                *VM_FLAGS,
            ],
        )
        start(
            "prometheus",
            [
                str(binaries["prometheus"]),
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
                "--enable-feature=native-histograms",
                "--web.enable-remote-write-receiver",
            ],
        )
        support.wait("VictoriaMetrics to be ready", 30, lambda: ok(f"{vm.base}/health"))
        start("vmalert", vmalert_cmd)
        start("otel-collector", [str(binaries["otelcol"]), f"--config={tmp / 'otelcol.yaml'}"])
        support.wait("Prometheus to be ready", 30, lambda: ok(f"{prometheus.base}/-/ready"))
        support.wait("vmalert to be ready", 30, lambda: ok(f"{vmalert.base}/health"))
        support.wait("the Collector's health check", 60, lambda: ok(f"http://127.0.0.1:{ports['health']}/"))
        built.first = time.time()
        start(
            "workload",
            [
                sys.executable,
                str(Path(__file__).parents[1] / "e2e_workload.py"),
                f"--otlp=http://127.0.0.1:{ports['otlp']}",
                "--native",
                f"--service={SERVICE}",
                f"--seed={WORKLOAD_SEED}",
                f"--tickets={WORKLOAD_TICKETS}",
                f"--seconds={WORKLOAD_SECONDS}",
                f"--report={report_path}",
            ],
            {**child_env, **WORKLOAD_ENV},
        )

        def report() -> dict[str, Any] | None:
            alive()
            loaded: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
            return loaded

        built.report = support.wait("the workload to finish", WORKLOAD_SECONDS + 60, report)
        built.finished = report_path.stat().st_mtime
        total = sum(built.fits().values())

        def arrived() -> bool:
            alive()
            now = time.time()
            expr = f'sum({names.FITS.prometheus}{{job="{SERVICE}"}})'
            return all(
                (got := server.query(expr, now)) and round(float(got[0]["value"][1])) == total
                for server in (vm, prometheus)
            )

        support.wait("VictoriaMetrics and Prometheus to hold the workload's last fits", 60, arrived)
        landed = time.time()

        def evaluated() -> bool:
            # Every group of vmalert evaluated after the last push landed, and its recorded series
            # are back in VictoriaMetrics (written back asynchronously): a fixed sleep is not
            # enough on a loaded machine, where vmalert's first rounds come late.
            alive()
            groups = vmalert.get("/api/v1/rules")["groups"]
            if not groups or any(_evaluated_at(g["lastEvaluation"]) <= landed for g in groups):
                return False
            return bool(vm.query(f'{{__name__=~"job:.+", job="{SERVICE}"}}', time.time()))

        support.wait("vmalert to evaluate every group on the workload's data", 60, evaluated)
        # Both rule evaluators have evaluated on the last push a few times over.
        time.sleep(3 * EVALUATION + 1)
        built.at = time.time()
        yield built
    finally:
        children.stop()


def _evaluated_at(stamp: str) -> float:
    """vmalert's RFC 3339 time (nanoseconds, ``Z``) as seconds since the epoch."""
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", stamp).replace("Z", "+00:00")
    return datetime.fromisoformat(trimmed).timestamp()


def _value(sample: dict[str, Any]) -> float:
    return float(sample["value"][1])


# --- what vmalert and VictoriaMetrics take ----------------------------------------------------


def _pinned() -> str:
    """The release stack/build-servers.sh pins (its one ``VICTORIAMETRICS_VERSION=`` line)."""
    script = (support.ROOT / "stack" / "build-servers.sh").read_text(encoding="utf-8")
    (version,) = re.findall(r"^VICTORIAMETRICS_VERSION=([0-9.]+)$", script, re.MULTILINE)
    return version


def test_the_servers_are_the_pinned_release() -> None:
    assert _pinned() == "1.151.0"
    for name, app in (("victoriametrics", "victoria-metrics"), ("vmalert", "vmalert")):
        binary = support.built_servers(name)[name]
        assert f"/victoriametrics-{_pinned()}-" in str(binary)
        shown = subprocess.run([str(binary), "-version"], capture_output=True, text=True, timeout=30)
        assert shown.stdout.strip() == f"{app}-v{_pinned()}", shown.stdout + shown.stderr


def test_vmalert_loads_every_rule_with_validation_on(stack: VmStack) -> None:
    """vmalert validates every expression with MetricsQL's parser at start-up (it would have
    exited); its rules API lists them all, each evaluated without an error."""
    assert not any(flag.startswith("-rule.validateExpressions") for flag in stack.vmalert_cmd)
    groups = stack.vmalert.get("/api/v1/rules")["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    written = yaml.safe_load(stack.rules.read_text(encoding="utf-8"))["groups"][0]["rules"]
    assert set(loaded) == {r.get("record") or r["alert"] for r in written}
    failing = {name: r["lastError"] for name, r in loaded.items() if r.get("lastError")}
    assert not failing, failing


def test_every_histogram_is_stored_as_vmrange_buckets_sum_and_count(stack: VmStack) -> None:
    seen = {
        s["metric"]["__name__"]
        for s in stack.vm.query(f'count by (__name__) ({{job="{SERVICE}"}})', stack.at)
    }
    # The native path sends the distributions instead of the per-round counter.
    expected = {
        m.series(suffix)
        for m in names.ALL_METRICS
        if m is not names.ROUND_TOKENS
        for suffix in (("_bucket", "_sum", "_count") if m.kind == "histogram" else ("",))
    }
    assert support.stored(seen) == expected
    for metric in (m for m in names.ALL_METRICS if m.kind == "histogram"):
        buckets = stack.vm.query(
            f'count by (vmrange, le) ({metric.series("_bucket")}{{job="{SERVICE}"}})', stack.at
        )
        assert buckets and all("vmrange" in s["metric"] and "le" not in s["metric"] for s in buckets), (
            metric.name
        )


def test_the_fits_counters_are_the_workloads_counts(stack: VmStack) -> None:
    expr = f'sum by ({TASK}, {OUTCOME}) ({names.FITS.prometheus}{{job="{SERVICE}"}})'
    got = {
        (s["metric"][TASK], s["metric"][OUTCOME]): round(_value(s)) for s in stack.vm.query(expr, stack.at)
    }
    assert {k: v for k, v in got.items() if v} == stack.fits()
    assert sum(stack.fits().values()) > 100


# --- every panel, against the workload's own totals ------------------------------------------


#: The histogram a quantile, share or heatmap target reads (its ``_bucket`` series).
_HISTOGRAM = re.compile(r"(?:job:)?(context_budget_\w+?)_bucket")


def _boards(backend: str) -> dict[str, dict[str, Any]]:
    return grafana.build_dashboards(backend=backend)


def _without_slo_row(boards: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The dashboards without the panels over the SLO recordings: their windows run to 28 days,
    and VictoriaMetrics answers an instant rollup over hours or more from a cache that starts a
    while after the series does, so they are read once settled
    (test_the_error_budget_row_answers_with_the_workloads_figures)."""
    records = alerts.slo_records(FAST)

    def keep(panel: dict[str, Any]) -> bool:
        return not any(r in t.get("expr", "") for t in panel.get("targets") or () for r in records)

    out = {}
    for name, model in boards.items():
        model = dict(model)
        model["panels"] = [
            {**p, "panels": [c for c in p.get("panels") or () if keep(c)]} if "panels" in p else p
            for p in model["panels"]
            if keep(p)
        ]
        out[name] = model
    return out


def _settled(stack: VmStack) -> float:
    """A moment when every recorded dashboard rate has held the workload's whole run for a minute
    (the time range a panel sums over): the run lasts seconds, its rates are recorded over 2m."""
    when = stack.finished + SETTLED
    # Read a few seconds later: every series recorded up to then has been written back.
    time.sleep(max(0.0, when + 5.0 - time.time()))
    return when


def _buckets(stack: VmStack, metric: str, expr: str) -> values.Buckets:
    """VictoriaMetrics's buckets of ``metric`` (whole run) per group of ``expr``: (lower, upper, count)."""
    group = values.group(expr)
    matchers = ", ".join(
        f'{label}{op}"{value}"' for label, op, value in values.MATCHER.findall(expr) if label == COMPONENT
    )
    selector = f"{metric}_bucket{{{matchers}}}"
    out: values.Buckets = {}
    for sample in stack.vm.query(f"sum by ({', '.join([*group, 'vmrange'])}) ({selector})", stack.at):
        lower, _, upper = sample["metric"]["vmrange"].partition("...")
        key = tuple(sorted((g, sample["metric"].get(g, "")) for g in group))
        out.setdefault(key, []).append((float(lower), float(upper), _value(sample)))
    return out


def _dropped(stack: VmStack, expr: str) -> tuple[float, float]:
    """The share of the observations MetricsQL still counts when it turns the ``vmrange`` buckets
    ``expr`` adds up into ``le`` ones: of several buckets ending at the same bound (series at
    different resolutions) it keeps one, whichever it meets first. (least, most) over which."""
    metric = _HISTOGRAM.search(expr)
    assert metric is not None, expr
    total, least, most = 0.0, 0.0, 0.0
    for buckets in _buckets(stack, metric.group(1), expr).values():
        ends: dict[float, list[float]] = {}
        for _, hi, count in buckets:
            ends.setdefault(hi, []).append(count)
            total += count
        least += sum(min(c) for c in ends.values())
        most += sum(max(c) for c in ends.values())
    return least / total, most / total


def _within_resolution(stack: VmStack, expr: str, answers: dict[values.Key, float]) -> bool | None:
    """A quantile (or a share over a bound) against the workload's own observations
    (:func:`values.within_resolution`); ``None``: no observations to hold it to. A quantile may
    lie in the bucket either side of the one holding the observations' own: where the series
    added up have different resolutions (an exponential histogram's scale drops as its range
    grows, per series) MetricsQL keeps one of two buckets that end at the same bound and drops
    the other's count (:func:`_dropped`), so the rank can fall one bucket early or late."""
    metric = _HISTOGRAM.search(expr)
    assert metric is not None, expr
    observed = values.observations(stack.report, metric.group(1), expr)
    if observed is None:
        return None
    out = values.within_resolution(
        expr, answers, observed, _buckets(stack, metric.group(1), expr), neighbours=True
    )
    for line in out:
        print(f"  out of its bucket: {line}")
    return not out


def test_every_panel_target_answers_the_workloads_totals(stack: VmStack) -> None:
    """Every target of the VictoriaMetrics dashboards answers, each the workload's own number:
    within 5 % of the Prometheus dashboards' same target over the totals the workload pushed
    (:func:`values.totals`, read from the reference Prometheus), and a quantile or a share over a bound
    within the resolution of its histogram, held to the workload's own observations where the
    report lists them. A quantile is not held to Prometheus's: both interpolate inside a bucket,
    VictoriaMetrics inside each series' own exponential bucket (its ``vmrange``), Prometheus inside
    the bucket of the coarsest resolution among the native histograms it adds up (schema 0 where
    a line's value never varies: buckets 256..512 wide), so they differ by up to a bucket.

    A target over recorded rates is read once those hold the whole run (:func:`_settled`); the
    others right after the run, their one-minute windows holding all of it."""
    vm_targets = support.panel_queries(_boards(VM))
    reference_targets = support.panel_queries(_boards(q.PROMETHEUS))
    assert [t[:2] for t in vm_targets] == [t[:2] for t in reference_targets]
    # Every target answers (the distributions too: they arrive as vmrange buckets).
    support.assert_panel_queries_answer(
        lambda expr: stack.vm.query(expr, stack.at), distributions=True, models=_without_slo_row(_boards(VM))
    )
    rules = {r["record"]: r["expr"] for r in alerts.recording_rules(FAST, backend=q.PROMETHEUS)}
    rows = []
    later = None
    for (board, title, vm_expr), (_, _, reference_expr) in zip(vm_targets, reference_targets):
        vm_expr = support.substitute(vm_expr)
        if any(record in vm_expr for record in alerts.slo_records(FAST)):
            continue  # the error-budget row: test_the_error_budget_row_answers_with_the_workloads_figures
        recorded = "job:" in vm_expr
        # A target reads recorded rates or raw series, never both (they are read at different moments).
        assert not recorded or "increase_pure(" not in vm_expr, vm_expr
        if recorded and later is None:
            later = _settled(stack)
        when = later if recorded else stack.at
        vm_result = stack.vm.query(vm_expr, when)
        truth_expr = values.totals(support.substitute(reference_expr), rules)
        assert "job:" not in truth_expr and "rate(" not in truth_expr, truth_expr
        reference = stack.prometheus.query(truth_expr, when)
        where = f"{board}: {title}"
        if "prometheus_buckets" in vm_expr:
            # A heatmap: VictoriaMetrics's buckets (le, by prometheus_buckets) against Prometheus's
            # native histogram: the +Inf bucket is the native histogram's count.
            vm_total = max(_value(s) for s in vm_result)
            reference_total = sum(float(s["histogram"][1]["count"]) for s in reference)
            least, most = _dropped(stack, vm_expr)
            assert reference_total * least - 1e-9 <= vm_total <= reference_total * most + 1e-9, (
                where,
                vm_total,
                reference_total,
                least,
                most,
            )
            rows.append(
                (
                    where,
                    0.0,
                    f"count {values.deviation(vm_total, reference_total) * 100:.1f} % low, as dropped",
                )
            )
            continue
        vm_values = {values.key(s): _value(s) for s in vm_result if math.isfinite(_value(s))}
        reference_values = {values.key(s): _value(s) for s in reference if math.isfinite(_value(s))}
        assert set(vm_values) == set(reference_values), (where, sorted(vm_values), sorted(reference_values))
        worst = max(values.deviation(vm_values[k], reference_values[k]) for k in reference_values)
        if values.QUANTILE.search(vm_expr):
            held = _within_resolution(stack, vm_expr, vm_values)
            if held is not None:
                rows.append(
                    (where, 0.0 if held else 1.0, f"in its bucket ({worst * 100:.1f} % from Prometheus's)")
                )
                continue
        rows.append((where, worst, f"{len(vm_values)} series"))
    for where, worst, what in rows:
        print(f"{worst * 100:6.2f} %  {what}  {where}")
    off = [(where, worst) for where, worst, _ in rows if worst > TOLERANCE]
    assert not off, off


# --- the rules vmalert evaluates ---------------------------------------------------------------


def test_every_recording_rule_holds_series(stack: VmStack) -> None:
    """Every rule vmalert records (the line distributions' sums too: they arrive) holds the
    workload's rates, written back into VictoriaMetrics."""
    replaced = names.recorded(names.ROUND_TOKENS)  # the distributions replace the per-round counter
    for rule in alerts.recording_rules(FAST, backend=VM):
        if rule["record"] == replaced:
            assert not stack.vm.query(f'{replaced}{{job="{SERVICE}"}}', stack.at)
            continue
        held = stack.vm.query(f'{rule["record"]}{{job="{SERVICE}"}}', stack.at)
        if names.PROVIDER_OVERFLOWS.prometheus in rule["expr"]:
            continue  # no provider refuses the workload's windows: nothing to record
        assert held, rule["record"]
        assert any(_value(s) > 0 for s in held), rule["record"]


def _overflowed(stack: VmStack) -> set[str]:
    """The task types whose overflow share over the run is above the alert's threshold."""
    totals, overflows = Counter[str](), Counter[str]()
    for (task, outcome), count in stack.fits().items():
        totals[task] += count
        if outcome == names.OUTCOME_OVERFLOW:
            overflows[task] += count
    return {task for task in totals if overflows[task] / totals[task] > FAST.overflow_ratio}


def _active(stack: VmStack, alert: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = stack.vmalert.get("/api/v1/alerts")["alerts"]
    return [a for a in found if a["labels"].get("alertname") == alert and a["labels"].get("job") == SERVICE]


def test_the_overflow_alert_fires_while_its_condition_holds_and_only_then(stack: VmStack) -> None:
    """It fired for exactly the task types whose overflow share was over the threshold (seed 23's
    disputes overflow, the others never), and once the window no longer holds an overflowed fit
    vmalert has resolved it."""
    expected = _overflowed(stack)
    assert expected and expected != {t for t, _ in stack.fits()}, expected
    history = stack.vm.query(
        f'max by ({TASK}) (max_over_time(ALERTS{{alertname="{alerts.OVERFLOW_RATE}", '
        f'alertstate="firing", job="{SERVICE}"}}[5m]))',
        time.time(),
    )
    assert {s["metric"][TASK] for s in history} == expected
    _settled(stack)
    assert not _active(stack, alerts.OVERFLOW_RATE), "still firing with no overflow in its window"


def test_the_telemetry_absent_alert_never_fires_while_data_flows(stack: VmStack) -> None:
    groups = stack.vmalert.get("/api/v1/rules")["groups"]
    (absent,) = [r for g in groups for r in g["rules"] if r["name"] == alerts.TELEMETRY_ABSENT]
    assert absent["health"] == "ok", absent
    assert absent["state"] == "inactive", absent
    assert not _active(stack, alerts.TELEMETRY_ABSENT)
    # Not at any evaluation since the workload's fits arrived (before its first push no otel-ctx
    # series existed at all: then the alert's fleet-wide arm fires, as it should).
    now = time.time()
    # At least a second: a zero range is MetricsQL's default window (minutes back, to the start-up).
    since = f"{max(1, math.floor(now - stack.at))}s"
    assert not stack.vm.query(f'max_over_time(ALERTS{{alertname="{alerts.TELEMETRY_ABSENT}"}}[{since}])', now)


# --- the agents' setting ---------------------------------------------------------------------


def test_one_scale_for_every_series_is_an_agent_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """``OTEL_CTX_EXPONENTIAL_MAX_SCALE`` sets the finest scale of every otel-ctx exponential
    histogram (a value that is not a scale keeps the default)."""
    from otel_ctx.telemetry import _exporters as exporters

    monkeypatch.setenv(exporters.ENV_EXPONENTIAL_MAX_SCALE, "3")
    assert exporters.exponential_max_scale() == 3
    from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation

    histograms = [
        v
        for v in exporters.views(native=True)
        if isinstance(v._aggregation, ExponentialBucketHistogramAggregation)
    ]
    assert histograms
    assert all(v._aggregation._max_scale == 3 for v in histograms)  # type: ignore[attr-defined]
    for bad in ("fine", "21", "-11"):
        monkeypatch.setenv(exporters.ENV_EXPONENTIAL_MAX_SCALE, bad)
        assert exporters.exponential_max_scale() == exporters.EXPONENTIAL_MAX_SCALE
    monkeypatch.delenv(exporters.ENV_EXPONENTIAL_MAX_SCALE)
    assert exporters.exponential_max_scale() == exporters.EXPONENTIAL_MAX_SCALE


# --- the error budgets ---------------------------------------------------------------------


def test_the_fast_burn_page_fires_for_exactly_the_task_type_that_burns(stack: VmStack) -> None:
    """vmalert pages for the disputes (a few percent of their fits overflow against 99.9%), with
    the objective in its labels, and for no other task type."""
    burning = {task for (task, outcome), count in stack.fits().items() if outcome == "overflow" and count}
    assert burning == {"dispute"}
    history = stack.vm.query(
        f"max by ({TASK}, objective, severity) (max_over_time(ALERTS"
        f'{{alertname="{alerts.OVERFLOW_FAST_BURN}", alertstate="firing", job="{SERVICE}"}}[5m]))',
        time.time(),
    )
    assert {s["metric"][TASK] for s in history} == burning
    assert {(s["metric"]["objective"], s["metric"]["severity"]) for s in history} == {("99.9%", slo.PAGE)}


def test_the_error_budget_row_answers_with_the_workloads_figures(stack: VmStack) -> None:
    """On VictoriaMetrics's dashboards: budget left = 1 - overflowed/fits ÷ (1 - objective) per task
    type from the workload's own counts (every counter started at 0 before the first fit), and
    the disputes burn far over the page's 14.4x."""
    fits, bad = Counter[str](), Counter[str]()
    for (task, outcome), count in stack.fits().items():
        fits[task] += count
        bad[task] += count if outcome == names.OUTCOME_OVERFLOW else 0
    panels = {
        title: expr
        for board, title, expr in support.panel_queries(grafana.build_dashboards(FAST, backend=VM))
        if board.startswith("otel-ctx-overview")
    }
    when = _settled(stack)
    left = {
        s["metric"][TASK]: _value(s)
        for s in stack.vm.query(
            support.substitute(panels["Error budget left: overflow (share of fits)"]), when
        )
    }
    own = {o.task_type: o for o in OBJECTIVES if o.kind == slo.OVERFLOW}
    assert set(left) == set(fits), left
    for task, total in fits.items():
        budget = own.get(task, own[slo.ANY_TASK_TYPE]).error_budget
        used = bad[task] / total / budget
        assert abs((1 - left[task]) - used) <= max(TOLERANCE * used, 1e-9), (task, left[task], used)
    # The burn over the fast window, at its highest between the run and now (the page fired on it).
    span = int(when - stack.finished + WORKLOAD_SECONDS) + 10
    burn_expr = support.substitute(panels["Overflow burn rate by window"])
    burn = {
        s["metric"][TASK]: _value(s)
        for s in stack.vm.query(f"max_over_time(({burn_expr})[{span}s:{EVALUATION}s])", when)
    }
    assert burn["dispute"] > 14.4, burn
    assert all(burn[task] == 0 for task in fits if not bad[task]), burn
