"""The real-traffic truth set, read where it lies: request bodies public projects sent, and their bills.

``../shared/data/real-traffic/`` (beside the clone) holds one JSON object a line: the request body
a project's test suite really sent to OpenAI (Chat Completions, Responses) or Anthropic
(Messages), and the ``usage`` the provider answered. It is never copied into the project: tests
read it in place, skip without it on a laptop, and fail without it under ``CI=true``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real-traffic"
#: The bodies whose bill the body decides, and those whose bill depends on server state.
FILES = ("real_traffic.jsonl", "real_traffic_indeterminate.jsonl")
#: The recorded API -> the provider name otel-ctx reads it as.
PROVIDER = {
    "openai.chat": "openai",
    "openai.responses": "openai-responses",
    "anthropic.messages": "anthropic",
}


def read(path: Path) -> list[dict[str, Any]]:
    """Every record of the file at ``path`` (the bench reads the truth set through this too)."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rows(name: str = FILES[0]) -> list[dict[str, Any]]:
    """Every record of ``name``; a skip without the data, a failure without it under CI."""
    path = DATA / name
    if not path.is_file():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the real-traffic truth set is missing under CI: {path}")
        pytest.skip(f"no real-traffic data at {path}")
    return read(path)


def billed(row: Mapping[str, Any]) -> int:
    """The input the provider billed, as the truth set's README defines it."""
    usage = row["usage"]
    if row["api"] == "openai.chat":
        return int(usage["prompt_tokens"])
    if row["api"] == "openai.responses":
        return int(usage["input_tokens"])
    return int(
        usage["input_tokens"]
        + (usage.get("cache_creation_input_tokens") or 0)
        + (usage.get("cache_read_input_tokens") or 0)
    )


def part_types(value: Any) -> Iterator[str]:
    """Every ``type`` of a content part, block or item anywhere in ``value``."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        if isinstance(kind, str):
            yield kind
        for v in value.values():
            yield from part_types(v)
    elif isinstance(value, list):
        for v in value:
            yield from part_types(v)
