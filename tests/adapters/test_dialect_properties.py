"""Per dialect, over random valid transcripts under random budgets: the fitted request is one
the provider accepts (tests/openai_rules.py), the breakdown closes, the pinned floor is
kept, the input is not mutated, and under a huge budget the request comes back equal.
"""

from __future__ import annotations

import json
from typing import Any

from google.genai import types
from hypothesis import event, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import ResponseFunctionToolCall
from openai_rules import chat_violations, responses_violations

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters._base import as_mapping

WORDS = ["order", "parcel", "refund", "<|endoftext|>", "Übergröße", "📦", "42", "\n", "shelf"]
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=40).map(" ".join)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find a thing.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def _dump(value: Any) -> str:
    def plain(o: Any) -> Any:
        return o.hex() if isinstance(o, bytes) else o.model_dump(exclude_none=True)

    return json.dumps(value, default=plain, sort_keys=True)


def _policies(draw: st.DrawFn) -> BudgetPolicy:
    return BudgetPolicy(
        context_length=draw(st.integers(150, 1_500)),
        reserved_output=draw(st.integers(0, 100)),
        tool_result_cap=draw(st.none() | st.integers(8, 120)),
    )


@st.composite
def chat_bodies(draw: st.DrawFn) -> dict[str, Any]:
    msgs: list[Any] = []
    if draw(st.booleans()):
        msgs.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(text)})
    msgs.append({"role": "user", "content": draw(text)})
    call = 0
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "parts", "refusal"]))
        if kind == "tools":
            ids = [f"call_{call + k}" for k in range(draw(st.integers(1, 3)))]
            call += len(ids)
            message = {
                "role": "assistant",
                "content": draw(st.none() | text),
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "lookup", "arguments": draw(text)}}
                    for i in ids
                ],
            }
            # An agent loop appends the SDK's own object as often as a dict.
            msgs.append(ChatCompletionMessage.model_validate(message) if draw(st.booleans()) else message)
            for i in draw(st.permutations(ids)):
                content: Any = draw(text)
                if draw(st.booleans()):
                    content = [{"type": "text", "text": content}, {"type": "text", "text": draw(text)}]
                msgs.append({"role": "tool", "tool_call_id": i, "content": content})
        elif kind == "parts":
            msgs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": draw(text)},
                        {
                            "type": "image_url",
                            "image_url": {"url": "https://example.com/x.png", "detail": "low"},
                        },
                    ],
                }
            )
        elif kind == "refusal":
            msgs.append(ChatCompletionMessage(role="assistant", content=None, refusal=draw(text)))
        else:
            msgs.append({"role": kind, "content": draw(text)})
    return {"model": "gpt-4", "messages": msgs, "tools": TOOLS, "temperature": 0.2}


@st.composite
def responses_bodies(draw: st.DrawFn) -> dict[str, Any]:
    items: list[Any] = [{"role": "user", "content": draw(text)}]
    call = 0
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "tools":
            if draw(st.booleans()):
                items.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{call}",
                        "summary": [{"type": "summary_text", "text": draw(text)}],
                    }
                )
            ids = [f"call_{call + k}" for k in range(draw(st.integers(1, 3)))]
            call += len(ids)
            for i in ids:
                fc = {"type": "function_call", "call_id": i, "name": "lookup", "arguments": draw(text)}
                items.append(ResponseFunctionToolCall.model_validate(fc) if draw(st.booleans()) else fc)
            for i in draw(st.permutations(ids)):
                items.append({"type": "function_call_output", "call_id": i, "output": draw(text)})
        elif kind == "assistant":
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": draw(text), "annotations": []}],
                }
            )
        else:
            items.append({"role": "user", "content": [{"type": "input_text", "text": draw(text)}]})
    body: dict[str, Any] = {
        "model": "gpt-4o",
        "input": items,
        "tools": [{"type": "function", **TOOLS[0]["function"]}],
    }
    if draw(st.booleans()):
        body["instructions"] = draw(text)
    return body


def _check(
    body: dict[str, Any], policy: BudgetPolicy, pins: list[int], items_key: str, violations: Any
) -> None:
    items = body[items_key]
    snapshot = _dump(body)
    fitter = ContextFitter(policy, model="gpt-4")
    result = fitter.fit_request(body, pinned=pins)
    event(result.outcome)
    result.breakdown.check()
    assert violations(result.request) == []
    assert _dump(body) == snapshot  # the caller's request is not mutated
    sent = result.request[items_key]
    for i in pins:  # the pinned floor is kept: the very object, or its capped copy
        original = items[i]
        assert any(x is original for x in sent) or result.capped_tool_results > 0
    assert (result.outcome == "overflow") == (result.breakdown.estimated > result.breakdown.budget)
    kept = [x for x in sent if any(x is y for y in items)]
    order = [next(k for k, y in enumerate(items) if y is x) for x in kept]
    assert order == sorted(order)

    huge = ContextFitter(BudgetPolicy(context_length=10_000_000, reserved_output=0), model="gpt-4")
    same = huge.fit_request(body)
    assert same.outcome == "fit"
    assert same.request == body
    assert all(x is y for x, y in zip(same.request[items_key], items))


@settings(max_examples=150, deadline=None)
@given(chat_bodies(), st.data())
def test_chat_completions_fit_is_always_a_request_openai_accepts(
    body: dict[str, Any], data: st.DataObject
) -> None:
    policy = _policies(data.draw)
    n = len(body["messages"])
    pins = data.draw(st.lists(st.integers(0, n - 1), max_size=2))
    _check(body, policy, pins, "messages", chat_violations)


