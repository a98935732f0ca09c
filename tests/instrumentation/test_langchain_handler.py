"""The LangChain callback handler with real langchain-core chat models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_provider import FakeProvider
from instrument_support import Instrumented, instrumented, openai_client
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n
from otel_ctx.instrumentation._langchain import OtelCtxCallbackHandler

__all__ = ["instrumented"]  # the fixture, imported for pytest


@pytest.fixture
def instrumented_with_langchain() -> Iterator[Instrumented]:
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=True)
    try:
        yield cap
    finally:
        oi.uninstrument()


def _answers(*usage: int) -> Iterator[AIMessage]:
    for tokens in usage:
        yield AIMessage(
            content="Done.",
            usage_metadata={
                "input_tokens": tokens,
                "output_tokens": 5,
                "total_tokens": tokens + 5,
                "input_token_details": {"cache_read": 10},
            },
        )


HISTORY: list[BaseMessage] = [
    SystemMessage("You are Sundry's support agent."),
    HumanMessage("My oak shelf (order 88-1042) arrived cracked."),
]


def test_a_global_handler_makes_every_chat_model_call_a_round(
    instrumented_with_langchain: Instrumented,
) -> None:
    model = GenericFakeChatModel(messages=_answers(120, 150))
    with otel_ctx.task("returns", conversation_id="lc-1"):
        first = model.invoke(HISTORY)  # no callbacks passed: the global hook adds the handler
        model.invoke([*HISTORY, first, HumanMessage("Can I get a refund?")])
    one, two = instrumented_with_langchain.rounds()
    assert [one.attributes[n.ROUND], two.attributes[n.ROUND]] == [1, 2]  # type: ignore[index]
    assert one.attributes[n.TASK_TYPE] == "returns"  # type: ignore[index]
    assert one.attributes[n.ESTIMATED_TOKENS] < two.attributes[n.ESTIMATED_TOKENS]  # type: ignore[index]
    assert one.attributes[n.USAGE_INPUT_TOKENS] == 120  # type: ignore[index]
    assert one.attributes[n.USAGE_CACHED_INPUT_TOKENS] == 10  # type: ignore[index]
    assert len(instrumented_with_langchain.points(n.ESTIMATE_ACCURACY.name)) == 1


def test_the_handler_can_be_passed_by_hand_and_works_async(instrumented: Instrumented) -> None:
    import asyncio

    handler = OtelCtxCallbackHandler()
    model = GenericFakeChatModel(messages=_answers(90))
    asyncio.run(model.ainvoke(HISTORY, config={"callbacks": [handler]}))
    (span,) = instrumented.rounds()
    assert span.attributes[n.USAGE_INPUT_TOKENS] == 90  # type: ignore[index]


class SdkChat(BaseChatModel):
    """A chat model that calls the OpenAI SDK, as ChatOpenAI does."""

    client: Any

    @property
    def _llm_type(self) -> str:
        return "sdk-chat"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        resp = self.client.chat.completions.create(
            model="gpt-4o",
            messages=convert_to_openai_messages(messages),  # type: ignore[arg-type]
        )
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=resp.choices[0].message.content or ""))]
        )


def test_a_chat_model_on_a_wrapped_sdk_is_counted_once(
    instrumented_with_langchain: Instrumented, fake_provider: FakeProvider
) -> None:
    model = SdkChat(client=openai_client(fake_provider))
    assert model.invoke(HISTORY).content == "Done."
    (span,) = instrumented_with_langchain.rounds()
    assert span.attributes[n.PROVIDER] == "openai"  # type: ignore[index]
    assert span.attributes[n.USAGE_INPUT_TOKENS] > 0  # type: ignore[index]  # the SDK's exact usage


def test_after_uninstrument_the_global_handler_records_nothing() -> None:
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=True)
    oi.uninstrument()
    GenericFakeChatModel(messages=_answers(50)).invoke(HISTORY)
    assert cap.rounds() == []
