"""Recorded real traffic replayed through the real openai and anthropic SDKs, instrumented.

Every request body of every OpenAI and Anthropic file of the real-traffic truth set
(``../shared/data/real-traffic/``, read where it lies: each project's bodies whose bill the body
decides and those whose bill depends on server state) is sent as an agent would send it, through
one instrumentation with its calibration live (one process, the cases in file order), to the fake
provider answering each case's recorded ``usage``. The replay then checks what otel-ctx promises
of every call: a round span for each (no dark call), nothing raised into the caller, the same
bytes on the wire as without otel-ctx, no request content in any span, metric or log, and the
accuracy of the counts against what the provider really billed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import replay_support
from fake_provider import Reply
from real_traffic import OPENAI_ANTHROPIC_GLOBS, billed, contradicted, features, files, project, rows

from otel_ctx import names as n

#: Of the rounds flagged exact, at most this share may miss the bill by more than the tolerance
#: (a flag that is wrong more often than one time in a hundred teaches its reader to ignore it).
EXACT_MISS_SHARE = 0.01
#: Of Anthropic's rounds, at least this share within ±15% of the bill (calibrated estimates).
ANTHROPIC_WITHIN_15 = 0.85


def _tolerance(billed: int) -> float:
    return max(2.0, 0.01 * billed)


@dataclass
class Case:
    file: str
    api: str
    body: dict[str, Any]
    usage: dict[str, Any]
    #: The public repository the body came from, and what it holds beyond text (for the tables).
    project: str = ""
    features: tuple[str, ...] = ()
    #: Another recording billed the same input differently: the body does not decide this bill, so
    #: the call is replayed and observed like any other but left out of the accuracy figures.
    contradicted: bool = False

    @property
    def bill(self) -> int:
        return billed({"api": self.api, "usage": self.usage})


Outcome = replay_support.Outcome[Case]
Replay = replay_support.Replay[Case]


def _files() -> list[str]:
    """Every OpenAI and Anthropic file of the truth set: a file added there is replayed too."""
    return files(*OPENAI_ANTHROPIC_GLOBS)


def _cases() -> list[Case]:
    records = [(name, r) for name in _files() for r in rows(name)]
    twice = contradicted(r for _, r in records)
    return [
        Case(
            name,
            r["api"],
            r["request"],
            r["usage"],
            project(r),
            features(r),
            (r["source"], r["interaction"]) in twice,
        )
        for name, r in records
    ]


def _reply(case: Case) -> Reply:
    return Reply(usage=case.usage, input_tokens=case.bill)


@pytest.fixture(scope="module")
def replay() -> Iterator[Replay]:
    yield from replay_support.replay(_cases(), lambda sender, case: sender.send(case.api, case.body), _reply)


def test_every_call_went_through_unchanged_and_none_was_dark(replay: Replay) -> None:
    outcomes = replay.outcomes
    assert len(outcomes) == sum(len(rows(f)) for f in _files())
    raised = [(i, o.case.api, o.error) for i, o in enumerate(outcomes) if o.error]
    assert raised == [], f"{len(raised)} calls raised into the caller: {raised[:10]}"
    dark = [(i, o.case.api, len(o.spans)) for i, o in enumerate(outcomes) if len(o.spans) != 1]
    assert dark == [], f"{len(dark)} calls without exactly one round span: {dark[:10]}"
    changed = [i for i, o in enumerate(outcomes) if o.sent_body is None or o.sent_body != o.plain_body]
    assert changed == [], f"{len(changed)} bodies differ from what the SDK sends without otel-ctx"
    # The bill the round recorded is the one the provider reported.
    misread = [
        i
        for i, o in enumerate(outcomes)
        if n.USAGE_INPUT_TOKENS in o.attrs and o.attrs[n.USAGE_INPUT_TOKENS] != o.case.bill
    ]
    assert misread == [], f"usage misread on {len(misread)} rounds: {misread[:10]}"
    unmeasured = replay_support.unmeasured_agree(replay)  # the counter agrees with the spans
    print(f"\nunmeasured rounds by reason: {unmeasured or 'none'}")


def test_no_request_content_reaches_a_span_a_metric_or_a_log(replay: Replay) -> None:
    """Every text of every body (its model name aside) looked for in everything otel-ctx emitted."""
    assert replay_support.leaks([o.case.body for o in replay.outcomes], replay) == []


def _row(label: str, outs: list[Outcome]) -> tuple[str, int, int, int, int, int, int]:
    billed_ = [
        o
        for o in outs
        if n.USAGE_INPUT_TOKENS in o.attrs and n.ESTIMATED_TOKENS in o.attrs and not o.case.contradicted
    ]
    own = [o for o in billed_ if o.attrs.get(n.FIGURE_SOURCE) == n.FIGURE_REQUEST]
    exact = [o for o in own if o.attrs.get(n.EXACT) is True]
    miss = [o for o in exact if abs(o.attrs[n.ESTIMATED_TOKENS] - o.case.bill) > _tolerance(o.case.bill)]
    within = [o for o in own if abs(o.attrs[n.ESTIMATED_TOKENS] - o.case.bill) <= 0.15 * o.case.bill]
    unmeasured = sum(1 for o in outs if n.UNOBSERVED_REASON in o.attrs)
    return label, len(outs), len(own), len(exact), len(miss), len(within), unmeasured


def _exact_misses(outs: list[Outcome]) -> list[Outcome]:
    return [
        o
        for o in outs
        if o.attrs.get(n.FIGURE_SOURCE) == n.FIGURE_REQUEST
        and not o.case.contradicted
        and o.attrs.get(n.EXACT) is True
        and n.USAGE_INPUT_TOKENS in o.attrs
        and n.ESTIMATED_TOKENS in o.attrs
        and abs(o.attrs[n.ESTIMATED_TOKENS] - o.case.bill) > _tolerance(o.case.bill)
    ]


def test_the_counts_against_the_bills(replay: Replay) -> None:
    """Printed per file and API and per project, then the two promises asserted (see the module's
    constants): of the rounds flagged exact, few miss the bill; Anthropic's calibrated estimates
    are near it in every file whose bills the bodies decide.

    Only rounds whose figures come from the request itself count (``figure_source=request``): a
    round continuing a chain stored elsewhere reads its server-held part off the bill it is
    compared with.
    """
    names = _files()
    rows_ = []
    for name in names:
        for api in ("openai.chat", "openai.responses", "anthropic.messages"):
            outs = [o for o in replay.outcomes if o.case.file == name and o.case.api == api]
            rows_.append(_row(f"{name.removesuffix('.jsonl')} {api}", outs))
    for name in sorted({o.case.project for o in replay.outcomes}):
        rows_.append(_row(name, [o for o in replay.outcomes if o.case.project == name]))
    rows_.append(_row("all", replay.outcomes))
    print(
        f"\n{'file / api, then project':48} {'calls':>5} {'own':>5} {'exact':>5} {'exact>tol':>9} "
        f"{'±15%':>5} {'unmeas':>6}"
    )
    for label, calls, own, exact, miss, within, unmeasured in rows_:
        print(f"{label[:48]:48} {calls:5} {own:5} {exact:5} {miss:9} {within:5} {unmeasured:6}")
    shapes: dict[str, list[int]] = {}
    for o in _exact_misses(replay.outcomes):
        key = f"{o.case.project} {o.case.api} {'+'.join(o.case.features) or 'text'}"
        shapes.setdefault(key, []).append(o.attrs[n.ESTIMATED_TOKENS] - o.case.bill)
    for key, diffs in sorted(shapes.items()):
        print(f"flagged exact and off: {key}: {len(diffs)} (count - bill: {sorted(diffs)[:8]})")
    *_, exact_all, miss_all, _, _ = rows_[-1]
    share_missed = miss_all / max(1, exact_all)
    print(
        f"flagged exact: {exact_all}, off by more than max(2, 1%): {miss_all} ({share_missed:.1%}, "
        f"at most {EXACT_MISS_SHARE:.0%})"
    )
    low = {}
    for name in (f for f in names if "indeterminate" not in f):
        _, _, own_a, _, _, within_a, _ = _row(
            name, [o for o in replay.outcomes if o.case.file == name and o.case.api == "anthropic.messages"]
        )
        share_within = within_a / max(1, own_a)
        print(
            f"Anthropic within ±15% ({name}): {within_a}/{own_a} ({share_within:.1%}, "
            f"at least {ANTHROPIC_WITHIN_15:.0%})"
        )
        if share_within < ANTHROPIC_WITHIN_15:
            low[name] = share_within
    assert exact_all > 0
    assert share_missed <= EXACT_MISS_SHARE
    assert low == {}
