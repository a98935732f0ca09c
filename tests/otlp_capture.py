"""The test side of ``otlp_receiver.py``: a fixture that runs the receiver in another process, and
the requests it wrote, decoded with opentelemetry-proto."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import free_port

RECEIVER = Path(__file__).resolve().with_name("otlp_receiver.py")


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port = free_port()
    out = tmp_path / "received"
    proc = subprocess.Popen(
        [sys.executable, str(RECEIVER), str(port), str(out), "90"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline() if proc.stdout else ""))
        reader.start()
        reader.join(30)
        assert ready and ready[0].strip() == "READY", f"receiver did not start: {ready}"
        yield port, out
    finally:
        out.mkdir(parents=True, exist_ok=True)
        (out / "STOP").touch()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def decode(out: Path) -> tuple[list[ExportTraceServiceRequest], list[ExportMetricsServiceRequest], bytes]:
    raw = b""
    traces, metrics = [], []
    for f in sorted(out.glob("*.pb")):
        data = f.read_bytes()
        raw += data
        if f.name.startswith("traces-"):
            traces.append(ExportTraceServiceRequest.FromString(data))
        else:
            metrics.append(ExportMetricsServiceRequest.FromString(data))
    return traces, metrics, raw


def value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))
