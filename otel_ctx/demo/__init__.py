"""The support-desk demo workload: its policies, deterministic tickets, the agent loop, and its summary.

Used by ``otel-ctx demo`` (and the compose stack's load service), the examples, the benchmarks
and the tests; ``SUPPORT_DESK`` is the desk's three budgets as policies.
It sits outside the fit engine: it only calls the engine's public API.
"""

from otel_ctx.demo._agent import (
    RoundFitter,
    RoundStats,
    RunOpener,
    TicketRun,
    bare_run,
    observed_run,
    run_ticket,
)
from otel_ctx.demo._content import SYSTEM_PROMPT, TOOLS
from otel_ctx.demo._presets import SUPPORT_DESK, support_desk_policies
from otel_ctx.demo._summary import TaskStats, WorkloadSummary
from otel_ctx.demo._workload import TASK_MIX, Round, Ticket, make_ticket, tickets

__all__ = [
    "SUPPORT_DESK",
    "SYSTEM_PROMPT",
    "TASK_MIX",
    "TOOLS",
    "Round",
    "RoundFitter",
    "RoundStats",
    "RunOpener",
    "TaskStats",
    "Ticket",
    "TicketRun",
    "WorkloadSummary",
    "bare_run",
    "make_ticket",
    "observed_run",
    "run_ticket",
    "support_desk_policies",
    "tickets",
]
