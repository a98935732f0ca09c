"""Spans and metrics of fitted rounds, read back from the SDK's in-memory exporter and reader."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from conversations import ORIGINAL_TICKET, assistant, long_dispute, order_payload, tool_round, user
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from telemetry_capture import Capture, attrs_of

from otel_ctx import BudgetPolicy, ContextFitter, FitResult, InvalidMessageError, Source
from otel_ctx import names as n
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.telemetry import LabelPolicy, component_values, observed, run, start_counters

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Fetch an order by id",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def cap() -> Iterator[Capture]:
    c = Capture()
    yield c
    c.close()


@pytest.fixture(scope="module")
def fitter() -> ContextFitter:
    return ContextFitter(SUPPORT_DESK)


def rich_request() -> dict[str, Any]:
    """A request with every component: tools, system prompt + snippet, skill, a capped tool result."""
    msgs = [user(ORIGINAL_TICKET), *tool_round("c1", "get_order", {"order_id": "88-1042"}, order_payload())]
    msgs.append(assistant("The order has eleven items; which one arrived cracked?"))
    return {
        "messages": msgs,
        "tools": TOOLS,
        "system_prompt": "You are Sundry's support agent.",
        "snippets": [Source("refund-policy", "Refunds within 30 days of delivery.", "internal")],
        "skills": [Source("damage-claims", "Ask for photos of the damage first.", "confidential")],
    }


def overflowing() -> list[dict[str, Any]]:
    """The pinned first user message alone is over the status budget."""
    return [user("My parcel " + "never arrived " * 2500)]


def check_closure(a: dict[str, Any]) -> None:
    parts = a[n.TRANSCRIPT_TOKENS] + a[n.TOOL_SCHEMA_TOKENS] + a[n.SYSTEM_PROMPT_TOKENS] + a[n.SKILLS_TOKENS]
    assert parts == a[n.ESTIMATED_TOKENS]
    limit = a[n.CONTEXT_LENGTH] if a[n.REQUEST_LIMIT] == 0 else min(a[n.CONTEXT_LENGTH], a[n.REQUEST_LIMIT])
    assert limit - a[n.RESERVED_OUTPUT] - a[n.SAFETY_MARGIN] == a[n.BUDGET]
    assert a[n.BUDGET] - a[n.ESTIMATED_TOKENS] == a[n.REMAINING_TOKENS]
    assert sum(a[n.TRANSCRIPT_ROLE_TOKENS[r]] for r in n.ROLES) == a[n.TRANSCRIPT_TOKENS]


def test_every_fit_span_attribute_is_set_from_the_breakdown(cap: Capture, fitter: ContextFitter) -> None:
    req = rich_request()
    with run(
        fitter, task_type="returns", conversation_id="conv-7", agent_name="desk", emitter=cap.emitter
    ) as r:
        res = r.fit(**req)
    (span,) = cap.spans(n.SPAN_FIT)
    a = dict(span.attributes or {})
    assert set(n.FIT_SPAN_ATTRIBUTES) <= set(a)
    b = res.breakdown
    assert (a[n.TASK_TYPE], a[n.OUTCOME], a[n.ROUND]) == ("returns", res.outcome, 1)
    assert a[n.CONTEXT_LENGTH] == 128_000 and a[n.REQUEST_LIMIT] == 8_000 and a[n.BUDGET] == 7_200
    assert a[n.TRANSCRIPT_TOKENS] == b.transcript > 0
    assert a[n.TOOL_SCHEMA_TOKENS] == b.tool_schema > 0
    assert a[n.SYSTEM_PROMPT_TOKENS] == b.system_prompt > 0
    assert a[n.SKILLS_TOKENS] == b.skills > 0
    assert a[n.TRANSCRIPT_ROLE_TOKENS["tool"]] == b.transcript_by_role["tool"] > 0
    assert a[n.CAPPED_TOOL_RESULTS] == 1 == res.capped_tool_results
    assert a[n.KEPT_TURNS] == res.kept_turns and a[n.DROPPED_TURNS] == 0
    assert a[n.CALIBRATION] == pytest.approx(fitter.calibration)
    assert a[n.ENCODING] == fitter.encoding_name
    assert list(a[n.SOURCES]) == ["refund-policy", "damage-claims"]
    assert list(a[n.SOURCE_CLASSES]) == ["internal", "confidential"]
    assert a[n.DATA_CLASS] == "confidential"
    assert a[n.MODEL] == "gpt-4o"
    assert n.GEN_AI_REQUEST_MODEL not in a
    assert a[n.COMPACTED] is False
    assert a[n.GEN_AI_CONVERSATION_ID] == "conv-7" and a[n.GEN_AI_AGENT_NAME] == "desk"
    assert a[n.MODE] == "fit"
    check_closure(a)


@pytest.mark.parametrize(
    ("task_type", "make"),
    [
        ("returns", lambda: rich_request()),
        ("status", lambda: {"messages": long_dispute(20)}),
        ("status", lambda: {"messages": overflowing()}),
    ],
    ids=["fit", "compacted", "overflow"],
)
def test_span_attributes_close_like_the_breakdown(
    cap: Capture, fitter: ContextFitter, task_type: str, make: Any
) -> None:
    with run(fitter, task_type=task_type, emitter=cap.emitter) as r:
        res = r.fit(**make())
    (span,) = cap.spans(n.SPAN_FIT)
    a = dict(span.attributes or {})
    check_closure(a)
    assert a[n.OUTCOME] == res.outcome
    assert a[n.COMPACTED] is (res.dropped_turns > 0)


def test_no_request_limit_is_zero_on_the_span(cap: Capture) -> None:
    f = ContextFitter(BudgetPolicy(context_length=16_000, reserved_output=1_000, safety_margin=200))
    with run(f, task_type=None, emitter=cap.emitter) as r:
        r.fit([user("hello")])
    a = dict(cap.spans(n.SPAN_FIT)[0].attributes or {})
    assert a[n.REQUEST_LIMIT] == 0
    assert a[n.BUDGET] == 14_800
    assert a[n.TASK_TYPE] == n.DEFAULT_TASK_TYPE
    check_closure(a)


def test_rounds_are_numbered_children_of_the_run_span(cap: Capture, fitter: ContextFitter) -> None:
    history = [user(ORIGINAL_TICKET)]
    with run(fitter, task_type="dispute", conversation_id="c-1", emitter=cap.emitter) as r:
        for t in range(3):
            history += tool_round(f"call_{t}", "track_parcel", {"page": t}, f"page {t} scans")
            r.fit(history)
    (run_span,) = cap.spans(n.SPAN_RUN)
    fits = sorted(cap.spans(n.SPAN_FIT), key=lambda s: s.start_time or 0)
    assert [s.attributes[n.ROUND] for s in fits if s.attributes] == [1, 2, 3]
    for s in fits:
        assert s.parent is not None and s.parent.span_id == run_span.context.span_id
        assert s.context.trace_id == run_span.context.trace_id
    assert run_span.attributes is not None
    assert run_span.attributes[n.ROUNDS] == 3
    assert run_span.attributes[n.GEN_AI_CONVERSATION_ID] == "c-1"


def test_async_run_numbers_rounds_and_nests(cap: Capture, fitter: ContextFitter) -> None:
    async def agent() -> None:
        async with run(fitter, task_type="returns", emitter=cap.emitter) as r:
            r.fit([user("where is my refund?")])
            await asyncio.sleep(0)
            r.fit([user("where is my refund?"), assistant("Checking."), user("thanks")])

    asyncio.run(agent())
    (run_span,) = cap.spans(n.SPAN_RUN)
    fits = cap.spans(n.SPAN_FIT)
    assert sorted(s.attributes[n.ROUND] for s in fits if s.attributes) == [1, 2]
    assert all(s.parent is not None and s.parent.span_id == run_span.context.span_id for s in fits)


def test_overflow_carries_the_floor_overflow_event(cap: Capture, fitter: ContextFitter) -> None:
    with run(fitter, task_type="status", emitter=cap.emitter) as r:
        over = r.fit(overflowing())
        ok = r.fit([user("where is my parcel?")])
    assert (over.outcome, ok.outcome) == ("overflow", "fit")
    spans = {s.attributes[n.ROUND]: s for s in cap.spans(n.SPAN_FIT) if s.attributes}
    (event,) = [e for e in spans[1].events if e.name == n.EVENT_FLOOR_OVERFLOW]
    assert event.attributes is not None
    assert event.attributes[n.ESTIMATED_TOKENS] == over.breakdown.estimated
    assert event.attributes[n.BUDGET] == over.breakdown.budget == 3_200
    assert event.attributes[n.OVERFLOW_TOKENS] == over.breakdown.estimated - 3_200 > 0
    assert not [e for e in spans[2].events if e.name == n.EVENT_FLOOR_OVERFLOW]


def tokens_by_component(cap: Capture, metric: n.Metric = n.TOKENS, **match: str) -> dict[str, int]:
    """The token totals by component, of the points whose attributes match."""
    out: dict[str, int] = {}
    for p in cap.points(metric.name):
        a = attrs_of(p)
        if all(a.get(k) == v for k, v in match.items()):
            assert a[n.COMPONENT] not in out
            out[a[n.COMPONENT]] = p.value
    return out


def test_token_totals_have_one_point_per_component(cap: Capture, fitter: ContextFitter) -> None:
    with run(fitter, task_type="status", emitter=cap.emitter) as r:
        ok = r.fit(**rich_request(), task_type="returns")
        over = r.fit(overflowing())
    first = tokens_by_component(cap, **{n.TASK_TYPE: "returns", n.OUTCOME: "fit"})
    second = tokens_by_component(cap, **{n.TASK_TYPE: "status", n.OUTCOME: "overflow"})
    assert set(first) == set(second) == set(n.COMPONENTS)
    assert len(cap.points(n.TOKENS.name)) == 2 * len(n.COMPONENTS)
    b = ok.breakdown
    expected = {
        n.COMPONENT_TRANSCRIPT: b.transcript,
        n.COMPONENT_TOOL_SCHEMA: b.tool_schema,
        n.COMPONENT_SYSTEM_PROMPT: b.system_prompt,
        n.COMPONENT_SKILLS: b.skills,
        n.COMPONENT_SERVER_HELD: 0,
        n.COMPONENT_ESTIMATED: b.estimated,
        n.COMPONENT_BUDGET: 7_200,
        n.COMPONENT_RESERVED_OUTPUT: 800,
        n.COMPONENT_SAFETY_MARGIN: 0,
        n.COMPONENT_HEADROOM: 7_200 - b.estimated,
        n.COMPONENT_OVERFLOW: 0,
        **{n.transcript_role_component(r): b.transcript_by_role[r] for r in n.ROLES},
    }
    assert first == expected
    # The round label is not on the token totals: it multiplies series by thirteen.
    assert all(n.ROUND not in attrs_of(p) for p in cap.points(n.TOKENS.name))
    # Overflow: remaining is negative, so headroom is 0 and overflow carries the excess.
    assert second[n.COMPONENT_HEADROOM] == 0
    assert second[n.COMPONENT_OVERFLOW] == over.breakdown.estimated - over.breakdown.budget > 0
    # The summed components add up to the estimated line, as on the span.
    assert sum(first[c] for c in n.SUMMED_COMPONENTS) == first[n.COMPONENT_ESTIMATED]
    # Per round: the growing lines and the budget, nothing else.
    round_one = tokens_by_component(cap, n.ROUND_TOKENS, **{n.ROUND: "01"})
    assert round_one == {c: expected[c] for c in n.ROUND_COMPONENTS}
    round_two = tokens_by_component(cap, n.ROUND_TOKENS, **{n.ROUND: "02"})
    assert round_two[n.COMPONENT_BUDGET] == over.breakdown.budget


def test_totals_accumulate_across_rounds_and_are_cumulative(cap: Capture, fitter: ContextFitter) -> None:
    """A total grows by each round's value and is reported whole at every collection."""
    with run(fitter, task_type="returns", emitter=cap.emitter) as r:
        a = r.fit([user("where is my refund?")])
        before = tokens_by_component(cap)
        b = r.fit([user("where is my refund?"), assistant("Checking."), user("any news?")])
    after = tokens_by_component(cap)
    assert before[n.COMPONENT_ESTIMATED] == a.breakdown.estimated
    assert after[n.COMPONENT_ESTIMATED] == a.breakdown.estimated + b.breakdown.estimated
    assert after[n.COMPONENT_BUDGET] == 2 * a.breakdown.budget


