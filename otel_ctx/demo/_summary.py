"""Per-task-type aggregates of a workload run, in bounded memory (``--forever`` runs for days)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from otel_ctx._ledger import STOP_CEILING
from otel_ctx.demo._agent import TicketRun
from otel_ctx.engine._breakdown import LINES
from otel_ctx.engine._result import OUTCOME_COMPACTED, OUTCOME_OVERFLOW

#: Utilization is binned at 0.1% up to 400%; p95 needs no list of every round.
_BIN = 1000
_MAX_BIN = 4 * _BIN

#: The breakdown lines whose mean share of the estimate the summary reports.
COMPONENT_LINES = LINES


@dataclass(slots=True)
class TaskStats:
    task_type: str
    runs: int = 0
    rounds: int = 0
    compacted: int = 0
    overflow: int = 0
    escalated: int = 0
    dropped_turns: int = 0
    capped_tool_results: int = 0
    share_sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COMPONENT_LINES, 0.0))
    utilization_bins: dict[int, int] = field(default_factory=dict)
    ceiling_stops: int = 0
    resolutions: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    cost: float = 0.0
    priced_runs: int = 0

    def add(self, run: TicketRun) -> None:
        self.runs += 1
        self.escalated += run.escalated
        self.ceiling_stops += run.stop == STOP_CEILING
        self.resolutions[run.resolution] = self.resolutions.get(run.resolution, 0) + 1
        self.tokens += run.spent_tokens
        if run.cost is not None:
            self.cost += run.cost
            self.priced_runs += 1
        for r in run.rounds:
            self.rounds += 1
            self.compacted += r.outcome == OUTCOME_COMPACTED
            self.overflow += r.outcome == OUTCOME_OVERFLOW
            self.dropped_turns += r.dropped_turns
            self.capped_tool_results += r.capped_tool_results
            total = max(1, r.estimated)
            for line in COMPONENT_LINES:
                self.share_sums[line] += getattr(r, line) / total
            b = min(_MAX_BIN, int(r.utilization * _BIN))
            self.utilization_bins[b] = self.utilization_bins.get(b, 0) + 1

    def share(self, line: str) -> float:
        """Mean share of ``estimated`` that this line took, over the rounds."""
        return self.share_sums[line] / self.rounds if self.rounds else 0.0

    @property
    def overflow_rate(self) -> float:
        """Rounds whose pinned floor overflowed, as a share of all rounds."""
        return self.overflow / self.rounds if self.rounds else 0.0

    @property
    def resolution_rate(self) -> float:
        """Runs that ended ``resolved``, as a share of all runs."""
        return self.resolutions.get("resolved", 0) / self.runs if self.runs else 0.0

    @property
    def cost_per_ticket(self) -> float | None:
        """Mean USD per run (None when no run's model had a price)."""
        return self.cost / self.priced_runs if self.priced_runs else None

    @property
    def tokens_per_ticket(self) -> float:
        return self.tokens / self.runs if self.runs else 0.0

    def utilization_quantile(self, q: float) -> float:
        """Utilization at quantile ``q`` (to 0.1%), from the bins."""
        if not self.rounds:
            return 0.0
        rank = q * self.rounds
        seen = 0
        for b in sorted(self.utilization_bins):
            seen += self.utilization_bins[b]
            if seen >= rank:
                return (b + 1) / _BIN
        return _MAX_BIN / _BIN

    def merge(self, other: TaskStats) -> None:
        """Add ``other``'s counts, sums and bins to these (the task type stays)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, dict):
                for key, n in theirs.items():
                    mine[key] = mine.get(key, 0) + n
            elif f.name != "task_type":
                setattr(self, f.name, mine + theirs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_type": self.task_type,
            "runs": self.runs,
            "rounds": self.rounds,
            "compacted_rounds": self.compacted,
            "overflow_rounds": self.overflow,
            "overflow_rate": round(self.overflow_rate, 4),
            "escalated_runs": self.escalated,
            "dropped_turns": self.dropped_turns,
            "capped_tool_results": self.capped_tool_results,
            "mean_share": {line: round(self.share(line), 4) for line in COMPONENT_LINES},
            "p95_utilization": round(self.utilization_quantile(0.95), 3),
            "ceiling_stopped_runs": self.ceiling_stops,
            "resolutions": dict(sorted(self.resolutions.items())),
            "resolution_rate": round(self.resolution_rate, 4),
            "tokens_per_ticket": round(self.tokens_per_ticket, 1),
            "cost_per_ticket_usd": None if self.cost_per_ticket is None else round(self.cost_per_ticket, 6),
        }


class WorkloadSummary:
    """Task type -> :class:`TaskStats`, in the order task types were first seen (or given)."""

    def __init__(self, task_types: tuple[str, ...] = ()) -> None:
        self.by_task: dict[str, TaskStats] = {t: TaskStats(t) for t in task_types}

    def add(self, run: TicketRun) -> None:
        task = run.ticket.task_type
        self.by_task.setdefault(task, TaskStats(task)).add(run)

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.by_task.values())

    def total(self) -> TaskStats:
        out = TaskStats("all")
        for s in self.by_task.values():
            out.merge(s)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_types": [s.to_dict() for s in self.by_task.values() if s.runs],
            "all": self.total().to_dict(),
        }
