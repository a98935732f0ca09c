"""The instrumentor with the real boto3 ``bedrock-runtime`` client against a fake Bedrock runtime.

The client is boto3's own, pointed at the fake with ``endpoint_url`` and dummy credentials
(requests SigV4-signed as usual): Converse, ConverseStream (an AWS event stream),
InvokeModel (usage in the answer's headers) and InvokeModelWithResponseStream.
"""

from __future__ import annotations

import gc
import io
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from botocore.eventstream import EventStream
from botocore.exceptions import ClientError
from fake_bedrock import BedrockReply, FakeBedrock
from instrument_support import Instrumented, instrumented

import otel_ctx.instrumentation as oi
from otel_ctx import names as n
from otel_ctx.instrumentation._bedrock import _open

__all__ = ["instrumented"]  # the fixture, imported for pytest

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA = "us.amazon.nova-lite-v1:0"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x02\x00\x00\x00\x01\x80\x08\x02\x00\x00\x00\x00\x00\x00\x00"
)
MESSAGES: list[Any] = [
    {"role": "user", "content": [{"text": "My oak shelf (order 88-1042) arrived cracked."}]},
    {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t1", "name": "get_order", "input": {"id": "88-1042"}}}],
    },
    {
        "role": "user",
        "content": [
            {"toolResult": {"toolUseId": "t1", "content": [{"json": {"status": "delivered"}}]}},
            {"image": {"format": "png", "source": {"bytes": PNG}}},
        ],
    },
]
TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_order",
                "description": "Look up an order by id.",
                "inputSchema": {"json": {"type": "object", "properties": {"id": {"type": "string"}}}},
            }
        }
    ]
}
INVOKE = json.dumps(
    {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Hi"}],
    }
)


def _calls(fake: FakeBedrock) -> list[Callable[[], Any]]:
    c = fake.client()
    system = [{"text": "You are Sundry's support agent."}]
    return [
        lambda: c.converse(
            modelId=CLAUDE,
            messages=MESSAGES,
            system=system,
            toolConfig=TOOLS,
            inferenceConfig={"maxTokens": 300},
        ),
        lambda: list(
            c.converse_stream(modelId=NOVA, messages=MESSAGES, system=system, toolConfig=TOOLS)["stream"]
        ),
        lambda: c.invoke_model(modelId=CLAUDE, body=INVOKE)["body"].read(),
        lambda: list(c.invoke_model_with_response_stream(modelId=CLAUDE, body=INVOKE.encode())["body"]),
    ]


def test_request_bytes_are_identical_with_and_without_instrumentation(fake_bedrock: FakeBedrock) -> None:
    for call in _calls(fake_bedrock):
        call()
    plain = [(r.operation, r.model, r.body) for r in fake_bedrock.requests]
    fake_bedrock.requests.clear()
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        for call in _calls(fake_bedrock):
            call()
    finally:
        oi.uninstrument()
    assert [(r.operation, r.model, r.body) for r in fake_bedrock.requests] == plain
    assert [op for op, _, _ in plain] == [
        "converse",
        "converse-stream",
        "invoke",
        "invoke-with-response-stream",
    ]
    rounds = cap.rounds()
    assert len(rounds) == 4
    assert {s.attributes[n.PROVIDER] for s in rounds} == {"bedrock"}


def test_every_call_is_a_round_with_its_usage(instrumented: Instrumented, fake_bedrock: FakeBedrock) -> None:
    fake_bedrock.queue(
        BedrockReply(input_tokens=400, cache_read=100, cache_write=20),
        BedrockReply(input_tokens=410),
        BedrockReply(input_tokens=420, cache_read=30),
        BedrockReply(input_tokens=430),
    )
    converse, events, invoked, chunks = (call() for call in _calls(fake_bedrock))
    assert converse["output"]["message"]["content"] == [{"text": "Done."}]
    assert [next(iter(e)) for e in events][-1] == "metadata"
    assert json.loads(invoked)["completion"] == "Done."
    assert [next(iter(e)) for e in chunks] == ["chunk", "chunk"]
    rounds = instrumented.rounds()
    assert [s.attributes[n.USAGE_INPUT_TOKENS] for s in rounds] == [520, 410, 450, 430]
    first = rounds[0].attributes
    assert first[n.USAGE_CACHED_INPUT_TOKENS] == 100
    assert first[n.MODEL] == CLAUDE
    assert first[n.RESERVED_OUTPUT] == 300  # Converse's inferenceConfig.maxTokens
    assert first[n.CONTEXT_LENGTH] == 200_000  # a Bedrock id read as its Claude model
    assert first[n.ROUND] == 2  # one assistant turn in the messages
    assert first[n.SYSTEM_PROMPT_TOKENS] > 0 and first[n.TOOL_SCHEMA_TOKENS] > 0
    assert rounds[1].attributes[n.MODEL] == NOVA
    assert rounds[2].attributes[n.RESERVED_OUTPUT] == 200  # the InvokeModel body's max_tokens
    observer = oi.active_observer()
    assert observer is not None and observer.fitter(CLAUDE).calibration != 1.0


