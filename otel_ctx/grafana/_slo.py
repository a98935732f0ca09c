"""Service level objectives per task type: what share of fits (or tickets) may fail, and the
PromQL of their error ratios, error budgets and burn rates, from the names registry.

An SRE pages on how fast a task type spends its error budget, not on a momentary overflow
share: a six-minute blip that spends a sliver of the month's budget wakes nobody, a steady 3%
leak at a 99% objective (the month's budget gone in ten days) does. Two objectives per task
type:

* ``overflow``: the share of fits that must not overflow. A fit overflows when its pinned floor
  does not fit the budget (``outcome=overflow``) or when the provider refused the request for
  the window (the provider-overflow counter). A request that did both counts twice: the ratio
  errs high rather than hide a refusal.
* ``ceiling``: the share of finished tickets (runs) that must not stop at the per-run token
  ceiling.

The alert rules (:mod:`otel_ctx.grafana._alerts`), the dashboards and the exports to Sloth and
OpenSLO read the objectives from here, so one table says what every consumer enforces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

import otel_ctx.grafana._promql as q
from otel_ctx import names
from otel_ctx.grafana._naming import quote

OVERFLOW = "overflow"
CEILING = "ceiling"
#: The kinds of objective, in the order the rules and panels list them.
KINDS: tuple[str, ...] = (OVERFLOW, CEILING)
#: ``task_type`` of the objective that holds for every task type without one of its own.
ANY_TASK_TYPE = "*"
#: The window an objective is measured over unless it names another: four weeks, so every
#: window starts on the same weekday and a weekly traffic cycle weighs the same in each.
DEFAULT_WINDOW = "28d"
#: Objectives are shares strictly between these: 0 leaves no reliability to promise and 1 no
#: budget to spend (every burn rate would divide by zero).
_MIN_OBJECTIVE, _MAX_OBJECTIVE = 0.0, 1.0

#: Service and task type: what every SLO series and alert is per.
PER_TASK: tuple[str, ...] = (q.JOB, q.TASK_TYPE)


@dataclass(frozen=True)
class Objective:
    """One SLO: ``objective`` of a task type's events must be good over ``window``.

    ``objective`` is a share (0.99: at most 1% of fits may overflow); ``kind`` says which events
    (:data:`OVERFLOW`: fits, :data:`CEILING`: finished tickets). ``task_type`` :data:`ANY_TASK_TYPE`
    is the objective of every task type that has none of its own of that kind.
    """

    task_type: str
    objective: float
    window: str = DEFAULT_WINDOW
    kind: str = OVERFLOW

    def __post_init__(self) -> None:
        if not self.task_type:
            raise ValueError("an objective needs a task type (or '*' for every other task type)")
        if not _MIN_OBJECTIVE < self.objective < _MAX_OBJECTIVE:
            raise ValueError(
                f"objective for {self.task_type!r} must be a share in (0, 1), e.g. 0.99, "
                f"got {self.objective!r}"
            )
        if self.kind not in KINDS:
            raise ValueError(f"objective kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        q.seconds(self.window)

    @property
    def error_budget(self) -> float:
        """The share of events that may be bad: ``1 - objective``."""
        return round(1.0 - self.objective, 12)

    @property
    def name(self) -> str:
        """``<kind>-<task type>`` (``any`` for the default): the SLO's name in exports and rules."""
        return f"{self.kind}-{'any' if self.task_type == ANY_TASK_TYPE else self.task_type}"


#: The demo's support desk (``status``, ``returns``, ``dispute``) and every other task type.
#: Status lookups and returns are short runs whose floor fits with room to spare (the demo
#: workload overflows none of them): 1 overflow in 100 fits is already a regression. Disputes
#: carry pasted threads and a growing case state, so some outgrow any budget by design (2-5% of
#: their fits over 600-ticket demo runs of three seeds); a 90% objective leaves them a burn of
#: about 0.3-0.45x: a ticket only if that more than doubles for days. The ceiling stops 13-27%
#: of demo disputes (the escalation path working) and no other ticket: 70% for disputes, 95%
#: for everything else.
DEFAULT_OBJECTIVES: tuple[Objective, ...] = (
    Objective("status", 0.99),
    Objective("returns", 0.99),
    Objective("dispute", 0.90),
    Objective(ANY_TASK_TYPE, 0.99),
    Objective("dispute", 0.70, kind=CEILING),
    Objective(ANY_TASK_TYPE, 0.95, kind=CEILING),
)


