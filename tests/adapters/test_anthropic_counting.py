"""Anthropic Messages counting: the rules that bring a count to what Anthropic bills.

Each rule is checked on a body made here: the hidden tool-use prompt per family and tool
choice, the definitions as the prompt renders them (deferred tools left out), the thinking
configuration and the thinking blocks the API strips, structured outputs, a prefill, the ids
of tool calls and results, and the families' text ratio. How close the counts come to the
recorded bills is the real-traffic test's (tests/adapters/test_real_traffic.py).

The rules are checked here in the fallback encoding's tokens (the count without Claude's
reconstructed tokenizer), which these tests count themselves; the same rules in the
reconstructed tokenizer's tokens are tests/adapters/test_claude_tokenizer.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_ctx.adapters._anthropic as anthropic_adapter
import otel_ctx.adapters._claude_tokens as claude_tokens
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters._anthropic import (
    ADAPTER,
    FAMILIES,
    OUTPUT_SCHEMA_PROMPT,
    SYSTEM_WITH_TOOLS,
    family,
    render_tools,
)
from otel_ctx.engine._dialect import ReadContext
from otel_ctx.engine._model import RequestModel
from otel_ctx.engine._tokens import REPLY_PRIMING

ROOMY = BudgetPolicy(context_length=10**7, reserved_output=0)


@pytest.fixture(autouse=True, scope="module")
def _without_the_claude_tokenizer() -> Iterator[None]:
    """Count as an installation without the claude-tokenizer extra does (module-wide, so the
    hypothesis tests share it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(claude_tokens, "_module", lambda: None)
        yield


WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CLOCK = {
    "name": "get_time",
    "input_schema": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["utc", "local"]}}},
}


def _body(model: str = "claude-sonnet-4-5", **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "What is the weather in Lisbon right now?"}],
        **extra,
    }


def _fitter(model: str = "claude-sonnet-4-5") -> ContextFitter:
    return ContextFitter(ROOMY, model=model)


def _read(body: dict[str, Any], fitter: ContextFitter | None = None) -> RequestModel:
    fitter = fitter if fitter is not None else _fitter(body["model"])
    return ADAPTER.to_model(body, ReadContext(fitter.counter, strict=False)).model


def _count(body: dict[str, Any]) -> int:
    return _fitter(body["model"]).count_request(body, provider="anthropic")


def _tokens(text: str) -> int:
    return _fitter().counter.text(text)


# -- families -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("claude-sonnet-4-5", "claude-4.5"),
        ("claude-sonnet-4-5-20250929", "claude-4.5"),
        ("claude-haiku-4-5", "claude-4.5"),
        ("claude-sonnet-4-6", "claude-4.5-keeps"),
        ("claude-opus-4-6", "claude-4.5-keeps"),
        ("claude-opus-4-20250514", "claude-4"),
        ("claude-sonnet-4-0", "claude-4"),
        ("claude-3-7-sonnet-20250219", "claude-4"),
        ("claude-3-5-haiku-20241022", "claude-3.5-haiku"),
        ("claude-3-5-sonnet-20240620", "claude-3.5-sonnet"),
        ("claude-3-opus-20240229", "claude-3-opus"),
        ("claude-2.1", "claude-3-haiku"),
        ("claude-opus-4-7", "claude-4.7"),
        ("anthropic.claude-opus-4-8-v1:0", "claude-4.8"),
        ("claude-opus-5", "claude-5"),
        ("claude-newtier-6", "claude-5"),
        ("some-proxy-alias", "claude-4.5"),
    ],
)
def test_a_model_name_maps_to_its_family(model: str, name: str) -> None:
    assert family(model).name == name


def test_later_opus_and_sonnet_models_keep_earlier_thinking_and_haiku_does_not() -> None:
    assert family("claude-opus-4-6").keeps_thinking and family("claude-sonnet-4-6").keeps_thinking
    assert not family("claude-sonnet-4-5").keeps_thinking and not family("claude-haiku-4-5").keeps_thinking


# -- tools ----------------------------------------------------------------------------------


def test_tools_cost_the_family_prompt_plus_the_rendered_definitions() -> None:
    tools = [WEATHER, CLOCK]
    text, kinds = render_tools(tools)
    assert kinds == [] and text.count("<function>") == 2 and '"parameters": ' in text
    rendered = _tokens(text)
    for model in ("claude-sonnet-4-5", "claude-sonnet-4-0", "claude-3-5-haiku-20241022"):
        fam = family(model)
        bare = _count(_body(model))
        assert _count(_body(model, tools=tools)) == bare + fam.tool_prompt + rendered
        forced = _body(model, tools=tools, tool_choice={"type": "any"})
        assert _count(forced) == bare + fam.tool_prompt_forced + rendered
        named = _body(model, tools=tools, tool_choice={"type": "tool", "name": "get_time"})
        assert _count(named) == _count(forced)
        none = _body(model, tools=tools, tool_choice={"type": "none"})
        assert _count(none) == _count(_body(model, tools=tools))


