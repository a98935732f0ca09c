"""The shipped Grafana dashboards: committed JSON, names, PromQL semantics, links, CLI."""

from __future__ import annotations

import dataclasses
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
from support import prometheus_tool
from typer.testing import CliRunner

from otel_ctx import names
from otel_ctx.cli import app
from otel_ctx.grafana import (
    _alerts as alerts,
)
from otel_ctx.grafana import (
    _jaeger as jaeger,
)
from otel_ctx.grafana import (
    build_dashboards,
    check,
    iter_panels,
    queries,
    render,
    variable_queries,
)
from otel_ctx.telemetry._exporters import DEFAULT_EXPORT_INTERVAL_MS

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "dashboards"
DASHBOARDS = build_dashboards()

#: Labels Prometheus adds itself; every other label must come from the registry.
PROMETHEUS_LABELS = {"job", "le"}
VARIABLES = {"datasource", "service", "task_type", "model", "jaeger_url"}
#: The drill-down's own: the cap its tool-results distribution panel compares with.
OWN_VARIABLES = {"otel-ctx-task-type.json": {"tool_result_cap"}}
#: The per-round distributions (and their recorded rates) carry no model label.
MODELLESS = {
    s for m in names.DISTRIBUTIONS for s in (m.prometheus, names.recorded(m), names.recorded(m, "_sum"))
}

SERIES: dict[str, names.Metric] = {}
for _metric in names.ALL_METRICS:
    # Each series, and the recording rule that holds its rate summed to the service; a
    # histogram is its classic series or, pushed with exponential buckets, one native series.
    for _suffix in ("", "_bucket", "_sum", "_count") if _metric.kind == "histogram" else ("",):
        SERIES[_metric.series(_suffix)] = _metric
        SERIES[names.recorded(_metric, _suffix)] = _metric
# The SLO recordings: per service and task type, of the events they divide (fits or tickets).
for _record in alerts.slo_records():
    _events = names.FITS if ":overflow_" in _record else names.RUN_TOKENS
    SERIES[_record] = dataclasses.replace(_events, attributes=(names.TASK_TYPE,))
RECORDED = {s for s in SERIES if s.startswith("job:")}

SELECTOR = re.compile(r"((?:job:)?context_budget_\w+(?::rate\d+[smh]|:\w+)?)\s*\{([^}]*)\}")
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
    expr = expr.replace("$tool_result_cap", "1200")
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
            if name in {names.prometheus_label(a) for m in names.ALL_METRICS for a in m.attributes}:
                continue  # a label, checked below
            assert name in SERIES, f"{filename} / {title}: {name} is not a series of names.METRICS"
            used.add(SERIES[name].name)
    assert used == {m.name for m in names.ALL_METRICS}, "every registry metric appears on some panel"


def test_every_label_is_a_label_of_the_metric_it_filters() -> None:
    for filename, title, expr in all_queries():
        selectors = SELECTOR.findall(expr)
        assert selectors, f"{filename} / {title}: no metric selector"
        in_expr: set[str] = set()
        for series, body in selectors:
            allowed = metric_labels(SERIES[series])
            in_expr |= allowed
            for label, _op, _value in MATCHER.findall(body):
                if series in MODELLESS and label == names.prometheus_label(names.GEN_AI_REQUEST_MODEL):
                    # On a series without the label, =~"$model" matches only when every model
                    # is selected: one model's panel shows nothing, not every model's numbers.
                    continue
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
            assert window in ("$__rate_interval", "$__range", "$__interval"), (
                f"{filename} / {title}: fixed window [{window}]"
            )


