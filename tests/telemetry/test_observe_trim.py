"""observed(trimmer): what someone else's trimmer dropped, said on the span and the metrics.

LangChain's own ``trim_messages`` is the trimmer under test: with ``strategy="last"``
it keeps the newest messages that fit, which silently drops the original ticket and
can keep a tool result whose call it dropped.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from telemetry_capture import Capture, attrs_of

from otel_ctx import BudgetPolicy
from otel_ctx import names as n
from otel_ctx.telemetry import observed
from otel_ctx.telemetry._trim import compare

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800, request_limit=8_000)


@pytest.fixture
def cap() -> Iterator[Capture]:
    c = Capture()
    yield c
    c.close()


def _agent_history() -> list[BaseMessage]:
    return [
        SystemMessage("You are the returns desk."),
        HumanMessage("Order 8812 arrived broken; I want a refund to my card."),
        AIMessage("", tool_calls=[{"name": "get_order", "args": {"id": 8812}, "id": "call_1"}]),
        ToolMessage('{"status": "delivered", "damaged": true}', tool_call_id="call_1"),
        AIMessage("I can see the damage report. Refund to the card on file?"),
        HumanMessage("Yes please."),
        AIMessage("", tool_calls=[{"name": "refund", "args": {"id": 8812}, "id": "call_2"}]),
        ToolMessage('{"refund": "queued"}', tool_call_id="call_2"),
    ]


def _observe_span(cap: Capture) -> dict[str, Any]:
    (span,) = cap.spans(n.SPAN_OBSERVE)
    return dict(span.attributes or {})


def test_trim_last_that_drops_the_ticket_and_a_call_is_flagged(cap: Capture) -> None:
    history = _agent_history()
    before = copy.deepcopy(history)
    # One "token" per message: keep the newest five, which starts on call_1's result.
    trim = observed(trim_messages, policy=POLICY, task_type="returns", model="gpt-4o", emitter=cap.emitter)
    kept = trim(history, max_tokens=5, strategy="last", token_counter=len)

    assert kept == history[3:]  # the wrapper returns exactly what the trimmer returned
    assert history == before
    a = _observe_span(cap)
    assert a[n.OUTCOME] == "compacted"
    assert a[n.DROPPED_MESSAGES] == 3
    # Turns: system, ticket, and the call_1 exchange (its call went, its result stayed).
    assert a[n.DROPPED_TURNS] == 3
    assert a[n.TRIM_TICKET_DROPPED] is True
    assert a[n.TRIM_ORPHANED_TOOL_RESULTS] == 1
    fits = {attrs_of(p)[n.OUTCOME]: p.value for p in cap.points(n.FITS.name)}
    assert fits["compacted"] == 1 and fits["fit"] == 0
    (dropped,) = cap.points(n.DROPPED_TURNS_METRIC.name)
    assert dropped.value == 3


def test_trim_that_keeps_the_ticket_and_whole_exchanges_is_not_flagged(cap: Capture) -> None:
    history = _agent_history()
    trim = observed(trim_messages, policy=POLICY, model="gpt-4o", emitter=cap.emitter)
    # start_on="human" keeps whole exchanges; include_system keeps the system prompt.
    kept = trim(
        history, max_tokens=4, strategy="last", token_counter=len, start_on="human", include_system=True
    )
    assert [type(m).__name__ for m in kept] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage"]
    a = _observe_span(cap)
    assert a[n.OUTCOME] == "compacted" and a[n.DROPPED_MESSAGES] == 4
    assert a[n.TRIM_TICKET_DROPPED] is True  # the kept human message is "Yes please.", not the ticket
    assert a[n.TRIM_ORPHANED_TOOL_RESULTS] == 0


def test_trim_that_drops_nothing_reports_fit(cap: Capture) -> None:
    history = _agent_history()
    trim = observed(trim_messages, policy=POLICY, model="gpt-4o", emitter=cap.emitter)
    trim(history, max_tokens=100, strategy="last", token_counter=len)
    a = _observe_span(cap)
    assert a[n.OUTCOME] == "fit" and a[n.DROPPED_MESSAGES] == 0 and a[n.DROPPED_TURNS] == 0
    assert a[n.TRIM_TICKET_DROPPED] is False and a[n.TRIM_ORPHANED_TOOL_RESULTS] == 0


def test_a_hand_written_trimmer_of_chat_dicts_keyword_messages(cap: Capture) -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "ticket"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]

    def keep_ticket_and_last_two(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [messages[0], *messages[-2:]]

    trim = observed(keep_ticket_and_last_two, policy=POLICY, model="gpt-4o", emitter=cap.emitter)
    out = trim(messages=msgs)
    assert out == [msgs[0], msgs[3], msgs[4]]
    a = _observe_span(cap)
    assert a[n.DROPPED_MESSAGES] == 2 and a[n.DROPPED_TURNS] == 1
    assert a[n.TRIM_TICKET_DROPPED] is False and a[n.TRIM_ORPHANED_TOOL_RESULTS] == 0


def test_compare_reads_anthropic_blocks_and_copies() -> None:
    before: list[dict[str, Any]] = [
        {"role": "user", "content": "ticket"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
        {"role": "assistant", "content": "done"},
    ]
    # A trimmer that returns equal copies, not the same objects, is still matched.
    report = compare(before, copy.deepcopy(before[2:]))
    assert report.dropped_messages == 2
    assert report.dropped_turns == 2  # the ticket, and the t1 exchange
    assert report.ticket_dropped and report.orphaned_tool_results == 1
    # A user turn of tool results alone is not the ticket.
    assert not compare(before[1:], before[1:]).ticket_dropped


def test_a_trimmer_whose_output_cannot_be_measured_still_returns_it(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(messages: list[Any]) -> list[Any]:
        return [object()]

    trim = observed(broken, policy=POLICY, model="gpt-4o", emitter=cap.emitter)
    # DEBUG: a repeat of a failure another test logged first is logged at DEBUG.
    with caplog.at_level(logging.DEBUG, logger="otel_ctx.telemetry"):
        out = trim([{"role": "user", "content": "hi"}])
    assert len(out) == 1 and cap.spans(n.SPAN_OBSERVE) == []
    assert "observing a wrapped fit callable" in caplog.text


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_a_comparison_that_fails_still_emits_the_round(cap: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    observe_module = sys.modules["otel_ctx.telemetry._observe"]

    def broken(before: Any, after: Any) -> Any:
        raise RuntimeError("comparison bug")

    monkeypatch.setattr(observe_module, "compare", broken)
    trim = observed(trim_messages, policy=POLICY, model="gpt-4o", emitter=cap.emitter)
    trim(_agent_history(), max_tokens=5, strategy="last", token_counter=len)
    a = _observe_span(cap)
    assert a[n.OUTCOME] == "fit" and n.TRIM_TICKET_DROPPED not in a
