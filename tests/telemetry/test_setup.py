"""configure(): global providers are per process, so each case runs in a fresh interpreter."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import free_port

from otel_ctx import names as n
from otel_ctx.telemetry import ExportSettings, create_providers

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import json, sys
sys.path.insert(0, "tests")
from conversations import long_dispute, user
from otel_ctx import ContextFitter
from otel_ctx.demo import SUPPORT_DESK
import otel_ctx.telemetry as t
fitter = ContextFitter(SUPPORT_DESK)
"""


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 60) -> dict[str, Any]:
    """Run a script in a fresh interpreter; its last stdout line is JSON."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["_stdout"] = proc.stdout
    out["_stderr"] = proc.stderr
    return out


def test_configure_installs_providers_once() -> None:
    out = run_python(
        """
        from opentelemetry import metrics, trace
        h = t.configure(
            exporter="none", service_name="svc-a", resource_attributes={"deployment.environment": "test"}
        )
        again = t.configure(exporter="console", service_name="other")
        tp = trace.get_tracer_provider()
        print(json.dumps({
            "same": h is again,
            "tracer_is_ours": tp is h.tracer_provider,
            "meter_is_ours": metrics.get_meter_provider() is h.meter_provider,
            "service": tp.resource.attributes["service.name"],
            "env": tp.resource.attributes["deployment.environment"],
            "flushed": h.force_flush(),
        }))
        h.shutdown()
        """
    )
    assert out["same"] and out["tracer_is_ours"] and out["meter_is_ours"] and out["flushed"]
    assert (out["service"], out["env"]) == ("svc-a", "test")


def test_configure_leaves_the_applications_own_sdk_alone() -> None:
    out = run_python(
        """
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(tp)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))  # no otel-ctx Views
        h = t.configure(exporter="otlp")
        with t.run(fitter, task_type="status") as r:
            r.fit(long_dispute(20))
        names = [s.name for s in exporter.get_finished_spans()]
        data = json.loads(reader.get_metrics_data().to_json())
        scopes = [sm for rm in data["resource_metrics"] for sm in rm["scope_metrics"]]
        metrics_out = {m["name"]: m for sm in scopes for m in sm["metrics"]}
        print(json.dumps({
            "still_app": trace.get_tracer_provider() is tp,
            "handle": [h.tracer_provider is None, h.meter_provider is None],
            "spans": names,
            "metric_names": sorted(metrics_out),
            "util_bounds": (
                metrics_out["context_budget.utilization"]["data"]["data_points"][0]["explicit_bounds"]
            ),
        }))
        """
    )
    assert out["still_app"] and out["handle"] == [True, True]
    assert out["spans"] == [n.SPAN_FIT, n.SPAN_RUN]
    assert {n.TOKENS.name, n.UTILIZATION.name, n.FITS.name} <= set(out["metric_names"])
    # The instrument's bucket advisory reaches an SDK that has no otel-ctx View.
    assert tuple(out["util_bounds"]) == n.UTILIZATION_BUCKETS


def test_prometheus_exporter_serves_the_registry_names() -> None:
    port = free_port()
    out = run_python(
        f"""
        import urllib.request
        h = t.configure(exporter="prometheus", prometheus_port={port}, service_name="desk")
        with t.run(fitter, task_type="status") as r:
            r.fit(long_dispute(20))
            r.fit([user("hi")])
        body = urllib.request.urlopen("http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        print(json.dumps({{"body": body, "address": list(h.prometheus_address)}}))
        h.shutdown()
        """
    )
    body = out["body"]
    component = n.prometheus_label(n.COMPONENT)
    task = n.prometheus_label(n.TASK_TYPE)
    assert out["address"] == ["127.0.0.1", port]
    assert f'{n.TOKENS.prometheus}{{{component}="transcript"' in body or (
        n.TOKENS.prometheus in body and f'{component}="transcript"' in body
    )
    assert n.ROUND_TOKENS.prometheus in body
    assert n.UTILIZATION.series("_count") in body and n.UTILIZATION.series("_sum") in body
    assert f"{n.FITS.prometheus}{{" in body and 'context_budget_outcome="compacted"' in body
    assert f'{task}="status"' in body
    assert 'le="1.05"' in body  # the registry's utilization buckets
    assert "conversation" not in body


def test_standard_otel_variables_choose_exporters_and_service() -> None:
    port = free_port()
    out = run_python(
        f"""
        import urllib.request
        h = t.configure()
        with t.run(fitter, task_type="returns", conversation_id="c-1") as r:
            r.fit([user("hi")])
        body = urllib.request.urlopen("http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        h.shutdown()
        print(json.dumps({{"has_fits": "{n.FITS.prometheus}" in body}}))
        """,
        env={
            "OTEL_SERVICE_NAME": "support-desk",
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_METRICS_EXPORTER": "prometheus",
            "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
            "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        },
    )
    assert out["has_fits"]
    printed = out["_stdout"]
    assert f'"name": "{n.SPAN_FIT}"' in printed and f'"name": "{n.SPAN_RUN}"' in printed
    assert '"service.name": "support-desk"' in printed


def test_each_process_has_its_own_service_instance_unless_the_deployment_names_it() -> None:
    """Two processes of one service must not share series through the Collector."""
    script = """
        h = t.configure(exporter="none")
        print(json.dumps({"id": h.tracer_provider.resource.attributes.get("service.instance.id")}))
        """
    first, second = run_python(script)["id"], run_python(script)["id"]
    assert first and second and first != second
    named = run_python(script, env={"OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=pod-7"})["id"]
    assert named == "pod-7"


def test_unknown_exporter_or_protocol_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="zipkin"):
        create_providers(ExportSettings(exporter="zipkin"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="protocol"):
        create_providers(ExportSettings(exporter="otlp", protocol="http/json"))  # type: ignore[arg-type]


class _Collector(http.server.BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_collector() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    received: list[tuple[str, bytes]] = []
    handler = type("H", (_Collector,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


def test_otlp_over_http_posts_to_the_signal_paths(
    http_collector: tuple[str, list[tuple[str, bytes]]],
) -> None:
    from conversations import user

    from otel_ctx import ContextFitter
    from otel_ctx.demo import SUPPORT_DESK
    from otel_ctx.telemetry import Emitter, run

    endpoint, received = http_collector
    h = create_providers(
        ExportSettings(exporter="otlp", protocol="http/protobuf", endpoint=endpoint, service_name="http-test")
    )
    em = Emitter(tracer_provider=h.tracer_provider, meter_provider=h.meter_provider)
    with run(ContextFitter(SUPPORT_DESK), task_type="returns", emitter=em) as r:
        r.fit([user("hi")])
    assert h.force_flush(10_000)
    h.shutdown()
    paths = {p for p, _ in received}
    assert paths == {"/v1/traces", "/v1/metrics"}
    spans = []
    for path, body in received:
        if path == "/v1/traces":
            req = ExportTraceServiceRequest.FromString(body)
            spans += [s.name for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(spans) == sorted([n.SPAN_FIT, n.SPAN_RUN])
    metric_names = {
        m.name
        for path, body in received
        if path == "/v1/metrics"
        for rm in ExportMetricsServiceRequest.FromString(body).resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert n.TOKENS.name in metric_names and n.FITS.name in metric_names


#: Slack on a behaviour bound (interpreter teardown, a loaded machine), not a benchmark.
EXIT_SLACK_S = 3.0
#: Spans and metrics leave at once, so an export is in flight when the script ends.
EXPORT_NOW = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "200"}


@pytest.fixture
def silent_collector() -> Iterator[int]:
    """A port whose connections the kernel completes and nothing ever reads or answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_collector_that_never_answers_delays_exit_by_at_most_the_export_timeout(
    silent_collector: int, protocol: str
) -> None:
    out = run_python(
        f"""
        import time
        endpoint = "http://127.0.0.1:{silent_collector}"
        h = t.configure(exporter="otlp", endpoint=endpoint, protocol="{protocol}")
        with t.run(fitter, task_type="status") as r:
            r.fit(long_dispute(10))
        time.sleep(1)
        print(json.dumps({{"timeout": h.export_timeout, "end": time.time()}}))
        """,
        env=EXPORT_NOW,
    )
    exit_delay = time.time() - out["end"]
    assert out["timeout"] == 5.0  # the documented default
    assert exit_delay < out["timeout"] + EXIT_SLACK_S, (exit_delay, out["_stderr"][-2000:])


def test_shutdown_returns_within_the_export_timeout(silent_collector: int) -> None:
    out = run_python(
        f"""
        import time
        h = t.configure(exporter="otlp", endpoint="http://127.0.0.1:{silent_collector}")
        with t.run(fitter, task_type="status") as r:
            r.fit(long_dispute(10))
        time.sleep(1)
        start = time.monotonic()
        ok = h.shutdown()
        took = time.monotonic() - start
        again = h.shutdown()
        print(json.dumps({{"took": took, "ok": ok, "again": again, "timeout": h.export_timeout}}))
        """,
        env=EXPORT_NOW,
    )
    assert out["timeout"] == 5.0
    assert out["took"] < out["timeout"] + EXIT_SLACK_S, out
    assert isinstance(out["ok"], bool) and out["again"] is True


def test_sdk_disabled_builds_no_provider_and_no_thread() -> None:
    port = free_port()
    out = run_python(
        f"""
        import threading
        from opentelemetry import metrics, trace
        before = threading.active_count()
        h = t.configure(exporter="prometheus", prometheus_port={port})
        h2 = t.create_providers(t.ExportSettings(exporter="otlp"))
        with t.run(fitter, task_type="status") as r:
            result = r.fit(long_dispute(10))
        print(json.dumps({{
            "threads": [before, threading.active_count()],
            "providers": [h.tracer_provider, h.meter_provider, h2.tracer_provider, h2.meter_provider],
            "prometheus": h.prometheus_address,
            "global_tracer": type(trace.get_tracer_provider()).__name__,
            "global_meter": type(metrics.get_meter_provider()).__name__,
            "outcome": result.outcome,
            "shutdown": h.shutdown(),
        }}))
        """,
        env={"OTEL_SDK_DISABLED": "true"},
    )
    assert out["threads"] == [1, 1]
    assert out["providers"] == [None, None, None, None] and out["prometheus"] is None
    assert out["global_tracer"] == "ProxyTracerProvider" and out["global_meter"] == "_ProxyMeterProvider"
    assert out["outcome"] == "compacted" and out["shutdown"] is True
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # no scrape endpoint was started
