"""The Chat Completions tool section: how its text is written and framed for the chat models.

Each rule is checked on made-up functions, as the difference it makes between two requests
or as the section's text written out by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters import _openai_tools as openai_tools
from otel_ctx.engine._tokens import TokenCounter, resolve_encoding

ASK = {"role": "user", "content": "Plan the trip."}
RULES = {"role": "system", "content": "You plan trips."}


def _fn(name: str, description: str | None = None, **props: dict[str, Any]) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name}
    if description is not None:
        fn["description"] = description
    if props:
        fn["parameters"] = {"type": "object", "properties": props, "required": list(props)}
    return {"type": "function", "function": fn}


def _section(tools: list[dict[str, Any]], *, system: bool = False, model: str = "gpt-4o") -> int:
    """The tokens booked for ``tools`` in a one-question request."""
    messages = [RULES, ASK] if system else [ASK]
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
    body = {"model": model, "messages": messages, "tools": tools}
    return fitter.measure_request(body, provider="openai").breakdown.tool_schema


def _text(text: str, model: str = "gpt-4o") -> int:
    return TokenCounter(resolve_encoding(model), model=model).text(text)


def _wrapped(body: str) -> str:
    return f"# Tools\n\n## functions\n\nnamespace functions {{\n\n{body}\n\n}} // namespace functions"


def test_a_multi_line_description_bills_as_one_comment_a_line() -> None:
    doc = "Book a room.\n\n    Args:\n        city: where to stay\n    "
    tools = [_fn("book_room", doc, city={"type": "string"})]
    expected = _wrapped(
        "// Book a room.\n//\n// Args:\n// city: where to stay\n"
        "type book_room = (_: {\ncity: string,\n}) => any;"
    )
    assert _section(tools) == _text(expected) + openai_tools.NEW_SYSTEM


def test_a_multi_line_property_description_is_commented_line_by_line() -> None:
    prop = {"type": "string", "description": "The city.\n    Spelled in full."}
    tools = [_fn("find_hotel", "Find a hotel.", city=prop)]
    expected = _wrapped(
        "// Find a hotel.\ntype find_hotel = (_: {\n"
        "// The city.\n// Spelled in full.\ncity: string,\n}) => any;"
    )
    assert openai_tools.render_functions([t["function"] for t in tools])[0] == expected


def test_joined_into_a_system_message_a_bare_first_function_bills_one_token_less() -> None:
    bare = _fn("find_hotel", city={"type": "string"})
    described = _fn("find_train", "Find a train.", city={"type": "string"})
    no_params = _fn("list_cities")

    def framing(tools: list[dict[str, Any]], system: bool) -> int:
        fns = [t["function"] for t in tools]
        return _section(tools, system=system) - _text(openai_tools.render_functions(fns)[0])

    # Joined, the second function opens on a property with no comment: a token less for it.
    joined = openai_tools.IN_SYSTEM + openai_tools.PLAIN_AFTER_FIRST
    assert framing([bare, described], True) == joined + openai_tools.BARE_FIRST
    assert framing([described, bare], True) == joined
    # A first function without parameters is not bare, and in a section of its own nothing changes.
    assert framing([no_params, bare], True) == joined
    # A later function whose first property is described costs its text.
    commented = _fn("find_train", "Find a train.", city={"type": "string", "description": "The city."})
    assert framing([described, commented], True) == openai_tools.IN_SYSTEM
    alone = openai_tools.NEW_SYSTEM + openai_tools.PER_FURTHER_FUNCTION
    assert framing([bare, described], False) == framing([described, bare], False) == alone


def test_a_default_is_a_comment_like_a_description() -> None:
    plain = _fn("find_hotel", "Find a hotel.", pets={"type": "boolean"})
    defaulted = _fn("find_hotel", "Find a hotel.", pets={"type": "boolean", "default": False})
    text = {
        name: _text(openai_tools.render_functions([tool["function"]])[0])
        for name, tool in (("plain", plain), ("defaulted", defaulted))
    }
    # In a section of its own a commented function bills one token more than its text.
    assert _section([plain]) - text["plain"] == openai_tools.NEW_SYSTEM
    assert _section([defaulted]) - text["defaulted"] == openai_tools.NEW_SYSTEM + 1


def test_legacy_functions_joined_into_a_system_message_cost_a_token_more_than_tools() -> None:
    fn = _fn("find_hotel", "Find a hotel.", city={"type": "string", "description": "The city."})
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gpt-3.5-turbo")

    def schema(body: dict[str, Any]) -> int:
        return fitter.measure_request(body, provider="openai").breakdown.tool_schema

    for messages, extra in (([RULES, ASK], openai_tools.LEGACY_FUNCTIONS_IN_SYSTEM), ([ASK], 0)):
        as_tools = {"model": "gpt-3.5-turbo", "messages": messages, "tools": [fn]}
        as_functions = {"model": "gpt-3.5-turbo", "messages": messages, "functions": [fn["function"]]}
        assert schema(as_functions) == schema(as_tools) + extra
    text = _text(openai_tools.render_functions([fn["function"]])[0], "gpt-3.5-turbo")
    assert (
        schema({"model": "gpt-3.5-turbo", "messages": [RULES, ASK], "tools": [fn]})
        == text + openai_tools.IN_SYSTEM
    )


def test_a_tool_results_name_is_not_billed() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "find_hotel", "arguments": "{}"}}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "Hotel Adler"}
    messages = [ASK, {"role": "assistant", "content": None, "tool_calls": [call]}, result]
    fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gpt-4o")
    tools = [_fn("find_hotel")]

    def count(msgs: list[dict[str, Any]]) -> int:
        return fitter.count_request({"model": "gpt-4o", "messages": msgs, "tools": tools}, provider="openai")

    named = [*messages[:2], {**result, "name": "find_hotel"}]
    assert count(named) == count(messages)
    # A user's name still is.
    assert count([{**ASK, "name": "ada"}, *messages[1:]]) > count(messages)


def test_a_commented_union_property_is_written_one_alternative_a_line_when_joined() -> None:
    """Joined into a system message (and in the Responses API) a union with a comment is written
    one alternative a line; in a Chat Completions section of its own it stays inline, as a lone
    title there is followed by a blank comment: the two renderings differ alike."""
    day = {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}], "title": "Day"}
    tools = [_fn("book_room", "Book a room.", day=day)]
    text, known = openai_tools.render_functions([tools[0]["function"]], lone_titles=True)
    # The name alone, one `` | type`` line per alternative (a format as its comment), a lone comma.
    assert "// Day\nday:\n | string // format: date\n | null\n,\n}) => any;" in text
    assert not known  # a union is still an estimate
    own, known = openai_tools.render_functions([tools[0]["function"]])
    assert "// Day\n//\nday: string | null,\n}) => any;" in own
    assert not known
    assert _section(tools) == _text(own) + openai_tools.NEW_SYSTEM + openai_tools.commented(
        [tools[0]["function"]]
    )
    # A description is a comment too; a default goes above the name (joined), after the type (own).
    described = {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "Nights.", "default": None}
    fn = _fn("f", "F.", nights=described)["function"]
    text, _ = openai_tools.render_functions([fn], lone_titles=True)
    assert "// Nights.\n// default: null\nnights:\n | number\n | null\n," in text
    own, _ = openai_tools.render_functions([fn])
    assert "// Nights.\nnights: number | null, // default: null\n" in own


def test_a_union_property_without_a_comment_stays_on_one_line() -> None:
    names = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    text, _ = openai_tools.render_functions([_fn("ask", "Ask.", repo=names)["function"]])
    assert "repo: string | string[],\n" in text


def _tool_fitter() -> ContextFitter:
    return ContextFitter(BudgetPolicy(context_length=128_000, reserved_output=1_000), model="gpt-4o")


def test_a_tool_list_changed_in_place_is_counted_anew() -> None:
    """The same list object, one description edited in place: counted as a fresh fitter counts it."""
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look an order up.",
                "parameters": {"type": "object", "properties": {"k": {"type": "integer"}}},
            },
        }
    ]
    messages = [{"role": "user", "content": "Where is my order?"}]
    f = _tool_fitter()
    before = f.measure(messages, tools=tools).breakdown.estimated
    tools[0]["function"]["description"] = "Look an order up, with every detail of its shipping and returns."
    after = f.measure(messages, tools=tools).breakdown.estimated
    assert after == _tool_fitter().measure(messages, tools=tools).breakdown.estimated
    assert after > before


def test_an_equal_tool_list_built_anew_each_call_is_found_without_rendering(monkeypatch: Any) -> None:
    """An SDK builds its request anew every call: an equal list in new objects is not rendered again."""
    import copy

    tools = [
        {
            "type": "function",
            "function": {"name": f"t{i}", "description": f"Tool {i}.", "parameters": {"type": "object"}},
        }
        for i in range(3)
    ]
    messages = [{"role": "user", "content": "hi"}]
    f = _tool_fitter()
    first = f.measure(messages, tools=copy.deepcopy(tools)).breakdown.estimated
    rendered: list[int] = []
    real = openai_tools.render_functions
    monkeypatch.setattr(openai_tools, "render_functions", lambda *a, **k: rendered.append(1) or real(*a, **k))
    monkeypatch.setattr(openai_tools, "_function", lambda *a, **k: rendered.append(1) or None)
    assert f.measure(messages, tools=copy.deepcopy(tools)).breakdown.estimated == first
    assert rendered == []


CUSTOM = {
    "type": "custom",
    "custom": {
        "name": "run_sql",
        "description": "Run one SQL query.",
        "format": {
            "type": "grammar",
            "grammar": {"syntax": "lark", "definition": 'start: "SELECT " /[a-z]+/'},
        },
    },
}


@pytest.mark.parametrize("api", ["openai", "openai-responses"])
def test_a_custom_tool_is_counted_by_its_definition_as_an_estimate_never_refused(api: str) -> None:
    """A tool of another type than ``function`` (a custom grammar tool) is accepted by the API, so
    it is counted, never refused: its definition's JSON and an allowance, flagged an estimate."""
    function = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    if api == "openai":
        base: dict[str, Any] = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
        custom, plain = CUSTOM, function
    else:
        base = {"model": "gpt-5", "input": "hi"}
        custom = {"type": "custom", **CUSTOM["custom"]}
        plain = {"type": "function", **function["function"]}

    def measure(tools: list[Any]) -> Any:
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model="gpt-5")
        body = {**base, "tools": tools} if tools else base
        fitter.count_request(body, provider=api)
        return fitter.measure_request(body, provider=api)

    counter = TokenCounter(resolve_encoding("gpt-5"), model="gpt-5")
    definition = counter.text(json.dumps(custom, ensure_ascii=False, separators=(",", ":")))
    for others in ([], [plain]):
        with_custom = measure([*others, custom])
        added = with_custom.breakdown.estimated - measure(others).breakdown.estimated
        assert added >= definition  # errs high: the definition and an allowance
        assert not with_custom.exact
        assert "tool_schema" in with_custom.estimated_lines
        assert not with_custom.unknowns  # what the model reads is in the body: no bound