def test_template_variables_are_defined_and_come_from_registry_metrics() -> None:
    for filename, model in DASHBOARDS.items():
        defined = {v["name"] for v in model["templating"]["list"]}
        assert defined == VARIABLES | OWN_VARIABLES.get(filename, set()), filename
        text = json.dumps(model)
        used = set(re.findall(r"\$\{?(\w+)", text)) - {
            "__rate_interval",
            "__range",
            "__interval",
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
    promtool = prometheus_tool("promtool")
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
    promtool = prometheus_tool("promtool")
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
    for rnd, n, tool in (("01", 4, 300), ("02", 2, 600)):
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
            [sample(0.3, **{round_label: "01"}), sample(0.6, **{round_label: "02"})],
        ),
        (
            panel_query("What grows round by round", dashboard="otel-ctx-task-type.json"),
            [
                sample(0.3, **{round_label: "01", component: tool}),
                sample(0.6, **{round_label: "02", component: tool}),
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


#: Samples of a counter per minute: the SDK's default metric export period (15 s).
SAMPLES_PER_MINUTE = 60_000 // DEFAULT_EXPORT_INTERVAL_MS


def _counter(increments: list[float]) -> str:
    """promtool's values for a counter sampled every export period from 0, given each minute's
    increment, spread evenly over the minute's exports (fits arrive steadily within a minute)."""
    total, values = 0.0, ["0"]
    for inc in increments:
        for _ in range(SAMPLES_PER_MINUTE):
            total += inc / SAMPLES_PER_MINUTE
            values.append(repr(total))
    return " ".join(values)


def test_panel_values_follow_a_deploy_that_grows_the_system_prompt_then_shrinks_it(tmp_path: Path) -> None:
    """A step change through Prometheus's engine: each panel's value at chosen instants is the truth.

    ``returns`` runs 30 fits a minute with a 7,300-token budget. In minutes 11-20 a deploy grows
    the system prompt from 1,000 to 3,000 tokens and 3 more fits a minute overflow; then it is
    rolled back. The dashboards' recorded rates span two minutes, so two minutes after each
    edge every panel reads the new state exactly, the mean budget never moves (numerator and
    denominator share one window), and the per-interval overflow count adds up to the 30
    overflowed fits, each counted once. The counters are sampled at the export period, as
    Prometheus sees them: a one-step window (left-open in Prometheus 3) then holds the step's
    exports, where a counter sampled once a step would leave it one sample and no increase.
    """
    promtool = prometheus_tool("promtool")
    task = names.prometheus_label(names.TASK_TYPE)
    outcome = names.prometheus_label(names.OUTCOME)
    component = names.prometheus_label(names.COMPONENT)
    minutes = 40
    deploy = range(11, 21)  # the minutes whose increments carry the grown prompt
    fits = {
        "fit": [30.0] * minutes,
        "overflow": [3.0 if m in deploy else 0.0 for m in range(1, minutes + 1)],
    }
    prompt = [3000 if m in deploy else 1000 for m in range(1, minutes + 1)]
    inputs = []
    for out, per_minute in fits.items():
        labels = {task: "returns", outcome: out}
        inputs.append(series(names.FITS.prometheus, _counter(per_minute), **labels))
        for line, per_request in (
            (names.COMPONENT_SYSTEM_PROMPT, prompt),
            (names.COMPONENT_BUDGET, [7300] * minutes),
        ):
            tokens = [n * size for n, size in zip(per_minute, per_request)]
            inputs.append(series(names.TOKENS.prometheus, _counter(tokens), **labels, **{component: line}))

    def sample(value: float, **labels: str) -> dict[str, Any]:
        return {"labels": "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "value": value}

    stacked = panel_query("Which component fills the window")
    budget = panel_query("Which component fills the window", "B")
    overflow_rate = panel_query("Overflow rate by task type")
    count = panel_query("Overflowed fits")
    assert "$__interval" in count
    share = round(3 / 33, 3)
    cases = []
    # minute: (mean system prompt, overflow share); 10 and 20 are the last minutes before each edge.
    truth = {
        10: (1000, 0),
        12: (3000, share),
        15: (3000, share),
        20: (3000, share),
        22: (1000, 0),
        30: (1000, 0),
    }
    for minute, (prompt_tokens, overflowed) in truth.items():
        at = f"{minute}m"
        cases += [
            (substitute(budget, "1m"), at, [sample(7300)]),
            (
                substitute(stacked, "1m"),
                at,
                [sample(prompt_tokens, **{component: names.COMPONENT_SYSTEM_PROMPT})],
            ),
            (substitute(overflow_rate, "1m"), at, [sample(overflowed, **{task: "returns"})]),
        ]
    # Grafana's legend sum over the range: the count panel evaluated at every one-minute step.
    per_step = substitute(count, "1m")
    cases.append(
        (f"sum_over_time(({per_step})[{minutes}m:1m])", f"{minutes}m", [sample(30, **{task: "returns"})])
    )
    rules = alerts.write(tmp_path / "rules.yml", alerts.AlertSettings())
    spec = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": f"{DEFAULT_EXPORT_INTERVAL_MS // 1000}s",
                "input_series": inputs,
                "promql_expr_test": [
                    {"expr": f"round({expr}, 0.001)", "eval_time": at, "exp_samples": expected}
                    for expr, at, expected in cases
                ],
            }
        ],
    }
    path = tmp_path / "step.test.json"
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
            if "/search?" in link["url"]:
                found.append(link["url"])
        found += re.findall(
            r"\]\((\$\{jaeger_url\}/search\?[^)]+)\)", panel.get("options", {}).get("content", "")
        )
    return found


def test_jaeger_links_search_overflowed_traces_by_tag_on_every_path() -> None:
    links = jaeger_links()
    assert len(links) == 3  # the two tables' row links (overflows, burners) and the text panel
    for url in links:
        parts = urlsplit(url)
        assert url.startswith("${jaeger_url}/search?")
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        # No operation: run()'s context_budget.fit and the instrumentor's context_budget.observe
        # spans both carry the outcome tag, and Jaeger's operation filter would keep only one.
        assert "operation" not in params
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
    assert sorted(p.name for p in out.iterdir()) == sorted([*DASHBOARDS, "alerts.yml", "slo.test.yml"])
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


def test_export_writes_the_shipped_files_equal_to_the_repository_and_will_not_overwrite(
    tmp_path: Path,
) -> None:
    out = tmp_path / "otel-ctx"
    result = runner.invoke(app, ["dashboards", "export", str(out)])
    assert result.exit_code == 0, result.output
    for path in COMMITTED.iterdir():
        assert (out / "dashboards" / path.name).read_bytes() == path.read_bytes(), path.name
    assert (out / "otelcol.yaml").read_bytes() == (ROOT / "stack" / "otelcol.yaml").read_bytes()
    again = runner.invoke(app, ["dashboards", "export", str(out)])
    assert again.exit_code == 2 and "--force" in again.output
    assert runner.invoke(app, ["dashboards", "export", str(out), "--force"]).exit_code == 0


_WITHOUT_EXTRA = """
import sys
sys.modules["grafana_foundation_sdk"] = None  # as if the dashboards extra were not installed
from otel_ctx.cli import app
app(sys.argv[1:], prog_name="otel-ctx")
"""


@pytest.mark.parametrize("command", ["build", "push"])
def test_without_the_extra_build_and_push_give_the_same_one_line_hint(command: str, tmp_path: Path) -> None:
    args = ["--out", str(tmp_path)] if command == "build" else ["--url", "http://127.0.0.1:9", "--token", "t"]
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRA, "dashboards", command, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith("pip install 'otel-ctx[dashboards]'"), proc.stderr


def _thresholds(model: dict[str, Any], title_start: str) -> list[tuple[float | None, str]]:
    for panel in iter_panels(model):
        if panel["title"].startswith(title_start):
            steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
            return [(s.get("value"), s["color"]) for s in steps]
    raise AssertionError(title_start)


def test_dashboard_thresholds_and_jaeger_url_follow_the_alert_settings() -> None:
    """One place for thresholds and URLs: the panel turns red where the alert fires."""
    default = build_dashboards()["otel-ctx-overview.json"]
    assert _thresholds(default, "Overflow rate (time range)") == [
        (None, "green"),
        (0.01, "orange"),
        (0.05, "red"),
    ]
    moved = alerts.AlertSettings(overflow_ratio=0.1, utilization_threshold=0.9, jaeger_url="http://j.example")
    boards = build_dashboards(moved)
    overview = boards["otel-ctx-overview.json"]
    assert _thresholds(overview, "Overflow rate (time range)") == [
        (None, "green"),
        (0.02, "orange"),
        (0.1, "red"),
    ]
    assert _thresholds(overview, "Utilization p50") == [(None, "transparent"), (0.9, "orange"), (1.0, "red")]
    for model in boards.values():
        jaeger_var = next(v for v in model["templating"]["list"] if v["name"] == "jaeger_url")
        assert jaeger_var["query"] == "http://j.example"
    # Building with other settings leaves the defaults for the next build.
    assert build_dashboards() == DASHBOARDS


def test_build_takes_urls_and_thresholds_from_the_environment_and_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_CTX_OVERFLOW_RATIO", "0.1")
    args = [
        "dashboards",
        "build",
        "--out",
        str(tmp_path),
        "--jaeger-url",
        "http://j.example",
        "--set",
        "overflow_for=15m",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rules = (tmp_path / "alerts.yml").read_text(encoding="utf-8")
    assert "(threshold 10%)" in rules and "for: 15m" in rules and "http://j.example/search?" in rules
    assert "http://j.example" in (tmp_path / "otel-ctx-overview.json").read_text(encoding="utf-8")
    assert runner.invoke(app, [*args, "--check"]).exit_code == 0
    bad = runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path), "--set", "overflow_ratio"])
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.output


