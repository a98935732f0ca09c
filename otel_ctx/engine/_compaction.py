"""Compaction: which whole turns to drop, middle first, never the pinned floor.

A pure function of the request model, the ceiling, the pins and the strategy. The floor
is what the current decision is made of: leading system turns, the original ticket, the
newest turn, the latest tool calls with their results, and the caller's pins. The middle
goes first because it is where the model attends least; the oldest turn is the ticket.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from otel_ctx.engine._model import RequestModel, units
from otel_ctx.engine._result import OUTCOME_COMPACTED, OUTCOME_FIT, OUTCOME_OVERFLOW, Outcome

Strategy = Literal["middle", "oldest"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What compaction decided: units (turn ranges), those dropped, the tokens left."""

    units: list[tuple[int, int]]
    #: Units dropped, in the order they were chosen.
    dropped: list[int]
    #: Droppable units not dropped, in drop order (a summary may need more room).
    remaining: list[int]
    #: Raw tokens of the request after the drops.
    total: int
    outcome: Outcome

    def kept_turns(self) -> list[int]:
        gone = set(self.dropped)
        out: list[int] = []
        for u, (s, e) in enumerate(self.units):
            if u not in gone:
                if e - s == 1:
                    out.append(s)
                else:
                    out.extend(range(s, e))
        return out

    def dropped_turns(self) -> list[int]:
        """Turns of the dropped units, in transcript order."""
        out: list[int] = []
        for u in sorted(self.dropped):
            out.extend(range(*self.units[u]))
        return out


def floor(model: RequestModel, spans: list[tuple[int, int]], pinned_turns: Iterable[int]) -> list[bool]:
    """Which units compaction must keep."""
    turns = model.turns
    n_units = len(spans)
    starts = [s for s, _ in spans]

    def unit_of(turn: int) -> int:
        return bisect_right(starts, turn) - 1

    keep = [False] * n_units
    for u, (s, _) in enumerate(spans):  # leading system turns
        if turns[s].role != "system":
            break
        keep[u] = True
    for i, turn in enumerate(turns):  # the original ticket
        if turn.has_user_text:
            keep[unit_of(i)] = True
            break
    if n_units:  # the newest turn
        keep[-1] = True
    for u in range(n_units - 1, -1, -1):  # the latest tool calls with their results
        if turns[spans[u][0]].calls:
            keep[u] = True
            break
    for t in pinned_turns:
        keep[unit_of(t)] = True
    return keep


def drop_order(droppable: list[int], strategy: Strategy) -> list[int]:
    """Middle-first: the unit nearest the middle, then outward, older side first on ties."""
    if strategy == "oldest":
        return list(droppable)
    n = len(droppable)
    half = n // 2
    order = droppable[half : n - half]  # an odd count's middle unit goes first
    pairs = [0] * (2 * half)  # then outward a pair at a time, the older of each pair first
    pairs[0::2] = droppable[half - 1 :: -1] if half else []
    pairs[1::2] = droppable[n - half :]
    return order + pairs


def unit_cost(model: RequestModel, span: tuple[int, int]) -> int:
    s, e = span
    turns = model.turns
    return turns[s].cost if e - s == 1 else sum(turns[i].cost for i in range(s, e))


def compact(model: RequestModel, ceiling: int, pinned_turns: Iterable[int], strategy: Strategy) -> Plan:
    """Drop whole units, in ``strategy`` order, until the raw total is within ``ceiling``."""
    spans = units(model.turns, model.known.units)
    total = model.total
    if total <= ceiling:
        return Plan(spans, [], [], total, OUTCOME_FIT)
    pinned = floor(model, spans, pinned_turns)
    order = drop_order([u for u in range(len(spans)) if not pinned[u]], strategy)
    dropped: list[int] = []
    turns = model.turns
    for u in order:  # the hot loop of a compacting round: no calls for one-turn units
        if total <= ceiling:
            break
        dropped.append(u)
        s, e = spans[u]
        total -= turns[s].cost if e - s == 1 else sum(turns[i].cost for i in range(s, e))
    outcome: Outcome = OUTCOME_COMPACTED if total <= ceiling else OUTCOME_OVERFLOW
    return Plan(spans, dropped, order[len(dropped) :], total, outcome)


def drop_next(model: RequestModel, plan: Plan) -> Plan | None:
    """The plan with one more unit dropped (to make room for a summary), or ``None``."""
    if not plan.remaining:
        return None
    u = plan.remaining[0]
    return Plan(
        plan.units,
        [*plan.dropped, u],
        plan.remaining[1:],
        plan.total - unit_cost(model, plan.units[u]),
        plan.outcome,
    )
