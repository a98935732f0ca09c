"""Tool-calling transcripts on the warm path: read once, served from the cache, never stale.

An assistant message that makes tool calls and a tool result are kept by their content
like plain messages, so the next round of a long tool-calling run reads each of them with
one lookup. The cached read must say exactly what the full read says, for good
transcripts and broken ones, and a message changed in place must be read again.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError

POLICY = BudgetPolicy(context_length=1_000_000, reserved_output=1_000, tool_result_cap=60)


def fitter() -> ContextFitter:
    return ContextFitter(POLICY, model="gpt-4o")


def call(cid: str, name: str = "lookup_order", args: str = '{"order": "SO-1"}') -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def full_read(messages: list[dict[str, Any]]) -> list[Any]:
    """The same messages as read-only mappings: they never take the cached path."""
    return [MappingProxyType(m) for m in messages]


def outcome(f: ContextFitter, messages: list[Any], strict: bool) -> tuple[Any, ...]:
    try:
        r = f.fit(messages) if strict else f.measure(messages)
    except OtelCtxError as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", r.breakdown, r.outcome, r.problems, [dict(m) for m in r.messages])


_ids = st.sampled_from(["call_a", "call_b", "call_c"])
_text = st.sampled_from(["", "ok", "Order SO-1: shipped, tracking 7919. " * 6, "x" * 400])
_message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t or "hi"}, _text),
    st.builds(
        lambda ids, content, absent: {
            "role": "assistant",
            **({} if absent else {"content": content}),
            "tool_calls": [call(i, args=json.dumps({"n": k})) for k, i in enumerate(ids)],
        },
        st.lists(_ids, min_size=1, max_size=2),
        st.one_of(st.none(), _text),
        st.booleans(),
    ),
    st.builds(lambda i, t: {"role": "tool", "tool_call_id": i, "content": t}, _ids, _text),
    st.builds(lambda t: {"role": "assistant", "content": t or "done"}, _text),
)


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(_message, min_size=1, max_size=12), strict=st.booleans())
def test_the_cached_read_says_what_the_full_read_says(messages: list[dict[str, Any]], strict: bool) -> None:
    warm = fitter()
    for _ in range(2):  # the second round is served from the cache
        got = outcome(warm, messages, strict)
    assert got == outcome(fitter(), full_read(messages), strict)


def test_a_message_changed_in_place_is_read_again() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Where is my parcel?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
        {"role": "assistant", "content": "It has shipped."},
    ]
    f = fitter()
    f.fit(messages)
    # The same dict objects, changed: longer arguments, a longer result, another call id.
    messages[1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"order": "SO-1", "note": "urgent " * 20}
    )
    messages[2]["content"] = "shipped from the depot at dawn, " * 3
    warm = f.fit(messages)
    assert warm.breakdown == fitter().fit(full_read(messages)).breakdown
    messages[1]["tool_calls"][0]["id"] = "call_2"
    messages[2]["tool_call_id"] = "call_2"
    assert f.fit(messages).breakdown == fitter().fit(full_read(messages)).breakdown


def test_a_warm_round_reads_no_history_message_again() -> None:
    """Each history message is one cache lookup: no text of it is looked up or counted again."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    for k in range(50):
        history += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(f"call_{k}", args=json.dumps({"k": k}))],
            },
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"order {k}: shipped"},
        ]
    f = fitter()
    f.fit(history)
    looked_up: list[str] = []
    counter = f.counter
    original = counter.text

    def text(value: str) -> int:
        looked_up.append(value)
        return original(value)

    counter.text = text  # type: ignore[method-assign]
    try:
        f.fit(history)
    finally:
        counter.text = original  # type: ignore[method-assign]
    assert looked_up == []
