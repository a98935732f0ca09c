"""The shipped Prometheus rules: generated from the registry, valid, and unit-tested by promtool."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import support
import yaml

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _conventions as conventions
from otel_ctx.grafana import _slo as slo
from otel_ctx.grafana import _slo_tests as slo_tests

TICKET_ALERTS = (alerts.CEILING_STOP_RATE, alerts.COST_PER_TICKET_HIGH)
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "dashboards" / "alerts.yml"
RULE_TESTS = ROOT / "dashboards" / "alerts.test.yml"
#: The error-budget alerts' promtool tests, generated from the objectives (days of samples).
SLO_TESTS = ROOT / "dashboards" / "slo.test.yml"
#: The SLO recording rules: error ratios, budgets and budget left, named by what they hold.
SLO_RECORDS = alerts.slo_records()

# Every series a histogram or counter in the registry can become: a histogram is its classic
# series, or one native series where it is pushed with exponential buckets.
REGISTRY_SERIES = {
    m.series(suffix)
    for m in names.ALL_METRICS
    for suffix in (("", "_bucket", "_sum", "_count") if m.kind == "histogram" else ("",))
}
# The windows a recorded rate can have: the dashboards' one and every alert's.
WINDOWS = {names.DASHBOARD_WINDOW, *alerts.slo_windows(alerts.DEFAULT_SETTINGS)} | {
    value
    for key, value in dataclasses.asdict(alerts.DEFAULT_SETTINGS).items()
    if key.endswith("_window") and value
}
# ... and the recording rule that can hold each one's rate, summed to the service.
METRIC_OF = {
    series: m
    for m in names.ALL_METRICS
    for suffix in (("", "_bucket", "_sum", "_count") if m.kind == "histogram" else ("",))
    for series in (m.series(suffix), *(names.recorded(m, suffix, w) for w in WINDOWS))
}
#: Recording rules over native histograms. The unit tests here feed promtool classic series;
#: tests/e2e/test_native.py checks these, values included, on a real Prometheus fed by the Collector.
NATIVE_RECORDS = alerts.NATIVE_RECORDS
#: A recording rule's name: ``job:<series>:rate<window>``.
RECORDED = re.compile(r"\bjob:([a-zA-Z0-9_]+):rate(\d+[smhdwy])\b")


def _group() -> list[dict[str, Any]]:
    groups = alerts.build()["groups"]
    assert [g["name"] for g in groups] == [alerts.GROUP_NAME]
    rules: list[dict[str, Any]] = groups[0]["rules"]
    return rules


def _rules() -> list[dict[str, Any]]:
    """The alerting rules (the group starts with the recording rules they read)."""
    return [r for r in _group() if "alert" in r]


def _recording() -> list[dict[str, Any]]:
    return [r for r in _group() if "record" in r]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = support.prometheus_tool("promtool")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60, check=False)


def test_committed_rules_equal_the_generator_output() -> None:
    assert RULES.read_text(encoding="utf-8") == alerts.render(), (
        "dashboards/alerts.yml is stale: run `otel-ctx dashboards build` (or `make dashboards`)"
    )


def test_check_says_whether_a_rule_file_is_current(tmp_path: Path) -> None:
    path = tmp_path / alerts.RULES_FILENAME
    assert "missing" in (alerts.check(path) or "")
    alerts.write(path)
    assert alerts.check(path) is None
    path.write_text(path.read_text(encoding="utf-8").replace("> 0.05", "> 0.5"), encoding="utf-8")
    assert "differs" in (alerts.check(path) or "")
    assert alerts.check(RULES) is None


def test_write_creates_the_rendered_file(tmp_path: Path) -> None:
    out = alerts.write(tmp_path / "sub" / "rules.yml", alerts.AlertSettings(overflow_ratio=0.2))
    text = out.read_text(encoding="utf-8")
    assert text == alerts.render(alerts.AlertSettings(overflow_ratio=0.2))
    assert yaml.safe_load(text) == alerts.build(alerts.AlertSettings(overflow_ratio=0.2))
    assert "> 0.2" in alerts.expressions(alerts.AlertSettings(overflow_ratio=0.2))[alerts.OVERFLOW_RATE]


def test_every_alert_is_actionable_and_links_the_overview_dashboard() -> None:
    rules = _rules()
    # Each name once, in order; an error-budget alert has one rule per objective and window.
    assert list(dict.fromkeys(r["alert"] for r in rules)) == list(alerts.ALERT_NAMES)
    assert [r["alert"] for r in rules][: len(alerts.THRESHOLD_ALERTS)] == list(alerts.THRESHOLD_ALERTS)
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning", "page", "ticket"), rule["alert"]
        ann = rule["annotations"]
        assert ann["summary"].strip(), rule["alert"]
        assert "\n" not in ann["summary"], rule["alert"]
        # What it means, where to look, what to do: several sentences, not a restated name.
        assert len(ann["description"]) > 200, rule["alert"]
        # The ticket view's alerts open the cost dashboard, where their panels are.
        uid = conventions.COST_UID if rule["alert"] in TICKET_ALERTS else conventions.OVERVIEW_UID
        assert f"/d/{uid}" in ann["dashboard"], rule["alert"]


def test_expressions_use_only_registry_series_and_labels() -> None:
    metric_of = METRIC_OF
    exprs = {**alerts.expressions(), **{r["record"]: r["expr"] for r in _recording()}}
    burning = [r for r in _rules() if "slo" in r["labels"]]
    exprs |= {f"{r['alert']} {r['labels']['slo']} {r['labels']['long_window']}": r["expr"] for r in burning}
    for name, expr in exprs.items():
        used = set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:[{\[]|\)|$)", expr)) & set(METRIC_OF)
        # An error budget or budget left reads the SLO's recorded error ratio, built from these.
        assert used or any(record in expr for record in SLO_RECORDS), name
        assert used <= set(METRIC_OF), f"{name} uses series outside the registry: {used - set(METRIC_OF)}"
        allowed = {"job", "le"} | {
            names.prometheus_label(a) for series in used for a in metric_of[series].attributes
        }
        grouped = {
            label.strip()
            for labels in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr)
            for label in labels.split(",")
        }
        matched = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*=~?\s*\"", expr))
        assert grouped | matched <= allowed, f"{name} uses labels the metrics do not carry"


_RENAMED_RULES = """
import dataclasses, sys
import otel_ctx.names as n

