"""The request model: what a request is made of, whatever dialect it came in.

A request is an ordered list of turns; a turn is made of parts, each naming its component
(system text, a tool call, a tool result, an image, ...) and, for tool calls and results,
the call id that pairs them. Capping, pinning, compaction and the breakdown work on this
model alone. A turn covers a range of the caller's items (``starts``): dropping it drops
exactly those, and every item the fit did not touch goes back as the caller's own object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Component = Literal[
    "system", "user", "assistant", "tool_call", "tool_result", "reasoning", "image", "document", "other"
]
#: The transcript lines of the breakdown.
Line = Literal["system", "user", "assistant", "tool"]
LINES: tuple[Line, ...] = ("system", "user", "assistant", "tool")

#: The breakdown line of each component; ``None`` means "the line of the turn's role".
COMPONENT_LINE: dict[str, Line | None] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool_call": "assistant",
    "reasoning": "assistant",
    "tool_result": "tool",
    "image": None,
    "document": None,
    "other": None,
}


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a turn and the tokens it costs.

    ``call_id`` pairs a tool call with its result. ``text`` is kept only where the
    fit may rewrite it (a tool result a cap may cut); ``capped`` says it was cut, so
    the adapter writes the new text back into the caller's dialect. Parts are
    immutable: a turn read once is shared by later rounds.
    """

    component: Component
    tokens: int
    call_id: str | None = None
    text: str | None = None
    capped: bool = False
    #: False when ``tokens`` come from an estimate or a bound (a document's pages, an image whose
    #: size the body does not give) rather than a rule that reproduces the provider's count. The
    #: calibration factor scales only such parts, and a request holding one is not ``exact``.
    exact: bool = True


class Turn:
    """A message (or a run of items one speaker sent together) and what it costs.

    ``overhead`` is the dialect's framing (role markers, separators), booked on the
    role's line. ``calls`` are the tool-call ids the turn opens, ``answers`` those it
    answers. A turn does not know where it sits: the model's ``starts`` does, so a
    turn read once can be reused for the same message in the next round.
    """

    __slots__ = ("answers", "calls", "cost", "has_user_text", "inexact", "mixed", "overhead", "parts", "role")

    def __init__(
        self,
        role: Line,
        parts: Sequence[Part],
        overhead: int,
        *,
        calls: tuple[str, ...] = (),
        answers: tuple[str, ...] = (),
        has_user_text: bool = False,
    ) -> None:
        self.role: Line = role
        self.parts: tuple[Part, ...] = tuple(parts)
        self.overhead = overhead
        self.calls = calls
        self.answers = answers
        #: The first turn with user text is the original ticket (pinned).
        self.has_user_text = has_user_text
        cost = overhead
        inexact = 0
        mixed = False
        for p in self.parts:
            cost += p.tokens
            if not p.exact:
                inexact += p.tokens
            line = COMPONENT_LINE[p.component]
            if line is not None and line != role:
                mixed = True
        self.cost = cost
        #: The tokens of parts counted by an estimate (see :attr:`Part.exact`).
        self.inexact = inexact
        #: True when some part is booked on another line than the role's (a tool result in a
        #: user turn); the breakdown then splits the turn part by part.
        self.mixed = mixed

    def lines(self) -> list[tuple[Line, int]]:
        """The turn's tokens split by breakdown line: a tool result in a user turn is a tool line."""
        role = self.role
        out: list[tuple[Line, int]] = [(role, self.overhead)]
        for p in self.parts:
            out.append((COMPONENT_LINE[p.component] or role, p.tokens))
        return out

    def __repr__(self) -> str:
        return f"Turn({self.role!r}, cost={self.cost}, calls={self.calls}, answers={self.answers})"


@dataclass(slots=True)
class Block:
    """Request text outside the turns: the caller's system prompt, snippets, skills."""

    kind: Literal["system_prompt", "skills"]
    text: str
    tokens: int


#: Raw tokens of a run of turns: their costs added up, and the same per line (in ``LINES`` order).
Sums = tuple[int, tuple[int, int, int, int]]
NO_SUMS: Sums = (0, (0, 0, 0, 0))
LINE_INDEX: dict[str, int] = {line: k for k, line in enumerate(LINES)}


@dataclass(frozen=True, slots=True)
class Known:
    """What a reader kept of a transcript from an earlier round, for the fit to go on from: its
    first ``turns`` turns' raw tokens added up (``sums``, see :func:`add_sums`) and the first
    ``units`` those turns split into (the last may go on past them). A long history then costs
    the fit nothing per turn; a reader that keeps nothing gives :data:`NOTHING_KNOWN`."""

    turns: int = 0
    units: Sequence[tuple[int, int]] = ()
    sums: Sums = NO_SUMS


