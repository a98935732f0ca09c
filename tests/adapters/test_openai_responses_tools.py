"""Function tools in the Responses API: how titles, defaults and the section's framing are counted."""

from __future__ import annotations

from typing import Any

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters import _openai_tools as openai_tools
from otel_ctx.adapters._openai_tools import render_functions
from otel_ctx.engine._tokens import TokenCounter, resolve_encoding

PART = {
    "type": "object",
    "title": "Part",
    "properties": {"sku": {"type": "string", "title": "Sku"}, "count": {"type": "integer"}},
    "required": ["sku", "count"],
}
ORDER = {
    "name": "place_order",
    "description": "Order a part.",
    "parameters": {
        "type": "object",
        "title": "place_order_args",
        "$defs": {"Part": PART},
        "properties": {
            "part": {"$ref": "#/$defs/Part"},
            "note": {"type": "string", "title": "Note"},
            "rush": {"type": "string", "title": "Rush", "description": "How fast."},
        },
        "required": ["part", "note", "rush"],
    },
}


def _measure(body: dict[str, Any]) -> Any:
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=body["model"])
    return fitter.measure_request(body, provider="openai-responses")


def _tool_cost(functions: list[dict[str, Any]], **extra: Any) -> int:
    bare: dict[str, Any] = {"model": "gpt-4o", "input": "hi", **extra}
    tools = [{"type": "function", **fn} for fn in functions]
    return int(_measure({**bare, "tools": tools}).breakdown.estimated - _measure(bare).breakdown.estimated)


def _text_tokens(functions: list[dict[str, Any]]) -> int:
    text, _ = render_functions(functions, lone_titles=True)
    return TokenCounter(resolve_encoding("gpt-4o")).text(text)


def test_titles_open_what_they_name_as_comments() -> None:
    text, known = render_functions([ORDER], lone_titles=True)
    assert not known  # a reference to a nested object: an estimate (no bill confirms its rendering)
    # The schema's title opens its type, a nested object's title its brace.
    assert "type place_order = (_: // place_order_args\n{\npart: // Part\n{\n" in text
    # A lone title is one comment line; with a description a blank comment parts the two.
    assert "// Sku\nsku: string,\ncount: number,\n}," in text
    assert "// Note\nnote: string,\n// Rush\n//\n// How fast.\nrush: string,\n}) => any;" in text
    assert "any;place_order_args" not in text


def test_chat_completions_keeps_a_blank_comment_after_a_lone_title() -> None:
    chat, _ = render_functions([ORDER])
    responses, _ = render_functions([ORDER], lone_titles=True)
    assert "// Note\n//\nnote: string," in chat
    assert chat.replace("//\n", "") == responses.replace("//\n", "")


def test_joined_into_a_system_message_a_lone_title_is_one_comment_line() -> None:
    """Chat Completions writes a lone title as the Responses API does when the section joins the
    request's system message, and with a blank comment after it in a section of its own."""
    tool = {"type": "function", "function": ORDER}
    user = {"role": "user", "content": "hi"}
    counter = TokenCounter(resolve_encoding("gpt-4o"))
    own, _ = render_functions([ORDER])
    joined, _ = render_functions([ORDER], lone_titles=True)
    blanks = counter.text(own) - counter.text(joined)
    assert blanks > 0

    def cost(messages: list[dict[str, Any]]) -> int:
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gpt-4o")
        body = {"model": "gpt-4o", "messages": messages}
        with_tools = fitter.measure_request({**body, "tools": [tool]}, provider="openai")
        return int(
            with_tools.breakdown.estimated
            - fitter.measure_request(body, provider="openai").breakdown.estimated
        )

    alone = cost([user])
    in_system = cost([{"role": "system", "content": "Be brief."}, user])
    own_section = openai_tools.count_functions(counter, [tool])
    joined_section = openai_tools.count_functions(counter, [tool], lone_titles=True)
    assert own_section.tokens - joined_section.tokens == blanks
    assert alone == own_section.tokens + openai_tools.section_framing(
        "gpt-4o", "o200k_base", False, own_section
    )
    assert in_system == joined_section.tokens + openai_tools.section_framing(
        "gpt-4o", "o200k_base", True, joined_section
    )


