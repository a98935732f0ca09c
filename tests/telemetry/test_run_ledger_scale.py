"""A long run's books: usage booked to the round it belongs to, and a round's work flat in the run's length.

An agent that loops for thousands of rounds must not pay more per round as the run grows,
and a usage report that arrives for an early round must land on that round, however many
rounds later it comes. The work is counted as Python lines executed in the run's and the
ledger's own code (not timed), so the test holds on a loaded machine.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telemetry_capture import Capture

from otel_ctx import BudgetPolicy, ContextFitter, FitResult, InvalidRequestError
from otel_ctx import _ledger as ledger_module
from otel_ctx._ledger import RunLedger
from otel_ctx._pricing import ModelPrice, PriceTable, Usage
from otel_ctx.telemetry import _run as run_module
from otel_ctx.telemetry import run

RESERVE = 100
PRICES = PriceTable(
    {"gpt-4o": ModelPrice(input=2.5, cached_input=1.25, output=10.0)}, as_of="2026-11-30", source="test"
)


@pytest.fixture
def cap() -> Iterator[Capture]:
    capture = Capture()
    yield capture
    capture.close()


def fitter() -> ContextFitter:
    return ContextFitter(BudgetPolicy(context_length=100_000, reserved_output=RESERVE), model="gpt-4o")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# --- usage for an early round ---------------------------------------------------------------


def test_usage_for_round_one_after_forty_rounds_is_booked_to_round_one(cap: Capture) -> None:
    f = fitter()
    with run(f, task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        results = [r.fit([user(f"question {i} " + "about the parcel " * i)]) for i in range(1, 41)]
        estimates = [res.breakdown.estimated + RESERVE for res in results]
        assert r.spent_tokens == sum(estimates)
        r.record_usage(result=results[0], input_tokens=5, output_tokens=1)
        first, last = r.ledger.round_spend(1), r.ledger.round_spend(40)
        assert first is not None and last is not None
        assert (first.tokens, first.source) == (6, "usage")
        # Round 40 keeps its estimate: the report was not about it.
        assert (last.tokens, last.source) == (estimates[-1], "estimate")
        assert r.spent_tokens == sum(estimates[1:]) + 6
        (usage_event,) = [e for e in cap_run_events(r) if e.name == "context_budget.usage"]
        assert usage_event.attributes is not None and usage_event.attributes["context_budget.round"] == 1


def cap_run_events(r: Any) -> list[Any]:
    span = r._span
    return list(getattr(span, "events", ()))


def test_usage_for_a_result_of_another_run_is_refused_and_changes_nothing(cap: Capture) -> None:
    f = fitter()
    with run(f, task_type=None, emitter=cap.emitter, prices=PRICES) as other:
        foreign = other.fit([user("a different ticket")])
    outside = f.fit([user("fitted outside any run")])
    with run(f, task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        r.fit([user("where is my parcel")])
        spent, calibration = r.spent_tokens, f.calibration
        for result in (foreign, outside):
            with pytest.raises(InvalidRequestError, match=r"record_usage\.result"):
                r.record_usage(result=result, input_tokens=10_000, output_tokens=10)
        assert r.spent_tokens == spent
        assert f.calibration == calibration
        assert r.input_tokens == 0


def test_a_collected_result_does_not_stay_in_the_run(cap: Capture) -> None:
    f = fitter()
    with run(f, task_type=None, emitter=cap.emitter) as r:
        for i in range(50):
            r.fit([user(f"round {i}")])
        r.last_result = None
        gc.collect()
        # Only results still referenced elsewhere are remembered; the rest left with their results.
        assert len(r._round_by_result) <= 1


# --- the work of one round is flat in the number of earlier rounds ---------------------------

_COUNTED = {m.__file__ for m in (ledger_module, run_module) if m.__file__}


def lines_executed(action: Callable[[], object]) -> int:
    """Python lines ``action`` executes in the run's and the ledger's modules (generators included)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Callable[..., object] | None:
        nonlocal count
        if frame.f_code.co_filename not in _COUNTED:
            return None
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)  # type: ignore[arg-type]
    try:
        action()
    finally:
        sys.settrace(previous)
    return count


def test_a_round_costs_the_same_at_round_3000_as_at_round_10(cap: Capture) -> None:
    f = fitter()
    # One real result emitted round after round: the run's books are what is measured, not the fit.
    result: FitResult = f.fit([user("where is my parcel")])
    work: dict[int, int] = {}
    with run(f, task_type=None, emitter=cap.emitter, prices=PRICES) as r:

        def one_round() -> None:
            r.emit(result)
            r.record_usage(result=result, input_tokens=40, output_tokens=7)

        for _ in range(3_000):
            number = r.rounds + 1
            if number in (10, 11, 1_000, 3_000):
                work[number] = lines_executed(one_round)
            else:
                one_round()
    assert work[10] == work[11] == work[1_000] == work[3_000], work
    assert r.spent_tokens == 3_000 * 47


# --- the running totals are the sums they stand for ------------------------------------------

_step = st.one_of(
    st.tuples(
        st.just("round"),
        st.integers(1, 12),
        st.integers(0, 5_000),
        st.integers(0, 500),
        st.booleans(),
    ),
    st.tuples(
        st.just("usage"), st.integers(1, 12), st.integers(0, 5_000), st.integers(0, 500), st.booleans()
    ),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(_step, max_size=40), ceiling=st.one_of(st.none(), st.integers(1, 20_000)))
def test_running_totals_equal_the_sums_over_rounds(
    steps: list[tuple[str, int, int, int, bool]], ceiling: int | None
) -> None:
    ledger = RunLedger(ceiling=ceiling, model="gpt-4o", prices=PRICES)
    for kind, number, a, b, flag in steps:
        if kind == "round":
            ledger.add_round(number, prompt_tokens=a, reserved_output=b, overflow=flag)
        else:
            ledger.record_usage(number, Usage(input_tokens=a, output_tokens=b))
    rounds = [s for s in (ledger.round_spend(i) for i in range(1, 13)) if s is not None]
    assert ledger.spent_tokens == sum(s.tokens for s in rounds)
    assert ledger.cost == pytest.approx(sum(s.cost or 0.0 for s in rounds), abs=1e-12)
    assert (ledger.cost or 0.0) >= 0.0
    sources = {s.source for s in rounds} - {"none"}
    expected = "none" if not sources else ("mixed" if len(sources) > 1 else sources.pop())
    assert ledger.cost_source == expected
