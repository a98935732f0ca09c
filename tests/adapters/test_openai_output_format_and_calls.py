"""Structured-output sections and replayed function calls, counted as the API writes them."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters import _openai_tools as openai_tools
from otel_ctx.adapters._openai_responses import STORED_CALL_EXTRA
from otel_ctx.adapters._openai_tools import render_output_format
from otel_ctx.engine._tokens import TokenCounter, resolve_encoding

SCHEMA = {
    "type": "object",
    "properties": {
        "required": {"type": "string", "description": "a property named like the keyword"},
        "inner": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    },
    "required": ["required", "inner"],
    "additionalProperties": False,
    "$schema": "https://json-schema.org/draft/2020-12/schema",
}


def _count(body: dict[str, Any], provider: str, model: str = "gpt-4o") -> int:
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
    return fitter.measure_request(body, provider=provider).breakdown.estimated


def test_the_section_leaves_out_what_is_enforced_and_keeps_property_names() -> None:
    text = render_output_format("Answer", "What to answer", SCHEMA)
    head, _, shown = text.partition("// What to answer\n")
    assert head == "# Response Formats\n\n## Answer\n\n"
    schema = json.loads(shown)
    assert "required" in schema["properties"]  # a property, not the keyword
    assert "required" not in schema and "additionalProperties" not in schema and "$schema" not in schema
    assert "required" not in schema["properties"]["inner"]
    assert "additionalProperties" not in schema["properties"]["inner"]
    assert SCHEMA["required"] == ["required", "inner"]  # the caller's schema is untouched


def test_chat_frames_the_section_by_where_it_joins() -> None:
    counter = TokenCounter(resolve_encoding("gpt-4o"))
    section = counter.text(render_output_format("Answer", None, SCHEMA))
    bare: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    fmt = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": SCHEMA, "strict": True}}
    alone = _count({**bare, "response_format": fmt}, "openai") - _count(bare, "openai")
    assert alone == section + openai_tools.FORMAT_NEW_SYSTEM
    with_system = copy.deepcopy(bare)
    with_system["messages"].insert(0, {"role": "system", "content": "Be brief."})
    joined = _count({**with_system, "response_format": fmt}, "openai") - _count(with_system, "openai")
    assert joined == section + openai_tools.FORMAT_IN_SYSTEM
    assert _count({**bare, "response_format": {"type": "json_object"}}, "openai") == _count(bare, "openai")


def test_responses_reads_the_format_at_the_top_of_text() -> None:
    counter = TokenCounter(resolve_encoding("gpt-4o"))
    section = counter.text(render_output_format("Answer", None, SCHEMA))
    bare: dict[str, Any] = {"model": "gpt-4o", "input": "hi"}
    fmt = {"format": {"type": "json_schema", "name": "Answer", "schema": SCHEMA}}
    added = _count({**bare, "text": fmt}, "openai-responses") - _count(bare, "openai-responses")
    assert added == section + openai_tools.FORMAT_RESPONSES


def _with_call(name: str, call: dict[str, Any] | None = None) -> dict[str, Any]:
    item = {"type": "function_call", "call_id": "c1", "name": name, "arguments": "{}", **(call or {})}
    return {
        "model": "gpt-4o",
        "input": [
            {"role": "user", "content": "go"},
            item,
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
        ],
    }


@given(st.from_regex(r"[a-z]{1,12}(_[a-z]{1,12}){0,3}", fullmatch=True))
def test_a_call_reads_its_function_name_twice(name: str) -> None:
    counter = TokenCounter(resolve_encoding("gpt-4o"))
    base = _count(_with_call("f"), "openai-responses")
    assert _count(_with_call(name), "openai-responses") - base == 2 * (counter.text(name) - counter.text("f"))


def test_a_call_replayed_with_its_stored_id_costs_more() -> None:
    plain = _count(_with_call("get_weather"), "openai-responses")
    stored = _count(_with_call("get_weather", {"id": "fc_1"}), "openai-responses")
    assert stored - plain == STORED_CALL_EXTRA


@given(st.integers(min_value=2, max_value=5), st.lists(st.booleans(), min_size=5, max_size=5))
def test_the_calls_of_a_parallel_group_cost_the_same_stored_or_not(calls: int, stored: list[bool]) -> None:
    """The stored extra is a lone call's: in a parallel group (consecutive calls) a call replayed
    with its stored item's id costs what one without does, whichever calls carry an id."""

    def body(with_ids: list[bool]) -> dict[str, Any]:
        made = [
            {"type": "function_call", "call_id": f"c{k}", "name": "lookup", "arguments": f'{{"n":{k}}}'}
            | ({"id": f"fc_{k}"} if with_ids[k] else {})
            for k in range(calls)
        ]
        answers = [{"type": "function_call_output", "call_id": f"c{k}", "output": "ok"} for k in range(calls)]
        return {"model": "gpt-4o", "input": [{"role": "user", "content": "look up"}, *made, *answers]}

    plain = _count(body([False] * calls), "openai-responses")
    assert _count(body(stored), "openai-responses") == plain
    # Alone, each stored call still costs the extra, group or not around it.
    lone = _count(_with_call("lookup", {"id": "fc_1"}), "openai-responses")
    assert lone - _count(_with_call("lookup"), "openai-responses") == STORED_CALL_EXTRA


