"""The Bedrock dialect: Converse and InvokeModel bodies counted, fitted and written back.

Bodies are what ``boto3.client("bedrock-runtime").converse(**body)`` takes (binary media as
``bytes``) and their JSON form, and InvokeModel's vendor bodies. The model is the fitter's.
"""

from __future__ import annotations

import base64
import copy
import json
import struct
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, Source
from otel_ctx._dialects import detect
from otel_ctx._models import shipped_models
from otel_ctx._pricing import shipped_prices
from otel_ctx.adapters._bedrock import body_kind, requested_output
from otel_ctx.adapters._bedrock_families import framing

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA = "us.amazon.nova-micro-v1:0"
ORDER = json.dumps({"items": [{"sku": f"SKU-{i}", "title": "oak shelf, natural"} for i in range(300)]})
TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_order",
                "description": "Look up an order by its id.",
                "inputSchema": {"json": {"type": "object", "properties": {"id": {"type": "string"}}}},
            }
        },
        {"cachePoint": {"type": "default"}},
    ],
    "toolChoice": {"auto": {}},
}


def _png(width: int, height: int) -> bytes:
    """A PNG header of the given size (the media rules read the header only)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def _exchange(k: int) -> list[dict[str, Any]]:
    call = f"tooluse_{k}"
    return [
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": call, "name": "get_order", "input": {"id": str(k)}}}],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": call, "content": [{"text": ORDER}], "status": "success"}}
            ],
        },
    ]


def _body(exchanges: int = 3) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": "Where are my orders?"}]}]
    for k in range(exchanges):
        messages += _exchange(k)
    messages.append({"role": "assistant", "content": [{"text": "They ship tomorrow."}]})
    messages.append({"role": "user", "content": [{"text": "Thanks, and the invoice?"}]})
    return {
        "messages": messages,
        "system": [{"text": "You are a support agent."}, {"cachePoint": {"type": "default"}}],
        "toolConfig": TOOLS,
        "inferenceConfig": {"maxTokens": 512},
    }


def _fitter(model: str, **policy: Any) -> ContextFitter:
    return ContextFitter(
        BudgetPolicy(**{"context_length": 200_000, "reserved_output": 0, **policy}), model=model
    )


def test_a_converse_body_is_detected_and_its_shapes_told_apart() -> None:
    body = _body()
    del body["system"]  # a top-level system is the Messages API's too: then provider= says which
    assert detect(body).provider == "bedrock"
    assert body_kind(_body(), CLAUDE) == "converse"
    assert body_kind({"anthropic_version": "bedrock-2023-05-31", "messages": []}, CLAUDE) == "anthropic"
    assert body_kind({"prompt": "<s>[INST] hi [/INST]"}, "meta.llama2-13b-chat-v1") == "prompt"
    assert body_kind({"inputText": "hi"}, "amazon.titan-text-express-v1") == "prompt"
    assert body_kind({"message": "hi", "chat_history": []}, "cohere.command-r-v1:0") == "cohere"
    assert requested_output(_body()) == 512


def test_claude_on_converse_counts_as_the_messages_body_bedrock_sends() -> None:
    body = _body()
    converse = _fitter(CLAUDE).count_request(body, provider="bedrock")
    messages = {
        "model": "claude-sonnet-4-5",
        "system": "You are a support agent.",
        "tools": [
            {
                "name": "get_order",
                "description": "Look up an order by its id.",
                "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": m["role"], "content": [_as_messages_block(b) for b in m["content"]]}
            for m in body["messages"]
        ],
    }
    assert converse == _fitter("claude-sonnet-4-5").count_request(messages, provider="anthropic")


def _as_messages_block(block: dict[str, Any]) -> dict[str, Any]:
    if "text" in block:
        return {"type": "text", "text": block["text"]}
    if "toolUse" in block:
        use = block["toolUse"]
        return {"type": "tool_use", "id": use["toolUseId"], "name": use["name"], "input": use["input"]}
    result = block["toolResult"]
    return {
        "type": "tool_result",
        "tool_use_id": result["toolUseId"],
        "content": [{"type": "text", "text": c["text"]} for c in result["content"]],
    }


def test_a_fit_drops_whole_exchanges_and_writes_converse_back_without_touching_the_body() -> None:
    body = _body(exchanges=6)
    before = copy.deepcopy(body)
    full = _fitter(CLAUDE).count_request(body, provider="bedrock")
    result = _fitter(CLAUDE, context_length=full // 2).fit_request(
        body, provider="bedrock", snippets=[Source("tone", "Be brief.")]
    )
    assert body == before
    sent = result.request
    assert result.dropped_turns > 0
    assert sent["messages"][0] is body["messages"][0]  # the ticket is kept, as the caller's object
    assert sent["messages"][-1] is body["messages"][-1]
    uses = {b["toolUse"]["toolUseId"] for m in sent["messages"] for b in m["content"] if "toolUse" in b}
    results = {
        b["toolResult"]["toolUseId"] for m in sent["messages"] for b in m["content"] if "toolResult" in b
    }
    assert uses == results  # no call separated from its result
    assert sent["system"][:2] == body["system"]  # the cached prefix stays a prefix
    assert sent["system"][-1]["text"].endswith("Be brief.")
    assert set(sent) == set(body)
    assert _fitter(CLAUDE).count_request(sent, provider="bedrock") < full


def test_a_tool_result_is_capped_as_a_converse_copy() -> None:
    body = _body(exchanges=1)
    result = _fitter(NOVA, tool_result_cap=50).fit_request(body, provider="bedrock")
    assert result.capped_tool_results == 1
    capped = result.request["messages"][2]
    assert capped is not body["messages"][2]
    text = capped["content"][0]["toolResult"]["content"][0]["text"]
    assert len(text) < len(ORDER)
    assert body["messages"][2]["content"][0]["toolResult"]["content"][0]["text"] == ORDER


def test_an_invoke_model_messages_body_goes_back_without_a_model_field() -> None:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Tell me a joke"}],
    }
    result = _fitter(CLAUDE).fit_request(body, provider="bedrock", snippets=[Source("tone", "Be brief.")])
    assert "model" not in result.request
    assert result.request["anthropic_version"] == "bedrock-2023-05-31"
    assert not result.exact


def test_binary_media_count_the_same_as_their_base64() -> None:
    png = _png(800, 600)
    for model in (CLAUDE, "us.amazon.nova-2-lite-v1:0", "us.mistral.pixtral-large-2502-v1:0"):
        raw: dict[str, Any] = {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"text": "What is this?"},
                        {"image": {"format": "png", "source": {"bytes": png}}},
                    ],
                }
            ]
        }
        text = copy.deepcopy(raw)
        text["messages"][0]["content"][1]["image"]["source"]["bytes"] = base64.b64encode(png).decode()
        fitter = _fitter(model)
        assert fitter.count_request(raw, provider="bedrock") == fitter.count_request(text, provider="bedrock")


def test_each_family_is_framed_by_its_own_rule() -> None:
    assert framing("us.meta.llama3-2-1b-instruct-v1:0").name == "llama3"
    assert (
        framing("arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-2-lite-v1:0").name == "nova-2"
    )
    assert framing("openai.gpt-oss-120b-1:0").name == "gpt-oss"
    assert framing("some.new-model-v1:0").name == "bedrock-other"
    body = {
        "messages": [{"role": "user", "content": [{"text": "Hello there"}]}],
        "system": [{"text": "Be kind."}],
    }
    # Llama 3's header and date block cost what Nova's bare prompt does not.
    assert (
        _fitter("meta.llama3-2-1b-instruct-v1:0").count_request(body, provider="bedrock")
        > _fitter(NOVA).count_request(body, provider="bedrock") + 20
    )


def test_earlier_reasoning_is_not_billed_where_the_template_drops_it() -> None:
    def body(thought: str) -> dict[str, Any]:
        return {
            "messages": [
                {"role": "user", "content": [{"text": "Hi"}]},
                {"role": "assistant", "content": [{"text": f"<think>{thought}</think>Hello!"}]},
                {"role": "user", "content": [{"text": "Bye"}]},
            ]
        }

    qwen = _fitter("qwen.qwen3-32b-v1:0")
    assert qwen.count_request(body("short"), provider="bedrock") == qwen.count_request(
        body("long " * 200), provider="bedrock"
    )


def test_blocks_claude_does_not_take_are_counted_never_refused() -> None:
    png = _png(64, 64)
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"video": {"format": "mp4", "source": {"bytes": png}}},
                    {"searchResult": {"source": "kb", "content": [{"text": "x"}], "blob": png}},
                    {"toolResult": {"toolUseId": "t0", "content": [{"video": {"source": {"bytes": png}}}]}},
                ],
            }
        ]
    }
    fitter = _fitter(CLAUDE)
    assert fitter.count_request(body, provider="bedrock") > 0
    assert fitter.measure_request(body, provider="bedrock").problems  # the orphan result is recorded


def test_unknown_shapes_and_blocks_are_counted_never_refused() -> None:
    fitter = _fitter("some.new-model-v1:0")
    assert fitter.count_request({"texts": ["embed me"]}, provider="bedrock") > 0
    odd = {
        "messages": [{"role": "user", "content": [{"searchResult": {"content": "x" * 40}}, "text?", None]}]
    }
    assert fitter.measure_request(odd, provider="bedrock").breakdown.estimated > 0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=6),
    st.sampled_from([CLAUDE, NOVA, "qwen.qwen3-32b-v1:0"]),
)
def test_a_message_more_never_costs_less(texts: list[str], model: str) -> None:
    roles = ["user", "assistant"]
    messages = [{"role": roles[k % 2], "content": [{"text": t}]} for k, t in enumerate(texts)]
    fitter = _fitter(model)
    shorter = fitter.count_request({"messages": messages[:-1] or messages}, provider="bedrock")
    assert fitter.count_request({"messages": messages}, provider="bedrock") >= shorter


def test_a_templated_prompts_special_tokens_count_one_each() -> None:
    fitter = _fitter("meta.llama3-70b-instruct-v1:0")
    plain = fitter.count_request({"prompt": "Tell me a joke"}, provider="bedrock")
    templated = (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nTell me a joke<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>"
    )
    # Six special tokens, the role names and a line break, not the dozens their spelling costs as text.
    assert plain + 5 <= fitter.count_request({"prompt": templated}, provider="bedrock") <= plain + 10


def test_a_summary_of_dropped_exchanges_goes_to_system_in_each_shape() -> None:
    def summarize(dropped: list[Any]) -> str:
        return "The customer asked for a refund; lookups found nothing new."

    converse = _body(exchanges=6)
    full = _fitter(CLAUDE).count_request(converse, provider="bedrock")
    fitter = ContextFitter(
        BudgetPolicy(context_length=full // 2, reserved_output=0), model=CLAUDE, summarizer=summarize
    )
    sent = fitter.fit_request(converse, provider="bedrock").request
    assert "refund" in sent["system"][-1]["text"] and "type" not in sent["system"][-1]
    invoke = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "system": "You are a support agent.",
        "messages": [
            {"role": m["role"], "content": [_as_messages_block(b) for b in m["content"]]}
            for m in converse["messages"]
        ],
    }
    sent = fitter.fit_request(invoke, provider="bedrock").request
    assert sent["system"][-1]["type"] == "text" and "refund" in sent["system"][-1]["text"]
    assert "model" not in sent


@settings(max_examples=30, deadline=None)
@given(
    exchanges=st.integers(0, 8),
    context=st.integers(400, 20_000),
    cap=st.one_of(st.none(), st.integers(30, 2_000)),
    model=st.sampled_from([CLAUDE, NOVA, "us.meta.llama4-maverick-17b-instruct-v1:0"]),
)
def test_property_a_fitted_converse_body_is_one_converse_accepts(
    exchanges: int, context: int, cap: int | None, model: str
) -> None:
    body = _body(exchanges)
    before = copy.deepcopy(body)
    fitter = ContextFitter(
        BudgetPolicy(context_length=context, reserved_output=0, tool_result_cap=cap), model=model
    )
    sent = fitter.fit_request(body, provider="bedrock").request
    assert body == before
    messages = sent["messages"]
    assert messages[0]["role"] == "user"
    for i, m in enumerate(messages):
        for b in m["content"]:
            if "toolUse" in b:  # answered in the very next message
                call = b["toolUse"]["toolUseId"]
                answered = [
                    c["toolResult"]["toolUseId"] for c in messages[i + 1]["content"] if "toolResult" in c
                ]
                assert call in answered
    assert [m["role"] for m in messages] == [("user", "assistant")[k % 2] for k in range(len(messages))]


def test_a_bedrock_id_has_its_models_window_and_price() -> None:
    models, prices = shipped_models(), shipped_prices()
    for bedrock, bare in (
        (CLAUDE, "claude-sonnet-4-5"),
        (
            "arn:aws:bedrock:us-east-1:1:inference-profile/eu.anthropic.claude-haiku-4-5-20251001-v1:0",
            "claude-haiku-4-5",
        ),
    ):
        assert models.limits_for(bedrock) == models.limits_for(bare) is not None
        assert prices.price_for(bedrock) == prices.price_for(bare) is not None
    assert models.limits_for("us.example.no-such-model-v1:0") is None


def test_qwens_empty_thinking_block_is_billed_unless_the_request_asks_to_reason() -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": [{"text": "Reply with: ok"}]}]}
    fitter = _fitter("qwen.qwen3-32b-v1:0")
    off = fitter.count_request(body, provider="bedrock")
    on = fitter.count_request(
        {**body, "additionalModelRequestFields": {"reasoning_config": "high"}}, provider="bedrock"
    )
    assert off - on == framing("qwen.qwen3-32b-v1:0").reasoning_off > 0


def test_a_vendor_the_family_table_does_not_strip_still_finds_its_family() -> None:
    assert framing("google.gemma-3-27b-it").name == "gemma"
    assert framing("us.meta.llama3-2-1b-instruct-v1:0").name == "llama3"
