"""The ticket's view: the run ceiling, cost from usage and estimates, resolutions, per-run metrics."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fake_provider import FakeProvider, Reply
from hypothesis import given
from hypothesis import strategies as st
from telemetry_capture import Capture, attrs_of

from otel_ctx import BudgetPolicy, ContextFitter, InvalidPolicyError, InvalidRequestError
from otel_ctx import names as n
from otel_ctx._ledger import BUILTIN_RESOLUTIONS, STOPS, RunCeilingReached, RunLedger, check_resolutions
from otel_ctx._pricing import ENV_PRICES, ModelPrice, PriceTable, Usage, default_prices, shipped_prices
from otel_ctx.telemetry import LabelPolicy, run

RESERVE = 100
PRICES = PriceTable(
    {"gpt-4o": ModelPrice(input=2.5, cached_input=1.25, output=10.0)},
    as_of="2026-11-30",
    source="test",
)


def policy(ceiling: int | None) -> BudgetPolicy:
    return BudgetPolicy(context_length=100_000, reserved_output=RESERVE, run_ceiling=ceiling)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.fixture
def cap() -> Capture:
    return Capture()


# --- the ceiling ---------------------------------------------------------------------------


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=8),
    outputs=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=300)), min_size=8, max_size=8),
    ceiling=st.integers(min_value=50, max_value=3_000),
)
def test_the_ceiling_stops_the_run_before_the_crossing_call_and_never_earlier(
    sizes: list[int], outputs: list[int | None], ceiling: int
) -> None:
    """Rounds of random size; usage reported for some rounds (None: only the estimate is known).

    The test keeps its own books from the fit results and the usage it reported: a round
    is flagged exactly when what was spent before it plus its prompt estimate plus the
    reserved output exceeds the ceiling, and the first flagged round is where the agent stops.
    """
    cap = Capture()
    fitter = ContextFitter(policy(ceiling))
    spent = 0
    with run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        messages: list[dict[str, Any]] = []
        for i, size in enumerate(sizes):
            messages = [*messages, user("word " * size)]
            result = r.fit(messages)
            expected = spent + result.breakdown.estimated + RESERVE > ceiling
            assert r.ceiling_reached is expected
            assert r.last_check is not None and r.last_check.spent == spent
            if expected:
                with pytest.raises(RunCeilingReached, match="over the ceiling"):
                    r.raise_for_ceiling()
                break  # the agent escalates: the crossing request is never sent
            r.raise_for_ceiling()  # under the ceiling: nothing to raise
            output = outputs[i]
            if output is None:
                spent += result.breakdown.estimated + RESERVE  # no usage: the estimate counts
            else:
                reported = result.raw_tokens + 3
                r.record_usage(input_tokens=reported, output_tokens=output)
                spent += reported + output
            assert r.spent_tokens == spent
    (run_span,) = cap.spans(n.SPAN_RUN)
    assert run_span.attributes is not None
    assert run_span.attributes[n.RUN_SPENT_TOKENS] == spent
    assert run_span.attributes[n.STOP] == ("ceiling" if r.ceiling_reached else "none")
    stops = sum(p.value for p in cap.points(n.CEILING_STOPS.name))
    assert stops == (1 if r.ceiling_reached else 0)
    cap.close()


def test_the_crossing_round_is_flagged_on_its_span_with_an_event(cap: Capture) -> None:
    fitter = ContextFitter(policy(120))
    with run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        r.fit([user("hello")])
        r.record_usage(input_tokens=10, output_tokens=5)
        r.fit([user("hello"), user("again")])
        assert r.ceiling_reached
    first, second = cap.spans(n.SPAN_FIT)
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes[n.RUN_CEILING_CROSSED] is False
    assert second.attributes[n.RUN_CEILING_CROSSED] is True
    assert second.attributes[n.RUN_SPENT_TOKENS] == 15
    assert second.attributes[n.RUN_CEILING] == 120
    (event,) = [e for e in second.events if e.name == n.EVENT_RUN_CEILING]
    assert event.attributes is not None and event.attributes[n.RUN_SPENT_TOKENS] == 15
    assert not [e for e in first.events if e.name == n.EVENT_RUN_CEILING]
    (point,) = [p for p in cap.points(n.CEILING_STOPS.name) if p.value]
    assert attrs_of(point) == {n.TASK_TYPE: n.DEFAULT_TASK_TYPE}  # per task type, as the runs
    (tokens,) = cap.points(n.RUN_TOKENS.name)
    assert attrs_of(tokens)[n.RESOLUTION] == "escalated"  # unresolved after a stop: escalated
    assert n.STOP not in attrs_of(tokens)  # the stop is on the ceiling histogram, not here
    (util,) = cap.points(n.RUN_CEILING_UTILIZATION.name)
    assert attrs_of(util)[n.STOP] == "ceiling"


def test_no_ceiling_means_no_stop_and_no_ceiling_metric(cap: Capture) -> None:
    fitter = ContextFitter(policy(None))
    with run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        for _ in range(3):
            r.fit([user("word " * 500)])
            assert not r.ceiling_reached
    assert cap.points(n.RUN_CEILING_UTILIZATION.name) == []
    assert sum(p.value for p in cap.points(n.CEILING_STOPS.name)) == 0


def test_an_overflow_is_the_stop_not_the_ceiling(cap: Capture) -> None:
    tight = BudgetPolicy(context_length=60, reserved_output=10, run_ceiling=50)
    with run(ContextFitter(tight), task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        result = r.fit([user("word " * 200)])
        assert result.outcome == "overflow"
        assert not r.ceiling_reached
        assert r.spent_tokens == 0  # an overflowed request is not sent, so nothing is spent
    (tokens,) = cap.points(n.RUN_TOKENS.name)
    assert n.STOP not in attrs_of(tokens)  # the stop is on the ceiling histogram, not here
    (util,) = cap.points(n.RUN_CEILING_UTILIZATION.name)
    assert attrs_of(util)[n.STOP] == "overflow"
    assert attrs_of(tokens)[n.RESOLUTION] == "escalated"


def test_policy_rejects_a_meaningless_ceiling() -> None:
    with pytest.raises(InvalidPolicyError, match="run_ceiling"):
        BudgetPolicy(context_length=1000, reserved_output=10, run_ceiling=0)
    with pytest.raises(InvalidPolicyError, match="run_ceiling"):
        BudgetPolicy(context_length=1000, reserved_output=10, run_ceiling=True)  # type: ignore[arg-type]


# --- cost ----------------------------------------------------------------------------------


def test_cost_from_the_estimate_then_from_usage(cap: Capture) -> None:
    fitter = ContextFitter(policy(None))
    with run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES) as r:
        result = r.fit([user("where is my parcel")])
        est = result.breakdown.estimated
        by_estimate = (est * 2.5 + RESERVE * 10.0) / 1e6
        assert r.cost == pytest.approx(by_estimate)
        assert r.ledger.cost_source == "estimate"
        r.record_usage(input_tokens=1000, output_tokens=50, cached_input_tokens=600)
        by_usage = (400 * 2.5 + 600 * 1.25 + 50 * 10.0) / 1e6
        assert r.cost == pytest.approx(by_usage)
        assert r.ledger.cost_source == "usage"
        r.fit([user("where is my parcel"), user("and now?")])
        assert r.ledger.cost_source == "mixed"
    (fit_span, _) = cap.spans(n.SPAN_FIT)
    assert fit_span.attributes is not None
    assert fit_span.attributes[n.COST_SOURCE] == "estimate"
    assert fit_span.attributes[n.COST_USD] == pytest.approx(by_estimate)
    (run_span,) = cap.spans(n.SPAN_RUN)
    (usage_event,) = [e for e in run_span.events if e.name == n.EVENT_USAGE]
    assert usage_event.attributes is not None
    assert usage_event.attributes[n.COST_SOURCE] == "usage"
    assert usage_event.attributes[n.COST_USD] == pytest.approx(by_usage)
    assert usage_event.attributes[n.USAGE_CACHED_INPUT_TOKENS] == 600
    assert run_span.attributes is not None
    assert run_span.attributes[n.COST_SOURCE] == "mixed"
    assert run_span.attributes[n.PRICES_AS_OF] == "2026-11-30"
    (cost_point,) = cap.points(n.RUN_COST.name)
    assert cost_point.sum == pytest.approx(run_span.attributes[n.COST_USD])


def test_a_model_without_a_price_has_no_cost_never_zero(cap: Capture) -> None:
    fitter = ContextFitter(policy(None), model="gpt-4o")
    with run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES, model="in-house-llm") as r:
        r.fit([user("hi")])
        r.record_usage(input_tokens=10, output_tokens=2)
        assert r.cost is None
    assert cap.points(n.RUN_COST.name) == []
    assert len(cap.points(n.RUN_TOKENS.name)) == 1


def test_openai_cached_tokens_are_priced_as_cached(fake_provider: FakeProvider, cap: Capture) -> None:
    """The real openai SDK against the fake provider: ``prompt_tokens_details.cached_tokens``."""
    fake_provider.queue(Reply(input_tokens=3000, output_tokens=200, cached_tokens=2048))
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    fitter = ContextFitter(policy(None))
    with run(fitter, task_type=None, emitter=cap.emitter, prices=shipped_prices()) as r:
        result = r.fit([user("where is my parcel")])
        response = client.chat.completions.create(model="gpt-4o", messages=result.request_messages())  # type: ignore[arg-type]
        usage = Usage.from_openai(response.usage)
        assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (3000, 2048, 200)
        r.record_usage(usage=usage)
        assert r.cost == pytest.approx((952 * 2.5 + 2048 * 1.25 + 200 * 10.0) / 1e6)
        assert r.spent_tokens == 3200


def test_openai_responses_usage_is_read_too(fake_provider: FakeProvider) -> None:
    fake_provider.queue(Reply(input_tokens=1500, output_tokens=30, cached_tokens=1024))
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    response = client.responses.create(model="gpt-4o", input="hi")
    usage = Usage.from_openai(response.usage)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1500, 1024, 30)


def test_anthropic_cache_reads_and_writes_are_priced_as_such(fake_provider: FakeProvider) -> None:
    """The real anthropic SDK: ``input_tokens`` excludes the cache reads it reports beside it."""
    fake_provider.queue(Reply(input_tokens=1000, output_tokens=100, cached_tokens=2000))
    client = anthropic.Anthropic(base_url=fake_provider.anthropic_url, api_key="test", max_retries=0)
    response = client.messages.create(
        model="claude-sonnet-4-6-20260217", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    usage = Usage.from_anthropic(response.usage)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (3000, 2000, 100)
    prices = shipped_prices()
    # A dated model name is priced as its family.
    assert prices.cost("claude-sonnet-4-6-20260217", usage) == pytest.approx(
        (1000 * 3.0 + 2000 * 0.3 + 100 * 15.0) / 1e6
    )
    # Cache writes (a plain dict, as some clients hand usage over) at the write rate.
    written = Usage.from_anthropic(
        {
            "input_tokens": 10,
            "output_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 4000,
        }
    )
    assert written.input_tokens == 4010
    assert prices.cost("claude-sonnet-4-6", written) == pytest.approx((10 * 3.0 + 4000 * 3.75) / 1e6)


def test_usage_rejects_counts_that_cannot_be() -> None:
    with pytest.raises(InvalidRequestError, match="exceed input_tokens"):
        Usage(input_tokens=10, cached_input_tokens=11)
    with pytest.raises(InvalidRequestError, match=r"usage\.output_tokens"):
        Usage(input_tokens=10, output_tokens=-1)
    with pytest.raises(InvalidRequestError, match="neither prompt_tokens nor input_tokens"):
        Usage.from_openai({"completion_tokens": 3})


@given(st.integers(-5, 50), st.integers(-5, 50), st.integers(-5, 60), st.integers(-5, 60))
def test_a_reported_usage_is_taken_as_it_can_be_never_refused(
    input_tokens: int, output_tokens: int, cached: int, written: int
) -> None:
    # What the instrumentor reads from a provider's answer: an observer records it, never raises.
    usage = Usage.reported(input_tokens, output_tokens, cached, written)
    assert usage.input_tokens == max(0, input_tokens) and usage.output_tokens == max(0, output_tokens)
    assert 0 <= usage.cached_input_tokens <= max(0, cached)
    assert 0 <= usage.cache_creation_input_tokens <= max(0, written)
    assert usage.uncached_input_tokens >= 0
    if cached >= 0 and written >= 0 and cached + written <= input_tokens:
        assert usage == Usage(input_tokens, max(0, output_tokens), cached, written)


def test_the_shipped_table_is_dated_and_found_by_model_family() -> None:
    prices = shipped_prices()
    assert len(prices.as_of) == 10 and prices.as_of[4] == "-"
    assert prices.price_for("gpt-4o-2024-08-06") == prices.price_for("gpt-4o")
    assert prices.price_for("gpt-4o-mini-2024-07-18") == prices.price_for("gpt-4o-mini")
    assert prices.price_for("gpt-4o-mini") != prices.price_for("gpt-4o")
    assert prices.price_for("gpt-4orca") is None
    assert prices.price_for("no-such-model") is None


def test_a_price_file_overrides_the_shipped_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "prices.json"
    mine.write_text(
        json.dumps(
            {
                "as_of": "2027-01-01",
                "models": {"gpt-4o": {"input": 1, "output": 2}, "mine": {"input": 0.5, "output": 1}},
            }
        )
    )
    monkeypatch.setenv(ENV_PRICES, str(mine))
    table = default_prices()
    assert table.as_of == "2027-01-01"
    assert table.price_for("gpt-4o") == ModelPrice(input=1, cached_input=1, output=2)
    assert table.price_for("mine") is not None
    assert table.price_for("claude-haiku-4-5") == shipped_prices().price_for("claude-haiku-4-5")
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps({"as_of": "2027-01-01", "models": {"gpt-4o": {"input": -1, "output": 2}}}))
    monkeypatch.setenv(ENV_PRICES, str(negative))
    with pytest.raises(InvalidPolicyError, match=r"prices\['gpt-4o'\]\.input: must be >= 0"):
        default_prices()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    monkeypatch.setenv(ENV_PRICES, str(broken))
    with pytest.raises(InvalidPolicyError, match="not JSON"):
        default_prices()
    with pytest.raises(InvalidPolicyError, match="cannot read"):
        PriceTable.load(tmp_path / "missing.json")


# --- resolutions ---------------------------------------------------------------------------


def test_the_resolution_set_is_the_registry_s_and_bounded() -> None:
    assert BUILTIN_RESOLUTIONS == n.RESOLUTIONS
    assert STOPS == n.STOPS
    assert check_resolutions(["refunded", "refunded", "resolved"]) == ("refunded",)
    with pytest.raises(InvalidRequestError, match="not a resolution name"):
        check_resolutions(["T00042-ticket"])
    with pytest.raises(InvalidRequestError, match="at most 8"):
        check_resolutions([f"r{i}" for i in range(9)])
    with pytest.raises(InvalidRequestError, match="not a resolution name"):
        LabelPolicy(resolutions=["Has Spaces"])


def test_resolve_takes_only_known_resolutions(cap: Capture) -> None:
    fitter = ContextFitter(policy(None))
    with run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES, resolutions=("refunded",)) as r:
        r.fit([user("hi")])
        with pytest.raises(InvalidRequestError, match="'T-4711' is not one of"):
            r.resolve("T-4711")
        r.resolve("refunded")
    (point,) = cap.points(n.RUN_TOKENS.name)
    assert attrs_of(point)[n.RESOLUTION] == "refunded"
    labels = Capture(LabelPolicy(resolutions=("goodwill",)))
    with run(fitter, task_type=None, emitter=labels.emitter, prices=PRICES) as r2:
        r2.resolve("goodwill")
    assert attrs_of(labels.points(n.RUN_TOKENS.name)[0])[n.RESOLUTION] == "goodwill"


@pytest.mark.parametrize(
    ("resolve", "raises", "expected"),
    [
        ("resolved", False, "resolved"),
        (None, False, "unresolved"),
        (None, True, "error"),
        ("abandoned", True, "abandoned"),
    ],
)
def test_run_metrics_are_recorded_once_per_run_also_when_the_block_raises(
    cap: Capture, resolve: str | None, raises: bool, expected: str
) -> None:
    fitter = ContextFitter(policy(10_000))
    context = run(fitter, task_type=None, emitter=cap.emitter, prices=PRICES)
    with pytest.raises(RuntimeError) if raises else _nothing(), context as r:
        r.fit([user("hi")])
        r.record_usage(input_tokens=12, output_tokens=3)
        if resolve is not None:
            r.resolve(resolve)
        if raises:
            raise RuntimeError("the agent crashed")
    context.__exit__(None, None, None)  # a second exit records nothing more
    for metric in (n.RUN_TOKENS, n.RUN_COST, n.RUN_CEILING_UTILIZATION):
        (point,) = cap.points(metric.name)
        assert point.count == 1, metric.name
    (tokens,) = cap.points(n.RUN_TOKENS.name)
    assert attrs_of(tokens) == {
        n.TASK_TYPE: n.DEFAULT_TASK_TYPE,
        n.RESOLUTION: expected,
    }
    assert tokens.sum == 15
    (ratio,) = cap.points(n.RUN_CEILING_UTILIZATION.name)
    assert ratio.sum == pytest.approx(15 / 10_000)
    (run_span,) = cap.spans(n.SPAN_RUN)
    assert run_span.attributes is not None and run_span.attributes[n.RESOLUTION] == expected


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_ledger_alone_needs_no_telemetry() -> None:
    ledger = RunLedger(ceiling=100, model="gpt-4o", prices=PRICES)
    first = ledger.add_round(1, prompt_tokens=40, reserved_output=10)
    assert not first.crossed and first.remaining == 50
    ledger.record_usage(1, Usage(input_tokens=45, output_tokens=5))
    second = ledger.add_round(2, prompt_tokens=45, reserved_output=10)
    assert second.spent == 50 and second.total == 105 and second.crossed
    assert ledger.stop == "ceiling" and ledger.stop_round == 2
    assert ledger.spent_tokens == 50  # the crossing round is not counted: it is not sent
    assert ledger.final_resolution(raised=False) == "escalated"


# --- the demo and the advisor's command line ------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from otel_ctx.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_json_has_cost_per_ticket_and_resolution_rate_by_task_type() -> None:
    proc = _cli("demo", "--seed", "23", "--tickets", "40", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["run_ceiling"] == 60_000
    by_task = {t["task_type"]: t for t in out["task_types"]}
    for stats in by_task.values():
        assert stats["cost_per_ticket_usd"] > 0
        assert 0 <= stats["resolution_rate"] <= 1
        assert sum(stats["resolutions"].values()) == stats["runs"]
    # Seed 23's ticket 9 is a long damage claim the ceiling stops; 13 and 17 overflow.
    assert by_task["dispute"]["ceiling_stopped_runs"] >= 1
    assert by_task["dispute"]["resolutions"]["escalated"] >= by_task["dispute"]["escalated_runs"] >= 3


def test_demo_inspect_shows_the_running_total_against_the_ceiling() -> None:
    proc = _cli("demo", "--seed", "23", "--inspect", "T00009", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stop"] == "ceiling" and out["resolution"] == "escalated"
    rounds = out["rounds"]
    for before, after in itertools.pairwise(rounds):
        assert after["spent_before"] > before["spent_before"]
    *sent, last = rounds
    assert not any(r["crossed_ceiling"] for r in sent)
    assert last["crossed_ceiling"] and last["spent_before"] + last["next_tokens"] > 60_000
    assert all(r["spent_before"] + r["next_tokens"] <= 60_000 for r in sent)
    text = _cli("demo", "--seed", "23", "--inspect", "T00009")
    assert "of the 60,000 ceiling (OVER: not sent)" in " ".join(text.stdout.split())


def test_advise_names_an_unreachable_prometheus_in_one_line() -> None:
    from support import free_port

    proc = _cli("advise", "--prometheus", f"http://127.0.0.1:{free_port()}")
    assert proc.returncode == 2
    assert proc.stderr.startswith("otel-ctx: error: cannot reach Prometheus at http://127.0.0.1:")
    assert proc.stderr.count("\n") == 1
    bad = _cli("advise", "--prometheus", "localhost:9090")
    assert bad.returncode == 2 and "is not a URL" in bad.stderr
    window = _cli("advise", "--prometheus", "http://127.0.0.1:1", "--window", "yesterday")
    assert window.returncode == 2 and "--window" in window.stderr
