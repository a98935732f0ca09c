"""The anthropic SDK tracing itself: its own call span is the parent of the round, and annotated.

The SDK opens a ``CLIENT`` span per call (``anthropic.messages.create``) and sends that span's trace
context with the request. The round nests under it exactly as under a GenAI instrumentation's span,
with the real SDK, its tracing on, against the fake provider on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fake_provider import FakeProvider, Reply
from instrument_support import ANTHROPIC_MESSAGES, Instrumented
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from otlp_capture import decode, receiver, value

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n
from otel_ctx.instrumentation._sdk import request_layer

SDK_SPAN = "anthropic.messages.create"
MODEL = "claude-sonnet-4-6"
KINDS = ["create", "create-stream", "stream-helper"]

__all__ = ["receiver"]  # the fixture, imported for pytest


def _client(fake: FakeProvider, provider: TracerProvider | None, *, use_async: bool) -> Any:
    option: Any = {"tracer_provider": provider} if provider is not None else False
    cls = anthropic.AsyncAnthropic if use_async else anthropic.Anthropic
    return cls(base_url=fake.anthropic_url, api_key="test-key", max_retries=0, open_telemetry=option)


def _dump(obj: Any) -> Any:
    return [_dump(o) for o in obj] if isinstance(obj, list) else obj.model_dump(mode="json")


def _call(client: Any, kind: str, *, use_async: bool) -> Callable[[], Any]:
    """One call of ``kind``, consumed the way agents do; returns what the agent got, as JSON."""
    args: dict[str, Any] = {"model": MODEL, "max_tokens": 300, "messages": ANTHROPIC_MESSAGES}

    def sync() -> Any:
        if kind == "create":
            message = client.messages.create(**args)
            assert type(message) is anthropic.types.Message
            return _dump(message)
        if kind == "create-stream":
            stream = client.messages.create(**args, stream=True)
            assert isinstance(stream, anthropic.Stream)
            return _dump(list(stream))
        with client.messages.stream(**args) as s:
            return _dump(s.get_final_message())

    async def run_async() -> Any:
        if kind == "create":
            message = await client.messages.create(**args)
            assert type(message) is anthropic.types.Message
            return _dump(message)
        if kind == "create-stream":
            stream = await client.messages.create(**args, stream=True)
            assert isinstance(stream, anthropic.AsyncStream)
            return _dump([event async for event in stream])
        async with client.messages.stream(**args) as s:
            return _dump(await s.get_final_message())

    return run_async if use_async else sync


def _twice(call: Callable[[], Any], *, use_async: bool) -> list[Any]:
    """Two calls in turn (an async client's connections belong to one event loop)."""
    if not use_async:
        return [call(), call()]

    async def both() -> list[Any]:
        return [await call(), await call()]

    return asyncio.run(both())


def _run(
    fake: FakeProvider, kind: str, *, use_async: bool, instrument: bool
) -> tuple[Instrumented, list[Any]]:
    """Two calls of ``kind`` in one task block, the client's spans on the capture's provider."""
    cap = Instrumented()
    if instrument:
        oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        call = _call(_client(fake, cap.tracer_provider, use_async=use_async), kind, use_async=use_async)
        with otel_ctx.task("returns", conversation_id="conv-sdk-tracing"):
            got = _twice(call, use_async=use_async)
    finally:
        if instrument:
            oi.uninstrument()
    return cap, got


def _traceparent(span: ReadableSpan) -> str:
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{c.trace_flags:02x}"


def _by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_sdks_own_span_is_the_rounds_parent_and_carries_the_context(
    fake_provider: FakeProvider, kind: str, use_async: bool
) -> None:
    cap, _ = _run(fake_provider, kind, use_async=use_async, instrument=True)
    rounds = cap.rounds()
    calls = cap.spans(SDK_SPAN)
    (run,) = cap.spans(n.SPAN_RUN)
    assert len(rounds) == len(calls) == 2
    assert [r.attributes[n.ROUND] for r in rounds] == [1, 2]  # type: ignore[index]
    sdk_spans = _by_id(calls)
    for budget in rounds:
        # The round runs inside the SDK's span, which sits where the agent made the call.
        assert budget.parent is not None and budget.parent.span_id in sdk_spans
        call = sdk_spans[budget.parent.span_id]
        assert call.parent is not None and call.parent.span_id == run.context.span_id
        assert budget.context.trace_id == call.context.trace_id == run.context.trace_id
        # The SDK's span is annotated like a GenAI instrumentation's: the window and how full it is.
        attrs = call.attributes or {}
        window = budget.attributes[n.CONTEXT_LENGTH]  # type: ignore[index]
        assert attrs[n.GEN_AI_CONTEXT_WINDOW_SIZE] == window
        estimated = budget.attributes[n.ESTIMATED_TOKENS]  # type: ignore[index]
        assert attrs[n.GEN_AI_CONTEXT_UTILIZATION] == pytest.approx(estimated / window)  # type: ignore[operator]
        assert 0 < attrs[n.GEN_AI_CONTEXT_UTILIZATION] < 1  # type: ignore[operator]
        # The SDK's span keeps the usage and the model, the round none of them: counted once.
        assert attrs[n.GEN_AI_USAGE_INPUT_TOKENS] > 0  # type: ignore[operator]
        keys = set(budget.attributes or {})
        assert not any(k.startswith("gen_ai.usage.") for k in keys), keys
        assert n.GEN_AI_REQUEST_MODEL not in keys
        # The provider's usage still closes the loop on the round.
        assert budget.attributes[n.USAGE_INPUT_TOKENS] > 0  # type: ignore[index, operator]
    # What the provider receives names the SDK's span, never the round inside it.
    sent = [r.headers.get("traceparent") for r in fake_provider.requests]
    assert len(sent) == 2 and set(sent) == {_traceparent(c) for c in calls}


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_with_the_sdks_tracing_on_requests_and_responses_are_unchanged(kind: str, use_async: bool) -> None:
    outcomes = []
    for instrument in (False, True):
        fake = FakeProvider().start()
        try:
            cap, got = _run(fake, kind, use_async=use_async, instrument=instrument)
            sent = [
                (
                    r.path,
                    r.query,
                    r.body,
                    {k: v for k, v in r.headers.items() if k not in ("traceparent", "host")},
                )
                for r in fake.requests
            ]
            parents = {s.parent.span_id if s.parent else None for s in cap.spans(SDK_SPAN)}
            outcomes.append((sent, got, parents, len(cap.rounds())))
        finally:
            fake.stop()
    (plain_sent, plain_got, plain_parents, none), (sent, got, parents, rounds) = outcomes
    assert (none, rounds) == (0, 2)
    assert sent == plain_sent  # byte for byte; every header but the trace context and the port
    assert got == plain_got  # what the agent reads, event for event
    assert len(plain_parents) == len(parents) == 1  # the SDK's spans sit under the run either way


@pytest.mark.parametrize("kind", KINDS)
def test_with_the_sdks_tracing_off_the_round_is_the_calls_only_span(
    fake_provider: FakeProvider, kind: str
) -> None:
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        call = _call(_client(fake_provider, None, use_async=False), kind, use_async=False)
        with otel_ctx.task("returns", conversation_id="conv-untraced"):
            call()
    finally:
        oi.uninstrument()
    (budget,) = cap.rounds()
    (run,) = cap.spans(n.SPAN_RUN)
    assert cap.spans(SDK_SPAN) == []
    assert budget.parent is not None and budget.parent.span_id == run.context.span_id
    assert [r.headers.get("traceparent") for r in fake_provider.requests] == [None]


@pytest.mark.parametrize("status", [400, 500])
def test_a_failed_call_fails_the_sdks_span_and_the_round_inside_it(
    fake_provider: FakeProvider, status: int
) -> None:
    fake_provider.queue(Reply(status=status))
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        client = _client(fake_provider, cap.tracer_provider, use_async=False)
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(model=MODEL, max_tokens=5, messages=ANTHROPIC_MESSAGES)
        assert caught.value.status_code == status
    finally:
        oi.uninstrument()
    (budget,) = cap.rounds()
    (call,) = cap.spans(SDK_SPAN)
    assert budget.parent is not None and budget.parent.span_id == call.context.span_id
    assert not budget.status.is_ok and not call.status.is_ok
    assert (call.attributes or {})[n.GEN_AI_CONTEXT_WINDOW_SIZE] == budget.attributes[n.CONTEXT_LENGTH]  # type: ignore[index]


def test_the_request_layer_is_the_one_inside_the_sdks_own_call_span() -> None:
    class Traced:
        def request(self, cast_to: Any, options: Any) -> Any: ...

        def _request(self, cast_to: Any, options: Any, *, stream: bool = False, call: Any = None) -> Any: ...

    class Retrying:  # one attempt, retried by calling itself: the outer layer runs once per call
        def request(self, cast_to: Any, options: Any) -> Any: ...

        def _request(self, cast_to: Any, options: Any, retries_taken: int = 0) -> Any: ...

    class Plain:
        def request(self, cast_to: Any, options: Any) -> Any: ...

    assert [request_layer(c) for c in (Traced, Retrying, Plain)] == ["_request", "request", "request"]
    # The installed SDKs: anthropic traces itself, openai does not.
    assert request_layer(anthropic._base_client.SyncAPIClient) == "_request"
    assert request_layer(anthropic._base_client.AsyncAPIClient) == "_request"
    assert request_layer(openai._base_client.SyncAPIClient) == "request"
    assert request_layer(openai._base_client.AsyncAPIClient) == "request"


#: An unmodified agent: a default client, whose tracing goes to the global tracer provider.
AGENT = """
import os, anthropic
client = anthropic.Anthropic(base_url=os.environ["FAKE_ANTHROPIC_URL"], api_key="test-key", max_retries=0)
messages = [{"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."}]
client.messages.create(model="claude-sonnet-4-6", max_tokens=300, messages=messages)
with client.messages.stream(model="claude-sonnet-4-6", max_tokens=300, messages=messages) as s:
    print(s.get_final_text())
"""


def test_under_opentelemetry_instrument_the_sdks_span_on_the_global_provider_holds_the_round(
    receiver: tuple[int, Path], fake_provider: FakeProvider
) -> None:
    port, out = receiver
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ANTHROPIC_"))}
    env.update(
        FAKE_ANTHROPIC_URL=fake_provider.anthropic_url,
        OTEL_SERVICE_NAME="zero-code-anthropic",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_CTX_LANGCHAIN="false",
    )
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    proc = subprocess.run(
        [str(instrument), sys.executable, "-c", AGENT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    deadline = time.monotonic() + 20
    while True:
        traces, _, _ = decode(out)
        spans = [s for t in traces for rs in t.resource_spans for ss in rs.scope_spans for s in ss.spans]
        rounds = [s for s in spans if s.name == n.SPAN_OBSERVE]
        calls = {s.span_id: s for s in spans if s.name == SDK_SPAN}
        if (len(rounds) == 2 and len(calls) == 2) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(rounds) == len(calls) == 2
    for budget in rounds:
        call = calls[budget.parent_span_id]
        attrs = {a.key: value(a.value) for a in call.attributes}
        assert attrs[n.GEN_AI_CONTEXT_WINDOW_SIZE] > 0 and 0 < attrs[n.GEN_AI_CONTEXT_UTILIZATION] < 1
    sent = {r.headers["traceparent"].split("-")[2] for r in fake_provider.requests}
    assert sent == {span_id.hex() for span_id in calls}
