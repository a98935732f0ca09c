"""The dashboards and rules for UTF-8 names (Prometheus 3's OTLP receiver keeping OpenTelemetry's
names): the rewrite of the generated PromQL is exact, complete and idempotent, the rules it writes
pass the promtool tests rewritten the same way, and the CLI writes them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import support
import yaml
from typer.testing import CliRunner

from otel_ctx import grafana, names
from otel_ctx.cli import app
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _naming as naming
from otel_ctx.grafana import _slo_tests as slo_tests

ROOT = support.ROOT
UTF8 = names.NAMES_UTF8


def _exprs(rule_file: dict[str, Any]) -> list[str]:
    return [rule["expr"] for group in rule_file["groups"] for rule in group["rules"]]


def _generated() -> list[str]:
    """Every PromQL expression the generators write: panel targets and rules, default and fast."""
    found = [expr for _, _, expr in support.panel_queries(grafana.build_dashboards())]
    for settings in (alerts.DEFAULT_SETTINGS, alerts.AlertSettings.fast("1m")):
        found += _exprs(alerts.build(settings))
    return found


_UTF8_SERIES = {v: k for k, v in naming.SERIES.items()}
_UTF8_LABELS = {v: k for k, v in naming.LABELS.items()}


def _back(expr: str) -> str:
    """The UTF-8 expression with its quoted registry names turned back into underscore names."""

    def selector(m: re.Match[str]) -> str:
        name = _UTF8_SERIES[m.group(1)]
        return name if m.group(2) == "}" else name + "{"

    expr = re.sub(
        r'\{"([^"]+)"(\}|, )', lambda m: selector(m) if m.group(1) in _UTF8_SERIES else m.group(), expr
    )
    return re.sub(
        r'"([^"]+)"(?=\s*(?:=~|!~|!=|=|,|\)))', lambda m: _UTF8_LABELS.get(m.group(1), m.group()), expr
    )


def test_the_registry_has_one_utf8_name_per_series_and_label() -> None:
    assert naming.SERIES[names.FITS.prometheus] == "context_budget.fits_total"
    assert naming.SERIES[names.UTILIZATION.series("_bucket")] == "context_budget.utilization_bucket"
    assert naming.SERIES[names.RUN_COST.series("_sum")] == "context_budget.run.cost_usd_sum"
    assert naming.LABELS[names.prometheus_label(names.GEN_AI_REQUEST_MODEL)] == "gen_ai.request.model"
    assert len(set(naming.SERIES.values())) == len(naming.SERIES)
    assert len(set(naming.LABELS.values())) == len(naming.LABELS)


def test_the_rewrite_quotes_series_and_labels_where_promql_reads_them() -> None:
    fits, model, task = names.FITS.prometheus, "gen_ai_request_model", "context_budget_task_type"
    expr = (
        f'sum by (job, {task}) (rate({fits}{{job=~"$service", {model}=~"$model"}}[5m]))\n'
        f"/ on({task}) group_left() (sum without ({model}) ({fits}) > 0)"
    )
    assert naming.promql(expr) == (
        'sum by (job, "context_budget.task_type") (rate({"context_budget.fits_total", job=~"$service", '
        '"gen_ai.request.model"=~"$model"}[5m]))\n'
        '/ on("context_budget.task_type") group_left() '
        '(sum without ("gen_ai.request.model") ({"context_budget.fits_total"}) > 0)'
    )
    # Strings, recording rules and other names are left alone.
    kept = 'job:context_budget_fits_total:rate2m{job="context_budget_fits_total"} offset 5m'
    assert naming.promql(kept) == kept.replace("job=", "job=")


@pytest.mark.parametrize(
    "bad", ["context_budget_task_type", 'label_replace(x, "a", "$1", "b", "(.*)") + gen_ai_request_model']
)
def test_a_label_where_the_rewrite_cannot_tell_its_place_raises(bad: str) -> None:
    with pytest.raises(naming.NamingError):
        naming.promql(bad)


def test_a_rule_matching_on_a_utf8_label_is_refused() -> None:
    """Prometheus 3.5 evaluates a rule from its printed form, which drops an ``on`` list's quotes."""
    expr = "a > 1 and on (job, context_budget_task_type) b"
    assert naming.promql(expr) == 'a > 1 and on (job, "context_budget.task_type") b'
    with pytest.raises(naming.NamingError, match=r"3\.5"):
        naming.promql(expr, rule=True)


def test_every_generated_expression_round_trips_exactly_and_idempotently() -> None:
    exprs = _generated()
    assert len(exprs) > 80
    for expr in exprs:
        rewritten = naming.promql(expr)
        assert not naming.leftovers(rewritten), expr
        assert _back(rewritten) == expr
        assert naming.promql(rewritten) == rewritten


