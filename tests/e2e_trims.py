"""Trims by others behind a Prometheus scrape endpoint, for the end-to-end test.

Run as a subprocess by ``tests/e2e/test_prometheus.py`` beside the support-desk workload:
the zero-code instrumentor on the real ``anthropic``, ``openai`` and ``langchain-core``
packages against the fake provider, making one provider trim (Anthropic clearing old
tool results on its side) and one framework trim (a ``pre_model_hook`` handing the
model a shorter list) per batch. Two batches with a scrape between them, so ``rate()``
sees an increase; then a file says it is done, and the metrics are served until the
process is terminated.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
from fake_provider import FakeProvider
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx.telemetry import configure

TASK_TYPE = "returns"
ORDER = '{"order": "88-1042", "items": "' + "oak shelf, natural finish " * 60 + '"}'


def _tool_rounds(k: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Where is order 88-1042?"}]
    for i in range(k):
        use = {"type": "tool_use", "id": f"t{i}", "name": "get_order", "input": {"id": "88-1042"}}
        out.append({"role": "assistant", "content": [use]})
        out.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": ORDER}]}
        )
    return out


def batch(fake: FakeProvider) -> None:
    claude = anthropic.Anthropic(base_url=fake.anthropic_url, api_key="test-key", max_retries=0)
    manage = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 1}}]}
    claude.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=300,
        messages=_tool_rounds(4),  # type: ignore[arg-type]
        extra_body={"context_management": manage},
    )
    model = ChatOpenAI(model="gpt-4o", base_url=fake.openai_url, api_key="test-key", max_retries=0)  # type: ignore[arg-type]
    history = [HumanMessage(f"Question {i}: " + "where is my parcel " * 30) for i in range(6)]
    history += [AIMessage("It is on its way."), HumanMessage("Thanks!")]

    def hook(state: dict[str, Any]) -> dict[str, Any]:
        return {"llm_input_messages": state["messages"][-2:]}

    def agent_step(state: dict[str, Any]) -> Any:
        trimmed = RunnableLambda(hook).invoke(state, config={"run_name": "pre_model_hook"})
        return model.invoke(trimmed["llm_input_messages"])

    RunnableLambda(agent_step).invoke({"messages": history})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--service", required=True)
    parser.add_argument("--start-file", type=Path, required=True)
    parser.add_argument("--done-file", type=Path, required=True)
    parser.add_argument("--pause", type=float, default=4.0, help="seconds between the batches (> a scrape)")
    parser.add_argument("--linger", type=float, default=120.0)
    args = parser.parse_args(argv)
    handle = configure(
        exporter="prometheus",
        service_name=args.service,
        prometheus_port=args.port,
        prometheus_host="127.0.0.1",
    )
    oi.instrument(langchain=True)
    fake = FakeProvider().start()
    deadline = time.monotonic() + 60
    while not args.start_file.exists():
        if time.monotonic() > deadline:
            print(f"{args.start_file} never appeared", file=sys.stderr)
            return 3
        time.sleep(0.05)
    with otel_ctx.task(task_type=TASK_TYPE):
        batch(fake)
        time.sleep(args.pause)
        batch(fake)
    args.done_file.write_text(json.dumps({"batches": 2}), encoding="utf-8")
    time.sleep(args.linger)
    fake.stop()
    handle.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
