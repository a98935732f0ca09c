"""How a Chat Completions transcript's tool calls are counted for the chat models.

The API stores a call as it re-serialises it: its arguments as compact JSON, its name both bare
and as the ``functions.`` recipient, and a parallel group as one ``multi_tool_use.parallel``
call whose JSON lists every recipient and its parameters. The reasoning models frame calls
their own way and keep their rule.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx._encodings import get_encoding
from otel_ctx.adapters._openai_tools import PARALLEL_GROUP, REASONING_CHAT_CALL, SINGLE_CALL, call_overhead

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "lookup_item",
            "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        },
    }
]


def _count(messages: list[dict[str, Any]], model: str = "gpt-4o") -> int:
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
    return fitter.count_request({"model": model, "messages": messages, "tools": TOOLS}, provider="openai")


def _round(calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A user turn, an assistant message making ``calls``, and one result per call."""
    made = [
        {"id": f"call_{k}", "type": "function", "function": {"name": name, "arguments": args}}
        for k, (name, args) in enumerate(calls)
    ]
    results = [{"role": "tool", "tool_call_id": f"call_{k}", "content": "ok"} for k in range(len(calls))]
    return [
        {"role": "user", "content": "Find the item."},
        {"role": "assistant", "content": None, "tool_calls": made},
        *results,
    ]


def _tokens(text: str) -> int:
    return len(get_encoding("o200k_base").encode(text, disallowed_special=()))


def test_arguments_are_counted_as_compact_json() -> None:
    spaced = _count(_round([("lookup_item", '{"sku": "A-1",   "qty": 2}')]))
    compact = _count(_round([("lookup_item", '{"sku":"A-1","qty":2}')]))
    assert spaced == compact


def test_arguments_that_are_not_json_are_counted_as_sent() -> None:
    broken = '{"sku": "A-1"'
    base = _count(_round([("lookup_item", "")]))
    assert _count(_round([("lookup_item", broken)])) == base + _tokens(broken)


def test_a_single_call_costs_its_name_bare_and_as_recipient() -> None:
    without = _count(_round([("lookup_item", "{}")])[:1])
    one = _count(_round([("lookup_item", "{}")]))
    results = 3 + _tokens("tool") + _tokens("ok")  # the result message as any tool message
    assistant = 3 + _tokens("assistant")
    call = SINGLE_CALL + _tokens("lookup_item") + _tokens("functions.lookup_item") + _tokens("{}")
    assert one - without == assistant + call + results


def test_a_parallel_group_is_counted_as_one_multi_tool_call() -> None:
    calls = [("lookup_item", '{"sku": "A-1"}'), ("lookup_item", '{"sku": "B-2"}')]
    without = _count(_round(calls)[:1])
    both = _count(_round(calls))
    envelope = json.dumps(
        {"tool_uses": [{"recipient_name": f"functions.{n}", "parameters": json.loads(a)} for n, a in calls]},
        separators=(",", ":"),
    )
    results = 2 * (3 + _tokens("tool") + _tokens("ok"))
    assert both - without == 3 + _tokens("assistant") + PARALLEL_GROUP + _tokens(envelope) + results


def test_reasoning_models_keep_their_call_framing() -> None:
    calls = [("lookup_item", '{"sku": "A-1"}')]
    enc = get_encoding("o200k_base")
    without = _count(_round(calls)[:1], model="gpt-5")
    one = _count(_round(calls), model="gpt-5")
    # The name is read twice: in the call and in the header of the tool message answering it.
    name = 2 * len(enc.encode("lookup_item"))
    call = call_overhead("gpt-5", 1) + REASONING_CHAT_CALL + name + len(enc.encode('{"sku": "A-1"}'))
    rest = 3 + len(enc.encode("assistant")) + 3 + len(enc.encode("tool")) + len(enc.encode("ok"))
    assert one - without == call + rest


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4), st.integers(0, 4))
def test_the_count_does_not_depend_on_how_the_arguments_are_spaced(args: dict[str, Any], indent: int) -> None:
    spaced = json.dumps(args, indent=indent or None, ensure_ascii=False)
    compact = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    assert _count(_round([("lookup_item", spaced)])) == _count(_round([("lookup_item", compact)]))
    pair_spaced = [("lookup_item", spaced), ("lookup_item", spaced)]
    pair_compact = [("lookup_item", compact), ("lookup_item", compact)]
    assert _count(_round(pair_spaced)) == _count(_round(pair_compact))


def _answered(results: list[str], model: str = "gpt-4o") -> int:
    """A round of one call per result (a parallel group when more than one), answered so."""
    calls = [("lookup_item", json.dumps({"sku": f"A-{k}"})) for k in range(len(results))]
    messages = _round(calls)
    for message, result in zip(messages[2:], results):
        message["content"] = result
    return _count(messages, model)


def test_a_parallel_groups_results_are_read_back_as_one_json_list() -> None:
    pretty = json.dumps({"sku": "A-1", "stock": [1, 2]}, indent=2)
    compact = json.dumps({"sku": "A-1", "stock": [1, 2]}, separators=(",", ":"))
    note = "Out of stock: café"
    ok = _answered(["ok", "ok"])
    both = _answered([pretty, note])
    # One tool message for the group: the JSON list of the results, a JSON result as its value,
    # written with the default separators and non-ASCII escaped.
    listed = json.dumps([json.loads(pretty), note])
    assert "\\u00e9" in listed
    assert both - ok == _tokens(listed) - _tokens(json.dumps(["ok", "ok"]))
    assert _answered([compact, note]) == both
    # A single call's result is read as written.
    assert _answered([pretty]) - _answered(["ok"]) == _tokens(pretty) - _tokens("ok")
    assert _answered([pretty]) != _answered([compact])


def test_the_reasoning_models_read_a_groups_results_one_message_each() -> None:
    pretty = json.dumps({"sku": "A-1", "stock": [1, 2]}, indent=2)
    compact = json.dumps({"sku": "A-1", "stock": [1, 2]}, separators=(",", ":"))
    grouped = _answered([pretty, "ok"], "gpt-5") - _answered([compact, "ok"], "gpt-5")
    assert grouped == _tokens(pretty) - _tokens(compact)
