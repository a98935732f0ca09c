"""A hundred agent processes' worth of otel-ctx metrics behind one HTTP server, for the fleet test.

Run as a subprocess by ``tests/e2e/test_fleet_prometheus.py``. Each agent is a real
:class:`~otel_ctx.telemetry.Emitter` on its own meter provider and Prometheus registry
(the SDK's Prometheus reader, exactly what ``configure(exporter="prometheus")`` serves).
Every agent first records the full spread of label sets (every task type, outcome, model
and round label), so each serves as many series as a process can; Prometheus scrapes
them as a hundred targets (``/metrics/<i>``, each with its own ``instance`` label).

Once ``--start-file`` exists, each agent records a known workload: ``dispute`` overflows
one fit in ``OVERFLOW_EVERY`` on the agents whose number is even, never elsewhere;
``returns`` and ``status`` never overflow. The summed expectation is written as JSON.

A scrape renders the agent's registry once per workload phase (the counts only change at
the phase switch), so a hundred targets cost a hundred renders, not one per scrape.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest

from bench import spread
from otel_ctx import ContextFitter, names
from otel_ctx.telemetry import Emitter, run, views

#: Rounds each agent records per task type once the test starts.
ROUNDS_PER_TASK = 40
#: Rounds per run (ticket): each agent finishes ROUNDS_PER_TASK / ROUNDS_PER_RUN runs per task type.
ROUNDS_PER_RUN = 5
#: On even-numbered agents, every OVERFLOW_EVERY-th dispute round overflows.
OVERFLOW_EVERY = 8


class Agent:
    """One agent process's meter provider, emitter and scrape registry."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.registry = CollectorRegistry(auto_describe=True)
        reader = PrometheusMetricReader(registry=self.registry)
        self.provider = MeterProvider(
            metric_readers=[reader],
            views=views(),
            resource=Resource.create(
                {"service.name": "fleet-agent", "service.instance.id": f"agent-{number}"}
            ),
        )
        self.emitter = Emitter(meter_provider=self.provider)
        self.body = b""

    def render(self) -> None:
        self.body = generate_latest(self.registry)


def warm_runs(agent: Agent, fitter: ContextFitter, results: spread.Outcomes) -> int:
    """One resolved and one escalated run per task type before the test starts: the run metrics'
    series exist at the first scrape, so rate() sees the workload's runs. Returns the fits."""
    for task, by_outcome in results.by_task.items():
        for resolution in ("resolved", "escalated"):
            with run(fitter, task_type=task, model=spread.MODELS[0], emitter=agent.emitter) as r:
                r.emit(by_outcome["fit"], mode=names.MODE_FIT)
                r.record_usage(input_tokens=by_outcome["fit"].breakdown.estimated)
                r.resolve(resolution)
    return 2 * len(results.by_task)


def workload(agent: Agent, fitter: ContextFitter, results: spread.Outcomes) -> Counter[tuple[str, str]]:
    """The test's workload on one agent, in runs of ROUNDS_PER_RUN rounds: its fits by (task, outcome)."""
    fits: Counter[tuple[str, str]] = Counter()
    for task, by_outcome in results.by_task.items():
        for first in range(0, ROUNDS_PER_TASK, ROUNDS_PER_RUN):
            with run(fitter, task_type=task, model=spread.MODELS[0], emitter=agent.emitter) as r:
                escalated = False
                for i in range(first, first + ROUNDS_PER_RUN):
                    overflow = task == "dispute" and agent.number % 2 == 0 and i % OVERFLOW_EVERY == 0
                    outcome = "overflow" if overflow else ("compacted" if i % 4 == 3 else "fit")
                    r.emit(by_outcome[outcome], mode=names.MODE_FIT)
                    fits[(task, outcome)] += 1
                    escalated = escalated or overflow
                # The provider's usage of the last round: 1% over the estimate.
                r.record_usage(input_tokens=round(by_outcome[outcome].breakdown.estimated * 1.01))
                r.resolve("escalated" if escalated else "resolved")
    return fits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--start-file", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=120.0, help="serve this long at most")
    args = parser.parse_args(argv)

    fitter = ContextFitter(spread.SUPPORT_DESK, model=spread.MODELS[0])
    results = spread.outcomes(fitter)
    agents = [Agent(i) for i in range(args.agents)]
    full_spread_fits = 0
    for agent in agents:
        full_spread_fits += spread.record_full_spread(agent.emitter, results)
        full_spread_fits += warm_runs(agent, fitter, results)
        agent.render()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                agent = agents[int(self.path.rsplit("/", 1)[-1])]
            except (ValueError, IndexError):
                self.send_error(404)
                return
            body = agent.body
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("serving", flush=True)

    deadline = time.monotonic() + args.seconds
    while not args.start_file.exists():
        if time.monotonic() > deadline:
            return 3
        time.sleep(0.05)
    fits: Counter[tuple[str, str]] = Counter()
    for agent in agents:
        fits += workload(agent, fitter, results)
    for agent in agents:
        agent.render()
    report = {
        "agents": len(agents),
        "full_spread_fits": full_spread_fits,
        "fits": [{"task_type": t, "outcome": o, "count": n} for (t, o), n in sorted(fits.items())],
    }
    tmp = args.report.with_suffix(".tmp")
    tmp.write_text(json.dumps(report), encoding="utf-8")
    os.replace(tmp, args.report)
    time.sleep(max(0.0, deadline - time.monotonic()))
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
