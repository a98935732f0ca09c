"""The fleet's bill where it grows with time and models: a 3,000-round run, and 64 models' caches.

* **A long run.** One run of 3,000 rounds, each a real ``run.fit`` of the same short request
  (a warm fit) plus the provider's usage: the time of rounds 1-20 against rounds 2,981-3,000
  of the same run. The books keep running totals, so the ratio should be about 1 (goal ≤ 1.2).
* **64 models.** 64 fitters (one per model name), each counting its own 400 kB of messages,
  under a process cache budget of 16 MiB: the bytes the caches are charged and the RSS growth
  against the budget, and that the most recently used model stays warm.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from bench.memory_bench import _rss_bytes
from bench.report import Figure
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.engine.cache import cache_budget, set_cache_budget
from otel_ctx.telemetry import Emitter, run, views

SECTION = "A long run and many models"
LONG_RUN_ROUNDS = 3_000
WINDOW = 20
LONG_RUN_TARGET = 1.2
MODELS = 64
BUDGET_BYTES = 16 * 1024 * 1024


@dataclass
class FleetBenchResult:
    figures: list[Figure]
    notes: list[str]


def _long_run(rounds: int) -> tuple[float, float]:
    """Median seconds per round over the first and the last WINDOW rounds of one run."""
    emitter = Emitter(
        tracer_provider=TracerProvider(),
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()], views=views()),
    )
    fitter = ContextFitter(BudgetPolicy(context_length=128_000, reserved_output=1_000), model="gpt-4o")
    messages = [
        {"role": "user", "content": "Where is my parcel? It was due yesterday."},
        {"role": "assistant", "content": "Let me check with the carrier."},
    ]
    times: list[float] = []
    with run(fitter, task_type=None, emitter=emitter, run_ceiling=10**12) as r:
        for _ in range(rounds):
            t0 = time.perf_counter()
            r.fit(messages)
            r.record_usage(input_tokens=40, output_tokens=10)
            times.append(time.perf_counter() - t0)
    return statistics.median(times[:WINDOW]), statistics.median(times[-WINDOW:])


def _models(models: int, size: int) -> tuple[int, int, bool]:
    """(bytes charged, RSS growth, last model warm) after ``models`` fitters each count ``size`` chars."""
    budget = cache_budget()
    before_bound = budget.max_bytes
    set_cache_budget(BUDGET_BYTES)
    policy = BudgetPolicy(context_length=1_000_000, reserved_output=1_000)
    ContextFitter(policy, model="gpt-4o").count([{"role": "user", "content": "warm the encoding"}])
    gc.collect()
    rss0 = _rss_bytes()
    fitters = []
    try:
        for i in range(models):
            fitter = ContextFitter(policy, model=f"gpt-4o-tenant-{i}")
            fitter.count(_conversation(i, size))
            fitters.append(fitter)
        gc.collect()
        grown = _rss_bytes() - rss0
        charged = budget.bytes
        last = fitters[-1]
        misses = last.counter.cache.misses
        last.count(_conversation(models - 1, size))
        warm = last.counter.cache.misses == misses
    finally:
        fitters.clear()
        gc.collect()
        budget.max_bytes = before_bound
    return charged, grown, warm


def _conversation(model: int, size: int, parts: int = 20) -> list[dict[str, str]]:
    chunk = size // parts
    line = "the parcel left the depot at dawn and reached the hub by noon. "
    return [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "content": (f"model {model} message {k}: " + line * (chunk // len(line) + 1))[:chunk],
        }
        for k in range(parts)
    ]


def run_bench(*, quick: bool = False) -> FleetBenchResult:
    rounds = 400 if quick else LONG_RUN_ROUNDS
    early, late = _long_run(rounds)
    ratio = late / early
    size = 100_000 if quick else 400_000
    charged, grown, warm = _models(MODELS, size)
    mib = 1024 * 1024
    figures = [
        Figure(
            SECTION,
            f"round {rounds:,} ÷ round 10 of one run (fit + usage, warm)",
            f"{ratio:.2f}×",
            f"≤ {LONG_RUN_TARGET}×",
            ratio <= LONG_RUN_TARGET,
            f"median of rounds 1-{WINDOW} {early * 1e6:.0f} µs, of the last {WINDOW} {late * 1e6:.0f} µs",
        ),
        Figure(
            SECTION,
            f"{MODELS} models' caches ÷ the process budget",
            f"{charged / BUDGET_BYTES:.2f}×",
            "≤ 1×",
            charged <= BUDGET_BYTES and warm,
            f"{MODELS} fitters × {size // 1000} kB of messages under a {BUDGET_BYTES // mib} MiB budget: "
            f"{charged / mib:.1f} MiB charged, RSS +{grown / mib:.0f} MiB; the last model "
            f"{'stays warm' if warm else 'was evicted'}",
        ),
    ]
    notes = [
        "The long run's rounds are sequential (a run cannot be interleaved with itself): on a loaded "
        "machine the ratio moves with the load between its first and last seconds.",
    ]
    return FleetBenchResult(figures, notes)
