"""Helpers for the instrumentor tests: an instrumentation on in-memory providers, SDK clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from fake_provider import FakeProvider
from telemetry_capture import Capture

import otel_ctx.instrumentation as oi
from otel_ctx import names as n


class Instrumented(Capture):
    """A Capture whose providers the instrumentor emits on."""

    def rounds(self) -> list[Any]:
        return self.spans(n.SPAN_OBSERVE)


@pytest.fixture
def instrumented() -> Iterator[Instrumented]:
    cap = Instrumented()
    oi.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, langchain=False)
    try:
        yield cap
    finally:
        oi.uninstrument()


def openai_client(fake: FakeProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.openai_url, api_key="test-key", max_retries=0)


def async_openai_client(fake: FakeProvider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=fake.openai_url, api_key="test-key", max_retries=0)


def anthropic_client(fake: FakeProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.anthropic_url, api_key="test-key", max_retries=0)


def async_anthropic_client(fake: FakeProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=fake.anthropic_url, api_key="test-key", max_retries=0)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order by id.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
]

CHAT = [
    {"role": "system", "content": "You are Sundry's support agent."},
    {"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_order", "arguments": '{"id": "88-1042"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"status": "delivered", "items": 1}'},
]

RESPONSES_INPUT = [
    {"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."},
    {"type": "function_call", "call_id": "c1", "name": "get_order", "arguments": '{"id": "88-1042"}'},
    {"type": "function_call_output", "call_id": "c1", "output": '{"status": "delivered"}'},
]
RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "get_order",
        "description": "Look up an order by id.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    }
]

ANTHROPIC_MESSAGES = [
    {"role": "user", "content": "My oak shelf (order 88-1042) arrived cracked."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "get_order", "input": {"id": "88-1042"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "delivered"}]},
]
ANTHROPIC_TOOLS = [
    {
        "name": "get_order",
        "description": "Look up an order by id.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    }
]