def test_two_emitters_on_one_meter_share_the_totals(fitter: ContextFitter) -> None:
    """The SDK keeps the first callbacks of an observable instrument: a second emitter must add to them."""
    from otel_ctx.telemetry import Emitter

    cap = Capture()
    other = Emitter(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    for emitter in (cap.emitter, other):
        with run(fitter, task_type="returns", emitter=emitter) as r:
            res = r.fit([user("hi")])
    assert tokens_by_component(cap)[n.COMPONENT_BUDGET] == 2 * res.breakdown.budget
    cap.close()


def test_component_values_line_up_with_the_registry(fitter: ContextFitter) -> None:
    res = fitter.fit(**rich_request(), task_type="returns")
    values = dict(zip(n.COMPONENTS, component_values(res.breakdown), strict=True))
    b = res.breakdown
    assert values[n.COMPONENT_TRANSCRIPT] == b.transcript
    assert values[n.transcript_role_component("tool")] == b.transcript_by_role["tool"]
    assert values[n.COMPONENT_ESTIMATED] == b.estimated
    assert values[n.COMPONENT_HEADROOM] == b.remaining


def test_utilization_fits_and_counters(cap: Capture, fitter: ContextFitter) -> None:
    with run(fitter, task_type="status", emitter=cap.emitter) as r:
        compacted = r.fit(long_dispute(20))
        capped = r.fit(**rich_request(), task_type="returns")
        over = r.fit(overflowing())
    util = {(attrs_of(p)[n.TASK_TYPE], attrs_of(p)[n.OUTCOME]): p for p in cap.points(n.UTILIZATION.name)}
    assert set(util) == {("status", "compacted"), ("status", "overflow"), ("returns", "fit")}
    assert util[("status", "compacted")].sum == pytest.approx(compacted.breakdown.estimated / 3_200)
    overflowed = util[("status", "overflow")]
    assert overflowed.sum == pytest.approx(over.breakdown.estimated / 3_200) and overflowed.sum > 1
    assert sum(overflowed.bucket_counts[n.UTILIZATION_BUCKETS.index(1.0) + 1 :]) == 1
    assert util[("returns", "fit")].sum == pytest.approx(capped.breakdown.estimated / 7_200)
    assert tuple(overflowed.explicit_bounds) == n.UTILIZATION_BUCKETS
    for p in cap.points(n.UTILIZATION.name):
        assert set(attrs_of(p)) == set(n.UTILIZATION.attributes)
        assert n.ROUND not in attrs_of(p)
    fits = {(attrs_of(p)[n.TASK_TYPE], attrs_of(p)[n.OUTCOME]): p.value for p in cap.points(n.FITS.name)}
    # Every outcome of a task type starts at 0, so rate() sees the first overflow too.
    assert fits == {
        ("status", "fit"): 0,
        ("status", "compacted"): 1,
        ("status", "overflow"): 1,
        ("returns", "fit"): 1,
        ("returns", "compacted"): 0,
        ("returns", "overflow"): 0,
    }
    dropped = {attrs_of(p)[n.TASK_TYPE]: p.value for p in cap.points(n.DROPPED_TURNS_METRIC.name)}
    assert dropped["status"] == compacted.dropped_turns + over.dropped_turns > 0
    capped_points = {attrs_of(p)[n.TASK_TYPE]: p.value for p in cap.points(n.CAPPED_TOOL_RESULTS_METRIC.name)}
    assert capped_points["returns"] == capped.capped_tool_results == 1
    for p in cap.points(n.FITS.name):
        assert set(attrs_of(p)) == set(n.FITS.attributes)


def test_record_usage_records_accuracy_and_calibrates(cap: Capture) -> None:
    f = ContextFitter(SUPPORT_DESK)
    with run(f, task_type="returns", emitter=cap.emitter) as r:
        res = r.fit([user(ORIGINAL_TICKET)])
        reported = res.raw_tokens + 40
        accuracy = r.record_usage(input_tokens=reported, output_tokens=12)
    assert accuracy == pytest.approx(reported / res.breakdown.estimated)
    # The text was counted exactly: the bill's 40 more say the body does not show them all and
    # teach the factor nothing (it scales estimated parts only).
    assert res.exact and f.calibration == 1.0
    (point,) = cap.points(n.ESTIMATE_ACCURACY.name)
    assert point.sum == pytest.approx(accuracy)
    assert attrs_of(point) == {n.TASK_TYPE: "returns", n.GEN_AI_REQUEST_MODEL: "gpt-4o"}
    (run_span,) = cap.spans(n.SPAN_RUN)
    assert run_span.attributes is not None
    assert run_span.attributes[n.USAGE_INPUT_TOKENS] == reported
    assert run_span.attributes[n.USAGE_OUTPUT_TOKENS] == 12
    (event,) = [e for e in run_span.events if e.name == n.EVENT_USAGE]
    assert event.attributes is not None
    assert event.attributes[n.ESTIMATE_ACCURACY_RATIO] == pytest.approx(accuracy)


def test_histogram_points_carry_the_round_span_as_exemplar(cap: Capture, fitter: ContextFitter) -> None:
    with run(fitter, task_type="returns", emitter=cap.emitter) as r:
        r.fit([user("where is my refund?")])
    (span,) = cap.spans(n.SPAN_FIT)
    collected = cap.metrics()  # exemplars are handed out once per collection: collect once
    for metric in (n.UTILIZATION.name, n.FITS.name):
        for p in collected[metric].data.data_points:
            if getattr(p, "value", 1) == 0:
                continue  # the zero starts of the other outcomes belong to no round
            assert p.exemplars, metric
            assert {(e.trace_id, e.span_id) for e in p.exemplars} == {
                (span.context.trace_id, span.context.span_id)
            }


def test_task_types_outside_the_configured_set_become_other(cap: Capture) -> None:
    f = ContextFitter(SUPPORT_DESK, default="returns")  # accepts any task type, budgets it as returns
    with run(f, task_type="TICKET-99812", emitter=cap.emitter) as r:
        r.fit([user("hi")])
        r.fit([user("hi")], task_type="dispute")
    spans = cap.spans(n.SPAN_FIT)
    assert sorted(s.attributes[n.TASK_TYPE] for s in spans if s.attributes) == ["TICKET-99812", "dispute"]
    for metric in n.METRICS:
        for p in cap.points(metric.name):
            if n.TASK_TYPE in metric.attributes:
                assert attrs_of(p)[n.TASK_TYPE] in {"dispute", n.OTHER_TASK_TYPE}, metric.name
    labels = {attrs_of(p)[n.TASK_TYPE] for p in cap.points(n.FITS.name)}
    assert labels == {"dispute", n.OTHER_TASK_TYPE}


def test_single_policy_fitter_keeps_a_bounded_first_seen_set() -> None:
    labels = LabelPolicy(max_task_types=2)
    assert [labels.task_label(t) for t in ("a", "b", "c", "a", "d")] == ["a", "b", "other", "a", "other"]
    assert LabelPolicy(task_types=["x"]).task_label("a") == n.OTHER_TASK_TYPE
    assert labels.task_label(None) == n.DEFAULT_TASK_TYPE


def test_round_label_is_exact_up_to_the_maximum_then_n_plus(fitter: ContextFitter) -> None:
    cap = Capture(labels=LabelPolicy(max_round=3))
    with run(fitter, task_type="returns", emitter=cap.emitter) as r:
        for _ in range(5):
            r.fit([user("hi")])
    budgets = {
        attrs_of(p)[n.ROUND]: p.value
        for p in cap.points(n.ROUND_TOKENS.name)
        if attrs_of(p)[n.COMPONENT] == n.COMPONENT_BUDGET
    }
    assert sorted(budgets) == ["1", "2", "3", "4+"]
    assert budgets["4+"] == 2 * budgets["1"]  # rounds 4 and 5 share the label
    # Spans keep the exact round.
    assert sorted(s.attributes[n.ROUND] for s in cap.spans(n.SPAN_FIT) if s.attributes) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="max_round"):
        LabelPolicy(max_round=0)
    cap.close()