def renamed(value):
    for old, new in (("context_budget.", "cb_renamed."), ("gen_ai.", "genai_renamed.")):
        if value.startswith(old):
            return new + value[len(old):]
    return value

# Every attribute and span name first, then the metrics built from them, as if the registry
# had spelled them so from the start.
for key, value in list(vars(n).items()):
    if key.isupper() and isinstance(value, str):
        setattr(n, key, renamed(value))
metrics = {}
for key, value in list(vars(n).items()):
    if isinstance(value, n.Metric):
        metrics[value] = dataclasses.replace(
            value, name=renamed(value.name), attributes=tuple(renamed(a) for a in value.attributes)
        )
        setattr(n, key, metrics[value])
n.METRICS = tuple(metrics[m] for m in n.METRICS)
from otel_ctx.grafana import _alerts as alerts
sys.stdout.write(alerts.render())
"""


def test_a_rename_in_the_registry_moves_every_rule() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _RENAMED_RULES], capture_output=True, text=True, check=True
    ).stdout
    assert "cb_renamed_fits_total" in out and "cb_renamed_task_type" in out
    assert "genai_renamed_request_model" in out
    # Nothing of the old names is left: the generator spells none of them itself.
    assert "context_budget" not in out and "gen_ai" not in out


def test_settings_reject_meaningless_thresholds() -> None:
    with pytest.raises(ValueError, match="overflow_ratio"):
        alerts.AlertSettings(overflow_ratio=1.5)
    with pytest.raises(ValueError, match="drift_ratio"):
        alerts.AlertSettings(drift_ratio=0.9)
    with pytest.raises(ValueError, match="utilization_quantile"):
        alerts.AlertSettings(utilization_quantile=95)


def test_fast_settings_keep_the_expressions_but_not_the_waiting() -> None:
    fast = alerts.build(alerts.AlertSettings.fast("30s"))["groups"][0]["rules"]
    slow = _rules()
    assert [r["alert"] for r in fast if "alert" in r] == [r["alert"] for r in slow]
    assert all(r["for"] == "0s" for r in fast if "alert" in r)
    # The alerts read rates recorded over the (fast) windows; the dashboards' rates keep theirs.
    dashboard = {names.recorded(m, sfx) for m, sfx in _DASHBOARD_RATES}
    # The objectives keep their own window (28 days): the budget left is the same question.
    objective = {o.window for o in alerts.DEFAULT_SETTINGS.objectives}
    objective |= set(slo.ratio_windows(slo.BURN_WINDOWS))  # recorded for the shipped dashboards
    for rule in fast:
        if "record" in rule and rule["record"] not in alerts.slo_records(alerts.AlertSettings.fast("30s")):
            windows = {names.DASHBOARD_WINDOW} if rule["record"] in dashboard else {"30s", *objective}
            assert any(f"[{w}]" in rule["expr"] for w in windows), rule["record"]
    assert {r["record"] for r in fast if "record" in r} >= dashboard
    assert {w for r in fast if "alert" in r for _, w in RECORDED.findall(r["expr"])} == {"30s"}


_DASHBOARD_RATES = (
    (names.FITS, ""),
    (names.UTILIZATION, "_bucket"),
    (names.TOKENS, ""),
    (names.ROUND_TOKENS, ""),
    # Their native twins, where histograms are pushed as native ones: the utilization's own
    # histogram, and the line distributions' sums that stand in for the per-round counter.
    (names.UTILIZATION, ""),
    (names.LINE_TOKENS, "_sum"),
)


def test_every_recording_rule_is_named_by_the_window_it_averages() -> None:
    """``job:<series>:rate5m`` holds ``rate(<series>[5m])``: a reader sees the window, and no name
    stands for two windows (dividing one by the other would divide different minutes)."""
    for settings in (alerts.DEFAULT_SETTINGS, alerts.AlertSettings.fast("30s")):
        records = [r for r in alerts.build(settings)["groups"][0]["rules"] if "record" in r]
        records = [r for r in records if r["record"] not in alerts.slo_records(settings)]
        assert len({r["record"] for r in records}) == len(records)
        for rule in records:
            series, window = RECORDED.fullmatch(rule["record"]).groups()  # type: ignore[union-attr]
            if rule["record"] in alerts.native_records(settings) and series.endswith("_sum"):
                # A native histogram's sum: the rate of its ``_sum``, from the histogram itself.
                histogram = series.removesuffix("_sum")
                assert rule["expr"].count(f"histogram_sum(rate({histogram}{{"), rule["record"]
                assert f"[{window}]))" in rule["expr"], rule["record"]
                continue
            assert f"rate({series}[{window}])" in rule["expr"], rule["record"]


def test_each_alert_divides_rates_over_one_window() -> None:
    for settings in (alerts.DEFAULT_SETTINGS, alerts.AlertSettings.fast("30s")):
        for alert, expr in alerts.expressions(settings).items():
            windows = {w for _, w in RECORDED.findall(expr)}
            assert len(windows) <= 1, (alert, windows)


def test_dashboards_read_every_recorded_rate_over_the_one_dashboard_window() -> None:
    """A panel's tokens ÷ fits, line ÷ budget: both sides averaged over the same minutes."""
    recorded = {r["record"] for r in _recording()}
    used = set()
    for _, title, expr in support.panel_queries():
        for match in RECORDED.finditer(expr):
            assert match.group(2) == names.DASHBOARD_WINDOW, (title, match.group(0))
            assert match.group(0) in recorded, (title, match.group(0))
            used.add(match.group(0))
    assert used == {names.recorded(m, sfx) for m, sfx in _DASHBOARD_RATES}


