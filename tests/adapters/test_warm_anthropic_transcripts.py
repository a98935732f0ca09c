"""Anthropic tool-calling transcripts on the warm path: the history read last round is not read again.

The messages read last round are kept as a private copy with what each read to; the next
round compares its leading messages with that copy in one go and reads only what follows.
A message changed in place (a nested block, a number that became a bool or a float) is
read again, and every round says what a first read says.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError
from otel_ctx.adapters._base import private_copy

POLICY = BudgetPolicy(context_length=1_000_000, reserved_output=1_000, tool_result_cap=60)
MODEL = "claude-sonnet-4-5"


def fitter() -> ContextFitter:
    return ContextFitter(POLICY, model=MODEL)


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1_000, "messages": messages}


def pair(k: int, value: Any = None) -> list[dict[str, Any]]:
    cid = f"toolu_{k}"
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": cid, "name": "lookup", "input": {"order": k, "v": value}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": cid, "content": f"order {k}: shipped"}],
        },
    ]


def history(pairs: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    for k in range(pairs):
        out += pair(k)
    return out


def outcome(f: ContextFitter, messages: list[dict[str, Any]], strict: bool) -> tuple[Any, ...]:
    try:
        if strict:
            r = f.fit_request(body(messages), provider="anthropic")
        else:
            r = f.measure_request(body(messages), provider="anthropic")
    except OtelCtxError as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", r.breakdown, r.outcome, r.problems, r.messages, r.replies)


def first_read(messages: list[dict[str, Any]], strict: bool = True) -> tuple[Any, ...]:
    return outcome(fitter(), copy.deepcopy(messages), strict)


def test_a_private_copy_tells_numbers_of_another_type_apart() -> None:
    held = private_copy({"a": [1, 1.0, True, None, "x"]})
    assert held == {"a": [1, 1.0, True, None, "x"]}
    assert held != {"a": [True, 1.0, True, None, "x"]}
    assert held != {"a": [1, 1, True, None, "x"]}
    assert held != {"a": [1, 1.0, 1, None, "x"]}
    assert private_copy({"a": (1, 2)}) is None  # a tuple is not JSON's own: read every round


def test_the_history_read_before_is_not_read_again() -> None:
    from otel_ctx.adapters import _anthropic as anthropic

    messages = history(40)
    f = fitter()
    f.fit_request(body([*messages, *pair(100)]), provider="anthropic")
    seen: list[int] = []
    original = anthropic._Reader.message

    def message(self: Any, raw: Any, i: int, *rest: Any) -> Any:
        seen.append(i)
        return original(self, raw, i, *rest)

    anthropic._Reader.message = message  # type: ignore[method-assign]
    try:
        grown = [*messages, *pair(100), *pair(101)]
        warm = outcome(f, grown, True)
        assert seen == [len(grown) - 2, len(grown) - 1]  # the two new messages, none before them
        assert warm == first_read(grown)
    finally:
        anthropic._Reader.message = original  # type: ignore[method-assign]


def test_a_message_changed_in_place_is_read_again() -> None:
    messages = history(20)
    f = fitter()
    f.fit_request(body(messages), provider="anthropic")
    messages[5]["content"][0]["input"]["v"] = True  # was None
    assert outcome(f, messages, True) == first_read(messages)
    messages[5]["content"][0]["input"]["order"] = 2.0  # was the int 2: counted as "2.0"
    assert outcome(f, messages, True) == first_read(messages)
    messages[8]["content"][0]["content"] = "order 3: returned to the depot at dawn, " * 4
    assert outcome(f, messages, True) == first_read(messages)
    messages[9]["content"][0]["id"] = "toolu_0"  # a tool_use id already made
    assert outcome(f, messages, True) == first_read(messages)


_edit = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("retry"), st.integers(0, 3)),
    st.tuples(st.just("retype"), st.integers(0, 30)),
    st.tuples(st.just("text"), st.integers(0, 30)),
    st.tuples(st.just("drop"), st.integers(0, 30)),
    st.tuples(st.just("reuse_id"), st.integers(0, 30)),
)


@settings(max_examples=150, deadline=None)
@given(edits=st.lists(_edit, min_size=1, max_size=8), strict=st.booleans())
def test_rounds_of_a_changing_transcript_say_what_a_first_read_says(
    edits: list[tuple[str, int]], strict: bool
) -> None:
    messages = history(3)
    warm = fitter()
    outcome(warm, messages, strict)
    fresh = iter(range(1_000, 2_000))
    for kind, arg in edits:
        at = arg % len(messages) if messages else 0
        if kind == "append":
            messages += pair(next(fresh), value=[None, 1, 1.0, True][arg])
        elif kind == "retry" and len(messages) > 2:
            messages[-2:] = pair(next(fresh))
        elif kind == "retype" and messages and isinstance(messages[at]["content"], list):
            block = messages[at]["content"][0]
            if block["type"] == "tool_use":
                block["input"]["v"] = [1, 1.0, True, None][arg % 4]
        elif kind == "text" and messages:
            messages[at]["content"] = f"changed {arg}"
        elif kind == "drop" and messages:
            del messages[at]
        elif kind == "reuse_id" and messages and isinstance(messages[at]["content"], list):
            block = messages[at]["content"][0]
            if block["type"] == "tool_use":
                block["id"] = "toolu_0"
        assert outcome(warm, messages, strict) == first_read(messages, strict)
