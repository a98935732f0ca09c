"""The fleet's bill where it grows with time and models: a 3,000-round run, and 64 models' caches.

* **A long run.** One run of 3,000 rounds, each a real ``run.fit`` of the same short request
  (a warm fit) plus the provider's usage: the time of rounds 1-20 against rounds 2,981-3,000
  of the same run. The books keep running totals, so the ratio should be about 1 (goal ≤ 1.2).
* **Tool-calling transcripts.** A warm round of a transcript of 30, 100 and 300 messages of
  tool calls and results (the history read before, a new call and its result appended)
  against the raw encode of the two new messages' JSON: goal ≤ 1.5× that + 100 µs.
* **64 models.** 64 fitters (one per model name), each counting its own 400 kB of messages,
  under a process cache budget of 16 MiB: the bytes the caches are charged and the RSS growth
  against the budget, and that the most recently used model stays warm.
"""

from __future__ import annotations

import gc
import itertools
import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from bench.memory_bench import _rss_bytes
from bench.report import Figure
from bench.timing import Thunk, fmt_seconds, interleaved
from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.engine._cache import cache_budget, set_cache_budget
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


TRANSCRIPT_SIZES = (30, 100, 300)
#: Goal: the warm round costs at most this times the raw encode of its new messages, plus the fixed part.
WARM_FACTOR = 1.5
WARM_FIXED_S = 100e-6


def _tool_pair(k: int) -> list[dict[str, Any]]:
    cid = f"call_{k}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": json.dumps({"order": f"SO-{k}"})},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": cid,
            "content": f"Order SO-{k}: shipped with DHL, tracking {k * 7919}, due on day {k % 28 + 1}.",
        },
    ]


def tool_history(size: int) -> list[dict[str, Any]]:
    """An agent's transcript of ``size`` messages: a question, then tool calls and their results.

    Call ids are ``call_0`` … below ``size``, so pairs made with ``_tool_pair(k)`` for ``k >= size``
    are new calls.
    """
    history: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    if size % 2 == 0:  # whole call-and-result pairs only: pad with one plain reply
        history.append({"role": "assistant", "content": "Let me look them up."})
    k = 0
    while len(history) < size:
        history += _tool_pair(k)
        k += 1
    return history


def tool_pairs(start: int) -> Iterator[list[dict[str, Any]]]:
    """New call-and-result pairs, with call ids from ``start`` on."""
    return (_tool_pair(k) for k in itertools.count(start))


def _warm_round(size: int, trials: int, fresh: Iterator[int]) -> tuple[float, float]:
    """Median seconds of a warm round of ``size`` tool-call messages, and of the raw encode of its new two."""
    fitter = ContextFitter(BudgetPolicy(context_length=1_000_000, reserved_output=1_000), model="gpt-4o")
    encode = fitter.counter.encoding.encode_ordinary
    history = tool_history(size - 2)
    fitter.fit([*history, *_tool_pair(len(history))])

    def warm() -> Thunk:
        messages = [*history, *_tool_pair(next(fresh))]
        return lambda: fitter.fit(messages)

    def raw() -> Thunk:
        new = _tool_pair(next(fresh))
        return lambda: [encode(json.dumps(m)) for m in new]

    t = interleaved({"warm": warm, "raw": raw}, trials=trials)
    return t["warm"].median, t["raw"].median


def _tool_transcripts(trials: int) -> list[Figure]:
    figures = []
    fresh = itertools.count(1_000_000)
    for size in TRANSCRIPT_SIZES:
        w, r = _warm_round(size, trials, fresh)
        goal = WARM_FACTOR * r + WARM_FIXED_S
        figures.append(
            Figure(
                SECTION,
                f"warm round, {size} messages of tool calls ÷ goal",
                f"{w / goal:.2f}×",
                "≤ 1×",
                w <= goal,
                f"warm fit {fmt_seconds(w)}; raw encode of the 2 new messages {fmt_seconds(r)}; goal "
                f"{WARM_FACTOR}× that + {WARM_FIXED_S * 1e6:.0f} µs = {fmt_seconds(goal)}",
            )
        )
    return figures


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
    transcripts = _tool_transcripts(trials=30 if quick else 200)
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
    figures += transcripts
    notes = [
        "The long run's rounds are sequential (a run cannot be interleaved with itself): on a loaded "
        "machine the ratio moves with the load between its first and last seconds.",
    ]
    return FleetBenchResult(figures, notes)
