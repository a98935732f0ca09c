"""Recorded traffic of OpenAI-compatible hosts replayed through the real openai SDK, instrumented.

Every ``openai.chat`` and ``openai.responses`` body of the other providers' truth set
(``../shared/data/real-traffic/``, read where it lies; the marked indeterminate ones too) was sent
by a project to a host speaking OpenAI's wire format with models of other families: Groq,
OpenRouter, Cerebras, Together, DeepSeek, Mistral, Hugging Face, local servers. Each is sent
again as the agent sent it, through ``openai.OpenAI`` pointed at the fake provider answering
the recorded ``usage``, once without otel-ctx and once through one instrumentation with its
calibration live (the cases in file order). The replay checks what otel-ctx promises of every
call: one round span each (no dark call), nothing raised into the caller, the same bytes on the
wire as without otel-ctx, no request content in any span, metric or log, the bill read back,
and the request counted with its model family's own tokenizer, not OpenAI's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import replay_support
from fake_provider import Reply
from real_traffic import OTHER_PROVIDERS_GLOBS, billed, compared, files, project, rows

from otel_ctx import _encodings as encodings
from otel_ctx import _families as families
from otel_ctx import names as n

APIS = ("openai.chat", "openai.responses")

Row = dict[str, Any]
Replay = replay_support.Replay[Row]


def _cases() -> list[Row]:
    return [r for name in files(*OTHER_PROVIDERS_GLOBS) for r in rows(name) if r["api"] in APIS]


def _reply(row: Row) -> Reply:
    return Reply(usage=row["usage"], input_tokens=billed(row))


def _where(row: Row) -> str:
    return f"{row['source']}#{row['interaction']}"


@pytest.fixture(scope="module")
def replay() -> Iterator[Replay]:
    yield from replay_support.replay(
        _cases(), lambda sender, row: sender.send(row["api"], row["request"]), _reply
    )


def test_every_compatible_call_went_through_unchanged_and_none_was_dark(replay: Replay) -> None:
    outcomes = replay.outcomes
    print(f"\n{len(outcomes)} bodies of OpenAI-compatible hosts replayed")
    assert outcomes, "no openai.chat or openai.responses body in the other providers' file"
    raised = [(_where(o.case), o.error) for o in outcomes if o.error]
    assert raised == [], f"{len(raised)} calls raised into the caller: {raised[:10]}"
    dark = [(_where(o.case), len(o.spans)) for o in outcomes if len(o.spans) != 1]
    assert dark == [], f"{len(dark)} calls without exactly one round span: {dark[:10]}"
    changed = [_where(o.case) for o in outcomes if o.sent_body is None or o.sent_body != o.plain_body]
    assert changed == [], (
        f"{len(changed)} bodies differ from what the SDK sends without otel-ctx: {changed[:10]}"
    )
    # The bill the round recorded is the one the host reported (a stream that did not ask for
    # its usage reports none).
    misread = [
        (_where(o.case), o.attrs[n.USAGE_INPUT_TOKENS], billed(o.case))
        for o in outcomes
        if n.USAGE_INPUT_TOKENS in o.attrs and o.attrs[n.USAGE_INPUT_TOKENS] != billed(o.case)
    ]
    assert misread == [], f"usage misread on {len(misread)} rounds: {misread[:10]}"
    unmeasured = replay_support.unmeasured_agree(replay)  # the counter agrees with the spans
    print(f"unmeasured rounds by reason: {unmeasured or 'none'}")


def test_no_request_content_reaches_a_span_a_metric_or_a_log(replay: Replay) -> None:
    """Every text of every body (its model names aside) looked for in everything otel-ctx emitted."""
    assert replay_support.leaks([o.case["request"] for o in replay.outcomes], replay) == []


def _own_tokenizer(model: str) -> str | None:
    """The vocabulary the host bills ``model`` in: OpenAI's own encoding for OpenAI's models
    (routed ``openai/gpt-4o`` too), else its family's tokenizer (None: none is published)."""
    native = encodings.encoding_name_for_model(model)
    if native is not None:
        return native
    family = families.family_for(model)
    return family.tokenizer if family is not None else None


