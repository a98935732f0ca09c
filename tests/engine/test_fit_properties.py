"""Hypothesis properties of the fit: closure, floor, no orphan, order, idempotence, no mutation."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, Source
from otel_ctx.engine._tokens import TOKENS_PER_MESSAGE

WORDS = ["order", "parcel", "refund", "<|endoftext|>", "Übergröße", "📦", "42", "\n", "shelf", "cracked"]
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=60).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        msgs.append({"role": "system", "content": draw(text)})
    call = 0
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "tools":
            n = draw(st.integers(1, 3))
            ids = [f"call_{call + k}" for k in range(n)]
            call += n
            msgs.append(
                {
                    "role": "assistant",
                    "content": draw(st.none() | text),
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
                        for i in ids
                    ],
                }
            )
            # Every call answered (the API rejects a request with a call left open), in any order.
            for i in draw(st.permutations(ids)):
                msgs.append({"role": "tool", "tool_call_id": i, "content": draw(text)})
        else:
            msg: dict[str, Any] = {"role": kind, "content": draw(text)}
            if draw(st.integers(0, 9)) == 0:
                msg["name"] = "agent_b"
            msgs.append(msg)
    return msgs


@st.composite
def fit_cases(draw: st.DrawFn) -> dict[str, Any]:
    msgs = draw(conversations())
    policy = BudgetPolicy(
        context_length=draw(st.integers(300, 4_000)),
        reserved_output=draw(st.integers(0, 100)),
        safety_margin=draw(st.integers(0, 50)),
        request_limit=draw(st.none() | st.integers(250, 4_000)),
        tool_result_cap=draw(st.none() | st.integers(8, 200)),
    )
    pinned = draw(st.lists(st.integers(0, len(msgs) - 1), max_size=2)) if msgs else []
    return {
        "messages": msgs,
        "policy": policy,
        "pinned": pinned,
        "strategy": draw(st.sampled_from(["middle", "oldest"])),
        "calibration": draw(st.sampled_from([1.0, 1.0, 1.07, 1.5, 2.3333])),
        "system_prompt": draw(st.none() | text),
        "skills": draw(st.sampled_from([None, [Source("refunds", "Refund within 30 days.", "internal")]])),
    }


def _fitter(case: dict[str, Any]) -> ContextFitter:
    fitter = ContextFitter(case["policy"], model="gpt-4", strategy=case["strategy"])
    fitter.calibration = case["calibration"]
    return fitter


def _fit(
    fitter: ContextFitter, case: dict[str, Any], messages: list[dict[str, Any]], pinned: Any = None
) -> Any:
    return fitter.fit(messages, system_prompt=case["system_prompt"], skills=case["skills"], pinned=pinned)


def _origin(result_msg: dict[str, Any], originals: list[dict[str, Any]]) -> int:
    """Index of the caller message a result message stands for (itself, or its capped copy)."""
    for i, m in enumerate(originals):
        if result_msg is m:
            return i
    for i, m in enumerate(originals):
        if m["role"] == "tool" and result_msg.get("tool_call_id") == m["tool_call_id"]:
            return i
    raise AssertionError(f"result message {result_msg!r} is not from the caller's list")


@given(fit_cases())
def test_fit_invariants(case: dict[str, Any]) -> None:
    msgs = case["messages"]
    snapshot = copy.deepcopy(msgs)
    fitter = _fitter(case)
    res = _fit(fitter, case, msgs, case["pinned"])
    b = res.breakdown

    # The lines close.
    b.check()
    assert b.budget == case["policy"].budget
    assert (res.outcome == "overflow") == (b.estimated > b.budget)
    if res.outcome == "fit":
        assert res.dropped_turns == 0
        assert len(res.messages) == len(msgs)

    # The caller's data is never mutated.
    assert msgs == snapshot

    # Order kept, untouched messages are the caller's own objects.
    origins = [_origin(m, msgs) for m in res.messages]
    assert origins == sorted(origins)
    assert len(set(origins)) == len(origins)
    for m, i in zip(res.messages, origins):
        assert m is msgs[i] or (m["role"] == "tool" and res.capped_tool_results > 0)
    assert sorted(set(range(len(msgs))) - set(origins)) == list(res.dropped_indices)

    # The pinned floor is kept: leading system messages, the first user message, caller pins,
    # the newest message.
    kept = set(origins)
    leading = 0
    while leading < len(msgs) and msgs[leading]["role"] == "system":
        leading += 1
    must = set(range(leading)) | set(case["pinned"])
    users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    if users:
        must.add(users[0])
    if msgs:
        must.add(len(msgs) - 1)
    assert must <= kept

    # No orphan: every tool result directly follows the assistant that called it, or a
    # sibling result; counting the output (which validates it) succeeds.
    fitter.count(res.messages)
    for k, m in enumerate(res.messages):
        if m["role"] == "tool":
            j = k - 1
            while res.messages[j]["role"] == "tool":
                j -= 1
            call_ids = [c["id"] for c in res.messages[j].get("tool_calls") or []]
            assert m["tool_call_id"] in call_ids

    # The estimate the decision used is the request as sent, re-measured.
    again = fitter.measure(
        res.messages, system_prompt=case["system_prompt"], skills=case["skills"], policy=case["policy"]
    )
    assert again.breakdown.estimated == b.estimated

    # Idempotent: fitting the output again (with the same messages pinned) changes nothing.
    repinned = [k for k, i in enumerate(origins) if i in set(case["pinned"])]
    second = _fit(fitter, case, res.messages, repinned)
    assert second.messages == res.messages
    assert all(x is y for x, y in zip(second.messages, res.messages))
    assert second.outcome == ("overflow" if res.outcome == "overflow" else "fit")


@given(fit_cases())
def test_capped_tool_results_are_within_the_cap(case: dict[str, Any]) -> None:
    fitter = _fitter(case)
    res = _fit(fitter, case, case["messages"])
    cap = case["policy"].tool_result_cap
    if cap is None:
        assert res.capped_tool_results == 0
        return
    for m in res.messages:
        if m["role"] == "tool":
            assert fitter.counter.text(m["content"]) <= cap
    assert b_roles_sum(res) == res.breakdown.transcript


def b_roles_sum(res: Any) -> int:
    return sum(res.breakdown.transcript_by_role.values())


@given(conversations(), text)
def test_appending_a_message_adds_exactly_its_own_cost(msgs: list[dict[str, Any]], extra: str) -> None:
    fitter = ContextFitter(BudgetPolicy(100_000, 0), model="gpt-4")
    total = fitter.count(msgs)
    assert total >= 3 + TOKENS_PER_MESSAGE * len(msgs)
    new = {"role": "user", "content": extra}
    # A request costs its messages plus one reply priming (3 tokens), whatever came before.
    assert fitter.count([*msgs, new]) - total == fitter.count([new]) - 3


@given(conversations(), st.integers(300, 4_000), st.integers(0, 250), st.integers(0, 50))
def test_measuring_against_a_given_policy_closes_its_lines_and_keeps_the_count(
    msgs: list[dict[str, Any]], context_length: int, reserved: int, margin: int
) -> None:
    """A measure against a call's own policy (the instrumentor's) changes the budget lines only:
    the same counts, limit − reserve − margin = budget, remaining = budget − estimate, and the
    outcome is "fit" exactly when the estimate is within that budget."""
    own = BudgetPolicy(context_length=context_length, reserved_output=reserved, safety_margin=margin)
    fitter = ContextFitter(BudgetPolicy(context_length=1 << 40, reserved_output=0), model="gpt-4o")
    body = {"model": "gpt-4o", "messages": msgs}
    before = copy.deepcopy(body)
    plain = fitter.measure_request(body, provider="openai")
    measured = fitter.measure_request(body, provider="openai", task_type="returns", policy=own)
    assert body == before
    b, p = measured.breakdown, plain.breakdown
    assert (b.transcript, b.tool_schema, b.system_prompt, b.skills, b.estimated) == (
        p.transcript,
        p.tool_schema,
        p.system_prompt,
        p.skills,
        p.estimated,
    )
    assert b.transcript + b.tool_schema + b.system_prompt + b.skills + b.server_held == b.estimated
    assert (b.context_length, b.reserved_output, b.safety_margin) == (context_length, reserved, margin)
    assert b.context_length - b.reserved_output - b.safety_margin == b.budget == own.budget
    assert b.remaining == b.budget - b.estimated
    assert measured.outcome == ("fit" if b.estimated <= b.budget else "overflow")
    assert measured.task_type == "returns"
    assert measured.dropped_messages == 0
