"""The instrumentor with the real openai and anthropic SDKs against the fake provider on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fake_provider import FakeProvider, Reply, closed_port_url
from instrument_support import (
    ANTHROPIC_MESSAGES,
    ANTHROPIC_TOOLS,
    CHAT,
    RESPONSES_INPUT,
    RESPONSES_TOOLS,
    TOOLS,
    Instrumented,
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    instrumented,
    openai_client,
)
from opentelemetry import baggage
from opentelemetry import context as otel_context

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n
from otel_ctx._fitting import ContextFitter
from otel_ctx.instrumentation import _core
from otel_ctx.instrumentation._sdk import request_layer

__all__ = ["instrumented"]  # the fixture, imported for pytest


def _calls(fake: FakeProvider) -> list[Callable[[], Any]]:
    """One call of every instrumented kind (plain and streamed), consumed the way agents do."""
    oc, ac = openai_client(fake), anthropic_client(fake)

    def chat_stream() -> Any:
        with oc.chat.completions.create(model="gpt-4o", messages=CHAT, tools=TOOLS, stream=True) as s:
            return [c for c in s]

    def responses_stream() -> Any:
        return list(oc.responses.create(model="gpt-4o", input=RESPONSES_INPUT, stream=True))

    def anthropic_stream() -> Any:
        return list(
            ac.messages.create(
                model="claude-sonnet-4-6", max_tokens=300, messages=ANTHROPIC_MESSAGES, stream=True
            )
        )

    def anthropic_helper() -> Any:
        with ac.messages.stream(
            model="claude-sonnet-4-6", max_tokens=300, system="Be kind.", messages=ANTHROPIC_MESSAGES
        ) as s:
            return s.get_final_text()

    return [
        lambda: oc.chat.completions.create(
            model="gpt-4o", messages=CHAT, tools=TOOLS, max_completion_tokens=500
        ),
        chat_stream,
        lambda: oc.responses.create(
            model="gpt-4o",
            instructions="Be kind.",
            input=RESPONSES_INPUT,
            tools=RESPONSES_TOOLS,  # type: ignore[arg-type]
        ),
        responses_stream,
        lambda: ac.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=300,
            system="Be kind.",
            messages=ANTHROPIC_MESSAGES,
            tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
        ),
        anthropic_stream,
        anthropic_helper,
    ]


def test_request_bodies_are_byte_identical_with_and_without_instrumentation(
    fake_provider: FakeProvider,
) -> None:
    for call in _calls(fake_provider):
        call()
    plain = [(r.path, r.body) for r in fake_provider.requests]
    fake_provider.requests.clear()
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        for call in _calls(fake_provider):
            call()
    finally:
        oi.uninstrument()
    assert [(r.path, r.body) for r in fake_provider.requests] == plain
    assert len(cap.rounds()) == len(plain) == 7
    # Never adds stream_options: a stream's usage is read only when the agent asked for it.
    assert all(b"stream_options" not in body for _, body in plain)


def test_responses_and_streams_come_back_as_the_sdks_types(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)
    done = oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    assert type(done) is openai.types.chat.ChatCompletion
    assert done.choices[0].message.content == "Done."
    fake_provider.queue(Reply(text="one two three"))
    stream = oc.chat.completions.create(
        model="gpt-4o", messages=CHAT, stream=True, stream_options={"include_usage": True}
    )
    assert isinstance(stream, openai.Stream)
    with stream as s:
        chunks = list(s)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert chunks[-1].usage is not None  # the final (usage) chunk reaches the caller
    resp = oc.responses.create(model="gpt-4o", input="hello")
    assert type(resp) is openai.types.responses.Response
    ac = anthropic_client(fake_provider)
    msg = ac.messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert type(msg) is anthropic.types.Message
    raw = ac.messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert isinstance(raw, anthropic.Stream)
    events = list(raw)
    assert events[-1].type == "message_stop"
    with ac.messages.stream(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    ) as helper:
        assert isinstance(helper, anthropic.lib.streaming.MessageStream)
        assert helper.get_final_message().usage.output_tokens == 7
    assert len(instrumented.rounds()) == 6


def test_async_calls_and_streams(instrumented: Instrumented, fake_provider: FakeProvider) -> None:
    async def agent() -> list[Any]:
        oc, ac = async_openai_client(fake_provider), async_anthropic_client(fake_provider)
        out: list[Any] = [await oc.chat.completions.create(model="gpt-4o", messages=CHAT)]
        stream = await oc.chat.completions.create(
            model="gpt-4o", messages=CHAT, stream=True, stream_options={"include_usage": True}
        )
        assert isinstance(stream, openai.AsyncStream)
        async with stream as s:
            out.append([c async for c in s])
        out.append(await oc.responses.create(model="gpt-4o", input="hello"))
        out.append([e async for e in await oc.responses.create(model="gpt-4o", input="hi", stream=True)])
        msgs: Any = [{"role": "user", "content": "hi"}]
        out.append(await ac.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=msgs))
        araw = await ac.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=msgs, stream=True)
        assert isinstance(araw, anthropic.AsyncStream)
        out.append([e async for e in araw])
        async with ac.messages.stream(model="claude-sonnet-4-6", max_tokens=50, messages=msgs) as helper:
            out.append(await helper.get_final_text())
        return out

    out = asyncio.run(agent())
    assert type(out[0]) is openai.types.chat.ChatCompletion
    assert out[1][-1].usage is not None
    assert out[6] == "Done."
    rounds = instrumented.rounds()
    assert len(rounds) == 7
    assert all(s.attributes[n.USAGE_INPUT_TOKENS] > 0 for s in rounds)  # type: ignore[index]
    assert len(instrumented.points(n.ESTIMATE_ACCURACY.name)) > 0


@pytest.mark.parametrize("status", [400, 500])
def test_provider_errors_reach_the_caller_unchanged(
    instrumented: Instrumented, fake_provider: FakeProvider, status: int
) -> None:
    expected_openai = openai.BadRequestError if status == 400 else openai.InternalServerError
    expected_anthropic = anthropic.BadRequestError if status == 400 else anthropic.InternalServerError
    fake_provider.queue(
        Reply(status=status), Reply(status=status), Reply(status=status), Reply(status=status)
    )
    with pytest.raises(expected_openai) as caught:
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
    assert type(caught.value) is expected_openai and caught.value.status_code == status
    with pytest.raises(expected_openai):
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT, stream=True)
    ac = anthropic_client(fake_provider)
    with pytest.raises(expected_anthropic):
        ac.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=ANTHROPIC_MESSAGES)
    with (
        pytest.raises(expected_anthropic),
        ac.messages.stream(model="claude-sonnet-4-6", max_tokens=5, messages=ANTHROPIC_MESSAGES) as s,
    ):
        s.get_final_text()
    rounds = instrumented.rounds()
    assert len(rounds) == 4
    assert all(not r.status.is_ok for r in rounds)


def test_a_refused_connection_reaches_the_caller_as_the_sdks_error(instrumented: Instrumented) -> None:
    url = closed_port_url()
    oc = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    ac = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.APIConnectionError):
        ac.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=ANTHROPIC_MESSAGES)
    assert len(instrumented.rounds()) == 2


def test_a_failure_inside_otel_ctx_never_reaches_the_agent(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected failure inside otel-ctx")

    monkeypatch.setattr(ContextFitter, "measure_request", broken)
    monkeypatch.setattr(_core, "log_failure", type(_core.log_failure)())  # this test's counts only
    oc = openai_client(fake_provider)
    with caplog.at_level(logging.DEBUG, logger="otel_ctx.telemetry"):
        first = oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        second = oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        streamed = list(oc.chat.completions.create(model="gpt-4o", messages=CHAT, stream=True))
    assert first.choices[0].message.content == second.choices[0].message.content == "Done."
    assert streamed[-1].choices[0].finish_reason == "stop"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "RuntimeError" in warnings[0].getMessage()  # logged once
    # The type and where, never the exception's message (it may quote the request).
    assert warnings[0].exc_info is None and "injected failure" not in warnings[0].getMessage()
    # Not dark: each call still has its round, saying why it was not measured.
    rounds = instrumented.rounds()
    assert [r.attributes[n.UNOBSERVED_REASON] for r in rounds] == [n.UNOBSERVED_MEASURE_ERROR] * 3


def test_a_failure_reading_a_stream_never_reaches_the_agent(
    instrumented: Instrumented, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_ctx.instrumentation import _sdk

    def broken(usage: Any) -> Any:
        raise ValueError("injected failure reading usage")

    monkeypatch.setattr(_sdk, "openai_chat_usage", broken)
    chunks = list(
        openai_client(fake_provider).chat.completions.create(
            model="gpt-4o", messages=CHAT, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None
    (span,) = instrumented.rounds()
    assert n.USAGE_INPUT_TOKENS not in span.attributes  # type: ignore[operator]


def test_spans_carry_the_breakdown_against_the_models_budget(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    with otel_ctx.task("returns", conversation_id="conv-1"):
        openai_client(fake_provider).chat.completions.create(
            model="gpt-4o-2024-08-06", messages=CHAT, tools=TOOLS, max_completion_tokens=1000
        )
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
        anthropic_client(fake_provider).messages.create(
            model="claude-haiku-4-5-20251001", max_tokens=2000, messages=ANTHROPIC_MESSAGES
        )
    dated, default_reserve, claude = instrumented.rounds()
    a = dated.attributes
    assert a is not None
    assert a[n.CONTEXT_LENGTH] == 128_000 and a[n.RESERVED_OUTPUT] == 1000 and a[n.BUDGET] == 127_000
    parts = a[n.TRANSCRIPT_TOKENS] + a[n.TOOL_SCHEMA_TOKENS] + a[n.SYSTEM_PROMPT_TOKENS] + a[n.SKILLS_TOKENS]
    assert parts == a[n.ESTIMATED_TOKENS] and a[n.TOOL_SCHEMA_TOKENS] > 0
    assert a[n.TRANSCRIPT_ROLE_TOKENS["tool"]] > 0
    assert a[n.REMAINING_TOKENS] == a[n.BUDGET] - a[n.ESTIMATED_TOKENS]
    assert a[n.TASK_TYPE] == "returns" and a[n.OUTCOME] == "fit" and a[n.MODE] == "observe"
    assert a[n.PROVIDER] == "openai" and a[n.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert default_reserve.attributes[n.RESERVED_OUTPUT] == 4096  # type: ignore[index]
    c = claude.attributes
    assert c is not None and c[n.CONTEXT_LENGTH] == 200_000 and c[n.BUDGET] == 198_000
    assert c[n.PROVIDER] == "anthropic" and c[n.ESTIMATED_TOKENS] > 0
    for span in instrumented.rounds():
        keys = set(span.attributes or {})
        assert not any(k.startswith("gen_ai.usage.") for k in keys)
        assert n.GEN_AI_REQUEST_MODEL not in keys and n.GEN_AI_OPERATION_NAME not in keys
    # The model stays on metrics.
    points = instrumented.points(n.FITS.name)
    assert {p.attributes[n.GEN_AI_REQUEST_MODEL] for p in points if p.value} >= {
        "gpt-4o",
        "claude-haiku-4-5-20251001",
    }


def test_an_overflowing_request_is_an_overflow_round(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    big = "word " * 9000
    openai_client(fake_provider).chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": big}], max_tokens=500
    )
    (span,) = instrumented.rounds()
    assert span.attributes[n.OUTCOME] == "overflow"  # type: ignore[index]
    assert span.attributes[n.BUDGET] == 8192 - 500  # type: ignore[index]
    assert [e.name for e in span.events] == [n.EVENT_FLOOR_OVERFLOW]
    # The request went out untouched all the same.
    assert json.loads(fake_provider.requests[-1].body)["messages"][0]["content"] == big


def test_rounds_count_per_conversation_across_threads_and_async_tasks(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)

    def worker(conv: str) -> None:
        with otel_ctx.task("status", conversation_id=conv):
            for _ in range(3):
                oc.chat.completions.create(model="gpt-4o", messages=CHAT)

    threads = [threading.Thread(target=worker, args=(c,)) for c in ("A", "B", "A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    @otel_ctx.task("status", conversation_id="C")
    async def async_agent() -> None:
        aoc = async_openai_client(fake_provider)
        await asyncio.gather(*(aoc.chat.completions.create(model="gpt-4o", messages=CHAT) for _ in range(5)))

    asyncio.run(async_agent())
    by_conv: dict[str, list[int]] = {}
    for span in instrumented.rounds():
        a = span.attributes or {}
        by_conv.setdefault(str(a[n.GEN_AI_CONVERSATION_ID]), []).append(int(a[n.ROUND]))  # type: ignore[arg-type]
    assert {k: sorted(v) for k, v in by_conv.items()} == {
        "A": [1, 2, 3, 4, 5, 6],
        "B": [1, 2, 3, 4, 5, 6],
        "C": [1, 2, 3, 4, 5],
    }


def test_without_a_conversation_the_round_is_the_answers_in_the_transcript_plus_one(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)
    oc.chat.completions.create(model="gpt-4o", messages=CHAT[:2])
    oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    oc.chat.completions.create(
        model="gpt-4o",
        messages=[*CHAT, {"role": "assistant", "content": "Sorry!"}, {"role": "user", "content": "ok"}],
    )
    assert [s.attributes[n.ROUND] for s in instrumented.rounds()] == [1, 2, 3]  # type: ignore[index]


def test_a_long_tool_calling_run_is_numbered_by_its_answers_round_after_round(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    """The real client's rounds of a growing tool-calling run, one retried and one edited in place:
    each is numbered by the answers its transcript holds, as a count from scratch says."""
    oc = openai_client(fake_provider)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Where are my 40 orders?"}]

    def pair(k: int) -> list[dict[str, Any]]:
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "lookup", "arguments": f'{{"k": {k}}}'},
        }
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"order {k}: shipped"},
        ]

    for k in range(40):
        messages += pair(k)
    aside = {"role": "assistant", "content": "Let me look them up."}
    expected = []
    for k in range(40, 44):
        if k == 41:
            messages[3:3] = [aside, {"role": "user", "content": "ok"}]  # an answer deep in the history
        if k == 42:
            messages[-2:] = pair(142)  # retried: the last call made again, another id
        elif k == 43:
            aside["role"] = "user"  # the same answer changed in place: no longer one
            messages.append({"role": "assistant", "content": "All 43 have shipped."})
        else:
            messages += pair(k)
        oc.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        expected.append(_core._assistant_turns({"messages": messages}, "messages") + 1)
    assert expected == [42, 44, 44, 44]
    assert [s.attributes[n.ROUND] for s in instrumented.rounds()] == expected


def test_the_conversation_table_is_bounded() -> None:
    table = _core.Conversations(3)
    for conv in ("a", "b", "c", "d", "e"):
        table.next_round(conv)
    assert len(table) == 3
    assert table.next_round("e") == 2 and table.next_round("a") == 1  # "a" was forgotten


def test_usage_feeds_accuracy_and_calibration_per_model_with_cached_tokens(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(Reply(input_tokens=400, cached_tokens=100), Reply(input_tokens=300, cached_tokens=50))
    openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
    anthropic_client(fake_provider).messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=ANTHROPIC_MESSAGES
    )
    fake_provider.queue(Reply(stream_usage=False))
    list(openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT, stream=True))
    chat, claude, no_usage = instrumented.rounds()
    assert chat.attributes[n.USAGE_INPUT_TOKENS] == 400  # type: ignore[index]
    assert chat.attributes[n.USAGE_CACHED_INPUT_TOKENS] == 100  # type: ignore[index]
    # Anthropic reports cache reads beside input_tokens: the prompt was 300 + 50.
    assert claude.attributes[n.USAGE_INPUT_TOKENS] == 350  # type: ignore[index]
    assert claude.attributes[n.USAGE_CACHED_INPUT_TOKENS] == 50  # type: ignore[index]
    assert n.USAGE_INPUT_TOKENS not in (no_usage.attributes or {})
    est = chat.attributes[n.ESTIMATED_TOKENS]  # type: ignore[index]
    assert chat.attributes[n.ESTIMATE_ACCURACY_RATIO] == pytest.approx(400 / est)  # type: ignore[index]
    points = instrumented.points(n.ESTIMATE_ACCURACY.name)
    assert sorted(p.attributes[n.GEN_AI_REQUEST_MODEL] for p in points) == ["claude-sonnet-4-6", "gpt-4o"]
    assert sum(p.count for p in points) == 2
    observer = oi.active_observer()
    assert observer is not None
    # The gpt-4o text was counted by rules that reproduce the provider: a bill of 400 against it
    # says the body does not show everything (here a fake's made-up figure) and teaches nothing,
    # while the Anthropic estimate learns from its bill.
    assert observer.fitter("gpt-4o").calibration == 1.0
    assert observer.fitter("claude-sonnet-4-6").calibration > 1.0
    assert observer.fitter("gpt-4o") is not observer.fitter("claude-sonnet-4-6")


def test_task_type_and_conversation_from_w3c_baggage(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    ctx = baggage.set_baggage(n.BAGGAGE_TASK_TYPE, "dispute")
    ctx = baggage.set_baggage(n.BAGGAGE_CONVERSATION_ID, "gw-77", context=ctx)
    token = otel_context.attach(ctx)
    try:
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
    finally:
        otel_context.detach(token)
    first, second = instrumented.rounds()
    assert first.attributes[n.TASK_TYPE] == "dispute"  # type: ignore[index]
    assert [first.attributes[n.ROUND], second.attributes[n.ROUND]] == [1, 2]  # type: ignore[index]


def test_policies_from_instrument_and_from_a_file(
    fake_provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = Instrumented()
    policies = {"returns": {"request_limit": 8000, "safety_margin": 100}, "default": {"reserved_output": 800}}
    oi.instrument(
        tracer_provider=cap.tracer_provider,
        meter_provider=cap.meter_provider,
        langchain=False,
        policies=policies,
        default_task_type="triage",
    )
    try:
        with otel_ctx.task("returns"):
            openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
    finally:
        oi.uninstrument()
    returns, triage = cap.rounds()
    assert returns.attributes[n.BUDGET] == 8000 - 4096 - 100  # type: ignore[index]
    assert triage.attributes[n.TASK_TYPE] == "triage"  # type: ignore[index]
    assert triage.attributes[n.BUDGET] == 128_000 - 800  # type: ignore[index]

    policy_file = tmp_path / "policies.json"
    policy_file.write_text(json.dumps({"status": {"request_limit": 4000, "reserved_output": 500}}))
    models_file = tmp_path / "models.json"
    models_file.write_text(
        json.dumps({"as_of": "2026-01-01", "models": {"acme-1": {"context_window": 32000}}})
    )
    monkeypatch.setenv(oi.ENV_POLICIES, str(policy_file))
    monkeypatch.setenv(oi.ENV_TASK_TYPE, "status")
    monkeypatch.setenv(oi.ENV_MODELS, str(models_file))
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)
        with otel_ctx.task("other"):
            openai_client(fake_provider).chat.completions.create(model="acme-1", messages=CHAT)
    finally:
        oi.uninstrument()
    status, other = cap.rounds()
    assert status.attributes[n.TASK_TYPE] == "status" and status.attributes[n.BUDGET] == 3500  # type: ignore[index]
    assert other.attributes[n.CONTEXT_LENGTH] == 32_000  # type: ignore[index]


def test_uninstrument_restores_the_sdks_own_methods() -> None:
    import anthropic._base_client as anthropic_base
    import openai._base_client as openai_base

    owners = [
        openai_base.SyncAPIClient,
        openai_base.AsyncAPIClient,
        anthropic_base.SyncAPIClient,
        anthropic_base.AsyncAPIClient,
    ]
    # Each client's request layer: ``_request`` inside the anthropic SDK's own call span, else ``request``.
    layers = [request_layer(owner) for owner in owners]
    assert layers == ["request", "request", "_request", "_request"]
    originals = [owner.__dict__[layer] for owner, layer in zip(owners, layers)]
    untouched = [owner.__dict__["request"] for owner in owners]
    oi.instrument(langchain=False)
    try:
        assert all(owner.__dict__[layer] is not o for owner, layer, o in zip(owners, layers, originals))
        assert all(owner.__dict__["request"] is o for owner, o in zip(owners[2:], untouched[2:]))
    finally:
        oi.uninstrument()
    assert all(owner.__dict__[layer] is o for owner, layer, o in zip(owners, layers, originals))
    assert all(owner.__dict__["request"] is o for owner, o in zip(owners, untouched))


def test_the_task_decorator_and_context_manager_nest(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    oc = openai_client(fake_provider)

    @otel_ctx.task(conversation_id="nested")
    def inner() -> None:
        oc.chat.completions.create(model="gpt-4o", messages=CHAT)

    with otel_ctx.task("returns"):
        inner()
        ctx = contextvars.copy_context()
    ctx.run(lambda: oc.chat.completions.create(model="gpt-4o", messages=CHAT))
    first, second = instrumented.rounds()
    assert first.attributes[n.TASK_TYPE] == "returns"  # type: ignore[index]
    assert first.attributes[n.GEN_AI_CONVERSATION_ID] == "nested"  # type: ignore[index]
    assert second.attributes[n.TASK_TYPE] == "returns"  # type: ignore[index]
    assert n.GEN_AI_CONVERSATION_ID not in (second.attributes or {})


def test_the_model_table_is_dated_and_finds_dated_model_names() -> None:
    from otel_ctx._models import shipped_models

    table = shipped_models()
    assert table.as_of
    gpt = table.limits_for("gpt-4o-2024-08-06")
    assert gpt is not None and gpt.context_window == 128_000
    assert table.limits_for("gpt-4o-mini") is not table.limits_for("gpt-4o")
    claude = table.limits_for("claude-haiku-4-5-20251001")
    assert claude is not None and claude.context_window == 200_000
    assert table.limits_for("no-such-model") is None


def test_the_integration_guide_documents_every_environment_variable() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    envs = [oi.ENV_TASK_TYPE, oi.ENV_POLICIES, oi.ENV_MODELS, oi.ENV_RESERVED_OUTPUT]
    envs += [oi.ENV_CONTEXT_WINDOW, oi.ENV_MAX_CONVERSATIONS, oi.ENV_LANGCHAIN]
    for env in envs:
        assert f"| `{env}` |" in readme, env
