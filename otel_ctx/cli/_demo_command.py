"""``otel-ctx demo``: the support-desk workload, summarised, inspected or run forever."""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import otel_ctx.cli._notes as notes
import otel_ctx.cli._telemetry as cli_telemetry
from otel_ctx._fitting import ContextFitter
from otel_ctx._ledger import STOP_CEILING, STOP_OVERFLOW
from otel_ctx._pricing import default_prices
from otel_ctx.cli._console import make_console
from otel_ctx.cli._errors import CliError
from otel_ctx.cli._render import breakdown_table, cost_table, outcome_line, sources_table, summary_tables
from otel_ctx.demo._agent import RoundStats, TicketRun, bare_run, observed_run, run_ticket
from otel_ctx.demo._presets import (
    SUPPORT_DESK,
    SUPPORT_DESK_LIMITS,
    SUPPORT_DESK_RESERVE,
    SUPPORT_DESK_RUN_CEILING,
)
from otel_ctx.demo._summary import WorkloadSummary
from otel_ctx.demo._workload import Ticket, make_ticket, tickets
from otel_ctx.engine._result import OUTCOME_COMPACTED
from otel_ctx.telemetry import start_counters

#: ``--inspect`` without a ticket: the first ticket whose run compacted or overflowed.
INSPECT_AUTO = "auto"
#: Seconds between status lines in ``--forever`` mode (the compose stack's logs).
STATUS_EVERY_S = 30.0

HELP = """\
Run a simulated support desk's tickets through the fit engine, round by round.

Tickets are order-status questions (about 55%), returns and disputes, with budgets of 4,000 / 8,000 \
/ 16,000 tokens, real tool payloads (an 11-item order lookup is about 4,200 tokens) and 1-12 rounds \
each; some disputes pin more than their budget and escalate. The same --seed gives the same tickets.

[bold]Examples[/bold]

  otel-ctx demo                          [dim]# 200 tickets, a summary per task type[/dim]

  otel-ctx demo --inspect                [dim]# round by round: a run that overflowed[/dim]

  otel-ctx demo --inspect T00042         [dim]# ... ticket 42[/dim]

  otel-ctx demo --seed 3 --tickets 1000 --json

  otel-ctx demo --forever --rate 2 --otlp http://otel-collector:4317
"""


def demo(
    seed: Annotated[int, typer.Option(help="Workload seed: the same seed gives the same tickets.")] = 1,
    count: Annotated[int, typer.Option("--tickets", min=1, help="Tickets to run.")] = 200,
    inspect: Annotated[
        str | None,
        typer.Option(
            "--inspect",
            metavar="[TICKET]",
            help="Show the per-round breakdown of one run (ticket id like T00042 or its number; "
            "default: the first run that overflowed, else one that compacted).",
        ),
    ] = None,
    otlp: Annotated[
        str | None,
        typer.Option(
            "--otlp",
            metavar="[URL]",
            help="Export spans and metrics over OTLP (default: OTEL_EXPORTER_OTLP_ENDPOINT, else "
            f"{cli_telemetry.DEFAULT_OTLP_ENDPOINT} for gRPC or {cli_telemetry.DEFAULT_OTLP_HTTP_ENDPOINT} "
            "with OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf).",
        ),
    ] = None,
    prometheus_port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="Serve metrics for Prometheus to scrape on this port."),
    ] = None,
    prometheus_host: Annotated[
        str, typer.Option(help="Address of the Prometheus endpoint (0.0.0.0 inside a container).")
    ] = "127.0.0.1",
    service_name: Annotated[
        str | None,
        typer.Option(help="service.name of the telemetry (default: OTEL_SERVICE_NAME, else otel-ctx-demo)."),
    ] = None,
    forever: Annotated[bool, typer.Option("--forever", help="Run tickets until Ctrl-C or SIGTERM.")] = False,
    rate: Annotated[
        float | None, typer.Option(min=0.001, help="Tickets per second with --forever (default 1).")
    ] = None,
    model: Annotated[str, typer.Option(help="Model whose tokenizer counts the requests.")] = "gpt-4o",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    if rate is not None and not forever:
        raise CliError("--rate only applies with --forever")
    if forever and inspect is not None:
        raise CliError("--inspect and --forever do not go together: inspect one run, or run forever")
    if otlp:  # empty: a bare --otlp, the exporters' own default
        check_url(otlp)
    out = make_console()
    err = make_console(stderr=True)
    if prometheus_port is not None and not forever:
        err.print(
            "otel-ctx demo: the Prometheus endpoint lives only while the demo runs; "
            "add --forever to scrape it",
            highlight=False,
        )
    fitter = ContextFitter(SUPPORT_DESK, model=model)
    session = cli_telemetry.start(
        otlp=otlp,
        prometheus_port=prometheus_port,
        prometheus_host=prometheus_host,
        service_name=service_name,
        task_types=SUPPORT_DESK,
    )
    # Every task type's ceiling-stop counter at 0 before the first ticket: rate() sees the first stop.
    start_counters(fitter, model=model)
    try:
        if inspect is not None:
            _inspect(fitter, session, out, inspect=inspect, seed=seed, count=count, as_json=as_json)
        elif forever:
            _forever(fitter, session, out, err, seed=seed, rate=rate or 1.0, as_json=as_json)
        else:
            _batch(fitter, session, out, err, seed=seed, count=count, as_json=as_json)
    finally:
        session.shutdown()