@given(st.integers(min_value=1, max_value=200))
def test_round_labels_sort_as_text_in_round_order(max_round: int) -> None:
    """Grafana orders label values as text: the labels must already be in round order that way."""
    labels = LabelPolicy(max_round=max_round)
    in_order = list(dict.fromkeys(labels.round_label(r) for r in range(1, max_round + 3)))
    assert sorted(in_order) == in_order
    assert len(in_order) == max_round + 1
    assert in_order[-1] == f"{max_round + 1}+"
    assert len({len(label.rstrip("+")) for label in in_order}) == 1


def test_default_round_labels_are_zero_padded() -> None:
    labels = LabelPolicy()
    assert [labels.round_label(r) for r in (1, 2, 10, 12, 13, 40)] == ["01", "02", "10", "12", "13+", "13+"]


def test_no_run_or_conversation_id_on_metrics(cap: Capture, fitter: ContextFitter) -> None:
    with run(
        fitter,
        task_type="returns",
        conversation_id="conv-secret-id",
        agent_name="a",
        emitter=cap.emitter,
        run_ceiling=100_000,  # the ceiling-utilization histogram needs a ceiling
    ) as r:
        r.fit([user("hi")])
        r.record_usage(input_tokens=20)
    for metric in n.METRICS:
        points = cap.points(metric.name)
        assert points, metric.name
        for p in points:
            a = attrs_of(p)
            assert set(a) <= set(metric.attributes), metric.name
            assert "conv-secret-id" not in a.values()


