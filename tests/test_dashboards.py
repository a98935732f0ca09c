"""The shipped Grafana dashboards: committed JSON, names, PromQL semantics, links, CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support import require_binary
from typer.testing import CliRunner

from otel_ctx import names
from otel_ctx.cli import app
from otel_ctx.grafana import (
    alerts,
    build_dashboards,
    check,
    iter_panels,
    jaeger,
    queries,
    render,
    variable_queries,
)

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "dashboards"
DASHBOARDS = build_dashboards()

#: Labels Prometheus adds itself; every other label must come from the registry.
PROMETHEUS_LABELS = {"job", "le"}
VARIABLES = {"datasource", "service", "task_type", "model", "jaeger_url"}

SERIES: dict[str, names.Metric] = {}
for _metric in names.METRICS:
    # Each series, and the recording rule that holds its rate summed to the service.
    for _suffix in ("_bucket", "_sum", "_count") if _metric.kind == "histogram" else ("",):
        SERIES[_metric.series(_suffix)] = _metric
        SERIES[names.recorded(_metric, _suffix)] = _metric
RECORDED = {s for s in SERIES if s.startswith("job:")}

SELECTOR = re.compile(r"((?:job:)?context_budget_\w+(?::rate)?)\s*\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


def all_queries() -> Iterator[tuple[str, str, str]]:
    for filename, model in DASHBOARDS.items():
        for title, expr in queries(model):
            yield filename, title, expr


def metric_labels(metric: names.Metric) -> set[str]:
    return {names.prometheus_label(a) for a in metric.attributes} | PROMETHEUS_LABELS


def substitute(expr: str, window: str = "5m") -> str:
    """What the end-to-end test does: every variable matches all, every window is fixed."""
    for var in ("$__rate_interval", "$__range", "$__interval"):
        expr = expr.replace(var, window)
    return re.sub(r"\$(service|task_type|model)\b", ".*", expr)


# --- the committed files ---------------------------------------------------------------


def test_committed_dashboards_are_what_the_generator_makes() -> None:
    drift = check(COMMITTED)
    assert not drift, "run `otel-ctx dashboards build`: " + "; ".join(
        f"{d.path.name} {d.problem}" for d in drift
    )


def test_generation_is_deterministic_across_processes() -> None:
    code = "import otel_ctx.grafana as g; print(''.join(g.render(m) for m in g.build_dashboards().values()))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            timeout=60,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert outputs.pop() == "".join(render(m) for m in DASHBOARDS.values()) + "\n"


def test_dashboards_are_provisioning_ready() -> None:
    uids = [m["uid"] for m in DASHBOARDS.values()]
    assert len(set(uids)) == len(uids)
    for filename, model in DASHBOARDS.items():
        assert filename == f"{model['uid']}.json"
        assert len(model["uid"]) <= 40, "Grafana rejects longer uids"
        assert "id" not in model, "a numeric id would clash with the target Grafana's own"
        assert render(model).endswith("}\n")
        ids = [p["id"] for p in iter_panels(model)]
        assert len(ids) == len(set(ids))


def test_no_data_source_uid_is_hard_coded() -> None:
    def refs(node: Any) -> Iterator[Any]:
        if isinstance(node, dict):
            if "datasource" in node:
                yield node["datasource"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for model in DASHBOARDS.values():
        found = list(refs(model))
        assert found
        for ref in found:
            assert ref == {"type": "prometheus", "uid": "${datasource}"}


def test_every_data_panel_has_a_description_and_queries() -> None:
    for model in DASHBOARDS.values():
        for panel in iter_panels(model):
            if panel["type"] == "row":
                continue
            assert panel.get("title"), panel
            assert len(panel.get("description", "")) > 40, f"{panel['title']}: describe it for an SRE"
            if panel["type"] != "text":
                assert panel.get("targets"), panel["title"]


# --- names: every metric and label from the registry -------------------------------------


def test_every_metric_in_every_query_is_a_registry_series() -> None:
    used = set()
    for filename, title, expr in all_queries():
        found = re.findall(r"\bcontext_budget_\w+", expr)
        for name in found:
            if name in {names.prometheus_label(a) for m in names.METRICS for a in m.attributes}:
                continue  # a label, checked below
            assert name in SERIES, f"{filename} / {title}: {name} is not a series of names.METRICS"
            used.add(SERIES[name].name)
    assert used == {m.name for m in names.METRICS}, "every registry metric appears on some panel"


def test_every_label_is_a_label_of_the_metric_it_filters() -> None:
    for filename, title, expr in all_queries():
        selectors = SELECTOR.findall(expr)
        assert selectors, f"{filename} / {title}: no metric selector"
        in_expr: set[str] = set()
        for series, body in selectors:
            allowed = metric_labels(SERIES[series])
            in_expr |= allowed
            for label, _op, _value in MATCHER.findall(body):
                assert label in allowed, f"{filename} / {title}: {series} has no label {label}"
        for group in GROUPING.findall(expr):
            for label in filter(None, (g.strip() for g in group.split(","))):
                assert label in in_expr, f"{filename} / {title}: grouping by {label}, no metric has it"


def test_legends_use_labels_the_query_keeps() -> None:
    for model in DASHBOARDS.values():
        for panel in iter_panels(model):
            for target in panel.get("targets") or ():
                for label in re.findall(r"\{\{(\w+)\}\}", target.get("legendFormat", "")):
                    kept = {g.strip() for grp in GROUPING.findall(target["expr"]) for g in grp.split(",")}
                    assert label in kept, f"{panel['title']}: legend {{{{{label}}}}} not in the result"


def test_every_selector_carries_the_dashboard_filters_and_windows() -> None:
    for filename, title, expr in all_queries():
        for series, body in SELECTOR.findall(expr):
            matchers = {(label, op, value) for label, op, value in MATCHER.findall(body)}
            model = names.prometheus_label(names.GEN_AI_REQUEST_MODEL)
            # A metric kept without the model (the series budget) must not be filtered by it:
            # picking a model would blank the panel instead of leaving it per task type.
            carries_model = model in metric_labels(SERIES[series])
            for label, var in (
                ("job", "$service"),
                (names.prometheus_label(names.TASK_TYPE), "$task_type"),
                (model, "$model"),
            ):
                if label == model and not carries_model:
                    assert (label, "=~", var) not in matchers, (
                        f"{filename} / {title}: {series} has no {label}"
                    )
                    continue
                assert (label, "=~", var) in matchers, f"{filename} / {title}: {series} lacks {label}=~{var}"
        for window in re.findall(r"\[([^\]]+)\]", expr):
            assert window in ("$__rate_interval", "$__range"), (
                f"{filename} / {title}: fixed window [{window}]"
            )


def test_template_variables_are_defined_and_come_from_registry_metrics() -> None:
    for filename, model in DASHBOARDS.items():
        defined = {v["name"] for v in model["templating"]["list"]}
        assert defined == VARIABLES, filename
        text = json.dumps(model)
        used = set(re.findall(r"\$\{?(\w+)", text)) - {
            "__rate_interval",
            "__range",
            "__from",
            "__to",
            "__data",
            "__all",
        }
        assert used <= defined, f"{filename}: undefined variables {used - defined}"
        for name, query in variable_queries(model):
            found = re.fullmatch(r"label_values\((\w+)(?:\{(.*)\})?, (\w+)\)", query)
            assert found, f"{filename}: ${name} query {query!r}"
            metric = SERIES[found.group(1)]
            assert found.group(3) in metric_labels(metric)
        types = {v["name"]: v["type"] for v in model["templating"]["list"]}
        assert types["datasource"] == "datasource"


# --- PromQL: it parses, and it computes what the panel says ------------------------------


def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    promtool = require_binary("promtool", "apt-get install prometheus")
    rules = [
        {"record": f"otel_ctx:panel_{i}", "expr": substitute(expr)}
        for i, (_, _, expr) in enumerate(all_queries())
    ]
    path = tmp_path / "panels.rules.json"  # promtool reads YAML, and JSON is YAML
    path.write_text(json.dumps({"groups": [{"name": "panels", "rules": rules}]}))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def panel_query(title_start: str, ref: str = "A", dashboard: str = "otel-ctx-overview.json") -> str:
    for panel in iter_panels(DASHBOARDS[dashboard]):
        if panel["title"].startswith(title_start):
            for target in panel.get("targets") or ():
                if target["refId"] == ref:
                    return str(target["expr"])
    raise AssertionError(f"no panel {title_start!r}")


def series(metric: str, values: str, **labels: str) -> dict[str, str]:
    base = {"job": "agent", names.prometheus_label(names.GEN_AI_REQUEST_MODEL): "gpt-4o"}
    body = ", ".join(f'{k}="{v}"' for k, v in {**base, **labels}.items())
    return {"series": f"{metric}{{{body}}}", "values": values}


def test_panel_queries_compute_the_right_numbers(tmp_path: Path) -> None:
    """Synthetic series through Prometheus's own engine (promtool test rules), recording rules loaded."""
    promtool = require_binary("promtool", "apt-get install prometheus")
    task = names.prometheus_label(names.TASK_TYPE)
    outcome = names.prometheus_label(names.OUTCOME)
    component = names.prometheus_label(names.COMPONENT)
    round_label = names.prometheus_label(names.ROUND)
    fits = names.FITS.prometheus
    tokens = names.TOKENS.prometheus
    # returns: 3 fits and 1 overflow a minute; status: 2 fits a minute and never overflowed.
    per_minute = {("returns", "fit"): 3, ("returns", "overflow"): 1, ("status", "fit"): 2}
    inputs = [series(fits, f"0+{n}x10", **{task: t, outcome: o}) for (t, o), n in per_minute.items()]
    # Every request: transcript 400 (user 100, tool 300), tool schema 200, budget 1000.
    per_request = {
        "transcript": 400,
        names.transcript_role_component("user"): 100,
        names.transcript_role_component("tool"): 300,
        names.COMPONENT_TOOL_SCHEMA: 200,
        names.COMPONENT_ESTIMATED: 600,
        names.COMPONENT_BUDGET: 1000,
        names.COMPONENT_HEADROOM: 400,
    }
    for (t, o), n in per_minute.items():
        for line, value in per_request.items():
            inputs.append(series(tokens, f"0+{value * n}x10", **{task: t, outcome: o, component: line}))
    # Round 1 (4 requests a minute) uses 30% of the budget in tool results; round 2 (2 a minute) 60%.
    for rnd, n, tool in (("1", 4, 300), ("2", 2, 600)):
        for line, value in ((names.transcript_role_component("tool"), tool), (names.COMPONENT_BUDGET, 1000)):
            inputs.append(
                series(
                    names.ROUND_TOKENS.prometheus,
                    f"0+{value * n}x10",
                    **{task: "returns", round_label: rnd, component: line},
                )
            )
    # Utilization: per minute, 10 requests at or under 0.5, 10 more at or under 0.8, none above.
    for le, n in (("0.5", 10), ("0.8", 20), ("+Inf", 20)):
        inputs.append(series(names.UTILIZATION.series("_bucket"), f"0+{n}x10", **{task: "returns", "le": le}))

    def sample(value: float, **labels: str) -> dict[str, Any]:
        return {"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "value": value}

    stacked = [
        sample(100, **{component: names.transcript_role_component("user")}),
        sample(300, **{component: names.transcript_role_component("tool")}),
        sample(200, **{component: names.COMPONENT_TOOL_SCHEMA}),
    ]
    shares = [
        sample(0.1, **{component: names.transcript_role_component("user")}),
        sample(0.3, **{component: names.transcript_role_component("tool")}),
        sample(0.2, **{component: names.COMPONENT_TOOL_SCHEMA}),
        sample(0.4, **{component: names.COMPONENT_HEADROOM}),
    ]
    overflow_rate = [sample(0.25, **{task: "returns"}), sample(0, **{task: "status"})]
    tool = names.transcript_role_component("tool")
    cases = [
        (panel_query("Overflow rate (time range)"), overflow_rate),
        (panel_query("Overflow rate by task type"), overflow_rate),
        # The transcript line must not be stacked on top of its own split by role.
        (panel_query("Which component fills the window"), stacked),
        (panel_query("Which component fills the window", "B"), [sample(1000)]),
        (panel_query("Share of the budget by component"), shares),
        (
            f"sum(({panel_query('Mean breakdown by task type')}) == 600)",
            [sample(600 * 2)],  # `estimated` is 600 per request for both task types
        ),
        (
            panel_query("Share of the budget used, by round"),
            [sample(0.3, **{round_label: "1"}), sample(0.6, **{round_label: "2"})],
        ),
        (
            panel_query("What grows round by round", dashboard="otel-ctx-task-type.json"),
            [
                sample(0.3, **{round_label: "1", component: tool}),
                sample(0.6, **{round_label: "2", component: tool}),
            ],
        ),
        (
            panel_query("The heavy requests", dashboard="otel-ctx-task-type.json"),
            [
                sample(v, **{outcome: o, component: c})
                for o in ("fit", "overflow")
                for c, v in (
                    (names.transcript_role_component("user"), 100),
                    (tool, 300),
                    (names.COMPONENT_TOOL_SCHEMA, 200),
                )
            ],
        ),
        # p95 utilization 0.77 (interpolated in the 0.5-0.8 bucket): 23% of the budget left.
        (panel_query("Headroom left", dashboard="otel-ctx-task-type.json"), [sample(0.23)]),
        (panel_query("Headroom left", "B", dashboard="otel-ctx-task-type.json"), [sample(0.5)]),
    ]
    rules = alerts.write(tmp_path / "rules.yml", alerts.AlertSettings.fast("5m"))
    spec = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {"expr": f"round({substitute(expr)}, 0.001)", "eval_time": "10m", "exp_samples": expected}
                    for expr, expected in cases
                ],
            }
        ],
    }
    path = tmp_path / "panels.test.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- the way to the traces ---------------------------------------------------------------


