"""The instrumentor with the real google-genai client against the fake provider's Gemini endpoints."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from google import genai
from google.genai import errors, types
from instrument_support import Instrumented, instrumented

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n

__all__ = ["instrumented"]  # the fixture, imported for pytest

MODEL = "gemini-2.5-flash"
CONTENTS: list[Any] = [
    {"role": "user", "parts": [{"text": "My oak shelf (order 88-1042) arrived cracked."}]},
    {"role": "model", "parts": [{"function_call": {"name": "get_order", "args": {"id": "88-1042"}}}]},
    {
        "role": "user",
        "parts": [{"function_response": {"name": "get_order", "response": {"output": "delivered"}}}],
    },
]
CONFIG = types.GenerateContentConfig(
    system_instruction="You are Sundry's support agent.",
    max_output_tokens=300,
    tools=[
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="get_order",
                    description="Look up an order by id.",
                    parameters_json_schema={"type": "object", "properties": {"id": {"type": "string"}}},
                )
            ]
        )
    ],
)


def client(fake: FakeProvider) -> genai.Client:
    return genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(
            base_url=fake.gemini_url, retry_options=types.HttpRetryOptions(attempts=1)
        ),
    )


def _calls(fake: FakeProvider) -> list[Callable[[], Any]]:
    c = client(fake)

    async def aio() -> Any:
        first = await c.aio.models.generate_content(model=MODEL, contents=CONTENTS, config=CONFIG)
        chunks = [ch async for ch in await c.aio.models.generate_content_stream(model=MODEL, contents="Hi")]
        return first, chunks

    return [
        lambda: c.models.generate_content(model=MODEL, contents=CONTENTS, config=CONFIG),
        lambda: list(
            c.models.generate_content_stream(model=f"models/{MODEL}", contents=CONTENTS, config=CONFIG)
        ),
        lambda: asyncio.run(aio()),
    ]


def test_request_bodies_are_byte_identical_with_and_without_instrumentation(
    fake_provider: FakeProvider,
) -> None:
    for call in _calls(fake_provider):
        call()
    plain = [(r.path, r.body) for r in fake_provider.requests]
    fake_provider.requests.clear()
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        for call in _calls(fake_provider):
            call()
    finally:
        oi.uninstrument()
    assert [(r.path, r.body) for r in fake_provider.requests] == plain
    assert len(cap.rounds()) == len(plain) == 4
    assert {s.attributes[n.PROVIDER] for s in cap.rounds()} == {"google"}  # type: ignore[index]


def test_every_request_is_a_round_with_its_usage_sync_async_and_streamed(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        Reply(input_tokens=400, cached_tokens=100),
        Reply(input_tokens=410),
        Reply(input_tokens=420),
        Reply(input_tokens=430),
    )
    response, chunks, (aresponse, achunks) = (call() for call in _calls(fake_provider))
    assert isinstance(response, types.GenerateContentResponse) and response.text == "Done."
    assert "".join(ch.text for ch in chunks) == "Done."
    assert aresponse.text == "Done." and "".join(ch.text for ch in achunks) == "Done."
    rounds = instrumented.rounds()
    assert [s.attributes[n.USAGE_INPUT_TOKENS] for s in rounds] == [400, 410, 420, 430]  # type: ignore[index]
    first = rounds[0].attributes
    assert first[n.USAGE_CACHED_INPUT_TOKENS] == 100  # type: ignore[index]
    assert first[n.CONTEXT_LENGTH] == 1_048_576  # the shipped model table's Gemini window  # type: ignore[index]
    assert first[n.MODEL] == MODEL  # type: ignore[index]
    assert rounds[1].attributes[n.MODEL] == MODEL  # "models/..." read as the bare id  # type: ignore[index]
    assert first[n.RESERVED_OUTPUT] == 300  # the config's max_output_tokens  # type: ignore[index]
    assert first[n.ROUND] == 2  # one model turn in the contents  # type: ignore[index]
    assert first[n.SYSTEM_PROMPT_TOKENS] > 0 and first[n.TOOL_SCHEMA_TOKENS] > 0  # type: ignore[index]
    observer = oi.active_observer()
    assert observer is not None and observer.fitter(MODEL).calibration > 1.0


def test_automatic_function_calling_is_one_round_per_request(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    def get_order(id: str) -> str:
        """Look up an order by id."""
        return "delivered"

    fake_provider.queue(
        Reply(tool_calls=[("get_order", '{"id": "88-1042"}')]), Reply(text="It was delivered.")
    )
    c = client(fake_provider)  # kept: a client that is collected closes its connections
    with otel_ctx.task("returns", conversation_id="afc-1"):
        response = c.models.generate_content(
            model=MODEL, contents="Where is 88-1042?", config=types.GenerateContentConfig(tools=[get_order])
        )
    assert response.text == "It was delivered."
    first, second = instrumented.rounds()
    assert [first.attributes[n.ROUND], second.attributes[n.ROUND]] == [1, 2]  # type: ignore[index]
    # The second request carries the call and its answer: it is measured as sent.
    assert second.attributes[n.ESTIMATED_TOKENS] > first.attributes[n.ESTIMATED_TOKENS]  # type: ignore[index]


def test_provider_errors_reach_the_caller_unchanged(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(status=400), Reply(status=500))
    c = client(fake_provider)
    with pytest.raises(errors.ClientError) as info:
        c.models.generate_content(model=MODEL, contents="Hi")
    assert info.value.code == 400
    with pytest.raises(errors.ServerError):
        list(c.models.generate_content_stream(model=MODEL, contents="Hi"))
    rounds = instrumented.rounds()
    assert len(rounds) == 2
    assert all(s.status.status_code.name == "ERROR" for s in rounds)


def test_an_abandoned_stream_ends_its_round(instrumented: Instrumented, fake_provider: FakeProvider) -> None:
    fake_provider.queue(Reply(text="one two three four", input_tokens=321))
    c = client(fake_provider)
    stream = c.models.generate_content_stream(model=MODEL, contents="Hi")
    next(stream)
    del stream
    gc.collect()
    (span,) = instrumented.rounds()
    assert span.attributes[n.USAGE_INPUT_TOKENS] == 321  # type: ignore[index]


def test_a_failure_inside_otel_ctx_never_reaches_the_agent(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_ctx.instrumentation import _google_genai as google_genai

    def broken(metadata: Any) -> Any:
        raise RuntimeError("injected failure inside otel-ctx")

    monkeypatch.setattr(google_genai, "google_usage", broken)
    c = client(fake_provider)
    assert c.models.generate_content(model=MODEL, contents="Hi").text == "Done."
    assert "".join(ch.text for ch in c.models.generate_content_stream(model=MODEL, contents="Hi")) == "Done."
    assert len(instrumented.rounds()) == 2
    assert all(n.USAGE_INPUT_TOKENS not in (s.attributes or {}) for s in instrumented.rounds())


def test_uninstrument_restores_the_sdks_own_methods() -> None:
    from google.genai import models

    before = {m: models.Models.__dict__[m] for m in ("_generate_content", "_generate_content_stream")}
    oi.instrument(langchain=False)
    assert all(models.Models.__dict__[m] is not f for m, f in before.items())
    oi.uninstrument()
    assert all(models.Models.__dict__[m] is f for m, f in before.items())


def test_a_chat_session_is_observed_request_by_request(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    c = client(fake_provider)
    chat = c.chats.create(model=MODEL, config=types.GenerateContentConfig(system_instruction="Be kind."))
    chat.send_message("Where is my parcel?")
    chat.send_message("And the invoice?")
    first, second = instrumented.rounds()
    assert [first.attributes[n.ROUND], second.attributes[n.ROUND]] == [1, 2]  # type: ignore[index]
    assert second.attributes[n.ESTIMATED_TOKENS] > first.attributes[n.ESTIMATED_TOKENS]  # type: ignore[index]


def test_a_vertex_clients_requests_are_counted_as_vertex_bills(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    """Vertex bills no token per content (the Gemini API does): the same five contents are
    estimated that many tokens lower through a Vertex client, and sent byte for byte alike."""
    contents = [
        types.Content(role="user" if k % 2 == 0 else "model", parts=[types.Part(text=f"Message {k}.")])
        for k in range(5)
    ]
    vertex = genai.Client(
        vertexai=True,
        api_key="test-key",
        http_options=types.HttpOptions(
            base_url=fake_provider.gemini_url, retry_options=types.HttpRetryOptions(attempts=1)
        ),
    )
    fake_provider.queue(Reply(input_tokens=30), Reply(input_tokens=25))
    api = client(fake_provider)
    api.models.generate_content(model=MODEL, contents=contents)
    vertex.models.generate_content(model=MODEL, contents=contents)
    api_round, vertex_round = (s.attributes or {} for s in instrumented.rounds())
    assert api_round[n.ESTIMATED_TOKENS] - vertex_round[n.ESTIMATED_TOKENS] == 5  # type: ignore[operator]
    api_body, vertex_body = (json.loads(r.body) for r in fake_provider.requests)
    assert api_body["contents"] == vertex_body["contents"]
