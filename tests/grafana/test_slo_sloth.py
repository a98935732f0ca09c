"""The SLOs handed to Sloth alert as otel-ctx's own error-budget rules do.

The exported Sloth spec is validated and turned into rules by the real Sloth (``make servers``
builds it), then Sloth's rules and otel-ctx's are each run by promtool on the same day of
one-minute samples (a day keeps promtool's run short; every window but the 3-day one fills):

* ``surge``: clean for eight hours, then a 15x burn for three hours: both page (fast and slow
  windows), then ticket while the long windows remember it;
* ``leak``: a steady 4x burn from the second hour, counted by the provider's refusals: a ticket
  and never a page;
* ``blip``: one six-minute burst of failures: a five-minute overflow alert would fire, no
  burn-rate alert does;
* ``quiet``: two fits an hour, and one overflow in the twentieth hour;

and of the ceiling's objectives (finished tickets the per-run ceiling stopped): ``surge``'s
tickets burn 15x during its surge (an objective of its own), ``escalate``'s a steady 4x (the
default objective).

At every checked minute both rule sets must fire the same (severity, SLO, task type) alerts.
The times checked are those where what fires has not changed for 20 minutes: otel-ctx's alerts
wait ``for:`` 2 minutes (page) and 15 minutes (ticket) before firing, Sloth's fire at once, and
both resolve at once.

What differs, and is checked as a difference: otel-ctx pages only on at least
``slo_min_events`` (20) events in the long window; Sloth has no such guard, so on the quiet
task type's single overflow Sloth pages (one failure among the hour's three fits is a 33% error
ratio) and otel-ctx does not. Both raise the ticket (the day's 40 fits are enough events).
Sloth's own 28-day window table would also page at 13.44x instead of 14.4x: the export carries
alert windows that give otel-ctx's factors, which :func:`test_sloth_thresholds_are_otel_ctx_factors`
checks in the rules Sloth generates.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
import support
import yaml

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _kubernetes as k8s
from otel_ctx.grafana import _promql as q
from otel_ctx.grafana import _slo as slo
from otel_ctx.grafana import _slo_export as slo_export

MINUTES = 1440
#: When each task type's trouble starts (minutes from the first sample).
LEAK_AT, SURGE_AT, BLIP_AT, QUIET_AT = 120, 480, 900, 1200
JOB = "agent"
#: Counters start high, as in a process that has run for a while: a rate never extrapolates a
#: series back to zero, so every series' rate over a window has the same extrapolation and the
#: ratio is exactly the events' ratio.
START = 100_000
TABLE = slo.merged(
    (),
    (
        slo.Objective("surge", 0.99),
        slo.Objective("blip", 0.95),
        slo.Objective(slo.ANY_TASK_TYPE, 0.99),
        slo.Objective("surge", 0.99, kind=slo.CEILING),
        slo.Objective(slo.ANY_TASK_TYPE, 0.95, kind=slo.CEILING),
    ),
)
TASK = q.TASK_TYPE
#: What fires, normalised: severity, SLO name and task type. Sloth names its SLO in ``sloth_slo``.
OURS_FIRING = f'group by (severity, slo, {TASK}) (ALERTS{{alertstate="firing", severity=~"page|ticket"}})'
SLOTH_FIRING = (
    f"group by (severity, slo, {TASK}) (label_replace("
    'ALERTS{alertstate="firing", severity=~"page|ticket"}, "slo", "$1", "sloth_slo", "(.+)"))'
)
#: Minutes what fires must have stayed the same before a time is checked (the longest ``for:``
#: is 15 minutes).
SETTLED = 20


@dataclass
class Traffic:
    """One task type's events per minute: good fits, overflowed fits, provider refusals."""

    good: list[float]
    overflow: list[float]
    refused: list[float]

    def cumulative(self, which: str) -> list[float]:
        total, out = float(START), []
        for value in getattr(self, which):
            total += value
            out.append(round(total, 6))
        return out