def test_every_alert_reads_recorded_rates_that_the_group_records_before_it() -> None:
    """The heavy part of each alert is precomputed, in the same group and earlier in it.

    Prometheus evaluates a group's rules in order, so an alert sees the rates recorded in
    the same evaluation, not the previous one.
    """
    group = _group()
    position = {r.get("record") or r["alert"]: i for i, r in enumerate(group)}
    for rule in _rules():
        read = {m.group(0) for m in RECORDED.finditer(rule["expr"])}
        if rule["alert"] == alerts.TELEMETRY_ABSENT:
            assert not read  # absence is about the raw series: a recorded rate of nothing is nothing
            continue
        assert read, rule["alert"]
        assert "rate(" not in rule["expr"], rule["alert"]
        for record in read:
            assert position[record] < position[rule["alert"]], (record, rule["alert"])


def test_recording_rules_sum_away_only_the_process() -> None:
    """Every recorded rate keeps its metric's labels (and job, le) and drops instance."""
    for rule in _recording():
        if rule["record"] in SLO_RECORDS:
            continue  # a ratio of the recorded rates, per service and task type (test_slo.py)
        metric = METRIC_OF[rule["record"]]
        kept = set(
            re.fullmatch(r"sum by \(([^)]*)\) \((?:histogram_sum\()?rate\(.*\)\)", rule["expr"])
            .group(1)
            .split(", ")
        )  # type: ignore[union-attr]
        expected = {"job"} | {names.prometheus_label(a) for a in metric.attributes}
        if "_bucket:rate" in rule["record"]:
            expected.add("le")
        assert kept == expected, rule["record"]