@dataclass(frozen=True)
class BurnWindow:
    """One multi-window burn-rate condition (Google's SRE workbook, "Alerting on SLOs").

    The alert fires while the error ratio over both ``long`` and ``short`` exceeds ``factor``
    times the error budget: the long window proves the burn is large enough to matter, the short
    one that it is still going on (so the alert resolves minutes after the burn stops).
    At a 28-30 day window, 14.4× over an hour spends 2% of the budget and 6× over six hours 5%
    (page); 3× over a day 10% and 1× over three days 10% (ticket).
    """

    severity: str
    factor: float
    long: str
    short: str


PAGE = "page"
TICKET = "ticket"
SEVERITIES: tuple[str, ...] = (PAGE, TICKET)
BURN_WINDOWS: tuple[BurnWindow, ...] = (
    BurnWindow(PAGE, 14.4, "1h", "5m"),
    BurnWindow(PAGE, 6, "6h", "30m"),
    BurnWindow(TICKET, 3, "1d", "2h"),
    BurnWindow(TICKET, 1, "3d", "6h"),
)


def burn_windows(window: str = "") -> tuple[BurnWindow, ...]:
    """:data:`BURN_WINDOWS`, or, given ``window``, the same factors with every window ``window``
    (a test Prometheus that should page in seconds, not hours)."""
    if not window:
        return BURN_WINDOWS
    q.seconds(window)
    return tuple(replace(b, long=window, short=window) for b in BURN_WINDOWS)


def ratio_windows(windows: Sequence[BurnWindow] = BURN_WINDOWS) -> tuple[str, ...]:
    """Every window an alert reads an error ratio over, shortest first (5m ... 3d)."""
    return tuple(sorted({w for b in windows for w in (b.long, b.short)}, key=q.seconds))


# --- which events are bad ----------------------------------------------------------------


def all_events(kind: str, window: str) -> str:
    """Events per second over ``window``, per service and task type: fits, or finished tickets."""
    if kind == OVERFLOW:
        return q.summed(q.rate(names.FITS.prometheus, window), PER_TASK)
    runs = names.RUN_TOKENS
    classic = q.summed(q.rate(runs.series("_count"), window), PER_TASK)
    native = q.summed(f"histogram_count(rate({runs.prometheus}[{window}]))", PER_TASK)
    return q.or_native(classic, native)


def bad_events(kind: str, window: str) -> str:
    """Bad events per second over ``window``, per service and task type, 0 where there were
    events and none was bad (a counter for an outcome exists only after its first increment)."""
    zero = f"{all_events(kind, window)} * 0"
    if kind == OVERFLOW:
        overflowed = q.matching(names.FITS.prometheus, {q.OUTCOME: names.OUTCOME_OVERFLOW})
        floor = q.summed(q.rate(overflowed, window), PER_TASK)
        refused = q.summed(q.rate(names.PROVIDER_OVERFLOWS.prometheus, window), PER_TASK)
        return f"(\n  ({floor} or {zero})\n  +\n  ({refused} or {zero})\n)"
    stops = q.summed(q.rate(names.CEILING_STOPS.prometheus, window), PER_TASK)
    return f"({stops} or {zero})"


def error_ratio(kind: str, window: str) -> str:
    """Bad events ÷ all events over ``window``, per service and task type (0-1); no series where
    there were no events (nothing spent, nothing to alert on)."""
    return f"{bad_events(kind, window)}\n/\n({all_events(kind, window)} > 0)"


def _base(kind: str) -> str:
    """The series an SLO's recording rules are named after: the events they divide."""
    return names.FITS.prometheus if kind == OVERFLOW else names.RUN_TOKENS.series("_count")


def ratio_record(kind: str, window: str) -> str:
    """The recording rule of :func:`error_ratio` (``job:context_budget_fits_total:overflow_ratio_rate1h``)."""
    return f"job:{_base(kind)}:{kind}_ratio_rate{window}"


def budget_record(kind: str) -> str:
    """The recording rule of each task type's error budget, ``1 - objective`` (a share)."""
    return f"job:{_base(kind)}:{kind}_error_budget"


def remaining_record(kind: str) -> str:
    """The recording rule of the share of the error budget left over the objective's window
    (1: untouched, 0: spent, below 0: overspent)."""
    return f"job:{_base(kind)}:{kind}_budget_remaining"


