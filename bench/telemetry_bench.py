"""Telemetry cost: what one observed round adds, what a process stores, what a dead collector costs.

* per-round telemetry = the median of ``run.emit(result)`` (everything a round adds but the
  fit: span, attributes, measurements, totals), against the warm fit it describes (context,
  no target: the SDK's own span and records for a round cost about as much as a warm fit, so
  the ratio says how the two compare, not what otel-ctx adds), against a cold 100-message
  fit (target ≤ 10%) and against the SDK's own cost of one span plus the same measurements
  written by hand (target ≤ 2×); the whole observed round (``run.fit``) is shown beside them;
* series per process at the full spread of label sets (every task type of the support
  desk × two models × every round label × every outcome), as Prometheus stores them
  through the SDK's scrape endpoint and as the Collector's Prometheus exporter renders the
  same OTLP points (target ≤ 1,500 each);
* fit latency with the OTLP exporter pointed at a closed port vs at a live receiver in
  another process (target ≤ 1.1×).

Spans leave through the production path (BatchSpanProcessor); metrics are aggregated by
the SDK exactly as with a periodic exporter, read by an in-memory reader.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from bench import inputs, series_paths, spread
from bench.fit_bench import new_fitter
from bench.report import Figure
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx import ContextFitter, names
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.telemetry import (
    Emitter,
    ExportSettings,
    Run,
    component_values,
    create_providers,
    span_attributes,
    views,
)

SECTION = "Telemetry: one observed round"
FLEET_SECTION = "Telemetry for a fleet: series per process at full spread (3 task types × 3 models)"
SERIES_TARGET = 1_500
SHARE_TARGET = 0.10
BY_HAND_TARGET = 2.0
DOWN_TARGET = 1.1


class _Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@dataclass
class TelemetryBenchResult:
    figures: list[Figure]
    notes: list[str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_server(module: str) -> Iterator[int]:
    """Run ``python -m module PORT`` in its own process on 127.0.0.1; yields the port once it is
    ready and stops it (by closing its stdin) afterwards."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(port), "--max-seconds", "300"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{module} did not start")
        yield port
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(*, cold_fit_s: float, quick: bool = False) -> TelemetryBenchResult:
    conv = inputs.conversation()
    trials, repeat = (9, 5) if quick else (61, 20)

    # --- per-round cost -------------------------------------------------------------
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(_Discard()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()], views=views())
    emitter = Emitter(tracer_provider=tp, meter_provider=mp)
    bare_fitter = new_fitter()
    observed_fitter = new_fitter()
    result = bare_fitter.fit(conv)
    observed_fitter.fit(conv)
    tickets = _Runs(observed_fitter, emitter)

    by_hand = _by_hand(tp, mp, result)

    def observed_round() -> Thunk:
        r = tickets.next()
        return lambda: r.fit(conv)

    def telemetry_round() -> Thunk:
        r = tickets.next()
        return lambda: r.emit(result, mode=names.MODE_FIT)

    t = interleaved(
        {
            "bare": lambda: lambda: bare_fitter.fit(conv),
            "observed": observed_round,
            "telemetry": telemetry_round,
            "by_hand": lambda: by_hand,
        },
        trials=trials,
        repeat=repeat,
    )
    tickets.close()
    tp.shutdown()
    mp.shutdown()
    cost = t["telemetry"].median
    n_attributes = len(span_attributes(result, round_number=1, model="gpt-4o"))
    hand = t["by_hand"].median
    share = cost / cold_fit_s
    warm = t["bare"].median
    figures = [
        Figure(
            SECTION,
            "telemetry per round ÷ the warm fit it describes",
            f"{cost / warm:.2f}×",
            "(context)",
            None,
            f"telemetry {fmt_seconds(cost)}, warm 100-message fit {fmt_seconds(warm)}: a span with "
            f"{n_attributes} attributes, the run's figures and the trim event, 2 measurements "
            "(utilization, fits), the running totals",
        ),
        Figure(
            SECTION,
            "telemetry per round ÷ cold 100-message fit",
            f"{share:.1%}",
            f"≤ {SHARE_TARGET:.0%}",
            share <= SHARE_TARGET,
            f"telemetry {fmt_seconds(cost)} (a whole observed round {fmt_seconds(t['observed'].median)}, "
            f"bare warm fit {fmt_seconds(t['bare'].median)}), cold fit {fmt_seconds(cold_fit_s)}",
        ),
        Figure(
            SECTION,
            "telemetry per round ÷ the same span + records by hand",
            f"{cost / hand:.2f}×",
            f"≤ {BY_HAND_TARGET}×",
            cost / hand <= BY_HAND_TARGET,
            f"by hand {fmt_seconds(hand)}: 1 span with {n_attributes + 5} attributes and the trim "
            "event, 1 histogram point, 1 counter add, the token lines added up in a dict, the run "
            "span's running totals",
        ),
    ]

    # --- collector down vs up -------------------------------------------------------
    notes: list[str] = []
    down_port = _free_port()  # bound and released: nothing listens there
    with local_server("bench.otlp_sink") as up_port:
        handles = {
            "down": create_providers(
                ExportSettings(
                    "otlp",
                    endpoint=f"http://127.0.0.1:{down_port}",
                    export_interval_millis=500,
                    export_timeout=1.0,
                )
            ),
            "up": create_providers(
                ExportSettings(
                    "otlp",
                    endpoint=f"http://127.0.0.1:{up_port}",
                    export_interval_millis=500,
                    export_timeout=1.0,
                )
            ),
        }
        runs: dict[str, Run] = {}
        for key, handle in handles.items():
            fitter = new_fitter()
            fitter.fit(conv)
            runs[key] = Run(
                fitter,
                task_type=None,
                emitter=Emitter(tracer_provider=handle.tracer_provider, meter_provider=handle.meter_provider),
            )
            runs[key].__enter__()

        def case(key: str) -> Callable[[], Thunk]:
            r = runs[key]
            return lambda: lambda: r.fit(conv)

        d = interleaved({"down": case("down"), "up": case("up")}, trials=trials * 2, repeat=repeat)
        for r in runs.values():
            r.__exit__(None, None, None)
        for handle in handles.values():
            handle.shutdown()
    ratio = d["down"].median / d["up"].median
    figures.append(
        Figure(
            SECTION,
            "fit latency, collector down ÷ up",
            f"{ratio:.2f}×",
            f"≤ {DOWN_TARGET}×",
            ratio <= DOWN_TARGET,
            f"down {fmt_seconds(d['down'].median)} (OTLP/gRPC to a closed port), up "
            f"{fmt_seconds(d['up'].median)} (a live OTLP receiver in another process)",
        )
    )
    figures += _series_figures()
    figures += series_paths.figures()
    return TelemetryBenchResult(figures, notes)


