"""What otel-ctx takes from outside the request, hostile: configuration files and summaries.

Price, model and policy files are read like the CLI reads its input: a FIFO or ``/dev/zero`` is
refused without blocking or reading it, a file over the cap is refused, a 400-digit price is an
error naming the file and the field, and over any JSON (or bytes that are not JSON at all) only
``InvalidPolicyError`` comes out. Whatever a summarizer returns, in every dialect, only typed
errors come out. Each case failed before its fix.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otel_ctx
from otel_ctx import BudgetPolicy, ContextFitter, InvalidPolicyError, InvalidRequestError, OtelCtxError
from otel_ctx._models import ModelTable
from otel_ctx._pricing import ENV_PRICES, PriceTable, _default_prices
from otel_ctx._tables import MAX_CONFIG_BYTES
from otel_ctx.instrumentation._config import load_policies

POLICY = BudgetPolicy(context_length=128_000, reserved_output=800)


# -- huge numbers in configuration ------------------------------------------------------------


def _price_file(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "prices.json"
    row = f'{{"input": {value}, "cached_input": 1, "output": 1}}'
    path.write_text(f'{{"as_of": "2026-01-01", "models": {{"gpt-4o": {row}}}}}')
    return path


def test_a_400_digit_price_is_an_invalid_policy_error_naming_file_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _price_file(tmp_path, "9" * 400)
    monkeypatch.setenv(ENV_PRICES, str(path))
    _default_prices.cache_clear()
    try:
        with pytest.raises(InvalidPolicyError) as caught, otel_ctx.run(ContextFitter(POLICY), task_type=None):
            pass
    finally:
        _default_prices.cache_clear()
    assert str(path) in caught.value.field
    assert "input" in caught.value.field


# -- configuration files read like the CLI reads its input -------------------------------------

CONFIG_READERS = {
    "prices": lambda p: PriceTable.load(p),
    "models": lambda p: ModelTable.load(p),
    "policies": lambda p: load_policies(p),
}


def _within(fn: Any, seconds: float = 10.0) -> Any:
    """``fn()`` on a daemon thread: a read that blocks (a FIFO's open) fails the test instead
    of hanging it, and the thread is left behind blocked, harmlessly."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still reading after {seconds:g}s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.mark.parametrize("reader", sorted(CONFIG_READERS))
def test_a_configuration_file_that_is_a_fifo_is_refused_without_blocking(reader: str, tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(InvalidPolicyError) as caught:
        _within(lambda: CONFIG_READERS[reader](fifo))
    assert str(fifo) in str(caught.value) and "FIFO" in str(caught.value)


@pytest.mark.parametrize("reader", sorted(CONFIG_READERS))
def test_dev_zero_as_a_configuration_file_is_refused_without_reading_it(reader: str) -> None:
    with pytest.raises(InvalidPolicyError) as caught:
        _within(lambda: CONFIG_READERS[reader]("/dev/zero"))
    assert "/dev/zero" in str(caught.value)


@pytest.mark.parametrize("reader", sorted(CONFIG_READERS))
def test_a_configuration_file_over_the_cap_is_refused(reader: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(InvalidPolicyError, match="input limit"):
        CONFIG_READERS[reader](path)


_JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**5000), max_value=10**5000)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)
_CONFIG_FIELDS = ("input", "cached_input", "output", "cache_write", "context_window", "max_output")
_CONFIG_BODIES = st.one_of(
    _JSONISH,
    st.builds(
        lambda as_of, model, row: {"as_of": as_of, "models": {model: row}},
        st.one_of(st.just("2026-01-01"), _JSONISH),
        st.sampled_from(["gpt-4o", "default", ""]),
        st.one_of(_JSONISH, st.dictionaries(st.sampled_from(_CONFIG_FIELDS), _JSONISH, max_size=4)),
    ),
    st.dictionaries(
        st.sampled_from(["default", "support"]),
        st.dictionaries(
            st.sampled_from(["context_length", "reserved_output", "request_limit", "safety_margin"]),
            _JSONISH,
            max_size=3,
        ),
        max_size=2,
    ),
)


@settings(max_examples=300, deadline=None)
@given(body=_CONFIG_BODIES, reader=st.sampled_from(sorted(CONFIG_READERS)), raw=st.booleans())
def test_only_invalid_policy_errors_come_out_of_hostile_configuration_files(
    body: Any, reader: str, raw: bool
) -> None:
    directory = Path(tempfile.mkdtemp(prefix="otel-ctx-config-"))
    path = directory / "config.json"
    if raw:  # bytes that are not JSON at all, or not UTF-8
        path.write_bytes(_dumps(body).encode()[::-1] + b"\xff")
    else:
        path.write_text(_dumps(body))
    try:
        CONFIG_READERS[reader](path)
    except InvalidPolicyError:
        pass
    finally:
        path.unlink()
        directory.rmdir()


def _dumps(body: Any) -> str:
    """JSON of ``body``, with integers past Python's 4300-digit str limit written out by hand."""
    try:
        return json.dumps(body)
    except ValueError:
        return '{"as_of": "2026-01-01", "models": {"gpt-4o": {"input": ' + "9" * 5000 + "}}}"


# -- whatever a summarizer returns, only typed errors come out -----------------------------------

_LONG = "parcel scan history line " * 12


def _chat(n: int) -> list[dict[str, Any]]:
    return [{"role": ("user", "assistant")[i % 2], "content": f"{i} {_LONG}"} for i in range(n)]


def _langchain(n: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [(HumanMessage, AIMessage)[i % 2](f"{i} {_LONG}") for i in range(n)]


def _compact(dialect: str, fitter: ContextFitter) -> Any:
    if dialect == "chat":
        return fitter.fit(_chat(40))
    if dialect == "langchain":
        return fitter.fit(_langchain(40))
    if dialect == "openai-responses":
        body = {"model": "gpt-4o", "input": _chat(40)}
        return fitter.fit_request(body, provider="openai-responses")
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": _chat(40)}
    return fitter.fit_request(body, provider="anthropic")


_SUMMARY_VALUES = st.one_of(
    st.text(max_size=20),
    _JSONISH,
    st.dictionaries(
        st.sampled_from(["role", "content", "type", "text", "tool_calls", "name"]),
        st.one_of(
            st.sampled_from(["system", "user", "assistant", "tool", "developer", "text", "function"]),
            _JSONISH,
        ),
        max_size=4,
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    dialect=st.sampled_from(["chat", "langchain", "openai-responses", "anthropic"]),
    produced=_SUMMARY_VALUES,
)
def test_only_typed_errors_come_out_of_any_summarizer_return_value(dialect: str, produced: Any) -> None:
    small = BudgetPolicy(context_length=1_500, reserved_output=100)
    fitter = ContextFitter(small, model="gpt-4o", summarizer=lambda _run: produced)
    try:
        result = _compact(dialect, fitter)
    except OtelCtxError:
        return
    assert result.outcome in ("compacted", "overflow", "fit")


@pytest.mark.parametrize(
    ("dialect", "produced"),
    [("langchain", {"role": "assistant"}), ("openai-responses", {"role": {"x": 1}, "content": "s"})],
)
def test_summarizer_values_that_escaped_untyped_are_typed_now(dialect: str, produced: Any) -> None:
    small = BudgetPolicy(context_length=1_500, reserved_output=100)
    fitter = ContextFitter(small, model="gpt-4o", summarizer=lambda _run: produced)
    with pytest.raises(InvalidRequestError, match="summarizer"):
        _compact(dialect, fitter)
