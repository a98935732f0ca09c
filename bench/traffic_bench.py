"""How close the count comes to real bills, uncalibrated and with the calibration learning live.

The truth set is request bodies public projects really sent to OpenAI and Anthropic, with the
usage they were billed; it lies beside the clone (``../shared/data/real-traffic/``) and is read in
place. Every body is measured in file order by one fitter per model, as the instrumentor keeps
them, and each bill is fed back (``observe_usage``) before the next body is measured: the
calibrated figure is what a deployment reads after the first bills of a model. Anthropic
publishes no offline tokenizer, so its counts are estimates the calibration corrects.
"""

from __future__ import annotations

import logging
import statistics
from pathlib import Path

from bench.report import Figure
from otel_ctx import BudgetPolicy, ContextFitter
from tests.real_traffic import DATA, FILES, PROVIDER, billed, read

SECTION = "The count against real bills (recorded request bodies and their usage)"
#: Anthropic's calibrated estimates: within ±15% of the bill on at least this share of calls.
ANTHROPIC_TARGET = 0.85


def run(path: Path = DATA / FILES[0]) -> tuple[list[Figure], list[str]]:
    if not path.is_file():
        return [], [f"No real-traffic data at {path}: the count against real bills was not measured."]
    rows = read(path)
    policy = BudgetPolicy(context_length=10**9, reserved_output=0)
    fitters: dict[str, ContextFitter] = {}
    errors: dict[str, dict[str, list[float]]] = {}
    quiet = logging.getLogger("otel_ctx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a model no table knows is announced once; not the point here
    try:
        for row in rows:
            provider = PROVIDER[row["api"]]
            truth = billed(row)
            if truth <= 0:  # a fixture's made-up usage: nothing to compare with
                continue
            fresh = ContextFitter(policy, model=row["model"]).measure_request(
                row["request"], provider=provider
            )
            live = fitters.setdefault(row["model"], ContextFitter(policy, model=row["model"]))
            result = live.measure_request(row["request"], provider=provider)
            live.observe_usage(result, truth)
            by = errors.setdefault(provider, {"fresh": [], "live": []})
            by["fresh"].append(fresh.breakdown.estimated / truth - 1)
            by["live"].append(result.breakdown.estimated / truth - 1)
    finally:
        quiet.setLevel(level)
    figures = []
    for provider, by in errors.items():
        for kind, label in (("fresh", "uncalibrated"), ("live", "calibration live")):
            errs = by[kind]
            share = sum(abs(e) <= 0.15 for e in errs) / len(errs)
            median = statistics.median(abs(e) for e in errs)
            target = provider == "anthropic" and kind == "live"
            figures.append(
                Figure(
                    SECTION,
                    f"{provider}, {label}: calls within ±15% of the bill",
                    f"{share:.1%}",
                    f"≥ {ANTHROPIC_TARGET:.0%}" if target else "(context)",
                    share >= ANTHROPIC_TARGET if target else None,
                    f"{len(errs)} calls; median error {median:.1%}",
                )
            )
    return figures, [f"Real-traffic truth set: {len(rows)} bodies read in place from {path.name}."]
