"""The zero-code instrumentor's cost: what wrapping an SDK call adds, network and SDK excluded.

The wrapper that otel-ctx puts around ``chat.completions.create`` is called with the
request an agent sends and a stand-in for the SDK's method that returns a real
``ChatCompletion`` at once, so what is timed is exactly what the wrapper adds: reading
the body, the measure, the round's span and metric records, the usage and calibration.

* a new request (the observer's token cache emptied before every call) against a cold
  measure of the same body by a fresh fitter: target ≤ 1.10× (the measure plus 10%);
* a conversation's later round (the history already counted, two new messages of ~340
  tokens) at 200 vs 100 messages of history: target ≤ 1.3× (the cost follows the new
  messages, not the history; recounting the history would double it);
* an agent's round wrapped, against the warm ``fit_request`` of the same request, on 100
  messages of text + 2 new and on 300 messages of tool calls and results + a new call and
  its result (context, no target: the OpenTelemetry SDK's own floor for a round, its span
  and three records, is larger than what a warm fit spends beyond the measure both make, so
  no wrapper can come within the fit; what otel-ctx is held to is its cost beside the
  instrumentation users would otherwise run, in bench.peer_bench); each is timed beside the
  warm measure of the same rounds and that floor (context); the same request sent again
  shows the fixed cost alone (context);

Every fitter here is the one an agent builds for the model it calls (its own encoding), as the
instrumentor's is: a fit with another encoding would count the same text at another speed.
* the real openai client against a Chat Completions server in another process on
  127.0.0.1, observed and not, paired: the added CPU end to end (context: the SDK's own
  work on the request varies by milliseconds from call to call).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from openai.types.chat import ChatCompletion
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

import otel_ctx.instrumentation as oi
from bench import fleet_bench, inputs
from bench.report import Figure
from bench.telemetry_bench import _Discard, local_server
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx import ContextFitter, names
from otel_ctx.instrumentation import _sdk
from otel_ctx.instrumentation._core import Observer
from otel_ctx.telemetry import views
from otel_ctx.telemetry._emitter import span_attributes

SECTION = "Instrumentor: what one wrapped SDK call adds (network and SDK excluded)"
COLD_TARGET = 1.10
LATER_TARGET = 1.3

_ANSWER = ChatCompletion.model_validate(
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
)


@dataclass
class InstrumentBenchResult:
    figures: list[Figure]
    notes: list[str]


#: History and new messages of an agent's round (the warm fit's workload: 100 + 2 messages).
ROUND_HISTORY = 100
#: Messages of an agent's tool-calling transcript before its round.
TOOL_HISTORY = 300
#: Trials of the loopback figure (each call costs the SDK tens of milliseconds).
LOOPBACK_TRIALS = 60


def model_fitter() -> ContextFitter:
    """A fitter for the model the bench's requests name, with that model's own encoding: the one the
    instrumentor measures with, so a wrapped call and a fit count the same tokens the same way."""
    return ContextFitter(inputs.POLICY, model=inputs.MODEL)


def _sdk_method(*args: Any, **kwargs: Any) -> ChatCompletion:
    return _ANSWER


def run(*, quick: bool = False) -> InstrumentBenchResult:
    trials, repeat = (9, 3) if quick else (41, 5)
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(_Discard()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()], views=views())
    oi.instrument(tracer_provider=tp, meter_provider=mp, langchain=False)
    try:
        return _measure(trials, repeat, tp, mp)
    finally:
        oi.uninstrument()
        tp.shutdown()
        mp.shutdown()


def _measure(trials: int, repeat: int, tp: TracerProvider, mp: MeterProvider) -> InstrumentBenchResult:
    observer = oi.active_observer()
    assert observer is not None
    # The very wrapper instrument() put on the OpenAI client's request method, fed the options
    # chat.completions.create hands it.
    wrapper = _sdk.request_wrapper(observer, _sdk.Sdk(_sdk.openai_route, (), (), (), ()), awaited=False)
    fitter = observer.fitter(inputs.MODEL)

    def call(messages: list[dict[str, Any]]) -> Thunk:
        body = {"model": inputs.MODEL, "messages": messages}
        options = SimpleNamespace(method="post", url="/chat/completions", json_data=body, extra_json=None)
        return lambda: wrapper(_sdk_method, None, (ChatCompletion, options), {"stream": False})

    conv = inputs.conversation()
    body = {"model": inputs.MODEL, "messages": conv}

    def cold_wrapped() -> Thunk:
        fitter.clear_cache()  # a request never seen: every message is counted
        return call(conv)

    def cold_measure() -> Thunk:
        fresh = model_fitter()
        return lambda: fresh.measure_request(body, provider="openai")

    # One call per sample: the cache is emptied before each wrapped call.
    t = interleaved({"wrapped": cold_wrapped, "measure": cold_measure}, trials=trials * repeat)
    added, cold = t["wrapped"].median, t["measure"].median
    figures = [
        Figure(
            SECTION,
            "added cost of a new request ÷ cold measure of it",
            f"{added / cold:.2f}×",
            f"≤ {COLD_TARGET:.2f}×",
            added / cold <= COLD_TARGET,
            f"wrapper {fmt_seconds(added)}, cold measure of the {len(conv)}-message request "
            f"{fmt_seconds(cold)}",
        )
    ]

    # Later rounds: the history is counted already; each round brings two new messages.
    histories = {100: inputs.conversation(seed=3), 200: inputs.conversation(seed=4, n=200)}
    pairs = {h: iter(inputs.new_pairs(trials * repeat + 8, seed=10 + h)) for h in histories}
    for history in histories.values():
        call(history)()  # round 1 counts the history

    def later(h: int) -> Callable[[], Thunk]:
        return lambda: call(histories[h] + next(pairs[h]))

    w = interleaved({"h100": later(100), "h200": later(200)}, trials=trials, repeat=repeat)
    a100, a200 = w["h100"].median, w["h200"].median
    figures.append(
        Figure(
            SECTION,
            "later round's added cost, 200 ÷ 100 messages of history",
            f"{a200 / a100:.2f}×",
            f"≤ {LATER_TARGET}×",
            a200 / a100 <= LATER_TARGET,
            f"2 new messages of ~{inputs.TOKENS_PER_MESSAGE} tokens: {fmt_seconds(a100)} at 100, "
            f"{fmt_seconds(a200)} at 200",
        )
    )
    figures.extend(_warm(call, trials, repeat, _floor(observer, tp, mp)))
    figures.append(_loopback(observer, trials, repeat))
    notes = [
        "Instrumentor: otel-ctx's own wrapper around chat.completions.create, called with a stand-in "
        "for the SDK method (a real ChatCompletion returned at once); spans through a "
        "BatchSpanProcessor, metrics aggregated by the SDK. Included: reading the body, the measure, "
        "the round's span and metrics, the usage and the calibration.",
        "Instrumented call on loopback: the real openai client (chat.completions.create) against a "
        "Chat Completions server in another process on 127.0.0.1, the same client observed and not "
        "(the instrumentor switched off between calls), trials interleaved; the added cost is the "
        "median of each trial's observed minus plain CPU time of this thread.",
    ]
    return InstrumentBenchResult(figures, notes)


def _round_cases(
    call: Callable[[list[dict[str, Any]]], Thunk],
    history: list[dict[str, Any]],
    observed: Iterator[list[dict[str, Any]]],
    fitted: Iterator[list[dict[str, Any]]],
) -> tuple[Callable[[], Thunk], Callable[[], Thunk]]:
    """An agent's next round, observed and fitted: the history seen already, new messages each.

    Both sides count the new messages (the observer to measure them, the fitter to fit them),
    so the ratio is what observing a round costs against what fitting it costs.
    """
    call(history)()
    fitter = model_fitter()
    fitter.fit_request({"model": inputs.MODEL, "messages": history}, provider="openai")

    def observe() -> Thunk:
        return call(history + next(observed))

    def fit() -> Thunk:
        body = {"model": inputs.MODEL, "messages": history + next(fitted)}
        return lambda: fitter.fit_request(body, provider="openai")

    return observe, fit


def _measure_case(history: list[dict[str, Any]], new: Iterator[list[dict[str, Any]]]) -> Callable[[], Thunk]:
    """The warm measure of the same rounds against the observer's own budget: the one measure an
    observed round must make, without the round's telemetry."""
    observer = oi.active_observer()
    assert observer is not None
    policy = observer.config.policy(observer.config.default_task_type, inputs.MODEL, None)
    fitter = model_fitter()
    fitter.measure_request({"model": inputs.MODEL, "messages": history}, provider="openai", policy=policy)

    def measure() -> Thunk:
        body = {"model": inputs.MODEL, "messages": history + next(new)}
        return lambda: fitter.measure_request(body, provider="openai", policy=policy)

    return measure


