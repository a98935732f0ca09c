"""The agent loop of the demo: fit before every request, escalate at the floor.

This is the chapter's loop with the fit engine in it. Each round the agent fits the
whole transcript (the fitter's token cache makes that cost only the new messages),
sends what the fit returned, and records the provider's usage. When the pinned floor
alone overflows the budget the agent stops and hands the ticket to a person, as the
chapter prescribes, instead of sending a request it knows is too big.

How a round is observed is pluggable (:class:`RunOpener`): bare for tests and the
benchmark, through :func:`otel_ctx.run` when telemetry is on. The CLI decides which.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from otel_ctx.demo.content import SYSTEM_PROMPT, TOOLS
from otel_ctx.demo.workload import Message, Ticket
from otel_ctx.engine.breakdown import Breakdown
from otel_ctx.engine.fitter import ContextFitter
from otel_ctx.engine.result import FitResult, Outcome
from otel_ctx.engine.sources import Source


class RoundFitter(Protocol):
    """What the loop needs from a run: fit one round, report the provider's usage."""

    def fit(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = ...,
        system_prompt: str | None = ...,
        snippets: Sequence[Source] | None = ...,
        skills: Sequence[Source] | None = ...,
        task_type: str | None = ...,
        pinned: Sequence[int] | None = ...,
    ) -> FitResult: ...

    def record_usage(self, *, input_tokens: int, output_tokens: int) -> Any: ...


class RunOpener(Protocol):
    """Opens one observed run for a ticket (a context manager yielding a :class:`RoundFitter`)."""

    def __call__(self, fitter: ContextFitter, ticket: Ticket) -> AbstractContextManager[RoundFitter]: ...


class _BareRun:
    """A run without telemetry: the fitter alone, with usage fed back into calibration."""

    def __init__(self, fitter: ContextFitter) -> None:
        self.fitter = fitter
        self.last: FitResult | None = None

    def fit(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        system_prompt: str | None = None,
        snippets: Sequence[Source] | None = None,
        skills: Sequence[Source] | None = None,
        task_type: str | None = None,
        pinned: Sequence[int] | None = None,
    ) -> FitResult:
        self.last = self.fitter.fit(
            messages,
            tools=tools,
            system_prompt=system_prompt,
            snippets=snippets,
            skills=skills,
            task_type=task_type,
            pinned=pinned,
        )
        return self.last

    def record_usage(self, *, input_tokens: int, output_tokens: int) -> float | None:
        if self.last is None:
            return None
        return self.fitter.observe_usage(self.last, input_tokens)


@contextmanager
def bare_run(fitter: ContextFitter, ticket: Ticket) -> Iterator[RoundFitter]:
    yield _BareRun(fitter)


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

    @classmethod
    def of(cls, number: int, result: FitResult) -> RoundStats:
        b: Breakdown = result.breakdown
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
        )


@dataclass(slots=True)
class TicketRun:
    """One ticket through the loop: per-round stats, and the full results when asked."""

    ticket: Ticket
    rounds: list[RoundStats] = field(default_factory=list)
    results: list[FitResult] = field(default_factory=list)
    escalated: bool = False


def run_ticket(
    fitter: ContextFitter,
    ticket: Ticket,
    *,
    opener: RunOpener = bare_run,
    keep_results: bool = False,
) -> TicketRun:
    """Drive one ticket round by round; stop at the first floor overflow (escalation)."""
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
            out.rounds.append(RoundStats.of(number, result))
            if keep_results:
                out.results.append(result)
            if result.outcome == "overflow":
                # The chapter: hand the ticket to a person with the work so far attached.
                out.escalated = True
                break
            # The provider counts what was sent; the fitter's count is exact for it.
            run.record_usage(
                input_tokens=max(1, result.raw_tokens), output_tokens=ticket.output_tokens[number - 1]
            )
    return out
