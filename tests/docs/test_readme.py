"""The README starts with the two commands, and its example runs as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from otel_ctx import names

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def run_example(name: str) -> str:
    """The example's stdout, run as a user would."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return proc.stdout


def test_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands[:2] == ["make demo", "make test"]


def test_the_readme_example_is_the_example_file() -> None:
    code = (ROOT / "examples" / "fit_a_ticket.py").read_text().split('"""', 2)[2].lstrip("\n")
    shown = README.split("## A fit and its breakdown", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert shown == code


def test_the_example_prints_what_the_readme_shows() -> None:
    out = run_example("fit_a_ticket.py")
    shown = README.split("prints (`python examples/fit_a_ticket.py`):\n\n```text\n", 1)[1].split("```", 1)[0]
    assert out == shown


def test_the_telemetry_example_emits_a_run_with_two_rounds() -> None:
    out = run_example("observe_a_run.py")
    assert out.count(f'"name": "{names.SPAN_FIT}"') == 2
    assert out.count(f'"name": "{names.SPAN_RUN}"') == 1
    assert out.count(f'"name": "{names.SPAN_OBSERVE}"') == 1
    for metric in names.METRICS:
        assert f'"name": "{metric.name}"' in out
    assert "Where is my parcel" not in out  # private by default