def _floor(observer: Observer, tp: TracerProvider, mp: MeterProvider) -> Callable[[], Thunk]:
    """What the OpenTelemetry SDK itself costs for one observed round, otel-ctx's work left out:
    a span with the attributes an observed round carries (its breakdown, then its usage), made
    current for the records, and the round's three measurements (utilization and fits when the
    call starts, the estimate's accuracy when its usage comes back), each with its exemplar."""
    fitter = model_fitter()
    result = fitter.measure_request(
        {"model": inputs.MODEL, "messages": inputs.conversation(seed=41, n=20)}, provider="openai"
    )
    breakdown = span_attributes(result, round_number=7, model=inputs.MODEL, mode=names.MODE_OBSERVE)
    breakdown.update({names.PROVIDER: "openai", names.FIGURE_SOURCE: names.FIGURE_REQUEST})
    usage = {
        names.USAGE_INPUT_TOKENS: 7_000,
        names.USAGE_OUTPUT_TOKENS: 40,
        names.USAGE_CACHED_INPUT_TOKENS: 0,
        names.USAGE_CACHE_CREATION_INPUT_TOKENS: 0,
        names.ESTIMATE_ACCURACY_RATIO: 1.04,
    }
    labels = {
        names.TASK_TYPE: observer.config.default_task_type,
        names.OUTCOME: names.OUTCOME_FIT,
        names.GEN_AI_REQUEST_MODEL: inputs.MODEL,
    }
    tracer = tp.get_tracer("bench.floor")
    meter = mp.get_meter("bench.floor")
    utilization = meter.create_histogram("bench_floor_utilization")
    fits = meter.create_counter("bench_floor_fits")
    accuracy = meter.create_histogram("bench_floor_accuracy")

    def round_() -> None:
        span = tracer.start_span(names.SPAN_OBSERVE, kind=SpanKind.INTERNAL)
        span.set_attributes(breakdown)
        context = trace.set_span_in_context(span)
        utilization.record(0.8, labels, context)
        fits.add(1, labels, context)
        span.set_attributes(usage)
        accuracy.record(1.04, labels, context)
        span.end()

    return lambda: round_


