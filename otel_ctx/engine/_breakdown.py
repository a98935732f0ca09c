"""Where the window went: the breakdown of one request, whose lines close.

The closure rules are what make the breakdown something a reader can subtract with:

* ``transcript + tool_schema + system_prompt + skills + server_held == estimated``
* ``min(context_length, request_limit) - reserved_output - safety_margin == budget``
* ``remaining == budget - estimated`` (negative on overflow)
* ``sum(transcript_by_role.values()) == transcript``

They hold by construction: the lines are derived from the one estimate the fit
decided with, and the tool-schema line is the remainder (the marginal cost of the
schema block), so calibration and rounding cannot make them drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from otel_ctx.engine._budget import request_ceiling
from otel_ctx.engine._sources import SourceInfo

#: The four lines that add up to ``estimated``; each names the :class:`Breakdown` field
#: that holds it (telemetry reports them as ``context_budget.component`` values).
TRANSCRIPT: Final = "transcript"
TOOL_SCHEMA: Final = "tool_schema"
SYSTEM_PROMPT: Final = "system_prompt"
SKILLS: Final = "skills"
LINES: tuple[str, ...] = (TRANSCRIPT, TOOL_SCHEMA, SYSTEM_PROMPT, SKILLS)
#: A fifth line, zero unless the provider holds context for the request (a stored conversation)
#: that this process never saw: it cannot be split into the lines above, only read off the
#: provider's usage.
SERVER_HELD: Final = "server_held"

SYSTEM_PROMPT_LABEL = "System prompt (incl. snippets)"
COUNTED_IN_TRANSCRIPT = "counted in the transcript"


class Row(NamedTuple):
    """One line of the inspector table. ``kind`` lets a renderer style it."""

    label: str
    value: int | None
    note: str
    kind: str  # "limit", "subtract", "total", "component", "role", "remaining"


@dataclass(frozen=True, slots=True)
class Breakdown:
    """The accounting of one request against its budget (token counts, calibrated)."""

    context_length: int
    request_limit: int | None
    reserved_output: int
    safety_margin: int
    budget: int
    transcript: int
    tool_schema: int
    system_prompt: int
    skills: int
    estimated: int
    remaining: int
    transcript_by_role: Mapping[str, int]
    system_prompt_in_transcript: bool
    sources: tuple[SourceInfo, ...] = field(default=())
    data_class: str | None = None
    #: Tokens of provider-held context this process never saw (0 for a self-contained request).
    server_held: int = 0

    @property
    def limit(self) -> int:
        """The request ceiling: the window, or the smaller per-task limit."""
        return request_ceiling(self.context_length, self.request_limit)

    @property
    def utilization(self) -> float:
        """``estimated / budget``: above 1.0 the request does not fit."""
        return self.estimated / self.budget

    @property
    def overflow(self) -> int:
        """Tokens over the budget (0 when it fits)."""
        return max(0, -self.remaining)

    @property
    def headroom(self) -> int:
        """Tokens left under the budget (0 on overflow)."""
        return max(0, self.remaining)

    def check(self) -> None:
        """Raise ``AssertionError`` if a closure rule is broken (used by tests and the emitter)."""
        total = self.transcript + self.tool_schema + self.system_prompt + self.skills + self.server_held
        if total != self.estimated:
            raise AssertionError(f"components sum to {total}, estimated is {self.estimated}")
        if self.limit - self.reserved_output - self.safety_margin != self.budget:
            raise AssertionError("limit - reserved_output - safety_margin != budget")
        if self.budget - self.estimated != self.remaining:
            raise AssertionError("budget - estimated != remaining")
        if sum(self.transcript_by_role.values()) != self.transcript:
            raise AssertionError("transcript_by_role does not sum to transcript")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every line, the role split and the sources (names only)."""
        return {
            "context_length": self.context_length,
            "request_limit": self.request_limit,
            "reserved_output": self.reserved_output,
            "safety_margin": self.safety_margin,
            "budget": self.budget,
            "transcript": self.transcript,
            "tool_schema": self.tool_schema,
            "system_prompt": self.system_prompt,
            "skills": self.skills,
            "server_held": self.server_held,
            "estimated": self.estimated,
            "remaining": self.remaining,
            "utilization": round(self.utilization, 4),
            "transcript_by_role": dict(self.transcript_by_role),
            "system_prompt_in_transcript": self.system_prompt_in_transcript,
            "sources": [{"name": s.name, "kind": s.kind, "data_class": s.data_class} for s in self.sources],
            "data_class": self.data_class,
        }

    def rows(self) -> list[Row]:
        """The rows of the inspector, in the order a reader subtracts with."""
        rows = [Row("Context length", self.context_length, "model window", "limit")]
        if self.request_limit is not None:
            rows.append(Row("Request limit", self.request_limit, f"limit = {self.limit:,}", "limit"))
        rows += [
            Row("− Reserved output", self.reserved_output, "room for the answer", "subtract"),
            Row("− Safety margin", self.safety_margin, "", "subtract"),
            Row("= Budget", self.budget, "", "total"),
            Row("Transcript", self.transcript, "", "component"),
        ]
        for role, tokens in self.transcript_by_role.items():
            rows.append(Row(f"  {role}", tokens, "", "role"))
        rows += [
            Row("Tool schema", self.tool_schema, "", "component"),
            Row(
                SYSTEM_PROMPT_LABEL,
                self.system_prompt,
                COUNTED_IN_TRANSCRIPT if self.system_prompt_in_transcript else "",
                "component",
            ),
            Row("Skills", self.skills, "", "component"),
        ]
        if self.server_held:
            rows.append(Row("Server-held (unseen)", self.server_held, "from reported usage", "component"))
        rows += [
            Row("= Estimated", self.estimated, f"{self.utilization:.0%} of budget", "total"),
            Row(
                "Remaining",
                self.remaining,
                "OVER BUDGET" if self.remaining < 0 else "",
                "remaining",
            ),
        ]
        return rows

    def to_text(self) -> str:
        """A plain-text table (no colour), for logs and non-TTY output."""
        lines = []
        for row in self.rows():
            value = "" if row.value is None else f"{row.value:>10,}"
            lines.append(f"{row.label:<32}{value}  {row.note}".rstrip())
        if self.sources:
            lines.append("Sources:")
            for s in self.sources:
                lines.append(f"  {s.kind:<8} {s.name:<30} {s.data_class or 'none'}")
            lines.append(f"  effective data class: {self.data_class or 'none'}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()