def test_each_round_is_counted_in_its_model_familys_vocabulary(replay: Replay) -> None:
    """A Llama, Qwen, Mistral, DeepSeek or GLM model behind an OpenAI-compatible host is billed in
    its own vocabulary: the round names that tokenizer (the open-weight extra is installed here),
    and a model of no known family is counted as a flagged estimate. Printed by host and family,
    with how near the round's count came to the bill (rounds whose bill the body decides)."""
    wrong = []
    groups: dict[tuple[str, str], list[replay_support.Outcome[Row]]] = {}
    for o in replay.outcomes:
        model = str(o.case["request"].get("model") or o.case["model"])
        own = _own_tokenizer(model)
        # The test extra installs every family's tokenizer: none may be missing here.
        assert own is None or own in encodings.offline_names() or families.tokenizer(own) is not None, own
        encoding = o.attrs.get(n.ENCODING)
        if own is not None and encoding != own:
            wrong.append((_where(o.case), model, encoding, own))
        if own is None and o.attrs.get(n.EXACT) is True:
            wrong.append((_where(o.case), model, encoding, "an estimate"))
        family = families.family_for(model)
        groups.setdefault((str(o.case.get("provider")), family.name if family else "-"), []).append(o)
    print(
        f"\n{'host':34} {'family':18} {'calls':>5} {'encoding':12} "
        f"{'exact':>5} {'±5%':>4} {'±15%':>4} {'of':>3}"
    )
    for (host, family_name), outs in sorted(groups.items()):
        decided = [
            o
            for o in outs
            if compared(o.case) and n.ESTIMATED_TOKENS in o.attrs and n.USAGE_INPUT_TOKENS in o.attrs
        ]

        def within(o: replay_support.Outcome[Row], share: float) -> bool:
            return bool(abs(o.attrs[n.ESTIMATED_TOKENS] - billed(o.case)) <= share * billed(o.case))

        used = ",".join(sorted({str(o.attrs.get(n.ENCODING)) for o in outs}))
        print(
            f"{host[:34]:34} {family_name[:18]:18} {len(outs):5} {used[:12]:12} "
            f"{sum(o.attrs.get(n.EXACT) is True for o in outs):5} "
            f"{sum(within(o, 0.05) for o in decided):4} {sum(within(o, 0.15) for o in decided):4} "
            f"{len(decided):3}"
        )
    by_project: dict[str, int] = {}
    for o in replay.outcomes:
        family = families.family_for(str(o.case["model"]))
        if family is not None and family.tokenizer is not None:
            by_project[project(o.case)] = by_project.get(project(o.case), 0) + 1
    print(f"rounds of an open-weight family, by project: {by_project}")
    assert wrong == [], f"{len(wrong)} rounds not counted in their family's vocabulary: {wrong[:10]}"
    # One family, one vocabulary, however a host spells the model (a router's ``vendor/`` path,
    # Ollama's ``:tag``, Bedrock's ``vendor.`` id).
    vocabularies: dict[str, set[str]] = {}
    for (_, family_name), outs in groups.items():
        if family_name != "-":
            vocabularies.setdefault(family_name, set()).update(str(o.attrs.get(n.ENCODING)) for o in outs)
    mixed = {name: sorted(used) for name, used in vocabularies.items() if len(used) > 1}
    assert mixed == {}, f"a family counted in more than one vocabulary: {mixed}"
    # The check is not empty: family tokenizers were exercised (not only OpenAI's encodings).
    assert by_project


def test_a_round_flagged_exact_is_the_bill(replay: Replay) -> None:
    """On these hosts only OpenAI's own models (routed or served locally) may be flagged exact;
    of the rounds flagged so whose bill the body decides, at most one in a hundred misses it by
    more than max(2 tokens, 1%)."""
    exact = [
        o
        for o in replay.outcomes
        if o.attrs.get(n.EXACT) is True
        and compared(o.case)
        and o.attrs.get(n.FIGURE_SOURCE) == n.FIGURE_REQUEST
        and n.USAGE_INPUT_TOKENS in o.attrs
    ]
    off = [
        (_where(o.case), o.attrs[n.ESTIMATED_TOKENS], billed(o.case))
        for o in exact
        if abs(o.attrs[n.ESTIMATED_TOKENS] - billed(o.case)) > max(2.0, 0.01 * billed(o.case))
    ]
    print(f"\nflagged exact: {len(exact)}, off by more than max(2, 1%): {len(off)}")
    others = {
        str(o.case["model"])
        for o in replay.outcomes
        if o.attrs.get(n.EXACT) is True and encodings.encoding_name_for_model(str(o.case["model"])) is None
    }
    assert others == set(), "flagged exact without OpenAI's own encoding"
    assert len(off) <= 0.01 * len(exact), off