def test_overflow_count_panel_requests_exemplars() -> None:
    overflow = f'{names.prometheus_label(names.OUTCOME)}="overflow"'
    with_exemplars = [
        panel["title"]
        for model in DASHBOARDS.values()
        for panel in iter_panels(model)
        for target in panel.get("targets") or ()
        if target.get("exemplar") and overflow in target["expr"] and "increase(" in target["expr"]
    ]
    assert with_exemplars, "the overflow count over time must ask Grafana for exemplars"


def jaeger_links() -> list[str]:
    found = []
    for panel in iter_panels(DASHBOARDS["otel-ctx-overview.json"]):
        for link in (panel.get("fieldConfig") or {}).get("defaults", {}).get("links", ()):
            found.append(link["url"])
        found += re.findall(
            r"\]\((\$\{jaeger_url\}/search\?[^)]+)\)", panel.get("options", {}).get("content", "")
        )
    return found


def test_jaeger_links_search_overflowed_fit_spans() -> None:
    links = jaeger_links()
    assert len(links) == 2  # the table's row link and the text panel
    for url in links:
        parts = urlsplit(url)
        assert url.startswith("${jaeger_url}/search?")
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        assert params["operation"] == names.SPAN_FIT
        tags = json.loads(params["tags"])
        assert tags[names.OUTCOME] == "overflow"
        # Grafana's time range is in ms, Jaeger's in µs.
        assert params["start"] == "${__from}000" and params["end"] == "${__to}000"
        assert params["service"].startswith("${")