def test_unit_tests_cover_a_firing_and_a_silent_case_for_every_alert() -> None:
    fires: set[str] = set()
    silent: set[str] = set()
    recorded: set[str] = set()
    for path in (RULE_TESTS, SLO_TESTS):
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert spec["rule_files"] == [RULES.name]
        for group in spec["tests"]:
            for case in group.get("alert_rule_test") or ():
                (fires if case.get("exp_alerts") else silent).add(case["alertname"])
            for case in group.get("promql_expr_test") or ():
                recorded |= {m.group(0) for m in RECORDED.finditer(case["expr"])}
                recorded |= {r for r in SLO_RECORDS if r in case["expr"]}
    assert fires == set(alerts.ALERT_NAMES)
    assert silent == set(alerts.ALERT_NAMES)
    # Every recording rule's value is checked on its own, with two processes to sum.
    assert recorded == {r["record"] for r in _recording()} - NATIVE_RECORDS


@pytest.mark.e2e
def test_promtool_accepts_the_committed_rules() -> None:
    result = _promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_group())} rules found" in result.stdout


@pytest.mark.e2e
def test_promtool_accepts_the_fast_variant(tmp_path: Path) -> None:
    path = alerts.write(tmp_path / "fast.yml", alerts.AlertSettings.fast())
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_promtool_unit_tests_pass() -> None:
    result = _promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.e2e
def test_promtool_unit_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    """The unit tests are not vacuous: a rule file with a laxer overflow threshold fails them."""
    (tmp_path / RULE_TESTS.name).write_text(RULE_TESTS.read_text(encoding="utf-8"), encoding="utf-8")
    alerts.write(tmp_path / RULES.name, alerts.AlertSettings(overflow_ratio=0.15))
    result = _promtool("test", "rules", str(tmp_path / RULE_TESTS.name))
    assert result.returncode != 0
    assert alerts.OVERFLOW_RATE in result.stdout + result.stderr


def test_dashboard_links_use_the_overview_uid_and_its_variables() -> None:
    """The links open the dashboard the generator builds, with variables it defines."""
    for rule in _rules():
        uid = conventions.COST_UID if rule["alert"] in TICKET_ALERTS else conventions.OVERVIEW_UID
        board = json.loads((ROOT / "dashboards" / f"{uid}.json").read_text(encoding="utf-8"))
        assert board["uid"] == uid
        variables = {v["name"] for v in board["templating"]["list"]}
        link = urlsplit(rule["annotations"]["dashboard"])
        assert link.path == f"/d/{uid}"
        used = {key.removeprefix("var-") for key in parse_qs(link.query)}
        assert used <= variables, f"{rule['alert']} links variables the dashboard lacks: {used - variables}"