def _batch(
    fitter: ContextFitter,
    session: cli_telemetry.TelemetrySession,
    out: Console,
    err: Console,
    *,
    seed: int,
    count: int,
    as_json: bool,
) -> None:
    summary = WorkloadSummary(tuple(SUPPORT_DESK))
    show = err.is_terminal and not as_json
    progress = Progress(
        TextColumn("tickets"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not show,
    )
    # Not started at all when hidden: some rich releases print a newline when a disabled
    # progress display stops, which would break "nothing on stderr" when piped.
    with progress if show else contextlib.nullcontext():
        task = progress.add_task("tickets", total=count)
        for ticket in tickets(seed, count):
            summary.add(run_ticket(fitter, ticket, opener=observed_run))
            progress.advance(task)
    _report(out, summary, fitter, session, seed=seed, count=count, as_json=as_json)


def _report(
    out: Console,
    summary: WorkloadSummary,
    fitter: ContextFitter,
    session: cli_telemetry.TelemetrySession,
    *,
    seed: int,
    count: int | None,
    as_json: bool,
) -> None:
    """The workload's summary as JSON, or as tables with a footer on the seed, encoding and telemetry."""
    if as_json:
        out.print_json(json.dumps(_summary_json(summary, fitter, session, seed=seed, count=count)))
        return
    _print_summary(out, summary)
    out.print(f"Seed {seed}. {notes.encoding_note(fitter)} Telemetry: {session.destination}.", style="dim")


def _print_summary(out: Console, summary: WorkloadSummary) -> None:
    outcomes, shares = summary_tables(summary, out, dict(SUPPORT_DESK_LIMITS))
    out.print(outcomes)
    out.print(
        f"Limit: request limit (budget = limit - {SUPPORT_DESK_RESERVE} reserved). "
        "Compacted: rounds that dropped history. "
        "Overflow: rounds whose pinned floor alone exceeded the budget (the agent escalated). "
        "p95 util.: estimated ÷ budget.",
        style="dim",
    )
    out.print()
    out.print(shares)
    out.print()
    out.print(cost_table(summary, out, SUPPORT_DESK_RUN_CEILING))
    out.print(
        f"Cost/ticket: mean USD at list prices of {default_prices().as_of}, from reported usage. "
        "Escalated: stopped at an overflow or the ceiling, handed to a person.",
        style="dim",
    )


def _summary_json(
    summary: WorkloadSummary,
    fitter: ContextFitter,
    session: cli_telemetry.TelemetrySession,
    *,
    seed: int,
    count: int | None,
) -> dict[str, Any]:
    return {
        "seed": seed,
        "tickets": count if count is not None else summary.runs,
        "model": fitter.model,
        "encoding": fitter.encoding_name,
        "encoding_fallback": fitter.encoding_fallback,
        "telemetry": session.destination,
        "run_ceiling": SUPPORT_DESK_RUN_CEILING,
        "prices_as_of": default_prices().as_of,
        **summary.to_dict(),
    }


def check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # e.g. an unclosed IPv6 bracket, or a port out of range
        valid = False
    if not valid:
        raise CliError(f"--otlp: {url!r} is not a URL like http://localhost:4317")


def parse_ticket(value: str) -> int:
    """``T00042``, ``t42`` or ``42`` -> 42."""
    text = value.strip()
    digits = text[1:] if text[:1] in ("T", "t") else text
    if not digits.isdigit() or int(digits) < 1:
        raise CliError(
            f"--inspect: {value!r} is not a ticket (expected an id like T00042 or a number from 1)"
        )
    return int(digits)


def _choose(fitter: ContextFitter, inspect: str, seed: int, count: int) -> Ticket:
    if inspect != INSPECT_AUTO:
        return make_ticket(seed, parse_ticket(inspect))
    # The most telling run: one that overflowed (compaction, then the floor), else one that compacted.
    # (A run the ceiling stopped is inspected by its id: --inspect T00009 --seed 23.)
    probe = ContextFitter(SUPPORT_DESK, model=fitter.model)
    compacted: Ticket | None = None
    for ticket in tickets(seed, count):
        run = run_ticket(probe, ticket, opener=bare_run)
        if run.stop == STOP_OVERFLOW:
            return ticket
        if compacted is None and any(r.outcome == OUTCOME_COMPACTED for r in run.rounds):
            compacted = ticket
    return compacted or make_ticket(seed, 1)


def _inspect(
    fitter: ContextFitter,
    session: cli_telemetry.TelemetrySession,
    out: Console,
    *,
    inspect: str,
    seed: int,
    count: int,
    as_json: bool,
) -> None:
    ticket = _choose(fitter, inspect, seed, count)
    run = run_ticket(fitter, ticket, opener=observed_run, keep_results=True)
    if as_json:
        out.print_json(json.dumps(inspect_json(run, seed)))
        return
    limit = SUPPORT_DESK_LIMITS.get(ticket.task_type)
    out.print(
        f"[bold]Ticket {ticket.ticket_id}[/bold] · {ticket.task_type} ({ticket.kind}) · "
        f"request limit {limit:,} · {len(ticket.rounds)} rounds planned · seed {seed}"
    )
    for number, result in enumerate(run.results, start=1):
        out.print()
        header = outcome_line(result)
        header.stylize("bold", 0, 0)
        line = f"Round {number}: "
        out.print(line, header, sep="", end="")
        if result.dropped_indices:
            out.print(f" (dropped messages {_ranges(result.dropped_indices)})", end="")
        out.print()
        out.print(breakdown_table(result.breakdown, out))
        if number <= len(run.rounds):
            out.print(ceiling_line(run.rounds[number - 1]))
    if run.stop == STOP_OVERFLOW:
        out.print(
            f"\nEscalated to a person at round {len(run.results)}: the pinned floor (original ticket, "
            "constraints, state and the newest turn) does not fit the budget.",
            style="bold red",
        )
    elif run.stop == STOP_CEILING:
        out.print(
            f"\nEscalated to a person at round {len(run.results)}: the next request would take the "
            "ticket over its token ceiling; it was not sent.",
            style="bold red",
        )
    cost = "n/a (no price for the model)" if run.cost is None else f"${run.cost:.4f} ({run.cost_source})"
    out.print(f"\nTicket total: {run.spent_tokens:,} tokens, {cost}; resolution: {run.resolution}.")
    if run.results:
        sources = sources_table(run.results[-1].breakdown, out)
        if sources is not None:
            out.print("\n[bold]Sources[/bold] (names and data classes only, never text)")
            out.print(sources)
    out.print(notes.encoding_note(fitter), style="dim")


def ceiling_line(r: RoundStats) -> str:
    """The ticket's running total against its ceiling before one round, and what the round cost."""
    if r.ceiling is None:
        total = f"Running total: {r.spent_before:,} spent + {r.next_tokens:,} this request"
    else:
        verdict = "OVER: not sent" if r.crossed_ceiling else "under"
        total = (
            f"Running total: {r.spent_before:,} spent + {r.next_tokens:,} this request "
            f"= {r.spent_before + r.next_tokens:,} of the {r.ceiling:,} ceiling ({verdict})"
        )
    if r.cost is not None and r.cost_source != "none":
        total += f"; round cost ${r.cost:.4f} ({r.cost_source})"
    return total


def inspect_json(run: TicketRun, seed: int) -> dict[str, Any]:
    t = run.ticket
    return {
        "seed": seed,
        "ticket": t.ticket_id,
        "task_type": t.task_type,
        "kind": t.kind,
        "escalated": run.escalated,
        "stop": run.stop,
        "resolution": run.resolution,
        "spent_tokens": run.spent_tokens,
        "cost_usd": run.cost,
        "cost_source": run.cost_source,
        "rounds": [
            {
                "round": n,
                "outcome": r.outcome,
                "dropped_turns": r.dropped_turns,
                "dropped_indices": list(r.dropped_indices),
                "capped_tool_results": r.capped_tool_results,
                "messages_sent": len(r.messages),
                "breakdown": r.breakdown.to_dict(),
                **_ledger_json(run, n),
            }
            for n, r in enumerate(run.results, start=1)
        ],
    }


def _ledger_json(run: TicketRun, number: int) -> dict[str, Any]:
    if number > len(run.rounds):
        return {}
    r = run.rounds[number - 1]
    return {
        "spent_before": r.spent_before,
        "next_tokens": r.next_tokens,
        "run_ceiling": r.ceiling,
        "crossed_ceiling": r.crossed_ceiling,
        "cost_usd": r.cost,
        "cost_source": r.cost_source,
    }


def _ranges(indices: tuple[int, ...]) -> str:
    """(3, 4, 5, 9) -> '3-5, 9': a run of consecutive indexes keeps one offset from its position."""
    parts = []
    for _, run in itertools.groupby(enumerate(indices), lambda pair: pair[1] - pair[0]):
        values = [i for _, i in run]
        parts.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ", ".join(parts)


class _Stop:
    """Whether a stop was asked for, set from a signal handler.

    A plain flag, not a ``threading.Event``: a handler runs between two bytecodes of the main
    thread, and ``Event.set()`` there deadlocks when the signal lands while the main thread
    holds the event's own lock (inside its ``wait``), which a loaded machine makes likely.
    """

    #: How often a wait looks at the flag: the longest a stop waits for the next look.
    TICK_S = 0.05

    def __init__(self) -> None:
        self.asked = False

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, returning early once a stop is asked for."""
        end = time.monotonic() + seconds
        while not self.asked:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.TICK_S))


@contextmanager
def _stop_signals(stop: _Stop) -> Iterator[None]:
    """SIGTERM and the first Ctrl-C finish the current ticket and stop; a second Ctrl-C aborts."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and stop.asked:
            raise KeyboardInterrupt
        stop.asked = True

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _forever(
    fitter: ContextFitter,
    session: cli_telemetry.TelemetrySession,
    out: Console,
    err: Console,
    *,
    seed: int,
    rate: float,
    as_json: bool,
) -> None:
    summary = WorkloadSummary(tuple(SUPPORT_DESK))
    stop = _Stop()
    interval = 1.0 / rate
    err.print(
        f"otel-ctx demo: {rate:g} tickets/s until Ctrl-C or SIGTERM; telemetry: {session.destination}",
        highlight=False,
    )
    with _stop_signals(stop):
        index = 1
        next_at = last_status = time.monotonic()
        while not stop.asked:
            summary.add(run_ticket(fitter, make_ticket(seed, index), opener=observed_run))
            index += 1
            now = time.monotonic()
            next_at += interval
            if next_at < now - 5 * interval:
                next_at = now  # after a stall (a suspended container), resume the rate; no burst
            if now - last_status >= STATUS_EVERY_S:
                last_status = now
                total = summary.total()
                err.print(
                    f"otel-ctx demo: {total.runs} tickets, {total.rounds} rounds, "
                    f"{total.compacted} compacted, {total.overflow} overflowed",
                    highlight=False,
                )
            stop.wait(next_at - now)
        err.print("otel-ctx demo: stopping; flushing telemetry", highlight=False)
        session.shutdown()
    _report(out, summary, fitter, session, seed=seed, count=None, as_json=as_json)
