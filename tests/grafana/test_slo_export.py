"""The SLOs exported for Sloth and OpenSLO (``dashboards export --format``): their structure,
their objectives and queries, and the command's options. Sloth itself reads them in
tests/grafana/test_slo_sloth.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from otel_ctx.cli import app
from otel_ctx.grafana import _naming as naming
from otel_ctx.grafana import _promql as q
from otel_ctx.grafana import _slo as slo
from otel_ctx.grafana import _slo_export as slo_export

runner = CliRunner()
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: A selector of a registry series with its matchers: ``name{...}`` (underscore names).
SELECTOR = re.compile(r"\b(context_budget_[a-z_]+)\{([^{}]*)\}")


def _export(*args: str) -> Any:
    return runner.invoke(app, ["dashboards", "export", *args])


def _task_matcher(objective: slo.Objective, table: tuple[slo.Objective, ...]) -> str:
    return "".join(f"{label}{body}" for label, body in slo.task_matcher(objective, table).items())


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


task_types = st.text(alphabet="abcdefghij_", min_size=1, max_size=8).filter(lambda t: t.strip("_"))
tables = st.lists(
    st.builds(
        slo.Objective,
        task_type=task_types,
        objective=st.floats(min_value=0.5, max_value=0.9999),
        window=st.sampled_from(["28d", "7d", "30d"]),
        kind=st.sampled_from(slo.KINDS),
    ),
    max_size=5,
).map(lambda extra: slo.merged(slo.DEFAULT_OBJECTIVES, extra))


@given(tables)
def test_openslo_documents_hold_every_objective(table: tuple[slo.Objective, ...]) -> None:
    """One Service, and per objective an SLI and an SLO with the fields OpenSLO v1 requires: the
    objective as the target, its window rolling, occurrences, an SLI of bad and total counters
    narrowed to the objective's task types. Names that would collide are refused by name."""
    names = [slo_export.slo_name(o) for o in table]
    if len(set(names)) < len(names):
        with pytest.raises(slo_export.ExportError, match="same SLO name"):
            slo_export.openslo(table)
        return
    docs = [doc for doc in yaml.safe_load_all(slo_export.dump_all(slo_export.openslo(table))) if doc]
    assert all(doc["apiVersion"] == "openslo/v1" for doc in docs)
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == [slo_export.SERVICE]
    slos, slis = _by_kind(docs, "SLO"), _by_kind(docs, "SLI")
    assert len(slos) == len(slis) == len(table)
    for objective in table:
        name = slo_export.slo_name(objective)
        assert DNS_LABEL.fullmatch(name)
        spec = slos[name]["spec"]
        assert spec["service"] == slo_export.SERVICE
        assert spec["budgetingMethod"] == "Occurrences"
        assert spec["timeWindow"] == [{"duration": objective.window, "isRolling": True}]
        assert [o["target"] for o in spec["objectives"]] == [objective.objective]
        ratio = slis[spec["indicatorRef"]]["spec"]["ratioMetric"]
        assert ratio["counter"] is True
        assert set(ratio) == {"counter", "bad", "total"}
        matcher = _task_matcher(objective, table)
        for part in ("bad", "total"):
            source = ratio[part]["metricSource"]
            assert source["type"] == "Prometheus"
            query = source["spec"]["query"]
            # Counters, not rates: the tool takes the increase over its own windows.
            assert "[" not in query and "rate(" not in query, query
            assert all(matcher in inner for _, inner in SELECTOR.findall(query)), query


@given(tables)
def test_sloth_specs_hold_every_objective_once(table: tuple[slo.Objective, ...]) -> None:
    """A spec per window, each objective in its window's spec as a percentage, each query over
    Sloth's window variable and narrowed to the objective's task types, a page and a ticket."""
    try:
        files = slo_export.sloth_files(table)
    except slo_export.ExportError:
        return
    seen = {}
    for window in slo_export.windows_of(table):
        spec = yaml.safe_load(files[slo_export.sloth_filename(window)])
        assert spec["version"] == "prometheus/v1"
        assert spec["service"] == slo_export.SERVICE
        for item in spec["slos"]:
            seen[item["name"]] = (window, item)
        windows = yaml.safe_load(files[f"{slo_export.WINDOWS_DIR}/{window}.yml"])
        assert windows["kind"] == "AlertWindows"
        assert windows["spec"]["sloPeriod"] == window
    assert len(seen) == len(table)
    for objective in table:
        window, item = seen[slo_export.slo_name(objective)]
        assert window == objective.window
        assert item["objective"] == pytest.approx(objective.objective * 100, abs=1e-9)
        matcher = _task_matcher(objective, table)
        for query in item["sli"]["events"].values():
            assert "{{.window}}" in query
            selectors = SELECTOR.findall(query)
            assert selectors and all(matcher in inner for _, inner in selectors), query
        alerting = item["alerting"]
        assert alerting["page_alert"]["labels"]["severity"] == slo.PAGE
        assert alerting["ticket_alert"]["labels"]["severity"] == slo.TICKET