def test_overflow_alert_selects_the_overflow_outcome_and_searches_jaeger_for_it() -> None:
    expr = alerts.expressions()[alerts.OVERFLOW_RATE]
    assert 'context_budget_outcome="overflow"' in expr
    jaeger = urlsplit(_rules()[0]["annotations"]["jaeger"])
    query = parse_qs(jaeger.query)
    assert json.loads(query["tags"][0]) == {"context_budget.outcome": "overflow"}
    # No operation filter: run()'s fit spans and the instrumented calls' observe spans both match.
    assert "operation" not in query


def test_every_alert_links_its_runbook_section_of_the_sre_guide() -> None:
    guide = (ROOT / "docs" / "sre-guide.md").read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in guide.splitlines()
        if line.startswith("#")
    }
    for rule in _rules():
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == alerts.DEFAULT_SETTINGS.runbook_url == "docs/sre-guide.md"
        assert anchor in anchors, rule["alert"]
    moved = alerts.build(alerts.AlertSettings(runbook_url="https://runbooks.example/otel-ctx"))
    assert all(
        r["annotations"]["runbook_url"].startswith("https://runbooks.example/otel-ctx#")
        for r in moved["groups"][0]["rules"]
        if "alert" in r
    )


def test_settings_come_from_the_environment_then_the_overrides() -> None:
    env = {
        "OTEL_CTX_GRAFANA_URL": "https://grafana.example",
        "OTEL_CTX_OVERFLOW_RATIO": "0.1",
        "OTEL_CTX_OVERFLOW_WINDOW": "10m",
        "UNRELATED": "x",
    }
    s = alerts.AlertSettings.from_env(env, {"overflow_ratio": "0.2"})
    assert s.grafana_url == "https://grafana.example"
    assert s.overflow_window == "10m"
    assert s.overflow_ratio == 0.2  # the override wins over the environment
    assert alerts.AlertSettings.from_env({}) == alerts.DEFAULT_SETTINGS
    with pytest.raises(ValueError, match="OTEL_CTX_OVERFLOW_RATIO"):
        alerts.AlertSettings.from_env({"OTEL_CTX_OVERFLOW_RATIO": "five percent"})
    with pytest.raises(ValueError, match=r"OTEL_CTX_OVERFLOW_FOR.*duration"):
        alerts.AlertSettings.from_env({"OTEL_CTX_OVERFLOW_FOR": "ten minutes"})
    with pytest.raises(ValueError, match="no alert setting 'overflow'"):
        alerts.AlertSettings.from_env({}, {"overflow": "0.1"})
    rules = alerts.render(s)
    assert "https://grafana.example/d/" in rules and "(threshold 20%)" in rules


# --- VictoriaMetrics and vmalert (backend="victoriametrics") ------------------------------------

VM = "victoriametrics"


def test_the_default_rules_are_the_prometheus_ones() -> None:
    assert alerts.render(backend="prometheus") == alerts.render() == RULES.read_text(encoding="utf-8")


def test_the_victoriametrics_rules_read_no_native_histogram() -> None:
    """The same rules, alerts and annotations; each histogram read from its _bucket (by le and
    vmrange), _sum and _count series: no native twin, no histogram_count/histogram_sum."""
    built = alerts.build(backend=VM)
    shipped = alerts.build()
    names_of = lambda f: [r.get("alert") or r["record"] for r in f["groups"][0]["rules"]]  # noqa: E731
    native = alerts.native_records()
    assert names_of(built) == [
        n for n in names_of(shipped) if n not in native or n in alerts.native_records(backend=VM)
    ]
    assert alerts.native_records(backend=VM) == {names.recorded(names.LINE_TOKENS, "_sum")}
    in_order = iter(r for r in shipped["groups"][0]["rules"] if "alert" in r)
    for rule in built["groups"][0]["rules"]:
        expr = rule["expr"]
        assert "histogram_count(" not in expr and "histogram_sum(" not in expr, rule
        assert not re.search(r"(?<![_a-z])rate\(", expr), rule
        if "_bucket" in expr:
            assert "vmrange" in expr, rule
        if "alert" in rule:
            original = next(in_order)
            assert {k: v for k, v in rule.items() if k != "expr"} == {
                k: v for k, v in original.items() if k != "expr"
            }


