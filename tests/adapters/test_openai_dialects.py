"""OpenAI Chat Completions and Responses, with the real ``openai`` package and its own types.

Agent loops run against the fake provider on 127.0.0.1: the SDK builds the objects
(``resp.choices[0].message``, ``resp.output``) exactly as it does for an agent, the
fitter fits the next round, and the SDK sends the fitted request.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest
from fake_provider import FakeProvider, Reply
from openai.types.chat import ChatCompletionMessage
from openai_rules import chat_violations, responses_violations

from otel_ctx import (
    BudgetPolicy,
    ContextFitter,
    InvalidRequestError,
    TranscriptRuleError,
    UnknownProviderError,
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order by id.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
]
FLAT_TOOLS = [{"type": "function", **TOOLS[0]["function"]}]
ORDER = json.dumps({"id": "88-1042", "items": [{"sku": f"SKU-{i}", "qty": i} for i in range(200)]})


def _fitter(**policy: Any) -> ContextFitter:
    return ContextFitter(BudgetPolicy(context_length=16_000, reserved_output=1_000, **policy), model="gpt-4")


def _client(fake: FakeProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.openai_url, api_key="test", max_retries=0)


def test_agent_loop_appends_the_sdk_message_and_fits_round_two(fake_provider: FakeProvider) -> None:
    client = _client(fake_provider)
    fitter = _fitter(tool_result_cap=300)
    messages: list[Any] = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Where is order 88-1042?"},
    ]
    fake_provider.queue(Reply(tool_calls=[("get_order", '{"id": "88-1042"}')]), Reply(text="It ships today."))
    first = fitter.fit(messages, tools=TOOLS)
    resp = client.chat.completions.create(model="gpt-4", messages=first.messages, tools=TOOLS)  # type: ignore[arg-type]
    message = resp.choices[0].message
    assert isinstance(message, ChatCompletionMessage) and message.tool_calls
    messages.append(message)  # OpenAI's own guide does exactly this
    messages.append({"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": ORDER})

    second = fitter.fit(messages, tools=TOOLS)
    assert second.outcome == "fit"
    assert second.messages[2] is message  # the SDK object goes back as it came
    assert second.capped_tool_results == 1
    assert second.breakdown.transcript_by_role["tool"] > 0
    assert second.breakdown.transcript_by_role["tool"] <= 300 + 10  # the cap, plus the message framing
    resp = client.chat.completions.create(model="gpt-4", messages=second.messages, tools=TOOLS)  # type: ignore[arg-type]
    assert resp.choices[0].message.content == "It ships today."
    sent = json.loads(fake_provider.bodies("/chat/completions")[-1])
    assert sent["messages"][2]["tool_calls"][0]["function"]["name"] == "get_order"
    assert chat_violations(sent) == []

    # The same round as a whole request body, SDK object inside.
    body = {"model": "gpt-4", "messages": messages, "tools": TOOLS}
    whole = fitter.fit_request(body)
    assert whole.provider == "openai"
    assert whole.request["messages"][2] is message
    assert whole.breakdown.estimated == second.breakdown.estimated
    assert body["messages"] is messages and len(messages) == 4  # nothing mutated


def test_dicts_and_sdk_objects_count_the_same() -> None:
    fitter = _fitter()
    sdk = [
        ChatCompletionMessage.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"id":"7"}'},
                    }
                ],
            }
        ),
        ChatCompletionMessage.model_validate(
            {"role": "assistant", "content": None, "refusal": "I can't help."}
        ),
        ChatCompletionMessage.model_validate(
            {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": "{}"}}
        ),
    ]
    dicts = [m.model_dump(exclude_none=True) for m in sdk]
    user = {"role": "user", "content": "Where is it?"}
    tool = {"role": "tool", "tool_call_id": "c1", "content": "in transit"}
    as_sdk = [user, sdk[0], tool, sdk[1], user, sdk[2]]
    as_dicts = [user, dicts[0], tool, dicts[1], user, dicts[2]]
    assert fitter.count(as_sdk, tools=TOOLS) == fitter.count(as_dicts, tools=TOOLS)
    assert fitter.measure(as_sdk).breakdown == fitter.measure(as_dicts).breakdown


def test_legacy_function_call_and_refusal_are_billed() -> None:
    fitter = ContextFitter(BudgetPolicy(context_length=4_000, reserved_output=0), model="gpt-4")
    args = "x " * 5000
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": args}},
    ]
    assert fitter.count(msgs) > fitter.counter.text(args)
    result = fitter.fit(msgs)
    assert result.outcome == "overflow"
    refusal = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "refusal": args}]
    assert fitter.count(refusal) > fitter.counter.text(args)


def test_content_parts_of_every_kind_are_counted() -> None:
    fitter = _fitter()
    parts = [
        {"type": "text", "text": "What is in this picture and this recording?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "input_audio", "input_audio": {"data": "UklGR" * 2_000, "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-abc", "filename": "invoice.pdf"}},
    ]
    whole = fitter.count([{"role": "user", "content": parts}])
    for k in range(len(parts)):
        less = fitter.count([{"role": "user", "content": parts[:k] + parts[k + 1 :]}])
        assert less < whole, f"part {parts[k]['type']} costs nothing"


@pytest.mark.parametrize(
    ("messages", "index", "problem"),
    [
        (
            [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        _c := {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                {"role": "user", "content": "b"},
            ],
            1,
            "never answered",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "tool_calls": [_c, {**_c, "id": "c2"}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            1,
            "never answered",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "tool_calls": [_c, _c]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            1,
            "already used",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "tool_calls": [_c]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            3,
            "already answered",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "tool_calls": [_c]},
                {"role": "tool", "tool_call_id": "c1", "content": "r", "tool_calls": [_c]},
            ],
            2,
            "cannot make tool calls",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "x", "tool_calls": []}],
            1,
            "empty list",
        ),
    ],
)
def test_transcripts_the_api_rejects_raise_in_fit_and_are_recorded_by_measure(
    messages: list[dict[str, Any]], index: int, problem: str
) -> None:
    fitter = _fitter()
    before = copy.deepcopy(messages)
    with pytest.raises(TranscriptRuleError) as exc:
        fitter.fit(messages)
    assert exc.value.index == index
    assert problem in str(exc.value)
    assert f"messages[{index}]" in exc.value.where
    observed = fitter.measure(messages)  # observe-only: never raises for a rule problem
    assert any(problem in p for p in observed.problems)
    assert observed.messages == messages
    body = {"model": "gpt-4", "messages": messages}
    measured = fitter.measure_request(body)
    assert measured.request is body and measured.problems
    assert messages == before


def test_a_valid_transcript_has_no_problems() -> None:
    fitter = _fitter()
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    assert fitter.measure(msgs).problems == ()
    assert fitter.fit(msgs).problems == ()


def test_responses_agent_loop_through_the_sdk(fake_provider: FakeProvider) -> None:
    client = _client(fake_provider)
    fitter = _fitter(tool_result_cap=200)
    fake_provider.queue(Reply(tool_calls=[("get_order", '{"id": "88-1042"}')]), Reply(text="Shipped."))
    body: dict[str, Any] = {
        "model": "gpt-4o",
        "instructions": "You are a support agent.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Where is 88-1042?"}]}],
        "tools": FLAT_TOOLS,
    }
    resp = client.responses.create(**body)
    call = resp.output[0]
    assert call.type == "function_call"
    items = [*body["input"], *resp.output]  # SDK objects, as an agent loop appends them
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": ORDER})
    round_two = {**body, "input": items}
    snapshot = json.dumps(round_two, default=lambda o: o.model_dump())

    result = fitter.fit_request(round_two)
    assert result.provider == "openai-responses"
    assert result.outcome == "fit"
    assert result.capped_tool_results == 1
    assert result.breakdown.system_prompt > 0  # instructions are the system prompt line
    assert result.breakdown.transcript_by_role["tool"] > 0
    assert result.breakdown.tool_schema > 0
    assert result.request["input"][1] is call
    assert responses_violations(result.request) == []
    assert json.dumps(round_two, default=lambda o: o.model_dump()) == snapshot  # not mutated

    resp = client.responses.create(**result.request)
    assert resp.output_text == "Shipped."
    sent = json.loads(fake_provider.bodies("/responses")[-1])
    assert sent["input"][2]["output"].endswith("]")  # the cut marker went out
    assert fitter.count_request(round_two) > fitter.count_request(result.request)


def test_responses_string_input_and_other_items() -> None:
    fitter = _fitter()
    plain = {"model": "gpt-4o", "input": "hello there"}
    result = fitter.fit_request(plain)
    assert result.request == plain and result.request["input"] == "hello there"
    assert result.breakdown.transcript_by_role["user"] > 0
    with_search = {
        "model": "gpt-4o",
        "input": [
            {"role": "user", "content": "news?"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "news"}},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think hard."}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Here.", "annotations": []}]},
        ],
        "tools": [{"type": "web_search"}],
    }
    counted = fitter.count_request(with_search)
    without = fitter.count_request({**with_search, "input": with_search["input"][:1], "tools": []})
    assert counted > without + fitter.counter.text("Think hard.")


def test_detection_and_ambiguity(monkeypatch: pytest.MonkeyPatch) -> None:
    import otel_ctx._dialects as dialects
    from otel_ctx.adapters._openai_chat import OpenAIChatAdapter

    fitter = _fitter()
    assert fitter.fit_request({"model": "gpt-4o", "input": "hi"}).provider == "openai-responses"
    assert fitter.fit_request({"messages": [{"role": "system", "content": "x"}]}).provider == "openai"

    class Other(OpenAIChatAdapter):
        provider = "anthropic"

        def claims(self, body: Any) -> bool | None:
            return None if "messages" in body and "system" not in body else False

    monkeypatch.setitem(dialects._loaded, "anthropic", Other())
    ambiguous = {"model": "some-model", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(UnknownProviderError, match="cannot tell the provider"):
        fitter.fit_request(ambiguous)
    assert fitter.fit_request(ambiguous, provider="openai").provider == "openai"
    with pytest.raises(UnknownProviderError, match="unknown provider"):
        fitter.fit_request(ambiguous, provider="acme")
    with pytest.raises(UnknownProviderError):
        fitter.fit_request(["not", "a", "body"])


def test_a_pluggable_exact_counter_is_used_and_nothing_else_calls_out() -> None:
    calls: list[tuple[str, Any]] = []

    def exact(provider: str, body: Any) -> int:
        calls.append((provider, body))
        return 4242

    fitter = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4", exact_counter=exact)
    body = {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}
    assert fitter.count_request(body) == 4242
    assert calls == [("openai", body)]
    bad = ContextFitter(BudgetPolicy(8_000, 500), model="gpt-4", exact_counter=lambda p, b: -1)
    with pytest.raises(InvalidRequestError, match="exact_counter"):
        bad.count_request(body)


def test_an_exact_counter_sets_the_estimate_of_fit_and_measure() -> None:
    body = {"model": "gpt-4", "messages": [{"role": "user", "content": "word " * 600}]}
    plain = ContextFitter(BudgetPolicy(1_000, 100), model="gpt-4")
    raw = plain.count_request(body)
    doubled = ContextFitter(BudgetPolicy(1_000, 100), model="gpt-4", exact_counter=lambda p, b: 2 * raw)
    measured = doubled.measure_request(body)
    measured.breakdown.check()
    assert measured.exact is True
    assert 2 * raw <= measured.breakdown.estimated <= 2 * raw + 1
    assert plain.measure_request(body).outcome == "fit"
    assert measured.outcome == "overflow"  # 2 x raw is over the 900-token budget
    assert doubled.fit_request(body).outcome == "overflow"  # the newest turn is the floor
