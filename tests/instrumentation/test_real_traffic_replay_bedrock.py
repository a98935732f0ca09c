"""Recorded Bedrock traffic replayed through the real boto3 client, instrumented.

Every ``bedrock.*`` body of the other providers' file (``../shared/data/real-traffic/``, read
where it lies; the marked ones too) is sent as an agent sends it: Converse bodies with
``converse`` (``converse_stream`` when it was streamed), with their media as the bytes boto3
takes; InvokeModel bodies as JSON with ``invoke_model`` (or its stream). The fake Bedrock
runtime answers each with the case's recorded usage. The replay runs twice, without and with
otel-ctx, and checks what otel-ctx promises of every call: the same bytes on the wire, the
same outcome for the caller (nothing raised that would not have been), one round for each,
with the usage the answer carried.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from fake_bedrock import BedrockReply, FakeBedrock
from instrument_support import Instrumented
from real_traffic import OTHER_PROVIDERS_GLOBS, billed, compared, records

import otel_ctx.instrumentation as oi
from otel_ctx import names as n

#: Fields holding binary data in Converse (a recorded body has them as base64 text).
_BLOBS = ("bytes", "redactedContent")


def _as_sent(value: Any) -> Any:
    """A recorded Converse value as boto3 takes it: base64 text of binary fields as bytes."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v) if k in _BLOBS and isinstance(v, str) else _as_sent(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_as_sent(v) for v in value]
    return value


def _cases() -> list[dict[str, Any]]:
    return [row for _, row in records(OTHER_PROVIDERS_GLOBS, "bedrock.")]


def _reply(row: dict[str, Any]) -> BedrockReply:
    usage = row.get("usage") or {}
    if row["api"] == "bedrock.converse" and isinstance(usage, dict) and "inputTokens" in usage:
        return BedrockReply(
            input_tokens=int(usage.get("inputTokens") or 0),
            output_tokens=int(usage.get("outputTokens") or 0),
            cache_read=int(usage.get("cacheReadInputTokens") or 0),
            cache_write=int(usage.get("cacheWriteInputTokens") or 0),
        )
    return BedrockReply(input_tokens=billed(row))


def _call(client: Any, row: dict[str, Any]) -> Callable[[], Any]:
    model, body, streamed = row["model"], row["request"], bool(row.get("streamed"))
    if row["api"] == "bedrock.converse":
        params = _as_sent(body)
        if streamed:
            return lambda: list(client.converse_stream(modelId=model, **params)["stream"])
        return lambda: client.converse(modelId=model, **params)
    raw = json.dumps(body)
    if streamed:
        return lambda: list(client.invoke_model_with_response_stream(modelId=model, body=raw)["body"])
    return lambda: client.invoke_model(modelId=model, body=raw)["body"].read()


def _replay(fake: FakeBedrock, cases: list[dict[str, Any]]) -> tuple[list[str | None], list[bytes]]:
    """Each case sent once: what the caller got (None, or the exception's class) and the bytes sent."""
    client = fake.client()
    fake.requests.clear()
    outcomes: list[str | None] = []
    for row in cases:
        fake.queue(_reply(row))
        try:
            _call(client, row)()
        except Exception as exc:
            outcomes.append(type(exc).__name__)
            fake.replies.clear()  # boto3 refused the body before sending it: its reply is unused
        else:
            outcomes.append(None)
    return outcomes, [r.body for r in fake.requests]


def test_every_recorded_bedrock_call_is_observed_unchanged(fake_bedrock: FakeBedrock) -> None:
    cases = _cases()
    assert len(cases) > 150
    plain_outcomes, plain_bytes = _replay(fake_bedrock, cases)
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        outcomes, sent = _replay(fake_bedrock, cases)
    finally:
        oi.uninstrument()
    assert outcomes == plain_outcomes, "otel-ctx changed what a call returned or raised"
    assert sent == plain_bytes, "otel-ctx changed the bytes on the wire"
    # boto3 itself may refuse a field its service model does not know yet (a newer recording).
    assert sum(o is not None for o in outcomes) <= 0.05 * len(cases), set(outcomes)
    rounds = cap.rounds()
    assert len(rounds) == len(cases)  # no dark call
    assert {s.attributes[n.PROVIDER] for s in rounds} == {"bedrock"}
    answered = [s for s, o in zip(rounds, outcomes) if o is None]
    bills = [_reply(row) for row, o in zip(cases, outcomes) if o is None]
    reported = [s.attributes.get(n.USAGE_INPUT_TOKENS) for s in answered]
    assert reported == [b.input_tokens + b.cache_read + b.cache_write or None for b in bills]
    unmeasured = [s for s in answered if n.UNOBSERVED_REASON in s.attributes]
    assert not unmeasured, [s.attributes[n.UNOBSERVED_REASON] for s in unmeasured]
    # With the calibration learning live, one instrumentation for every call in file order, the
    # Claude rounds whose bill the body decides stay within 15% of their bills as the uncalibrated
    # counts do.
    claude = [
        s
        for s, row, o in zip(rounds, cases, outcomes)
        if o is None and compared(row) and "claude" in str(row["model"])
    ]
    close = [
        s
        for s in claude
        if abs(s.attributes[n.ESTIMATED_TOKENS] - s.attributes[n.USAGE_INPUT_TOKENS])
        <= 0.15 * s.attributes[n.USAGE_INPUT_TOKENS]
    ]
    print(f"\nbedrock replay, calibration live: Claude {len(close)} of {len(claude)} within 15%")
    assert len(close) >= 0.85 * len(claude)


@pytest.mark.parametrize("streamed", [False, True])
def test_the_stream_and_the_plain_answer_report_the_same_usage(
    fake_bedrock: FakeBedrock, streamed: bool
) -> None:
    row = next(r for r in _cases() if r["api"] == "bedrock.converse" and not r.get("indeterminate"))
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        fake_bedrock.queue(_reply(row))
        _call(fake_bedrock.client(), {**row, "streamed": streamed})()
    finally:
        oi.uninstrument()
    (span,) = cap.rounds()
    assert span.attributes[n.USAGE_INPUT_TOKENS] == billed(row)