def test_the_rendered_definitions_are_the_estimated_share_of_the_schema() -> None:
    model = _read(_body(tools=[WEATHER, CLOCK]))
    rendered = _tokens(render_tools([WEATHER, CLOCK])[0])
    assert model.schema_inexact == rendered
    assert model.tool_schema == FAMILIES["claude-4.5"].tool_prompt + rendered


def test_a_system_prompt_beside_tools_costs_its_separators() -> None:
    system = "You are the weather desk."
    with_tools = _count(_body(tools=[WEATHER], system=system)) - _count(_body(tools=[WEATHER]))
    without = _count(_body(system=system)) - _count(_body())
    assert with_tools == without + SYSTEM_WITH_TOOLS


def test_a_deferred_tool_is_not_in_the_prompt() -> None:
    deferred = {**CLOCK, "defer_loading": True}
    assert _count(_body(tools=[WEATHER, deferred])) == _count(_body(tools=[WEATHER]))
    assert "get_time" not in render_tools([WEATHER, deferred])[0]


def test_anthropic_defined_and_server_tools() -> None:
    bash = {"type": "bash_20250124", "name": "bash"}
    assert _count(_body(tools=[WEATHER, bash])) == _count(_body(tools=[WEATHER])) + 245
    assert _read(_body(tools=[WEATHER, bash])).unknowns == ()
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    model = _read(_body(tools=[search]))
    assert model.unknowns == ("server tool web_search_20250305",)
    assert model.schema_inexact > 0  # its definition's JSON, an estimate


def test_a_warm_round_does_not_render_the_tools_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = anthropic_adapter.render_tools

    def counting(tools: Any) -> Any:
        calls.append(len(tools))
        return real(tools)

    monkeypatch.setattr(anthropic_adapter, "render_tools", counting)
    fitter = _fitter()
    tools = [WEATHER, CLOCK]
    body = _body(tools=tools)
    first = fitter.count_request(body, provider="anthropic")
    body["messages"] = [
        *body["messages"],
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    second = fitter.count_request(body, provider="anthropic")
    assert second > first and calls == [2]
    # The same definitions in a new list (a client that rebuilds it each round): still one render.
    fitter.count_request({**body, "tools": json.loads(json.dumps(tools))}, provider="anthropic")
    assert calls == [2]
    # A changed definition is rendered again.
    fitter.count_request({**body, "tools": [WEATHER]}, provider="anthropic")
    assert calls == [2, 1]


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(st.from_regex(r"[a-z][a-z_]{0,20}", fullmatch=True), min_size=1, max_size=5, unique=True),
    desc=st.text(max_size=60),
    forced=st.booleans(),
)
def test_property_the_schema_is_the_prompt_plus_its_estimate(
    names: list[str], desc: str, forced: bool
) -> None:
    tools = [{"name": n, "description": desc, "input_schema": {"type": "object"}} for n in names]
    extra: dict[str, Any] = {"tool_choice": {"type": "any"}} if forced else {}
    model = _read(_body(tools=tools, **extra))
    fam = FAMILIES["claude-4.5"]
    prompt = fam.tool_prompt_forced if forced else fam.tool_prompt
    assert model.tool_schema - model.schema_inexact == prompt
    assert model.schema_inexact == _tokens(render_tools(tools)[0]) > 0


# -- tool calls and results -----------------------------------------------------------------


def test_the_ids_of_a_call_and_its_result_are_counted() -> None:
    def loop(call_id: str) -> dict[str, Any]:
        return _body(
            tools=[WEATHER],
            messages=[
                {"role": "user", "content": "Weather in Lisbon?"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call_id,
                            "name": "get_weather",
                            "input": {"city": "Lisbon"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "Sunny"}],
                },
            ],
        )

    short, long = "t1", "toolu_01A73Ko8diCmNfpop86iruFS"
    assert _count(loop(long)) - _count(loop(short)) == 2 * (_tokens(long) - _tokens(short))


# -- thinking -------------------------------------------------------------------------------


def test_the_thinking_configuration_is_counted_per_family() -> None:
    for model in ("claude-sonnet-4-5", "claude-opus-4-6", "claude-opus-4-7"):
        fam = family(model)
        bare = _count(_body(model))
        assert (
            _count(_body(model, thinking={"type": "enabled", "budget_tokens": 2048})) == bare + fam.thinking
        )
        assert _count(_body(model, thinking={"type": "adaptive"})) == bare + fam.adaptive
        assert _count(_body(model, thinking={"type": "disabled"})) == bare