def test_a_string_default_is_quoted_and_an_enum_value_is_not() -> None:
    fn = {
        "name": "f",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {"type": "string", "default": ""},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                "n": {"type": "integer", "default": 3},
            },
        },
    }
    text, _ = render_functions([fn])
    assert 'q?: string, // default: ""\n' in text
    assert 'unit?: "c" | "f", // default: c\n' in text
    assert "n?: number, // default: 3\n" in text


def test_a_first_function_with_parameters_but_no_description_costs_a_token_less() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    bare = [{"name": "lookup", "parameters": params}]
    described = [{"name": "lookup", "description": "Look it up.", "parameters": params}]
    assert _tool_cost(bare) == _text_tokens(bare) + openai_tools.RESPONSES_CHAT + openai_tools.BARE_FIRST
    assert _tool_cost(described) == _text_tokens(described) + openai_tools.RESPONSES_CHAT
    assert _tool_cost(bare) - _text_tokens(bare) == _tool_cost(described) - _text_tokens(described) - 1
    # A function without parameters is not bare in that sense.
    none = [{"name": "ping"}]
    assert _tool_cost(none) == _text_tokens(none) + openai_tools.RESPONSES_CHAT


def test_a_later_function_costs_a_token_less_only_when_its_first_property_has_no_comment() -> None:
    first = {"name": "ping", "description": "Ping."}

    def second(prop: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": "send",
            "description": "Send it.",
            "parameters": {"type": "object", "properties": {"to": prop, "body": {"type": "string"}}},
        }

    plain = [first, second({"type": "string"})]
    titled = [first, second({"type": "string", "title": "To"})]
    described = [first, second({"type": "string", "description": "Who gets it."})]
    frame = openai_tools.RESPONSES_CHAT
    assert _tool_cost(plain) == _text_tokens(plain) + frame + openai_tools.PLAIN_AFTER_FIRST
    assert _tool_cost(titled) == _text_tokens(titled) + frame
    assert _tool_cost(described) == _text_tokens(described) + frame
    assert _tool_cost(plain) - _text_tokens(plain) == _tool_cost(titled) - _text_tokens(titled) - 1
    # A later function without parameters costs its text.
    pings = [first, {"name": "pong", "description": "Pong."}]
    assert _tool_cost(pings) == _text_tokens(pings) + frame
    # The same holds with instructions.
    with_instructions = _tool_cost(plain, instructions="Be brief.")
    assert with_instructions == _text_tokens(plain) + frame + openai_tools.PLAIN_AFTER_FIRST


def test_empty_instructions_make_the_count_a_bound() -> None:
    body: dict[str, Any] = {"model": "gpt-4o", "input": "hi"}
    assert _measure({**body, "instructions": "Be brief."}).exact
    empty = _measure({**body, "instructions": ""})
    assert not empty.exact
    assert "empty instructions" in empty.unknowns
    assert _measure(body).exact


def test_a_referenced_objects_description_opens_it_after_its_title() -> None:
    described = {**PART, "description": "One part of an order."}
    fn = {**ORDER, "parameters": {**ORDER["parameters"], "$defs": {"Part": described}}}
    text, known = render_functions([fn], lone_titles=True)
    assert "part: // Part\n// One part of an order.\n{\n" in text
    assert not known  # a reference: an estimate
    # A property's own description is written once, above the property, not again at its brace.
    inline = {**ORDER, "parameters": {**ORDER["parameters"], "properties": {"part": described}}}
    text, _ = render_functions([inline], lone_titles=True)
    assert text.count("One part of an order.") == 1