# --- VictoriaMetrics (--backend victoriametrics) -----------------------------------------------

VM_BOARDS = build_dashboards(backend="victoriametrics")
#: PromQL functions MetricsQL does not know, or that read a native histogram series.
NOT_METRICSQL = ("histogram_count(", "histogram_sum(")


def _vm_queries() -> list[tuple[str, str]]:
    return [(title, expr) for model in VM_BOARDS.values() for title, expr in queries(model)]


def test_the_victoriametrics_dashboards_have_the_same_panels_and_targets() -> None:
    assert list(VM_BOARDS) == list(DASHBOARDS)
    for name, model in VM_BOARDS.items():
        assert [t for t, _ in queries(model)] == [t for t, _ in queries(DASHBOARDS[name])]
        strip = lambda m: {k: v for k, v in m.items() if k != "panels"}  # noqa: E731
        assert strip(model) == strip(DASHBOARDS[name])


def test_the_victoriametrics_dashboards_read_histograms_from_their_series() -> None:
    """No native-histogram arm: every histogram is read from its _bucket (by le and vmrange),
    _sum and _count series, every rate counted from 0 over the window (increase_pure)."""
    found = _vm_queries()
    assert found
    for title, expr in found:
        assert not any(f in expr for f in NOT_METRICSQL), (title, expr)
        assert not re.search(r"(?<![_a-z])rate\(", expr), (title, expr)
        for metric in names.ALL_METRICS:
            if metric.kind == "histogram":
                # The histogram's own name only with a suffix.
                assert not re.search(rf"\b{metric.prometheus}\{{", expr), (title, metric.name)
        if "histogram_quantile(" in expr:
            assert "vmrange" in expr, (title, expr)


