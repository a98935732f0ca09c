"""Context the provider holds: Responses chains with the real openai SDK against a stateful fake.

The fake stores every response with the whole context it saw, bills a call that continues
one (``previous_response_id``, ``conversation``) for all of it, truncates and compacts as
asked. The round spans must report what the server bills, not the few new items sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from hypothesis import given, settings
from hypothesis import strategies as st
from instrument_support import RESPONSES_TOOLS, Instrumented, anthropic_client, instrumented, openai_client

import otel_ctx.instrumentation as oi
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx import names as n
from otel_ctx.instrumentation import _chain

__all__ = ["instrumented"]  # the fixture, imported for pytest

ORDER = json.dumps(
    {"order_id": "88-1042", "items": [{"sku": f"SKU-{i}", "title": "Oak shelf " * 12} for i in range(6)]}
)
TURNS = [
    "My oak shelf (order 88-1042) arrived cracked. What can you do?",
    "It is the top tier; the crack runs along the grain.",
    "I would rather have a replacement than a refund, please.",
    "Can the courier collect the broken one on Friday?",
]


def _bill_exactly(fake: FakeProvider, provider: str = "openai-responses") -> None:
    """The fake bills what the model sees, counted as otel-ctx counts it (the whole stored
    context), so a plain request's usage leaves the calibration where it is."""
    model = "claude-sonnet-4-6" if provider == "anthropic" else "gpt-4o"
    counter = ContextFitter(BudgetPolicy(context_length=1 << 30, reserved_output=0), model=model)
    fake.usage_for = lambda body: counter.count_request(body, provider=provider)


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _closes(a: dict[str, Any]) -> None:
    lines = a[n.TRANSCRIPT_TOKENS] + a[n.TOOL_SCHEMA_TOKENS] + a[n.SYSTEM_PROMPT_TOKENS] + a[n.SKILLS_TOKENS]
    assert lines + a[n.SERVER_HELD_TOKENS] == a[n.ESTIMATED_TOKENS]
    assert sum(a[n.TRANSCRIPT_ROLE_TOKENS[r]] for r in n.ROLES) == a[n.TRANSCRIPT_TOKENS]


@pytest.mark.parametrize("stream", [False, True])
def test_each_chained_round_is_estimated_within_ten_percent_of_what_the_server_bills(
    instrumented: Instrumented, fake_provider: FakeProvider, stream: bool
) -> None:
    _bill_exactly(fake_provider)
    fake_provider.queue(Reply(tool_calls=[("get_order", '{"id": "88-1042"}')]))
    client = openai_client(fake_provider)
    previous: str | None = None
    first_id = ""
    for i, text in enumerate(TURNS):
        items: list[Any] = [{"role": "user", "content": text}]
        if i == 1:  # answer the tool call of round 1 first
            items.insert(0, {"type": "function_call_output", "call_id": "call_1_0", "output": ORDER})
        kwargs: dict[str, Any] = {"model": "gpt-4o", "instructions": "Be kind.", "input": items}
        kwargs["tools"] = RESPONSES_TOOLS
        if previous is not None:
            kwargs["previous_response_id"] = previous
        if stream:
            events = list(client.responses.create(stream=True, **kwargs))
            previous = events[-1].response.id
        else:
            previous = client.responses.create(**kwargs).id
        first_id = first_id or previous

    rounds = [_attrs(s) for s in instrumented.rounds()]
    billed = fake_provider.billed
    assert len(rounds) == len(billed) == 4
    assert billed[-1] > 3 * billed[0]  # the server bills the whole chain, growing
    for a, bill in zip(rounds, billed, strict=True):
        assert abs(a[n.ESTIMATED_TOKENS] - bill) <= 0.10 * bill, (a[n.ESTIMATED_TOKENS], bill)
        _closes(a)
        assert a[n.SERVER_HELD_TOKENS] == 0  # every part of the chain was seen here
    assert [a[n.ROUND] for a in rounds] == [1, 2, 3, 4]
    assert [a[n.FIGURE_SOURCE] for a in rounds] == ["request", "chain", "chain", "chain"]
    assert {a[n.GEN_AI_CONVERSATION_ID] for a in rounds} == {first_id}
    assert rounds[3][n.TRANSCRIPT_ROLE_TOKENS["tool"]] > 100  # the order lookup is still held


