"""How the reasoning models (o-series, gpt-5 family) frame a function-tool section and a call.

Their section is framed by a preamble of its own in Chat Completions and by two tokens in the
Responses API; within it each function after the first costs a token less than its text, a
function with no parameters or with a described property one more, and a function without a
description one less. A call in a Chat transcript reads its function's name twice, once in the
call and once in the header of the tool message that answers it.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx._encodings import get_encoding
from otel_ctx.adapters._openai_tools import (
    REASONING_CHAT_CALL,
    REASONING_IN_SYSTEM,
    REASONING_PREAMBLE,
    RESPONSES_CALL_FRAMING,
    RESPONSES_REASONING,
    answer_channel,
    call_overhead,
    count_functions,
)
from otel_ctx.engine._tokens import TOKENS_PER_MESSAGE, TokenCounter, resolve_encoding

MODEL = "gpt-5-mini"


def _fn(
    name: str, description: str | None = None, properties: dict[str, Any] | None = None
) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "parameters": {"type": "object", "properties": properties or {}}}
    if description is not None:
        fn["description"] = description
    return {"type": "function", "function": fn}


PLAIN = _fn("paint_fence", "Paint a fence in one colour.", {"colour": {"type": "string"}})
DESCRIBED_PROPERTY = _fn(
    "water_plants", "Water the plants.", {"litres": {"type": "number", "description": "How much water."}}
)
PARAMETERLESS = _fn("ring_bell", "Ring the garden bell.")
UNDESCRIBED = _fn("feed_cat", None, {"portion": {"type": "string"}})
BARE = _fn("open_gate")


def _tokens(text: str) -> int:
    return len(get_encoding("o200k_base").encode(text, disallowed_special=()))


def _section(tools: list[dict[str, Any]]) -> int:
    return count_functions(TokenCounter(resolve_encoding(MODEL), model=MODEL), tools).tokens


def _chat(tools: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None) -> int:
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=MODEL)
    body: dict[str, Any] = {"model": MODEL, "messages": messages or [{"role": "user", "content": "Garden."}]}
    if tools:
        body["tools"] = tools
    return fitter.count_request(body, provider="openai")


def _responses(tools: list[dict[str, Any]]) -> int:
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=MODEL)
    body: dict[str, Any] = {"model": MODEL, "input": "Garden."}
    if tools:
        body["tools"] = [{"type": "function", **t["function"]} for t in tools]
    return fitter.count_request(body, provider="openai-responses")


@pytest.mark.parametrize(
    ("tool", "own"),
    [(PLAIN, 0), (PARAMETERLESS, 1), (DESCRIBED_PROPERTY, 1), (UNDESCRIBED, -1), (BARE, 0)],
)
def test_a_chat_section_alone_is_its_text_the_preamble_and_the_functions_own_token(
    tool: dict[str, Any], own: int
) -> None:
    assert _chat([tool]) - _chat([]) == _section([tool]) + REASONING_PREAMBLE + own


@pytest.mark.parametrize(
    ("tool", "own"),
    [(PLAIN, 0), (PARAMETERLESS, 1), (DESCRIBED_PROPERTY, 1), (UNDESCRIBED, -1), (BARE, 0)],
)
def test_a_further_function_costs_a_token_less_than_its_text_and_its_own_token(
    tool: dict[str, Any], own: int
) -> None:
    added = _chat([PLAIN, tool]) - _chat([PLAIN])
    assert added == _section([PLAIN, tool]) - _section([PLAIN]) - 1 + own


def test_the_responses_section_follows_the_same_rule_with_its_own_framing() -> None:
    tools = [PLAIN, DESCRIBED_PROPERTY, UNDESCRIBED, PARAMETERLESS]
    own = 0 + 1 - 1 + 1
    assert _responses(tools) - _responses([]) == _section(tools) + RESPONSES_REASONING - 3 + own


def _round(name: str, args: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
    return [
        {"role": "user", "content": "Garden."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ]


def test_a_chat_call_reads_its_name_twice() -> None:
    tools = [_fn("go"), _fn("trim_the_overgrown_hedgerow_carefully")]
    short, long = "go", "trim_the_overgrown_hedgerow_carefully"
    assert _tokens(long) > _tokens(short)
    difference = _chat(tools, _round(long, "{}")) - _chat(tools, _round(short, "{}"))
    assert difference == 2 * (_tokens(long) - _tokens(short))


def test_a_chat_call_costs_its_framing_its_name_twice_and_its_arguments() -> None:
    tools = [PLAIN]
    args = '{"colour":"green"}'
    without = _chat(tools, _round("paint_fence", args)[:1])
    one = _chat(tools, _round("paint_fence", args))
    call = call_overhead(MODEL, 1) + REASONING_CHAT_CALL + 2 * _tokens("paint_fence") + _tokens(args)
    rest = 3 + _tokens("assistant") + 3 + _tokens("tool") + _tokens("done")
    assert one - without == call + rest


def test_joined_into_a_leading_system_message_the_section_costs_a_token_less() -> None:
    """A leading system (or developer) message takes the section in with a token less; one after
    the first message leaves its framing as it is."""
    system = {"role": "system", "content": "Be brief."}
    user = {"role": "user", "content": "Garden."}
    for role in ("system", "developer"):
        leading = [{**system, "role": role}, user]
        assert _chat([PLAIN], leading) - _chat([], leading) == (
            _section([PLAIN]) + REASONING_PREAMBLE + REASONING_IN_SYSTEM
        )
    later = [user, system, user]
    assert _chat([PLAIN], later) - _chat([], later) == _section([PLAIN]) + REASONING_PREAMBLE


@pytest.mark.parametrize(
    ("model", "channel"), [("gpt-5-mini", 2), ("gpt-5-chat-latest", 0), ("o3-mini", 0), ("gpt-4o", 0)]
)
def test_an_earlier_answer_of_a_harmony_model_carries_its_channel(model: str, channel: int) -> None:
    """The gpt-5 family reads an earlier answer with its channel marked (two tokens, as the
    open-weight renderer writes ``<|channel|>final``); a message that makes calls is framed as
    its calls are, and the other models add nothing."""
    assert answer_channel(model) == channel

    def count(messages: list[dict[str, Any]]) -> int:
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
        return fitter.count_request({"model": model, "messages": messages}, provider="openai")

    user = {"role": "user", "content": "Garden."}
    answer = {"role": "assistant", "content": "Done."}
    counter = TokenCounter(resolve_encoding(model), model=model)
    framing = TOKENS_PER_MESSAGE + counter.text("assistant") + counter.text("Done.")
    assert count([user, answer, user]) - count([user, user]) == framing + channel


def test_a_family_row_frames_a_responses_call_apart() -> None:
    """A replayed function call in a Responses input costs what its family's row says beside the
    common framing, alone and in a parallel group: the same body differs between two gpt-5 models
    by that row, call by call."""
    calls = [
        {"type": "function_call", "call_id": f"c{i}", "name": "paint_fence", "arguments": '{"colour":"red"}'}
        for i in range(2)
    ]
    outputs = [{"type": "function_call_output", "call_id": f"c{i}", "output": "done"} for i in range(2)]
    user = {"role": "user", "content": "Paint twice."}
    one_by_one = [user, calls[0], outputs[0], calls[1], outputs[1]]
    parallel = [user, *calls, *outputs]

    def count(model: str, items: list[dict[str, Any]]) -> int:
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
        return fitter.count_request({"model": model, "input": items}, provider="openai-responses")

    ((family, alone, grouped),) = RESPONSES_CALL_FRAMING
    assert count(family, one_by_one) - count("gpt-5.2", one_by_one) == 2 * alone
    assert count(family, parallel) - count("gpt-5.2", parallel) == 2 * (alone + grouped)


def test_a_family_row_frames_a_chat_parallel_group_as_in_responses() -> None:
    """In Chat Completions the family's row adds its parallel-group framing to each call of a
    group (the same model reads the group alike in both APIs), and nothing to a lone call, whose
    Chat framing the family shares with the other gpt-5 models."""
    tool = _fn("paint_fence", "Paint it.", {"colour": {"type": "string"}})
    user = {"role": "user", "content": "Paint twice."}

    def transcript(calls: int) -> list[dict[str, Any]]:
        call = {"name": "paint_fence", "arguments": '{"colour":"red"}'}
        made = [{"id": f"c{k}", "type": "function", "function": call} for k in range(calls)]
        answers = [{"role": "tool", "tool_call_id": f"c{k}", "content": "done"} for k in range(calls)]
        return [user, {"role": "assistant", "tool_calls": made}, *answers]

    def count(model: str, messages: list[dict[str, Any]]) -> int:
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
        body = {"model": model, "messages": messages, "tools": [tool]}
        return fitter.count_request(body, provider="openai")

    ((family, _alone, grouped),) = RESPONSES_CALL_FRAMING
    assert count(family, transcript(1)) == count("gpt-5.2", transcript(1))
    for calls in (2, 3):
        assert count(family, transcript(calls)) - count("gpt-5.2", transcript(calls)) == calls * grouped