def _traffic() -> dict[str, Traffic]:
    zero = [0.0] * (MINUTES + 1)
    surge = Traffic([10.0] * (MINUTES + 1), list(zero), list(zero))
    for m in range(SURGE_AT, SURGE_AT + 180):
        surge.good[m], surge.overflow[m] = 8.5, 1.5  # 15% of 10 fits: 15x a 1% budget
    leak = Traffic([10.0] * (MINUTES + 1), list(zero), list(zero))
    for m in range(LEAK_AT, MINUTES + 1):
        leak.refused[m] = 0.4  # 4% of the fits refused by the provider: 4x a 1% budget
    blip = Traffic([10.0] * (MINUTES + 1), list(zero), list(zero))
    for m in range(BLIP_AT, BLIP_AT + 6):
        blip.good[m], blip.overflow[m] = 0.0, 10.0
    quiet = Traffic([1.0 if m % 30 == 15 else 0.0 for m in range(MINUTES + 1)], list(zero), list(zero))
    quiet.overflow[QUIET_AT] = 1.0
    return {"surge": surge, "leak": leak, "blip": blip, "quiet": quiet}


@dataclass
class Tickets:
    """One task type's finished tickets per minute, and how many of them the ceiling stopped."""

    runs: list[float]
    stops: list[float]

    cumulative = Traffic.cumulative


def _tickets() -> dict[str, Tickets]:
    surge = Tickets([2.0] * (MINUTES + 1), [0.0] * (MINUTES + 1))
    for m in range(SURGE_AT, SURGE_AT + 180):
        surge.stops[m] = 0.3  # 15% of the tickets: 15x a 1% budget
    escalate = Tickets([2.0] * (MINUTES + 1), [0.0] * (MINUTES + 1))
    for m in range(LEAK_AT, MINUTES + 1):
        escalate.stops[m] = 0.4  # 20% of the tickets: 4x a 5% budget
    return {"surge": surge, "escalate": escalate}


TRAFFIC = _traffic()
TICKETS = _tickets()


def _input_series() -> list[dict[str, str]]:
    fits, refused = names.FITS.prometheus, names.PROVIDER_OVERFLOWS.prometheus
    out = []
    for task, traffic in TRAFFIC.items():
        for series, which in (
            (f'{fits}{{job="{JOB}", {TASK}="{task}", {q.OUTCOME}="{names.OUTCOME_FIT}"}}', "good"),
            (f'{fits}{{job="{JOB}", {TASK}="{task}", {q.OUTCOME}="{names.OUTCOME_OVERFLOW}"}}', "overflow"),
            (f'{refused}{{job="{JOB}", {TASK}="{task}"}}', "refused"),
        ):
            out.append({"series": series, "values": " ".join(f"{v:.12g}" for v in traffic.cumulative(which))})
    runs, stops = names.RUN_TOKENS.series("_count"), names.CEILING_STOPS.prometheus
    resolution = names.prometheus_label(names.RESOLUTION)
    for task, tickets in TICKETS.items():
        for series, which in (
            (f'{runs}{{job="{JOB}", {TASK}="{task}", {resolution}="{names.RESOLUTIONS[0]}"}}', "runs"),
            (f'{stops}{{job="{JOB}", {TASK}="{task}"}}', "stops"),
        ):
            out.append({"series": series, "values": " ".join(f"{v:.12g}" for v in tickets.cumulative(which))})
    return out


# --- what should fire: the burn-rate conditions on the generated counts ---------------------


def _objective(task: str, kind: str = slo.OVERFLOW) -> slo.Objective:
    own = {o.task_type: o for o in TABLE if o.kind == kind}
    return own.get(task, own[slo.ANY_TASK_TYPE])