def test_a_description_is_read_without_its_docstring_indentation() -> None:
    indented = "Get it.\n\n    Args:\n        x: the thing\n    "
    clean = "Get it.\n\nArgs:\n    x: the thing"
    fn = {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}
    a, _ = openai_tools.render_functions([{**fn, "description": indented}])
    b, _ = openai_tools.render_functions([{**fn, "description": clean}])
    assert a == b


def test_naming_the_function_to_call_costs_its_name_on_the_chat_models_only() -> None:
    tool = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}
    base = {"model": "gpt-4o", "messages": [{"role": "user", "content": "where is it"}], "tools": [tool]}
    named = {**base, "tool_choice": {"type": "function", "function": {"name": "lookup_order"}}}
    counter = TokenCounter(resolve_encoding("gpt-4o"), model="gpt-4o")
    added = counter.text("lookup_order") + openai_tools.FORCED_FUNCTION_O200K
    assert _count(named, "openai") - _count({**base, "tool_choice": "auto"}, "openai") == added
    # The cl100k models frame it two tokens less.
    old = {**named, "model": "gpt-4"}
    old_counter = TokenCounter(resolve_encoding("gpt-4"), model="gpt-4")
    assert _count(old, "openai", "gpt-4") - _count({**base, "model": "gpt-4"}, "openai", "gpt-4") == (
        old_counter.text("lookup_order") + openai_tools.FORCED_FUNCTION
    )
    assert openai_tools.FORCED_FUNCTION_O200K == openai_tools.FORCED_FUNCTION + 2
    # The Responses API names it flat, framed as the o200k models' Chat Completions.
    flat = {
        "model": "gpt-4o",
        "input": "where is it",
        "tools": [{"type": "function", "name": "lookup_order"}],
    }
    forced = {**flat, "tool_choice": {"type": "function", "name": "lookup_order"}}
    in_responses = counter.text("lookup_order") + openai_tools.FORCED_FUNCTION_RESPONSES
    assert in_responses == added
    assert _count(forced, "openai-responses") - _count(flat, "openai-responses") == in_responses
    # There "required" with a single function names it; with two it names none, and Chat
    # Completions bills "required" nothing.
    required = {**flat, "tool_choice": "required"}
    assert _count(required, "openai-responses") == _count(forced, "openai-responses")
    two = [*flat["tools"], {"type": "function", "name": "cancel_order"}]
    assert _count({**required, "tools": two}, "openai-responses") == _count(
        {**flat, "tools": two}, "openai-responses"
    )
    assert _count({**base, "tool_choice": "required"}, "openai") == _count(base, "openai")
    # The reasoning models' bills show no such cost, and without tools there is nothing to force.
    reasoning = {**named, "model": "gpt-5-mini"}
    assert _count(reasoning, "openai", "gpt-5-mini") == _count(
        {**base, "model": "gpt-5-mini"}, "openai", "gpt-5-mini"
    )
    no_tools = {k: v for k, v in named.items() if k != "tools"}
    assert _count(no_tools, "openai") == _count({k: v for k, v in base.items() if k != "tools"}, "openai")


def test_the_responses_api_keeps_a_schema_description_in_the_json() -> None:
    described = {**SCHEMA, "description": "An answer to file"}
    text = render_output_format("Answer", None, described, responses=True)
    _, _, shown = text.partition("## Answer\n\n")
    assert "//" not in shown
    assert json.loads(shown)["description"] == "An answer to file"
    # A format's own description is the comment in both APIs.
    assert render_output_format("Answer", "Why", described, responses=True) == render_output_format(
        "Answer", "Why", described
    )


def test_a_schema_description_is_the_formats_comment_when_the_format_has_none() -> None:
    described = {**SCHEMA, "description": "An answer to file"}
    text = render_output_format("Answer", None, described)
    head, _, shown = text.partition("// An answer to file\n")
    assert head == "# Response Formats\n\n## Answer\n\n"
    assert "description" not in json.loads(shown)  # moved out of the JSON, not written twice
    # The format's own description wins; the schema's then stays in the JSON where it is.
    own = render_output_format("Answer", "What to answer", described)
    assert "// What to answer\n" in own and '"description":"An answer to file"' in own