def test_exact_only_for_the_shapes_the_table_confirms() -> None:
    """The flag by construction: a request of plain messages (and a gpt-5 model's earlier answers)
    is exact; any tool section, response format, forced function or tool of another type makes the
    count an estimate, named in ``estimated_lines``, because no rule of them is in the table."""
    for shape in ("tools", "response-format", "forced-function", "custom-tools"):
        assert not openai_tools.confirmed(shape)
    assert openai_tools.confirmed("messages") and openai_tools.confirmed("answer-channel")
    user = {"role": "user", "content": "hi"}
    answer = {"role": "assistant", "content": "hello"}
    function = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": "object"}}}
    forced = {"type": "function", "function": {"name": "lookup"}}

    def measure(model: str, **extra: Any) -> Any:
        fitter = ContextFitter(BudgetPolicy(context_length=10**6, reserved_output=0), model=model)
        body = {"model": model, "messages": [user, answer, user], **extra}
        return fitter.measure_request(body, provider="openai")

    for model in ("gpt-4o", "gpt-5-mini"):
        assert measure(model).exact
        for extra in (
            {"tools": [function]},
            {"response_format": fmt},
            {"tools": [function], "tool_choice": forced},
            {"tools": [CUSTOM]},
        ):
            result = measure(model, **extra)
            assert not result.exact, extra
            assert result.estimated_lines == ("tool_schema",)
