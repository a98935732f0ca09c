"""otel-ctx beside the instrumentation users would pick instead: opentelemetry-instrumentation-openai-v2.

Both run as ``opentelemetry-instrument`` runs them: tracer, meter and logger providers built
the way opentelemetry-distro's configurator builds them (a resource, a BatchSpanProcessor, a
PeriodicExportingMetricReader, a BatchLogRecordProcessor), with exporters that discard so
nothing leaves the machine. The real openai client calls ``chat.completions.create`` against
a Chat Completions server in another process on 127.0.0.1 (bench.loopback_provider), and
what is timed is this thread's CPU per call: the server's work and the SDK's export threads
are not the agent's cost.

Each trial makes three calls side by side, in rotating order: the bare client, the client
with otel-ctx instrumented, the client with openai-v2 instrumented. Each instrumentor is put
on before its call and taken off after it (nothing of one is left for the other or for the
bare call), and the added CPU is the median over trials of the instrumented call minus the
bare call of the same trial, so the drift of a call that costs the SDK milliseconds cancels.

* a later round of a tool-calling agent (the 101-message transcript of inputs.tool_transcript
  with its eight tool definitions, plus a new tool call and its result), otel-ctx having seen
  the round before: otel-ctx's added CPU against openai-v2's, target ≤ 0.5×;
* the first call of that conversation (nothing seen before): otel-ctx's added CPU against one
  tiktoken pass of the new messages in the model's own encoding (the least any count of them
  costs), target ≤ 1.1×; openai-v2's added CPU is shown beside it.

openai-v2 runs with its defaults (no message content captured): the configuration it ships with
and the least it does. Either way it writes a log record per message of the request, which is
where its cost on a long transcript goes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.instrumentation.version import __version__ as auto_instrumentation_version
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.semconv.resource import ResourceAttributes

import otel_ctx.instrumentation as oi
from bench import inputs
from bench.report import Figure
from bench.telemetry_bench import _Discard, local_server
from bench.timing import Thunk, Timing, fmt_seconds, interleaved
from otel_ctx._encodings import encoding_name_for_model, get_encoding

SECTION = "Against the peer: otel-ctx beside opentelemetry-instrumentation-openai-v2 (real client, loopback)"
#: otel-ctx's added CPU on a later round, against openai-v2's on the same round.
LATER_TARGET = 0.5
#: otel-ctx's added CPU on a conversation's first call, against one tiktoken pass of its messages.
FIRST_TARGET = 1.1
#: The conversation's tool calls and results before the timed round (101 messages with the ticket).
TOOL_CALLS = 50
#: Trials of each case: the SDK's own CPU for a call varies by milliseconds, the added CPU is
#: about one, so its median needs a couple of hundred paired trials to settle within ~10%.
TRIALS = 201

BARE, OTEL_CTX, OPENAI_V2 = "bare", "otel-ctx", "openai-v2"


@dataclass
class PeerBenchResult:
    figures: list[Figure]
    notes: list[str]


class _DiscardMetrics(MetricExporter):
    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


class _DiscardLogs(LogRecordExporter):
    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


@dataclass
class Providers:
    """The three SDK providers of an ``opentelemetry-instrument`` process."""

    tracer: TracerProvider
    meter: MeterProvider
    logger: LoggerProvider

    def shutdown(self) -> None:
        self.tracer.shutdown()
        self.meter.shutdown()
        self.logger.shutdown()


def distro_providers() -> Providers:
    """What opentelemetry-distro's configurator builds (``_initialize_components``), with discarding
    exporters in place of OTLP: the providers are not made global, so the rest of the bench is
    left as it was."""
    resource = Resource.create({ResourceAttributes.TELEMETRY_AUTO_VERSION: auto_instrumentation_version})
    tracer = TracerProvider(resource=resource, id_generator=RandomIdGenerator())
    tracer.add_span_processor(BatchSpanProcessor(_Discard()))
    meter = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(_DiscardMetrics())]
    )
    logger = LoggerProvider(resource=resource)
    logger.add_log_record_processor(BatchLogRecordProcessor(_DiscardLogs()))
    return Providers(tracer, meter, logger)


class _Instrumented:
    """Which instrumentor is on: at most one, switched between calls (never while one is timed).

    A switch always takes the current one off first, so each otel-ctx call starts from a fresh
    observer that has seen only what the case showed it, and no wrapper outlives its call.
    """

    def __init__(self, providers: Providers) -> None:
        self.providers = providers
        self.current = BARE
        self.openai_v2 = OpenAIInstrumentor()  # type: ignore[no-untyped-call]

    def switch(self, to: str) -> None:
        if self.current == OTEL_CTX:
            oi.uninstrument()
        elif self.current == OPENAI_V2:
            self.openai_v2.uninstrument()
        self.current = BARE
        p = self.providers
        if to == OTEL_CTX:
            oi.instrument(tracer_provider=p.tracer, meter_provider=p.meter, langchain=False)
        elif to == OPENAI_V2:
            self.openai_v2.instrument(
                tracer_provider=p.tracer, meter_provider=p.meter, logger_provider=p.logger
            )
        self.current = to


def _paired(timings: dict[str, Timing], case: str) -> tuple[float, float, float]:
    """Median of the case's CPU minus the bare call's in the same trial, and its quartiles."""
    diffs = [c - b for c, b in zip(timings[case].samples, timings[BARE].samples, strict=True)]
    if len(diffs) < 4:  # a smoke run: no quartiles to speak of
        return statistics.median(diffs), min(diffs), max(diffs)
    q1, median, q3 = statistics.quantiles(diffs, n=4)
    return median, q1, q3


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of the messages as a counter meets it: each content, each tool call's name and arguments."""
    out = []
    for m in messages:
        if isinstance(m.get("content"), str):
            out.append(m["content"])
        for call in m.get("tool_calls") or ():
            out += [call["function"]["name"], call["function"]["arguments"]]
    return out


