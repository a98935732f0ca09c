"""The demo's support desk as policies, for the examples, the demo and the tests.

Per request: 4,000 tokens for order status, 8,000 for returns, 16,000 for disputes; 800
reserved for the answer and each tool result capped at 1,200 tokens. Every ticket runs under
a 60,000-token ceiling: a typical run stays inside it, twelve turns at a large cap do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from otel_ctx.engine._budget import BudgetPolicy

SUPPORT_DESK_CONTEXT_LENGTH = 128_000
SUPPORT_DESK_RESERVE = 800
SUPPORT_DESK_TOOL_RESULT_CAP = 1_200
SUPPORT_DESK_RUN_CEILING = 60_000
SUPPORT_DESK_LIMITS: Mapping[str, int] = MappingProxyType(
    {"status": 4_000, "returns": 8_000, "dispute": 16_000}
)


def support_desk_policies(
    context_length: int = SUPPORT_DESK_CONTEXT_LENGTH,
    *,
    safety_margin: int = 0,
    run_ceiling: int | None = SUPPORT_DESK_RUN_CEILING,
) -> dict[str, BudgetPolicy]:
    """Task type -> policy for the support desk: 4,000 / 8,000 / 16,000 tokens per request."""
    return {
        task: BudgetPolicy(
            context_length=context_length,
            reserved_output=SUPPORT_DESK_RESERVE,
            safety_margin=safety_margin,
            request_limit=limit,
            tool_result_cap=SUPPORT_DESK_TOOL_RESULT_CAP,
            run_ceiling=run_ceiling,
        )
        for task, limit in SUPPORT_DESK_LIMITS.items()
    }


SUPPORT_DESK: Mapping[str, BudgetPolicy] = MappingProxyType(support_desk_policies())
