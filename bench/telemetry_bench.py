"""Telemetry cost: what one observed round adds, and what a dead collector costs.

* per-round telemetry = median(run.fit) − median(fitter.fit) on the same warm round,
  against a cold 100-message fit (target ≤ 10%) and against the SDK's own cost of one span
  plus the same histogram and counter records written by hand (target ≤ 2×);
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from bench import inputs
from bench.fit_bench import new_fitter
from bench.report import Figure
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx import names
from otel_ctx.telemetry import Emitter, Run, component_values, create_providers, span_attributes, views

SECTION = "Telemetry: one observed round"
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
def _sink() -> Iterator[int]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.otlp_sink", str(port), "--max-seconds", "300"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the OTLP sink did not start")
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
    observed = Run(observed_fitter, task_type=None, emitter=emitter)
    observed.__enter__()

    by_hand = _by_hand(tp, mp, result)
    t = interleaved(
        {
            "bare": lambda: lambda: bare_fitter.fit(conv),
            "observed": lambda: lambda: observed.fit(conv),
            "by_hand": lambda: by_hand,
        },
        trials=trials,
        repeat=repeat,
    )
    observed.__exit__(None, None, None)
    tp.shutdown()
    mp.shutdown()
    cost = max(0.0, t["observed"].median - t["bare"].median)
    n_attributes = len(span_attributes(result, round_number=1, model="gpt-4o"))
    hand = t["by_hand"].median
    share = cost / cold_fit_s
    figures = [
        Figure(
            SECTION,
            "telemetry per round ÷ cold 100-message fit",
            f"{share:.1%}",
            f"≤ {SHARE_TARGET:.0%}",
            share <= SHARE_TARGET,
            f"telemetry {fmt_seconds(cost)} (observed {fmt_seconds(t['observed'].median)} − bare warm fit "
            f"{fmt_seconds(t['bare'].median)}), cold fit {fmt_seconds(cold_fit_s)}",
        ),
        Figure(
            SECTION,
            "telemetry per round ÷ the same span + records by hand",
            f"{cost / hand:.2f}×",
            f"≤ {BY_HAND_TARGET}×",
            cost / hand <= BY_HAND_TARGET,
            f"by hand {fmt_seconds(hand)}: 1 span with {n_attributes} attributes, "
            f"{len(names.COMPONENTS) + 1} histogram points, 3 counter adds",
        ),
    ]

    # --- collector down vs up -------------------------------------------------------
    notes: list[str] = []
    down_port = _free_port()  # bound and released: nothing listens there
    with _sink() as up_port:
        handles = {
            "down": create_providers(
                "otlp",
                endpoint=f"http://127.0.0.1:{down_port}",
                export_interval_millis=500,
                export_timeout=1.0,
            ),
            "up": create_providers(
                "otlp", endpoint=f"http://127.0.0.1:{up_port}", export_interval_millis=500, export_timeout=1.0
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
    return TelemetryBenchResult(figures, notes)


def _by_hand(tp: TracerProvider, mp: MeterProvider, result: object) -> Thunk:
    """One span with the same attributes and the same metric records, written directly on the SDK."""
    from otel_ctx.engine.result import FitResult

    assert isinstance(result, FitResult)
    tracer = tp.get_tracer("bench.by_hand")
    meter = mp.get_meter("bench.by_hand")
    tokens = meter.create_histogram(
        "bench.tokens", unit="{token}", explicit_bucket_boundaries_advisory=names.TOKEN_BUCKETS
    )
    util = meter.create_histogram(
        "bench.utilization", unit="1", explicit_bucket_boundaries_advisory=names.UTILIZATION_BUCKETS
    )
    fits = meter.create_counter("bench.fits")
    dropped = meter.create_counter("bench.dropped_turns")
    capped = meter.create_counter("bench.capped_tool_results")
    attrs = span_attributes(result, round_number=1, model="gpt-4o")
    base = {
        names.TASK_TYPE: "default",
        names.ROUND: "1",
        names.OUTCOME: result.outcome,
        names.GEN_AI_REQUEST_MODEL: "gpt-4o",
    }
    comp_attrs = [{names.COMPONENT: c, **base} for c in names.COMPONENTS]
    task_model = {names.TASK_TYPE: "default", names.GEN_AI_REQUEST_MODEL: "gpt-4o"}
    values = component_values(result.breakdown)
    utilization = result.breakdown.utilization

    def go() -> None:
        span = tracer.start_span(names.SPAN_FIT)
        span.set_attributes(attrs)
        ctx = trace.set_span_in_context(span)
        for v, a in zip(values, comp_attrs):
            tokens.record(v, a, ctx)
        util.record(utilization, base, ctx)
        fits.add(1, base, ctx)
        dropped.add(result.dropped_turns, task_model, ctx)
        capped.add(result.capped_tool_results, task_model, ctx)
        span.end()

    return go