@pytest.mark.parametrize("window", ["28d", "30d", "7d", "90d"])
def test_alert_windows_give_otel_ctx_factors(window: str) -> None:
    """Sloth's factor is the budget share times the period over the long window: the shares
    written give back otel-ctx's factors, with its windows."""
    spec = slo_export.alert_windows(window)["spec"]
    got = []
    for severity in slo.SEVERITIES:
        for speed in ("quick", "slow"):
            entry = spec[severity][speed]
            factor = entry["errorBudgetPercent"] / 100 * q.seconds(window) / q.seconds(entry["longWindow"])
            got.append((severity, round(factor, 6), entry["longWindow"], entry["shortWindow"]))
    wanted = [(b.severity, b.factor, b.long, b.short) for b in slo.BURN_WINDOWS]
    assert sorted(got) == sorted(wanted)


def test_utf8_and_victoriametrics_queries() -> None:
    """UTF-8 names are quoted inside the selectors; VictoriaMetrics reads rates as increase_pure
    over Sloth's window, and its spec asks Sloth to check MetricsQL; OpenSLO keeps counters."""
    objective = slo.DEFAULT_OBJECTIVES[0]
    table = slo.DEFAULT_OBJECTIVES
    _, total = slo_export.sli_queries(objective, table, naming.UTF8, q.PROMETHEUS)
    assert '{"context_budget.fits_total", ' in total and "context_budget_fits_total" not in total
    summary = slo_export.sloth_slos(table, naming.UTF8)[0]["alerting"]["annotations"]["summary"]
    assert 'index $labels "context_budget.task_type"' in summary
    _, total = slo_export.sli_queries(objective, table, naming.UNDERSCORE, q.VICTORIAMETRICS)
    assert "increase_pure(" in total and "/ {{.window}}" in total and "rate(" not in total
    spec = slo_export.sloth_spec(table, "28d", backend=q.VICTORIAMETRICS)
    chain = [p["id"] for p in spec["slo_plugins"]["chain"]]
    assert chain[0] == "sloth.dev/contrib/validate_victoria_metrics/v1"
    bad, _ = slo_export.counter_queries(objective, table, naming.UNDERSCORE, q.VICTORIAMETRICS)
    assert "increase_pure" not in bad and "[" not in bad


def test_names_that_collide_are_refused() -> None:
    table = slo.merged(slo.DEFAULT_OBJECTIVES, [slo.Objective("a_b", 0.9), slo.Objective("a-b", 0.9)])
    with pytest.raises(slo_export.ExportError, match="same SLO name"):
        slo_export.openslo(table)


# --- the command --------------------------------------------------------------------------


def test_export_sloth_writes_specs_and_windows(tmp_path: Path) -> None:
    result = _export(str(tmp_path), "--format", "sloth", "--objective", "dispute=0.95")
    assert result.exit_code == 0, result.output
    assert "sloth generate -i" in result.output
    spec = yaml.safe_load((tmp_path / "otel-ctx-slos-28d.yml").read_text())
    objectives = {item["name"]: item["objective"] for item in spec["slos"]}
    assert objectives["overflow-dispute"] == 95
    assert (tmp_path / slo_export.WINDOWS_DIR / "28d.yml").is_file()
    again = _export(str(tmp_path), "--format", "sloth")
    assert again.exit_code == 2 and "--force" in again.output
    assert _export(str(tmp_path), "--format", "sloth", "--force").exit_code == 0


def test_export_slo_config_and_stdout(tmp_path: Path) -> None:
    config = tmp_path / "slos.yml"
    config.write_text("objectives:\n  - {task_type: status, objective: 99.9%, window: 7d}\n")
    result = _export("-", "--format", "openslo", "--slo-config", str(config))
    assert result.exit_code == 0, result.output
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(result.output) if d and d["kind"] == "SLO"}
    spec = docs["overflow-status"]["spec"]
    assert spec["objectives"][0]["target"] == pytest.approx(0.999)
    assert spec["timeWindow"][0]["duration"] == "7d"
    k8s = _export("-", "--format", "sloth-k8s", "--slo-config", str(config), "-n", "slo", "--label", "a=b")
    assert k8s.exit_code == 0, k8s.output
    objects = [d for d in yaml.safe_load_all(k8s.output) if d]
    # One PrometheusServiceLevel per window (Sloth takes one SLO period per object's run).
    assert sorted(o["metadata"]["name"] for o in objects) == ["otel-ctx-28d", "otel-ctx-7d"]
    assert all(o["metadata"]["namespace"] == "slo" and o["metadata"]["labels"]["a"] == "b" for o in objects)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-", "--format", "sloth"], "give a directory"),
        (["out", "--format", "openslo", "--kubernetes", "prometheusrule"], "pass one"),
        (["out", "--format", "openslo", "--namespace", "x"], "sloth-k8s"),
        (["-", "--format", "openslo", "--objective", "dispute=2"], "must be a share"),
        (["-", "--format", "sloth-k8s", "--label", "bad label=x"], "label"),
    ],
)
def test_bad_slo_options_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    args = [str(tmp_path / a) if a == "out" else a for a in args]
    result = _export(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
