"""ChatOpenAI and ChatAnthropic over the real SDKs: one round per request, with the provider's usage.

LangChain's chat models call the SDKs through ``with_raw_response`` (and ``beta.messages``
when given betas); the SDK wrapper sees the request in the dialect it is sent in, and the
LangChain handler, which sees the same call, stands down. Against the fake provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from instrument_support import Instrumented
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n

USAGE = 432
HISTORY: list[BaseMessage] = [
    SystemMessage("You are Sundry's support agent. Be brief, be kind, never promise a refund date."),
    HumanMessage("My oak shelf (order 88-1042) arrived cracked."),
]


@tool
def get_order(order_id: str, include_history: bool = False) -> str:
    """Look up an order by its id, with the carrier's scan history when asked."""
    return "{}"


class Verdict(BaseModel):
    """Whether to refund."""

    status: str
    days: int


@pytest.fixture
def with_langchain() -> Iterator[Instrumented]:
    """The zero-code setup: SDK wrappers and the global LangChain handler, both on."""
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=True)
    try:
        yield cap
    finally:
        oi.uninstrument()


def _accuracy_count(cap: Instrumented) -> int:
    return sum(p.count for p in cap.points(n.ESTIMATE_ACCURACY.name))


def _openai(fake: FakeProvider, **kw: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", base_url=fake.openai_url, api_key="k", max_retries=0, **kw)  # type: ignore[arg-type]


def _anthropic(fake: FakeProvider, **kw: Any) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-6",
        base_url=fake.anthropic_url,
        api_key="k",
        max_retries=0,
        max_tokens=500,
        **kw,
    )


def _one_round(cap: Instrumented, provider: str) -> dict[str, Any]:
    (span,) = cap.rounds()
    a = dict(span.attributes or {})
    assert a[n.PROVIDER] == provider
    assert a[n.USAGE_INPUT_TOKENS] == USAGE
    assert _accuracy_count(cap) == 1  # an accuracy point, hence calibration
    return a


def test_chat_openai_invoke_is_one_round_with_usage(
    with_langchain: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(input_tokens=USAGE))
    with otel_ctx.task("returns"):
        answer = _openai(fake_provider).bind_tools([get_order]).invoke(HISTORY)
    assert answer.content == "Done."
    a = _one_round(with_langchain, "openai")
    assert a[n.TASK_TYPE] == "returns" and a[n.TOOL_SCHEMA_TOKENS] > 0
    observer = oi.active_observer()
    assert observer is not None and observer.fitter("gpt-4o").calibration != 1.0


def test_chat_openai_stream_structured_output_and_responses_api(
    with_langchain: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(input_tokens=USAGE))
    chunks = list(_openai(fake_provider, stream_usage=True).stream(HISTORY))
    assert "".join(str(c.content) for c in chunks) == "Done."
    _one_round(with_langchain, "openai")
    with_langchain.span_exporter.clear()
    fake_provider.queue(Reply.structured({"status": "refund", "days": 14}, input_tokens=USAGE))
    verdict = _openai(fake_provider).with_structured_output(Verdict, method="json_schema").invoke(HISTORY)
    assert verdict == Verdict(status="refund", days=14)
    fake_provider.queue(Reply(input_tokens=USAGE))
    assert _openai(fake_provider, use_responses_api=True).invoke(HISTORY).text == "Done."
    structured, responses = with_langchain.rounds()
    assert structured.attributes[n.PROVIDER] == "openai"  # type: ignore[index]
    assert responses.attributes[n.PROVIDER] == "openai-responses"  # type: ignore[index]
    assert all(s.attributes[n.USAGE_INPUT_TOKENS] == USAGE for s in (structured, responses))  # type: ignore[index]
    assert _accuracy_count(with_langchain) == 3


def test_chat_anthropic_invoke_is_one_round_with_usage(
    with_langchain: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(input_tokens=USAGE))
    assert _anthropic(fake_provider).bind_tools([get_order]).invoke(HISTORY).content == "Done."
    a = _one_round(with_langchain, "anthropic")
    assert a[n.SYSTEM_PROMPT_TOKENS] > 0  # the system prompt is top-level, not in the transcript


def test_chat_anthropic_with_betas_is_measured_as_anthropic(
    with_langchain: Instrumented, fake_provider: FakeProvider
) -> None:
    # betas send the call through client.beta.messages: still the Messages API, and measured so.
    async def agent() -> list[Any]:
        out = []
        for betas in (None, ["context-1m-2025-08-07"]):
            fake_provider.queue(Reply(input_tokens=USAGE))
            extra = {"betas": betas} if betas else {}
            out.append(
                (await _anthropic(fake_provider, **extra).bind_tools([get_order]).ainvoke(HISTORY)).content
            )
        return out

    assert asyncio.run(agent()) == ["Done.", "Done."]
    plain, beta = with_langchain.rounds()
    assert fake_provider.requests[1].headers["anthropic-beta"] == "context-1m-2025-08-07"
    keys = (
        n.PROVIDER,
        n.SYSTEM_PROMPT_TOKENS,
        n.TOOL_SCHEMA_TOKENS,
        n.TRANSCRIPT_TOKENS,
        n.USAGE_INPUT_TOKENS,
    )
    assert beta.attributes[n.PROVIDER] == "anthropic"  # type: ignore[index]
    # The same request measured the same way (the estimate itself moves: the first usage calibrated it).
    assert [beta.attributes[k] for k in keys] == [plain.attributes[k] for k in keys]  # type: ignore[index]
    # Anthropic's tool accounting: the tool-use system prompt the API adds makes the tools hundreds of
    # tokens, where the schema's text alone (OpenAI's accounting) is a few dozen.
    assert beta.attributes[n.TOOL_SCHEMA_TOKENS] > 300  # type: ignore[index]
    assert beta.attributes[n.SYSTEM_PROMPT_TOKENS] > 0  # type: ignore[index]


def test_chat_anthropic_stream_and_chat_openai_batch_are_one_round_per_request(
    with_langchain: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(text="one two three", input_tokens=USAGE))
    chunks = list(_anthropic(fake_provider).stream(HISTORY))
    assert "".join(str(c.content) for c in chunks) == "one two three"
    _one_round(with_langchain, "anthropic")
    fake_provider.queue(Reply(input_tokens=USAGE), Reply(input_tokens=USAGE))
    answers = _openai(fake_provider).batch([HISTORY, [*HISTORY, HumanMessage("And the refund?")]])
    assert [a.content for a in answers] == ["Done.", "Done."]
    rounds = with_langchain.rounds()
    assert len(rounds) == 3 == len(fake_provider.requests)
    assert all(s.attributes[n.USAGE_INPUT_TOKENS] == USAGE for s in rounds)  # type: ignore[index]
