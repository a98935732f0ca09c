"""A minimal OTLP/gRPC receiver, run as its own process by the OTLP tests.

``python tests/otlp_receiver.py PORT OUT_DIR [SECONDS]`` serves the OTLP trace and
metrics services on 127.0.0.1:PORT, writes every request it receives to OUT_DIR as
``traces-<n>.pb`` / ``metrics-<n>.pb`` (the serialized Export*ServiceRequest), prints
``READY`` once listening, and exits after SECONDS (default 60) so it can never outlive
a test run. The test process decodes the files with opentelemetry-proto.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class _Sink:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.counter = itertools.count()
        self.lock = threading.Lock()

    def write(self, kind: str, payload: bytes) -> None:
        with self.lock:
            n = next(self.counter)
        tmp = self.out / f".{kind}-{n}.tmp"
        tmp.write_bytes(payload)
        tmp.rename(self.out / f"{kind}-{n}.pb")  # readers never see a half-written file


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: _Sink) -> None:
        self.sink = sink

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.sink.write("traces", request.SerializeToString())
        return trace_service_pb2.ExportTraceServiceResponse()


class MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, sink: _Sink) -> None:
        self.sink = sink

    def Export(
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        self.sink.write("metrics", request.SerializeToString())
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main(argv: list[str]) -> int:
    port, out = int(argv[1]), Path(argv[2])
    lifetime = float(argv[3]) if len(argv) > 3 else 60.0
    out.mkdir(parents=True, exist_ok=True)
    sink = _Sink(out)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(sink), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(MetricsService(sink), server)
    if server.add_insecure_port(f"127.0.0.1:{port}") == 0:
        print(f"cannot bind 127.0.0.1:{port}", flush=True)
        return 1
    server.start()
    print("READY", flush=True)
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline and not (out / "STOP").exists():
        time.sleep(0.05)
    server.stop(grace=1).wait(2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
