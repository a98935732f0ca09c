"""Every label set one agent process can produce: the demo's task types x three models x every round,
outcome, resolution and stop.

The series a process puts into Prometheus is the product of the label values its
metrics see. This module drives an :class:`~otel_ctx.telemetry.Emitter` through all of
them at once (every task type of the support desk, a fit, a compaction and a floor
overflow of each, three models, every round label up to the ``N+`` one; a finished run of
every task type, model, resolution and stop), so the count is the worst case, not what one
short demo happened to reach. The bench counts the result
as Prometheus would store it; the fleet test serves it from a hundred scrape targets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_ctx import ContextFitter, FitResult, names
from otel_ctx._ledger import BUILTIN_RESOLUTIONS, ERROR, UNRESOLVED
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.telemetry import Emitter, run

MODELS: tuple[str, ...] = ("gpt-4o", "gpt-4o-mini", "gpt-4.1")

#: A floor no support-desk budget holds: the system prompt alone is about 40,000 tokens.
_HUGE_PROMPT = "Follow the refund policy to the letter. " * 5_000


@dataclass(frozen=True)
class Outcomes:
    """One real fit result of each outcome, per task type."""

    by_task: Mapping[str, Mapping[str, FitResult]]


def outcomes(fitter: ContextFitter | None = None) -> Outcomes:
    """A fit, a compaction and an overflow for every task type of the support desk."""
    fitter = fitter or ContextFitter(SUPPORT_DESK, model=MODELS[0])
    long_history: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"[{i}] " + "the parcel scan says " * 300}
        for i in range(60)
    ]
    by_task: dict[str, dict[str, FitResult]] = {}
    for task in SUPPORT_DESK:
        results = {
            "fit": fitter.fit([{"role": "user", "content": "Where is my parcel?"}], task_type=task),
            "compacted": fitter.fit(long_history, task_type=task),
            "overflow": fitter.fit(
                [{"role": "user", "content": "Where is my parcel?"}],
                system_prompt=_HUGE_PROMPT,
                task_type=task,
            ),
        }
        for outcome, result in results.items():
            if result.outcome != outcome:
                raise RuntimeError(f"{task}: wanted a {outcome} result, the fitter gave {result.outcome}")
        by_task[task] = results
    return Outcomes(by_task)


def round_numbers(emitter: Emitter) -> range:
    """Every round label the emitter's label policy has, the ``N+`` one included."""
    return range(1, emitter.labels.max_round + 2)


def record_full_spread(emitter: Emitter, results: Outcomes, models: Iterable[str] = MODELS) -> int:
    """Record every task type x outcome x model x round label once; returns the rounds recorded."""
    known = tuple(results.by_task)
    rounds = 0
    for model in models:
        for by_outcome in results.by_task.values():
            for result in by_outcome.values():
                for number in round_numbers(emitter):
                    emitter.record_metrics(result, number, model, known)
                    rounds += 1
            # A run that records usage adds the estimate-accuracy histogram.
            emitter.record_accuracy(
                1.0, task_type=by_outcome["fit"].task_type, model=model, known_task_types=known
            )
    return rounds


def record_run_spread(emitter: Emitter, results: Outcomes, models: Iterable[str] = MODELS) -> int:
    """Finish a real run for every task type x model x built-in resolution x stop; returns the runs.

    Each run has a ceiling (so the ceiling-utilization histogram sees it) and records usage
    (so the cost is the reported one); a run stops at an overflow by emitting the task type's
    overflow result, at its ceiling by a ceiling below its first round.
    """
    fitter = ContextFitter(SUPPORT_DESK, model=MODELS[0])
    runs = 0
    for model in models:
        for task, by_outcome in results.by_task.items():
            for stop in names.STOPS:
                for resolution in BUILTIN_RESOLUTIONS:
                    ceiling = 1 if stop == names.STOP_CEILING else 10**9
                    result = by_outcome["overflow" if stop == names.STOP_OVERFLOW else "fit"]
                    try:
                        with run(
                            fitter, task_type=task, model=model, emitter=emitter, run_ceiling=ceiling
                        ) as r:
                            r.emit(result, mode=names.MODE_FIT)
                            r.record_usage(input_tokens=max(1, result.breakdown.estimated), output_tokens=100)
                            if resolution == ERROR:
                                raise _RunFailed
                            if resolution != UNRESOLVED:
                                r.resolve(resolution)
                    except _RunFailed:
                        pass
                    runs += 1
    return runs


class _RunFailed(Exception):
    """Raised inside a run's block so that it ends with the ``error`` resolution."""


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s")


def exposition_series(body: str, prefix: str = "context_budget_") -> dict[str, int]:
    """Series per metric family in a Prometheus text exposition (one per sample line)."""
    counts: dict[str, int] = {}
    for line in body.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1).startswith(prefix):
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def otlp_series(metrics_data: Any) -> dict[str, int]:
    """Series per Prometheus family that OTLP metrics become through the Collector's Prometheus exporter.

    A histogram point is one series per bucket (its bounds plus ``+Inf``) plus ``_sum`` and
    ``_count``; a sum or gauge point is one series.
    """
    counts: dict[str, int] = {}
    by_name = {m.name: m for m in names.METRICS}
    for rm in metrics_data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                registered = by_name.get(metric.name)
                family = registered.prometheus if registered else metric.name
                for point in metric.data.data_points:
                    bounds = getattr(point, "explicit_bounds", None)
                    per_point = len(bounds) + 3 if bounds is not None else 1
                    counts[family] = counts.get(family, 0) + per_point
    return counts
