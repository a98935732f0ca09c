"""Real OTLP/gRPC: a receiver in another process; a collector that is down; one that never answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conversations import long_dispute, tool_round
from otlp_capture import decode, receiver, value
from support import free_port

from otel_ctx import ContextFitter
from otel_ctx import names as n
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.telemetry import Emitter, ExportSettings, create_providers, run

ROOT = Path(__file__).resolve().parents[2]
CANARY = "CANARY-otlp-4411"
__all__ = ["receiver"]  # the fixture, imported for pytest


SENDER = """
import json, sys
sys.path.insert(0, "tests")
from conversations import ORIGINAL_TICKET, long_dispute, tool_round, user
from otel_ctx import ContextFitter
from otel_ctx.demo import SUPPORT_DESK
import otel_ctx.telemetry as t

CANARY = {canary!r}
h = t.configure(exporter="otlp")
fitter = ContextFitter(SUPPORT_DESK)
history = long_dispute(20)
history[1] = user(ORIGINAL_TICKET + " " + CANARY)
with t.run(fitter, task_type="status", conversation_id="conv-otlp", agent_name="desk") as r:
    first = r.fit(history, system_prompt="Agent. " + CANARY)
    r.record_usage(input_tokens=first.raw_tokens + 7, output_tokens=20)
    big = (CANARY + " ") * 600
    second = r.fit([user(ORIGINAL_TICKET), *tool_round("c1", "get_order", {{"q": CANARY}}, big)])
h.shutdown()
print(json.dumps({{"outcomes": [first.outcome, second.outcome], "estimated": [first.breakdown.estimated,
                  second.breakdown.estimated], "dropped": first.dropped_turns}}))
"""


def test_spans_and_metrics_reach_an_otlp_receiver_in_another_process(receiver: tuple[int, Path]) -> None:
    import json

    port, out = receiver
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_SERVICE_NAME="otlp-e2e",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SENDER.format(canary=CANARY))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    sent = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sent["outcomes"][0] == "compacted" and sent["dropped"] > 0

    traces, metrics, raw = decode(out)
    assert traces and metrics
    spans = [
        (rs.resource, s)
        for req in traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    services = {
        value(a.value) for resource, _ in spans for a in resource.attributes if a.key == "service.name"
    }
    assert services == {"otlp-e2e"}
    by_name: dict[str, list[Any]] = {}
    for _, s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert len(by_name[n.SPAN_RUN]) == 1 and len(by_name[n.SPAN_FIT]) == 2
    (run_span,) = by_name[n.SPAN_RUN]
    fits = {}
    for s in by_name[n.SPAN_FIT]:
        attrs = {a.key: value(a.value) for a in s.attributes}
        assert s.parent_span_id == run_span.span_id and s.trace_id == run_span.trace_id
        assert set(n.FIT_SPAN_ATTRIBUTES) <= set(attrs)
        fits[attrs[n.ROUND]] = attrs
    assert sorted(fits) == [1, 2]
    assert [fits[1][n.ESTIMATED_TOKENS], fits[2][n.ESTIMATED_TOKENS]] == sent["estimated"]
    assert fits[1][n.OUTCOME] == "compacted" and fits[1][n.GEN_AI_CONVERSATION_ID] == "conv-otlp"
    assert fits[2][n.CAPPED_TOOL_RESULTS] == 1
    assert [e.name for e in run_span.events] == [n.EVENT_USAGE]

    received = {
        m.name: m
        for req in metrics
        for rm in req.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert set(received) == {m.name for m in n.METRICS}
    for m in n.METRICS:
        assert received[m.name].unit == m.unit
    tokens = received[n.TOKENS.name].sum
    assert tokens.is_monotonic
    components = {value(a.value) for p in tokens.data_points for a in p.attributes if a.key == n.COMPONENT}
    assert components == set(n.COMPONENTS)
    estimated = [
        p.as_int
        for p in tokens.data_points
        if {value(a.value) for a in p.attributes if a.key == n.COMPONENT} == {n.COMPONENT_ESTIMATED}
    ]
    assert sum(estimated) == sum(sent["estimated"])
    utilization = received[n.UTILIZATION.name].histogram
    assert all(tuple(p.explicit_bounds) == n.UTILIZATION_BUCKETS for p in utilization.data_points)
    # Exemplars: histogram points point back at the round spans of this trace.
    fit_ids = {(s.trace_id, s.span_id) for s in by_name[n.SPAN_FIT]}
    exemplar_ids = {(e.trace_id, e.span_id) for p in utilization.data_points for e in p.exemplars}
    assert exemplar_ids and exemplar_ids <= fit_ids
    fits_counter = received[n.FITS.name].sum
    assert fits_counter.is_monotonic and sum(p.as_int for p in fits_counter.data_points) == 2
    assert CANARY.encode() not in raw


def _fits_while_exporting(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], float, float]:
    """Fit 25 rounds while exports to ``endpoint`` are attempted in the background.

    Returns each round's wall time, how long force_flush took, and how long shutdown took.
    """
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # spans leave as soon as they end
    handle = create_providers(
        ExportSettings(exporter="otlp", endpoint=endpoint, export_timeout=1.0, export_interval_millis=50)
    )
    emitter = Emitter(tracer_provider=handle.tracer_provider, meter_provider=handle.meter_provider)
    fitter = ContextFitter(SUPPORT_DESK)
    history = long_dispute(20)
    durations = []
    with run(fitter, task_type="dispute", emitter=emitter) as r:
        for t in range(25):
            history += tool_round(f"x{t}", "track_parcel", {"page": t}, f"page {t}")
            start = time.perf_counter()
            r.fit(history)
            durations.append(time.perf_counter() - start)
            time.sleep(0.02)  # let the exporter threads start (and hang on) their attempts
    start = time.perf_counter()
    # Whether the flush reports success depends on how fast the exporter gave up (a refused
    # connection fails at once, a silent one times out); what must hold is that it is bounded.
    handle.force_flush(500)
    flushed = time.perf_counter() - start
    start = time.perf_counter()
    handle.shutdown(5_000)
    return durations, flushed, time.perf_counter() - start


def test_a_collector_that_is_down_neither_slows_nor_breaks_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = free_port()  # nothing listens here
    durations, flushed, shut = _fits_while_exporting(f"http://127.0.0.1:{closed}", monkeypatch)
    # A fit that waited for an export would take the 1 s export timeout or a 1 s retry backoff
    # (the first round included: channel setup must not happen on the caller's thread).
    assert max(durations) < 0.9, durations  # under the 1 s an export attempt may block for
    assert flushed < 1.5 and shut < 6


class _BlackHole:
    """Accepts TCP connections and never reads or answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        for c in self.accepted:
            c.close()
        self.sock.close()


