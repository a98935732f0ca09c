"""Beside opentelemetry-instrumentation-openai-v2: budget and chat spans tied, the task block one trace."""

from __future__ import annotations

import pytest
from fake_provider import FakeProvider
from instrument_support import CHAT, Instrumented, openai_client
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import names as n


@pytest.mark.parametrize("otel_ctx_first", [True, False], ids=["otel-ctx-first", "otel-ctx-last"])
def test_the_budget_and_chat_spans_tied_in_the_task_blocks_trace(
    fake_provider: FakeProvider, otel_ctx_first: bool
) -> None:
    cap = Instrumented()
    providers = {"tracer_provider": cap.tracer_provider, "meter_provider": cap.meter_provider}
    contrib = OpenAIInstrumentor()
    if otel_ctx_first:
        oi.instrument(langchain=False, **providers)
        contrib.instrument(**providers)
    else:
        contrib.instrument(**providers)
        oi.instrument(langchain=False, **providers)
    try:
        oc = openai_client(fake_provider)
        with otel_ctx.task("returns", conversation_id="conv-contrib"):
            for _ in range(3):
                oc.chat.completions.create(model="gpt-4o", messages=CHAT)
            chunks = list(
                oc.chat.completions.create(
                    model="gpt-4o", messages=CHAT, stream=True, stream_options={"include_usage": True}
                )
            )
        assert chunks[-1].usage is not None
    finally:
        oi.uninstrument()
        contrib.uninstrument()

    rounds = cap.spans(n.SPAN_OBSERVE)
    chats = [s for s in cap.spans() if s.name.startswith("chat")]
    assert len(rounds) == len(chats) == 4
    assert [r.attributes[n.ROUND] for r in rounds] == [1, 2, 3, 4]  # type: ignore[index]
    # The task block is one run of the ticket view: its rounds and their chat spans are one trace,
    # under the run span.
    (run,) = cap.spans(n.SPAN_RUN)
    assert {s.context.trace_id for s in (*rounds, *chats)} == {run.context.trace_id}
    assert all(c.parent is not None and c.parent.span_id == run.context.span_id for c in chats)
    for budget in rounds:
        (chat,) = [
            c for c in chats if budget.parent is not None and c.context.span_id == budget.parent.span_id
        ]
        # otel-ctx watches the SDK's request layer, below the SDK method the contrib wraps: in
        # either order of instrumentation the round runs inside the chat span and annotates it.
        assert budget.parent is not None and budget.parent.span_id == chat.context.span_id
        assert chat.attributes[n.GEN_AI_CONTEXT_WINDOW_SIZE] == 128_000  # type: ignore[index]
        assert 0 < chat.attributes[n.GEN_AI_CONTEXT_UTILIZATION] < 1  # type: ignore[index]
        keys = set(budget.attributes or {})
        assert not any(k.startswith("gen_ai.usage.") for k in keys), keys
        assert n.GEN_AI_REQUEST_MODEL not in keys
        # The chat span keeps the usage: GenAI backends count each call once.
        assert any(k.startswith("gen_ai.usage.") for k in chat.attributes or {})
