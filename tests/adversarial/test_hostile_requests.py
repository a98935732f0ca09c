"""Hostile request bodies: the same verdict whatever extra keys, and only typed errors.

A legacy function result is judged alike with or without a key nobody reads; a ``tools`` that
is not a list and documents nested hundreds deep (with and without ``provider=``) end in the
documented typed errors, never an internal exception. Each case failed before its fix.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError, TooDeeplyNestedError

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800)


# -- a legacy function result takes the same path with or without extra keys ------------------


def test_a_two_key_function_message_after_unanswered_calls_is_judged_like_a_three_key_one() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    def transcript(extra: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "function", "content": "legacy result", **extra},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]

    fitter = ContextFitter(POLICY, model="gpt-4o")
    verdicts = []
    for extra in ({}, {"unused": 1}):
        try:
            fitter.fit(transcript(extra))
            verdicts.append("ok")
        except Exception as exc:  # the verdict is the error type, whichever it is
            verdicts.append(type(exc).__name__)
    assert verdicts[0] == verdicts[1]


# -- untyped errors: detection, deep documents ------------------------------------------------

ENTRY_POINTS = ("fit_request", "measure_request", "count_request")


@pytest.mark.parametrize("tools", [5, True, 1.5])
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_non_list_tools_beside_messages_is_a_typed_error_without_provider(tools: Any, entry: str) -> None:
    fitter = ContextFitter(POLICY, model="gpt-4o")
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    with pytest.raises(OtelCtxError):
        getattr(fitter, entry)(body)


def _nested_document(depth: int) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "x"},
    }
    for _ in range(depth):
        block = {"type": "document", "source": {"type": "content", "content": [block]}}
    return block


@pytest.mark.parametrize("provider", [None, "anthropic"])
def test_documents_nested_hundreds_deep_are_a_typed_error(provider: str | None) -> None:
    fitter = ContextFitter(POLICY, model="claude-sonnet-4-5")
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [_nested_document(340)]}],
    }
    with pytest.raises(TooDeeplyNestedError):
        fitter.measure_request(body, provider=provider)
    shallow = {**body, "messages": [{"role": "user", "content": [_nested_document(3)]}]}
    assert fitter.measure_request(shallow, provider=provider).breakdown.estimated > 0
