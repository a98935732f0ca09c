"""The fake provider speaks each SDK's wire format: the real clients parse what it sends.

Every integration test leans on this server, so its answers are checked here against
the SDKs' own types, plain and streamed, and its error statuses against the SDKs' own
exceptions.
"""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from fake_provider import FakeProvider, Reply, closed_port_url


def test_openai_chat_plain_stream_and_tool_calls(fake_provider: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="k", max_retries=0)
    fake_provider.queue(Reply(text="hello there", input_tokens=42, cached_tokens=10))
    resp = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert resp.choices[0].message.content == "hello there"
    assert resp.usage is not None and resp.usage.prompt_tokens == 42
    assert resp.usage.prompt_tokens_details is not None
    assert resp.usage.prompt_tokens_details.cached_tokens == 10

    fake_provider.queue(Reply(tool_calls=[("get_order", '{"id": 7}')]))
    resp = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    calls = resp.choices[0].message.tool_calls
    assert calls is not None and calls[0].function.name == "get_order"

    fake_provider.queue(Reply(text="a b c", input_tokens=5))
    stream = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "a b c"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 5
    sent = json.loads(fake_provider.bodies("/chat/completions")[-1])
    assert sent["stream"] is True and sent["messages"] == [{"role": "user", "content": "hi"}]


def test_openai_responses_plain_and_stream(fake_provider: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="k", max_retries=0)
    fake_provider.queue(Reply(text="fine", input_tokens=11))
    resp = client.responses.create(model="gpt-4o", input="hi")
    assert resp.output_text == "fine"
    assert resp.usage is not None and resp.usage.input_tokens == 11
    fake_provider.queue(Reply(tool_calls=[("track", "{}")]))
    resp = client.responses.create(model="gpt-4o", input="hi")
    assert resp.output[0].type == "function_call"
    events = list(client.responses.create(model="gpt-4o", input="hi", stream=True))
    assert events[-1].type == "response.completed"


def test_anthropic_plain_stream_and_tool_use(fake_provider: FakeProvider) -> None:
    client = anthropic.Anthropic(base_url=fake_provider.anthropic_url, api_key="k", max_retries=0)
    fake_provider.queue(Reply(text="ok then", input_tokens=30, cached_tokens=4))
    msg = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert msg.content[0].type == "text" and msg.content[0].text == "ok then"
    assert msg.usage.input_tokens == 30 and msg.usage.cache_read_input_tokens == 4
    fake_provider.queue(Reply(tool_calls=[("get_order", '{"id": 7}')]))
    msg = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert msg.content[0].type == "tool_use" and msg.content[0].input == {"id": 7}
    fake_provider.queue(Reply(text="x y"))
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "text" and final.content[0].text == "x y"
    assert len(fake_provider.bodies("/v1/messages")) == 3


def test_errors_reach_the_sdk_as_its_own_exceptions(fake_provider: FakeProvider) -> None:
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="k", max_retries=0)
    fake_provider.queue(Reply(status=400), Reply(status=500))
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    dead = anthropic.Anthropic(base_url=closed_port_url(), api_key="k", max_retries=0)
    with pytest.raises(anthropic.APIConnectionError):
        dead.messages.create(
            model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
