"""Gemini (the Gemini API and Vertex) counted against what Google really billed.

The other providers' truth set lies beside the clone (``../shared/data/real-traffic/``) and is
read where it is: each ``gemini.generateContent`` line is a request body a public project's test
suite sent, with the ``promptTokenCount`` Google answered. Every body is counted by a fresh
fitter of its own model (``provider="google"``), no calibration; the tables are printed by
endpoint, model generation and project, so a rule that helps one project only shows.

Without the data the test skips on a laptop; under ``CI=true`` it fails, as it does without
Gemini's tokenizer (the ``gemini`` extra, part of the ``test`` extra).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any

import pytest
from real_traffic import (
    OTHER_PROVIDERS_GLOBS,
    PROVIDER,
    Case,
    compared,
    decided_by_body,
    files,
    fresh_fitter,
    measure,
    rows,
    share,
    table,
)

from otel_ctx._families import tokenizer

API = "gemini.generateContent"

pytestmark = pytest.mark.usefixtures("quiet_otel_ctx")


@pytest.fixture(scope="module")
def gemini_rows() -> list[tuple[dict[str, Any], str]]:
    if tokenizer("gemma4") is None:
        message = "Gemini's tokenizer is not installed: pip install otel-ctx[gemini]"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    found = [(r, name) for name in files(*OTHER_PROVIDERS_GLOBS) for r in rows(name) if r["api"] == API]
    assert found, "the other providers' data holds no Gemini request"
    return found


_MEDIA = frozenset({"inlineData", "inline_data", "fileData", "file_data"})


def _has_media(value: Any) -> bool:
    """Inline data or a file anywhere in the contents (Gemini's parts carry no ``type``)."""
    if isinstance(value, dict):
        return any(k in _MEDIA or _has_media(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_media(v) for v in value)
    return False


@pytest.fixture(scope="module")
def cases(gemini_rows: list[tuple[dict[str, Any], str]]) -> list[tuple[Case, str]]:
    """Each body-decided case with its endpoint (``google`` for the Gemini API, ``vertex``),
    its features naming media where the contents hold some."""
    out = []
    for r, name in gemini_rows:
        if compared(r):
            case = measure(r, name)
            if _has_media(r["request"].get("contents")) and not case.media:
                case = replace(case, features=(*case.features, "file"))
            out.append((case, str(r.get("provider", "google"))))
    return out


def _generation(model: str) -> str:
    found = re.match(r"gemini-(\d+(?:\.\d+)?)", model)
    return f"gemini-{found.group(1)}" if found else model


def test_the_tables_by_endpoint_generation_and_project(
    cases: list[tuple[Case, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    everything = [c for c, _ in cases]
    endpoint = {id(c): e for c, e in cases}
    with capsys.disabled():
        print()
        print(table(everything, lambda c: f"{endpoint[id(c)]} {'media' if c.media else 'text'}", "endpoint"))
        print(table(everything, lambda c: _generation(c.model), "generation"))
        print(table(everything, lambda c: f"{c.project} {endpoint[id(c)]}", "project"))
    assert len(everything) > 100


def test_text_and_tools_within_two_tokens_or_five_percent(cases: list[tuple[Case, str]]) -> None:
    plain = [c for c, _ in cases if not c.media]
    assert len(plain) > 100
    assert share(plain, lambda c: c.within(0.05, 2)) >= 0.90


def test_every_project_gains_from_the_rules(cases: list[tuple[Case, str]]) -> None:
    """A rule that helped one project only would leave another's count off: each project with
    a handful of cases is mostly within the tolerance too."""
    by_project: dict[str, list[Case]] = {}
    for c, _ in cases:
        if not c.media:
            by_project.setdefault(c.project, []).append(c)
    for project, group in by_project.items():
        if len(group) >= 10:
            assert share(group, lambda c: c.within(0.05, 2)) >= 0.85, project


def test_media_within_fifteen_percent(cases: list[tuple[Case, str]]) -> None:
    with_media = [c for c, _ in cases if c.media]
    assert with_media
    assert share(with_media, lambda c: c.within(0.15)) >= 0.85


def test_what_is_flagged_exact_is_the_bill(cases: list[tuple[Case, str]]) -> None:
    flagged = [c for c, _ in cases if c.exact]
    assert flagged, "text on Gemini 2.5 and 3.x is counted by the provider's rule"
    off = [c for c in flagged if not c.within(0.01, 2)]
    assert len(off) <= 0.01 * len(flagged), off


def test_no_body_is_refused(gemini_rows: list[tuple[dict[str, Any], str]]) -> None:
    """Marked ones included: whatever Google accepted, counting and measuring take."""
    for r, _ in gemini_rows:
        fitter = fresh_fitter(r)
        provider = PROVIDER[r["api"]]
        assert fitter.count_request(r["request"], provider=provider) > 0
        result = fitter.measure_request(r["request"], provider=provider)
        assert result.breakdown.estimated > 0
        if not decided_by_body(r):
            # What the server adds unseen (thought signatures, files by URI, server tools,
            # cached content) is never claimed exact.
            assert not result.exact or not result.unknowns