def run(*, quick: bool = False, trials: int | None = None) -> PeerBenchResult:
    """Both cases, ``trials`` trials each (201; 9 with ``quick``): about a minute on 2 shared cores,
    each trial some ten calls of the SDK's ~20 ms of CPU on this transcript."""
    trials = trials or (9 if quick else TRIALS)
    providers = distro_providers()
    switch = _Instrumented(providers)
    try:
        return _measure(switch, trials)
    finally:
        switch.switch(BARE)
        providers.shutdown()


def _measure(switch: _Instrumented, trials: int) -> PeerBenchResult:
    import openai

    model = inputs.MODEL
    tools = inputs.tool_definitions()
    history = inputs.tool_transcript(seed=4, calls=TOOL_CALLS)
    # Each case's own next rounds, alike in size, so no case sends a request another has sent.
    rounds = {
        case: iter(inputs.tool_rounds(trials + 4, seed=seed))
        for case, seed in ((BARE, 51), (OTEL_CTX, 52), (OPENAI_V2, 53))
    }
    encoding_name = encoding_name_for_model(model)
    assert encoding_name is not None
    encode = get_encoding(encoding_name).encode_ordinary
    new_texts = _texts(history)

    with local_server("bench.loopback_provider") as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench", max_retries=0)

        def call(messages: list[dict[str, Any]]) -> Thunk:
            return lambda: client.chat.completions.create(model=model, messages=messages, tools=tools)  # type: ignore[arg-type]

        for _ in range(10):  # the connection pool, the server's threads and both wrappers warmed up
            for case in (OTEL_CTX, OPENAI_V2, BARE):
                switch.switch(case)
                call(history)()

        def first(case: str) -> Callable[[], Thunk]:
            def prepare() -> Thunk:
                switch.switch(case)  # a fresh otel-ctx: nothing of this conversation seen
                return call(history)

            return prepare

        def later(case: str) -> Callable[[], Thunk]:
            pending: Iterator[list[dict[str, Any]]] = rounds[case]

            def prepare() -> Thunk:
                switch.switch(case)
                # The round before, made by every case alike: what otel-ctx has seen of the
                # conversation, and the same garbage and warm caches before each timed call.
                call(history)()
                return call(history + next(pending))

            return prepare

        def tiktoken_pass() -> Thunk:
            switch.switch(BARE)
            return lambda: [encode(t) for t in new_texts]

        clock = time.thread_time
        f = interleaved(
            {
                BARE: first(BARE),
                OTEL_CTX: first(OTEL_CTX),
                OPENAI_V2: first(OPENAI_V2),
                "tiktoken": tiktoken_pass,
            },
            trials=trials,
            clock=clock,
        )
        r = interleaved(
            {BARE: later(BARE), OTEL_CTX: later(OTEL_CTX), OPENAI_V2: later(OPENAI_V2)},
            trials=trials,
            clock=clock,
        )
        switch.switch(BARE)
        client.close()

    ours, ours_q1, ours_q3 = _paired(r, OTEL_CTX)
    peer, peer_q1, peer_q3 = _paired(r, OPENAI_V2)
    first_ours, first_q1, first_q3 = _paired(f, OTEL_CTX)
    first_peer, _, _ = _paired(f, OPENAI_V2)
    one_pass = f["tiktoken"].median
    workload = (
        f"{len(history)} messages ({TOOL_CALLS} tool calls and their ~300-token results) and "
        f"{len(tools)} tool definitions"
    )
    figures = [
        Figure(
            SECTION,
            "later round: otel-ctx's added CPU ÷ openai-v2's",
            f"{ours / peer:.2f}×",
            f"≤ {LATER_TARGET}×",
            ours / peer <= LATER_TARGET,
            f"otel-ctx +{fmt_seconds(ours)} (interquartile {fmt_seconds(ours_q1)} to "
            f"{fmt_seconds(ours_q3)}), openai-v2 +{fmt_seconds(peer)} (interquartile "
            f"{fmt_seconds(peer_q1)} to {fmt_seconds(peer_q3)}) on a bare call of "
            f"{fmt_seconds(r[BARE].median)} of the SDK's own CPU; {workload} + a new call and its "
            "result, otel-ctx having seen the round before",
        ),
        Figure(
            SECTION,
            "first call: otel-ctx's added CPU ÷ one tiktoken pass of its messages",
            f"{first_ours / one_pass:.2f}×",
            f"≤ {FIRST_TARGET}×",
            first_ours / one_pass <= FIRST_TARGET,
            f"otel-ctx +{fmt_seconds(first_ours)} (interquartile {fmt_seconds(first_q1)} to "
            f"{fmt_seconds(first_q3)}), one pass {fmt_seconds(one_pass)} ({encoding_name} "
            "encode_ordinary of each message's content and each tool call's name and arguments; the "
            "tool definitions, which otel-ctx counts too, left out); openai-v2 "
            f"+{fmt_seconds(first_peer)}; bare call {fmt_seconds(f[BARE].median)}; {workload}, "
            "nothing of the conversation seen before",
        ),
    ]
    notes = [
        "Against the peer: opentelemetry-instrumentation-openai-v2 (its defaults: no message content) "
        "and otel-ctx, each instrumented for its call and uninstrumented after it, on the providers "
        "opentelemetry-distro's configurator builds (discarding exporters); the real openai client "
        "to a Chat Completions server in another process; added CPU = this thread's CPU for the "
        "instrumented call minus the bare call of the same trial, median over trials.",
    ]
    return PeerBenchResult(figures, notes)