def test_a_conversation_filled_elsewhere_is_one_server_held_line_from_usage(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    # Items added through the Conversations API: never seen by a Responses call here.
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": ORDER + " " + TURNS[0]}]
    )
    for text in TURNS[1:3]:
        client.responses.create(model="gpt-4o", input=text, conversation=conv.id)

    first, second = (_attrs(s) for s in instrumented.rounds())
    held = fake_provider.billed
    for a, bill in ((first, held[0]), (second, held[1])):
        _closes(a)
        assert abs(a[n.ESTIMATED_TOKENS] - bill) <= 0.10 * bill
        assert a[n.GEN_AI_CONVERSATION_ID] == conv.id
    # The unseen items are one line of their own, not spread over the roles.
    assert first[n.SERVER_HELD_TOKENS] > 100
    assert first[n.TRANSCRIPT_ROLE_TOKENS["user"]] < 40
    assert first[n.FIGURE_SOURCE] == "usage"
    # The next round carries the same line, and the answer and new items beside it.
    assert second[n.SERVER_HELD_TOKENS] == first[n.SERVER_HELD_TOKENS]
    assert second[n.TRANSCRIPT_ROLE_TOKENS["assistant"]] > 0
    assert [first[n.ROUND], second[n.ROUND]] == [1, 2]