def test_without_a_run_an_instrumented_fit_attaches_to_the_current_span(
    cap: Capture, fitter: ContextFitter
) -> None:
    fit = observed(fitter.fit, emitter=cap.emitter)
    tracer = cap.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("agent.step") as step:
        res = fit([user("hi")], task_type="returns")
    assert isinstance(res, FitResult)
    (span,) = cap.spans(n.SPAN_FIT)
    assert span.parent is not None and span.parent.span_id == step.get_span_context().span_id
    assert span.attributes is not None and span.attributes[n.MODE] == "fit"
    assert span.attributes[n.ROUND] == 1
    assert len(cap.points(n.TOKENS.name)) == len(n.COMPONENTS)


def test_round_spans_nest_under_an_application_span_inside_the_run(
    cap: Capture, fitter: ContextFitter
) -> None:
    tracer = cap.tracer_provider.get_tracer("app")
    with (
        run(fitter, task_type="returns", emitter=cap.emitter) as r,
        tracer.start_as_current_span("step") as step,
    ):
        r.fit([user("hi")])
    (span,) = cap.spans(n.SPAN_FIT)
    assert span.parent is not None and span.parent.span_id == step.get_span_context().span_id


def test_round_from_a_worker_thread_still_joins_the_run(cap: Capture, fitter: ContextFitter) -> None:
    import threading

    with run(fitter, task_type="returns", emitter=cap.emitter) as r:
        t = threading.Thread(target=lambda: r.fit([user("hi")]))
        t.start()
        t.join()
    (run_span,) = cap.spans(n.SPAN_RUN)
    (span,) = cap.spans(n.SPAN_FIT)
    assert span.parent is not None and span.parent.span_id == run_span.context.span_id