def _thought(model: str, *, then_user_text: bool) -> dict[str, Any]:
    thinking = {"type": "thinking", "thinking": "Check the forecast service first. " * 20, "signature": "sig"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Lisbon?"}]
    if then_user_text:
        messages += [
            {"role": "assistant", "content": [thinking, {"type": "text", "text": "Sunny."}]},
            {"role": "user", "content": "And in Porto?"},
        ]
    else:  # the current turn: a tool loop under way
        messages += [
            {
                "role": "assistant",
                "content": [
                    thinking,
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Porto"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Rain"}]},
        ]
    return _body(
        model, tools=[WEATHER], thinking={"type": "enabled", "budget_tokens": 2048}, messages=messages
    )


def _without_thinking(body: dict[str, Any]) -> dict[str, Any]:
    messages = [
        {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}
        if m["role"] == "assistant"
        else m
        for m in body["messages"]
    ]
    return {**body, "messages": messages}


def test_earlier_thinking_is_stripped_where_the_model_keeps_only_the_current_turns() -> None:
    earlier = _thought("claude-sonnet-4-5", then_user_text=True)
    assert _count(earlier) == _count(_without_thinking(earlier))
    current = _thought("claude-sonnet-4-5", then_user_text=False)
    assert _count(current) > _count(_without_thinking(current)) + 100
    kept = _thought("claude-sonnet-4-6", then_user_text=True)
    assert _count(kept) > _count(_without_thinking(kept)) + 100


# -- structured outputs and output_config ----------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


def test_a_json_schema_output_is_its_instruction_plus_the_indented_schema() -> None:
    bare = _count(_body())
    schema = _tokens(json.dumps(SCHEMA, indent=2))
    fmt = {"type": "json_schema", "schema": SCHEMA}
    assert _count(_body(output_config={"format": fmt})) == bare + OUTPUT_SCHEMA_PROMPT + schema
    assert _count(_body(output_format=fmt)) == bare + OUTPUT_SCHEMA_PROMPT + schema
    assert _count(_body(output_config={"effort": "low"})) == bare
    model = _read(_body(tools=[WEATHER], output_config={"format": fmt}))
    assert model.schema_inexact == schema + _tokens(render_tools([WEATHER])[0])


def test_a_task_budget_adds_its_notice() -> None:
    budget = {"task_budget": {"type": "tokens", "total": 20_000, "remaining": 500}}
    assert _count(_body(output_config=budget)) > _count(_body())


# -- transcript shapes the API bills as sent --------------------------------------------------


def test_a_prefill_opens_no_new_reply() -> None:
    body = _body(
        messages=[{"role": "user", "content": "A haiku, please."}, {"role": "assistant", "content": "Autumn"}]
    )
    assert _read(body).priming == 0
    assert _read(_body()).priming == REPLY_PRIMING


def test_shapes_the_api_accepts_are_counted_and_recorded_not_refused() -> None:
    system_message = _body(
        messages=[
            {"role": "user", "content": "Review this."},
            {"role": "assistant", "content": "Looks fine."},
            {"role": "system", "content": "From now on, insist on type annotations."},
            {"role": "user", "content": "Again, please."},
        ]
    )
    assistant_first = _body(
        messages=[
            {"role": "assistant", "content": "How can I help?"},
            {"role": "user", "content": "A potato."},
        ]
    )
    call = {"type": "tool_use", "id": "same", "name": "get_weather", "input": {"city": "Lisbon"}}
    answer = {"type": "tool_result", "tool_use_id": "same", "content": "Sunny"}
    reused_id = _body(
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [answer]},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [answer]},
        ],
    )
    for body in (system_message, assistant_first, reused_id):
        fitter = _fitter()
        assert fitter.count_request(body, provider="anthropic") > 0
        measured = fitter.measure_request(body, provider="anthropic")
        assert measured.exact is False
    assert _fitter().measure_request(system_message, provider="anthropic").problems == ()
    assert "assistant" in _fitter().measure_request(assistant_first, provider="anthropic").problems[0]
    assert "already used" in _fitter().measure_request(reused_id, provider="anthropic").problems[0]


def test_the_newer_tokenizer_family_is_counted_by_its_ratio() -> None:
    text = "The quarterly review covers revenue, churn and the hiring plan for the platform team. " * 40
    body = _body(messages=[{"role": "user", "content": text}])
    new = _count({**body, "model": "claude-opus-4-7"})
    old = _count({**body, "model": "claude-opus-4-6"})
    assert new == pytest.approx(old * FAMILIES["claude-4.7"].text_ratio, rel=0.02)
