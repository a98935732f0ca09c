"""Panels that divide two totals over the dashboard's time range read the ratio of the totals.

Through Prometheus's own engine (``promtool test rules``, the shipped recording rules loaded):
series born at different times, as the SDK exports them (a counter series appears at its first
increment, with that increment as its first value), and a time range that starts before any of
them. A mean over such series must weigh every fit once, whatever part of the range its series
lived in; averaging each series over its own samples would weigh a model first seen late as if it
had run all along.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import prometheus_tool

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import build_dashboards, queries

pytestmark = pytest.mark.e2e

TASK = names.prometheus_label(names.TASK_TYPE)
OUTCOME = names.prometheus_label(names.OUTCOME)
COMPONENT = names.prometheus_label(names.COMPONENT)
MODEL = names.prometheus_label(names.GEN_AI_REQUEST_MODEL)
ROUND = names.prometheus_label(names.ROUND)
TOOL = names.transcript_role_component("tool")
MINUTES = 40
BOARDS = build_dashboards()


def panel(title: str, dashboard: str = "otel-ctx-task-type.json") -> str:
    found = [expr for name, expr in queries(BOARDS[dashboard]) if name.startswith(title)]
    assert len(found) == 1, (title, found)
    return found[0]


def fill(expr: str, window: str) -> str:
    expr = expr.replace("$__range", window).replace("$__rate_interval", "2m")
    return re.sub(r"\$(service|task_type|model)\b", ".*", expr)


def counter(start: int, per_minute: float) -> str:
    """promtool values, one a minute: absent before ``start``, then a counter born at its first
    minute's increment (as the SDK exports it), growing by ``per_minute``."""
    values = ["_"] * start + [f"{per_minute * (m - start + 1):g}" for m in range(start, MINUTES + 1)]
    return " ".join(values)


def series(metric: str, values: str, **labels: str) -> dict[str, str]:
    body = ", ".join(f'{k}="{v}"' for k, v in {"job": "agent", TASK: "returns", **labels}.items())
    return {"series": f"{metric}{{{body}}}", "values": values}


#: (model, first minute, fits a minute, budget, tool-result tokens per fit)
MODELS = (("gpt-4o", 5, 30, 7300, 300), ("gpt-4o-mini", 25, 10, 3000, 100))


def inputs(models: tuple[tuple[str, int, int, int, int], ...]) -> list[dict[str, str]]:
    found = []
    for model, start, fits, budget, tool in models:
        labels = {MODEL: model, OUTCOME: names.OUTCOME_FIT}
        found.append(series(names.FITS.prometheus, counter(start, fits), **labels))
        for line, per_fit in ((names.COMPONENT_BUDGET, budget), (TOOL, tool)):
            found.append(
                series(names.TOKENS.prometheus, counter(start, fits * per_fit), **labels, **{COMPONENT: line})
            )
    return found


def fits_weighted(models: tuple[tuple[str, int, int, int, int], ...], field: int) -> float:
    """The truth: every fit of the data weighs once (all of them fall in the range)."""
    weights = [(fits * (MINUTES - start + 1), row[field]) for row in models for _, start, fits, *_ in [row]]
    return sum(w * v for w, v in weights) / sum(w for w, _ in weights)


def run(promtool: str, tmp_path: Path, data: list[dict[str, str]], cases: list[dict[str, Any]]) -> None:
    rules = alerts.write(tmp_path / "rules.yml", alerts.AlertSettings())
    spec = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": data, "promql_expr_test": cases}],
    }
    path = tmp_path / "ranges.test.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def within(expr: str, truth: float, tolerance: float, **labels: str) -> dict[str, Any]:
    """A case that holds when ``expr`` (one series, with ``labels``) is within ``tolerance``
    (relative) of ``truth`` at the data's last minute."""
    check = f"abs(({expr}) / {truth!r} - 1) < bool {tolerance!r}"
    shown = "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    return {"expr": check, "eval_time": f"{MINUTES}m", "exp_samples": [{"labels": shown, "value": 1}]}


