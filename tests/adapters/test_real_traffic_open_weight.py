"""Open-weight models on OpenAI-compatible hosts and Ollama, and Cohere, against their real bills.

The truth set (``../shared/data/real-traffic/other_providers*.jsonl``) is read where it lies:
request bodies public projects sent to Groq, Together, OpenRouter, Cerebras, Hugging Face,
DeepSeek, Mistral, local servers, Ollama and Cohere, with the prompt tokens each answer billed.
Every body is counted by a fresh fitter of its own model with no calibration; the family is the
one :func:`otel_ctx._families.family_for` gives the recorded model (an OpenAI model behind a
gateway is OpenAI's count, not checked here). Tables by provider, family and project are
printed, so a rule that helps one project and no other shows.

Without the data the test skips on a laptop; under ``CI=true`` it fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from real_traffic import (
    OTHER_PROVIDERS_GLOBS,
    Case,
    compared,
    files,
    measure,
    refusals,
    rows,
    share,
    table,
)

from otel_ctx._families import family_for

#: The families the figures are asserted on (the open-weight ones with a published template).
OPEN_WEIGHT = ("llama3", "llama3.1", "llama4", "qwen", "deepseek", "mistral", "gpt-oss", "gemma")
#: The APIs those models are served through here.
OPEN_APIS = ("openai.chat", "openai.responses", "ollama.chat", "ollama.generate")

pytestmark = pytest.mark.usefixtures("quiet_otel_ctx")


def _family(row: dict[str, Any]) -> str:
    family = family_for(str(row["model"]))
    name = family.name if family is not None else "other"
    return "deepseek" if name.startswith("deepseek") else name


def _mine(row: dict[str, Any]) -> bool:
    """A row this test answers for: an open-weight or Command model, or Ollama and Cohere APIs."""
    return row["api"].startswith(("ollama.", "cohere.")) or (
        row["api"].startswith("openai.") and _family(row) != "other"
    )


@pytest.fixture(scope="module")
def every_row() -> list[dict[str, Any]]:
    return [r for name in files(*OTHER_PROVIDERS_GLOBS) for r in rows(name) if _mine(r)]


@pytest.fixture(scope="module")
def cases(every_row: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Case]]:
    out = [(r, measure(r)) for r in every_row if compared(r)]
    keys = {id(c): (r["provider"], _family(r)) for r, c in out}
    pooled = [c for _, c in out]
    print()
    print(table(pooled, lambda c: keys[id(c)][0], "provider"))
    print(table(pooled, lambda c: keys[id(c)][1], "family"))
    print(table(pooled, lambda c: c.project, "project"))
    return out


def test_no_body_refused(every_row: list[dict[str, Any]]) -> None:
    """Every body a host accepted is counted and measured, the marked ones included."""
    refused = refusals(every_row)
    assert not refused, "\n".join(refused)


def _open_weight(cases: list[tuple[dict[str, Any], Case]]) -> list[Case]:
    return [c for r, c in cases if r["api"] in OPEN_APIS and _family(r) in OPEN_WEIGHT]


def test_open_weight_counts_within_five_percent(cases: list[tuple[dict[str, Any], Case]]) -> None:
    """Open-weight families on OpenAI-compatible hosts and Ollama: ≥ 80% within max(2 tokens, 5%)."""
    group = _open_weight(cases)
    assert group
    assert share(group, lambda c: c.within(0.05, 2)) >= 0.80


def test_flagged_exact_counts_are_exact(cases: list[tuple[dict[str, Any], Case]]) -> None:
    """Of the counts flagged exact, at most 1% off by more than max(2 tokens, 1%)."""
    flagged = [c for _, c in cases if c.exact]
    off = [c for c in flagged if not c.within(0.01, 2)]
    assert len(off) <= 0.01 * len(flagged), off


def test_cohere_is_an_estimate(cases: list[tuple[dict[str, Any], Case]]) -> None:
    """Cohere ships no offline tokenizer: no Command count claims to be exact."""
    command = [c for r, c in cases if r["api"] == "cohere.chat"]
    assert command
    assert not any(c.exact for c in command)
