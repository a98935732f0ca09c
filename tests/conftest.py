from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Property tests: a thorough profile for CI, a quick one by default on a laptop.
settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev")

# The ``fake_provider`` fixture (a fake OpenAI/Anthropic server on 127.0.0.1), ``fake_bedrock``
# (a fake Bedrock runtime for boto3) and ``quiet_otel_ctx`` (the truth set's modules) for every
# test module.
pytest_plugins = ("fake_provider", "fake_bedrock", "real_traffic")


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch every microsecond, so rounds (or an unlocked read-modify-write) on one
    fitter interleave mid-read."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
