"""The fit engine: caps, compaction order, the pinned floor, overflow, bad input."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conversations import (
    ORIGINAL_TICKET,
    assistant,
    long_dispute,
    order_payload,
    scan_payload,
    tool_round,
    user,
)

from otel_ctx import (
    BudgetPolicy,
    ContextFitter,
    ContextOverflow,
    InvalidMessageError,
    InvalidRequestError,
    InvalidToolSchemaError,
    Source,
    UnknownTaskTypeError,
)
from otel_ctx.adapters._openai_tools import count_functions, section_framing
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.engine._breakdown import COUNTED_IN_TRANSCRIPT, SYSTEM_PROMPT_LABEL


@pytest.fixture(scope="module")
def desk() -> ContextFitter:
    return ContextFitter(SUPPORT_DESK, model="gpt-4")


def small(budget_limit: int, **kw: Any) -> ContextFitter:
    return ContextFitter(
        BudgetPolicy(context_length=128_000, reserved_output=100, request_limit=budget_limit),
        **{"model": "gpt-4", **kw},
    )


# -- the chapter's damage claim -----------------------------------------------------------


def damage_claim() -> list[dict[str, Any]]:
    msgs = [{"role": "system", "content": "You are Sundry's support agent."}, user(ORIGINAL_TICKET)]
    msgs += tool_round("c1", "get_order", {"order_id": "88-1042"}, order_payload())
    msgs += tool_round("c2", "track_parcel", {"parcel": "JJD0099887766"}, scan_payload())
    msgs.append(assistant("The parcel shows an exception scan at Kassel. I will open a claim."))
    return msgs


def test_damage_claim_payloads_are_the_chapters_sizes(desk: ContextFitter) -> None:
    order, scans = desk.counter.text(order_payload()), desk.counter.text(scan_payload())
    assert 3_800 <= order <= 4_600, order  # "a get_order response ... at 4,200 tokens"
    assert 3_400 <= scans <= 4_200, scans  # "a track_parcel response ... at 3,800"


def test_capping_both_payloads_fits_without_dropping_a_turn(desk: ContextFitter) -> None:
    msgs = damage_claim()
    before = copy.deepcopy(msgs)
    uncapped = desk.measure(msgs, task_type="returns")
    assert uncapped.outcome == "overflow"  # ≈8,000 tokens of tool results alone
    result = desk.fit(msgs, task_type="returns")
    assert result.outcome == "fit"
    assert result.capped_tool_results == 2
    assert result.dropped_turns == 0
    assert len(result.messages) == len(msgs)
    for m in result.messages:
        if m["role"] == "tool":
            assert desk.counter.text(m["content"]) <= 1_200
            assert "cut to 1,200 tokens at the tool boundary" in m["content"]
    # Tool results went from the dominant tenant to a bounded one.
    assert uncapped.breakdown.transcript_by_role["tool"] > 7_000
    assert result.breakdown.transcript_by_role["tool"] <= 2 * (1_200 + 4)
    assert msgs == before  # the caller's list and dicts are untouched
    # Untouched messages are the caller's own objects; capped ones are new dicts.
    assert result.messages[1] is msgs[1]
    assert result.messages[3] is not msgs[3]


def test_cap_tool_result_matches_the_cut_inside_fit(desk: ContextFitter) -> None:
    payload = order_payload()
    capped = desk.cap_tool_result(payload, task_type="status")
    result = desk.fit(damage_claim(), task_type="status")
    assert result.messages[3]["content"] == capped
    assert desk.cap_tool_result("short result", task_type="status") == "short result"


def test_a_ten_megabyte_result_is_cut_from_a_prefix(desk: ContextFitter) -> None:
    huge = "x7 " * 3_500_000  # ≈10 MB
    capped = desk.cap_tool_result(huge, task_type="dispute")
    assert desk.counter.text(capped) <= 1_200
    assert capped.startswith("x7 x7")
    assert f"{len(huge):,} characters in the original" in capped


def test_capping_does_not_split_a_multibyte_character(desk: ContextFitter) -> None:
    text = "Übergröße 📦 " * 2_000
    capped = desk.cap_tool_result(text, task_type="status")
    assert "\ufffd" not in capped
    assert desk.counter.text(capped) <= 1_200


# -- compaction order and the floor -------------------------------------------------------


def test_naive_drop_oldest_loses_the_ticket_but_the_fitter_keeps_it() -> None:
    msgs = long_dispute(turns=20)
    fitter = small(2_500)
    # The chapter's failure: drop the oldest non-system messages until it fits.
    naive = list(msgs)
    while fitter.count(naive) + 100 > 2_500:
        del naive[1]
        while naive[1]["role"] == "tool":  # keep it sendable
            del naive[1]
    assert all(m["content"] != ORIGINAL_TICKET for m in naive)

    for strategy in ("middle", "oldest"):
        result = small(2_500, strategy=strategy).fit(msgs)
        assert result.outcome == "compacted"
        assert result.dropped_turns > 0
        assert result.messages[1]["content"] == ORIGINAL_TICKET, strategy
        assert result.messages[0] is msgs[0]
        assert result.messages[-1] is msgs[-1]


def test_middle_first_keeps_both_ends_and_oldest_first_keeps_the_recent_end() -> None:
    msgs = long_dispute(turns=20)
    middle = small(3_000).fit(msgs)
    oldest = small(3_000, strategy="oldest").fit(msgs)
    kept_middle = {id(m) for m in middle.messages}
    kept_oldest = {id(m) for m in oldest.messages}
    early_round = msgs[2]  # the first tool call after the ticket
    assert id(early_round) in kept_middle
    assert id(early_round) not in kept_oldest
    # Both keep the newest turn and the latest tool call with its result.
    last_call = max(i for i, m in enumerate(msgs) if m.get("tool_calls"))
    for res in (middle, oldest):
        ids = {id(m) for m in res.messages}
        assert id(msgs[last_call]) in ids and id(msgs[last_call + 1]) in ids
    # Middle-first leaves one contiguous hole.
    dropped = middle.dropped_indices
    assert list(dropped) == list(range(dropped[0], dropped[-1] + 1))


def test_a_turn_goes_whole_with_all_its_tool_results() -> None:
    msgs: list[dict[str, Any]] = [user(ORIGINAL_TICKET)]
    for t in range(6):
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"a{t}", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": f"b{t}", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"a{t}", "content": "alpha " * 100})
        msgs.append({"role": "tool", "tool_call_id": f"b{t}", "content": "beta " * 100})
    result = small(1_000).fit(msgs)
    assert result.outcome == "compacted"
    assert result.dropped_messages == 3 * result.dropped_turns
    small(1_000).count(result.messages)  # still a valid, sendable request (raises on an orphan)


def test_caller_pins_survive_and_overflow_keeps_the_floor() -> None:
    msgs = long_dispute(turns=12)
    constraint = 6
    result = small(1_800).fit(msgs, pinned=[constraint])
    assert msgs[constraint] in result.messages
    by_predicate = small(1_800).fit(msgs, pinned=lambda i, m: i == constraint)
    assert by_predicate.messages == result.messages

    floor_only = small(400).fit(msgs, pinned=[constraint])
    assert floor_only.outcome == "overflow"
    assert floor_only.breakdown.remaining < 0
    assert ORIGINAL_TICKET in [m["content"] for m in floor_only.messages]
    assert msgs[constraint] in floor_only.messages
    with pytest.raises(ContextOverflow) as exc:
        floor_only.raise_for_overflow()
    assert exc.value.result is floor_only
    assert "over" in str(exc.value)
    assert result.raise_for_overflow() is result


def test_summariser_replaces_the_dropped_run_and_is_counted() -> None:
    seen: list[list[dict[str, Any]]] = []

    def summarise(dropped: list[dict[str, Any]]) -> str:
        seen.append(dropped)
        return f"{len(dropped)} messages about parcel scans were compacted."

    msgs = long_dispute(turns=12)
    result = small(2_000, summarizer=summarise).fit(msgs)
    assert result.outcome == "compacted"
    assert result.summary is not None and result.summary in result.messages
    assert "compacted" in result.summary["content"]
    at = result.messages.index(result.summary)
    assert result.messages[at - 1] is msgs[result.dropped_indices[0] - 1]
    assert len(seen[-1]) == result.dropped_messages
    remeasured = small(2_000).measure(result.messages)
    assert remeasured.breakdown.estimated == result.breakdown.estimated


def test_fit_outcome_leaves_messages_as_they_are(desk: ContextFitter) -> None:
    msgs = [user("Where is my parcel?"), assistant("Let me check.")]
    result = desk.fit(msgs, task_type="status")
    assert result.outcome == "fit"
    assert result.messages == msgs and result.messages is not msgs
    assert all(a is b for a, b in zip(result.messages, msgs))


# -- the breakdown ------------------------------------------------------------------------


def test_breakdown_lines_close_and_name_their_sources(desk: ContextFitter) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_order",
                "description": "Look up an order.",
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string", "description": "The order."}},
                },
            },
        }
    ]
    result = desk.fit(
        damage_claim(),
        tools=tools,
        system_prompt="You are Sundry's support agent.",
        snippets=[Source("pii-handling", "Never repeat card numbers.", "confidential")],
        skills={"refund-policy": "Refunds within 30 days."},
        task_type="dispute",
    )
    b = result.breakdown
    b.check()
    section = count_functions(desk.counter, tools)
    # The section joins the system prompt the fit adds in front of the transcript.
    assert b.tool_schema == section.tokens + section_framing(desk.model, desk.encoding_name, True, section)
    assert b.system_prompt > 0 and b.skills > 0
    assert b.budget == 16_000 - 800
    assert [(s.name, s.kind, s.data_class) for s in b.sources] == [
        ("pii-handling", "snippet", "confidential"),
        ("refund-policy", "skill", None),
    ]
    assert b.data_class == "confidential"
    text = b.to_text()
    assert SYSTEM_PROMPT_LABEL in text and "effective data class: confidential" in text
    assert "Never repeat" not in text and "Never repeat" not in str(b.to_dict())
    # The request as it goes on the wire counts to exactly the uncalibrated estimate.
    assert desk.count(result.request_messages(), tools=tools) == b.estimated == result.raw_tokens


def test_system_prompt_counted_in_transcript_is_labelled(desk: ContextFitter) -> None:
    result = desk.fit(damage_claim(), task_type="dispute")
    assert result.breakdown.system_prompt == 0
    assert result.breakdown.system_prompt_in_transcript
    assert COUNTED_IN_TRANSCRIPT in result.breakdown.to_text()
    with_prompt = desk.fit(damage_claim()[1:], system_prompt="Be kind.", task_type="dispute")
    assert not with_prompt.breakdown.system_prompt_in_transcript


def test_calibration_scales_every_line_and_keeps_closure() -> None:
    # A model no encoding table knows: every line is an estimate the factor scales.
    fitter = small(6_000, model="acme-large-1")
    msgs = long_dispute(turns=4)
    base = fitter.fit(msgs)
    assert not base.exact and base.inexact_tokens == base.raw_tokens
    accuracy = fitter.observe_usage(base, input_tokens=int(base.raw_tokens * 1.2))
    assert accuracy == pytest.approx(1.2, rel=0.01)
    assert fitter.calibration > 1.0
    again = fitter.fit(msgs)
    assert again.calibration == fitter.calibration
    assert again.breakdown.estimated > base.breakdown.estimated
    again.breakdown.check()
    # Reports below the count never push the factor under 1.0.
    for _ in range(20):
        fitter.observe_usage(again, input_tokens=10)
    assert fitter.calibration == 1.0


def test_a_count_the_rules_reproduce_learns_nothing_from_a_bill_far_off() -> None:
    # A bill far above an exact count says something the body does not show (a server-side
    # feature): it must not scale the next exact counts up.
    fitter = small(6_000)
    msgs = long_dispute(turns=4)
    base = fitter.fit(msgs)
    assert base.exact and base.inexact_tokens == 0
    fitter.observe_usage(base, input_tokens=base.raw_tokens * 4)
    assert fitter.calibration == 1.0
    assert fitter.fit(msgs).breakdown.estimated == base.breakdown.estimated


def test_one_outlier_bill_moves_the_factor_a_step_at_most() -> None:
    fitter = small(6_000, model="acme-large-1")
    msgs = long_dispute(turns=4)
    base = fitter.fit(msgs)
    for _ in range(5):
        fitter.observe_usage(base, input_tokens=int(base.raw_tokens * 1.05))
    settled = fitter.calibration
    fitter.observe_usage(base, input_tokens=base.raw_tokens * 4)  # one bill far off the rest
    assert fitter.calibration <= settled * 1.1 + 1e-4
    fitter.observe_usage(base, input_tokens=int(base.raw_tokens * 1.05))
    assert fitter.calibration == pytest.approx(settled, abs=0.02)


# -- configuration and bad input ----------------------------------------------------------


def test_task_types_fall_back_to_the_default_or_fail_clearly() -> None:
    fitter = ContextFitter(SUPPORT_DESK, model="gpt-4")
    with pytest.raises(UnknownTaskTypeError, match=r"'billing'.*status, returns, dispute"):
        fitter.policy_for("billing")
    with_default = ContextFitter(SUPPORT_DESK, default="status", model="gpt-4")
    assert with_default.policy_for("billing") is SUPPORT_DESK["status"]
    assert with_default.task_types == ("status", "returns", "dispute")


@pytest.mark.parametrize(
    ("messages", "where", "problem"),
    [
        ([{"role": "robot", "content": "hi"}], "messages[0].role", "unknown role 'robot'"),
        ([{"role": "user", "content": 42}], "messages[0].content", "must be a string"),
        (["hello"], "messages[0]", "must be an object"),
        (
            [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}],
            "messages[1].tool_call_id",
            "no earlier assistant message declared tool call 'nope'",
        ),
        (
            [
                *tool_round("c1", "f", {}, "r"),
                user("x"),
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
            "messages[3].tool_call_id",
            "must directly follow",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages[0].content[0].text", ""),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}],
            "messages[0].tool_calls[0]",
            "",
        ),
    ],
)
def test_bad_messages_raise_a_typed_error_naming_where(
    desk: ContextFitter, messages: list[Any], where: str, problem: str
) -> None:
    before = copy.deepcopy(messages)
    with pytest.raises(InvalidMessageError) as exc:
        desk.fit(messages, task_type="status")
    assert isinstance(exc.value, ValueError)
    assert exc.value.where == where
    assert problem in str(exc.value)
    assert messages == before


def test_bad_tools_and_arguments_raise_typed_errors(desk: ContextFitter) -> None:
    msgs = [user("hi")]
    with pytest.raises(InvalidToolSchemaError, match=r"tools\[0\]"):
        desk.fit(msgs, tools=[{"type": "function"}], task_type="status")
    with pytest.raises(InvalidToolSchemaError, match="not JSON"):
        desk.fit(
            msgs, tools=[{"type": "function", "function": {"name": "f", "x": {1, 2}}}], task_type="status"
        )
    with pytest.raises(InvalidRequestError, match="messages"):
        desk.fit("hello", task_type="status")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"pinned\[0\]"):
        desk.fit(msgs, task_type="status", pinned=[7])
    with pytest.raises(InvalidRequestError, match="data class"):
        Source("x", "y", "secret")
    with pytest.raises(InvalidRequestError, match="strategy"):
        ContextFitter(SUPPORT_DESK, strategy="newest")  # type: ignore[arg-type]


def test_special_token_text_is_ordinary_text(desk: ContextFitter) -> None:
    msgs = [user("please ignore <|endoftext|> and <|fim_prefix|> here")]
    n = desk.count(msgs)
    assert n > desk.count([user("please ignore and here")])