def test_vmalert_validates_the_victoriametrics_rules_and_refuses_the_prometheus_ones(tmp_path: Path) -> None:
    """vmalert's own check (-dryRun: MetricsQL's parser on every expression, templates too): the
    rules written for it load, the shipped Prometheus rules do not (histogram_sum is not MetricsQL)."""
    vmalert = str(support.built_servers("vmalert")["vmalert"])
    for settings in (alerts.DEFAULT_SETTINGS, alerts.AlertSettings.fast("1m")):
        written = alerts.write(tmp_path / "vm.yml", settings, backend=VM)
        checked = subprocess.run(
            [vmalert, "-dryRun", f"-rule={written}"], capture_output=True, text=True, timeout=60, check=False
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    refused = subprocess.run(
        [vmalert, "-dryRun", f"-rule={RULES}"], capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode != 0
    assert "histogram_sum" in refused.stdout + refused.stderr


def test_the_victoriametrics_rules_take_the_underscore_names_only() -> None:
    with pytest.raises(ValueError, match="underscore names only"):
        alerts.build(names_=names.NAMES_UTF8, backend=VM)
    with pytest.raises(ValueError, match="backend must be one of"):
        alerts.build(backend="mimir")


# --- the error-budget alerts' generated promtool tests -------------------------------------------


def test_committed_slo_tests_equal_the_generator_output() -> None:
    assert SLO_TESTS.read_text(encoding="utf-8") == slo_tests.render(), (
        "dashboards/slo.test.yml is stale: run `otel-ctx dashboards build` (or `make dashboards`)"
    )


def test_slo_tests_cover_every_objective_and_behaviour() -> None:
    """Per objective: a burn that pages (or, for a budget too large for any burn to page, one
    that cannot), a steady leak that opens a ticket, a burst and a quiet task type that alert
    nobody; and the arithmetic of every SLO recording."""
    spec = yaml.safe_load(SLO_TESTS.read_text(encoding="utf-8"))
    titles = [group["name"] for group in spec["tests"]]
    for objective in alerts.DEFAULT_SETTINGS.objectives:
        own = [t for t in titles if t.startswith(objective.name + ":")]
        assert any("pages within" in t or "too slow to page" in t for t in own), objective
        assert any("opens a ticket" in t and "never pages" in t for t in own), objective
        assert any("burst" in t and "alerts nobody" in t for t in own), objective
        assert any("quiet task type" in t for t in own), objective
    checked = {
        r
        for group in spec["tests"]
        for case in group.get("promql_expr_test") or ()
        for r in SLO_RECORDS
        if r in case["expr"]
    }
    assert checked == SLO_RECORDS


@pytest.mark.e2e
def test_promtool_runs_the_slo_tests() -> None:
    promtool = support.prometheus_tool("promtool")
    result = subprocess.run(
        [promtool, "test", "rules", str(SLO_TESTS)], capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    assert "SUCCESS" in result.stdout


@pytest.mark.e2e
def test_the_slo_tests_catch_a_changed_objective(tmp_path: Path) -> None:
    """Not vacuous: rules for a stricter status objective (a burn is worth more of its budget)
    page where the committed tests expect silence, and fail them."""
    (tmp_path / SLO_TESTS.name).write_text(SLO_TESTS.read_text(encoding="utf-8"), encoding="utf-8")
    stricter = alerts.AlertSettings(
        objectives=slo.merged(slo.DEFAULT_OBJECTIVES, [slo.Objective("status", 0.999)])
    )
    alerts.write(tmp_path / RULES.name, stricter)
    promtool = support.prometheus_tool("promtool")
    result = subprocess.run(
        [promtool, "test", "rules", "--run", "overflow-status", str(tmp_path / SLO_TESTS.name)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode != 0
    assert alerts.OVERFLOW_FAST_BURN in result.stdout + result.stderr
