"""Every entry point of the real openai and anthropic SDKs that sends a model request is one round.

``create``, ``stream``, ``parse``, their ``beta.*`` twins, ``with_raw_response`` and
``with_streaming_response``, sync and async, against the fake provider on 127.0.0.1: one
``context_budget.observe`` span per request, the provider's usage on it (and in the
accuracy histogram), the request body byte for byte as without instrumentation, the
SDK's own objects and exceptions handed back.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from fake_provider import FakeProvider, Reply
from instrument_support import (
    ANTHROPIC_MESSAGES,
    ANTHROPIC_TOOLS,
    CHAT,
    RESPONSES_INPUT,
    TOOLS,
    Instrumented,
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    instrumented,
    openai_client,
)
from pydantic import BaseModel

import otel_ctx.instrumentation as oi
from otel_ctx import names as n

__all__ = ["instrumented"]  # the fixture, imported for pytest

USAGE = 321  # the input tokens the fake provider reports for every call here
INCLUDE_USAGE: Any = {"include_usage": True}
MODEL = "claude-sonnet-4-6"


class Verdict(BaseModel):
    """A structured-output answer: what the agent asked the model to fill in."""

    status: str
    days: int


VERDICT = {"status": "refund", "days": 14}


def _reply(structured: bool) -> Reply:
    return Reply.structured(VERDICT, input_tokens=USAGE) if structured else Reply(input_tokens=USAGE)


# --- every sync entry point, consumed as an agent does --------------------------------------------
#: (id, answer is structured output, call(openai client, anthropic client) -> what the agent got)
Entry = tuple[str, bool, Callable[[openai.OpenAI, anthropic.Anthropic], Any]]


def _chat_stream_helper(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with oc.chat.completions.stream(model="gpt-4o", messages=CHAT, stream_options=INCLUDE_USAGE) as s:
        return s.get_final_completion().choices[0].message.content


def _chat_streaming_response(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with oc.chat.completions.with_streaming_response.create(model="gpt-4o", messages=CHAT) as r:
        return r.parse().choices[0].message.content


def _chat_streaming_response_json(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with oc.chat.completions.with_streaming_response.create(model="gpt-4o", messages=CHAT) as r:
        return r.json()["choices"][0]["message"]["content"]  # type: ignore[index]


def _chat_streaming_response_streamed(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with oc.chat.completions.with_streaming_response.create(
        model="gpt-4o", messages=CHAT, stream=True, stream_options=INCLUDE_USAGE
    ) as r:
        return "".join(c.choices[0].delta.content or "" for c in r.parse() if c.choices)


def _chat_raw_streamed(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    raw = oc.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=CHAT, stream=True, stream_options=INCLUDE_USAGE
    )
    return "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)


def _responses_stream(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    return [e.type for e in oc.responses.create(model="gpt-4o", input=RESPONSES_INPUT, stream=True)][-1]


def _responses_stream_helper(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with oc.responses.stream(model="gpt-4o", input=RESPONSES_INPUT) as s:
        return s.get_final_response().output_text


def _responses_streaming_response(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with oc.responses.with_streaming_response.create(model="gpt-4o", input="hi") as r:
        return r.parse().output_text


def _messages_stream(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    events = ac.messages.create(model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES, stream=True)
    return [e.type for e in events][-1]


def _messages_stream_helper(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with ac.messages.stream(model=MODEL, max_tokens=300, system="Be kind.", messages=ANTHROPIC_MESSAGES) as s:
        return s.get_final_text()


def _messages_streaming_response(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with ac.messages.with_streaming_response.create(
        model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES
    ) as r:
        return r.parse().content[0].text  # type: ignore[union-attr]


def _messages_streaming_response_streamed(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with ac.messages.with_streaming_response.create(
        model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES, stream=True
    ) as r:
        return [e.type for e in r.parse()][-1]


def _beta_messages_stream(oc: openai.OpenAI, ac: anthropic.Anthropic) -> Any:
    with ac.beta.messages.stream(
        model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES, betas=["context-1m-2025-08-07"]
    ) as s:
        return s.get_final_text()


ENTRIES: list[Entry] = [
    ("chat.completions.create", False,
     lambda oc, ac: oc.chat.completions.create(model="gpt-4o", messages=CHAT, tools=TOOLS).id),
    ("chat.completions.create(stream)", False,
     lambda oc, ac: [c for c in oc.chat.completions.create(
         model="gpt-4o", messages=CHAT, stream=True, stream_options=INCLUDE_USAGE)][-1].id),
    ("chat.completions.parse", True,
     lambda oc, ac: oc.chat.completions.parse(
         model="gpt-4o", messages=CHAT, response_format=Verdict).choices[0].message.parsed),
    ("beta.chat.completions.parse", True,
     lambda oc, ac: oc.beta.chat.completions.parse(
         model="gpt-4o", messages=CHAT, response_format=Verdict).choices[0].message.parsed),
    ("chat.completions.stream", False, _chat_stream_helper),
    ("chat.completions.with_raw_response.create", False,
     lambda oc, ac: oc.chat.completions.with_raw_response.create(
         model="gpt-4o", messages=CHAT).parse().choices[0].message.content),
    ("chat.completions.with_raw_response.create(headers only)", False,
     lambda oc, ac: oc.chat.completions.with_raw_response.create(
         model="gpt-4o", messages=CHAT).headers.get("content-type")),
    ("chat.completions.with_raw_response.create(stream)", False, _chat_raw_streamed),
    ("chat.completions.with_raw_response.parse", True,
     lambda oc, ac: oc.chat.completions.with_raw_response.parse(
         model="gpt-4o", messages=CHAT, response_format=Verdict).parse().choices[0].message.parsed),
    ("chat.completions.with_streaming_response.create", False, _chat_streaming_response),
    ("chat.completions.with_streaming_response.create(json)", False, _chat_streaming_response_json),
    ("chat.completions.with_streaming_response.create(stream)", False, _chat_streaming_response_streamed),
    ("responses.create", False,
     lambda oc, ac: oc.responses.create(model="gpt-4o", instructions="Be kind.", input=RESPONSES_INPUT).id),
    ("responses.create(stream)", False, _responses_stream),
    ("responses.parse", True,
     lambda oc, ac: oc.responses.parse(model="gpt-4o", input="Refund?", text_format=Verdict).output_parsed),
    ("responses.stream", False, _responses_stream_helper),
    ("responses.with_raw_response.create", False,
     lambda oc, ac: oc.responses.with_raw_response.create(model="gpt-4o", input="hi").parse().output_text),
    ("responses.with_streaming_response.create", False, _responses_streaming_response),
    ("beta.responses.create", False,
     lambda oc, ac: oc.beta.responses.create(model="gpt-4o", input=RESPONSES_INPUT).id),  # type: ignore[arg-type]
    ("messages.create", False,
     lambda oc, ac: ac.messages.create(
         model=MODEL, max_tokens=300, system="Be kind.", messages=ANTHROPIC_MESSAGES,
         tools=ANTHROPIC_TOOLS).id),  # type: ignore[arg-type]
    ("messages.create(stream)", False, _messages_stream),
    ("messages.stream", False, _messages_stream_helper),
    ("messages.parse", True,
     lambda oc, ac: ac.messages.parse(
         model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES, output_format=Verdict).parsed_output),
    ("messages.with_raw_response.create", False,
     lambda oc, ac: ac.messages.with_raw_response.create(
         model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES).parse().id),
    ("messages.with_streaming_response.create", False, _messages_streaming_response),
    ("messages.with_streaming_response.create(stream)", False, _messages_streaming_response_streamed),
    ("beta.messages.create", False,
     lambda oc, ac: ac.beta.messages.create(
         model=MODEL, max_tokens=300, system="Be kind.", messages=ANTHROPIC_MESSAGES,  # type: ignore[arg-type]
         tools=ANTHROPIC_TOOLS, betas=["context-1m-2025-08-07"]).id),  # type: ignore[arg-type]
    ("beta.messages.stream", False, _beta_messages_stream),
    ("beta.messages.parse", True,
     lambda oc, ac: ac.beta.messages.parse(
         model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES,  # type: ignore[arg-type]
         output_format=Verdict).parsed_output),
    ("beta.messages.with_raw_response.create", False,
     lambda oc, ac: ac.beta.messages.with_raw_response.create(
         model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES).parse().id),  # type: ignore[arg-type]
]  # fmt: skip

#: The dialect each path is measured in: what the call is, never a guess from the body's shape.
DIALECT = {"/v1/chat/completions": "openai", "/v1/responses": "openai-responses", "/v1/messages": "anthropic"}


def _accuracy_count(cap: Instrumented) -> int:
    """Accuracy observations recorded (one histogram point per model and task type, each with a count)."""
    return sum(p.count for p in cap.points(n.ESTIMATE_ACCURACY.name))


def _run(fake: FakeProvider, entry: Entry) -> Any:
    _, structured, call = entry
    fake.queue(_reply(structured))
    return call(openai_client(fake), anthropic_client(fake))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_every_entry_point_is_one_round_with_the_providers_usage(
    instrumented: Instrumented, fake_provider: FakeProvider, entry: Entry
) -> None:
    got = _run(fake_provider, entry)
    if entry[1]:  # structured output reaches the agent as its own type
        assert got == Verdict(**VERDICT)
    (request,) = fake_provider.requests
    (span,) = instrumented.rounds()
    a = span.attributes or {}
    assert a[n.PROVIDER] == DIALECT[request.path]
    assert a[n.USAGE_INPUT_TOKENS] == USAGE
    assert a[n.ESTIMATED_TOKENS] > 0
    assert span.end_time is not None and span.status.is_ok
    assert _accuracy_count(instrumented) == 1
    if entry[0].startswith("beta.responses"):  # the beta endpoint was called
        assert request.query == "beta=true"
    if entry[0] in ("beta.messages.create", "beta.messages.stream"):
        assert request.headers["anthropic-beta"] == "context-1m-2025-08-07"


def test_bodies_are_byte_identical_on_every_entry_point(fake_provider: FakeProvider) -> None:
    for entry in ENTRIES:
        _run(fake_provider, entry)
    plain = [(r.path, r.query, r.body) for r in fake_provider.requests]
    fake_provider.requests.clear()
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        results = [_run(fake_provider, entry) for entry in ENTRIES]
    finally:
        oi.uninstrument()
    assert [(r.path, r.query, r.body) for r in fake_provider.requests] == plain
    assert len(cap.rounds()) == len(plain) == len(ENTRIES)
    assert results[ENTRIES.index(next(e for e in ENTRIES if e[0] == "messages.parse"))] == Verdict(**VERDICT)


def test_the_tool_runner_is_one_round_per_request(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    @anthropic.beta_tool
    def get_order(id: str) -> str:
        """Look up an order by id."""
        return '{"status": "delivered"}'

    fake_provider.queue(
        Reply(tool_calls=[("get_order", '{"id": "88-1042"}')], input_tokens=200),
        Reply(text="It was delivered.", input_tokens=260),
    )
    runner = anthropic_client(fake_provider).beta.messages.tool_runner(
        model=MODEL, max_tokens=300, tools=[get_order], messages=ANTHROPIC_MESSAGES[:1]
    )
    final = runner.until_done()
    assert final.content[0].text == "It was delivered."  # type: ignore[union-attr]
    first, second = instrumented.rounds()
    assert [first.attributes[n.USAGE_INPUT_TOKENS], second.attributes[n.USAGE_INPUT_TOKENS]] == [200, 260]  # type: ignore[index]
    assert first.attributes[n.TOOL_SCHEMA_TOKENS] > 0  # type: ignore[index]


def test_async_entry_points(instrumented: Instrumented, fake_provider: FakeProvider) -> None:
    async def agent() -> list[Any]:
        oc, ac = async_openai_client(fake_provider), async_anthropic_client(fake_provider)
        out: list[Any] = []
        fake_provider.queue(_reply(True), _reply(True))
        out.append(
            (await oc.chat.completions.parse(model="gpt-4o", messages=CHAT, response_format=Verdict))
            .choices[0]
            .message.parsed
        )
        out.append(
            (await oc.responses.parse(model="gpt-4o", input="Refund?", text_format=Verdict)).output_parsed
        )
        raw = await oc.chat.completions.with_raw_response.create(model="gpt-4o", messages=CHAT)
        out.append(raw.parse().choices[0].message.content)
        async with oc.chat.completions.with_streaming_response.create(model="gpt-4o", messages=CHAT) as r:
            out.append((await r.parse()).choices[0].message.content)
        async with oc.chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=CHAT, stream=True, stream_options=INCLUDE_USAGE
        ) as r:
            out.append(
                "".join([c.choices[0].delta.content or "" async for c in await r.parse() if c.choices])
            )
        raw_stream = await oc.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=CHAT, stream=True, stream_options=INCLUDE_USAGE
        )
        out.append("".join([c.choices[0].delta.content or "" async for c in raw_stream.parse() if c.choices]))
        out.append((await oc.beta.responses.create(model="gpt-4o", input="hi")).id)  # type: ignore[arg-type]
        msgs: Any = ANTHROPIC_MESSAGES
        out.append((await ac.beta.messages.create(model=MODEL, max_tokens=50, messages=msgs, betas=["x"])).id)
        async with ac.beta.messages.stream(model=MODEL, max_tokens=50, messages=msgs) as s:
            out.append(await s.get_final_text())
        fake_provider.queue(_reply(True))
        out.append(
            (
                await ac.messages.parse(model=MODEL, max_tokens=50, messages=msgs, output_format=Verdict)
            ).parsed_output
        )
        async with ac.messages.with_streaming_response.create(model=MODEL, max_tokens=50, messages=msgs) as r:
            out.append((await r.parse()).content[0].text)  # type: ignore[union-attr]
        rawm = await ac.messages.with_raw_response.create(model=MODEL, max_tokens=50, messages=msgs)
        out.append((await rawm.parse()).id)
        return out

    out = asyncio.run(agent())
    assert out[0] == out[1] == out[9] == Verdict(**VERDICT)
    assert out[2] == out[3] == out[4] == out[5] == out[8] == out[10] == "Done."
    rounds = instrumented.rounds()
    assert len(rounds) == len(out) == len(fake_provider.requests)
    assert all((s.attributes or {}).get(n.USAGE_INPUT_TOKENS, 0) > 0 for s in rounds)
    assert _accuracy_count(instrumented) == len(rounds)


@pytest.mark.parametrize("status", [400, 500])
def test_the_sdks_own_errors_on_raw_parse_and_beta_calls(
    instrumented: Instrumented, fake_provider: FakeProvider, status: int
) -> None:
    oc, ac = openai_client(fake_provider), anthropic_client(fake_provider)
    oerr = openai.BadRequestError if status == 400 else openai.InternalServerError
    aerr = anthropic.BadRequestError if status == 400 else anthropic.InternalServerError
    calls: list[tuple[type[Exception], Callable[[], Any]]] = [
        (oerr, lambda: oc.chat.completions.with_raw_response.create(model="gpt-4o", messages=CHAT)),
        (oerr, lambda: oc.chat.completions.parse(model="gpt-4o", messages=CHAT, response_format=Verdict)),
        (oerr, lambda: oc.responses.with_streaming_response.create(model="gpt-4o", input="hi").__enter__()),
        (aerr, lambda: ac.beta.messages.create(model=MODEL, max_tokens=5, messages=ANTHROPIC_MESSAGES)),  # type: ignore[arg-type]
        (aerr, lambda: ac.messages.with_raw_response.create(model=MODEL, max_tokens=5, messages=[])),
    ]  # fmt: skip
    for expected, call in calls:
        fake_provider.queue(Reply(status=status))
        with pytest.raises(expected) as caught:
            call()
        assert type(caught.value) is expected and caught.value.status_code == status  # type: ignore[attr-defined]
        assert not any("otel_ctx" in (f.filename or "") for f in inspect.getinnerframes(caught.tb)[-1:])
    rounds = instrumented.rounds()
    assert len(rounds) == len(calls)
    assert all(not r.status.is_ok for r in rounds)


def test_requests_that_are_not_model_calls_are_not_rounds(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)
    with pytest.raises(openai.NotFoundError):  # the fake provider has no /completions route
        oc.completions.create(model="gpt-3.5-turbo-instruct", prompt="hi")
    with pytest.raises(anthropic.NotFoundError):
        anthropic_client(fake_provider).messages.count_tokens(model=MODEL, messages=ANTHROPIC_MESSAGES)
    assert instrumented.rounds() == []


# --- abandoned streams ----------------------------------------------------------------------------


def test_a_stream_the_agent_abandons_ends_its_round_when_collected(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)
    for _ in range(20):
        fake_provider.queue(Reply(text="one two three four"))
        stream = oc.chat.completions.create(model="gpt-4o", messages=CHAT, stream=True)
        next(iter(stream))  # the agent reads one chunk, then loses interest and never closes it
        del stream
    gc.collect()
    rounds = instrumented.rounds()
    assert len(rounds) == 20 and all(s.end_time is not None for s in rounds)


def test_an_abandoned_stream_keeps_the_usage_it_saw(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    ac = anthropic_client(fake_provider)
    fake_provider.queue(Reply(text="a long answer", input_tokens=444))
    events = ac.messages.create(model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES, stream=True)
    assert next(iter(events)).type == "message_start"  # carries the input tokens
    assert instrumented.rounds() == []  # still open while the agent holds it
    del events
    gc.collect()
    (span,) = instrumented.rounds()
    assert span.attributes[n.USAGE_INPUT_TOKENS] == 444  # type: ignore[index]


def test_a_stream_closed_early_or_a_helper_left_early_ends_its_round(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc, ac = openai_client(fake_provider), anthropic_client(fake_provider)
    fake_provider.queue(Reply(text="one two three"), Reply(text="one two three", input_tokens=55))
    stream = oc.responses.create(model="gpt-4o", input="hi", stream=True)
    next(iter(stream))
    stream.close()
    assert len(instrumented.rounds()) == 1
    with ac.messages.stream(model=MODEL, max_tokens=300, messages=ANTHROPIC_MESSAGES) as helper:
        next(iter(helper))  # message_start: the input tokens are known
    _, second = instrumented.rounds()
    assert second.attributes[n.USAGE_INPUT_TOKENS] == 55  # type: ignore[index]
    with oc.chat.completions.with_streaming_response.create(model="gpt-4o", messages=CHAT, stream=True) as r:
        assert r.status_code == 200  # never parsed: the round ends when the response closes
    assert len(instrumented.rounds()) == 3
    stream = oc.chat.completions.create(model="gpt-4o", messages=CHAT, stream=True)
    for _ in stream:  # exhausted
        pass
    assert len(instrumented.rounds()) == 4


# --- warnings ---------------------------------------------------------------------------------------


def _deprecated_model() -> str:
    """A model the installed SDK warns about: its own list changes as models reach end of life."""
    from anthropic._data import DEPRECATED_MODELS

    assert DEPRECATED_MODELS, "the installed anthropic SDK lists no deprecated model to warn about"
    return sorted(DEPRECATED_MODELS)[0]


def _deprecated_call(ac: anthropic.Anthropic) -> tuple[list[warnings.WarningMessage], int]:
    model = _deprecated_model()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        ac.messages.create(model=model, max_tokens=5, messages=ANTHROPIC_MESSAGES)
    return [w for w in seen if issubclass(w.category, DeprecationWarning)], line


def test_the_sdks_own_warnings_point_at_the_agents_line(fake_provider: FakeProvider) -> None:
    ac = anthropic_client(fake_provider)
    plain, line = _deprecated_call(ac)
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        observed, _ = _deprecated_call(ac)
    finally:
        oi.uninstrument()
    assert len(cap.rounds()) == 1
    assert [(w.filename, w.lineno) for w in observed] == [(w.filename, w.lineno) for w in plain]
    assert [(w.filename, w.lineno) for w in observed] == [(__file__, line)]
    assert "end-of-life" in str(observed[0].message)


# --- sequences other than lists ---------------------------------------------------------------------


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def test_tuples_are_observed_like_lists(fake_provider: FakeProvider) -> None:
    oc, ac = openai_client(fake_provider), anthropic_client(fake_provider)
    chat = [*CHAT, {"role": "user", "content": [{"type": "text", "text": "And the refund?"}]}]
    system = [{"type": "text", "text": "Be kind."}]
    keys = (n.PROVIDER, n.ESTIMATED_TOKENS, n.SYSTEM_PROMPT_TOKENS, n.TOOL_SCHEMA_TOKENS, n.TRANSCRIPT_TOKENS)
    seen = []
    for shape in (lambda v: v, _tuples):
        # A fresh instrumentation per shape: the same calibration (none yet) for both.
        cap = Instrumented()
        oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
        try:
            oc.chat.completions.create(model="gpt-4o", messages=shape(chat), tools=shape(TOOLS))
            oc.responses.create(model="gpt-4o", input=shape(RESPONSES_INPUT))
            ac.messages.create(
                model=MODEL, max_tokens=300, system=shape(system), messages=shape(ANTHROPIC_MESSAGES),
                tools=shape(ANTHROPIC_TOOLS),
            )  # fmt: skip
        finally:
            oi.uninstrument()
        seen.append([[(r.attributes or {}).get(k) for k in keys] for r in cap.rounds()])
    lists, tuples = seen
    assert [r[0] for r in lists] == ["openai", "openai-responses", "anthropic"]
    assert tuples == lists
    assert lists[0][3] > 0 and lists[2][2] > 0 and lists[2][3] > 0  # tools and system were read
    assert fake_provider.bodies()[:3] == fake_provider.bodies()[3:]  # the same requests went out


def test_raw_and_streaming_responses_stay_the_sdks_and_otel_ctx_failures_stay_inside(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai._legacy_response import LegacyAPIResponse

    from otel_ctx.instrumentation import _sdk

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected failure inside otel-ctx")

    monkeypatch.setattr(_sdk, "_usage_in_body", broken)
    monkeypatch.setattr(_sdk, "CHAT", _sdk.Route("openai", broken, broken))
    oc = openai_client(fake_provider)
    raw = oc.chat.completions.with_raw_response.create(model="gpt-4o", messages=CHAT)
    assert type(raw) is LegacyAPIResponse and raw.parse().choices[0].message.content == "Done."
    streamed = oc.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=CHAT, stream=True, stream_options=INCLUDE_USAGE
    )
    assert isinstance(streamed, LegacyAPIResponse)
    chunks = list(streamed.parse())
    assert isinstance(chunks[0], openai.types.chat.ChatCompletionChunk) and chunks[-1].usage is not None
    with oc.chat.completions.with_streaming_response.create(model="gpt-4o", messages=CHAT) as r:
        assert isinstance(r, openai.APIResponse)
        assert r.parse().choices[0].message.content == "Done."
    with oc.chat.completions.with_streaming_response.create(model="gpt-4o", messages=CHAT) as r:
        assert r.json()["object"] == "chat.completion"  # type: ignore[index]
    rounds = instrumented.rounds()
    assert len(rounds) == 4  # every round ended, without the usage otel-ctx failed to read
    assert all(n.USAGE_INPUT_TOKENS not in (s.attributes or {}) for s in rounds)


def test_the_openai_agents_sdk_is_one_round_per_model_call(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)

    async def agent() -> list[Any]:
        client = async_openai_client(fake_provider)
        out = []
        for model in (OpenAIResponsesModel("gpt-4o", client), OpenAIChatCompletionsModel("gpt-4o", client)):
            fake_provider.queue(Reply(input_tokens=USAGE))
            run = await Runner.run(Agent(name="support", instructions="Be kind.", model=model), "Refund?")
            out.append(run.final_output)
        return out

    assert asyncio.run(agent()) == ["Done.", "Done."]
    responses, chat = instrumented.rounds()
    assert [responses.attributes[n.PROVIDER], chat.attributes[n.PROVIDER]] == ["openai-responses", "openai"]  # type: ignore[index]
    assert responses.attributes[n.USAGE_INPUT_TOKENS] == chat.attributes[n.USAGE_INPUT_TOKENS] == USAGE  # type: ignore[index]
    assert responses.attributes[n.SYSTEM_PROMPT_TOKENS] > 0  # type: ignore[index]  # the instructions


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/chat/completions", "openai"),
        ("/responses", "openai-responses"),
        ("/openai/deployments/gpt-4o/chat/completions", "openai"),
        ("/chat/completions/chatcmpl-1", None),  # retrieve a stored completion
        ("/chat/completions/chatcmpl-1/messages", None),
        ("/responses/resp_1", None),
        ("/responses/resp_1/cancel", None),
        ("/responses/compact", None),
        ("/responses/input_tokens", None),
        ("/completions", None),
        ("/embeddings", None),
    ],
)
def test_only_model_request_paths_are_rounds_openai(path: str, provider: str | None) -> None:
    from otel_ctx.instrumentation import _sdk

    route = _sdk.openai_route(path)
    assert (route.provider if route else None) == provider


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/v1/messages", "anthropic"),
        ("/v1/messages/count_tokens", None),
        ("/v1/messages/batches", None),
        ("/v1/messages/batches/msgbatch_1/cancel", None),
        ("/v1/threads/thread_1/messages", None),
        ("/v1/complete", None),
        ("/v1/models", None),
    ],
)
def test_only_model_request_paths_are_rounds_anthropic(path: str, provider: str | None) -> None:
    from otel_ctx.instrumentation import _sdk

    route = _sdk.anthropic_route(path)
    assert (route.provider if route else None) == provider
