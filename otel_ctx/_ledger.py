"""What one agent run has spent: tokens against its ceiling, cost, and how it ended.

A policy's ``run_ceiling`` caps a whole ticket: tokens spent (prompts and answers) plus the
next request must stay within it. Like an overflow, the check comes after the fit and before
the provider call, so the caller escalates instead of spending past it.

Spent tokens and cost come from the provider's reported usage where recorded; a round without
usage counts its fitted prompt plus the reserved output (so the ceiling errs early). A round
the caller was told not to send counts nothing unless usage is recorded for it after all.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from otel_ctx._pricing import PriceTable, Usage
from otel_ctx.engine._errors import InvalidRequestError, OtelCtxError

# --- how a run ended ---------------------------------------------------------------------

RESOLVED = "resolved"
ESCALATED = "escalated"
ABANDONED = "abandoned"
#: The run ended without the caller saying how (and without a stop or an exception).
UNRESOLVED = "unresolved"
#: The run's block raised before the caller resolved it.
ERROR = "error"
#: Resolutions every run may end with; an application adds its own (a bounded few).
BUILTIN_RESOLUTIONS: tuple[str, ...] = (RESOLVED, ESCALATED, ABANDONED, UNRESOLVED, ERROR)
#: Extra resolutions must look like a label value, and there may only be a few of them.
MAX_EXTRA_RESOLUTIONS = 8
_RESOLUTION_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")

# --- why a run stopped -------------------------------------------------------------------

STOP_NONE: Final = "none"
STOP_OVERFLOW: Final = "overflow"
STOP_CEILING: Final = "ceiling"
STOPS: tuple[str, ...] = (STOP_NONE, STOP_OVERFLOW, STOP_CEILING)
Stop = Literal["none", "overflow", "ceiling"]

SOURCE_USAGE = "usage"
SOURCE_ESTIMATE = "estimate"
SOURCE_NONE = "none"
CostSource = Literal["usage", "estimate", "mixed", "none"]


def check_resolutions(extra: Iterable[str]) -> tuple[str, ...]:
    """Validate an application's own resolutions; returns them in order, without repeats.

    They become a metric label, so they must be few and look like label values; a ticket
    id passed here by mistake would otherwise make a series per ticket.
    """
    out: list[str] = []
    for value in extra:
        if not isinstance(value, str) or not _RESOLUTION_RE.match(value):
            raise InvalidRequestError(
                "resolutions", f"{value!r} is not a resolution name (lowercase letters, digits, _; <= 32)"
            )
        if value not in out and value not in BUILTIN_RESOLUTIONS:
            out.append(value)
    if len(out) > MAX_EXTRA_RESOLUTIONS:
        raise InvalidRequestError(
            "resolutions", f"at most {MAX_EXTRA_RESOLUTIONS} of your own, got {len(out)}: {out}"
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CeilingCheck:
    """The run's running total against its ceiling, just before one request is sent."""

    ceiling: int | None
    spent: int
    next_tokens: int

    @property
    def total(self) -> int:
        """Spent plus the next request: what the run will have used once it is answered."""
        return self.spent + self.next_tokens

    @property
    def crossed(self) -> bool:
        """True when sending the next request would take the run over its ceiling."""
        return self.ceiling is not None and self.total > self.ceiling

    @property
    def remaining(self) -> int | None:
        """Tokens left under the ceiling after the next request (negative: over)."""
        return None if self.ceiling is None else self.ceiling - self.total


class RunCeilingReached(OtelCtxError):
    """The next request would take the run over its ceiling: escalate rather than send."""

    def __init__(self, check: CeilingCheck, task_type: str | None) -> None:
        self.check = check
        self.task_type = task_type
        super().__init__(
            f"run ceiling reached for task type {task_type!r}: {check.spent} tokens spent plus "
            f"{check.next_tokens} for the next request is {check.total}, over the ceiling of {check.ceiling}"
        )


@dataclass(slots=True)
class _Round:
    estimate_tokens: int = 0
    estimate_cost: float | None = None
    usage: Usage | None = None
    usage_cost: float | None = None
    counted: bool = True  # False for a round the caller was told not to send

    @property
    def tokens(self) -> int:
        if self.usage is not None:
            return self.usage.total_tokens
        return self.estimate_tokens if self.counted else 0

    @property
    def cost(self) -> float | None:
        if self.usage is not None:
            return self.usage_cost
        return self.estimate_cost if self.counted else 0.0

    @property
    def source(self) -> str:
        if self.usage is not None:
            return SOURCE_USAGE
        return SOURCE_ESTIMATE if self.counted else SOURCE_NONE


@dataclass(frozen=True, slots=True)
class RoundSpend:
    """One round's tokens and cost as the ledger now counts them, and where they came from."""

    round: int
    tokens: int
    cost: float | None
    source: str


