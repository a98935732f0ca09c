"""Rich renderings of a breakdown, its sources and a workload summary."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from otel_ctx.cli._console import table_box
from otel_ctx.demo._summary import WorkloadSummary
from otel_ctx.engine._breakdown import LINES, SKILLS, SYSTEM_PROMPT, TOOL_SCHEMA, TRANSCRIPT, Breakdown
from otel_ctx.engine._result import OUTCOME_COMPACTED, OUTCOME_FIT, OUTCOME_OVERFLOW, FitResult

_ROW_STYLES = {
    "limit": "",
    "subtract": "",
    "total": "bold",
    "component": "",
    "role": "dim",
    "remaining": "bold green",
}
_COMPONENT_HEADERS = {
    TRANSCRIPT: "Transcript",
    TOOL_SCHEMA: "Tool schema",
    SYSTEM_PROMPT: "System prompt",
    SKILLS: "Skills",
}


def _table(console: Console, title: str | None = None, *, title_style: str | None = None) -> Table:
    """The one table shape every rendering uses: no outer edge, box chars per terminal."""
    return Table(
        box=table_box(console),
        title=title,
        title_justify="left",
        title_style=title_style,
        show_edge=False,
        pad_edge=False,
    )


def breakdown_table(breakdown: Breakdown, console: Console, *, title: str | None = None) -> Table:
    """The inspector's rows in the order the budget is computed: limit, subtractions, budget,
    components, estimate, remaining."""
    table = _table(console, title)
    table.add_column("Line", no_wrap=True)
    table.add_column("Tokens", justify="right", no_wrap=True)
    table.add_column("Share", justify="right", no_wrap=True)
    table.add_column("Note")
    estimated = max(1, breakdown.estimated)
    for row in breakdown.rows():
        style = _ROW_STYLES.get(row.kind, "")
        if row.kind == "remaining" and row.value is not None and row.value < 0:
            style = "bold white on red"
        share = ""
        if row.kind in ("component", "role") and row.value is not None:
            share = f"{row.value / estimated:.0%}"
        value = "" if row.value is None else f"{row.value:,}"
        table.add_row(row.label, value, share, row.note, style=style)
    return table


def sources_table(breakdown: Breakdown, console: Console) -> Table | None:
    """Every injected source by name, its kind and declared data class, then the strictest."""
    if not breakdown.sources:
        return None
    table = _table(console)
    table.add_column("Source", no_wrap=True)
    table.add_column("Kind")
    table.add_column("Data class")
    for source in breakdown.sources:
        table.add_row(source.name, source.kind, source.data_class or "none")
    effective = breakdown.data_class or "none"
    table.add_row(Text("effective (strictest)", style="bold"), "", Text(effective, style="bold"))
    return table


def plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def outcome_line(result: FitResult, *, measured: bool = False) -> Text:
    """One sentence on what the fit did (or, ``measured``, on the request as given)."""
    b = result.breakdown
    style = {OUTCOME_FIT: "green", OUTCOME_COMPACTED: "yellow", OUTCOME_OVERFLOW: "bold red"}[result.outcome]
    text = Text()
    text.append(result.outcome.upper(), style=style)
    if result.outcome == OUTCOME_OVERFLOW:
        what = "the request as given" if measured else "the pinned floor"
        text.append(f": {what} is {b.overflow:,} tokens over the budget of {b.budget:,}")
    else:
        text.append(f": {b.estimated:,} of {b.budget:,} tokens ({b.utilization:.0%})")
    details = []
    if result.dropped_turns:
        details.append(
            f"dropped {plural(result.dropped_turns, 'turn')} ({plural(result.dropped_messages, 'message')})"
        )
    if result.capped_tool_results:
        details.append(f"capped {plural(result.capped_tool_results, 'tool result')}")
    if result.outcome == OUTCOME_OVERFLOW and not measured:
        details.append(f"{plural(len(result.messages), 'message')} in the floor, nothing sent")
    else:
        details.append(f"{plural(len(result.messages), 'message')} sent")
    text.append("; " + ", ".join(details))
    return text


def summary_tables(summary: WorkloadSummary, console: Console, budgets: dict[str, int]) -> list[Table]:
    """Two tables per task type, each within 80 columns: how often it compacted or overflowed,
    and which component fills the window."""
    stats = [s for s in summary.by_task.values() if s.runs]
    total = summary.total()
    rows = [*stats, total]

    outcomes = _table(console, "Outcomes per task type", title_style="bold")
    outcomes.add_column("Task type", no_wrap=True)
    for name in ("Limit", "Runs", "Rounds", "Compacted", "Overflow", "p95 util."):
        outcomes.add_column(name, justify="right", no_wrap=True)
    for s in rows:
        p95 = s.utilization_quantile(0.95)
        limit = budgets.get(s.task_type)
        outcomes.add_row(
            s.task_type,
            f"{limit:,}" if limit else "",
            f"{s.runs:,}",
            f"{s.rounds:,}",
            f"{s.compacted:,}",
            Text(f"{s.overflow_rate:.1%}", style="red" if s.overflow else ""),
            Text(f"{p95:.0%}", style="yellow" if p95 > 0.9 else ""),
            style="bold" if s is total else "",
            end_section=s is not total and s is stats[-1],
        )

    shares = _table(console, "What fills the window (mean share of the estimated prompt)", title_style="bold")
    shares.add_column("Task type", no_wrap=True)
    for line in LINES:
        shares.add_column(_COMPONENT_HEADERS[line], justify="right", no_wrap=True)
    for s in rows:
        shares.add_row(
            s.task_type,
            *(f"{s.share(line):.0%}" for line in LINES),
            style="bold" if s is total else "",
            end_section=s is not total and s is stats[-1],
        )
    return [outcomes, shares]


def cost_table(summary: WorkloadSummary, console: Console, ceiling: int | None) -> Table:
    """Cost per ticket next to how the tickets ended, per task type: the view budgets are revisited with."""
    stats = [s for s in summary.by_task.values() if s.runs]
    total = summary.total()
    rows = [*stats, total]
    table = _table(console, "Cost and resolution per ticket", title_style="bold")
    table.add_column("Task type", no_wrap=True)
    for name in ("Tokens/ticket", "Cost/ticket", "Resolved", "Escalated", "Ceiling stops"):
        table.add_column(name, justify="right", no_wrap=True)
    for s in rows:
        cost = s.cost_per_ticket
        escalated = s.resolutions.get("escalated", 0)
        table.add_row(
            s.task_type,
            f"{s.tokens_per_ticket:,.0f}",
            "n/a" if cost is None else f"${cost:.4f}",
            f"{s.resolution_rate:.0%}",
            f"{escalated / s.runs:.0%}" if s.runs else "",
            Text(f"{s.ceiling_stops:,}", style="red" if s.ceiling_stops else ""),
            style="bold" if s is total else "",
            end_section=s is not total and s is stats[-1],
        )
    if ceiling is not None:
        table.caption = f"Ceiling: {ceiling:,} tokens per ticket (prompts and answers)."
        table.caption_justify = "left"
    return table