def test_chat_frames_a_section_joined_to_the_system_message_with_four_tokens() -> None:
    counter = TokenCounter(resolve_encoding("gpt-4o"))
    section = counter.text(render_output_format("Answer", None, SCHEMA))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    bare: dict[str, Any] = {"model": "gpt-4o", "messages": messages}
    fmt = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": SCHEMA}}
    joined = _count({**bare, "response_format": fmt}, "openai") - _count(bare, "openai")
    # A system message of its own costs the message's framing (3 tokens and the role) more.
    assert openai_tools.FORMAT_IN_SYSTEM == 4
    assert joined == section + 4
    assert openai_tools.FORMAT_NEW_SYSTEM - openai_tools.FORMAT_IN_SYSTEM == 4


def test_a_reasoning_models_format_in_responses_is_an_estimate_framed_apart() -> None:
    model = "gpt-5.4-mini"
    counter = TokenCounter(resolve_encoding(model))
    section = counter.text(render_output_format("Answer", None, SCHEMA))
    bare: dict[str, Any] = {"model": model, "input": "hi"}
    fmt = {"format": {"type": "json_schema", "name": "Answer", "schema": SCHEMA}}
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
    with_format = fitter.measure_request({**bare, "text": fmt}, provider="openai-responses")
    added = with_format.breakdown.estimated - _count(bare, "openai-responses", model)
    assert added == section + openai_tools.FORMAT_RESPONSES_REASONING
    assert not with_format.exact
    assert "tool_schema" in with_format.estimated_lines
    chat = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gpt-4o")
    chat_body = {"model": "gpt-4o", "input": "hi", "text": fmt}
    # The chat models' format section is an estimate too: no rule of it reproduced every
    # project's bills (see ``CONFIRMED``).
    measured = chat.measure_request(chat_body, provider="openai-responses")
    assert not measured.exact
    assert "tool_schema" in measured.estimated_lines
    assert not openai_tools.confirmed("response-format")


def test_under_a_format_an_earlier_answer_costs_more() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": SCHEMA}}
    user = {"role": "user", "content": "Pick one."}
    answer = {"role": "assistant", "content": '{"value":7}'}

    def added(model: str, extra: dict[str, Any]) -> int:
        bodies = [{"model": model, "messages": m, **extra} for m in ([user, answer, user], [user, user])]
        with_answer, without = (_count(b, "openai", model) for b in bodies)
        return with_answer - without

    assert added("gpt-4o", {"response_format": fmt}) == added("gpt-4o", {}) + openai_tools.FORMAT_ANSWER
    # The reasoning models read it four tokens longer.
    reasoning = added("gpt-5-mini", {"response_format": fmt}) - added("gpt-5-mini", {})
    assert reasoning == openai_tools.FORMAT_ANSWER_REASONING
    # A format that is no schema changes nothing.
    assert added("gpt-4o", {"response_format": {"type": "json_object"}}) == added("gpt-4o", {})


def test_tool_choice_none_costs_a_token_on_the_chat_models_in_chat_completions() -> None:
    """``"none"`` beside the tools is a token more on a chat model in Chat Completions, an estimate
    (the count is never exact with a tool section); a reasoning model and the Responses API bill
    it nothing, and with no tools there is nothing to refuse."""
    tool = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}
    ask = [{"role": "user", "content": "where is it"}]
    for model, added in (("gpt-4o", openai_tools.TOOL_CHOICE_NONE), ("gpt-5-mini", 0)):
        base = {"model": model, "messages": ask, "tools": [tool]}
        none = _count({**base, "tool_choice": "none"}, "openai", model)
        assert none - _count({**base, "tool_choice": "auto"}, "openai", model) == added
    bare = {"model": "gpt-4o", "messages": ask}
    assert _count({**bare, "tool_choice": "none"}, "openai") == _count(bare, "openai")
    flat = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}
    responses = {"model": "gpt-4o", "input": "where is it", "tools": [flat]}
    assert _count({**responses, "tool_choice": "none"}, "openai-responses") == _count(
        responses, "openai-responses"
    )


def test_a_reasoning_models_format_section_of_its_own_is_framed_by_its_family() -> None:
    """With no system message and no tools a reasoning model's format section is its text and
    :data:`FORMAT_NEW_SYSTEM_REASONING`, the chat models' its text and :data:`FORMAT_NEW_SYSTEM`;
    both are estimates."""
    fmt = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": SCHEMA}}
    for model, framing in (
        ("gpt-5.4", openai_tools.FORMAT_NEW_SYSTEM_REASONING),
        ("gpt-4o", openai_tools.FORMAT_NEW_SYSTEM),
    ):
        counter = TokenCounter(resolve_encoding(model), model=model)
        section = counter.text(render_output_format("Answer", None, SCHEMA))
        bare = {"model": model, "messages": [{"role": "user", "content": "Pick one."}]}
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
        measured = fitter.measure_request({**bare, "response_format": fmt}, provider="openai")
        assert measured.breakdown.estimated - _count(bare, "openai", model) == section + framing
        assert not measured.exact
