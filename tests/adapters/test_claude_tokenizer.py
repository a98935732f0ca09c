"""Anthropic counts with Claude's reconstructed tokenizer (the claude-tokenizer extra, ``ctok``).

A one-message request is the reconstruction's own single-message count; the framing around
text is the family's, in that tokenizer's tokens; results name the tokenizer; a warm round
tiles only its new text; another provider's count never imports it; without it the count is
the fallback encoding's. How close the counts come to the recorded bills is the real-traffic
test's (tests/adapters/test_real_traffic.py).

Without the extra the tests skip on a laptop; under ``CI=true`` they fail (the test extra, or
``make install`` on Python 3.10 and 3.11, installs it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_ctx.adapters._claude_tokens as claude_tokens
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters._anthropic import OWN_MESSAGE, OWN_PRIMING, family


def _ctok() -> ModuleType:
    try:
        import ctok
    except ImportError:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the claude-tokenizer extra (ctok) is missing under CI")
        pytest.skip("the claude-tokenizer extra (ctok) is not installed")
    return ctok


ROOMY = BudgetPolicy(context_length=10**7, reserved_output=0)
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _body(
    text: str = "What is the weather in Lisbon right now?", model: str = "claude-sonnet-4-5", **extra: Any
) -> dict[str, Any]:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **extra}


def _count(body: dict[str, Any]) -> int:
    return ContextFitter(ROOMY, model=body["model"]).count_request(body, provider="anthropic")


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=200))
def test_one_user_message_is_the_reconstructions_single_message_count(text: str) -> None:
    # The reconstruction counts a single user message, frame included, as count_tokens does; the
    # message's and the reply's framing are that frame in the Claude 3 to 4.6 vocabulary.
    ctok = _ctok()
    assert sum(1 for t in ctok.tokenize("a", "3.0") if t == "\u27e8pad\u27e9") == OWN_MESSAGE + OWN_PRIMING
    assert _count(_body(text)) == ctok.token_count(text, "3.0")


@pytest.mark.parametrize(
    ("model", "tokenizer"),
    [
        ("claude-3-5-haiku-20241022", "ctok-3.0"),
        ("claude-sonnet-4-5", "ctok-3.0"),
        ("claude-opus-4-6", "ctok-3.0"),
        ("claude-opus-4-7", "ctok-4.7"),
        ("claude-opus-4-8", "ctok-4.8"),
        ("claude-sonnet-5", "ctok-4.8"),
    ],
)
def test_the_result_names_the_tokenizer_and_stays_an_estimate(model: str, tokenizer: str) -> None:
    _ctok()
    result = ContextFitter(ROOMY, model=model).measure_request(_body(model=model), provider="anthropic")
    assert result.encoding == tokenizer
    assert not result.exact


def test_without_the_extra_the_count_is_the_fallback_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    _ctok()
    text = "The quarterly review covers revenue, churn and the hiring plan for the platform team. " * 20
    own = ContextFitter(ROOMY, model="claude-opus-4-7").measure_request(
        _body(text, "claude-opus-4-7"), provider="anthropic"
    )
    monkeypatch.setattr(claude_tokens, "_module", lambda: None)
    fitter = ContextFitter(ROOMY, model="claude-opus-4-7")
    fallback = fitter.measure_request(_body(text, "claude-opus-4-7"), provider="anthropic")
    assert fallback.encoding == "cl100k_base" and not fallback.exact
    # The fallback scales the encoding's count by the family's ratio; the reconstruction tiles it.
    ratio = family("claude-opus-4-7").text_ratio
    assert fallback.breakdown.estimated >= int(fitter.counter.text(text) * ratio)
    assert own.encoding == "ctok-4.7" and own.breakdown.estimated != fallback.breakdown.estimated


def test_tools_and_a_named_tool_choice_cost_the_familys_figures() -> None:
    _ctok()
    own = family("claude-sonnet-4").own
    assert own is not None
    tools = _body(model="claude-sonnet-4", tools=[WEATHER])
    auto = _count({**tools, "tool_choice": {"type": "auto"}})
    forced = _count({**tools, "tool_choice": {"type": "any"}})
    named = _count({**tools, "tool_choice": {"type": "tool", "name": "get_weather"}})
    assert forced - auto == own.tool_prompt_forced - own.tool_prompt
    assert named - auto == own.tool_prompt_named - own.tool_prompt
    with_system = _count({**tools, "system": "Answer briefly."})
    assert (
        with_system - auto
        == _count(_body(model="claude-sonnet-4", system="Answer briefly."))
        - _count(_body(model="claude-sonnet-4"))
        + own.system_with_tools
    )


def test_a_warm_round_tiles_only_its_new_text(monkeypatch: pytest.MonkeyPatch) -> None:
    ctok = _ctok()
    tiled: list[str] = []
    real = ctok.token_count

    def counting(text: str, version: str = "3.0") -> int:
        tiled.append(text)
        return int(real(text, version))

    monkeypatch.setattr(ctok, "token_count", counting)
    fitter = ContextFitter(ROOMY, model="claude-sonnet-4-5")
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Plan the migration of the billing service."}
    ]
    for k in range(6):
        messages.append({"role": "assistant", "content": f"Step {k}: move table {k} and check its totals."})
        messages.append({"role": "user", "content": f"Done with step {k}; the totals of table {k} match."})
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "Be exact.", "messages": messages}
    fitter.fit_request(body)
    first = set(tiled)
    tiled.clear()
    messages.append({"role": "assistant", "content": "Next: the invoices table."})
    messages.append({"role": "user", "content": "Go ahead with the invoices."})
    fitter.fit_request(body)
    assert tiled, "the new messages are tiled"
    assert not first & set(tiled), "text tiled in an earlier round is not tiled again"


def test_another_providers_count_never_imports_the_claude_tokenizer() -> None:
    _ctok()
    script = (
        "import sys\n"
        "from otel_ctx import BudgetPolicy, ContextFitter\n"
        "policy = BudgetPolicy(context_length=10**6, reserved_output=0)\n"
        "body = {'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'hello'}]}\n"
        "ContextFitter(policy, model='gpt-4o').count_request(body)\n"
        "assert 'ctok' not in sys.modules, 'an OpenAI count imported ctok'\n"
        "body = {'model': 'claude-sonnet-4-5', 'max_tokens': 8, 'messages': body['messages']}\n"
        "ContextFitter(policy, model='claude-sonnet-4-5').count_request(body, provider='anthropic')\n"
        "assert 'ctok' in sys.modules, 'an Anthropic count did not load ctok'\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("model", "generation"), [("claude-sonnet-4-5", "3.0"), ("claude-opus-4-8", "4.8")])
def test_a_message_continuing_its_roles_turn_costs_a_separator_not_a_message(
    model: str, generation: str
) -> None:
    # The API combines consecutive messages of one role into one turn.
    ctok = _ctok()
    own = family(model).own
    assert own is not None and own.joined < own.message
    first = "Here is the log of the failed deploy."
    second = "And here is the config it ran with."
    frame = sum(1 for t in ctok.tokenize("a", generation) if t == "\u27e8pad\u27e9")
    added = ctok.token_count(second, generation) - frame
    one = _body(first, model)
    two = {**one, "messages": [*one["messages"], {"role": "user", "content": second}]}
    assert _count(two) - _count(one) == added + own.joined
    answered = {
        **one,
        "messages": [*one["messages"], {"role": "assistant", "content": "Noted."}, two["messages"][1]],
    }
    noted = ctok.token_count("Noted.", generation) - frame
    assert _count(answered) - _count(one) == noted + added + 2 * own.message