def task_matcher(objective: Objective, objectives: Iterable[Objective]) -> dict[str, str]:
    """The task type label matcher of one objective: its task type, or (the default) every task
    type without an objective of its own of the same kind. Values are PromQL matcher bodies."""
    if objective.task_type != ANY_TASK_TYPE:
        return {q.TASK_TYPE: f"={quote(objective.task_type)}"}
    own = sorted(
        {o.task_type for o in objectives if o.kind == objective.kind and o.task_type != ANY_TASK_TYPE}
    )
    if not own:
        return {}
    return {q.TASK_TYPE: f"!~{quote('|'.join(re.escape(t) for t in own))}"}


def select(series: str, objective: Objective, objectives: Iterable[Objective]) -> str:
    """``series{<task type matcher>}`` for one objective."""
    matcher = task_matcher(objective, objectives)
    if not matcher:
        return series
    return f"{series}{{{', '.join(label + body for label, body in matcher.items())}}}"


def burn_rate(objective: Objective, window: str, objectives: Iterable[Objective]) -> str:
    """How many times faster than the objective allows the budget burns over ``window``."""
    ratio = select(ratio_record(objective.kind, window), objective, objectives)
    return f"{ratio} / {q.number(objective.error_budget)}"


# --- where objectives come from -----------------------------------------------------------


class ObjectiveError(ValueError):
    """An objective in a config file or on the command line that cannot be read; says where."""


def parse_override(text: str, window: str = DEFAULT_WINDOW) -> Objective:
    """``[kind:]task_type=objective``: ``dispute=0.95``, ``ceiling:status=0.99``, ``*=0.995``.

    The objective may be a share (0.995) or a percentage (99.5%).
    """
    key, sep, value = text.partition("=")
    kind, colon, task = key.strip().rpartition(":")
    if not sep or not task.strip():
        raise ObjectiveError(
            f"--objective takes [kind:]TASK_TYPE=OBJECTIVE (e.g. dispute=0.95), got {text!r}"
        )
    try:
        return Objective(task.strip(), _share(value.strip()), window, kind.strip() if colon else OVERFLOW)
    except ValueError as exc:
        raise ObjectiveError(f"--objective {text!r}: {exc}") from None


def _share(value: str | float) -> float:
    if isinstance(value, str) and value.endswith("%"):
        return float(value[:-1]) / 100
    return float(value)


def load_config(path: str | Path) -> tuple[Objective, ...]:
    """Objectives from a YAML (or JSON) file::

        window: 28d            # optional: every objective's window unless it names its own
        objectives:
          - task_type: dispute
            objective: 0.95
          - {task_type: "*", objective: 99.5%}
          - {task_type: status, objective: 0.99, kind: ceiling, window: 7d}

    A mistake raises :class:`ObjectiveError` naming the file and the entry.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
        data = json.loads(text) if source.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ObjectiveError(f"{source}: cannot read the objectives: {exc}") from None
    return from_config(data, str(source))


def from_config(data: Any, where: str = "objectives") -> tuple[Objective, ...]:
    """Objectives from a config file's parsed content (see :func:`load_config`)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("objectives"), list):
        raise ObjectiveError(f"{where}: expected a mapping with an 'objectives' list")
    window = str(data.get("window", DEFAULT_WINDOW))
    out: list[Objective] = []
    for i, entry in enumerate(data["objectives"]):
        if not isinstance(entry, Mapping):
            raise ObjectiveError(f"{where}: objectives[{i}] must be a mapping with task_type and objective")
        unknown = set(entry) - {"task_type", "objective", "window", "kind"}
        if unknown or "task_type" not in entry or "objective" not in entry:
            raise ObjectiveError(
                f"{where}: objectives[{i}] takes task_type, objective, window and kind, got {sorted(entry)}"
            )
        try:
            out.append(
                Objective(
                    str(entry["task_type"]),
                    _share(entry["objective"]),
                    str(entry.get("window", window)),
                    str(entry.get("kind", OVERFLOW)),
                )
            )
        except (TypeError, ValueError) as exc:
            raise ObjectiveError(f"{where}: objectives[{i}]: {exc}") from None
    return merged(DEFAULT_OBJECTIVES, out)


def merged(base: Iterable[Objective], overrides: Iterable[Objective]) -> tuple[Objective, ...]:
    """``base`` with each override replacing the objective of the same kind and task type (or
    added), in ``base``'s order, then the new ones; every kind keeps a default (``*``)."""
    table = {(o.kind, o.task_type): o for o in base}
    for o in overrides:
        table[(o.kind, o.task_type)] = o
    for kind in KINDS:
        if (kind, ANY_TASK_TYPE) not in table:
            fallback = next(o for o in DEFAULT_OBJECTIVES if o.kind == kind and o.task_type == ANY_TASK_TYPE)
            table[(kind, ANY_TASK_TYPE)] = fallback
    return tuple(table.values())