def test_the_fits_own_errors_propagate_and_are_recorded(cap: Capture, fitter: ContextFitter) -> None:
    bad = [{"role": "tool", "tool_call_id": "nobody", "content": "x"}]
    with pytest.raises(InvalidMessageError), run(fitter, task_type="returns", emitter=cap.emitter) as r:
        r.fit(bad)
    (span,) = cap.spans(n.SPAN_FIT)
    assert span.status.status_code is StatusCode.ERROR
    (run_span,) = cap.spans(n.SPAN_RUN)
    assert run_span.status.status_code is StatusCode.ERROR
    assert cap.points(n.FITS.name) == []


class _Broken:
    """An instrument whose every call raises, standing in for a telemetry bug."""

    def record(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("telemetry bug")

    add = record


def test_a_telemetry_bug_is_logged_never_raised(
    cap: Capture, fitter: ContextFitter, caplog: pytest.LogCaptureFixture
) -> None:
    cap.emitter._utilization = _Broken()  # type: ignore[assignment]
    cap.emitter._accuracy = _Broken()  # type: ignore[assignment]
    with (
        caplog.at_level(logging.DEBUG, logger="otel_ctx.telemetry"),
        run(fitter, task_type="returns", emitter=cap.emitter) as r,
    ):
        res = r.fit([user("hi")])
        assert r.record_usage(input_tokens=res.raw_tokens) > 0
        again = r.fit([user("hi")])
    assert res.outcome == again.outcome == "fit"
    records = [rec for rec in caplog.records if rec.name == "otel_ctx.telemetry"]
    assert records and records[0].levelno == logging.WARNING
    assert any("RuntimeError" in rec.getMessage() for rec in records)
    assert not any(rec.exc_info or "telemetry bug" in rec.getMessage() for rec in records)
    # The same failure again is logged quietly, not once per round at WARNING.
    assert sum(1 for rec in records if rec.levelno == logging.WARNING and "emitting" in rec.getMessage()) == 1
    # The span still ended.
    assert len(cap.spans(n.SPAN_FIT)) == 2


def test_run_with_an_unknown_task_type_fails_at_the_start(fitter: ContextFitter, cap: Capture) -> None:
    from otel_ctx import UnknownTaskTypeError

    with pytest.raises(UnknownTaskTypeError):
        run(fitter, task_type="refund", emitter=cap.emitter)
    assert cap.spans() == []


def test_record_usage_before_any_round_is_a_typed_error(cap: Capture, fitter: ContextFitter) -> None:
    from otel_ctx import InvalidRequestError

    with run(fitter, task_type="returns", emitter=cap.emitter) as r, pytest.raises(InvalidRequestError):
        r.record_usage(input_tokens=10)


def test_spans_without_a_recording_tracer_still_record_metrics(fitter: ContextFitter) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    cap = Capture()
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    from otel_ctx.telemetry import Emitter

    em = Emitter(tracer_provider=unsampled, meter_provider=cap.meter_provider)
    with run(fitter, task_type="returns", emitter=em) as r:
        r.fit([user("hi")])
    (p,) = cap.points(n.UTILIZATION.name)
    assert p.count == 1 and not p.exemplars  # trace_based exemplar filter: unsampled, no exemplar
    cap.close()


def _span_names(spans: list[ReadableSpan]) -> list[str]:
    return [s.name for s in spans]


@given(
    turns=st.integers(min_value=0, max_value=12),
    filler=st.integers(min_value=1, max_value=120),
    request_limit=st.one_of(st.none(), st.integers(min_value=1_500, max_value=20_000)),
    reserved=st.integers(min_value=0, max_value=1_000),
    margin=st.integers(min_value=0, max_value=300),
    with_tools=st.booleans(),
)
def test_span_and_metric_closure_holds_for_any_request(
    turns: int, filler: int, request_limit: int | None, reserved: int, margin: int, with_tools: bool
) -> None:
    policy = BudgetPolicy(
        context_length=16_000,
        reserved_output=reserved,
        safety_margin=margin,
        request_limit=request_limit,
        tool_result_cap=400,
    )
    cap = Capture()
    with run(ContextFitter(policy), task_type=None, emitter=cap.emitter) as r:
        res = r.fit(
            long_dispute(turns, filler_words=filler),
            tools=TOOLS if with_tools else None,
            system_prompt="Be brief.",
        )
    (span,) = cap.spans(n.SPAN_FIT)
    a = dict(span.attributes or {})
    check_closure(a)
    assert a[n.OUTCOME] == res.outcome
    points = tokens_by_component(cap)
    assert all(v >= 0 for v in points.values())
    assert sum(points[c] for c in n.SUMMED_COMPONENTS) == points[n.COMPONENT_ESTIMATED]
    headroom, overflow = points[n.COMPONENT_HEADROOM], points[n.COMPONENT_OVERFLOW]
    assert headroom - overflow == a[n.REMAINING_TOKENS] and min(headroom, overflow) == 0
    cap.close()


def test_start_counters_starts_every_task_types_fits_at_0_before_its_first_fit(
    cap: Capture, fitter: ContextFitter
) -> None:
    """An error budget divides by every fit: a service that starts its counters at start-up has
    each task type's fit and provider-refusal series at 0 before its first fit, so rate() counts
    the first fits too (a series first seen at its first fit's 1 would hide that fit)."""
    start_counters(fitter, emitter=cap.emitter)
    fits = {(attrs_of(p)[n.TASK_TYPE], attrs_of(p)[n.OUTCOME]): p.value for p in cap.points(n.FITS.name)}
    assert fits == {(task, outcome): 0 for task in fitter.task_types for outcome in n.OUTCOMES}
    refused = {attrs_of(p)[n.TASK_TYPE]: p.value for p in cap.points(n.PROVIDER_OVERFLOWS.name)}
    assert refused == dict.fromkeys(fitter.task_types, 0)
    with run(fitter, task_type="status", emitter=cap.emitter) as r:
        r.fit(long_dispute(20))
    after = {(attrs_of(p)[n.TASK_TYPE], attrs_of(p)[n.OUTCOME]): p.value for p in cap.points(n.FITS.name)}
    assert sum(after.values()) == 1 and set(after) == set(fits)
