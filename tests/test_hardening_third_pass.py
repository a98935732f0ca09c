"""The third adversarial pass: every finding kept as a test that failed before its fix.

Each test names the finding it pins down; the hypothesis suites beside them widen the
same attacks (every dialect with and without ``provider=``, summarizer return values,
configuration files) and check that only the documented typed errors come out.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800)


# -- a legacy function result takes the same path with or without extra keys ------------------


def test_a_two_key_function_message_after_unanswered_calls_is_judged_like_a_three_key_one() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    def transcript(extra: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "function", "content": "legacy result", **extra},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]

    fitter = ContextFitter(POLICY, model="gpt-4o")
    verdicts = []
    for extra in ({}, {"unused": 1}):
        try:
            fitter.fit(transcript(extra))
            verdicts.append("ok")
        except Exception as exc:  # the verdict is the error type, whichever it is
            verdicts.append(type(exc).__name__)
    assert verdicts[0] == verdicts[1]


# -- an empty breakdown line reads 0 in every round --------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    factor=st.floats(min_value=1.01, max_value=3.0),
    texts=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=6),
)
def test_without_tools_the_tool_schema_line_is_zero_at_any_calibration(
    factor: float, texts: list[str]
) -> None:
    fitter = ContextFitter(POLICY, model="gpt-4o")
    fitter.calibration = factor
    roles = ("user", "assistant")
    messages = [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]
    b = fitter.measure(messages).breakdown
    assert b.tool_schema == 0
    assert b.transcript + b.tool_schema + b.system_prompt + b.skills == b.estimated
    assert sum(b.transcript_by_role.values()) == b.transcript


def test_rounds_of_a_tool_less_request_never_show_tool_schema_tokens() -> None:
    fitter = ContextFitter(POLICY, model="gpt-4o")
    fitter.calibration = 1.37
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    seen = []
    for k in range(6):
        messages.append({"role": "user", "content": f"question {k} " * (k + 1)})
        seen.append(fitter.measure(messages).breakdown.tool_schema)
        messages.append({"role": "assistant", "content": f"answer {k}"})
    assert seen == [0] * 6
