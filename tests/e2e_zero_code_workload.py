"""A zero-code agent for the end-to-end test: bare openai SDK calls, one ``otel_ctx.task`` per ticket.

Run as a subprocess by ``tests/e2e/test_collector.py``: the instrumentor watches the real
openai SDK calling the fake provider on 127.0.0.1, and exports over OTLP to the real
Collector. Every third ticket's question is too long for the task's small window, so its
calls overflow. The report lists each ticket's trace id (its task block's run span) and
whether it overflowed, so the test can check that the Jaeger links find exactly those.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import openai
from fake_provider import FakeProvider
from opentelemetry.trace import format_trace_id, get_current_span

import otel_ctx
from otel_ctx.instrumentation import TaskPolicy
from otel_ctx.names import OUTCOME_OVERFLOW
from otel_ctx.telemetry import configure

MODEL = "gpt-4o"
TASK = "returns"
#: A window a long question cannot fit: 2,000 tokens less the 200 the calls reserve.
WINDOW = 2_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--otlp", required=True, help="export spans and metrics over OTLP/gRPC here")
    parser.add_argument("--service", required=True)
    parser.add_argument("--tickets", type=int, default=9)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--linger", type=float, default=120.0)
    args = parser.parse_args(argv)

    handle = configure(
        exporter="otlp", service_name=args.service, endpoint=args.otlp, export_interval_millis=1000
    )
    # The calls reserve 200 tokens for the answer (max_completion_tokens): the policy says so too.
    policy = TaskPolicy(context_length=WINDOW, reserved_output=200)
    otel_ctx.instrument(policies={TASK: policy}, langchain=False)
    fake = FakeProvider().start()
    client = openai.OpenAI(base_url=fake.openai_url, api_key="test-key", max_retries=0)
    runs = []
    for n in range(args.tickets):
        ticket = f"Z{n:03d}"
        words = 4_000 if n % 3 == 0 else 20
        question = "Where is my parcel? " + "detail " * words
        overflowed = False
        with otel_ctx.task(TASK, conversation_id=ticket) as t:
            trace_id = format_trace_id(get_current_span().get_span_context().trace_id)
            for _ in range(2):
                client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": question}],
                    max_completion_tokens=200,
                )
                last = t.run.last_result if t.run is not None else None
                overflowed = overflowed or (last is not None and last.outcome == OUTCOME_OVERFLOW)
            t.resolve("escalated" if overflowed else "resolved")
        runs.append({"ticket": ticket, "task_type": TASK, "trace_id": trace_id, "overflowed": overflowed})
    tmp = args.report.with_suffix(".tmp")
    tmp.write_text(json.dumps({"tickets": len(runs), "runs": runs}), encoding="utf-8")
    os.replace(tmp, args.report)
    time.sleep(args.linger)
    fake.stop()
    handle.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