class _Runs:
    """Agent runs of ROUNDS_PER_RUN rounds each, opened and closed between timed calls.

    A run is a ticket: a few dozen rounds at most. One endless run would time what a round
    costs in its ten-thousandth round, which no agent reaches.
    """

    ROUNDS_PER_RUN = 12

    def __init__(self, fitter: ContextFitter, emitter: Emitter) -> None:
        self.fitter, self.emitter = fitter, emitter
        self.current: Run | None = None
        self.rounds = 0

    def next(self) -> Run:
        if self.current is None or self.rounds >= self.ROUNDS_PER_RUN:
            self.close()
            self.current = Run(self.fitter, task_type=None, emitter=self.emitter)
            self.current.__enter__()
            self.rounds = 0
        self.rounds += 1
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.__exit__(None, None, None)
            self.current = None


def _series_figures() -> list[Figure]:
    """Series one process stores at the full spread, through both shipped paths."""
    results = spread.outcomes()
    reader = InMemoryMetricReader()
    otlp_provider = MeterProvider(metric_readers=[reader], views=views())
    otlp_emitter = Emitter(meter_provider=otlp_provider)
    rounds = spread.record_full_spread(otlp_emitter, results)
    runs = spread.record_run_spread(otlp_emitter, results)
    otlp = spread.otlp_series(reader.get_metrics_data())
    otlp_provider.shutdown()

    handle = create_providers(ExportSettings("prometheus", prometheus_port=0, prometheus_host="127.0.0.1"))
    try:
        scraped_emitter = Emitter(meter_provider=handle.meter_provider)
        spread.record_full_spread(scraped_emitter, results)
        spread.record_run_spread(scraped_emitter, results)
        assert handle.prometheus_address is not None
        host, port = handle.prometheus_address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as response:
            scraped = spread.exposition_series(response.read().decode())
    finally:
        handle.shutdown()

    def detail(counts: dict[str, int]) -> str:
        return ", ".join(f"{family} {n}" for family, n in sorted(counts.items(), key=lambda kv: -kv[1]))

    spread_text = (
        f"{len(results.by_task)} task types × {len(spread.MODELS)} models × 3 outcomes × "
        f"{len(spread.round_numbers(Emitter(meter_provider=MeterProvider())))} round labels "
        f"({rounds} rounds), a finished run of every resolution × stop ({runs} runs)"
    )
    prom_total, otlp_total = sum(scraped.values()), sum(otlp.values())
    return [
        Figure(
            FLEET_SECTION,
            "series per process, SDK scrape endpoint (--prometheus-port)",
            f"{prom_total:,}",
            f"≤ {SERIES_TARGET:,}",
            prom_total <= SERIES_TARGET,
            f"{spread_text}: {detail(scraped)}; plus target_info",
        ),
        Figure(
            FLEET_SECTION,
            "series per process, OTLP → Collector → Prometheus",
            f"{otlp_total:,}",
            f"≤ {SERIES_TARGET:,}",
            otlp_total <= SERIES_TARGET,
            "the same points as OTLP, counted as the Collector's Prometheus exporter renders them "
            "(a histogram point: its buckets, `+Inf`, `_sum`, `_count`); the Collector adds one "
            "target_info per service instance",
        ),
        Figure(
            FLEET_SECTION,
            "series for 100 processes (one service)",
            f"{prom_total * 100:,} stored, {_recorded_series(scraped):,} recorded",
            "—",
            None,
            "each process keeps its own series (distinct instance label); the recording rules hold "
            "one series per label set for the whole service, which the alerts and over-time panels read",
        ),
    ]


