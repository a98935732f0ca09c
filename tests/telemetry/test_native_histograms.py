"""Native histograms on the SDK side: the switch, what a round records, and the series it costs.

Each breakdown line per round and task type becomes one exponential histogram point per label
set (``context_budget.line_tokens``), the utilization too by round; the per-round counter steps
aside, and every other histogram is exponential. The end-to-end path (Collector remote write into
Prometheus) is ``tests/e2e/test_native.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ExponentialHistogram,
    HistogramDataPoint,
    InMemoryMetricReader,
)

from bench import series_paths, spread
from otel_ctx import names
from otel_ctx.telemetry import Emitter, ExportSettings, component_values, create_providers, views
from otel_ctx.telemetry._exporters import ENV_HISTOGRAM_AGGREGATION, EXPONENTIAL_HISTOGRAM
from otel_ctx.telemetry._labels import LabelPolicy

OUTCOMES = spread.outcomes()
RESULTS = [(task, outcome, r) for task, by in OUTCOMES.by_task.items() for outcome, r in by.items()]
KNOWN = tuple(OUTCOMES.by_task)
ROOT = Path(__file__).resolve().parents[2]


def _metrics(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return {m.name: m.data for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def _emitter(distributions: bool) -> tuple[Emitter, InMemoryMetricReader, MeterProvider]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=views(native=distributions))
    return Emitter(meter_provider=provider, distributions=distributions), reader, provider


# --- the switch ---------------------------------------------------------------------------------


def test_the_standard_variable_switches_distributions_on_for_pushed_metrics_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_HISTOGRAM_AGGREGATION, raising=False)
    assert not ExportSettings("otlp").distributions()
    monkeypatch.setenv(ENV_HISTOGRAM_AGGREGATION, EXPONENTIAL_HISTOGRAM.upper())
    assert ExportSettings("otlp").distributions()
    assert ExportSettings("console").distributions()
    # The scrape endpoint has no native histograms: the variable (meant for OTLP) is ignored.
    assert not ExportSettings("prometheus").distributions()
    # An explicit choice wins over the variable.
    assert not ExportSettings("otlp", native_histograms=False).distributions()
    monkeypatch.setenv(ENV_HISTOGRAM_AGGREGATION, "explicit_bucket_histogram")
    assert not ExportSettings("otlp").distributions()
    assert ExportSettings("otlp", native_histograms=True).distributions()


def test_native_histograms_on_the_scrape_endpoint_is_a_value_error_naming_the_setting() -> None:
    with pytest.raises(ValueError, match=r"native_histograms=True.*Prometheus scrape endpoint"):
        ExportSettings("prometheus", native_histograms=True).distributions()
    with pytest.raises(ValueError, match="native_histograms"):
        create_providers(ExportSettings("prometheus", native_histograms=True, prometheus_port=0))


def test_create_providers_makes_every_histogram_exponential_when_on() -> None:
    handle = create_providers(ExportSettings("none", native_histograms=True), traces=False)
    try:
        assert handle.distributions
    finally:
        handle.shutdown()
    handle = create_providers(ExportSettings("none"), traces=False)
    try:
        assert not handle.distributions
    finally:
        handle.shutdown()


# --- what a round records -------------------------------------------------------------------------


def test_each_line_of_a_round_is_one_exponential_point_per_line_round_and_task_type() -> None:
    emitter, reader, provider = _emitter(True)
    task, _, result = RESULTS[0]
    emitter.record_metrics(result, 3, "gpt-4o", KNOWN)
    got = _metrics(reader)
    provider.shutdown()
    assert names.ROUND_TOKENS.name not in got  # the distributions replace it
    for metric in names.METRICS:
        if metric.kind == "histogram" and metric.name in got:
            assert isinstance(got[metric.name], ExponentialHistogram), metric.name
    lines = got[names.LINE_TOKENS.name]
    assert isinstance(lines, ExponentialHistogram)
    values = dict(zip(names.COMPONENTS, component_values(result.breakdown), strict=True))
    by_line = {p.attributes[names.COMPONENT]: p for p in lines.data_points}
    assert set(by_line) == set(names.LINE_COMPONENTS)
    for line, point in by_line.items():
        assert dict(point.attributes) == {names.COMPONENT: line, names.ROUND: "03", names.TASK_TYPE: task}
        assert (point.count, point.sum) == (1, values[line])
    (utilization,) = got[names.ROUND_UTILIZATION.name].data_points
    assert dict(utilization.attributes) == {names.ROUND: "03", names.TASK_TYPE: task}
    assert utilization.sum == pytest.approx(result.breakdown.estimated / result.breakdown.budget)


def test_without_distributions_nothing_of_them_is_exported_and_the_round_counter_stays() -> None:
    emitter, reader, provider = _emitter(False)
    emitter.record_metrics(RESULTS[0][2], 1, "gpt-4o", KNOWN)
    got = _metrics(reader)
    provider.shutdown()
    assert not {m.name for m in names.DISTRIBUTIONS} & set(got)
    assert names.ROUND_TOKENS.name in got
    assert isinstance(got[names.UTILIZATION.name].data_points[0], HistogramDataPoint)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(RESULTS) - 1), st.integers(1, 20)), min_size=1, max_size=30))
def test_each_distribution_counts_and_sums_exactly_the_lines_of_its_rounds(
    rounds: list[tuple[int, int]],
) -> None:
    """Whatever rounds a process fits, each (line, round label, task type) point holds exactly
    that many requests and the sum of that line's tokens: what the per-round counter held, and
    what histogram_sum/histogram_count read in Prometheus."""
    emitter, reader, provider = _emitter(True)
    labels = LabelPolicy()
    expected: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for index, number in rounds:
        task, _, result = RESULTS[index]
        emitter.record_metrics(result, number, "gpt-4o", KNOWN)
        values = dict(zip(names.COMPONENTS, component_values(result.breakdown), strict=True))
        for line in names.LINE_COMPONENTS:
            expected[(line, labels.round_label(number), task)].append(values[line])
    got = _metrics(reader)[names.LINE_TOKENS.name]
    provider.shutdown()
    points = {
        (p.attributes[names.COMPONENT], p.attributes[names.ROUND], p.attributes[names.TASK_TYPE]): p
        for p in got.data_points
    }
    assert set(points) == set(expected)
    for key, values in expected.items():
        point = points[key]
        assert (point.count, point.sum, point.min, point.max) == (
            len(values),
            sum(values),
            min(values),
            max(values),
        )
        # Scale 8 at most: Prometheus's finest, so nothing is rescaled on the way.
        assert point.scale <= 8


# --- the series budget ------------------------------------------------------------------------------


def test_one_process_at_three_task_types_by_three_models_stays_within_the_budget_native() -> None:
    counts = series_paths.native_points()
    assert names.ROUND_TOKENS.name not in counts
    # 9 lines x 13 round labels x 3 task types: the distributions carry no model label.
    assert counts[names.LINE_TOKENS.name] == len(names.LINE_COMPONENTS) * 13 * 3
    assert sum(counts.values()) <= series_paths.TARGET


def test_an_applications_own_meter_provider_keeps_the_round_counter_unless_the_variable_is_set() -> None:
    """Its aggregation is the application's: without the standard variable the distributions would
    be classic histograms (a series per bucket), so configure() does not switch them on."""
    code = """
import json, logging
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
metrics.set_meter_provider(MeterProvider())
import otel_ctx
from otel_ctx.telemetry._emitter import default_emitter
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger("otel_ctx.telemetry").addHandler(Keep())
otel_ctx.configure(exporter="none", native_histograms=True)
print(json.dumps({"on": default_emitter().distributions, "log": records}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for variable, expected in ((None, False), (EXPONENTIAL_HISTOGRAM, True)):
        run_env = dict(env) if variable is None else {**env, ENV_HISTOGRAM_AGGREGATION: variable}
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["on"] is expected
        assert any("native_histograms=True ignored" in line for line in out["log"]) is not expected