NOTHING_KNOWN = Known()


@dataclass(slots=True)
class RequestModel:
    """A whole request in the engine's terms.

    ``tool_schema`` is the tokens the tool definitions add; ``priming`` the tokens
    the provider adds to open the reply (booked on the assistant line);
    ``system_in_turns`` says the request's system prompt is a turn of the transcript
    (so the breakdown's system-prompt line says "counted in the transcript").
    """

    turns: list[Turn]
    #: ``starts[k]`` is the index of the first caller item of turn ``k``; it runs to the next start.
    starts: Sequence[int]
    items: int
    tool_schema: int = 0
    priming: int = 0
    blocks: tuple[Block, ...] = ()
    system_in_turns: bool = False
    capped: int = 0
    #: What the reader already knew of the transcript's leading turns from an earlier round.
    known: Known = NOTHING_KNOWN
    #: The model's answers in the transcript as read (runs of its messages, calls and reasoning):
    #: the request is the model's turn number ``replies + 1`` of its conversation.
    replies: int = 0
    #: The tokens of ``tool_schema`` counted by an estimate rather than the provider's rule (a tool
    #: type whose rendering is not known; in a dialect whose text is estimated, the definitions).
    schema_inexact: int = 0
    #: What the provider bills that the body does not show, one short reason each ("image by URL",
    #: "server tool web_search"): the count is then a bound, and its bill teaches no calibration.
    unknowns: tuple[str, ...] = ()
    #: The tokenizer the dialect counted the text with when it is not the fitter's encoding (a
    #: family tokenizer of its own); reported in place of the encoding's name.
    encoding: str | None = None

    @property
    def fixed(self) -> int:
        """The tokens outside the turns: the tool schema and the blocks."""
        return self.tool_schema + sum(b.tokens for b in self.blocks)

    def block_tokens(self, kind: str) -> int:
        return sum(b.tokens for b in self.blocks if b.kind == kind)

    @property
    def one_to_one(self) -> bool:
        """True when every turn is exactly one item (Chat Completions): turn k is item k."""
        return self.items == len(self.turns)

    def item_indexes(self, turns: Sequence[int]) -> Sequence[int]:
        """The caller's item indexes of ``turns`` (in order)."""
        if self.one_to_one:
            return turns
        out: list[int] = []
        for k in turns:
            out.extend(self.span(k))
        return out

    def span(self, turn: int) -> range:
        """The caller's items turn ``turn`` stands for."""
        starts = self.starts
        end = starts[turn + 1] if turn + 1 < len(starts) else self.items
        return range(starts[turn], end)

    @property
    def total(self) -> int:
        """Raw (uncalibrated) tokens of the request as read."""
        known = self.known
        return known.sums[0] + sum(t.cost for t in self.turns[known.turns :]) + self.priming + self.fixed


def add_sums(acc: Sums, turn: Turn) -> Sums:
    """``acc`` with ``turn`` added."""
    cost, lines = acc
    out = list(lines)
    if turn.mixed:
        for line, tokens in turn.lines():
            out[LINE_INDEX[line]] += tokens
    else:
        out[LINE_INDEX[turn.role]] += turn.cost
    return cost + turn.cost, (out[0], out[1], out[2], out[3])


def units(turns: Sequence[Turn], known: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Split the turns into units that are dropped whole: ``[start, end)`` turn ranges.

    ``known`` are the first units of ``turns``, split before (each one closed by what follows
    it in ``turns``, so it is the same unit here); the split goes on after the last of them.

    A turn that opens tool calls forms one unit with the turns after it that answer
    them (dropping one without the other would orphan a result or leave a call
    unanswered); every other turn is a unit of its own.
    """
    out: list[tuple[int, int]] = list(known)
    split_units(turns, out)
    return out


def split_units(turns: Sequence[Turn], out: list[tuple[int, int]]) -> None:
    """:func:`units`, in place: ``out`` holds the first units of ``turns`` and gets the rest."""
    n = len(turns)
    i = out[-1][1] if out else 0
    while i < n:
        j = i + 1
        calls = turns[i].calls
        if calls:
            open_ids = set(calls)
            while j < n and open_ids:
                t = turns[j]
                if not t.answers or open_ids.isdisjoint(t.answers):
                    break
                open_ids.difference_update(t.answers)
                open_ids.update(t.calls)
                j += 1
        out.append((i, j))
        i = j