def objectives(config: str | Path | None = None, overrides: Iterable[str] = ()) -> tuple[Objective, ...]:
    """The objectives to build with: the defaults, then the config file's, then ``--objective``s."""
    base = load_config(config) if config is not None else DEFAULT_OBJECTIVES
    return merged(base, (parse_override(text) for text in overrides))


def parse_objectives(text: str) -> tuple[Objective, ...]:
    """The defaults changed by a comma-separated list of overrides (``OTEL_CTX_OBJECTIVES``)."""
    return objectives(None, [part for part in text.split(",") if part.strip()])


def of_kind(kind: str, table: Iterable[Objective]) -> tuple[Objective, ...]:
    """The objectives of one kind, the task types' own first and the default last."""
    chosen = [o for o in table if o.kind == kind]
    return tuple(sorted(chosen, key=lambda o: o.task_type == ANY_TASK_TYPE))


# --- the same from the recorded rates (what the shipped rules evaluate) ---------------------

#: Per kind: the rates an SLO reads, as (metric, suffix) for :func:`otel_ctx.names.recorded`.
RECORDED_RATES: dict[str, tuple[tuple[names.Metric, str], ...]] = {
    OVERFLOW: ((names.FITS, ""), (names.PROVIDER_OVERFLOWS, "")),
    CEILING: ((names.CEILING_STOPS, ""), (names.RUN_TOKENS, "_count")),
}


def recorded_events(kind: str, window: str) -> str:
    """:func:`all_events` from the recorded rates (``job:<series>:rate<window>``)."""
    if kind == OVERFLOW:
        return q.summed(names.recorded(names.FITS, window=window), PER_TASK)
    runs = names.RUN_TOKENS
    classic = q.summed(names.recorded(runs, "_count", window), PER_TASK)
    native = q.summed(f"histogram_count({names.recorded(runs, '', window)})", PER_TASK)
    return q.or_native(classic, native)


def recorded_bad(kind: str, window: str) -> str:
    """:func:`bad_events` from the recorded rates, 0 where there were events and none was bad."""
    zero = f"{recorded_events(kind, window)} * 0"
    if kind == OVERFLOW:
        fits = names.recorded(names.FITS, window=window)
        floor = q.summed(q.matching(fits, {q.OUTCOME: names.OUTCOME_OVERFLOW}), PER_TASK)
        refused = q.summed(names.recorded(names.PROVIDER_OVERFLOWS, window=window), PER_TASK)
        return f"(\n  ({floor} or {zero})\n  +\n  ({refused} or {zero})\n)"
    stops = q.summed(names.recorded(names.CEILING_STOPS, window=window), PER_TASK)
    return f"({stops} or {zero})"


def recorded_error_ratio(kind: str, window: str) -> str:
    """:func:`error_ratio` from the recorded rates: what :func:`ratio_record` records."""
    return f"{recorded_bad(kind, window)}\n/\n({recorded_events(kind, window)} > 0)"


def seconds_left_record(kind: str) -> str:
    """The recording rule of the time until the budget is spent if the last hour's burn goes on
    (seconds; no series while nothing burns)."""
    return f"job:{_base(kind)}:{kind}_budget_seconds_left"


def budget_expressions(
    objective: Objective, table: Iterable[Objective], current: str = BURN_WINDOWS[0].long
) -> dict[str, str]:
    """Record name -> PromQL of one objective's error budget, budget left and time left.

    Budget left = 1 - (error ratio over the objective's window) ÷ (1 - objective): 1 untouched,
    0 spent, negative overspent. Time left = budget left × the window ÷ the burn rate over
    ``current`` (the fast page's long window): at a burn of 1 a whole budget lasts the window.
    """
    table = tuple(table)
    budget = q.number(objective.error_budget)
    ratio = select(ratio_record(objective.kind, objective.window), objective, table)
    left = f"1 - {ratio} / {budget}"
    window = q.number(q.seconds(objective.window))
    burn = f"({burn_rate(objective, current, table)} > 0)"
    return {
        budget_record(objective.kind): f"{ratio} * 0 + {budget}",
        remaining_record(objective.kind): left,
        seconds_left_record(objective.kind): f"clamp_min({left}, 0) * {window}\n/\n{burn}",
    }


def duration_text(seconds: float) -> str:
    """``2d 4h``, ``3h``, ``50m``: a duration for an alert's text."""
    minutes = round(seconds / 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (mins, "m")) if n]
    return " ".join(parts[:2]) or "0m"
