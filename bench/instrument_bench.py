"""The zero-code instrumentor's cost: what wrapping an SDK call adds, with the network excluded.

The real OpenAI SDK sends each request to an in-process transport that answers at
once (``MockTransport``), so both sides pay the SDK's own work and neither pays a
socket. Per call:

* added cost of a new request = median(instrumented call) − median(the SDK's own method
  on the same client), with the observer's token cache emptied before every call, against
  a cold measure of that request by a fresh fitter (target ≤ cold measure + 10%);
* a conversation's later round: the added cost when the history is already counted and
  the round brings two new messages, at 100 and at 200 messages of history (target: the
  ratio stays ≤ 1.3×, i.e. the cost follows the new messages, not the history).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import otel_ctx.instrumentation as oi
from bench import inputs
from bench.fit_bench import new_fitter
from bench.report import Figure
from bench.telemetry_bench import _Discard
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx.telemetry import views

SECTION = "Instrumentor: one wrapped SDK call (network excluded)"
COLD_TARGET = 1.10
LATER_TARGET = 1.3
_ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": inputs.MODEL,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 40_000, "completion_tokens": 5, "total_tokens": 40_005},
    }
).encode()


@dataclass
class InstrumentBenchResult:
    figures: list[Figure]
    notes: list[str]


def _client() -> openai.OpenAI:
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, content=_ANSWER, headers={"content-type": "application/json"})
    )
    return openai.OpenAI(
        api_key="bench", base_url="http://bench.invalid/v1", http_client=httpx2.Client(transport=transport)
    )


def run(*, quick: bool = False) -> InstrumentBenchResult:
    trials, repeat = (9, 3) if quick else (41, 5)
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(_Discard()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()], views=views())
    oi.instrument(tracer_provider=tp, meter_provider=mp, langchain=False)
    try:
        return _measure(trials, repeat)
    finally:
        oi.uninstrument()
        tp.shutdown()
        mp.shutdown()


def _measure(trials: int, repeat: int) -> InstrumentBenchResult:
    observer = oi.active_observer()
    assert observer is not None
    client = _client()
    wrapped = client.chat.completions.create
    bare: Callable[..., Any] = wrapped.__wrapped__  # type: ignore[attr-defined]  # the SDK's own method
    conv = inputs.conversation()
    fitter = observer.fitter(inputs.MODEL)

    def call(fn: Callable[..., Any], messages: list[dict[str, Any]]) -> Thunk:
        return lambda: fn(model=inputs.MODEL, messages=messages)

    def cold_instrumented() -> Thunk:
        fitter.clear_cache()  # a request never seen: every message is counted
        return call(wrapped, conv)

    def cold_measure() -> Thunk:
        fresh = new_fitter()
        return lambda: fresh.measure(conv)

    # One call per sample: the cache is emptied before each instrumented call.
    t = interleaved(
        {"bare": lambda: call(bare, conv), "instrumented": cold_instrumented, "measure": cold_measure},
        trials=trials * repeat,
    )
    added = max(0.0, t["instrumented"].median - t["bare"].median)
    cold = t["measure"].median
    figures = [
        Figure(
            SECTION,
            "added cost of a new request ÷ cold measure of it",
            f"{added / cold:.2f}×",
            f"≤ {COLD_TARGET:.2f}×",
            added / cold <= COLD_TARGET,
            f"added {fmt_seconds(added)} (instrumented {fmt_seconds(t['instrumented'].median)} − SDK alone "
            f"{fmt_seconds(t['bare'].median)}), cold measure of the {len(conv)}-message request "
            f"{fmt_seconds(cold)}",
        )
    ]

    # Later rounds: the history is counted already; each round brings two new messages.
    histories = {100: inputs.conversation(seed=3), 200: inputs.conversation(seed=4, n=200)}
    pairs = {h: iter(inputs.new_pairs(trials * repeat * 2 + 8, seed=10 + h)) for h in histories}
    for history in histories.values():
        wrapped(model=inputs.MODEL, messages=history)  # type: ignore[arg-type]  # round 1 counts the history

    def later(h: int, fn: Callable[..., Any]) -> Callable[[], Thunk]:
        def prepare() -> Thunk:
            return call(fn, histories[h] + next(pairs[h]))

        return prepare

    w = interleaved(
        {
            "bare100": later(100, bare),
            "inst100": later(100, wrapped),
            "bare200": later(200, bare),
            "inst200": later(200, wrapped),
        },
        trials=trials,
        repeat=repeat,
    )
    a100 = max(1e-9, w["inst100"].median - w["bare100"].median)
    a200 = max(1e-9, w["inst200"].median - w["bare200"].median)
    figures.append(
        Figure(
            SECTION,
            "later round's added cost, 200 ÷ 100 messages of history",
            f"{a200 / a100:.2f}×",
            f"≤ {LATER_TARGET}×",
            a200 / a100 <= LATER_TARGET,
            f"2 new messages of ~{inputs.TOKENS_PER_MESSAGE} tokens: added {fmt_seconds(a100)} at 100, "
            f"{fmt_seconds(a200)} at 200 (a history recounted would double it)",
        )
    )
    notes = [
        "Instrumentor: the real openai SDK against an in-process transport; spans through a "
        "BatchSpanProcessor, metrics aggregated by the SDK. The added cost includes the round's span "
        "and metric records."
    ]
    return InstrumentBenchResult(figures, notes)
