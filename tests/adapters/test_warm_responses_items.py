"""Responses input items on the warm path: the items read last round are not read again.

The items read last round are kept as a private copy with what each read to; the next round
compares its leading items with that copy in one go and reads only what follows. An item
changed in place is read again, and every round says what a first read says.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError

POLICY = BudgetPolicy(context_length=1_000_000, reserved_output=1_000, tool_result_cap=60)
MODEL = "gpt-4o"


def fitter() -> ContextFitter:
    return ContextFitter(POLICY, model=MODEL)


def body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "input": items}


def pair(k: int) -> list[dict[str, Any]]:
    cid = f"call_{k}"
    return [
        {"type": "function_call", "call_id": cid, "name": "lookup", "arguments": f'{{"order": {k}}}'},
        {"type": "function_call_output", "call_id": cid, "output": f"order {k}: shipped"},
    ]


def history(pairs: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    for k in range(pairs):
        out += pair(k)
    return out


def outcome(f: ContextFitter, items: list[dict[str, Any]], strict: bool) -> tuple[Any, ...]:
    try:
        if strict:
            r = f.fit_request(body(items), provider="openai-responses")
        else:
            r = f.measure_request(body(items), provider="openai-responses")
    except OtelCtxError as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", r.breakdown, r.outcome, r.problems, r.messages, r.replies)


def first_read(items: list[dict[str, Any]], strict: bool = True) -> tuple[Any, ...]:
    return outcome(fitter(), copy.deepcopy(items), strict)


def test_the_items_read_before_are_not_read_again() -> None:
    from otel_ctx.adapters import _openai_responses as openai_responses

    items = history(40)
    f = fitter()
    f.fit_request(body([*items, *pair(100)]), provider="openai-responses")
    seen: list[int] = []
    original = openai_responses._Reader.item

    def item(self: Any, raw: Any, where: str, i: int) -> Any:
        seen.append(i)
        return original(self, raw, where, i)

    openai_responses._Reader.item = item  # type: ignore[method-assign]
    try:
        grown = [*items, *pair(100), *pair(101)]
        warm = outcome(f, grown, True)
        assert seen == [len(grown) - 2, len(grown) - 1]  # the two new items, none before them
        assert warm == first_read(grown)
    finally:
        openai_responses._Reader.item = original  # type: ignore[method-assign]


def test_an_item_changed_in_place_is_read_again() -> None:
    items = history(20)
    f = fitter()
    f.fit_request(body(items), provider="openai-responses")
    items[5]["arguments"] = '{"order": 2, "note": "' + "urgent " * 20 + '"}'
    assert outcome(f, items, True) == first_read(items)
    items[8]["output"] = "order 3: returned to the depot at dawn, " * 4  # cut at the cap now
    assert outcome(f, items, True) == first_read(items)
    items[9]["call_id"] = "call_0"  # a call id already made
    assert outcome(f, items, True) == first_read(items)


_edit = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("retry"), st.integers(0, 3)),
    st.tuples(st.just("text"), st.integers(0, 30)),
    st.tuples(st.just("drop"), st.integers(0, 30)),
    st.tuples(st.just("reuse_id"), st.integers(0, 30)),
    st.tuples(st.just("answer_twice"), st.integers(0, 30)),
)


@settings(max_examples=150, deadline=None)
@given(edits=st.lists(_edit, min_size=1, max_size=8), strict=st.booleans())
def test_rounds_of_changing_items_say_what_a_first_read_says(
    edits: list[tuple[str, int]], strict: bool
) -> None:
    items = history(3)
    warm = fitter()
    outcome(warm, items, strict)
    fresh = iter(range(1_000, 2_000))
    for kind, arg in edits:
        at = arg % len(items) if items else 0
        if kind == "append":
            items += pair(next(fresh))[: 1 + arg % 2]
        elif kind == "retry" and len(items) > 2:
            items[-2:] = pair(next(fresh))
        elif kind == "text" and items:
            key = "content" if "role" in items[at] else "arguments" if "arguments" in items[at] else "output"
            items[at][key] = f"changed {arg} " * (arg % 9 + 1)
        elif kind == "drop" and items:
            del items[at]
        elif kind == "reuse_id" and items and "call_id" in items[at]:
            items[at]["call_id"] = "call_0"
        elif kind == "answer_twice" and items and items[at].get("type") == "function_call_output":
            items.append(dict(items[at]))
        assert outcome(warm, items, strict) == first_read(items, strict)