def test_mean_budget_reads_the_one_budget_whatever_the_range(tmp_path: Path) -> None:
    promtool = prometheus_tool("promtool")
    one = (*MODELS[:1], ("gpt-4o-late", 25, 10, 7300, 100))
    stat = panel("Mean budget (tokens)")
    cases = [
        {
            "expr": f"round({fill(stat, window)}, 0.001)",
            "eval_time": at,
            "exp_samples": [{"labels": "{}", "value": 7300}],
        }
        for window in ("3m", "10m", "30m", "1h", "6h")
        for at in ("7m", "26m", "40m")
    ]
    run(promtool, tmp_path, inputs(one), cases)


def test_mean_budget_weighs_every_fit_once_when_budgets_differ(tmp_path: Path) -> None:
    """Two models of one task type, the second first seen 20 minutes later with a smaller budget:
    over a range that holds all of it the stat is the fits-weighted mean (6,745 here); each
    series' own average would read 6,225, the two models' budgets weighed by fits a minute."""
    promtool = prometheus_tool("promtool")
    truth = fits_weighted(MODELS, 3)
    assert abs(truth - 6225) > 400  # the data tells the two readings apart
    stat = fill(panel("Mean budget (tokens)"), "1h")
    # Both models throughout the last ten minutes: their fits a minute weigh the budgets.
    recent = (30 * 7300 + 10 * 3000) / 40
    run(
        promtool,
        tmp_path,
        inputs(MODELS),
        [within(stat, truth, 0.002), within(fill(panel("Mean budget"), "10m"), recent, 0.002)],
    )


def test_mean_tokens_by_outcome_weighs_every_fit_once(tmp_path: Path) -> None:
    """The heavy requests (mean tokens per line, from the recorded rates): the fits-weighted
    mean over the range, within the recorded rate's two minutes at the range's ends."""
    promtool = prometheus_tool("promtool")
    truth = fits_weighted(MODELS, 4)
    expr = fill(panel("The heavy requests"), "1h")
    labels = {OUTCOME: names.OUTCOME_FIT, COMPONENT: TOOL}
    run(promtool, tmp_path, inputs(MODELS), [within(expr, truth, 0.01, **labels)])


def test_share_of_the_budget_by_round_weighs_every_request_once(tmp_path: Path) -> None:
    """What grows round by round, from two services first seen 20 minutes apart: the tool
    results' share of the budget in round 01 is their total over the budgets' total."""
    promtool = prometheus_tool("promtool")
    data = []
    # (job, first minute, requests a minute, budget, tool tokens per request)
    jobs = (("early", 5, 30, 7300, 3650), ("late", 25, 10, 3000, 300))
    for job, start, per, budget, tool in jobs:
        for line, size in ((names.COMPONENT_BUDGET, budget), (TOOL, tool)):
            body = f'job="{job}", {TASK}="returns", {ROUND}="01", {COMPONENT}="{line}"'
            data.append(
                {"series": f"{names.ROUND_TOKENS.prometheus}{{{body}}}", "values": counter(start, per * size)}
            )
    minutes = {job: MINUTES - start + 1 for job, start, *_ in jobs}
    tools = sum(per * tool * minutes[job] for job, _, per, _, tool in jobs)
    budgets = sum(per * budget * minutes[job] for job, _, per, budget, _ in jobs)
    expr = fill(panel("What grows round by round"), "1h")
    run(promtool, tmp_path, data, [within(expr, tools / budgets, 0.01, **{ROUND: "01", COMPONENT: TOOL})])


def test_no_panel_averages_a_series_over_the_range() -> None:
    """``avg_over_time`` divides each series by its own samples: no dashboard query may use it."""
    offending = [
        (board, title)
        for board, model in BOARDS.items()
        for title, expr in queries(model)
        if "avg_over_time" in expr
    ]
    assert not offending
