"""The agent loop of the demo: fit before every request, escalate at the floor or the ceiling.

Each round the agent fits the whole transcript (the token cache makes that cost only the new
messages), checks the ticket's running total against its 60,000-token ceiling, sends what the
fit returned and records the provider's usage, prompt-cache hits included. When the pinned
floor alone overflows, or the next request would cross the ceiling, the ticket goes to a
person with the work so far instead of a request known to be too big (a truncated request
gives a wrong answer with no error). Every ticket ends with a resolution.

How a round is observed is pluggable (:class:`RunOpener`): bare for tests and the benchmark,
through :func:`otel_ctx.run` when telemetry is on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from otel_ctx._fitting import ContextFitter, FitOptions
from otel_ctx._ledger import (
    ABANDONED,
    ESCALATED,
    RESOLVED,
    STOP_CEILING,
    STOP_OVERFLOW,
    CeilingCheck,
    RunLedger,
)
from otel_ctx._pricing import Usage, default_prices
from otel_ctx.demo._content import SYSTEM_PROMPT, TOOLS
from otel_ctx.demo._workload import Message, Ticket
from otel_ctx.engine._breakdown import Breakdown
from otel_ctx.engine._result import OUTCOME_OVERFLOW, FitResult, Outcome

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: Providers cache a repeated prompt prefix in 128-token steps once it reaches 1,024 tokens.
CACHE_MIN_PREFIX = 1_024
CACHE_STEP = 128
#: One status ticket in this many: the buyer stops answering (resolution ``abandoned``).
ABANDON_ONE_IN = 20


class RoundFitter(Protocol):
    """What the loop needs from a run: fit one round, report the provider's usage, keep the books."""

    ledger: RunLedger
    last_check: CeilingCheck | None

    @property
    def ceiling_reached(self) -> bool: ...

    def resolve(self, resolution: str) -> None: ...

    def fit(self, messages: Sequence[Message], **options: Unpack[FitOptions]) -> FitResult: ...

    def record_usage(self, *, usage: Usage) -> Any: ...


class RunOpener(Protocol):
    """Opens one observed run for a ticket (a context manager yielding a :class:`RoundFitter`)."""

    def __call__(self, fitter: ContextFitter, ticket: Ticket) -> AbstractContextManager[RoundFitter]: ...


class _BareRun:
    """A run without telemetry: the fitter and the run's books, with usage fed back into calibration."""

    def __init__(self, fitter: ContextFitter, task_type: str | None) -> None:
        self.fitter = fitter
        self.last: FitResult | None = None
        self.ledger = RunLedger(
            ceiling=fitter.policy_for(task_type).run_ceiling, model=fitter.model, prices=default_prices()
        )
        self.last_check: CeilingCheck | None = None
        self._round = 0

    @property
    def ceiling_reached(self) -> bool:
        check, last = self.last_check, self.last
        return check is not None and check.crossed and last is not None and last.outcome != OUTCOME_OVERFLOW

    def resolve(self, resolution: str) -> None:
        self.ledger.resolve(resolution)

    def fit(self, messages: Sequence[Message], **options: Unpack[FitOptions]) -> FitResult:
        self.last = self.fitter.fit(messages, **options)
        self._round += 1
        b = self.last.breakdown
        self.last_check = self.ledger.add_round(
            self._round,
            prompt_tokens=b.estimated,
            reserved_output=b.reserved_output,
            overflow=self.last.outcome == OUTCOME_OVERFLOW,
        )
        return self.last

    def record_usage(self, *, usage: Usage) -> float | None:
        if self.last is None:
            return None
        self.ledger.record_usage(self._round, usage)
        return self.fitter.observe_usage(self.last, usage.input_tokens)


@contextmanager
def bare_run(fitter: ContextFitter, ticket: Ticket) -> Iterator[RoundFitter]:
    yield _BareRun(fitter, ticket.task_type)


#: The demo agent's name on its run spans.
AGENT_NAME = "sundry-support"


def observed_run(fitter: ContextFitter, ticket: Ticket) -> AbstractContextManager[RoundFitter]:
    """A run with telemetry: one run span per ticket, a fit span and metrics per round."""
    from otel_ctx.telemetry import run

    return run(
        fitter,
        task_type=ticket.task_type,
        conversation_id=ticket.ticket_id,
        agent_name=AGENT_NAME,
        model=fitter.model,
    )


