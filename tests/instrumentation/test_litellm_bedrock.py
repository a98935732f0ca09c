"""LiteLLM's Bedrock route, instrumented, against the fake Bedrock runtime: one round per request,
measured as LiteLLM received it, against the Bedrock model it routes to."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled price map: no download

import litellm
from fake_bedrock import BedrockReply, FakeBedrock
from instrument_support import Instrumented, instrumented

from otel_ctx import names as n

__all__ = ["instrumented"]  # the fixture, imported for pytest

MESSAGES = [
    {"role": "system", "content": "You are Sundry's support agent."},
    {"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."},
]


def _complete(fake: FakeBedrock, model: str) -> object:
    return litellm.completion(
        model=f"bedrock/{model}",
        messages=MESSAGES,
        aws_bedrock_runtime_endpoint=fake.url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="dummy-secret",
        aws_region_name="us-east-1",
        num_retries=0,
    )


def test_a_bedrock_route_is_one_round_with_the_routed_models_window_and_usage(
    instrumented: Instrumented, fake_bedrock: FakeBedrock
) -> None:
    claude = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    nova = "us.amazon.nova-lite-v1:0"
    fake_bedrock.queue(BedrockReply(input_tokens=321), BedrockReply(input_tokens=123))
    _complete(fake_bedrock, claude)
    _complete(fake_bedrock, nova)
    assert [(r.operation, r.model) for r in fake_bedrock.requests] == [
        ("converse", claude),
        ("converse", nova),
    ]
    first, second = instrumented.rounds()  # LiteLLM's observation only: nothing below it doubles it
    assert first.attributes[n.ROUTED_PROVIDER] == "bedrock"
    assert first.attributes[n.MODEL] == claude
    assert first.attributes[n.CONTEXT_LENGTH] == 200_000  # the Bedrock id read as its Claude model
    assert first.attributes[n.USAGE_INPUT_TOKENS] == 321
    assert second.attributes[n.MODEL] == nova and second.attributes[n.USAGE_INPUT_TOKENS] == 123
