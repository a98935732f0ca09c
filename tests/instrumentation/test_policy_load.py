"""A task policy that leaves no budget after the reserve is refused when loaded, not at the first call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import wrapt
from fake_provider import FakeProvider
from instrument_support import CHAT, Instrumented, openai_client
from openai.resources.chat.completions import Completions

import otel_ctx
import otel_ctx.instrumentation as oi
from otel_ctx import InvalidPolicyError
from otel_ctx import names as n
from otel_ctx.instrumentation._config import DEFAULT_RESERVED_OUTPUT, Config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        (
            {"request_limit": 4000},
            ["request_limit=4000", f"the default reserved_output={DEFAULT_RESERVED_OUTPUT}"],
        ),
        ({"request_limit": DEFAULT_RESERVED_OUTPUT}, [f"request_limit={DEFAULT_RESERVED_OUTPUT}", "= 0"]),
        ({"context_length": 3000, "safety_margin": 200}, ["context_length=3000", "safety_margin=200"]),
        (
            {"request_limit": 8000, "reserved_output": 7000, "safety_margin": 1000},
            ["reserved_output=7000", "= 0"],
        ),
        # The smaller of the two limits is the one that counts.
        ({"context_length": 100_000, "request_limit": 2000}, ["request_limit=2000"]),
    ],
)
def test_instrument_refuses_a_policy_with_no_room_naming_the_task_and_the_numbers(
    policy: dict[str, int], named: list[str]
) -> None:
    with pytest.raises(InvalidPolicyError) as raised:
        oi.instrument(policies={"status": policy, "returns": {"request_limit": 8000}}, langchain=False)
    message = str(raised.value)
    assert raised.value.field == "policies['status']"
    assert "'status'" in message and "leaves no budget" in message
    for part in named:
        assert part in message, message
    # Nothing was wrapped: the agent's calls go straight to the SDK.
    assert not isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)
    assert oi.active_observer() is None


def test_a_policy_with_room_for_one_token_is_loaded_and_its_calls_observed(
    fake_provider: FakeProvider,
) -> None:
    reserve = DEFAULT_RESERVED_OUTPUT
    with pytest.raises(InvalidPolicyError):
        Config.from_env(policies={"status": {"request_limit": reserve + 100, "safety_margin": 100}})
    cap = Instrumented()
    oi.instrument(
        tracer_provider=cap.tracer_provider,
        meter_provider=cap.meter_provider,
        langchain=False,
        policies={
            "status": {"request_limit": reserve + 101, "safety_margin": 100},
            # A reserve of its own, or a lower default, makes a small limit fine.
            "returns": {"request_limit": 4000, "reserved_output": 500},
        },
    )
    try:
        oc = openai_client(fake_provider)
        with otel_ctx.task("status"):
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
        with otel_ctx.task("returns"):
            oc.chat.completions.create(model="gpt-4o", messages=CHAT)
    finally:
        oi.uninstrument()
    status, returns = cap.rounds()
    assert status.attributes[n.BUDGET] == 1  # type: ignore[index]
    assert returns.attributes[n.BUDGET] == 3500  # type: ignore[index]
    assert Config.from_env(reserved_output=1000, policies={"status": {"request_limit": 4000}})


def test_a_policy_file_with_no_room_is_refused_when_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_file = tmp_path / "policies.json"
    policy_file.write_text(json.dumps({"default": {"request_limit": 2048}}))
    monkeypatch.setenv(oi.ENV_POLICIES, str(policy_file))
    with pytest.raises(InvalidPolicyError, match=r"policies\['default'\]: request_limit=2048 - the default"):
        oi.instrument(langchain=False)
    monkeypatch.setenv(oi.ENV_RESERVED_OUTPUT, "1024")  # a smaller default reserve leaves room
    oi.instrument(langchain=False)
    oi.uninstrument()


def test_under_opentelemetry_instrument_the_refusal_is_reported_at_startup(tmp_path: Path) -> None:
    policy_file = tmp_path / "policies.json"
    policy_file.write_text(json.dumps({"status": {"request_limit": 3000}}))
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    env.update(
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_CTX_POLICIES=str(policy_file),
    )
    proc = subprocess.run(
        [str(instrument), sys.executable, "-c", "print('agent started')"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Before the agent's first line, let alone its first call.
    assert proc.stdout.strip() == "agent started"
    assert "policies['status']: request_limit=3000" in proc.stderr, proc.stderr[-3000:]
    assert "task type 'status' leaves no budget" in proc.stderr
