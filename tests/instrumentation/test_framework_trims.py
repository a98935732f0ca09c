"""Framework trims with the real LangChain 1.x create_agent and its middleware against the fake provider.

ChatOpenAI calls the OpenAI SDK, so the SDK wrapper measures each request; the LangChain
handler sees the agent's graph and tells the round what the middleware cut before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from instrument_support import Instrumented
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware, SummarizationMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import otel_ctx.instrumentation as oi
from otel_ctx import names as n

ORDER = '{"order": "88-1042", "items": "' + "oak shelf, natural finish " * 60 + '"}'


@pytest.fixture
def lc() -> Iterator[Instrumented]:
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=True)
    try:
        yield cap
    finally:
        oi.uninstrument()


@tool
def get_order(order_id: str) -> str:
    """Look up an order by id."""
    return ORDER


def _model(fake: FakeProvider) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", base_url=fake.openai_url, api_key="test-key", max_retries=0)  # type: ignore[arg-type]


def _trims(cap: Instrumented) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for s in cap.rounds() for e in s.events if e.name == n.EVENT_TRIM]


def _history(k: int) -> list[Any]:
    out: list[Any] = []
    for i in range(k):
        out.append(HumanMessage(f"Question {i} about order 88-1042: where is it?", id=f"h{i}"))
        out.append(
            AIMessage(
                "", tool_calls=[{"name": "get_order", "args": {"order_id": "1"}, "id": f"c{i}"}], id=f"a{i}"
            )
        )
        out.append(ToolMessage(ORDER, tool_call_id=f"c{i}", id=f"t{i}"))
        out.append(AIMessage(f"Answer {i}: on its way.", id=f"b{i}"))
    out.append(HumanMessage("And the refund?", id="last"))
    return out


def test_summarization_middleware_is_one_framework_trim_with_both_sides_measured(
    lc: Instrumented, fake_provider: FakeProvider
) -> None:
    model = _model(fake_provider)
    middleware = SummarizationMiddleware(model=model, trigger=("messages", 10), keep=("messages", 3))
    agent = create_agent(model=model, tools=[get_order], middleware=[middleware])
    fake_provider.queue(Reply(text="Summary: order 88-1042, shipped."), Reply(text="Refund is queued."))
    history = _history(4)
    agent.invoke({"messages": history})
    trims = _trims(lc)
    assert len(trims) == 1, trims
    (ev,) = trims
    assert ev[n.TRIM_PERFORMER] == "framework" and ev[n.TRIM_KIND] == "summary"
    assert ev[n.TRIM_TOKENS_BEFORE] > 1000 > ev[n.TRIM_TOKENS_AFTER] > 0
    sent = fake_provider.requests[-1].json["messages"]  # the summary, then what was preserved
    assert "summary" in sent[0]["content"]
    assert ev[n.TRIM_ITEMS_REMOVED] == len(history) - (len(sent) - 1)
    points = {dict(p.attributes)[n.TRIM_PERFORMER]: p.value for p in lc.points(n.TRIMMED_TOKENS.name)}
    assert points["framework"] == ev[n.TRIM_TOKENS_BEFORE] - ev[n.TRIM_TOKENS_AFTER]


def test_context_editing_middleware_clearing_tool_results_is_a_framework_edit(
    lc: Instrumented, fake_provider: FakeProvider
) -> None:
    model = _model(fake_provider)
    edit = ClearToolUsesEdit(trigger=500, keep=1)
    agent = create_agent(model=model, tools=[get_order], middleware=[ContextEditingMiddleware(edits=[edit])])
    fake_provider.queue(
        Reply(tool_calls=[("get_order", '{"order_id": "1"}')]),
        Reply(tool_calls=[("get_order", '{"order_id": "2"}')]),
        Reply(text="Both orders are on their way."),
    )
    agent.invoke({"messages": [HumanMessage("Where are orders 1 and 2?")]})
    rounds = lc.rounds()
    assert len(rounds) == 3
    trims = _trims(lc)
    # The third call carries two tool results, the older one cleared: one edit, on that round.
    assert len(trims) == 1, trims
    (ev,) = trims
    assert ev[n.TRIM_PERFORMER] == "framework" and ev[n.TRIM_KIND] == "edit"
    assert ev[n.TRIM_TOKENS_BEFORE] > 300 > ev[n.TRIM_TOKENS_AFTER]
    assert [e.name for e in rounds[2].events] == [n.EVENT_TRIM]
    assert [dict(r.attributes or {})[n.COMPACTED] for r in rounds] == [False, False, True]