def test_a_previous_response_from_another_process_is_filled_from_usage(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    fake_provider.stored["resp_elsewhere"] = [{"role": "user", "content": ORDER}]
    client = openai_client(fake_provider)
    client.responses.create(model="gpt-4o", input=TURNS[1], previous_response_id="resp_elsewhere")
    (a,) = (_attrs(s) for s in instrumented.rounds())
    _closes(a)
    assert a[n.SERVER_HELD_TOKENS] > 100
    assert abs(a[n.ESTIMATED_TOKENS] - fake_provider.billed[0]) <= 0.10 * fake_provider.billed[0]
    assert a[n.ROUND] == 2 and a[n.GEN_AI_CONVERSATION_ID] == "resp_elsewhere"
    # Metrics carry the line too: the composition panels read it.
    points = instrumented.points(n.TOKENS.name)
    held = [p.value for p in points if dict(p.attributes)[n.COMPONENT] == n.COMPONENT_SERVER_HELD]
    assert held == [a[n.SERVER_HELD_TOKENS]]


def test_a_server_state_conversation_leaves_the_calibration_alone(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    full = [
        {"role": "user", "content": TURNS[0]},
        {"type": "function_call", "call_id": "c1", "name": "get_order", "arguments": '{"id": "88-1042"}'},
        {"type": "function_call_output", "call_id": "c1", "output": ORDER},
    ]

    def full_list() -> int:
        client.responses.create(model="gpt-4o", input=full, tools=RESPONSES_TOOLS)  # type: ignore[arg-type]
        return int(_attrs(instrumented.rounds()[-1])[n.ESTIMATED_TOKENS])

    before = full_list()
    previous = None
    for text in TURNS:
        kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
        previous = client.responses.create(model="gpt-4o", input=text, **kwargs).id
    # Server-side edits and truncation count a context the body does not show either.
    client.responses.create(model="gpt-4o", input=full, truncation="auto")
    assert full_list() == before


def test_truncation_by_the_server_is_a_provider_trim(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    previous = client.responses.create(model="gpt-4o", input=ORDER).id
    fake_provider.window = 60  # the order lookup no longer fits: the server drops it
    client.responses.create(model="gpt-4o", input=TURNS[1], previous_response_id=previous, truncation="auto")
    last = instrumented.rounds()[-1]
    events = [e for e in last.events if e.name == n.EVENT_TRIM]
    assert len(events) == 1
    ev = dict(events[0].attributes or {})
    assert ev[n.TRIM_PERFORMER] == "provider" and ev[n.TRIM_KIND] == "truncation"
    assert ev[n.TRIM_TOKENS_BEFORE] == _attrs(last)[n.ESTIMATED_TOKENS]
    assert ev[n.TRIM_TOKENS_AFTER] == fake_provider.billed[-1]
    trimmed = {
        dict(p.attributes)[n.TRIM_PERFORMER]: p.value for p in instrumented.points(n.TRIMMED_TOKENS.name)
    }
    removed = ev[n.TRIM_TOKENS_BEFORE] - ev[n.TRIM_TOKENS_AFTER]
    assert trimmed == {"provider": removed, "otel_ctx": 0, "framework": 0, "agent": 0}


def _trims(span: Any) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == n.EVENT_TRIM]


@pytest.mark.parametrize("stream", [False, True])
def test_server_compaction_is_recorded_once_with_what_it_left(
    instrumented: Instrumented, fake_provider: FakeProvider, stream: bool
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    manage = [{"type": "compaction", "compact_threshold": 200}]
    carried: list[bool] = []

    def ask(text: str, previous: str | None) -> str:
        kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
        if stream:
            with client.responses.stream(
                model="gpt-4o",
                input=text,
                context_management=manage,  # type: ignore[arg-type]
                **kwargs,
            ) as events:
                answer = events.get_final_response()
        else:
            answer = client.responses.create(model="gpt-4o", input=text, context_management=manage, **kwargs)  # type: ignore[arg-type]
        carried.append(any(item.type == "compaction" for item in answer.output))
        return answer.id

    previous = ask(ORDER, None)
    for text in TURNS[1:3]:
        previous = ask(text, previous)
    assert carried == [True, False, False]  # the order lookup crossed the threshold at once
    rounds = instrumented.rounds()
    # The cut is the call whose answer carries the compaction item, once, and never a truncation.
    assert [len(_trims(s)) for s in rounds] == [1, 0, 0]
    (ev,) = _trims(rounds[0])
    assert ev[n.TRIM_PERFORMER] == "provider" and ev[n.TRIM_KIND] == "compaction"
    first = _attrs(rounds[0])
    # The bill counted the whole rendered input: before is what the call held, after what the
    # stored context is known to hold past the opaque item (the answer kept beside it).
    assert ev[n.TRIM_TOKENS_BEFORE] == max(first[n.ESTIMATED_TOKENS], fake_provider.billed[0]) > 200
    assert 0 < ev[n.TRIM_TOKENS_AFTER] < 200
    assert first[n.COMPACTED] is True
    for a, bill in zip((_attrs(s) for s in rounds), fake_provider.billed, strict=True):
        assert abs(a[n.ESTIMATED_TOKENS] - bill) <= 0.10 * bill
    # The next round's server-held line is the compacted context, filled from its usage.
    second = _attrs(rounds[1])
    assert second[n.FIGURE_SOURCE] == n.FIGURE_USAGE and second[n.SERVER_HELD_TOKENS] > 0
    assert second[n.ESTIMATED_TOKENS] == fake_provider.billed[1]
    _closes(second)


def test_a_compaction_billed_below_the_estimate_is_a_compaction_not_a_truncation(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    previous = client.responses.create(model="gpt-4o", input=ORDER).id
    manage = [{"type": "compaction", "compact_threshold": 200}]
    # The server compacts the held order lookup and bills the model's run on what was left.
    fake_provider.queue(Reply(input_tokens=60))
    answer = client.responses.create(
        model="gpt-4o",
        input=TURNS[1],
        previous_response_id=previous,
        context_management=manage,  # type: ignore[arg-type]
        truncation="auto",  # the server may cut either way: the item says which it did
    )
    assert answer.output[0].type == "compaction"
    client.responses.create(model="gpt-4o", input=TURNS[2], previous_response_id=answer.id)
    rounds = instrumented.rounds()
    assert [len(_trims(s)) for s in rounds] == [0, 1, 0]
    (ev,) = _trims(rounds[1])
    assert ev[n.TRIM_PERFORMER] == "provider" and ev[n.TRIM_KIND] == "compaction"
    assert ev[n.TRIM_TOKENS_BEFORE] == _attrs(rounds[1])[n.ESTIMATED_TOKENS] > 200
    assert ev[n.TRIM_TOKENS_AFTER] == 60  # the bill: what the model ran on after the cut
    trimmed = {
        dict(p.attributes)[n.TRIM_PERFORMER]: p.value for p in instrumented.points(n.TRIMMED_TOKENS.name)
    }
    assert trimmed["provider"] == ev[n.TRIM_TOKENS_BEFORE] - 60
    third = _attrs(rounds[2])
    assert third[n.FIGURE_SOURCE] == n.FIGURE_USAGE
    assert third[n.ESTIMATED_TOKENS] == fake_provider.billed[2]
    _closes(third)


def test_a_compaction_billed_above_the_estimate_starts_from_the_bill(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    previous = client.responses.create(model="gpt-4o", input=ORDER).id
    estimate = int(_attrs(instrumented.rounds()[0])[n.ESTIMATED_TOKENS])
    fake_provider.queue(Reply(input_tokens=3 * estimate))  # the server held more than was seen here
    answer = client.responses.create(
        model="gpt-4o",
        input=TURNS[1],
        previous_response_id=previous,
        context_management=[{"type": "compaction", "compact_threshold": 200}],  # type: ignore[arg-type]
    )
    assert answer.output[0].type == "compaction"
    second = instrumented.rounds()[1]
    (ev,) = _trims(second)
    assert ev[n.TRIM_KIND] == "compaction"
    assert ev[n.TRIM_TOKENS_BEFORE] == 3 * estimate == _attrs(second)[n.ESTIMATED_TOKENS]
    assert 0 < ev[n.TRIM_TOKENS_AFTER] < 200  # the answer kept beside the opaque item


def test_request_bodies_are_unchanged_by_the_chain_store(fake_provider: FakeProvider) -> None:
    import otel_ctx.instrumentation as oi

    def conversation() -> list[bytes]:
        fake_provider.requests.clear()
        client = openai_client(fake_provider)
        previous = client.responses.create(model="gpt-4o", input=TURNS[0]).id
        client.responses.create(model="gpt-4o", input=TURNS[1], previous_response_id=previous)
        return [r.body for r in fake_provider.requests]

    plain = conversation()
    oi.instrument(langchain=False)
    try:
        observed = conversation()
    finally:
        oi.uninstrument()
    # Response ids differ between the runs only by the fake's counter; the rest is byte for byte.
    assert plain[1].count(b'"resp_1"') == 1
    assert [b.replace(b'"resp_3"', b'"resp_1"') for b in observed] == plain


def test_the_chain_store_is_bounded() -> None:
    store = _chain.ChainStore(3)
    state = _chain.ChainState(by_role={"user": 1}, server_held=0, round=1, conversation_id="c")
    for i in range(10):
        store.put((f"resp_{i}",), state)
    assert len(store) == 3 and store.get("resp_0") is None and store.get("resp_9") is state


# --- Anthropic: edits and compaction on the server ------------------------------------------


def _tool_rounds(k: int) -> list[dict[str, Any]]:
    """A transcript with ``k`` answered tool calls, each result the order lookup."""
    out: list[dict[str, Any]] = [{"role": "user", "content": TURNS[0]}]
    for i in range(k):
        use = {"type": "tool_use", "id": f"t{i}", "name": "get_order", "input": {"id": "88-1042"}}
        out.append({"role": "assistant", "content": [use]})
        out.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": ORDER}]}
        )
    return out


def _trim_events(cap: Instrumented) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for s in cap.rounds() for e in s.events if e.name == n.EVENT_TRIM]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_cleared_tool_uses_are_one_provider_trim_with_the_providers_counts(
    instrumented: Instrumented, fake_provider: FakeProvider, stream: bool
) -> None:
    client = anthropic_client(fake_provider)
    messages = _tool_rounds(5)
    sent = json.loads(json.dumps(messages))
    manage = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 2}}]}
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 300, "messages": messages}
    if stream:
        list(client.messages.create(stream=True, extra_body={"context_management": manage}, **kwargs))
    else:
        answer = client.messages.create(extra_body={"context_management": manage}, **kwargs)
        assert answer.content[0].type == "text"
    assert messages == sent  # nothing of the agent's changed
    (ev,) = _trim_events(instrumented)
    (span,) = instrumented.rounds()
    a = _attrs(span)
    assert ev[n.TRIM_PERFORMER] == "provider" and ev[n.TRIM_KIND] == "edit"
    assert ev[n.TRIM_ITEMS_REMOVED] == 3
    assert ev[n.TRIM_TOKENS_AFTER] == a[n.USAGE_INPUT_TOKENS]
    assert a[n.COMPACTED] is True  # the provider compacted this call's context
    assert ev[n.TRIM_TOKENS_BEFORE] - ev[n.TRIM_TOKENS_AFTER] > 100


