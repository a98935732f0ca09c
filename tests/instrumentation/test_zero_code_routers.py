"""Zero code for LiteLLM and Google Gen AI: an unmodified agent under `opentelemetry-instrument`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fake_provider import FakeProvider, Reply
from otlp_capture import decode, receiver, value

from otel_ctx import names as n

__all__ = ["receiver"]  # the fixture, imported for pytest

AGENT = """
import os
from litellm import completion  # imported after the instrumentor ran, as under opentelemetry-instrument
from google import genai
from google.genai import types

answer = completion(
    model="anthropic/claude-sonnet-4-5",
    messages=[{"role": "user", "content": "Where is order 88-1042?"}],
    max_tokens=200,
    api_base=os.environ["FAKE_ANTHROPIC_URL"],
    api_key="test-key",
)
options = types.HttpOptions(base_url=os.environ["FAKE_GEMINI_URL"])
client = genai.Client(api_key="test-key", http_options=options)
reply = client.models.generate_content(model="gemini-2.5-flash", contents="Where is order 88-1042?")
print(answer.choices[0].message.content, reply.text)
"""


def test_litellm_and_google_genai_under_opentelemetry_instrument(
    receiver: tuple[int, Path], fake_provider: FakeProvider, tmp_path: Path
) -> None:
    port, out = receiver
    fake_provider.queue(Reply(input_tokens=111), Reply(input_tokens=222))
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "GOOGLE_", "GEMINI_"))
    }
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        FAKE_ANTHROPIC_URL=fake_provider.anthropic_url,
        FAKE_GEMINI_URL=fake_provider.gemini_url,
        OTEL_SERVICE_NAME="zero-code-routers",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )
    proc = subprocess.run(
        [str(instrument), sys.executable, str(agent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip() == "Done. Done."
    assert len(fake_provider.requests) == 2

    deadline = time.monotonic() + 20
    while True:
        traces, _, _ = decode(out)
        spans = [s for t in traces for rs in t.resource_spans for ss in rs.scope_spans for s in ss.spans]
        rounds = [s for s in spans if s.name == n.SPAN_OBSERVE]
        if len(rounds) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    attrs = sorted(
        ({a.key: value(a.value) for a in s.attributes} for s in rounds), key=lambda a: str(a[n.PROVIDER])
    )
    assert len(attrs) == 2
    google, litellm = attrs
    assert (google[n.PROVIDER], google[n.MODEL], google[n.USAGE_INPUT_TOKENS]) == (
        "google",
        "gemini-2.5-flash",
        222,
    )
    assert (litellm[n.PROVIDER], litellm[n.ROUTED_PROVIDER], litellm[n.MODEL]) == (
        "openai",
        "anthropic",
        "claude-sonnet-4-5",
    )
    assert litellm[n.USAGE_INPUT_TOKENS] == 111 and litellm[n.CONTEXT_LENGTH] == 200_000
