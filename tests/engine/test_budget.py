"""Budget policies: the arithmetic, and errors that name the field and the sum."""

from __future__ import annotations

import pytest

from otel_ctx import BudgetPolicy, InvalidPolicyError
from otel_ctx.demo import SUPPORT_DESK


def test_budget_is_limit_minus_reserve_minus_margin() -> None:
    p = BudgetPolicy(context_length=128_000, reserved_output=800, safety_margin=200, request_limit=8_000)
    assert p.limit == 8_000
    assert p.budget == 8_000 - 800 - 200
    assert BudgetPolicy(4_096, 500).budget == 3_596
    assert BudgetPolicy(4_096, 500, request_limit=10_000).budget == 3_596  # the window still wins


def test_support_desk_preset_is_the_chapters() -> None:
    assert {k: p.request_limit for k, p in SUPPORT_DESK.items()} == {
        "status": 4_000,
        "returns": 8_000,
        "dispute": 16_000,
    }
    assert {p.reserved_output for p in SUPPORT_DESK.values()} == {800}
    assert {p.tool_result_cap for p in SUPPORT_DESK.values()} == {1_200}


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"context_length": -1, "reserved_output": 0}, "context_length", "must be >= 1"),
        ({"context_length": 100, "reserved_output": -5}, "reserved_output", "must be >= 0"),
        ({"context_length": 100.5, "reserved_output": 0}, "context_length", "integer"),
        ({"context_length": 100, "reserved_output": True}, "reserved_output", "integer"),
        ({"context_length": 100, "reserved_output": 0, "tool_result_cap": 0}, "tool_result_cap", ">= 1"),
        (
            {"context_length": 8_000, "reserved_output": 800, "safety_margin": 200, "request_limit": 1_000},
            "budget",
            "min(context_length=8000, request_limit=1000) - reserved_output=800 - safety_margin=200 = 0",
        ),
    ],
)
def test_invalid_settings_name_the_field(kwargs: dict[str, object], field: str, text: str) -> None:
    with pytest.raises(InvalidPolicyError) as exc:
        BudgetPolicy(**kwargs)  # type: ignore[arg-type]
    assert isinstance(exc.value, ValueError)
    assert exc.value.field == field
    assert text in str(exc.value)


def test_the_demo_policies_answer_under_their_old_top_level_names_with_a_warning() -> None:
    import otel_ctx

    with pytest.warns(DeprecationWarning, match=r"otel_ctx\.demo"):
        assert otel_ctx.SUPPORT_DESK is SUPPORT_DESK
    with pytest.warns(DeprecationWarning, match=r"otel_ctx\.demo"):
        assert otel_ctx.support_desk_policies() == dict(SUPPORT_DESK)
    assert "SUPPORT_DESK" not in otel_ctx.__all__
