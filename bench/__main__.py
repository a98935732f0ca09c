"""``python -m bench`` (``make bench``): run every benchmark, print the table, write BENCHMARKS.md."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from bench import (
    family_bench,
    fit_bench,
    fleet_bench,
    instrument_bench,
    memory_bench,
    peer_bench,
    telemetry_bench,
    traffic_bench,
)
from bench.report import Figure, markdown, text_table, write

COMMAND = "make bench"
ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("fit", "telemetry", "memory", "instrument", "peer", "fleet")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="Few trials: a smoke run, figures not meaningful."
    )
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help="Run only these sections.",
    )
    parser.add_argument(
        "--output", type=Path, default=ROOT / "BENCHMARKS.md", help="Where to write the Markdown table."
    )
    parser.add_argument("--no-write", action="store_true", help="Print only; leave BENCHMARKS.md alone.")
    parser.add_argument("--strict", action="store_true", help="Exit 1 when a figure misses its target.")
    args = parser.parse_args(argv)
    only = set(args.only or SECTIONS)
    # The collector-down case makes the OTLP exporters log every failed export; that is the point.
    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)

    started = time.monotonic()
    figures: list[Figure] = []
    notes: list[str] = []

    def progress(msg: str) -> None:
        print(f"bench: {msg} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

    cold_fit_s: float | None = None
    if "fit" in only or "telemetry" in only:
        progress("fit engine: cold, warm, naive loop, trim_messages")
        fit = fit_bench.run(quick=args.quick)
        cold_fit_s = fit.cold_fit_s
        if "fit" in only:
            figures += fit.figures
            notes += fit.notes
            progress("open-weight families: a Llama ticket beside gpt-4o, tokenizer loads")
            family_figures, family_notes = family_bench.run(quick=args.quick)
            figures += family_figures
            notes += family_notes
            progress("the count against real bills, uncalibrated and calibrated")
            traffic_figures, traffic_notes = traffic_bench.run()
            figures += traffic_figures
            notes += traffic_notes
    if "telemetry" in only and cold_fit_s is not None:
        progress("telemetry: per-round cost, collector down vs up")
        tel = telemetry_bench.run(cold_fit_s=cold_fit_s, quick=args.quick)
        figures += tel.figures
        notes += tel.notes
    if "instrument" in only:
        progress("instrumentor: a wrapped SDK call, new request and later rounds")
        ins = instrument_bench.run(quick=args.quick)
        figures += ins.figures
        notes += ins.notes
    if "peer" in only:
        progress("against the peer: otel-ctx beside opentelemetry-instrumentation-openai-v2, real client")
        peer = peer_bench.run(quick=args.quick)
        figures += peer.figures
        notes += peer.notes
    if "memory" in only:
        progress("memory: fits with a bounded cache")
        mem = memory_bench.run(quick=args.quick)
        figures += mem.figures
        notes += mem.notes
    if "fleet" in only:
        progress("fleet: a 3,000-round run, 64 models under one cache budget")
        fleet = fleet_bench.run_bench(quick=args.quick)
        figures += fleet.figures
        notes += fleet.notes
    elapsed = time.monotonic() - started
    progress("done")

    print(text_table(figures))
    for n in notes:
        print(f"- {n}")
    if args.quick:
        notes.insert(0, "QUICK RUN (python -m bench --quick): too few trials for the figures to mean much.")
    if not args.no_write:
        write(args.output, markdown(figures, command=COMMAND, notes=notes, seconds=elapsed))
        print(f"wrote {args.output}")
    missed = [f for f in figures if f.passed is False]
    if missed:
        print(f"missed: {', '.join(f.name for f in missed)}", file=sys.stderr)
    # A report, not a gate: a shared CI box is too noisy to fail a build on timings (--strict to opt in).
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
