"""The real-traffic truth set, read where it lies: request bodies public projects sent, and their bills.

``../shared/data/real-traffic/`` (beside the clone) holds one JSON object a line: the request body
a project's test suite really sent to a provider (OpenAI, Anthropic, Gemini, Bedrock, Cohere,
Ollama and OpenAI-compatible hosts), and the ``usage`` the provider answered. It is never copied
into the project: tests read it in place, skip without it on a laptop, and fail without it under
``CI=true``. Every file of the folder that a test applies to is read, so a file added there is
checked without a change here.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_ctx import BudgetPolicy, ContextFitter
from otel_ctx.adapters._media import image_size

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real-traffic"
#: The first truth set: the bodies whose bill the body decides, and those whose bill depends on
#: server state (the order some tests and the bench rely on).
FILES = ("real_traffic.jsonl", "real_traffic_indeterminate.jsonl")
#: The OpenAI and Anthropic files, every project's: ``real_traffic*.jsonl`` and ``more_projects*.jsonl``.
OPENAI_ANTHROPIC_GLOBS = ("real_traffic*.jsonl", "more_projects*.jsonl")
#: The other providers' file (Gemini, Bedrock, OpenAI-compatible hosts, Ollama, Cohere); its
#: indeterminate cases are marked in place (``indeterminate``), not split into a file of their own.
OTHER_PROVIDERS_GLOBS = ("other_providers*.jsonl",)
#: The recorded API -> the provider name otel-ctx reads it as.
PROVIDER = {
    "openai.chat": "openai",
    "openai.responses": "openai-responses",
    "anthropic.messages": "anthropic",
    "gemini.generateContent": "google",
    "bedrock.converse": "bedrock",
    "bedrock.invoke": "bedrock",
    "ollama.chat": "ollama",
    "ollama.generate": "ollama",
    "cohere.chat": "cohere",
}


def available(*globs: str, determinate: bool | None = None) -> list[str]:
    """The names of the data files matching ``globs``: all of them, only those whose bill the body
    decides, or only the indeterminate ones (``determinate``). For parametrizing: never skips."""
    found = sorted({p.name for g in globs for p in DATA.glob(g)}) if DATA.is_dir() else []
    if determinate is not None:
        found = [n for n in found if ("indeterminate" not in n) == determinate]
    return found


def files(*globs: str, determinate: bool | None = None) -> list[str]:
    """As :func:`available`, but a skip (a failure under CI) when no file matches."""
    found = available(*globs, determinate=determinate)
    if not found:
        message = f"no real-traffic data matching {globs} at {DATA}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def project(row: Mapping[str, Any]) -> str:
    """The public repository a record came from (its ``source`` up to the cassette's path)."""
    return str(row["source"]).split(":", 1)[0]


def decided_by_body(row: Mapping[str, Any]) -> bool:
    """The bill depends on the body alone: not in an indeterminate file, not marked so in place."""
    return not row.get("indeterminate")


def compared(row: Mapping[str, Any]) -> bool:
    """A record the figures compare the count with: its bill depends on the body alone, and there
    is a bill (a zero bill is a fixture's made-up usage: there is nothing to compare with)."""
    return decided_by_body(row) and billed(row) > 0


@pytest.fixture(scope="module")
def quiet_otel_ctx() -> Iterator[None]:
    """otel-ctx's warnings held back for a module of the truth set (``pytestmark =
    pytest.mark.usefixtures("quiet_otel_ctx")``): a model with no known encoding is announced by
    each fresh fitter, and thousands of them would bury the tables."""
    logging.getLogger("otel_ctx").setLevel(logging.ERROR)
    yield
    logging.getLogger("otel_ctx").setLevel(logging.NOTSET)


#: Request keys that shape the answer, never the prompt: two bodies differing only in these (or in
#: the bytes of an image of the same size) ask the provider to bill the same input.
_NOT_BILLED = frozenset(
    {
        "stream", "stream_options", "temperature", "top_p", "n", "seed", "stop", "max_tokens",
        "max_completion_tokens", "max_output_tokens", "presence_penalty", "frequency_penalty",
        "logprobs", "top_logprobs", "user", "metadata", "store", "service_tier",
    }
)  # fmt: skip


def _billed_input(value: Any) -> Any:
    """``value`` with each inline image replaced by its pixel size (what an image is billed by)."""
    if isinstance(value, str) and value.startswith("data:image/"):
        size = image_size(value)
        return f"image {size}" if size is not None else value
    if isinstance(value, Mapping):
        return {k: _billed_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_billed_input(v) for v in value]
    return value


def contradicted(records: Iterable[Mapping[str, Any]]) -> set[tuple[str, int]]:
    """``(source, interaction)`` of the records whose bill another record contradicts: the same
    API, model and billed input (answer-shaping keys aside, images by their size), billed two
    ways. The body does not decide such a bill (the provider billed the same input differently
    at different times), so the accuracy figures leave every record of such a group out, the
    one the count agrees with too."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        body = {k: v for k, v in r["request"].items() if k not in _NOT_BILLED}
        key = json.dumps([r["api"], r["model"], _billed_input(body)], sort_keys=True, default=str)
        groups.setdefault(key, []).append(r)
    return {
        (str(r["source"]), int(r["interaction"]))
        for group in groups.values()
        if len({billed(r) for r in group}) > 1
        for r in group
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


def records(globs: Iterable[str], api: str) -> list[tuple[str, dict[str, Any]]]:
    """``(file name, record)`` of every record of the files matching ``globs`` sent to an API
    whose name starts with ``api`` (``"bedrock."``: Converse and InvokeModel); as :func:`files`
    without the data."""
    return [(name, row) for name in files(*globs) for row in rows(name) if str(row["api"]).startswith(api)]


def billed(row: Mapping[str, Any]) -> int:
    """The input the provider billed, as the truth set's README defines it."""
    if row.get("billed_input") is not None:
        return int(row["billed_input"])
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


_IMAGE_TYPES = {"image_url", "input_image", "image", "inlineData", "inline_data"}
_FILE_TYPES = {"file", "input_file", "document"}


def features(row: Mapping[str, Any]) -> tuple[str, ...]:
    """What a body holds beyond text, for the tables: media, tools, schemas, calls, reasoning."""
    body = row["request"]
    kinds = set(part_types(body.get("messages", body.get("input", body.get("contents")))))
    out = []
    if kinds & _IMAGE_TYPES:
        out.append("image")
    if kinds & _FILE_TYPES:
        out.append("file")
    if body.get("tools") or body.get("functions") or body.get("toolConfig"):
        out.append("tools")
    if kinds & {"function_call", "tool_use", "tool_calls"} or any(
        isinstance(m, Mapping) and m.get("tool_calls") for m in body.get("messages") or ()
    ):
        out.append("calls")
    text = body.get("text")
    if (
        body.get("response_format")
        or (isinstance(text, Mapping) and text.get("format"))
        or body.get("output_format")
        or body.get("output_config")
    ):
        out.append("schema")
    if body.get("thinking") or str(row["model"]).startswith(("o1", "o3", "o4", "gpt-5")):
        out.append("reasoning")
    return tuple(out)


@dataclass(frozen=True)
class Case:
    """One recorded body, counted by a fresh fitter of its own model with no calibration."""

    file: str
    project: str
    api: str
    model: str
    features: tuple[str, ...]
    billed: int
    count: int
    exact: bool
    #: The count is a bound: the bill holds something the body does not show (``unknowns``).
    bound: bool = False

    @property
    def diff(self) -> int:
        return self.count - self.billed

    def within(self, share: float, tokens: int = 0) -> bool:
        return abs(self.diff) <= max(tokens, share * self.billed)

    @property
    def media(self) -> bool:
        return "image" in self.features or "file" in self.features


def fresh_fitter(row: Mapping[str, Any]) -> ContextFitter:
    """A fresh fitter of the recorded model, with no calibration and a window no body fills."""
    return ContextFitter(BudgetPolicy(context_length=10**9, reserved_output=0), model=row["model"])


def refusals(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Where ``count_request`` or ``measure_request`` raised on a body the provider billed (each
    on a fresh fitter): neither may ever refuse one, so a test asserts this is empty."""
    refused = []
    for row in records:
        fresh = fresh_fitter(row)
        for call in (fresh.count_request, fresh.measure_request):
            try:
                call(row["request"], provider=PROVIDER[row["api"]])
            except Exception as exc:
                refused.append(f"{row['source']}#{row['interaction']} {call.__name__}: {exc}")
    return refused


def measure(row: Mapping[str, Any], file: str = "") -> Case:
    """``row`` counted by ``measure_request`` on a fresh fitter of the recorded model."""
    result = fresh_fitter(row).measure_request(row["request"], provider=PROVIDER[row["api"]])
    return Case(
        file,
        project(row),
        row["api"],
        row["model"],
        features(row),
        billed(row),
        result.breakdown.estimated,
        result.exact,
        bool(result.unknowns),
    )


def share(cases: list[Case], ok: Any) -> float:
    """The share of ``cases`` for which ``ok`` holds (1.0 for none: nothing is off)."""
    return sum(1 for c in cases if ok(c)) / len(cases) if cases else 1.0


def table(cases: list[Case], key: Any, title: str) -> str:
    """One line a group (``key(case)``): cases, exact, within 1%/5%/15%, flagged exact and off,
    and the median difference."""
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault(key(c), []).append(c)
    heads = ("cases", "exact", "1%", "5%", "15%", "flag")
    lines = [f"{title:46} " + " ".join(f"{h:>5}" for h in heads) + f" {'off':>4} {'median':>7}"]
    for name, group in sorted(groups.items()):
        flagged = [c for c in group if c.exact]
        lines.append(
            f"{name[:46]:46} {len(group):5} {sum(c.diff == 0 for c in group):5} "
            f"{sum(c.within(0.01, 2) for c in group):5} {sum(c.within(0.05, 2) for c in group):5} "
            f"{sum(c.within(0.15) for c in group):5} {len(flagged):5} "
            f"{sum(not c.within(0.01, 2) for c in flagged):4} "
            f"{sorted(c.diff for c in group)[len(group) // 2]:7}"
        )
    return "\n".join(lines)
