"""The support-desk workload: tickets as the agent sees them, round by round.

A ticket is its opening (on disputes also the pinned constraints and state) and a sequence
of rounds, each appending what came back since the last request: tool calls with their
results, or a reply and the buyer's follow-up. Status questions are about 55% of the queue,
then returns, then disputes; some disputes pin a floor (a pasted email thread, constraints,
a growing state) no compaction can bring under 16,000 tokens.

Everything is drawn from ``random.Random(f"{seed}:{index}")``: ticket *n* is the same
whatever the ticket count, so ``--tickets 10`` is a prefix of ``--tickets 1000``.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import otel_ctx.demo._payloads as payloads
from otel_ctx.demo._content import (
    CONSTRAINT_LINES,
    DISPUTE_OPENINGS,
    FOLLOW_UPS,
    REPLIES,
    RETURN_OPENINGS,
    SOURCES_BY_TASK,
    STATUS_OPENINGS,
    THREAD_LINES,
)
from otel_ctx.engine._sources import Source

Message = dict[str, Any]

#: Triage mix of the queue: order status is the bulk (55%), disputes the rarest.
TASK_MIX: tuple[tuple[str, float], ...] = (("status", 0.55), ("returns", 0.30), ("dispute", 0.15))
#: Share of disputes whose pinned floor overflows the 16,000 budget (pasted thread, growing state).
ESCALATING_DISPUTE_SHARE = 0.25
#: Transcript indexes the agent pins on disputes: hard constraints and structured state.
DISPUTE_PINNED: tuple[int, ...] = (1, 2)


@dataclass(frozen=True, slots=True)
class Round:
    """What is appended before one request; ``state`` replaces the pinned state message."""

    appended: tuple[Message, ...]
    state: Message | None = None


@dataclass(frozen=True, slots=True)
class Ticket:
    ticket_id: str
    task_type: str
    #: A finer label than the task type ("damage-claim", "escalating-dispute", ...).
    kind: str
    opening: tuple[Message, ...]
    rounds: tuple[Round, ...]
    snippets: tuple[Source, ...] = ()
    skills: tuple[Source, ...] = ()
    pinned: tuple[int, ...] = ()
    output_tokens: tuple[int, ...] = field(default=())

    def transcripts(self) -> Iterator[list[Message]]:
        """The transcript before each request (fresh lists; the message dicts are shared)."""
        opening = list(self.opening)
        history: list[Message] = []
        for rnd in self.rounds:
            if rnd.state is not None:
                opening[-1] = rnd.state
            history.extend(rnd.appended)
            yield [*opening, *history]


def _call_id(rng: random.Random) -> str:
    return "call_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24))


def _tool_turn(rng: random.Random, calls: list[tuple[str, dict[str, Any], str]]) -> tuple[Message, ...]:
    """An assistant message with parallel tool calls, then one result per call, in order."""
    ids = [_call_id(rng) for _ in calls]
    assistant: Message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))},
            }
            for cid, (name, args, _) in zip(ids, calls)
        ],
    }
    results = tuple(
        {"role": "tool", "tool_call_id": cid, "content": out} for cid, (_, _, out) in zip(ids, calls)
    )
    return (assistant, *results)


def _call(rng: random.Random, name: str, args: dict[str, Any], result: str) -> Round:
    """A round of one tool call and its result (``result`` is drawn before the call's id)."""
    return Round(_tool_turn(rng, [(name, args, result)]))


def _exchange(rng: random.Random) -> tuple[Message, ...]:
    """The agent answers and the buyer follows up."""
    return (
        {"role": "assistant", "content": rng.choice(REPLIES)},
        {"role": "user", "content": rng.choice(FOLLOW_UPS)},
    )


def _fill(rng: random.Random, template: str, oid: str) -> str:
    return template.format(
        oid=oid,
        item=rng.choice(payloads._PRODUCTS)[0].lower(),
        day=rng.choice(["Monday", "Tuesday", "last Thursday", "the 24th"]),
        amount=f"{rng.uniform(120, 480):.2f}",
    )


def _email_thread(rng: random.Random, lines: int) -> str:
    """A pasted buyer–seller email thread: the long pinned original ticket of some disputes."""
    parts = []
    for n in range(lines):
        who = "Seller (Nordhaus Living)" if n % 2 else "Me"
        day = 3 + n // 3
        body = " ".join(rng.sample(THREAD_LINES, k=rng.randint(3, 6)))
        parts.append(f"-----Original Message-----\nFrom: {who}\nDate: 2026-02-{day:02d}\n\n{body}\n")
    return "\n".join(parts)


def _state(ticket_id: str, oid: str, task_type: str, actions: list[str], facts: list[str]) -> Message:
    state = {
        "ticket_id": ticket_id,
        "task_type": task_type,
        "order_id": oid,
        "facts": facts,
        "actions_taken": actions,
        "open_questions": ["carrier claim outcome", "seller response deadline"],
    }
    return {"role": "system", "content": "Structured state (pinned):\n" + json.dumps(state, indent=1)}


def _weighted(rng: random.Random, choices: tuple[tuple[str, float], ...]) -> str:
    x = rng.random()
    acc = 0.0
    for name, weight in choices:
        acc += weight
        if x < acc:
            return name
    return choices[-1][0]


def make_ticket(seed: int, index: int) -> Ticket:
    """Ticket number ``index`` (from 1) of the workload with this seed."""
    rng = random.Random(f"{seed}:{index}")
    task_type = _weighted(rng, TASK_MIX)
    ticket_id = f"T{index:05d}"
    oid = payloads.order_id(rng)
    tracking = payloads.tracking_number(rng)
    customer = f"C-{rng.randint(100000, 999999)}"
    if task_type == "status":
        return _status_ticket(rng, ticket_id, oid, tracking, customer)
    if task_type == "returns":
        return _returns_ticket(rng, ticket_id, oid, tracking, customer)
    return _dispute_ticket(rng, ticket_id, oid, tracking, customer)


def _finish(
    rng: random.Random,
    ticket_id: str,
    task_type: str,
    kind: str,
    opening: tuple[Message, ...],
    rounds: list[Round],
    pinned: tuple[int, ...] = (),
) -> Ticket:
    snippets, skills = SOURCES_BY_TASK[task_type]
    return Ticket(
        ticket_id=ticket_id,
        task_type=task_type,
        kind=kind,
        opening=opening,
        rounds=tuple(rounds),
        snippets=snippets,
        skills=skills,
        pinned=pinned,
        output_tokens=tuple(rng.randint(60, 420) for _ in rounds),
    )


def _status_ticket(rng: random.Random, ticket_id: str, oid: str, tracking: str, customer: str) -> Ticket:
    opening: tuple[Message, ...] = (
        {"role": "user", "content": _fill(rng, rng.choice(STATUS_OPENINGS), oid)},
    )
    n_rounds = int(_weighted(rng, (("1", 0.15), ("2", 0.25), ("3", 0.35), ("4", 0.25))))
    carrier = rng.choice(payloads._CARRIERS)
    order = payloads.get_order(rng, oid, items=rng.randint(1, 3), customer_id=customer, tracking=tracking)
    later = [_call(rng, "get_order", {"order_id": oid}, order)]
    scans = payloads.track_parcel(rng, tracking, scans=rng.randint(6, 43), delivered=False)
    later.append(_call(rng, "track_parcel", {"tracking_number": tracking, "carrier": carrier}, scans))
    later.append(Round(_exchange(rng)))
    rounds = [Round(()), *later[: n_rounds - 1]]
    return _finish(rng, ticket_id, "status", "order-status", opening, rounds)


def _returns_ticket(rng: random.Random, ticket_id: str, oid: str, tracking: str, customer: str) -> Ticket:
    template = rng.choice(RETURN_OPENINGS)
    late = "late" in template
    opening: tuple[Message, ...] = ({"role": "user", "content": _fill(rng, template, oid)},)
    items = rng.randint(1, 6)
    reason = "late" if late else rng.choice(["changed_mind", "not_as_described", "wrong_item"])
    order = payloads.get_order(rng, oid, items=items, customer_id=customer, tracking=tracking)
    plan = [_call(rng, "get_order", {"order_id": oid}, order)]
    if late:
        scans = payloads.track_parcel(rng, tracking, scans=rng.randint(25, 45), delivered=True)
        plan.append(_call(rng, "track_parcel", {"tracking_number": tracking, "carrier": "dhl"}, scans))
    lines = rng.sample(range(1, items + 1), k=min(items, rng.randint(1, 2)))
    line_ids = [f"{oid}-L{line:02d}" for line in lines]
    checks = [
        (
            "check_return_eligibility",
            {"order_id": oid, "line_id": line_id, "reason": reason},
            payloads.check_return_eligibility(rng, oid, line, reason),
        )
        for line, line_id in zip(lines, line_ids)
    ]
    plan.append(Round(_tool_turn(rng, checks)))
    plan.append(Round(_exchange(rng)))
    label = payloads.create_return_label(rng, oid)
    plan.append(_call(rng, "create_return_label", {"order_id": oid, "line_ids": line_ids}, label))
    plan.append(Round(_exchange(rng)))
    amount = round(rng.uniform(15, 140), 2)
    refund = payloads.issue_refund(rng, oid, amount)
    refund_args = {"order_id": oid, "amount": amount, "reason_code": "return_received"}
    plan.append(_call(rng, "issue_refund", refund_args, refund))
    plan.append(Round(_exchange(rng)))
    n_rounds = rng.randint(3, min(8, len(plan) + 1))
    rounds = [Round(()), *plan[: n_rounds - 1]]
    return _finish(rng, ticket_id, "returns", "late-delivery" if late else "return", opening, rounds)


def _dispute_ticket(rng: random.Random, ticket_id: str, oid: str, tracking: str, customer: str) -> Ticket:
    escalating = rng.random() < ESCALATING_DISPUTE_SHARE
    text = _fill(rng, rng.choice(DISPUTE_OPENINGS), oid)
    if escalating:
        # The buyer pastes the whole email thread with the seller into the ticket.
        text += "\n\nHere is everything the seller and I wrote so far:\n\n" + _email_thread(rng, 100)
    constraints = rng.sample(CONSTRAINT_LINES, k=len(CONSTRAINT_LINES) if escalating else 3)
    facts = ["buyer reports damage on arrival", "carrier scan shows signature on delivery"]
    actions: list[str] = []
    opening: tuple[Message, ...] = (
        {"role": "user", "content": text},
        {"role": "system", "content": "Hard constraints for this ticket:\n- " + "\n- ".join(constraints)},
        _state(ticket_id, oid, "dispute", actions, facts),
    )
    carrier = rng.choice(payloads._CARRIERS)
    items = rng.randint(6, 11) if escalating else rng.randint(2, 11)
    steps = _dispute_steps(rng, oid, tracking, customer, carrier, items)
    if escalating:
        # The pasted thread sends the agent back to the sources early: the re-check comes fourth,
        # and its floor overflows the budget before the ticket reaches its 60,000-token ceiling
        # (the long damage claims are the ones the ceiling stops).
        steps.insert(3, steps.pop(8))
    n_rounds = 12 if escalating else rng.randint(6, 12)
    rounds = [Round(())]
    for appended, action in steps[: n_rounds - 1]:
        actions = [*actions, action]
        facts = [*facts, f"round {len(actions) + 1}: {action}"]
        rounds.append(Round(appended, state=_state(ticket_id, oid, "dispute", actions, facts)))
    kind = "escalating-dispute" if escalating else "damage-claim"
    return _finish(rng, ticket_id, "dispute", kind, opening, rounds, pinned=DISPUTE_PINNED)


def _dispute_steps(
    rng: random.Random, oid: str, tracking: str, customer: str, carrier: str, items: int
) -> list[tuple[tuple[Message, ...], str]]:
    """What a dispute's agent does round by round, and the action its state records for it."""
    calls: dict[str, Callable[[], tuple[str, dict[str, Any], str]]] = {
        "order": lambda: (
            "get_order",
            {"order_id": oid},
            payloads.get_order(rng, oid, items=items, customer_id=customer, tracking=tracking),
        ),
        "parcel": lambda: (
            "track_parcel",
            {"tracking_number": tracking, "carrier": carrier},
            payloads.track_parcel(rng, tracking, scans=rng.randint(30, 45), delivered=True),
        ),
        "seller": lambda: (
            "get_seller_messages",
            {"order_id": oid},
            payloads.get_seller_messages(rng, oid, messages=12),
        ),
        "customer": lambda: ("get_customer", {"customer_id": customer}, payloads.get_customer(rng, customer)),
        "eligibility": lambda: (
            "check_return_eligibility",
            {"order_id": oid, "line_id": f"{oid}-L01", "reason": "damaged"},
            payloads.check_return_eligibility(rng, oid, 1, "damaged"),
        ),
        "escalate": lambda: (
            "escalate_to_human",
            {"summary": "see state", "priority": "high"},
            payloads.escalate_to_human(rng),
        ),
    }
    # Each step: the tool calls of one parallel turn, or none for an exchange with the buyer.
    plan: tuple[tuple[tuple[str, ...], str], ...] = (
        (("order",), "looked up the order"),
        (("parcel",), "pulled the carrier scan history"),
        (("seller",), "read the buyer-seller thread"),
        ((), "asked the buyer for photos"),
        (("customer",), "checked the buyer's refund history"),
        ((), "told the buyer the seller has 48 hours"),
        (("eligibility",), "confirmed the damaged line is returnable"),
        ((), "explained the carrier claim"),
        # The re-check: order, scans and thread again, in one parallel turn. On an escalating
        # dispute this newest turn, pinned with everything else, is what overflows the floor.
        (("order", "parcel", "seller"), "re-checked order, scans and thread"),
        ((), "summarised both sides for the buyer"),
        (("escalate",), "escalated to tier 2"),
    )
    return [
        (_tool_turn(rng, [calls[c]() for c in step]) if step else _exchange(rng), action)
        for step, action in plan
    ]


def tickets(seed: int, count: int | None = None, *, start: int = 1) -> Iterator[Ticket]:
    """Tickets ``start``, ``start + 1``, ... (forever when ``count`` is None)."""
    index = start
    while count is None or index < start + count:
        yield make_ticket(seed, index)
        index += 1