def test_jaeger_url_encodes_values_but_keeps_grafana_placeholders() -> None:
    url = jaeger.overflow_search_url("http://j:16686", "svc a&b", {names.TASK_TYPE: "${__data.fields.x}"})
    query = urlsplit(url).query
    assert "svc%20a%26b" in query
    params = parse_qs(query)
    assert params["service"] == ["svc a&b"]
    assert json.loads(params["tags"][0]) == {names.OUTCOME: "overflow", names.TASK_TYPE: "${__data.fields.x}"}
    assert "${__data.fields.x}" in url


def test_queries_walks_collapsed_rows_and_skips_panels_without_queries() -> None:
    model = {
        "panels": [
            {"type": "text", "title": "notes"},
            {
                "type": "row",
                "title": "collapsed",
                "panels": [
                    {"type": "timeseries", "title": "inner", "targets": [{"expr": "up"}, {"expr": " "}]}
                ],
            },
            {"type": "stat", "title": "outer", "targets": [{"refId": "A", "expr": "sum(up)"}]},
        ]
    }
    assert queries(model) == [("inner", "up"), ("outer", "sum(up)")]


# --- the command line --------------------------------------------------------------------

runner = CliRunner()


def test_build_writes_files_that_check_then_accepts(tmp_path: Path) -> None:
    out = tmp_path / "dash"
    result = runner.invoke(app, ["dashboards", "build", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted([*DASHBOARDS, "alerts.yml"])
    assert json.loads((out / "otel-ctx-overview.json").read_text())["uid"] == "otel-ctx-overview"
    result = runner.invoke(app, ["dashboards", "build", "--out", str(out), "--check"])
    assert result.exit_code == 0, result.output
    (out / "alerts.yml").write_text("groups: []\n")  # a hand-edited rule file is stale too
    result = runner.invoke(app, ["dashboards", "build", "--out", str(out), "--check"])
    assert result.exit_code == 1
    assert "alerts.yml differs" in result.stderr


def test_build_check_names_the_stale_files(tmp_path: Path) -> None:
    runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path)])
    edited = tmp_path / "otel-ctx-task-type.json"
    edited.write_text(edited.read_text().replace("Task type", "Tusk type"))
    (tmp_path / "otel-ctx-old.json").write_text("{}\n")
    result = runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path), "--check"])
    assert result.exit_code == 1
    assert "otel-ctx-task-type.json differs" in result.stderr
    assert "otel-ctx-old.json" in result.stderr
    assert "otel-ctx-overview.json" not in result.stderr


def test_build_into_a_file_is_a_usage_error(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    target.write_text("{}")
    result = runner.invoke(app, ["dashboards", "build", "--out", str(target)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "not a directory" in result.stderr


@pytest.mark.parametrize("command", ["build", "push"])
def test_help_has_examples(command: str) -> None:
    result = runner.invoke(app, ["dashboards", command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Examples" in result.output and f"otel-ctx dashboards {command}" in result.output