def _text_rounds(
    call: Callable[[list[dict[str, Any]]], Thunk], seed: int
) -> tuple[Callable[[], Thunk], Callable[[], Thunk]]:
    """Rounds of ROUND_HISTORY messages of ~340-token text, 2 new messages each."""
    history = inputs.conversation(seed=seed, n=ROUND_HISTORY)
    observed = iter(inputs.new_pairs(4_000, seed=seed + 1))
    fitted = iter(inputs.new_pairs(4_000, seed=seed + 2))
    return _round_cases(call, history, observed, fitted)


def _text_measure(seed: int) -> Callable[[], Thunk]:
    """:func:`_measure_case` of :func:`_text_rounds`'s rounds."""
    return _measure_case(
        inputs.conversation(seed=seed, n=ROUND_HISTORY), iter(inputs.new_pairs(4_000, seed=seed + 3))
    )


def _warm(
    call: Callable[[list[dict[str, Any]]], Thunk], trials: int, repeat: int, floor: Callable[[], Thunk]
) -> list[Figure]:
    """The wrapped call of a round against the warm fit of the same request; and the same request
    sent again (nothing new to count), which shows the fixed cost of a round's telemetry.

    Each is timed beside the warm measure of the same rounds and the SDK's own floor for a round
    (:func:`_floor`): what a wrapped call must pay at least, so what otel-ctx adds of its own is
    the rest.
    """
    tools = fleet_bench.tool_history(TOOL_HISTORY)
    workloads = {
        f"{ROUND_HISTORY} messages of history + 2 of ~{inputs.TOKENS_PER_MESSAGE} tokens": (
            "wrapped call of a round (+2 messages) ÷ warm fit of the same request",
            "text round",
            _text_rounds(call, seed=21),
            _text_measure(seed=21),
        ),
        f"{TOOL_HISTORY} messages of tool calls and results + a new call and its result": (
            f"wrapped call of a tool-calling round ({TOOL_HISTORY} messages) ÷ warm fit of it",
            "tool-calling round",
            _round_cases(
                call,
                tools,
                fleet_bench.tool_pairs(1_000_000),
                fleet_bench.tool_pairs(2_000_000),
            ),
            _measure_case(tools, fleet_bench.tool_pairs(3_000_000)),
        ),
    }
    figures = []
    for workload, (name, label, (observe, fit), measure) in workloads.items():
        r = interleaved(
            {"wrapped": observe, "fit": fit, "measure": measure, "floor": floor},
            trials=trials,
            repeat=repeat,
        )
        wrapped, fitted = r["wrapped"].median, r["fit"].median
        measured, least = r["measure"].median, r["floor"].median
        figures.append(
            Figure(
                SECTION,
                name,
                f"{wrapped / fitted:.2f}×",
                "(context)",
                None,
                f"wrapper {fmt_seconds(wrapped)} (measure, span with every attribute, metrics, "
                f"usage), fit_request {fmt_seconds(fitted)}; {workload}. "
                + _against_floor(wrapped, fitted, measured, least),
            )
        )
        figures.append(_own_share(label, wrapped, measured, least))
    conv = inputs.conversation()
    body = {"model": inputs.MODEL, "messages": conv}
    warm_fitter = model_fitter()
    warm_fitter.fit_request(body, provider="openai")
    call(conv)()
    same = interleaved(
        {
            "wrapped": lambda: call(conv),
            "fit": lambda: lambda: warm_fitter.fit_request(body, provider="openai"),
        },
        trials=trials,
        repeat=repeat,
    )
    wrapped, fitted = same["wrapped"].median, same["fit"].median
    figures.append(
        Figure(
            SECTION,
            "wrapped call, the same request again ÷ warm fit of it",
            f"{wrapped / fitted:.2f}×",
            "(context)",
            None,
            f"wrapper {fmt_seconds(wrapped)}, fit_request {fmt_seconds(fitted)}: nothing new to count, "
            "so this is a round's fixed cost (one measure, one span, the records) against a fit "
            "that only reads its cache",
        )
    )
    return figures


