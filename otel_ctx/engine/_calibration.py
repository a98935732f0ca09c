"""Calibration: the factor every estimate is scaled by, learned from reported usage.

Held as an integer number of ten-thousandths so that "does it fit" is decided by
integer comparisons: a float factor would make the same request fit on one machine
and not on another by a rounding hair.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

from otel_ctx.engine._errors import InvalidRequestError, shown

SCALE = 10_000
#: The factor is the median of the last ``WINDOW`` ratios (bill ÷ estimate of the estimated
#: parts), moved at most ``MAX_STEP``-fold per bill and capped at ``MAXIMUM``: one bill far off
#: the rest (a server-side feature, a mis-read body) cannot move it far, and a run of them
#: cannot make every later request look full.
WINDOW = 15
MAX_STEP = 1.1
MAXIMUM = 4.0


@dataclass(frozen=True, slots=True, order=True)
class Calibration:
    """A factor >= 1.0 in ten-thousandths: estimates may err high, never low."""

    scaled: int = SCALE

    @classmethod
    def of(cls, factor: float) -> Calibration:
        """The calibration of ``factor``; ``ValueError`` for NaN, infinities and factors < 1."""
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise ValueError(f"calibration must be a number >= 1.0, got {shown(factor)}")
        try:
            value = float(factor)
        except OverflowError:  # an int too large for a float
            value = math.inf
        if not math.isfinite(value) or value < 1.0:
            raise ValueError(f"calibration must be a finite number >= 1.0, got {shown(factor)}")
        return cls(round(value * SCALE))

    @classmethod
    def covering(cls, exact: int, raw: int) -> Calibration:
        """The least factor (>= 1.0) that scales ``raw`` up to at least ``exact``.

        Rounded up to the next ten-thousandth, so the scaled total never comes in under
        ``exact``. ``raw`` must be positive.
        """
        return cls(max(SCALE, -(-exact * SCALE // raw)))

    @property
    def factor(self) -> float:
        return self.scaled / SCALE

    def up(self, raw: int) -> int:
        """``ceil(raw * factor)``: the calibrated estimate of a whole request."""
        return -(-raw * self.scaled // SCALE)

    def down(self, raw: int) -> int:
        """``floor(raw * factor)``: a breakdown line (the remainder line absorbs the rounding)."""
        return raw * self.scaled // SCALE

    def ceiling(self, budget: int) -> int:
        """The most raw tokens whose calibrated estimate still fits ``budget``."""
        return budget * SCALE // self.scaled


UNCALIBRATED = Calibration()


class Learner:
    """Learns the factor from a stream of ratios, robustly (see ``WINDOW`` and ``MAX_STEP``).

    Not thread-safe on its own: the fitter that owns it learns under its lock.
    """

    __slots__ = ("ratios",)

    def __init__(self) -> None:
        self.ratios: deque[float] = deque(maxlen=WINDOW)

    def learn(self, current: Calibration, ratio: float) -> Calibration:
        """The factor after one more bill whose estimated parts were ``ratio`` × their estimate."""
        if not math.isfinite(ratio) or ratio <= 0:
            return current
        self.ratios.append(min(MAXIMUM, max(1.0, ratio)))
        factor = current.factor
        target = min(factor * MAX_STEP, max(factor / MAX_STEP, statistics.median(self.ratios)))
        return Calibration.of(min(MAXIMUM, max(1.0, target)))


def check_reported_tokens(value: object, where: str = "input_tokens") -> int:
    """A provider-reported token count, or a typed error naming ``where``.

    Counts beyond any real context window (10**400 is an int in Python) are rejected
    here rather than surfacing as an ``OverflowError`` deep in float arithmetic.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidRequestError(where, f"must be a positive integer, got {shown(value)}")
    if value > 10**12:
        raise InvalidRequestError(where, "more than 10**12 tokens is not a plausible usage report")
    return value
