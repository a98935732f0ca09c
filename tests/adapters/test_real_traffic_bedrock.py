"""Bedrock's bills against the count: Converse and InvokeModel bodies public projects sent.

The other providers' file of the truth set (``../shared/data/real-traffic/other_providers*.jsonl``)
is read where it lies; its ``bedrock.*`` bodies are counted under ``provider="bedrock"`` by a fresh
fitter of the recorded model (a Bedrock id, an inference profile or its ARN), with no
calibration. Claude is checked apart from the other families (it is counted through the
Anthropic accounting, the others through their templates), and the tables are printed by API,
model family and project, so a rule that helps one project only shows.

Without the data the test skips on a laptop; under ``CI=true`` it fails.
"""

from __future__ import annotations

import pytest
from real_traffic import (
    OTHER_PROVIDERS_GLOBS,
    Case,
    available,
    compared,
    measure,
    records,
    refusals,
    rows,
    share,
    table,
)

from otel_ctx._families import model_key
from otel_ctx.adapters._bedrock_families import framing

pytestmark = pytest.mark.usefixtures("quiet_otel_ctx")


def _claude(case: Case) -> bool:
    return model_key(case.model).startswith("claude")


def _family(case: Case) -> str:
    return "claude" if _claude(case) else framing(case.model).name


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return [measure(row, name) for name, row in records(OTHER_PROVIDERS_GLOBS, "bedrock.") if compared(row)]


def test_the_tables_by_api_family_and_project(cases: list[Case], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print()
        print(table(cases, lambda c: f"{c.api} {'claude' if _claude(c) else 'other'}", "bedrock api"))
        print(table(cases, _family, "bedrock model family"))
        print(table(cases, lambda c: f"{c.project} {'claude' if _claude(c) else 'other'}", "bedrock project"))
    assert len(cases) > 150


@pytest.mark.parametrize("api", ["bedrock.converse", "bedrock.invoke", None])
def test_claude_on_bedrock(cases: list[Case], api: str | None) -> None:
    claude = [c for c in cases if _claude(c) and (api is None or c.api == api)]
    assert claude
    assert share(claude, lambda c: c.within(0.15)) >= 0.85


def test_the_other_families_on_bedrock(cases: list[Case]) -> None:
    others = [c for c in cases if not _claude(c)]
    assert len(others) > 50
    assert share(others, lambda c: c.within(0.15)) >= 0.80
    # Nova, the family most bodies are for, on its own: its framing is measured, not guessed.
    nova = [c for c in others if _family(c).startswith("nova")]
    assert share(nova, lambda c: c.within(0.15)) >= 0.80


def test_a_count_flagged_exact_is_the_bill(cases: list[Case]) -> None:
    flagged = [c for c in cases if c.exact]
    assert sum(not c.within(0.01, 2) for c in flagged) <= 0.01 * len(flagged)
    # No family Bedrock serves has a tokenizer reproducing its bills offline: every count says so.
    assert not flagged


@pytest.mark.parametrize("name", available(*OTHER_PROVIDERS_GLOBS) or ["other_providers.jsonl"])
def test_no_bedrock_body_is_refused(name: str) -> None:
    bedrock = [row for row in rows(name) if str(row["api"]).startswith("bedrock.")]
    refused = refusals(bedrock)
    assert bedrock
    assert not refused, "\n".join(refused[:10])
