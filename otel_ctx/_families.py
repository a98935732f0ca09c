"""Model families as data: which tokenizer counts a model, and which optional extra ships it.

A provider bills a request with its model's own tokenizer. OpenAI's encodings ship with the
package (:mod:`otel_ctx._encodings`); every other family's vocabulary comes from an optional
extra (``otel-ctx[gemini]``, ``otel-ctx[open-weight]``, ...) and is loaded the first time a
model of that family is counted, never on another family's path. Without the extra the count
falls back to ``cl100k_base`` scaled by the family's measured ratio, and says it is an estimate.

A family is one row of :data:`FAMILIES` (the model-name prefixes it answers to, its tokenizer,
the extra that ships it, the fallback ratio) plus, where its framing differs, a small rules
module read by the dialect adapter. Adding the next family touches one row and one module.

Model names arrive in many spellings: a Bedrock id with a region and a version
(``us.anthropic.claude-3-7-sonnet-20250219-v1:0``), a router's path
(``meta-llama/Llama-3.3-70B-Instruct``, ``models/gemini-2.0-flash``), an Ollama tag
(``llama3.2:3b``). :func:`model_key` reduces each to the bare model name the rows match.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class Tokenizer(Protocol):
    """What counting needs of a vocabulary (tiktoken's ``Encoding`` is one)."""

    @property
    def name(self) -> str: ...

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ModelFamily:
    """One model family: the names it answers to and how its text is tokenized.

    ``tokenizer`` names a loader in :data:`TOKENIZERS` (None: no vocabulary is published for
    the family, so every count is an estimate). ``fallback_ratio`` turns ``cl100k_base`` tokens
    into the family's when its tokenizer is not installed (measured from the family's bills).
    ``rules`` is the dotted path of the module holding the family's framing, for the adapters.
    """

    name: str
    prefixes: tuple[str, ...]
    tokenizer: str | None = None
    extra: str | None = None
    fallback_ratio: float = 1.0
    rules: str | None = None


#: The families beyond OpenAI's, longest prefix first wins (see :func:`family_for`).
FAMILIES: tuple[ModelFamily, ...] = (
    # Gemini 1.5 to 3.x, on the Gemini API and Vertex: Google documents Gemma's vocabulary as
    # their text tokenizer (google-genai's LocalTokenizer maps 2.x and 3.x to Gemma 3's, the
    # newest to Gemma 4's: the same pieces, which split every text alike). Without the extra,
    # cl100k is scaled up: Gemma splits the bills' texts into 1.09x (one project) and 1.21x
    # (another) cl100k's tokens, 1.11x over both.
    ModelFamily(
        "gemini",
        ("gemini-",),
        tokenizer="gemma4",
        extra="gemini",
        fallback_ratio=1.1,
        rules="otel_ctx.adapters._gemini_rules",
    ),
    # Amazon Nova and Titan: no vocabulary is published, so text is cl100k_base scaled by the
    # ratio their bills show (Nova's short English prompts bill as cl100k counts them; its
    # long texts run a few percent higher). Their framing is in the Bedrock rules module.
    ModelFamily("amazon-nova", ("nova-",), None, None, 1.05, "otel_ctx.adapters._bedrock_families"),
    ModelFamily("amazon-titan", ("titan-",), None, None, 1.05, "otel_ctx.adapters._bedrock_families"),
)

#: Tokenizer name -> a function that builds it. A loader imports its extra's package inside
#: (the one place an import is deferred on purpose: the extra is optional and heavy), and
#: raises ``ImportError`` when the extra is not installed.
TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {}


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class _Named:
    """A splintr vocabulary as a :class:`Tokenizer`: its name, and bytes decoded from its text."""

    def __init__(self, name: str, inner: _Encoder) -> None:
        self._name = name
        self._inner = inner
        self.encode_ordinary = inner.encode_ordinary

    @property
    def name(self) -> str:
        return self._name

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self._inner.decode(list(tokens)).encode("utf-8")


def _gemma4() -> Tokenizer:
    """Gemma 4's vocabulary, bundled in splintr-rs (the ``gemini`` extra). Its pieces are Gemma
    3's (the two count every text alike, checked on the bills' texts and on fuzzed ones), and
    splintr merges them as byte-pair ranks: an order of magnitude faster than the unigram
    search it runs for Gemma 3's model file. The ordinary encode: a special-token look-alike in
    a prompt is text, as the API bills it."""
    import splintr  # the optional extra, loaded on the first Gemini count only

    return _Named("gemma4", splintr.Tokenizer.from_pretrained("gemma4"))


TOKENIZERS["gemma4"] = _gemma4

#: A Bedrock id's region (``us.``, ``eu.``, ``apac.``, ``global.``) and vendor (``anthropic.``,
#: ``meta.``, ...) before the model, and its version after (``-v1:0``, ``-v2``).
_BEDROCK_REGION = re.compile(r"^(?:us|eu|apac|us-gov|global|jp|au|ca)\.")
_BEDROCK_VENDOR = re.compile(r"^(?:anthropic|meta|mistral|amazon|cohere|ai21|deepseek|qwen|openai|writer)\.")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")


def model_key(model: str) -> str:
    """The bare, lower-case model name the family rows match.

    ``us.anthropic.claude-3-7-sonnet-20250219-v1:0`` -> ``claude-3-7-sonnet-20250219``;
    ``meta-llama/Llama-3.3-70B-Instruct`` -> ``llama-3.3-70b-instruct``;
    ``models/gemini-2.0-flash`` -> ``gemini-2.0-flash``; ``llama3.2:3b`` -> ``llama3.2``.
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = _BEDROCK_VENDOR.sub("", _BEDROCK_REGION.sub("", name))
    name = _BEDROCK_VERSION.sub("", name)
    return name.split(":", 1)[0]


def family_for(model: str) -> ModelFamily | None:
    """The family of ``model`` (the row with the longest matching prefix), or None."""
    key = model_key(model)
    best: ModelFamily | None = None
    best_len = -1
    for family in FAMILIES:
        for prefix in family.prefixes:
            if key.startswith(prefix) and len(prefix) > best_len:
                best, best_len = family, len(prefix)
    return best


_loaded: dict[str, Tokenizer | None] = {}
_lock = threading.Lock()


def tokenizer(name: str) -> Tokenizer | None:
    """The tokenizer ``name``, built once per process; None when its extra is not installed."""
    if name in _loaded:
        return _loaded[name]
    with _lock:  # a vocabulary is not free to load: once per process
        if name not in _loaded:
            loader = TOKENIZERS.get(name)
            try:
                _loaded[name] = loader() if loader is not None else None
            except ImportError:
                _loaded[name] = None
        return _loaded[name]
