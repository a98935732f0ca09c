"""Tuples are JSON arrays too: every dialect reads a body built with tuples exactly as the list one.

Agents build messages, content parts, tool calls and tools as tuples as often as lists (a frozen
history, a constant tool set), and the SDKs send both as arrays. Over random valid requests of
each dialect: the measure, the count and the fit of the tuple-built body equal the list-built
one's, the fit keeps the same items (the caller's own objects), and the tuple body is not changed.
"""

from __future__ import annotations

from typing import Any

from dialect_rules_anthropic import messages_requests
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dialect_properties import _dump, _policies, chat_bodies, responses_bodies

from otel_ctx import ContextFitter


def _tuples(value: Any) -> Any:
    """The same body with every JSON array a tuple (SDK objects inside are left as they are)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


ITEMS = {"openai": "messages", "openai-responses": "input", "anthropic": "messages"}


def _same(body: dict[str, Any], provider: str, data: st.DataObject) -> None:
    policy = _policies(data.draw)
    tupled = _tuples(body)
    snapshot = _dump(tupled)
    listed_fit = ContextFitter(policy, model="gpt-4").fit_request(body, provider=provider)
    tupled_fit = ContextFitter(policy, model="gpt-4").fit_request(tupled, provider=provider)
    assert tupled_fit.breakdown == listed_fit.breakdown
    assert tupled_fit.outcome == listed_fit.outcome
    assert _dump(tupled_fit.request) == _dump(listed_fit.request)
    key = ITEMS[provider]
    # The items kept are the same positions of the caller's sequence, each its own object when untouched.
    kept = [next((k for k, y in enumerate(tupled[key]) if y is x), None) for x in tupled_fit.request[key]]
    listed = [next((k for k, y in enumerate(body[key]) if y is x), None) for x in listed_fit.request[key]]
    assert [k is None for k in kept] == [k is None for k in listed]
    measure = ContextFitter(policy, model="gpt-4")
    assert measure.measure_request(tupled, provider=provider).breakdown == (
        ContextFitter(policy, model="gpt-4").measure_request(body, provider=provider).breakdown
    )
    assert measure.count_request(tupled, provider=provider) == measure.count_request(body, provider=provider)
    assert _dump(tupled) == snapshot  # not mutated


@settings(max_examples=60, deadline=None)
@given(chat_bodies(), st.data())
def test_chat_completions_tuples_are_lists(body: dict[str, Any], data: st.DataObject) -> None:
    _same(body, "openai", data)


@settings(max_examples=60, deadline=None)
@given(responses_bodies(), st.data())
def test_responses_tuples_are_lists(body: dict[str, Any], data: st.DataObject) -> None:
    _same(body, "openai-responses", data)


@settings(max_examples=60, deadline=None)
@given(messages_requests(), st.data())
def test_anthropic_tuples_are_lists(body: dict[str, Any], data: st.DataObject) -> None:
    _same(body, "anthropic", data)