def _window_minutes(window: str) -> int:
    return int(q.seconds(window) // 60)


class Model:
    """Each task type's error ratio and events over a window ending at a minute, as a rate over a
    Prometheus range selector of one-minute samples reads them."""

    def __init__(self) -> None:
        #: (kind, task type) -> cumulative bad events and all events, per minute.
        self.bad: dict[tuple[str, str], list[float]] = {}
        self.total: dict[tuple[str, str], list[float]] = {}
        for task, traffic in TRAFFIC.items():
            good, overflow, refused = (traffic.cumulative(w) for w in ("good", "overflow", "refused"))
            self.bad[(slo.OVERFLOW, task)] = [o + r for o, r in zip(overflow, refused, strict=True)]
            self.total[(slo.OVERFLOW, task)] = [g + o for g, o in zip(good, overflow, strict=True)]
        for task, tickets in TICKETS.items():
            self.bad[(slo.CEILING, task)] = tickets.cumulative("stops")
            self.total[(slo.CEILING, task)] = tickets.cumulative("runs")

    def _delta(self, series: list[float], minute: int, window: str) -> float | None:
        first = max(0, minute - _window_minutes(window) + 1)
        return None if minute - first < 1 else series[minute] - series[first]

    def ratio(self, task: tuple[str, str], minute: int, window: str) -> float | None:
        bad, total = (
            self._delta(self.bad[task], minute, window),
            self._delta(self.total[task], minute, window),
        )
        return None if bad is None or not total else bad / total

    def events(self, task: tuple[str, str], minute: int, window: str) -> float:
        return self._delta(self.total[task], minute, window) or 0.0

    def firing(self, minute: int, guard: float) -> frozenset[tuple[str, str, str]]:
        """(severity, SLO, task type) whose burn conditions hold at ``minute`` (``guard``: events
        the long window needs, 0 for none)."""
        out = set()
        for key in self.bad:
            kind, task = key
            objective = _objective(task, kind)
            for burn in slo.BURN_WINDOWS:
                threshold = burn.factor * objective.error_budget
                ratios = [self.ratio(key, minute, w) for w in (burn.long, burn.short)]
                if all(r is not None and r > threshold for r in ratios) and (
                    self.events(key, minute, burn.long) >= guard
                ):
                    out.add((burn.severity, objective.name, task))
        return frozenset(out)


MODEL = Model()


def _guard() -> float:
    """The events otel-ctx's burn-rate alerts need in their long window (``slo_min_events``)."""
    return float(alerts.AlertSettings().slo_min_events)


def _checked_times(guard: float) -> list[int]:
    """Every half hour, and the minutes around the quiet overflow and the blip, where what fires
    has stayed the same for :data:`SETTLED` minutes."""
    around = [BLIP_AT + 3, BLIP_AT + 5, BLIP_AT + 10, QUIET_AT + 4, QUIET_AT + 25, QUIET_AT + 40]
    wanted = sorted({*range(60, MINUTES + 1, 30), *around})
    return [
        t for t in wanted if len({MODEL.firing(m, guard) for m in range(max(0, t - SETTLED), t + 1)}) == 1
    ]


def _samples(firing: Iterable[tuple[str, str, str]]) -> list[dict[str, object]]:
    return [
        {"labels": f'{{severity="{sev}", slo="{name}", {TASK}="{task}"}}', "value": 1}
        for sev, name, task in sorted(firing)
    ]


def _unit_tests(rules: Path, expr: str, guard: float, times: list[int]) -> dict[str, object]:
    return {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _input_series(),
                "promql_expr_test": [
                    {"expr": expr, "eval_time": f"{t}m", "exp_samples": _samples(MODEL.firing(t, guard))}
                    for t in times
                ],
            }
        ],
    }


# --- the binaries and the generated rules ---------------------------------------------------


@pytest.fixture(scope="module")
def sloth() -> Path:
    return support.built_servers("sloth")["sloth"]


@pytest.fixture(scope="module")
def promtool() -> str:
    return support.prometheus_tool("promtool")


def _export(out: Path, objectives: tuple[slo.Objective, ...] = TABLE, **kwargs: str) -> Path:
    for name, text in slo_export.sloth_files(objectives, **kwargs).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
    return out / slo_export.sloth_filename(slo.DEFAULT_WINDOW)


