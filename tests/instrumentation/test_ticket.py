"""The ticket view for zero-code agents: an ``otel_ctx.task`` block is one run.

The real openai SDK against the fake provider on 127.0.0.1, instrumented in-process on
in-memory providers: the block opens a ``context_budget.run`` span, each SDK call inside
is one of its rounds, and the exit records the run once in the per-run metrics the cost
dashboard reads (tokens, cost, resolution), exactly as ``otel_ctx.run()`` does.
"""

from __future__ import annotations

import openai
import pytest
from fake_provider import FakeProvider, Reply
from instrument_support import CHAT, Instrumented, instrumented, openai_client
from telemetry_capture import attrs_of

import otel_ctx
from otel_ctx import names as n
from otel_ctx._pricing import Usage, default_prices
from otel_ctx.engine._errors import InvalidRequestError

__all__ = ["instrumented"]  # the fixture, imported for pytest


def _runs(cap: Instrumented) -> list[dict[str, object]]:
    return [dict(s.attributes or {}) for s in cap.spans(n.SPAN_RUN)]


def _run_points(cap: Instrumented, metric: n.Metric) -> list[tuple[dict[str, object], object]]:
    return [(attrs_of(p), p) for p in cap.points(metric.name)]


def test_a_task_block_is_one_run_with_the_reported_tokens_and_cost(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        Reply(input_tokens=1200, output_tokens=40), Reply(input_tokens=1500, output_tokens=60)
    )
    client = openai_client(fake_provider)
    with otel_ctx.task("returns", conversation_id="T-1") as t:
        client.chat.completions.create(model="gpt-4o", messages=CHAT)
        client.chat.completions.create(model="gpt-4o", messages=CHAT)
        t.resolve("resolved")
        assert t.run is not None and t.run.spent_tokens == 1200 + 40 + 1500 + 60
    (run,) = _runs(instrumented)
    assert run[n.TASK_TYPE] == "returns"
    assert run[n.ROUNDS] == 2
    assert run[n.RESOLUTION] == "resolved"
    assert run[n.RUN_SPENT_TOKENS] == 2800
    assert run[n.USAGE_INPUT_TOKENS] == 2700 and run[n.USAGE_OUTPUT_TOKENS] == 100
    price = default_prices().price_for("gpt-4o")
    assert price is not None
    expected_cost = price.cost(Usage(1200, 40)) + price.cost(Usage(1500, 60))
    assert run[n.COST_USD] == pytest.approx(expected_cost)
    # Both calls' observe spans are children of the run span: the trace is the ticket.
    run_span = instrumented.spans(n.SPAN_RUN)[0]
    rounds = instrumented.rounds()
    assert len(rounds) == 2
    assert all(r.parent is not None and r.parent.span_id == run_span.context.span_id for r in rounds)
    # One record per run in the metrics the cost dashboard reads (per task type and resolution:
    # the model stays on the run span, off the per-run series).
    ((labels, point),) = _run_points(instrumented, n.RUN_TOKENS)
    assert labels == {n.TASK_TYPE: "returns", n.RESOLUTION: "resolved"}
    assert point.count == 1 and point.sum == 2800
    ((_, cost),) = _run_points(instrumented, n.RUN_COST)
    assert cost.sum == pytest.approx(expected_cost)


def test_each_block_is_its_own_run_and_a_nested_block_is_not_another(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    client = openai_client(fake_provider)
    for ticket in ("T-1", "T-2"):
        with otel_ctx.task("status", conversation_id=ticket):
            client.chat.completions.create(model="gpt-4o", messages=CHAT)
            with otel_ctx.task(conversation_id=ticket) as inner:  # a step of the same ticket
                assert inner.run is None
                client.chat.completions.create(model="gpt-4o", messages=CHAT)
    runs = _runs(instrumented)
    assert [r[n.ROUNDS] for r in runs] == [2, 2]
    assert {r[n.GEN_AI_CONVERSATION_ID] for r in runs} == {"T-1", "T-2"}
    # Unresolved by the agent and not stopped: counted as unresolved, never dropped.
    assert {r[n.RESOLUTION] for r in runs} == {"unresolved"}
    ((_, point),) = _run_points(instrumented, n.RUN_TOKENS)
    assert point.count == 2


def test_the_ceiling_flags_the_round_that_crosses_it(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    # 1,000 tokens a call: the third call (2,000 spent + its prompt + 100 reserved) crosses 2,050.
    fake_provider.queue(*(Reply(input_tokens=900, output_tokens=100) for _ in range(3)))
    client = openai_client(fake_provider)
    with otel_ctx.task("returns", run_ceiling=2050) as t:
        for _ in range(3):
            client.chat.completions.create(model="gpt-4o", messages=CHAT, max_completion_tokens=100)
            if t.run is not None and t.run.ceiling_reached:
                break
    (run,) = _runs(instrumented)
    assert run[n.STOP] == "ceiling"
    assert run[n.RESOLUTION] == "escalated"
    assert run[n.RUN_CEILING] == 2050
    stops = instrumented.points(n.CEILING_STOPS.name)
    assert sum(p.value for p in stops) == 1


def test_a_block_that_raises_is_recorded_as_an_error_and_the_error_propagates(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    client = openai_client(fake_provider)

    def agent() -> None:
        with otel_ctx.task("returns"):
            client.chat.completions.create(model="gpt-4o", messages=CHAT)
            raise RuntimeError("agent bug")

    with pytest.raises(RuntimeError, match="agent bug"):
        agent()
    (run,) = _runs(instrumented)
    assert run[n.RESOLUTION] == "error"


def test_a_task_inside_run_leaves_the_books_to_run(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    fitter = otel_ctx.ContextFitter(otel_ctx.BudgetPolicy(context_length=128_000, reserved_output=1000))
    client = openai_client(fake_provider)
    with (
        otel_ctx.run(fitter, task_type="returns", emitter=instrumented.emitter),
        otel_ctx.task("returns") as t,
    ):
        assert t.run is None
        client.chat.completions.create(model="gpt-4o", messages=CHAT)
    assert len(_runs(instrumented)) == 1


def test_resolve_rejects_a_value_that_is_not_a_resolution(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    with otel_ctx.task("returns") as t, pytest.raises(InvalidRequestError, match="resolution"):
        t.resolve("TICKET-123")
    with pytest.raises(ValueError, match="run_ceiling"):
        otel_ctx.task("returns", run_ceiling=0)


def test_without_the_instrumentor_a_task_block_opens_no_run(fake_provider: FakeProvider) -> None:
    with otel_ctx.task("returns") as t:
        assert t.run is None
        t.resolve("resolved")  # nothing to resolve: no run, no error
        openai_client(fake_provider).chat.completions.create(model="gpt-4o", messages=CHAT)


def test_the_request_and_response_are_untouched_inside_a_task_run(
    instrumented: Instrumented, fake_provider: FakeProvider
) -> None:
    client = openai_client(fake_provider)
    plain = client.chat.completions.create(model="gpt-4o", messages=CHAT)
    sent_plain = fake_provider.bodies()[-1]
    with otel_ctx.task("returns"):
        booked = client.chat.completions.create(model="gpt-4o", messages=CHAT)
    assert fake_provider.bodies()[-1] == sent_plain
    assert isinstance(booked, openai.types.chat.ChatCompletion)
    assert booked.choices[0].message.content == plain.choices[0].message.content