class RunLedger:
    """Tokens, cost, stop and resolution of one run; safe from several threads.

    The totals are kept running: a round adds its own figures and a usage report swaps one
    round's estimate for what the provider said, so the books cost the same at round 3,000
    as at round 10 (an agent that loops for hours must not slow down with every round).
    """

    def __init__(
        self,
        *,
        ceiling: int | None,
        model: str,
        prices: PriceTable | None,
        resolutions: Iterable[str] = (),
    ) -> None:
        if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 1):
            raise InvalidRequestError("run_ceiling", f"must be an integer >= 1, got {ceiling!r}")
        self.ceiling = ceiling
        self.model = model
        self.prices = prices
        self.price = prices.price_for(model) if prices is not None else None
        self.allowed: tuple[str, ...] = (*BUILTIN_RESOLUTIONS, *check_resolutions(resolutions))
        self._rounds: dict[int, _Round] = {}
        # Running totals over self._rounds, moved by every change to one round.
        self._spent = 0
        self._cost = 0.0
        self._sources: dict[str, int] = {SOURCE_USAGE: 0, SOURCE_ESTIMATE: 0}
        self._stop: Stop = STOP_NONE
        self._stop_round: int | None = None
        self._resolution: str | None = None
        self._lock = threading.Lock()

    def _book(self, rnd: _Round, sign: int) -> None:
        """Add (``sign`` 1) or take out (-1) one round's figures from the running totals."""
        self._spent += sign * rnd.tokens
        self._cost += sign * (rnd.cost or 0.0)
        source = rnd.source
        if source != SOURCE_NONE:
            self._sources[source] += sign

    # --- the check before a request ---------------------------------------------------

    def add_round(
        self, number: int, *, prompt_tokens: int, reserved_output: int, overflow: bool = False
    ) -> CeilingCheck:
        """Check round ``number`` against the ceiling and count it unless it must not be sent.

        Returns the check; ``check.crossed`` (or an overflow) means the caller should stop.
        """
        with self._lock:
            check = CeilingCheck(self.ceiling, self._spent, prompt_tokens + reserved_output)
            stopped: Stop | None = STOP_OVERFLOW if overflow else (STOP_CEILING if check.crossed else None)
            rnd = _Round(estimate_tokens=check.next_tokens, counted=stopped is None)
            if self.price is not None:
                rnd.estimate_cost = self.price.cost(
                    Usage(input_tokens=prompt_tokens, output_tokens=reserved_output)
                )
            previous = self._rounds.get(number)
            if previous is not None:
                self._book(previous, -1)
            self._rounds[number] = rnd
            self._book(rnd, 1)
            if stopped is not None and self._stop == STOP_NONE:
                self._stop, self._stop_round = stopped, number
            return check

    def record_usage(self, number: int, usage: Usage) -> RoundSpend:
        """Replace round ``number``'s estimate with what the provider reported."""
        with self._lock:
            rnd = self._rounds.get(number)
            if rnd is None:
                rnd = self._rounds[number] = _Round(counted=False)
            else:
                self._book(rnd, -1)
            rnd.usage = usage
            rnd.usage_cost = self.price.cost(usage) if self.price is not None else None
            self._book(rnd, 1)
            return RoundSpend(number, rnd.tokens, rnd.cost, rnd.source)

    def round_spend(self, number: int) -> RoundSpend | None:
        with self._lock:
            rnd = self._rounds.get(number)
            return None if rnd is None else RoundSpend(number, rnd.tokens, rnd.cost, rnd.source)

    # --- totals -----------------------------------------------------------------------

    @property
    def spent_tokens(self) -> int:
        """Tokens the run has spent so far: prompts and answers, reported or estimated."""
        return self._spent

    @property
    def cost(self) -> float | None:
        """USD spent so far, or None when the model has no price."""
        if self.price is None:
            return None
        # A swapped estimate can leave a rounding crumb below zero; a cost never is.
        return max(self._cost, 0.0)

    @property
    def cost_source(self) -> CostSource:
        """Where the totals come from: all ``usage``, all ``estimate``, ``mixed``, or ``none`` yet."""
        with self._lock:
            usage, estimate = self._sources[SOURCE_USAGE], self._sources[SOURCE_ESTIMATE]
        if usage and estimate:
            return "mixed"
        if usage:
            return "usage"
        return "estimate" if estimate else "none"

    @property
    def stop(self) -> Stop:
        """Why the run stopped: the first overflow or ceiling round, else ``none``."""
        return self._stop

    @property
    def stop_round(self) -> int | None:
        return self._stop_round

    # --- resolution -------------------------------------------------------------------

    def resolve(self, resolution: str) -> None:
        """Say how the run ended (one of :attr:`allowed`); the last call wins."""
        if resolution not in self.allowed:
            raise InvalidRequestError("resolution", f"{resolution!r} is not one of {', '.join(self.allowed)}")
        self._resolution = resolution

    def final_resolution(self, *, raised: bool) -> str:
        """How the run ended: the caller's word; else ``escalated`` after a stop (the caller
        escalates on an overflow or the ceiling), ``error`` if the block raised, else
        ``unresolved``."""
        if self._resolution is not None:
            return self._resolution
        if self._stop != STOP_NONE:
            return ESCALATED
        return ERROR if raised else UNRESOLVED
