"""The demo workload: the chapter's numbers, measured with the real counter, and a loop that behaves."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from otel_ctx import ContextFitter
from otel_ctx.demo import (
    SUPPORT_DESK,
    SYSTEM_PROMPT,
    TOOLS,
    WorkloadSummary,
    bare_run,
    make_ticket,
    run_ticket,
    tickets,
)
from otel_ctx.demo import (
    _payloads as payloads,
)
from otel_ctx.demo._summary import COMPONENT_LINES, TaskStats

TOLERANCE = 0.10


def near(value: int, target: int) -> bool:
    return abs(value - target) <= TOLERANCE * target


@pytest.fixture(scope="module")
def fitter() -> ContextFitter:
    return ContextFitter(SUPPORT_DESK, model="gpt-4o", encoding="cl100k_base")


@pytest.fixture(scope="module")
def runs(fitter: ContextFitter) -> list:
    return [run_ticket(fitter, t, keep_results=True) for t in tickets(11, 160)]


def test_fixed_context_has_the_chapters_sizes(fitter: ContextFitter) -> None:
    probe = [{"role": "user", "content": "hello"}]
    base = fitter.count(probe)
    system_prompt = fitter.count(probe, system_prompt=SYSTEM_PROMPT) - base
    tool_schemas = fitter.count(probe, tools=TOOLS) - base
    assert near(system_prompt, 420), system_prompt
    assert near(tool_schemas, 680), tool_schemas


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_payloads_have_the_chapters_sizes(fitter: ContextFitter, seed: int) -> None:
    rng = random.Random(seed)
    order = payloads.get_order(rng, "SO-1234-5678", items=11, customer_id="C-1", tracking="123456789012")
    scans = payloads.track_parcel(rng, "123456789012", scans=43, delivered=True)
    assert near(fitter.counter.text(order), 4_200), fitter.counter.text(order)
    assert near(fitter.counter.text(scans), 3_800), fitter.counter.text(scans)
    json.loads(order)
    json.loads(scans)


def test_same_seed_same_tickets_and_ticket_n_does_not_depend_on_the_count() -> None:
    def dump(ts: list) -> str:
        return json.dumps([[t.ticket_id, t.kind, [list(tr) for tr in t.transcripts()]] for t in ts])

    short = list(tickets(5, 10))
    long = list(tickets(5, 25))
    assert dump(short) == dump(long[:10])
    assert dump(short) == dump([make_ticket(5, i) for i in range(1, 11)])
    assert dump(short) != dump(list(tickets(6, 10)))


def test_task_mix_and_round_counts() -> None:
    ts = list(tickets(3, 2_000))
    mix = Counter(t.task_type for t in ts)
    assert abs(mix["status"] / len(ts) - 0.55) < 0.03
    assert abs(mix["returns"] / len(ts) - 0.30) < 0.03
    assert abs(mix["dispute"] / len(ts) - 0.15) < 0.03
    lengths = Counter(len(t.rounds) for t in ts)
    assert min(lengths) == 1
    assert max(lengths) == 12
    assert any(t.kind == "escalating-dispute" for t in ts)


def test_every_round_is_a_valid_request_and_tool_results_follow_their_calls(runs: list) -> None:
    for run in runs:
        for transcript in run.ticket.transcripts():
            declared: set[str] = set()
            for m in transcript:
                for call in m.get("tool_calls") or ():
                    declared.add(call["id"])
                if m["role"] == "tool":
                    assert m["tool_call_id"] in declared
        assert run.rounds, run.ticket.ticket_id
        for r in run.results:
            r.breakdown.check()


def test_the_ceiling_stops_long_disputes_before_the_crossing_request(runs: list) -> None:
    stopped = [run for run in runs if run.stop == "ceiling"]
    assert stopped, "the workload must contain disputes the 60,000-token ceiling stops"
    for run in stopped:
        assert run.escalated and run.resolution == "escalated"
        assert run.ticket.task_type == "dispute"
        *sent, last = run.rounds
        assert last.crossed_ceiling and last.spent_before + last.next_tokens > last.ceiling
        assert all(not r.crossed_ceiling and r.spent_before + r.next_tokens <= r.ceiling for r in sent)
        assert run.spent_tokens == last.spent_before <= last.ceiling


def test_only_disputes_overflow_and_the_agent_stops_there(runs: list) -> None:
    overflowed = [run for run in runs if run.stop == "overflow"]
    assert overflowed, "the workload must contain disputes whose floor overflows"
    for run in overflowed:
        assert run.ticket.task_type == "dispute"
        assert run.results[-1].outcome == "overflow"
        assert all(r.outcome != "overflow" for r in run.results[:-1])
        assert len(run.results) < len(run.ticket.rounds)  # stopped: escalated to a person
        # The floor survives: the original ticket, the pinned constraints and state.
        last = run.results[-1]
        sent = [m for m in last.messages]
        transcript = list(run.ticket.transcripts())[len(run.results) - 1]
        for i in (0, *run.ticket.pinned):
            assert any(m is transcript[i] for m in sent)
    for run in runs:
        if run.ticket.task_type != "dispute":
            assert not run.escalated


def test_small_budgets_compact_and_caps_apply(runs: list) -> None:
    status = [r for run in runs if run.ticket.task_type == "status" for r in run.results]
    assert any(r.outcome == "compacted" for r in status)
    assert any(r.capped_tool_results for run in runs for r in run.results)
    # The original ticket is never what compaction drops.
    for run in runs:
        for r in run.results:
            assert 0 not in r.dropped_indices


def test_sources_carry_data_classes(runs: list) -> None:
    classes = {run.ticket.task_type: run.results[0].breakdown.data_class for run in runs}
    assert classes == {"status": None, "returns": "internal", "dispute": "confidential"}
    dispute = next(run for run in runs if run.ticket.task_type == "dispute")
    names = {s.name: s.data_class for s in dispute.results[0].breakdown.sources}
    assert names["pii-handling"] == "confidential"
    assert names["refund-policy"] == "internal"


def test_exact_usage_keeps_calibration_at_one(fitter: ContextFitter) -> None:
    own = ContextFitter(SUPPORT_DESK, encoding="cl100k_base")
    run_ticket(own, make_ticket(2, 4), opener=bare_run)
    assert own.calibration == 1.0


def test_summary_matches_the_rounds(runs: list) -> None:
    summary = WorkloadSummary(tuple(SUPPORT_DESK))
    for run in runs:
        summary.add(run)
    total = summary.total()
    all_rounds = [r for run in runs for r in run.rounds]
    assert total.runs == len(runs)
    assert total.rounds == len(all_rounds)
    assert total.compacted == sum(r.outcome == "compacted" for r in all_rounds)
    assert total.overflow == sum(run.stop == "overflow" for run in runs)
    assert total.ceiling_stops == sum(run.stop == "ceiling" for run in runs)
    assert total.escalated == sum(run.escalated for run in runs) == total.resolutions["escalated"]
    # Shares of the four lines close to 100% (the breakdown closes).
    assert sum(total.share(line) for line in COMPONENT_LINES) == pytest.approx(1.0, abs=1e-9)
    # p95 from the bins agrees with the nearest-rank p95 of the raw values (to the bin width).
    utils = sorted(r.utilization for r in all_rounds)
    nearest_rank = utils[max(0, -(-95 * len(utils) // 100) - 1)]
    assert total.utilization_quantile(0.95) == pytest.approx(nearest_rank, abs=0.0011)
    d = summary.to_dict()
    assert {t["task_type"] for t in d["task_types"]} == {"status", "returns", "dispute"}


def test_empty_stats_do_not_divide_by_zero() -> None:
    s = TaskStats("status")
    assert s.overflow_rate == 0.0
    assert s.utilization_quantile(0.95) == 0.0
    assert s.share("transcript") == 0.0