def test_a_collector_that_never_answers_neither_slows_nor_breaks_the_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hole = _BlackHole()
    try:
        durations, flushed, shut = _fits_while_exporting(f"http://127.0.0.1:{hole.port}", monkeypatch)
        assert hole.accepted, "the exporter never connected, so the test proved nothing"
    finally:
        hole.close()
    assert max(durations) < 0.9, durations  # under the 1 s an export attempt may block for
    # Bounded by the timeouts given, never by the collector.
    assert flushed < 1.5 and shut < 6


def test_prometheus_metrics_with_spans_over_otlp(receiver: tuple[int, Path]) -> None:
    """The CLI's --otlp plus --prometheus-port: metrics are scraped, spans still leave over OTLP."""
    import json

    port, out = receiver
    scrape = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TRACES_EXPORTER"] = "otlp"
    script = f"""
import json, sys, urllib.request
sys.path.insert(0, "tests")
from conversations import user
from otel_ctx import ContextFitter
from otel_ctx.demo import SUPPORT_DESK
import otel_ctx.telemetry as t
h = t.configure(exporter="prometheus", endpoint="http://127.0.0.1:{port}", prometheus_port={scrape})
with t.run(ContextFitter(SUPPORT_DESK), task_type="returns") as r:
    r.fit([user("hi")])
body = urllib.request.urlopen("http://127.0.0.1:{scrape}/metrics", timeout=10).read().decode()
h.shutdown()
print(json.dumps({{"scraped": "{n.FITS.prometheus}" in body}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"scraped": True}
    traces, metrics, _ = decode(out)
    names_sent = {
        s.name for req in traces for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans
    }
    assert names_sent == {n.SPAN_RUN, n.SPAN_FIT}
    assert metrics == []  # metrics went to the scrape endpoint only
