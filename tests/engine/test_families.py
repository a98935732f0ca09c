"""Model families as data: names reduced to the bare model, the longest prefix, lazy tokenizers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_ctx import _families as families
from otel_ctx.engine._tokens import TokenCounter, resolve_encoding


@pytest.mark.parametrize(
    ("given_name", "key"),
    [
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet-20250219"),
        ("anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307"),
        ("eu.amazon.nova-pro-v1:0", "nova-pro"),
        ("meta.llama3-70b-instruct-v1:0", "llama3-70b-instruct"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b-instruct"),
        ("models/gemini-2.0-flash", "gemini-2.0-flash"),
        ("llama3.2:3b", "llama3.2"),
        ("gpt-4o", "gpt-4o"),
    ],
)
def test_a_model_name_is_reduced_to_the_bare_model(given_name: str, key: str) -> None:
    assert families.model_key(given_name) == key


class _Chars:
    """A stand-in vocabulary: one token a character."""

    name = "chars"

    def encode_ordinary(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return "".join(map(chr, tokens)).encode()


def _missing() -> families.Tokenizer:
    raise ImportError("the extra is not installed")


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        families,
        "FAMILIES",
        (
            families.ModelFamily("wide", ("acme",), "chars"),
            families.ModelFamily("narrow", ("acme-2",), "absent", extra="acme", fallback_ratio=2.0),
        ),
    )
    monkeypatch.setattr(families, "TOKENIZERS", {"chars": _Chars, "absent": _missing})
    monkeypatch.setattr(families, "_loaded", {})


@pytest.mark.usefixtures("rows")
def test_the_longest_prefix_names_the_family() -> None:
    assert families.family_for("acme-1") is families.FAMILIES[0]
    assert families.family_for("vendor/ACME-2-large:latest") is families.FAMILIES[1]
    assert families.family_for("other") is None


@pytest.mark.usefixtures("rows")
def test_a_family_counts_with_its_own_tokenizer_when_installed() -> None:
    resolved = resolve_encoding("acme-1")
    assert (resolved.name, resolved.fallback) == ("chars", False)
    assert TokenCounter(resolved).text("hello") == 5


@pytest.mark.usefixtures("rows")
@given(st.text(max_size=60))
def test_without_its_extra_a_family_is_a_scaled_fallback(text: str) -> None:
    resolved = resolve_encoding("acme-2")
    assert resolved.fallback and resolved.native == "absent" and resolved.ratio == 2.0
    plain = len(resolved.encoding.encode_ordinary(text))
    assert TokenCounter(resolved).text(text) == int(plain * 2.0 + 0.5)
