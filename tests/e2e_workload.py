"""The support-desk workload behind a Prometheus scrape endpoint, for the end-to-end test.

Run as a subprocess by ``tests/e2e/test_prometheus.py``: it sets up otel-ctx's own
telemetry (``exporter="prometheus"``), runs demo tickets through ``otel_ctx.run`` for a
bounded time (disputes whose pinned floor overflows included), writes what it did as
JSON, then keeps serving the metrics until it is terminated, so Prometheus can take the
final scrape the test compares against. With ``--otlp`` it exports spans and metrics over
OTLP/gRPC instead (``tests/e2e/test_collector.py``: through the real Collector), and the report
lists each run's trace id and whether it overflowed. With ``--native`` it pushes native
histograms (``configure(native_histograms=True)``) and the report lists every round's breakdown
lines too (``tests/e2e/test_native.py``: the quantiles Prometheus reads against the fits'). With
``--otlp-http`` it pushes metrics only, over OTLP/HTTP, to Prometheus's own OTLP receiver
(``tests/e2e/test_otlp_prometheus.py``: no Collector between them). With ``--span-ids`` each run
lists the ids of every span its trace ended with
(``tests/e2e/test_two_tier.py``: every kept trace whole in Jaeger).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import format_span_id, format_trace_id, get_current_span

from otel_ctx import ContextFitter
from otel_ctx.demo import SUPPORT_DESK, RoundFitter, Ticket, run_ticket, tickets
from otel_ctx.engine._result import FitResult
from otel_ctx.names import COMPONENTS, LINE_COMPONENTS, OUTCOME_OVERFLOW
from otel_ctx.telemetry import configure, run, start_counters
from otel_ctx.telemetry._emitter import component_values
from otel_ctx.telemetry._labels import LabelPolicy

MODEL = "gpt-4o"
AGENT = "support-desk"
#: Where each line sits in ``component_values``.
_COMPONENT_INDEX = {c: i for i, c in enumerate(COMPONENTS)}


class _Recorded:
    """A run that also notes each round's breakdown lines (the fit's own numbers, not telemetry)."""

    def __init__(self, inner: RoundFitter, task_type: str, into: list[dict[str, object]]) -> None:
        self._inner = inner
        self._task_type = task_type
        self._into = into
        self._round = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def fit(self, *args: object, **kwargs: object) -> FitResult:
        result: FitResult = self._inner.fit(*args, **kwargs)  # type: ignore[arg-type]
        self._round += 1
        values = component_values(result.breakdown)
        self._into.append(
            {
                "task_type": self._task_type,
                "round": _ROUND_LABELS.round_label(self._round),
                "lines": {c: values[_COMPONENT_INDEX[c]] for c in LINE_COMPONENTS},
                "utilization": result.breakdown.estimated / result.breakdown.budget,
            }
        )
        return result


_ROUND_LABELS = LabelPolicy()


class _SpanIds(SpanProcessor):
    """The ids of every span that ended, by trace id: what the process handed to its exporter."""

    def __init__(self) -> None:
        self.by_trace: dict[str, list[str]] = {}

    def on_end(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is not None:
            trace_id = format_trace_id(context.trace_id)
            self.by_trace.setdefault(trace_id, []).append(format_span_id(context.span_id))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve metrics for Prometheus on 127.0.0.1:PORT")
    where.add_argument("--otlp", help="export spans and metrics over OTLP/gRPC to this endpoint")
    where.add_argument(
        "--otlp-http", help="push metrics only over OTLP/HTTP to this base URL (Prometheus's /api/v1/otlp)"
    )
    parser.add_argument("--service", required=True)
    parser.add_argument("--tickets", type=int, default=80, help="tickets to run (deterministic counts)")
    parser.add_argument("--seconds", type=float, default=30.0, help="stop early after this long")
    parser.add_argument("--rate", type=float, default=10.0, help="tickets per second at most")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--report", type=Path, required=True, help="JSON written when the tickets stop")
    parser.add_argument("--linger", type=float, default=120.0, help="serve metrics this long after")
    parser.add_argument(
        "--start-file", type=Path, help="serve metrics, but run no ticket until this file exists"
    )
    parser.add_argument(
        "--native", action="store_true", help="with --otlp: push native histograms, report every line"
    )
    parser.add_argument(
        "--span-ids", action="store_true", help="with --otlp: report the ids of every span of each run"
    )
    args = parser.parse_args(argv)

    if args.otlp_http is not None:
        # Prometheus takes metrics only; every second, so the last fits arrive soon after the run.
        handle = configure(
            exporter="otlp",
            traces_exporter="none",
            service_name=args.service,
            endpoint=args.otlp_http,
            protocol="http/protobuf",
            export_interval_millis=1000,
            native_histograms=args.native,
        )
    elif args.otlp is not None:
        # Metrics every second, so the Collector's exporter has the last fits soon after the run.
        handle = configure(
            exporter="otlp",
            service_name=args.service,
            endpoint=args.otlp,
            export_interval_millis=1000,
            native_histograms=args.native,
        )
    else:
        handle = configure(
            exporter="prometheus",
            service_name=args.service,
            prometheus_port=args.port,
            prometheus_host="127.0.0.1",
        )
    span_ids = _SpanIds()
    if args.span_ids and handle.tracer_provider is not None:
        handle.tracer_provider.add_span_processor(span_ids)
    if args.port is not None and handle.prometheus_address is None:
        print(f"cannot serve metrics on 127.0.0.1:{args.port}", file=sys.stderr)
        return 2
    fitter = ContextFitter(SUPPORT_DESK, model=MODEL)
    trace_ids: dict[str, str] = {}
    lines: list[dict[str, object]] = []
    # The ceiling-stop counters exist (at 0) before the first scrape, so the first stop shows.
    start_counters(fitter, model=MODEL)

    @contextmanager
    def observed(fitter: ContextFitter, ticket: Ticket) -> Iterator[RoundFitter]:
        with run(
            fitter,
            task_type=ticket.task_type,
            conversation_id=ticket.ticket_id,
            agent_name=AGENT,
            model=MODEL,
        ) as r:
            trace_ids[ticket.ticket_id] = format_trace_id(get_current_span().get_span_context().trace_id)
            yield _Recorded(r, ticket.task_type, lines) if args.native else r  # type: ignore[misc]

    # Prometheus must have scraped once before the first fit, or it never sees the first increase.
    if args.start_file is not None:
        waited = time.monotonic() + args.seconds
        while not args.start_file.exists():
            if time.monotonic() > waited:
                print(f"{args.start_file} never appeared", file=sys.stderr)
                return 3
            time.sleep(0.05)

    fits: Counter[tuple[str, str]] = Counter()
    rounds: list[dict[str, object]] = []
    runs: list[dict[str, object]] = []
    escalated = 0
    ticket_count = 0
    deadline = time.monotonic() + args.seconds
    for ticket in tickets(args.seed, args.tickets):
        started = time.monotonic()
        if started >= deadline:
            break
        result = run_ticket(fitter, ticket, opener=observed)
        ticket_count += 1
        escalated += result.escalated
        for stats in result.rounds:
            fits[(ticket.task_type, stats.outcome)] += 1
            rounds.append(
                {
                    "task_type": ticket.task_type,
                    "outcome": stats.outcome,
                    "utilization": stats.utilization,
                    "estimated": stats.estimated,
                }
            )
        runs.append(
            {
                "ticket": ticket.ticket_id,
                "task_type": ticket.task_type,
                "trace_id": trace_ids[ticket.ticket_id],
                "overflowed": any(stats.outcome == OUTCOME_OVERFLOW for stats in result.rounds),
                "resolution": result.resolution,
                "stop": result.stop,
                "tokens": result.spent_tokens,
                "cost": result.cost,
                **(
                    {"spans": span_ids.by_trace.get(trace_ids[ticket.ticket_id], [])} if args.span_ids else {}
                ),
            }
        )
        time.sleep(max(0.0, 1.0 / args.rate - (time.monotonic() - started)))

    report = {
        "tickets": ticket_count,
        "escalated": escalated,
        "fits": [{"task_type": t, "outcome": o, "count": n} for (t, o), n in sorted(fits.items())],
        # Every round and every run, so the test can compute the advisor's answers on its own.
        "rounds": rounds,
        "runs": runs,
        # With --native: each round's lines, for the quantiles the test computes on its own.
        "lines": lines,
        # With --span-ids: every span the process ended, in a run or not.
        "spans": sum(len(ids) for ids in span_ids.by_trace.values()),
    }
    tmp = args.report.with_suffix(".tmp")
    tmp.write_text(json.dumps(report), encoding="utf-8")
    os.replace(tmp, args.report)  # the test sees the whole report or none of it
    time.sleep(args.linger)
    handle.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
