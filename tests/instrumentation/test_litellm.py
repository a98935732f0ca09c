"""The instrumentor with the real litellm against the fake provider: ``openai/…`` and ``anthropic/…``
models through ``completion`` / ``acompletion`` / ``responses`` / ``aresponses``, plain and streamed."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled price map: no download

import asyncio
import json
from collections.abc import Callable
from typing import Any

import litellm
import pytest
from fake_provider import FakeProvider, Reply
from instrument_support import Instrumented, instrumented

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx import names as n
from otel_ctx.adapters._gemini_from_chat import gemini_body

__all__ = ["instrumented"]  # the fixture, imported for pytest

GPT = "openai/gpt-4o"
CLAUDE = "anthropic/claude-sonnet-4-5"
MESSAGES = [
    {"role": "system", "content": "You are Sundry's support agent."},
    {"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."},
]


@pytest.fixture(autouse=True)
def _fresh_clients() -> None:
    litellm.in_memory_llm_clients_cache.flush_cache()


def _where(fake: FakeProvider, model: str) -> dict[str, Any]:
    url = fake.openai_url if model.startswith("openai/") else fake.anthropic_url
    return {"api_base": url, "api_key": "test-key", "num_retries": 0}


def _calls(fake: FakeProvider) -> list[Callable[[], Any]]:
    """One call of every kind, consumed the way agents do; each sends one request."""
    gpt, claude = _where(fake, GPT), _where(fake, CLAUDE)

    async def aio() -> Any:
        first = await litellm.acompletion(model=GPT, messages=MESSAGES, **gpt)
        stream = await litellm.acompletion(
            model=CLAUDE, messages=MESSAGES, max_tokens=200, stream=True, **claude
        )
        chunks = [c async for c in stream]
        events = [e async for e in await litellm.aresponses(model=GPT, input="Hello", stream=True, **gpt)]
        return first, chunks, events

    return [
        lambda: litellm.completion(model=GPT, messages=MESSAGES, max_tokens=300, **gpt),
        lambda: litellm.completion(
            CLAUDE, MESSAGES, max_tokens=200, **claude
        ),  # positional, as LiteLLM allows
        lambda: list(
            litellm.completion(
                model=GPT, messages=MESSAGES, stream=True, stream_options={"include_usage": True}, **gpt
            )
        ),
        lambda: list(
            litellm.completion(model=CLAUDE, messages=MESSAGES, max_tokens=200, stream=True, **claude)
        ),
        lambda: litellm.responses(model=GPT, input="Hello", instructions="Be kind.", **gpt),
        lambda: litellm.responses(model=CLAUDE, input="Hello", max_output_tokens=200, **claude),
        lambda: asyncio.run(aio()),
    ]


def _bodies(fake: FakeProvider) -> list[tuple[str, Any]]:
    return [(r.path, r.body) for r in fake.requests]


def test_one_round_per_request_and_byte_identical_requests_with_and_without_instrumentation(
    fake_provider: FakeProvider,
) -> None:
    for call in _calls(fake_provider):
        call()
    plain = _bodies(fake_provider)
    fake_provider.requests.clear()
    # LiteLLM keeps its SDK clients: new ones, built on the instrumented SDK, so the openai
    # SDK's wrappers really are on the path of openai/ models and must stand down.
    litellm.in_memory_llm_clients_cache.flush_cache()
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        for call in _calls(fake_provider):
            call()
    finally:
        oi.uninstrument()
    assert _bodies(fake_provider) == plain
    # openai/ models go through the openai SDK, responses for anthropic/ through completion:
    # still exactly one round per request sent.
    assert len(cap.rounds()) == len(plain) == 9


def test_the_dialect_is_litellms_and_the_model_is_the_one_it_routes_to(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        Reply(input_tokens=400, cached_tokens=100), Reply(input_tokens=350), Reply(input_tokens=90)
    )
    with otel_ctx.task("returns", conversation_id="lite-1"):
        litellm.completion(model=GPT, messages=MESSAGES, max_tokens=300, **_where(fake_provider, GPT))
        litellm.completion(model=CLAUDE, messages=MESSAGES, max_tokens=200, **_where(fake_provider, CLAUDE))
        litellm.responses(model=CLAUDE, input="Hello", max_output_tokens=200, **_where(fake_provider, CLAUDE))
    gpt, claude, responses = (s.attributes or {} for s in instrumented.rounds())
    assert (gpt[n.PROVIDER], gpt[n.ROUTED_PROVIDER], gpt[n.MODEL]) == ("openai", "openai", "gpt-4o")
    assert (claude[n.PROVIDER], claude[n.ROUTED_PROVIDER], claude[n.MODEL]) == (
        "openai",
        "anthropic",
        "claude-sonnet-4-5",
    )
    assert (responses[n.PROVIDER], responses[n.ROUTED_PROVIDER]) == ("openai-responses", "anthropic")
    assert [gpt[n.ROUND], claude[n.ROUND], responses[n.ROUND]] == [1, 2, 3]
    # The routed model's window (the shipped table), and the request's own output limit.
    assert claude[n.CONTEXT_LENGTH] == 200_000 and claude[n.RESERVED_OUTPUT] == 200
    assert gpt[n.CONTEXT_LENGTH] == 128_000 and gpt[n.RESERVED_OUTPUT] == 300
    assert gpt[n.USAGE_INPUT_TOKENS] == 400 and gpt[n.USAGE_CACHED_INPUT_TOKENS] == 100
    assert claude[n.USAGE_INPUT_TOKENS] == 350 and responses[n.USAGE_INPUT_TOKENS] == 90
    assert gpt[n.SYSTEM_PROMPT_IN_TRANSCRIPT] is True  # read as Chat Completions: the system message
    observer = oi.active_observer()
    assert observer is not None and observer.fitter("claude-sonnet-4-5").calibration > 1.0


def test_streams_record_the_usage_they_carry(instrumented: Instrumented, fake_provider: FakeProvider) -> None:
    fake_provider.queue(Reply(input_tokens=222), Reply(input_tokens=333))
    chunks = list(
        litellm.completion(
            model=GPT, messages=MESSAGES, stream=True, stream_options={"include_usage": True},
            **_where(fake_provider, GPT),
        )
    )  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Done."

    async def aio() -> list[Any]:
        stream = await litellm.aresponses(model=GPT, input="Hello", stream=True, **_where(fake_provider, GPT))
        return [e async for e in stream]

    events = asyncio.run(aio())
    assert events[-1].type == "response.completed"
    chat, responses = instrumented.rounds()
    assert chat.attributes[n.USAGE_INPUT_TOKENS] == 222  # type: ignore[index]
    assert responses.attributes[n.USAGE_INPUT_TOKENS] == 333  # type: ignore[index]


def test_litellms_own_exceptions_reach_the_caller_unchanged(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(status=400), Reply(status=500))
    with pytest.raises(litellm.BadRequestError):
        litellm.completion(model=GPT, messages=MESSAGES, **_where(fake_provider, GPT))
    with pytest.raises(litellm.InternalServerError):
        litellm.completion(model=CLAUDE, messages=MESSAGES, max_tokens=100, **_where(fake_provider, CLAUDE))
    rounds = instrumented.rounds()
    assert len(rounds) == 2 and all(s.status.status_code.name == "ERROR" for s in rounds)


def test_a_failure_inside_otel_ctx_never_reaches_the_agent(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_ctx.instrumentation import _litellm as integration

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected failure inside otel-ctx")

    monkeypatch.setattr(integration, "routed", broken)
    response = litellm.completion(model=GPT, messages=MESSAGES, **_where(fake_provider, GPT))
    assert response.choices[0].message.content == "Done."
    # The LiteLLM layer could not observe it (the openai SDK's own wrapper may, once).
    assert len(instrumented.rounds()) <= 1
    assert all(n.ROUTED_PROVIDER not in (s.attributes or {}) for s in instrumented.rounds())


def test_uninstrument_puts_litellms_functions_back() -> None:
    before = {f: getattr(litellm, f) for f in ("completion", "acompletion", "responses", "aresponses")}
    oi.instrument(langchain=False)
    assert all(getattr(litellm, f) is not g for f, g in before.items())
    oi.uninstrument()
    assert all(getattr(litellm, f) is g for f, g in before.items())


def test_the_sdk_wrappers_stand_down_inside_an_observed_call(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    from instrument_support import openai_client

    from otel_ctx.instrumentation._core import OBSERVED_ABOVE

    client = openai_client(fake_provider)
    token = OBSERVED_ABOVE.set(True)  # as while LiteLLM's call is observed
    try:
        inside = client.chat.completions.create(model="gpt-4o", messages=MESSAGES)  # type: ignore[arg-type]
    finally:
        OBSERVED_ABOVE.reset(token)
    assert inside.choices[0].message.content == "Done."
    assert instrumented.rounds() == []
    client.chat.completions.create(model="gpt-4o", messages=MESSAGES)  # type: ignore[arg-type]
    assert len(instrumented.rounds()) == 1


def test_a_gemini_route_is_measured_in_the_body_litellm_sends_gemini(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    """LiteLLM sends a ``gemini/…`` model Gemini's own body: the chat request is counted in that
    shape (one token a content, the system instruction as one), not with OpenAI's framing."""
    fake_provider.queue(Reply(input_tokens=40))
    where = {"api_base": fake_provider.gemini_url, "api_key": "test-key", "num_retries": 0}
    litellm.completion(model="gemini/gemini-2.5-flash", messages=MESSAGES, **where)
    assert len(fake_provider.requests) == 1
    (attrs,) = (s.attributes or {} for s in instrumented.rounds())
    assert (attrs[n.PROVIDER], attrs[n.ROUTED_PROVIDER], attrs[n.MODEL]) == (
        "google",
        "gemini",
        "gemini-2.5-flash",
    )
    sent = json.loads(fake_provider.requests[0].body)
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gemini-2.5-flash")
    mapped = gemini_body({"model": "gemini-2.5-flash", "messages": MESSAGES})
    # The mapping is the body LiteLLM sent, as far as counting goes.
    assert fitter.count_request(mapped, provider="google") == fitter.count_request(sent, provider="google")


def test_a_gemini_route_with_tools_and_calls_counts_what_litellm_sends(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order by its number.",
                "parameters": {
                    "type": "object",
                    "properties": {"order": {"type": "string", "description": "The order number."}},
                    "required": ["order"],
                },
            },
        }
    ]
    messages = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order": "88-1042"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped", "carrier": "DHL"}'},
        {"role": "user", "content": "And when does it arrive?"},
    ]
    fake_provider.queue(Reply(input_tokens=120))
    where = {"api_base": fake_provider.gemini_url, "api_key": "test-key", "num_retries": 0}
    litellm.completion(model="gemini/gemini-2.5-flash", messages=messages, tools=tools, **where)
    sent = json.loads(fake_provider.requests[0].body)
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gemini-2.5-flash")
    mapped = gemini_body({"model": "gemini-2.5-flash", "messages": messages, "tools": tools})
    assert fitter.count_request(mapped, provider="google") == fitter.count_request(sent, provider="google")
    (attrs,) = (s.attributes or {} for s in instrumented.rounds())
    assert attrs[n.PROVIDER] == "google"
