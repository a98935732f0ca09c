"""Trims in one vocabulary: otel-ctx's own compaction and the agent's trimmer, as provider trims are."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages
from telemetry_capture import Capture

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx import names as n
from otel_ctx.telemetry import observed, run
from otel_ctx.telemetry._trim import Trim

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800, request_limit=2_000)


@pytest.fixture
def cap() -> Iterator[Capture]:
    c = Capture()
    yield c
    c.close()


def _history(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append({"role": "user", "content": f"Question {i}: " + "where is my parcel " * 40})
        out.append({"role": "assistant", "content": f"Answer {i}: " + "it is on its way " * 40})
    return out


def _trims(cap: Capture) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for s in cap.spans() for e in s.events if e.name == n.EVENT_TRIM]


def _trimmed(cap: Capture) -> dict[str, int]:
    return {dict(p.attributes)[n.TRIM_PERFORMER]: p.value for p in cap.points(n.TRIMMED_TOKENS.name)}


def test_otel_ctx_compaction_is_a_trim_by_otel_ctx_with_its_token_counts(cap: Capture) -> None:
    fitter = ContextFitter(POLICY, model="gpt-4o")
    with run(fitter, task_type=None, emitter=cap.emitter) as r:
        result = r.fit(_history(12))
        r.fit(_history(1))  # fits whole: no trim
    assert result.dropped_messages > 0
    (ev,) = _trims(cap)
    assert ev[n.TRIM_PERFORMER] == "otel_ctx" and ev[n.TRIM_KIND] == "drop"
    assert ev[n.TRIM_TOKENS_AFTER] == result.breakdown.estimated
    assert ev[n.TRIM_TOKENS_BEFORE] == fitter.measure(_history(12)).breakdown.estimated
    assert ev[n.TRIM_ITEMS_REMOVED] == result.dropped_messages
    removed = ev[n.TRIM_TOKENS_BEFORE] - ev[n.TRIM_TOKENS_AFTER]
    assert _trimmed(cap) == {"otel_ctx": removed, "provider": 0, "framework": 0, "agent": 0}


def test_an_observed_trimmer_is_a_trim_by_the_agent(cap: Capture) -> None:
    history: list[BaseMessage] = []
    for i in range(10):
        history += [
            HumanMessage(f"Question {i}: " + "parcel " * 50),
            AIMessage(f"Answer {i}: " + "soon " * 50),
        ]

    @observed(policy=POLICY, model="gpt-4o", emitter=cap.emitter)
    def trim(messages: list[BaseMessage]) -> list[BaseMessage]:
        return trim_messages(messages, max_tokens=4, token_counter=len, strategy="last")

    kept = trim(history)
    (ev,) = _trims(cap)
    assert ev[n.TRIM_PERFORMER] == "agent"
    assert ev[n.TRIM_ITEMS_REMOVED] == len(history) - len(kept)
    assert ev[n.TRIM_TOKENS_BEFORE] > ev[n.TRIM_TOKENS_AFTER] > 0


@given(
    performer=st.sampled_from(n.PERFORMERS),
    kind=st.sampled_from(n.TRIM_KINDS),
    before=st.integers(0, 10**7),
    after=st.integers(0, 10**7),
)
def test_a_trim_removes_what_it_says_and_never_a_negative_count(
    performer: str, kind: str, before: int, after: int
) -> None:
    trim = Trim(performer, kind, before, after)
    assert trim.removed == max(0, before - after)
    assert set(trim.attributes()) == {
        n.TRIM_PERFORMER, n.TRIM_KIND, n.TRIM_TOKENS_BEFORE, n.TRIM_TOKENS_AFTER, n.TRIM_ITEMS_REMOVED
    }  # fmt: skip


def test_a_performer_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="performer"):
        Trim("someone", "drop", 10, 5)