def test_the_default_backend_is_prometheus_and_byte_identical() -> None:
    assert build_dashboards(backend="prometheus") == DASHBOARDS
    for filename, model in DASHBOARDS.items():
        assert (COMMITTED / filename).read_text(encoding="utf-8") == render(model)


def test_build_backend_victoriametrics_writes_and_checks(tmp_path: Path) -> None:
    built = runner.invoke(
        app, ["dashboards", "build", "--out", str(tmp_path), "--backend", "victoriametrics"]
    )
    assert built.exit_code == 0, built.output
    assert "vmalert" in built.output
    for filename, model in VM_BOARDS.items():
        assert (tmp_path / filename).read_text(encoding="utf-8") == render(model)
    checked = runner.invoke(
        app, ["dashboards", "build", "--out", str(tmp_path), "--backend", "victoriametrics", "--check"]
    )
    assert checked.exit_code == 0, checked.output
    assert runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path), "--check"]).exit_code == 1


def test_export_backend_victoriametrics_writes_the_generated_files_without_promtool_tests(
    tmp_path: Path,
) -> None:
    result = runner.invoke(app, ["dashboards", "export", str(tmp_path), "--backend", "victoriametrics"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "dashboards"
    assert (out / alerts.RULES_FILENAME).read_text(encoding="utf-8") == alerts.render(
        backend="victoriametrics"
    )
    for filename, model in VM_BOARDS.items():
        assert (out / filename).read_text(encoding="utf-8") == render(model)
    assert not (out / "alerts.test.yml").exists()
    assert (tmp_path / "otelcol.yaml").is_file()


@pytest.mark.parametrize("command", ["build", "export", "push"])
def test_victoriametrics_takes_the_underscore_names_only(command: str, tmp_path: Path) -> None:
    args = {
        "build": ["--out", str(tmp_path)],
        "export": [str(tmp_path)],
        "push": ["--url", "http://127.0.0.1:9", "--token", "t"],
    }[command]
    result = runner.invoke(
        app, ["dashboards", command, *args, "--backend", "victoriametrics", "--names", "utf8"]
    )
    assert result.exit_code == 2, result.output
    assert "underscore names only" in result.output
    with pytest.raises(ValueError, match="underscore names only"):
        build_dashboards(names="utf8", backend="victoriametrics")


def test_kubernetes_export_backend_victoriametrics_holds_the_victoriametrics_rules() -> None:
    import yaml

    result = runner.invoke(
        app, ["dashboards", "export", "-", "-k", "prometheusrule", "--backend", "victoriametrics"]
    )
    assert result.exit_code == 0, result.output
    (rule,) = [d for d in yaml.safe_load_all(result.output) if d["kind"] == "PrometheusRule"]
    assert rule["spec"]["groups"] == alerts.build(backend="victoriametrics")["groups"]
