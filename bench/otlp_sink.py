"""A minimal OTLP/gRPC receiver that accepts and discards: the "collector up" side of the bench.

Runs in its own process (a collector is never in the agent's process), on 127.0.0.1,
and exits when its parent closes stdin or after ``--max-seconds``.

    python -m bench.otlp_sink PORT [--max-seconds 600]
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from bench import child


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request: Any, context: Any) -> Any:
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(self, request: Any, context: Any) -> Any:
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main() -> None:
    args = child.arguments()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(), server)  # type: ignore[no-untyped-call]
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    child.serve_until_parent_closes(args.max_seconds)
    server.stop(grace=0.5)


if __name__ == "__main__":
    main()