def test_anthropic_compaction_and_a_window_stop_are_recorded_and_never_calibrate(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider, "anthropic")
    client = anthropic_client(fake_provider)
    manage = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 300}}]}
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 300, "messages": _tool_rounds(3)}
    observer = oi.active_observer()
    assert observer is not None
    fitter = observer.fitter("claude-sonnet-4-6")
    fitter.calibration = 1.5  # as if learned: a count the provider cut must not pull it down
    client.messages.create(extra_body={"context_management": manage}, **kwargs)
    fake_provider.queue(Reply(stop_reason="model_context_window_exceeded", input_tokens=10))
    client.messages.create(**kwargs)
    assert fitter.calibration == 1.5
    (ev,) = _trim_events(instrumented)
    assert ev[n.TRIM_PERFORMER] == "provider" and ev[n.TRIM_KIND] == "compaction"
    assert ev[n.TRIM_TOKENS_BEFORE] > 300 > ev[n.TRIM_TOKENS_AFTER] > 0
    last = instrumented.rounds()[-1]
    assert [e.name for e in last.events] == [n.EVENT_PROVIDER_OVERFLOW]
    overflows = instrumented.points(n.PROVIDER_OVERFLOWS.name)
    assert sum(p.value for p in overflows) == 1


# --- the OpenAI Agents SDK on top of stored state -------------------------------------------