def test_the_stream_is_botocores_own_behind_the_proxy(
    instrumented: Instrumented, fake_bedrock: FakeBedrock
) -> None:
    c = fake_bedrock.client()
    answer = c.converse_stream(modelId=CLAUDE, messages=MESSAGES[:1])
    stream = answer["stream"]
    assert isinstance(stream, EventStream)
    assert not instrumented.rounds()  # the round ends when the stream does
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in stream if "contentBlockDelta" in e)
    assert text == "Done."
    assert len(instrumented.rounds()) == 1


def test_a_failed_call_raises_as_without_otel_ctx_and_ends_its_round(
    instrumented: Instrumented, fake_bedrock: FakeBedrock
) -> None:
    fake_bedrock.queue(BedrockReply(status=400))
    with pytest.raises(ClientError) as raised:
        fake_bedrock.client().converse(modelId=CLAUDE, messages=MESSAGES[:1])
    (span,) = instrumented.rounds()
    assert span.status.description == type(raised.value).__name__  # the class only, never the text


def test_a_body_given_as_a_stream_is_sent_unread_and_recorded_unmeasured(
    instrumented: Instrumented, fake_bedrock: FakeBedrock
) -> None:
    fake_bedrock.queue(BedrockReply(input_tokens=77))
    body = io.BytesIO(INVOKE.encode())
    fake_bedrock.client().invoke_model(modelId=CLAUDE, body=body)
    assert fake_bedrock.requests[-1].body == INVOKE.encode()
    (span,) = instrumented.rounds()
    assert span.attributes[n.UNOBSERVED_REASON]
    assert span.attributes[n.USAGE_INPUT_TOKENS] == 77


def test_other_services_and_operations_are_not_observed(instrumented: Instrumented) -> None:
    observer = oi.active_observer()
    assert observer is not None

    class Client:
        class meta:
            class service_model:
                service_name = "s3"

    assert _open(observer, Client(), ("PutObject", {"Body": b"x"}), {}) is None
    Client.meta.service_model.service_name = "bedrock-runtime"
    assert _open(observer, Client(), ("ListAsyncInvokes", {}), {}) is None
    assert not instrumented.rounds()


def test_no_message_text_reaches_the_span(instrumented: Instrumented, fake_bedrock: FakeBedrock) -> None:
    _calls(fake_bedrock)[0]()
    (span,) = instrumented.rounds()
    shown = json.dumps({k: str(v) for k, v in span.attributes.items()})
    assert "oak shelf" not in shown and "88-1042" not in shown and "Sundry" not in shown


def test_botocore_is_wrapped_when_the_agent_imports_it_and_unwrapped_after() -> None:
    script = """
import sys
import otel_ctx.instrumentation as oi
oi.instrument(langchain=False)
assert "botocore" not in sys.modules  # instrumenting does not import it
import boto3, botocore.client, wrapt
assert isinstance(botocore.client.BaseClient.__dict__["_make_api_call"], wrapt.FunctionWrapper)
oi.uninstrument()
assert not isinstance(botocore.client.BaseClient.__dict__["_make_api_call"], wrapt.FunctionWrapper)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_stream_the_agent_stops_reading_ends_its_round_without_an_error(
    instrumented: Instrumented, fake_bedrock: FakeBedrock
) -> None:
    fake_bedrock.queue(BedrockReply(input_tokens=55))
    stream = fake_bedrock.client().converse_stream(modelId=CLAUDE, messages=MESSAGES[:1])["stream"]
    for event in stream:
        assert "messageStart" in event
        break
    gc.collect()
    (span,) = instrumented.rounds()
    assert span.status.status_code.name == "UNSET"
