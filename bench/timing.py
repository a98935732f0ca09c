"""Interleaved trials and medians: the only timing primitive the benchmarks use.

Each case is a ``prepare()`` that does the untimed setup of one trial (a fresh fitter,
the next new messages) and returns the thunk to time. Trials rotate through the cases
so that a burst of noise on a shared machine lands on all of them alike. The garbage
collector is off while timing (as in ``timeit``); it runs every few trials, outside the
clock (collecting before every sample would cost more than the samples).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Thunk = Callable[[], object]
#: Trials between garbage collections (outside the clock).
COLLECT_EVERY = 10
Prepare = Callable[[], Thunk]


@dataclass(frozen=True)
class Timing:
    name: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median: how noisy this case was."""
        if len(self.samples) < 4:
            return 0.0
        q = statistics.quantiles(self.samples, n=4)
        return (q[2] - q[0]) / self.median if self.median else 0.0


def interleaved(
    cases: Mapping[str, Prepare],
    *,
    trials: int,
    repeat: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Timing]:
    """Median seconds per call of each case; ``repeat`` calls per timed sample (each prepared).

    ``clock`` is wall time by default; ``time.thread_time`` counts only this thread's CPU, for a
    case that waits on another process (a server) whose own noise is not what is measured.
    """
    names = list(cases)
    samples: dict[str, list[float]] = {n: [] for n in names}
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for trial in range(trials):
            if trial % COLLECT_EVERY == COLLECT_EVERY - 1:
                gc.collect()
            # Rotate the order so no case always runs first (cold caches) or last.
            shift = trial % len(names)
            for name in names[shift:] + names[:shift]:
                thunks = [cases[name]() for _ in range(repeat)]
                start = clock()
                for thunk in thunks:
                    thunk()
                samples[name].append((clock() - start) / repeat)
    finally:
        if was_enabled:
            gc.enable()
    return {n: Timing(n, tuple(s)) for n, s in samples.items()}


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} µs"