@dataclass(frozen=True, slots=True)
class RoundStats:
    """What the summary keeps of one round (never the text)."""

    round: int
    outcome: Outcome
    utilization: float
    estimated: int
    transcript: int
    tool_schema: int
    system_prompt: int
    skills: int
    dropped_turns: int
    capped_tool_results: int
    #: The ticket's running total before this round, what this round adds, and the ceiling.
    spent_before: int = 0
    next_tokens: int = 0
    ceiling: int | None = None
    crossed_ceiling: bool = False
    #: What the round cost (None: the model has no price) and whether from usage or an estimate.
    cost: float | None = None
    cost_source: str = "none"

    @classmethod
    def of(cls, number: int, result: FitResult, run: RoundFitter | None = None) -> RoundStats:
        b: Breakdown = result.breakdown
        check = run.last_check if run is not None else None
        spend = run.ledger.round_spend(number) if run is not None else None
        return cls(
            round=number,
            outcome=result.outcome,
            utilization=b.utilization,
            estimated=b.estimated,
            transcript=b.transcript,
            tool_schema=b.tool_schema,
            system_prompt=b.system_prompt,
            skills=b.skills,
            dropped_turns=result.dropped_turns,
            capped_tool_results=result.capped_tool_results,
            spent_before=check.spent if check is not None else 0,
            next_tokens=check.next_tokens if check is not None else 0,
            ceiling=check.ceiling if check is not None else None,
            crossed_ceiling=bool(check is not None and check.crossed and result.outcome != OUTCOME_OVERFLOW),
            cost=spend.cost if spend is not None else None,
            cost_source=spend.source if spend is not None else "none",
        )


@dataclass(slots=True)
class TicketRun:
    """One ticket through the loop: per-round stats, the ticket's books, and the full results when asked."""

    ticket: Ticket
    rounds: list[RoundStats] = field(default_factory=list)
    results: list[FitResult] = field(default_factory=list)
    escalated: bool = False
    #: ``none``, ``overflow`` (pinned floor) or ``ceiling`` (the ticket's token ceiling).
    stop: str = "none"
    resolution: str = ""
    spent_tokens: int = 0
    cost: float | None = None
    cost_source: str = "none"


def abandons(ticket: Ticket) -> bool:
    """Whether the buyer stops answering this ticket (a fixed few status tickets)."""
    if ticket.task_type != "status":
        return False
    digest = hashlib.sha256(f"{ticket.ticket_id}:{ticket.opening[0].get('content')}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % ABANDON_ONE_IN == 0


def cached_prefix(number: int, result: FitResult, input_tokens: int) -> int:
    """Prompt tokens a provider would report as cache hits: the system prompt, tool schemas and
    skills repeat from the second request on, cached in 128-token steps above 1,024 tokens."""
    if number < 2:
        return 0
    b = result.breakdown
    prefix = b.system_prompt + b.tool_schema + b.skills
    if prefix < CACHE_MIN_PREFIX:
        return 0
    return min(input_tokens, prefix // CACHE_STEP * CACHE_STEP)


def run_ticket(
    fitter: ContextFitter,
    ticket: Ticket,
    *,
    opener: RunOpener = bare_run,
    keep_results: bool = False,
) -> TicketRun:
    """Drive one ticket round by round; stop at the first floor overflow or ceiling (escalation)."""
    out = TicketRun(ticket)
    with opener(fitter, ticket) as run:
        for number, transcript in enumerate(ticket.transcripts(), start=1):
            result = run.fit(
                transcript,
                tools=TOOLS,
                system_prompt=SYSTEM_PROMPT,
                snippets=ticket.snippets,
                skills=ticket.skills,
                task_type=ticket.task_type,
                pinned=ticket.pinned or None,
            )
            if keep_results:
                out.results.append(result)
            if result.outcome == OUTCOME_OVERFLOW or run.ceiling_reached:
                # Hand the ticket to a person with the work so far attached: the next request cannot fit.
                out.rounds.append(RoundStats.of(number, result, run))
                out.escalated = True
                out.stop = STOP_OVERFLOW if result.outcome == OUTCOME_OVERFLOW else STOP_CEILING
                break
            # The provider counts what was sent; the fitter's count is exact for it.
            input_tokens = max(1, result.raw_tokens)
            run.record_usage(
                usage=Usage(
                    input_tokens=input_tokens,
                    output_tokens=ticket.output_tokens[number - 1],
                    cached_input_tokens=cached_prefix(number, result, input_tokens),
                )
            )
            out.rounds.append(RoundStats.of(number, result, run))
        if out.escalated:
            out.resolution = ESCALATED
        else:
            out.resolution = ABANDONED if abandons(ticket) else RESOLVED
        run.resolve(out.resolution)
        out.spent_tokens = run.ledger.spent_tokens
        out.cost = run.ledger.cost
        out.cost_source = run.ledger.cost_source
    return out
