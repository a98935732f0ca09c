"""Zero code: an unmodified agent under `opentelemetry-instrument`, configured by environment alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fake_provider import FakeProvider, Reply
from otlp_capture import decode, receiver, value

from otel_ctx import names as n

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["receiver"]  # the fixture, imported for pytest


def test_an_unmodified_agent_under_opentelemetry_instrument_emits_the_breakdown(
    receiver: tuple[int, Path], fake_provider: FakeProvider
) -> None:
    port, out = receiver
    fake_provider.queue(
        Reply(tool_calls=[("get_order", '{"id": "88-1042"}')]),
        Reply(tool_calls=[("get_order", '{"id": "88-1043"}')]),
        Reply(text="I am sorry; a replacement is on its way."),
    )
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env.update(
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=fake_provider.openai_url,
        OTEL_SERVICE_NAME="zero-code-agent",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_METRIC_EXPORT_INTERVAL="500",
        OTEL_CTX_TASK_TYPE="returns",
    )
    proc = subprocess.run(
        [str(instrument), sys.executable, str(ROOT / "examples" / "agent_openai.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip() == "I am sorry; a replacement is on its way."
    assert len(fake_provider.requests) == 3

    deadline = time.monotonic() + 20
    while True:
        traces, metrics, _ = decode(out)
        spans = [s for t in traces for rs in t.resource_spans for ss in rs.scope_spans for s in ss.spans]
        rounds = [s for s in spans if s.name == n.SPAN_OBSERVE]
        metric_names = {
            m.name
            for req in metrics
            for rm in req.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }
        if (len(rounds) == 3 and n.ESTIMATE_ACCURACY.name in metric_names) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(rounds) == 3
    attrs = [{a.key: value(a.value) for a in s.attributes} for s in rounds]
    assert sorted(a[n.ROUND] for a in attrs) == [1, 2, 3]
    for a in attrs:
        assert a[n.TASK_TYPE] == "returns" and a[n.PROVIDER] == "openai"
        assert a[n.CONTEXT_LENGTH] == 128_000 and a[n.RESERVED_OUTPUT] == 4096
        assert a[n.ESTIMATED_TOKENS] == (
            a[n.TRANSCRIPT_TOKENS] + a[n.TOOL_SCHEMA_TOKENS] + a[n.SYSTEM_PROMPT_TOKENS] + a[n.SKILLS_TOKENS]
        )
        assert a[n.USAGE_INPUT_TOKENS] > 0
        assert not any(k.startswith("gen_ai.usage.") for k in a)
    # opentelemetry-instrument also loaded the contrib OpenAI instrumentation: each round's
    # trace holds its chat span, tied to the budget span.
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 3
    for budget in rounds:
        (chat,) = [c for c in chats if c.trace_id == budget.trace_id]
        assert budget.parent_span_id == chat.span_id or chat.parent_span_id == budget.span_id
    by_round = sorted(attrs, key=lambda a: a[n.ROUND])
    assert by_round[0][n.ESTIMATED_TOKENS] < by_round[2][n.ESTIMATED_TOKENS]  # the transcript grows
    assert {n.TOKENS.name, n.UTILIZATION.name, n.FITS.name, n.ESTIMATE_ACCURACY.name} <= metric_names
