"""LangChain: BaseMessage lists and LangChain tools in, LangChain messages out.

Tested with the real ``langchain-core``: its message classes, ``@tool`` tools, pydantic
tools, its own converters; the OpenAI SDK carries a LangChain transcript to the fake
provider as a LangChain chat model would.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import openai
import pytest
from dialect_rules_langchain import transcripts, violations
from fake_provider import FakeProvider, Reply
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field
from telemetry_capture import Capture

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx import names as n
from otel_ctx.engine._errors import InvalidToolSchemaError
from otel_ctx.telemetry import run

ROOMY = BudgetPolicy(context_length=128_000, reserved_output=1_000)


@tool
def lookup(query: str, limit: int = 3) -> str:
    """Look an order up by a free-text query."""
    return query


class Refund(BaseModel):
    """Refund an order to the card on file."""

    order_id: int = Field(description="The order to refund")
    reason: str


def _history(result_words: int = 50) -> list[BaseMessage]:
    return [
        SystemMessage("You are the returns desk."),
        HumanMessage("Order 8812 arrived broken; I want a refund."),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"query": "8812"}, "id": "call_1"}]),
        ToolMessage("row " * result_words, tool_call_id="call_1", name="lookup"),
        AIMessage("Refund to the card on file?"),
        HumanMessage("Yes."),
    ]


def test_langchain_messages_and_tools_in_langchain_messages_out() -> None:
    history = _history(result_words=4_000)
    before = copy.deepcopy(history)
    fitter = ContextFitter(BudgetPolicy(context_length=128_000, reserved_output=1_000, tool_result_cap=300))
    res = fitter.fit(history, tools=[lookup, Refund])
    assert history == before
    assert all(isinstance(m, BaseMessage) for m in res.messages)
    assert [m is o for m, o in zip(res.messages, history)] == [True, True, True, False, True, True]
    capped = res.messages[3]
    assert isinstance(capped, ToolMessage) and capped.tool_call_id == "call_1" and capped.name == "lookup"
    assert "cut to 300 tokens" in str(capped.content)
    assert res.capped_tool_results == 1 and res.breakdown.transcript_by_role["tool"] <= 300 + 10
    # The tools cost what LangChain sends for them.
    as_dicts = [convert_to_openai_tool(lookup), convert_to_openai_tool(Refund)]
    assert res.breakdown.tool_schema > 0
    assert fitter.count(history, tools=[lookup, Refund]) == fitter.count(history, tools=as_dicts)
    # A system prompt added by the fit comes back as a LangChain message too.
    prompted = fitter.fit(history, system_prompt="Be brief.")
    assert isinstance(prompted.request_messages()[0], SystemMessage)


def test_langchain_tools_with_plain_dict_messages() -> None:
    msgs = convert_to_openai_messages(_history())
    fitter = ContextFitter(ROOMY)
    with_tools = fitter.count(msgs, tools=[lookup, Refund])
    assert with_tools > fitter.count(msgs)
    assert with_tools == fitter.count(
        msgs, tools=[convert_to_openai_tool(lookup), convert_to_openai_tool(Refund)]
    )
    with pytest.raises(InvalidToolSchemaError, match="tools"):
        fitter.count(msgs, tools=[object()])


@given(transcripts())
def test_property_the_same_conversation_counts_the_same_as_openai_dicts(history: list[BaseMessage]) -> None:
    fitter = ContextFitter(ROOMY)
    assert fitter.count(history) == fitter.count(convert_to_openai_messages(history))


@given(
    history=transcripts(),
    context=st.integers(200, 20_000),
    cap=st.one_of(st.none(), st.integers(20, 2_000)),
)
def test_property_fitted_transcripts_obey_the_rules(
    history: list[BaseMessage], context: int, cap: int | None
) -> None:
    before = copy.deepcopy(history)
    policy = BudgetPolicy(context_length=context, reserved_output=100, tool_result_cap=cap)
    res = ContextFitter(policy).fit(history)
    assert history == before
    out = res.messages
    assert violations(out) == [], violations(out)
    b = res.breakdown
    assert b.transcript + b.tool_schema + b.system_prompt + b.skills == b.estimated
    assert sum(b.transcript_by_role.values()) == b.transcript
    # The floor: leading system message, the ticket, the newest message.
    ticket = next(m for m in history if isinstance(m, HumanMessage))
    assert any(m is ticket for m in out)
    assert out[-1] is history[-1] or isinstance(history[-1], ToolMessage)
    if isinstance(history[0], SystemMessage):
        assert out[0] is history[0]
    huge = ContextFitter(ROOMY).fit(history)
    assert huge.outcome == "fit" and all(a is b for a, b in zip(huge.messages, history, strict=True))


def test_run_fit_takes_and_returns_langchain_messages() -> None:
    cap = Capture()
    try:
        with run(ContextFitter(ROOMY), task_type="returns", emitter=cap.emitter) as r:
            res = r.fit(_history())
        assert all(isinstance(m, BaseMessage) for m in res.messages)
        (span,) = cap.spans(n.SPAN_FIT)
        assert span.attributes is not None and span.attributes[n.OUTCOME] == "fit"
    finally:
        cap.close()


def test_a_langchain_agent_loop_through_the_openai_sdk(fake_provider: FakeProvider) -> None:
    """LangChain messages fitted, sent as LangChain converts them, the answer read back."""
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="k", max_retries=0)
    fitter = ContextFitter(BudgetPolicy(context_length=1_800, reserved_output=300, tool_result_cap=300))
    tools = [lookup, Refund]
    history: list[BaseMessage] = [HumanMessage("Order 8812 arrived broken; I want a refund.")]
    fake_provider.queue(*[Reply(tool_calls=[("lookup", json.dumps({"query": f"q{k}"}))]) for k in range(6)])
    outcomes = []
    for _ in range(7):
        res = fitter.fit(history, tools=tools)
        outcomes.append(res.outcome)
        resp = client.chat.completions.create(
            model="gpt-4o",
            messages=convert_to_openai_messages(res.messages),  # type: ignore[arg-type]
            tools=[convert_to_openai_tool(t) for t in tools],  # type: ignore[misc]
        )
        answer = resp.choices[0].message.model_dump(exclude_none=True)
        (ai,) = convert_to_messages([{"content": "", **answer}])
        history.append(ai)
        assert isinstance(ai, AIMessage)
        if not ai.tool_calls:
            break
        history.extend(ToolMessage("row " * 400, tool_call_id=str(c["id"])) for c in ai.tool_calls)
    sent = [json.loads(b) for b in fake_provider.bodies("/chat/completions")]
    assert len(sent) == 7 and "compacted" in outcomes
    for body in sent:
        assert body["messages"][0]["content"] == "Order 8812 arrived broken; I want a refund."
        assert violations(convert_to_messages(body["messages"])) == []


def test_langchain_is_imported_only_when_its_objects_arrive() -> None:
    code = (
        "import sys\n"
        "from otel_ctx import ContextFitter, BudgetPolicy\n"
        "import otel_ctx.adapters._langchain\n"
        "f = ContextFitter(BudgetPolicy(context_length=8000, reserved_output=100))\n"
        "tools = [{'type': 'function', 'function': {'name': 'f'}}]\n"
        "r = f.fit([{'role': 'user', 'content': 'hi'}], tools=tools)\n"
        "assert r.outcome == 'fit'\n"
        "print(sorted(m for m in sys.modules if m.startswith('langchain')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_readme_langchain_section_is_the_example_and_its_output() -> None:
    from test_anthropic import _readme_section_runs

    _readme_section_runs("LangChain", "langchain_messages.py")