def test_an_agents_sdk_run_continuing_a_previous_response_is_measured_whole(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    _bill_exactly(fake_provider)
    client = openai.AsyncOpenAI(base_url=fake_provider.openai_url, api_key="test-key", max_retries=0)
    model = OpenAIResponsesModel(model="gpt-4o", openai_client=client)
    agent = Agent(name="desk", instructions="Be kind.", model=model)
    previous = None
    for text in (ORDER, *TURNS[1:3]):
        previous = Runner.run_sync(agent, text, previous_response_id=previous).last_response_id
    rounds = [_attrs(s) for s in instrumented.rounds()]
    assert [a[n.ROUND] for a in rounds] == [1, 2, 3]
    for a, bill in zip(rounds, fake_provider.billed, strict=True):
        _closes(a)
        assert abs(a[n.ESTIMATED_TOKENS] - bill) <= 0.10 * bill
    assert rounds[2][n.FIGURE_SOURCE] == "chain"


def test_responses_compact_is_a_provider_compaction_and_returns_the_sdks_object(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    _bill_exactly(fake_provider)
    client = openai_client(fake_provider)
    fake_provider.queue(Reply(text="Here is everything about the order. " * 40))  # a long answer to drop
    previous = client.responses.create(model="gpt-4o", input=TURNS[0]).id
    compacted = client.responses.compact(model="gpt-4o", previous_response_id=previous)
    assert type(compacted).__name__ == "CompactedResponse"
    assert compacted.output[-1].type == "compaction"
    (ev,) = [dict(p.attributes) for p in instrumented.points(n.TRIMS.name) if p.value]
    assert ev[n.TRIM_PERFORMER] == "provider"
    removed = {
        dict(p.attributes)[n.TRIM_PERFORMER]: p.value for p in instrumented.points(n.TRIMMED_TOKENS.name)
    }
    assert removed["provider"] == compacted.usage.input_tokens - _measured(compacted.output) > 200


def _measured(output: Any) -> int:
    fitter = ContextFitter(BudgetPolicy(context_length=1 << 30, reserved_output=0), model="gpt-4o")
    return fitter.measure_request(
        {"model": "gpt-4o", "input": output}, provider="openai-responses"
    ).breakdown.estimated


@given(
    held=st.dictionaries(st.sampled_from(n.ROLES), st.integers(0, 10**6), max_size=4),
    server_held=st.integers(0, 10**6),
)
@settings(max_examples=50, deadline=None)
def test_a_chains_lines_always_close_the_breakdown(held: dict[str, int], server_held: int) -> None:
    fitter = ContextFitter(BudgetPolicy(context_length=128_000, reserved_output=800), model="gpt-4o")
    request = {"model": "gpt-4o", "instructions": "Be kind.", "input": TURNS[0]}
    result = fitter.measure_request(request, provider="openai-responses")
    extended = _chain._with_lines(result, held, server_held)
    extended.breakdown.check()
    b = extended.breakdown
    assert b.estimated == result.breakdown.estimated + sum(held.values()) + server_held
    assert b.server_held == server_held
    assert extended.outcome == ("fit" if b.estimated <= b.budget else "overflow")