def _recorded_series(scraped: dict[str, int]) -> int:
    """Series the recording rules hold for a service: one per label set of each recorded family."""
    recorded = {rule["record"].split(":")[1] for rule in alerts.recording_rules()}
    return sum(n for family, n in scraped.items() if family in recorded)


def _by_hand(tp: TracerProvider, mp: MeterProvider, result: object) -> Thunk:
    """The same span, event and records as a run's round, written directly on the SDK.

    What a careful developer would write to get the same data: the round span with the
    breakdown and the run's figures, the trim event of a compacting round, the utilization
    point and the fits count (both with the span as exemplar), the token lines added up for a
    counter read at collection, and the run span's running totals.
    """
    from otel_ctx.engine._result import FitResult
    from otel_ctx.telemetry._trim import Trim

    assert isinstance(result, FitResult)
    tracer = tp.get_tracer("bench.by_hand")
    meter = mp.get_meter("bench.by_hand")
    util = meter.create_histogram(
        "bench.utilization", unit="1", explicit_bucket_boundaries_advisory=names.UTILIZATION_BUCKETS
    )
    fits = meter.create_counter("bench.fits")
    attrs = span_attributes(result, round_number=1, model="gpt-4o")
    attrs.update(
        {
            names.RUN_SPENT_TOKENS: 1,
            names.RUN_NEXT_TOKENS: 1,
            names.RUN_CEILING_CROSSED: False,
            names.COST_SOURCE: "estimate",
            names.COST_USD: 0.01,
        }
    )
    trim = Trim(
        names.PERFORMER_OTEL_CTX,
        "drop",
        result.tokens_before,
        result.breakdown.estimated,
        result.dropped_messages,
    ).attributes()
    task_model = {names.TASK_TYPE: "default", names.GEN_AI_REQUEST_MODEL: "gpt-4o"}
    outcome = {**task_model, names.OUTCOME: result.outcome}
    totals: dict[str, int] = dict.fromkeys(names.COMPONENTS, 0)
    values = component_values(result.breakdown)
    utilization = result.breakdown.utilization
    run_span = tracer.start_span(names.SPAN_RUN)
    spent = [0]

    def go() -> None:
        span = tracer.start_span(names.SPAN_FIT)
        span.set_attributes(attrs)
        if result.dropped_messages:
            span.add_event(names.EVENT_TRIM, trim)
        ctx = trace.set_span_in_context(span)
        util.record(utilization, task_model, ctx)
        fits.add(1, outcome, ctx)
        for component, v in zip(names.COMPONENTS, values, strict=True):
            totals[component] += v
        spent[0] += result.breakdown.estimated
        run_span.set_attributes({names.RUN_SPENT_TOKENS: spent[0], names.COST_SOURCE: "estimate"})
        span.end()

    return go