@settings(max_examples=150, deadline=None)
@given(responses_bodies(), st.data())
def test_responses_fit_is_always_a_request_openai_accepts(body: dict[str, Any], data: st.DataObject) -> None:
    policy = _policies(data.draw)
    n = len(body["input"])
    pins = data.draw(st.lists(st.integers(0, n - 1), max_size=2))
    _check(body, policy, pins, "input", responses_violations)


@st.composite
def billed_messages(draw: st.DrawFn) -> tuple[list[Any], list[str]]:
    """Messages with text in every billed field, and the list of those texts."""
    texts: list[str] = []

    def t() -> str:
        s = draw(text)
        texts.append(s)
        return s

    msgs: list[Any] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["plain", "named", "parts", "tool_calls", "function_call", "refusal"]))
        if kind == "plain":
            msgs.append(
                {"role": draw(st.sampled_from(["system", "developer", "user", "assistant"])), "content": t()}
            )
        elif kind == "named":
            msgs.append({"role": "user", "content": t(), "name": "agent_b"})
            texts.append("agent_b")
        elif kind == "parts":
            msgs.append(
                {"role": "user", "content": [{"type": "text", "text": t()}, {"type": "text", "text": t()}]}
            )
        elif kind == "tool_calls":
            cid = f"c{len(msgs)}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": t(),
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": t()}}
                    ],
                }
            )
            texts.append("lookup")
            msgs.append({"role": "tool", "tool_call_id": cid, "content": t()})
        elif kind == "function_call":
            msgs.append(
                {"role": "assistant", "content": None, "function_call": {"name": "legacy", "arguments": t()}}
            )
            texts.append("legacy")
            msgs.append({"role": "function", "name": "legacy", "content": t()})
            texts.append("legacy")
        else:
            msgs.append({"role": "assistant", "content": None, "refusal": t()})
    return msgs, texts


@settings(max_examples=200, deadline=None)
@given(billed_messages())
def test_the_estimate_never_comes_in_under_the_texts_it_carries(case: tuple[list[Any], list[str]]) -> None:
    msgs, texts = case
    fitter = ContextFitter(BudgetPolicy(100_000, 0), model="gpt-4")
    floor = sum(fitter.counter.text(s) for s in texts)
    assert fitter.count(msgs) >= floor
    assert fitter.measure(msgs).raw_tokens >= floor


# -- Google Gen AI (Gemini generate_content) --------------------------------------------------------

GEMINI_TOOLS = [
    {
        "function_declarations": [
            {
                "name": "lookup",
                "description": "Find a thing.",
                "parameters": {"type": "OBJECT", "properties": {"q": {"type": "STRING"}}},
            }
        ]
    }
]


def gemini_violations(body: dict[str, Any]) -> list[str]:
    """What the Gemini API refuses: a first content that is not the user's, a function call not
    answered (by name or id) in the very next user content, a response answering no call."""
    out: list[str] = []
    contents = [as_mapping(c) or {} for c in body["contents"]]
    if contents and (contents[0].get("role") or "user") != "user":
        out.append("first content is not the user's")
    open_calls: list[str] = []
    for i, c in enumerate(contents):
        parts = [as_mapping(p) or {} for p in c.get("parts") or []]
        role = c.get("role") or "user"
        answered = [p["function_response"]["name"] for p in parts if p.get("function_response")]
        if role == "user":
            if sorted(answered) != sorted(open_calls):
                out.append(f"contents[{i}] answers {answered}, open calls {open_calls}")
            open_calls = []
        elif open_calls:
            out.append(f"contents[{i}]: calls {open_calls} never answered")
        else:
            open_calls = [p["function_call"]["name"] for p in parts if p.get("function_call")]
    if open_calls:
        out.append(f"calls {open_calls} left open")
    return out


@st.composite
def gemini_bodies(draw: st.DrawFn) -> dict[str, Any]:
    contents: list[Any] = [{"role": "user", "parts": [{"text": draw(text)}]}]
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["exchange", "tools", "image"]))
        if kind == "tools":
            names = [f"lookup_{k}" for k in range(draw(st.integers(1, 3)))]
            calls = [{"function_call": {"name": n, "args": {"q": draw(text)}}} for n in names]
            model: Any = {"role": "model", "parts": calls}
            # An agent loop appends the SDK's own content (response.candidates[0].content) as often as a dict.
            contents.append(types.Content.model_validate(model) if draw(st.booleans()) else model)
            answers = [
                {"function_response": {"name": n, "response": {"output": draw(text)}}}
                for n in draw(st.permutations(names))
            ]
            contents.append({"role": "user", "parts": answers})
        elif kind == "image":
            contents.append({"role": "model", "parts": [{"text": draw(text)}]})
            contents.append(
                types.Content(
                    role="user",
                    parts=[
                        types.Part(text=draw(text)),
                        types.Part(inline_data=types.Blob(data=b"\x89PNG", mime_type="image/png")),
                    ],
                )
            )
        else:
            contents.append({"role": "model", "parts": [{"text": draw(text)}]})
            contents.append({"role": "user", "parts": [{"text": draw(text)}]})
    config: dict[str, Any] = {"tools": GEMINI_TOOLS}
    if draw(st.booleans()):
        config["system_instruction"] = draw(text)
    # The SDK's own config type as often as a dict.
    typed = types.GenerateContentConfig.model_validate(config) if draw(st.booleans()) else config
    return {"model": "gemini-2.5-flash", "contents": contents, "config": typed}


@settings(max_examples=150, deadline=None)
@given(gemini_bodies(), st.data())
def test_gemini_fit_is_always_a_request_gemini_accepts(body: dict[str, Any], data: st.DataObject) -> None:
    policy = _policies(data.draw)
    n = len(body["contents"])
    pins = data.draw(st.lists(st.integers(0, n - 1), max_size=2))
    _check(body, policy, pins, "contents", gemini_violations)
