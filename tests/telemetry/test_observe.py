"""Observe-only: someone else trims, otel-ctx measures and emits what is actually sent."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from conversations import ORIGINAL_TICKET, assistant, long_dispute, user
from support import missing
from telemetry_capture import Capture, attrs_of

from otel_ctx import BudgetPolicy, ContextFitter, InvalidMessageError
from otel_ctx import names as n
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.telemetry import observe, observed, run

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800, request_limit=4_000)


@pytest.fixture
def cap() -> Iterator[Capture]:
    c = Capture()
    yield c
    c.close()


def test_observe_measures_the_request_as_given_and_changes_nothing(cap: Capture) -> None:
    msgs = long_dispute(20)
    before = copy.deepcopy(msgs)
    res = observe(
        msgs,
        system_prompt="Be brief.",
        task_type="status",
        model="gpt-4o",
        policy=POLICY,
        emitter=cap.emitter,
    )
    assert msgs == before
    assert res.outcome == "overflow"  # the whole dispute is over a 3,200-token budget
    assert res.dropped_turns == 0 and len(res.messages) == len(msgs)
    assert (
        res.breakdown.estimated
        == ContextFitter(POLICY).measure(msgs, system_prompt="Be brief.").breakdown.estimated
    )
    (span,) = cap.spans(n.SPAN_OBSERVE)
    a = dict(span.attributes or {})
    assert a[n.MODE] == "observe" and a[n.OUTCOME] == "overflow"
    assert a[n.ESTIMATED_TOKENS] == res.breakdown.estimated
    assert [e.name for e in span.events] == [n.EVENT_FLOOR_OVERFLOW]
    fits = {attrs_of(p)[n.OUTCOME]: p.value for p in cap.points(n.FITS.name)}
    assert fits == {"overflow": 1, "fit": 0, "compacted": 0}
    assert {attrs_of(p)[n.COMPONENT] for p in cap.points(n.TOKENS.name)} == set(n.COMPONENTS)


def test_observe_inside_a_run_is_the_runs_next_round(cap: Capture) -> None:
    fitter = ContextFitter(SUPPORT_DESK)
    with run(fitter, task_type="returns", conversation_id="c9", emitter=cap.emitter) as r:
        r.fit([user(ORIGINAL_TICKET)])
        observe([user(ORIGINAL_TICKET), assistant("ok")], task_type="returns", model="gpt-4o", policy=fitter)
        r.observe([user(ORIGINAL_TICKET), assistant("ok"), user("and?")])
    rounds = {s.attributes[n.ROUND]: s for s in cap.spans() if s.attributes and n.ROUND in s.attributes}
    assert sorted(rounds) == [1, 2, 3]
    assert [rounds[i].name for i in (1, 2, 3)] == [n.SPAN_FIT, n.SPAN_OBSERVE, n.SPAN_OBSERVE]
    assert all(s.attributes and s.attributes[n.GEN_AI_CONVERSATION_ID] == "c9" for s in rounds.values())


def test_observe_rejects_bad_input_with_the_engines_typed_error(cap: Capture) -> None:
    with pytest.raises(InvalidMessageError):
        observe(
            [{"role": "robot", "content": "x"}],
            task_type="t",
            model="gpt-4o",
            policy=POLICY,
            emitter=cap.emitter,
        )


def test_observed_wrapper_returns_the_callables_own_value(cap: Capture) -> None:
    def keep_last(messages: list[dict[str, Any]], k: int = 3) -> list[dict[str, Any]]:
        return [messages[0], *messages[-k:]]

    wrapped = observed(keep_last, policy=POLICY, task_type="status", model="gpt-4o", emitter=cap.emitter)
    msgs = long_dispute(5)
    out = wrapped(msgs, k=2)
    assert out == keep_last(msgs, k=2) and all(a is b for a, b in zip(out, keep_last(msgs, k=2), strict=True))
    assert wrapped.__name__ == "keep_last"
    (span,) = cap.spans(n.SPAN_OBSERVE)
    a = dict(span.attributes or {})
    expected = ContextFitter(POLICY).measure(out, task_type="status").breakdown
    assert a[n.ESTIMATED_TOKENS] == expected.estimated
    # The trimmer dropped history, the ticket with it (messages[0] is the system prompt).
    assert a[n.TASK_TYPE] == "status" and a[n.OUTCOME] == "compacted"
    assert a[n.DROPPED_MESSAGES] == len(msgs) - len(out) and a[n.TRIM_TICKET_DROPPED] is True


def test_observed_as_a_decorator_and_on_a_coroutine(cap: Capture) -> None:
    @observed(policy=POLICY, task_type="status", model="gpt-4o", emitter=cap.emitter)
    async def trim(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await asyncio.sleep(0)
        return messages[-2:]

    out = asyncio.run(trim(long_dispute(3)))
    assert len(out) == 2
    (span,) = cap.spans(n.SPAN_OBSERVE)
    assert span.attributes and span.attributes[n.KEPT_TURNS] >= 1


def test_observed_langchain_trim_messages() -> None:
    try:
        import langchain_core.messages as lc
        from langchain_core.messages import trim_messages
    except ImportError:
        missing("langchain-core is not installed (pip install -e '.[bench]')")

    cap = Capture()
    fitter = ContextFitter(POLICY)

    def count(messages: list[Any]) -> int:
        return fitter.count(lc.convert_to_openai_messages(messages))

    trim = observed(
        lambda msgs: trim_messages(
            msgs, max_tokens=3_000, token_counter=count, strategy="last", start_on="human"
        ),
        policy=POLICY,
        task_type="status",
        model="gpt-4o",
        emitter=cap.emitter,
    )
    history = [lc.HumanMessage(ORIGINAL_TICKET)]
    for t in range(40):
        history += [
            lc.AIMessage(f"Round {t}: " + "checking the parcel scans " * 20),
            lc.HumanMessage(f"Follow-up {t}?"),
        ]
    out = trim(history)
    assert 0 < len(out) < len(history)
    (span,) = cap.spans(n.SPAN_OBSERVE)
    a = dict(span.attributes or {})
    assert a[n.ESTIMATED_TOKENS] == fitter.measure(lc.convert_to_openai_messages(out)).breakdown.estimated
    assert a[n.ESTIMATED_TOKENS] <= 3_000 + 3  # trim_messages' count plus reply priming
    assert a[n.OUTCOME] == "compacted" and a[n.DROPPED_MESSAGES] == len(history) - len(out)
    cap.close()


def test_observed_that_cannot_measure_logs_and_returns(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    wrapped = observed(
        lambda: "not messages", policy=POLICY, task_type="status", model="gpt-4o", emitter=cap.emitter
    )
    with caplog.at_level(logging.WARNING, logger="otel_ctx.telemetry"):
        assert wrapped() == "not messages"
    assert any(r.name == "otel_ctx.telemetry" for r in caplog.records)
    assert cap.spans() == []


def test_observed_inside_a_run_uses_the_runs_fitter_and_rounds(cap: Capture) -> None:
    fitter = ContextFitter(SUPPORT_DESK)
    trim = observed(lambda msgs: msgs[-2:])
    with run(fitter, task_type="status", emitter=cap.emitter) as r:
        trim(long_dispute(4))
        r.fit([user("hi")])
        trim(long_dispute(2))
    spans = sorted((s for s in cap.spans() if s.name != n.SPAN_RUN), key=lambda s: s.start_time or 0)
    assert [(s.name, s.attributes and s.attributes[n.ROUND]) for s in spans] == [
        (n.SPAN_OBSERVE, 1),
        (n.SPAN_FIT, 2),
        (n.SPAN_OBSERVE, 3),
    ]
    assert all(s.attributes and s.attributes[n.TASK_TYPE] == "status" for s in spans)


def test_a_misspelt_setting_is_refused_by_name_where_observed_is_called() -> None:
    """A typo in a setting is a TypeError naming observed() and the setting, in both forms."""
    fitter = ContextFitter(BudgetPolicy(context_length=8_000, reserved_output=500), model="gpt-4o")
    with pytest.raises(TypeError, match=r"observed\(\) got an unexpected keyword argument 'task'"):
        observed(fitter.fit, task="support")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"observed\(\) got an unexpected keyword argument 'modle'"):
        observed(modle="gpt-4o")  # type: ignore[call-overload]