def _sloth(binary: Path, command: str, spec: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run Sloth on an exported spec with the export's alert windows (whatever it answers)."""
    windows = spec.parent / slo_export.WINDOWS_DIR
    args = [str(binary), command, "-i", str(spec), "--default-slo-period", slo.DEFAULT_WINDOW]
    args += ["--slo-period-windows-path", str(windows), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def _sloth_ok(binary: Path, command: str, spec: Path, *extra: str) -> None:
    result = _sloth(binary, command, spec, *extra)
    assert result.returncode == 0, f"sloth {command} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def sloth_rules(sloth: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sloth")
    spec = _export(out)
    _sloth_ok(sloth, "generate", spec, "-o", str(out / "sloth-rules.yml"))
    return out / "sloth-rules.yml"


@pytest.mark.parametrize(
    ("names_", "backend"),
    [("underscore", "prometheus"), ("utf8", "prometheus"), ("underscore", "victoriametrics")],
)
def test_sloth_validates_the_export(sloth: Path, tmp_path: Path, names_: str, backend: str) -> None:
    """Sloth reads every export: the default objectives, each naming and backend (MetricsQL is
    checked by Sloth's VictoriaMetrics plugin), and what it generates loads where it runs:
    ``promtool check rules`` (expressions and annotation templates), vmalert's ``-dryRun``."""
    spec = _export(tmp_path, slo.DEFAULT_OBJECTIVES, names_=names_, backend=backend)
    _sloth_ok(sloth, "validate", spec)
    generated = tmp_path / "rules.yml"
    _sloth_ok(sloth, "generate", spec, "-o", str(generated))
    groups = yaml.safe_load(generated.read_text(encoding="utf-8"))["groups"]
    alerting = [r for g in groups for r in g["rules"] if "alert" in r]
    # A page and a ticket per objective.
    assert len(alerting) == 2 * len(slo.DEFAULT_OBJECTIVES)
    assert {r["labels"]["severity"] for r in alerting} == {slo.PAGE, slo.TICKET}
    if backend == q.VICTORIAMETRICS:
        check = [str(support.built_servers("vmalert")["vmalert"]), "-dryRun", f"-rule={generated}"]
    else:
        check = [support.prometheus_tool("promtool"), "check", "rules", str(generated)]
    result = subprocess.run(check, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def test_sloth_turns_its_kubernetes_objects_into_prometheus_rules(sloth: Path, tmp_path: Path) -> None:
    """The PrometheusServiceLevel objects are what Sloth's controller reads: ``sloth generate``
    turns each into a Prometheus Operator PrometheusRule in the same namespace."""
    _export(tmp_path)  # the alert windows next to the objects
    objects = slo_export.prometheus_service_levels(TABLE, k8s.Options(namespace="monitoring"))
    spec = tmp_path / "servicelevels.yaml"
    spec.write_text(slo_export.dump_all(objects), encoding="utf-8")
    _sloth_ok(sloth, "validate", spec)
    out = tmp_path / "prometheusrules.yaml"
    _sloth_ok(sloth, "generate", spec, "-o", str(out))
    rules = [doc for doc in yaml.safe_load_all(out.read_text(encoding="utf-8")) if doc]
    assert [(r["kind"], r["metadata"]["namespace"]) for r in rules] == [("PrometheusRule", "monitoring")]
    alerting = [rule for g in rules[0]["spec"]["groups"] for rule in g["rules"] if "alert" in rule]
    assert len(alerting) == 2 * len(TABLE)


def test_sloth_validate_refuses_a_broken_spec(sloth: Path, tmp_path: Path) -> None:
    """The validation above can fail: a query without Sloth's window variable is refused."""
    spec = _export(tmp_path)
    text = spec.read_text(encoding="utf-8").replace("{{.window}}", "5m")
    spec.write_text(text, encoding="utf-8")
    result = _sloth(sloth, "validate", spec)
    assert result.returncode != 0, result.stdout + result.stderr
    assert "window" in result.stdout + result.stderr


@pytest.mark.parametrize("names_", ["underscore", "utf8"])
def test_oslo_validates_the_openslo_documents(tmp_path: Path, names_: str) -> None:
    """OpenSLO's own validator (oslo, the version Sloth reads OpenSLO with) accepts the Service,
    SLI and SLO documents, and refuses them with a budgeting method OpenSLO does not have."""
    oslo = str(support.built_servers("oslo")["oslo"])
    documents = tmp_path / "openslo.yaml"
    text = slo_export.dump_all(slo_export.openslo(slo.DEFAULT_OBJECTIVES, names_))
    documents.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [oslo, "validate", "-f", str(documents)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0 and "Valid" in result.stdout, result.stdout + result.stderr
    documents.write_text(text.replace("budgetingMethod: Occurrences", "budgetingMethod: Events"))
    result = subprocess.run(
        [oslo, "validate", "-f", str(documents)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0, result.stdout
    assert "BudgetingMethod" in result.stdout + result.stderr


def test_sloth_thresholds_are_otel_ctx_factors(sloth_rules: Path) -> None:
    """Each Sloth alert compares each window's error ratio with otel-ctx's factor times the
    objective's budget (the exported alert windows; Sloth's own 28d table would give 13.44x)."""
    groups = yaml.safe_load(sloth_rules.read_text(encoding="utf-8"))["groups"]
    found: dict[tuple[str, str], list[float]] = {}
    for rule in (r for g in groups for r in g["rules"] if "alert" in r):
        name = next(
            slo_export.slo_name(o) for o in TABLE if f'sloth_slo="{slo_export.slo_name(o)}"' in rule["expr"]
        )
        factors = [float(f) for f, _ in re.findall(r"> \(([0-9.e-]+) \* ([0-9.e-]+)\)", rule["expr"])]
        found[(name, rule["labels"]["sloth_severity"])] = factors
    for objective in TABLE:
        for severity in slo.SEVERITIES:
            wanted = sorted(b.factor for b in slo.BURN_WINDOWS if b.severity == severity for _ in (0, 1))
            got = sorted(found[(slo_export.slo_name(objective), severity)])
            assert got == pytest.approx(wanted, rel=1e-9)


def _run(promtool: str, tests: dict[str, object], where: Path) -> None:
    file = where / "tests.yml"
    file.write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", str(file)], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def test_scenario_is_telling() -> None:
    """The series make every case happen: a page and a ticket on the 15x burn, a ticket and no
    page on the 4x one, nothing on the blip, and on the quiet task type a page without the
    minimum-events guard and none with it."""
    guard = _guard()
    fired = {m: MODEL.firing(m, guard) for m in range(MINUTES + 1)}
    unguarded = {m: MODEL.firing(m, 0) for m in range(MINUTES + 1)}
    seen = {item for items in fired.values() for item in items}
    overflow_any = _objective("leak").name
    assert (slo.PAGE, _objective("surge").name, "surge") in seen
    assert (slo.PAGE, _objective("surge", slo.CEILING).name, "surge") in seen
    assert (slo.TICKET, _objective("escalate", slo.CEILING).name, "escalate") in seen
    assert (slo.PAGE, _objective("escalate", slo.CEILING).name, "escalate") not in seen
    assert (slo.TICKET, _objective("surge").name, "surge") in seen
    assert (slo.TICKET, overflow_any, "leak") in seen
    assert (slo.PAGE, overflow_any, "leak") not in seen
    assert not any(task == "blip" for _, _, task in seen)
    quiet_pages = {m for m, items in unguarded.items() if (slo.PAGE, overflow_any, "quiet") in items}
    assert quiet_pages
    assert not any((slo.PAGE, overflow_any, "quiet") in items for items in fired.values())
    # The checked times cover the quiet task type's difference and both sides of every alert.
    times = _checked_times(0)
    assert any((slo.PAGE, overflow_any, "quiet") in unguarded[t] for t in times)
    assert any(not fired[t] for t in times)
    assert any((slo.PAGE, _objective("surge").name, "surge") in fired[t] for t in times)


def test_otel_ctx_rules_fire_as_the_model_says(promtool: str, tmp_path: Path) -> None:
    """otel-ctx's own rules (minimum-events guard included) on the series, checked by promtool."""
    rules = tmp_path / "alerts.yml"
    rules.write_text(alerts.render(alerts.AlertSettings(objectives=TABLE)), encoding="utf-8")
    _run(promtool, _unit_tests(rules, OURS_FIRING, _guard(), _checked_times(_guard())), tmp_path)


def test_sloth_rules_fire_as_otel_ctx_rules_do(promtool: str, sloth_rules: Path, tmp_path: Path) -> None:
    """Sloth's rules on the same series fire the same alerts at the same times, but for the quiet
    task type's page, which only the minimum-events guard holds back."""
    unguarded = set(_checked_times(0))
    times = [t for t in _checked_times(_guard()) if t in unguarded]
    _run(promtool, _unit_tests(sloth_rules, SLOTH_FIRING, 0, times), tmp_path)
    # Away from the quiet task type the two expectations are one and the same.
    for t in times:
        ours = {item for item in MODEL.firing(t, _guard()) if item[2] != "quiet"}
        theirs = {item for item in MODEL.firing(t, 0) if item[2] != "quiet"}
        assert ours == theirs, t
