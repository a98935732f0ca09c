"""Calibration scales what is there: a request without tools shows no tool-schema tokens.

The calibration factor brings the estimate to what the provider bills; scaling must not make an
empty breakdown line non-zero, nor break the breakdown's closure, in any round.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800)


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
