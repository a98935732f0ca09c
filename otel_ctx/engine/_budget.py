"""Budget policies: how many tokens a request of one task type may spend."""

from __future__ import annotations

from dataclasses import dataclass

from otel_ctx.engine._errors import InvalidPolicyError, shown


def _check_int(field: str, value: object, *, minimum: int) -> None:
    # bool is an int subclass; True tokens is a bug, not a budget.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicyError(field, f"must be an integer number of tokens, got {shown(value)}")
    if value < minimum:
        raise InvalidPolicyError(field, f"must be >= {minimum}, got {value}")


def request_ceiling(context_length: int, request_limit: int | None) -> int:
    """The most a request may hold: the window, or the smaller per-task request limit."""
    return context_length if request_limit is None else min(context_length, request_limit)


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """The budget of one kind of request.

    ``budget = min(context_length, request_limit or context_length) - reserved_output
    - safety_margin``: the window (or a smaller per-task limit) less the room the
    answer must have and a margin for estimation error. ``tool_result_cap`` caps each
    tool result at the tool boundary, the cheapest cut (a result trimmed there is
    trimmed on every later round).

    ``run_ceiling`` (default: none) caps a whole run of this task type: the tokens the
    run has spent (prompts and answers) plus the next request must stay at or under it.
    An agent run enforces it round by round (see ``otel_ctx.run``); a single fit ignores it.
    """

    context_length: int
    reserved_output: int
    safety_margin: int = 0
    request_limit: int | None = None
    tool_result_cap: int | None = None
    run_ceiling: int | None = None

    def __post_init__(self) -> None:
        _check_int("context_length", self.context_length, minimum=1)
        _check_int("reserved_output", self.reserved_output, minimum=0)
        _check_int("safety_margin", self.safety_margin, minimum=0)
        for name in ("request_limit", "tool_result_cap", "run_ceiling"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), minimum=1)
        if self.budget <= 0:
            limit_expr = (
                f"min(context_length={self.context_length}, request_limit={self.request_limit})"
                if self.request_limit is not None
                else f"context_length={self.context_length}"
            )
            raise InvalidPolicyError(
                "budget",
                f"{limit_expr} - reserved_output={self.reserved_output} - "
                f"safety_margin={self.safety_margin} = {self.budget}; it must be positive",
            )

    @property
    def limit(self) -> int:
        """The request ceiling: the window, or the smaller per-task request limit."""
        return request_ceiling(self.context_length, self.request_limit)

    @property
    def budget(self) -> int:
        """Tokens the prompt may spend: ``limit - reserved_output - safety_margin``."""
        return self.limit - self.reserved_output - self.safety_margin
