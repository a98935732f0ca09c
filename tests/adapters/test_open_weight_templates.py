"""Open-weight chat templates, the Ollama and Cohere dialects: behaviour on bodies built here.

The hosts of open-weight models bill their chat template's rendering; these tests check the
rules' shape (what a template adds, what it drops, that a fit writes each dialect back in its
own shape) on generated requests, never on recorded ones.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, InvalidToolSchemaError
from otel_ctx import _families as families

WORDS = st.text(alphabet="abcdefghij klmnopqrstuvwxyz.,!?", min_size=1, max_size=60).filter(str.strip)


def fitter(model: str, window: int = 10**9) -> ContextFitter:
    return ContextFitter(BudgetPolicy(context_length=window, reserved_output=0), model=model)


def count(model: str, body: dict[str, Any], provider: str = "openai") -> int:
    return fitter(model).count_request({"model": model, **body}, provider=provider)


def chat(*texts: str) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]


def test_the_families_resolve_from_every_spelling() -> None:
    cases = {
        "meta-llama/Llama-3.3-70B-Instruct": "llama3.1",
        "llama3-8b-8192": "llama3",
        "llama3.1:8b": "llama3.1",
        "meta-llama/llama-4-scout-17b-16e-instruct": "llama4",
        "qwen/qwen3-32b": "qwen",
        "deepseek-reasoner": "deepseek-v3.2",
        "deepseek-ai/DeepSeek-R1": "deepseek",
        "deepseek-r1-distill-llama-70b": "deepseek-r1-llama",
        "mistral-large-latest": "mistral",
        "openai/gpt-oss-120b": "gpt-oss",
        "gemma3:1b": "gemma",
        "command-r-plus": "command",
        "us.amazon.nova-micro-v1:0": "amazon-nova",
    }
    for model, name in cases.items():
        family = families.family_for(model)
        assert family is not None and family.name == name, model
    assert families.family_for("gpt-4o") is None


@settings(max_examples=25, deadline=None)
@given(WORDS)
def test_llama31_opens_with_its_date_block(text: str) -> None:
    """Llama 3.1-3.3 add the system header and date block to every request; Llama 3.0 does not."""
    body = {"messages": chat(text)}
    date_block = count("llama3.1-8b", body) - count("llama3-8b", body)
    assert date_block >= 20  # header markers, "Cutting Knowledge Date ... Today Date ..."


@settings(max_examples=25, deadline=None)
@given(WORDS, WORDS)
def test_earlier_reasoning_is_not_billed(reasoning: str, answer: str) -> None:
    """DeepSeek-R1 and Qwen 3 drop an earlier reply's reasoning: it costs nothing."""
    answer = answer.strip()  # what follows the reasoning (the whitespace after it is the template's)
    for model in ("deepseek-ai/DeepSeek-R1", "qwen/qwen3-32b"):
        plain = {"messages": chat("hi", answer, "and?")}
        thought = {"messages": chat("hi", f"<think>{reasoning}</think>{answer}", "and?")}
        assert count(model, thought) == count(model, plain), model


@settings(max_examples=25, deadline=None)
@given(WORDS)
def test_a_gpt_oss_reply_that_calls_is_its_calls_alone(text: str) -> None:
    """Harmony reads back a reply that made calls as the calls: its text is not billed."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": text, "tool_calls": [call]}]
    silent = [said[0], {"role": "assistant", "content": None, "tool_calls": [call]}]
    result = [{"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    model = "openai/gpt-oss-120b"
    assert count(model, {"messages": said + result}) == count(model, {"messages": silent + result})


def test_gpt_oss_counts_the_harmony_header_and_is_an_estimate() -> None:
    result = fitter("openai/gpt-oss-120b").measure_request(
        {"model": "openai/gpt-oss-120b", "messages": chat("hi")}, provider="openai"
    )
    assert result.breakdown.estimated >= 60  # the system header the hosts send
    assert not result.exact


def test_qwen3_with_thinking_off_opens_an_empty_think_block() -> None:
    body: dict[str, Any] = {"messages": chat("What is 2+2?")}
    assert count("qwen3-32b", {**body, "reasoning_effort": "none"}) > count("qwen3-32b", body)


def test_llama4_tools_cost_the_hosts_tool_prompt() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    body: dict[str, Any] = {"messages": chat("hi"), "tools": [tool]}
    model = "meta-llama/llama-4-scout-17b-16e-instruct"
    assert count(model, body) > count(model, {"messages": chat("hi")}) + 500
    assert count(model, {**body, "tool_choice": "none"}) == count(model, {"messages": chat("hi")})


@settings(max_examples=20, deadline=None)
@given(st.lists(WORDS, min_size=2, max_size=8))
def test_the_breakdown_adds_up_to_the_count(texts: list[str]) -> None:
    """Per message, the template's tokens: the lines of the breakdown sum to the count."""
    for model in ("llama3.1-8b", "qwen3-32b", "deepseek-chat", "gemma3:4b", "mistral-large-latest"):
        body = {"model": model, "messages": [{"role": "system", "content": "Be brief."}, *chat(*texts)]}
        result = fitter(model).measure_request(body, provider="openai")
        b = result.breakdown
        assert sum(b.transcript_by_role.values()) == b.transcript, model
        assert (
            b.transcript
            + b.tool_schema
            + b.skills
            + (0 if b.system_prompt_in_transcript else b.system_prompt)
            == b.estimated
        ), model
        assert all(v >= 0 for v in b.transcript_by_role.values()), model