def test_the_utf8_dashboards_keep_everything_but_the_names() -> None:
    plain = grafana.build_dashboards()
    utf8 = grafana.build_dashboards(names=UTF8)
    assert plain == grafana.build_dashboards(names=names.NAMES_UNDERSCORE)
    for filename, model in utf8.items():
        assert not naming.leftovers(model), filename
        text = json.dumps(model)
        assert "{{context_budget.task_type}}" in text or filename != "otel-ctx-overview.json"
        # The same targets in the same panels, each the plain one rewritten.
        assert [(t, naming.promql(e)) for _, t, e in support.panel_queries({filename: plain[filename]})] == [
            (t, e) for _, t, e in support.panel_queries({filename: model})
        ]
    variables = dict(grafana.variable_queries(utf8["otel-ctx-overview.json"]))
    assert variables["model"] == (
        'label_values({"context_budget.fits_total", job=~"$service", '
        '"context_budget.task_type"=~"$task_type"}, gen_ai.request.model)'
    )
    link = json.dumps(utf8["otel-ctx-overview.json"])
    assert '${__data.fields[\\"context_budget.task_type\\"]}' in link


def test_the_utf8_alerts_template_their_labels_with_index() -> None:
    rules = {r.get("alert", r.get("record")): r for r in alerts.build(names_=UTF8)["groups"][0]["rules"]}
    overflow = rules[alerts.OVERFLOW_RATE]["annotations"]
    assert '{{ index $labels "context_budget.task_type" }}' in overflow["summary"]
    assert "$labels.context_budget" not in json.dumps(rules)
    # The recording rules keep their names: valid under both settings.
    assert {r["record"] for r in alerts.recording_rules()} <= set(rules)


def test_the_utf8_rules_pass_the_promtool_tests_rewritten_the_same_way(tmp_path: Path) -> None:
    promtool = support.prometheus_tool("promtool")
    alerts.write(tmp_path / "alerts.yml", names_=UTF8)
    tests = alerts.rule_tests((ROOT / "dashboards" / "alerts.test.yml").read_text(encoding="utf-8"), UTF8)
    (tmp_path / "alerts.test.yml").write_text(tests, encoding="utf-8")
    assert "context_budget_fits_total{" not in tests
    result = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    checked = subprocess.run(
        [promtool, "check", "rules", "alerts.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_export_names_utf8_writes_the_generated_utf8_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["dashboards", "export", str(tmp_path), "--names", "utf8"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "dashboards"
    assert (out / alerts.RULES_FILENAME).read_text(encoding="utf-8") == alerts.render(names_=UTF8)
    for filename, model in grafana.build_dashboards(names=UTF8).items():
        assert (out / filename).read_text(encoding="utf-8") == grafana.render(model)
    tests = yaml.safe_load((out / "alerts.test.yml").read_text(encoding="utf-8"))
    assert tests["rule_files"] == [alerts.RULES_FILENAME]


def test_build_names_utf8_writes_and_checks(tmp_path: Path) -> None:
    runner = CliRunner()
    built = runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path), "--names", "utf8"])
    assert built.exit_code == 0, built.output
    assert (
        runner.invoke(
            app, ["dashboards", "build", "--out", str(tmp_path), "--names", "utf8", "--check"]
        ).exit_code
        == 0
    )
    stale = runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path), "--check"])
    assert stale.exit_code == 1


def test_kubernetes_export_names_utf8_holds_the_utf8_rules_and_dashboards() -> None:
    result = CliRunner().invoke(
        app, ["dashboards", "export", "-", "-k", "prometheusrule", "-k", "configmap", "--names", "utf8"]
    )
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.output))
    rule = next(d for d in documents if d["kind"] == "PrometheusRule")
    assert rule["spec"]["groups"] == alerts.build(names_=UTF8)["groups"]
    boards = [json.loads(next(iter(d["data"].values()))) for d in documents if d["kind"] == "ConfigMap"]
    assert sorted(b["uid"] for b in boards) == sorted(m["uid"] for m in grafana.build_dashboards().values())
    assert all(not naming.leftovers(b) for b in boards)


def test_the_utf8_rules_pass_the_error_budget_tests_rewritten_the_same_way(tmp_path: Path) -> None:
    """The generated error-budget tests, rewritten for UTF-8 names, pass on the UTF-8 rules (the
    arithmetic and one objective's behaviours: the rest differ only in their numbers)."""
    promtool = support.prometheus_tool("promtool")
    alerts.write(tmp_path / "alerts.yml", names_=UTF8)
    tests = slo_tests.render(names_=UTF8)
    (tmp_path / slo_tests.TESTS_FILENAME).write_text(tests, encoding="utf-8")
    assert "context_budget_fits_total{" not in tests
    result = subprocess.run(
        [promtool, "test", "rules", "--run", "every task type|overflow-status", slo_tests.TESTS_FILENAME],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