def _against_floor(wrapped: float, fitted: float, measured: float, least: float) -> str:
    """Why the wrapped call can or cannot come within the fit: what the SDK alone costs a round
    against what the fit spends beyond the measure both make."""
    margin = fitted - measured
    return (
        f"Warm measure of the same rounds {fmt_seconds(measured)}; the OpenTelemetry SDK's own floor "
        f"for the round's span and three measurements {fmt_seconds(least)}, against the "
        f"{fmt_seconds(max(0.0, margin))} a fit spends beyond that measure: the wrapped call can come "
        "within the fit only where the SDK's floor is below that margin"
    )


def _own_share(label: str, wrapped: float, measured: float, least: float) -> Figure:
    """The wrapped call against what it must pay: one measure and the SDK's floor for one round."""
    return Figure(
        SECTION,
        f"wrapped call ÷ (warm measure + SDK floor), {label}",
        f"{wrapped / (measured + least):.2f}×",
        "(context)",
        None,
        f"wrapper {fmt_seconds(wrapped)} = measure {fmt_seconds(measured)} + SDK floor "
        f"{fmt_seconds(least)} + otel-ctx's own bookkeeping {fmt_seconds(wrapped - measured - least)} "
        "(the round's number, task and budget, the run's ticket, the usage and calibration)",
    )


def _loopback(observer: Observer, trials: int, repeat: int) -> Figure:
    """The real openai client against a local server, observed and not: what the instrumentor adds
    to an agent's call, end to end, against the warm fit of the same request."""
    import openai

    with local_server("bench.loopback_provider") as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench", max_retries=0)

        def sdk_call(messages: list[dict[str, Any]]) -> Thunk:
            return lambda: client.chat.completions.create(model=inputs.MODEL, messages=messages)  # type: ignore[arg-type]

        def switched(on: bool, thunk: Thunk) -> Thunk:
            def run() -> object:
                observer.active = on
                try:
                    return thunk()
                finally:
                    observer.active = True

            return run

        observe, fit = _text_rounds(sdk_call, seed=31)
        plain_pairs = iter(inputs.new_pairs(4_000, seed=34))
        history = inputs.conversation(seed=31, n=ROUND_HISTORY)
        for _ in range(20):  # the connection pool and the server's threads warmed up
            sdk_call(history)()
        r = interleaved(
            {
                "observed": lambda: switched(True, observe()),
                "plain": lambda: switched(False, sdk_call(history + next(plain_pairs))),
                "fit": fit,
            },
            trials=LOOPBACK_TRIALS if trials > 9 else trials,
            repeat=repeat,
            # This thread's CPU: the server's process and the scheduler's moods are not the
            # agent's cost.
            clock=time.thread_time,
        )
        client.close()
    # Paired: each trial's observed call minus the plain call made next to it, so the drift of
    # a call that costs tens of milliseconds of the SDK's own work cancels out.
    diffs = sorted(o - p for o, p in zip(r["observed"].samples, r["plain"].samples, strict=True))
    added = statistics.median(diffs)
    q1, _, q3 = statistics.quantiles(diffs, n=4)
    fitted = r["fit"].median
    return Figure(
        SECTION,
        "instrumented SDK call on loopback: added CPU ÷ warm fit of the same request",
        f"{added / fitted:.2f}×",
        "(context)",
        None,
        f"+{fmt_seconds(added)} per call (paired, interquartile {fmt_seconds(q1)} to {fmt_seconds(q3)}) "
        f"on a call of {fmt_seconds(r['plain'].median)} of the SDK's own CPU; fit_request "
        f"{fmt_seconds(fitted)}; {ROUND_HISTORY} messages of history + 2 new, the real openai client "
        "to a server in another process. The SDK's own cost varies by milliseconds from call to "
        "call, so this end-to-end figure is context: the wrapped-call figure above is the measure",
    )