def test_a_fit_drops_whole_messages_at_their_template_cost() -> None:
    model = "llama3.3-70b"
    body = {"model": model, "messages": chat(*(f"message number {i} " * 30 for i in range(12)))}
    full = fitter(model).count_request(body, provider="openai")
    result = fitter(model, window=full // 2).fit_request(copy.deepcopy(body), provider="openai")
    assert result.dropped_messages > 0
    assert fitter(model).count_request(result.request, provider="openai") <= full // 2


def test_without_the_extra_the_count_is_a_flagged_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> families.Tokenizer:
        raise ImportError("splintr")

    monkeypatch.setitem(families.TOKENIZERS, "gemma3", missing)
    monkeypatch.setattr(families, "_loaded", {})
    result = fitter("gemma3:4b").measure_request(
        {"model": "gemma3:4b", "messages": chat("hi")}, provider="openai"
    )
    assert result.breakdown.estimated > 0
    assert not result.exact


# -- Ollama ------------------------------------------------------------------------------


def test_ollama_chat_reads_calls_with_object_arguments_and_results_without_ids() -> None:
    body = {
        "model": "llama3.1",
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "w", "arguments": {"c": "P"}}}],
            },
            {"role": "tool", "content": "sunny"},
        ],
    }
    original = copy.deepcopy(body)
    result = fitter("llama3.1").measure_request(body, provider="ollama")
    assert result.breakdown.estimated > 0 and result.provider == "ollama"
    assert body == original  # the caller's body is not changed


def test_ollama_fit_writes_back_ollama_messages() -> None:
    messages = [{"role": "user", "content": f"turn {i} " * 40, "images": []} for i in range(10)]
    body = {"model": "llama3", "messages": messages, "options": {"num_ctx": 2048}}
    full = fitter("llama3").count_request(body, provider="ollama")
    result = fitter("llama3", window=full // 2).fit_request(body, provider="ollama")
    kept = result.request["messages"]
    assert 0 < len(kept) < len(messages)
    assert all(m is messages[messages.index(m)] for m in kept)  # the caller's own objects
    assert result.request["options"] == {"num_ctx": 2048}


@settings(max_examples=20, deadline=None)
@given(WORDS, WORDS)
def test_ollama_generate_counts_the_template_unless_raw(system: str, prompt: str) -> None:
    body = {"model": "llama3", "system": system, "prompt": prompt}
    templated = fitter("llama3").count_request(body, provider="ollama")
    raw = fitter("llama3").count_request({**body, "raw": True}, provider="ollama")
    assert templated > raw > 0


# -- Cohere ------------------------------------------------------------------------------


def test_cohere_v1_and_v2_are_counted_as_estimates() -> None:
    v1 = {
        "model": "command-r",
        "preamble": "You are terse.",
        "chat_history": [{"role": "USER", "message": "hi"}, {"role": "CHATBOT", "message": "hello"}],
        "message": "what is 2+2?",
        "tools": [{"name": "add", "description": "adds", "parameter_definitions": {"a": {"type": "int"}}}],
    }
    v2 = {
        "model": "command-a-03-2025",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    for body in (v1, v2):
        result = fitter(str(body["model"])).measure_request(body, provider="cohere")
        assert result.breakdown.estimated > 0
        assert not result.exact


def test_cohere_v1_fit_keeps_the_message_and_trims_the_history() -> None:
    history = [{"role": "USER" if i % 2 == 0 else "CHATBOT", "message": f"line {i} " * 40} for i in range(10)]
    body = {"model": "command-r", "chat_history": history, "message": "and now?"}
    full = fitter("command-r").count_request(body, provider="cohere")
    result = fitter("command-r", window=full // 2).fit_request(body, provider="cohere")
    assert result.request["message"] == "and now?"
    assert 0 < len(result.request["chat_history"]) < len(history)


def test_a_gateways_server_tool_is_a_bound_not_a_refusal() -> None:
    fn = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    body = {
        "model": "deepseek/deepseek-chat",
        "messages": chat("search the web"),
        "tools": [{"type": "openrouter:web_search", "parameters": {"max_uses": 1}}, fn],
    }
    result = fitter("deepseek/deepseek-chat").measure_request(body, provider="openai")
    assert result.unknowns and "openrouter:web_search" in result.unknowns[0]
    assert result.breakdown.tool_schema > 0  # the function tool is still counted
    with pytest.raises(InvalidToolSchemaError, match="tools"):  # a malformed tool of no host is still named
        fitter("deepseek/deepseek-chat").fit_request(
            {**body, "tools": [{"type": "function"}]}, provider="openai"
        )


@given(st.lists(WORDS, min_size=1, max_size=4))
def test_another_familys_model_under_openais_framing_is_never_exact(texts: list[str]) -> None:
    # Gemini through Google's OpenAI-compatible endpoint: Gemini's vocabulary, OpenAI's framing,
    # a combination no bill confirmed; the same body on an OpenAI model is exact.
    body = {"messages": chat(*texts)}
    gemini = fitter("gemini-2.5-flash").measure_request(
        {"model": "gemini-2.5-flash", **body}, provider="openai"
    )
    openai = fitter("gpt-4o").measure_request({"model": "gpt-4o", **body}, provider="openai")
    assert openai.exact
    assert not gemini.exact
    assert gemini.estimated_lines
