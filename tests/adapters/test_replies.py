"""The model's replies in a transcript, as each dialect's reader counts them (``FitResult.replies``).

A reply is a run of the model's own items (its messages, calls and reasoning): the instrumentor
numbers a round it has no conversation id for by them, so every dialect counts them alike,
round after round, from what its reader remembers of the transcript.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from otel_ctx import BudgetPolicy, ContextFitter

POLICY = BudgetPolicy(context_length=200_000, reserved_output=1_000)


def _responses(k: int) -> list[dict[str, Any]]:
    cid = f"call_{k}"
    return [
        {"type": "reasoning", "id": f"rs_{k}", "summary": []},
        {"type": "function_call", "call_id": cid, "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": cid, "output": f"order {k}: shipped"},
        {"role": "assistant", "content": f"Order {k} has shipped."},
        {"role": "user", "content": "And the next one?"},
    ]


def _anthropic(k: int) -> list[dict[str, Any]]:
    cid = f"toolu_{k}"
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "lookup", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": "shipped"}]},
        {"role": "assistant", "content": f"Order {k} has shipped."},
        {"role": "user", "content": "And the next one?"},
    ]


def _gemini(k: int) -> list[dict[str, Any]]:
    return [
        {"role": "model", "parts": [{"text": f"Order {k} has shipped."}]},
        {"role": "user", "parts": [{"text": "And the next one?"}]},
    ]


# Each dialect: its provider, the body around a transcript, a round's items and its replies.
DIALECTS = {
    "openai-responses": (lambda items: {"model": "gpt-4o", "input": items}, _responses, 2),
    "anthropic": (
        lambda items: {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": items},
        _anthropic,
        2,
    ),
    "google": (lambda items: {"model": "gemini-2.5-flash", "contents": items}, _gemini, 1),
}
FIRST = {
    "openai-responses": {"role": "user", "content": "Where are my orders?"},
    "anthropic": {"role": "user", "content": "Where are my orders?"},
    "google": {"role": "user", "parts": [{"text": "Where are my orders?"}]},
}


@pytest.mark.parametrize("provider", sorted(DIALECTS))
def test_each_dialect_counts_the_models_replies_round_after_round(provider: str) -> None:
    """Growing, retried (cut back) and edited-in-place transcripts: the count is the transcript's."""
    body, round_items, per_round = DIALECTS[provider]
    f = ContextFitter(POLICY, model=body([])["model"])
    items: list[dict[str, Any]] = [FIRST[provider]]
    assert f.measure_request(body(items), provider=provider).replies == 0
    for k in range(6):
        items += round_items(k)
        got = f.measure_request(body(copy.deepcopy(items)), provider=provider)
        assert got.replies == per_round * (k + 1)
    del items[-len(round_items(0)) :]  # a retry: the last round taken back
    assert f.measure_request(body(items), provider=provider).replies == per_round * 5
    items[-1]["role"] = "model" if provider == "google" else "assistant"  # the user's turn made the model's
    items += round_items(9)  # ...so it and the replies either side of it are one run
    got = f.measure_request(body(items), provider=provider).replies
    assert got == _runs(items) == per_round * 6 - 1


def _runs(items: list[dict[str, Any]]) -> int:
    """Runs of the model's items counted from scratch."""
    runs, before = 0, False
    for item in items:
        mine = item.get("role") in ("assistant", "model") or item.get("type") in (
            "function_call",
            "reasoning",
        )
        runs += mine and not before
        before = mine
    return runs
