"""The ``otel-ctx`` command as the CLI tests run it: a subprocess with the user's environment less
OpenTelemetry's and the colour switches, and the one-line error every refusal must be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).with_name("otel-ctx")
CLI = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "otel_ctx.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FORCE_COLOR", "NO_COLOR"))}
    env.update(extra)
    return env


def cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=timeout,
    )


def assert_one_line_error(proc: Any, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1, proc.stderr
    assert err.startswith("otel-ctx: error: ")
    for f in fragments:
        assert f in err, err
