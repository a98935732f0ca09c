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
from importlib import resources
from typing import Protocol

import tiktoken
import tiktoken.load


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
    ``template`` is ``module:function`` of the chat template an OpenAI-compatible host renders
    for the family (None: the family's own dialect adapter frames it, and read through Chat
    Completions it is counted with OpenAI's framing as an estimate).
    """

    name: str
    prefixes: tuple[str, ...]
    tokenizer: str | None = None
    extra: str | None = None
    fallback_ratio: float = 1.0
    template: str | None = None


_LLAMA = "otel_ctx.families._llama"
_TEMPLATES = "otel_ctx.families._templates"

#: The families beyond OpenAI's, longest prefix first wins (see :func:`family_for`). Fallback
#: ratios: the family's tokens per ``cl100k_base`` token, measured on the bills of its hosts.
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
    ),
    # Amazon Nova and Titan: no vocabulary is published, so text is cl100k_base scaled by the
    # ratio their bills show (Nova's short English prompts bill as cl100k counts them; its
    # long texts run a few percent higher). Their framing is in the Bedrock rules module.
    ModelFamily("amazon-nova", ("nova-",), None, None, 1.05),
    ModelFamily("amazon-titan", ("titan-",), None, None, 1.05),
    # Open-weight families on OpenAI-compatible hosts and Ollama: each host renders the model's
    # chat template (``template``) and bills its tokens.
    ModelFamily(
        "llama3",
        ("llama3", "llama-3-", "meta-llama-3-"),
        "llama3",
        "open-weight",
        1.0,
        f"{_LLAMA}:render_llama3",
    ),
    ModelFamily(
        "llama3.1",
        (
            "llama3.1",
            "llama3.2",
            "llama3.3",
            "llama-3.1",
            "llama-3.2",
            "llama-3.3",
            "meta-llama-3.1",
            "meta-llama-3.2",
            "meta-llama-3.3",
            # Bedrock's spelling: meta.llama3-1-70b-instruct-v1:0
            "llama3-1",
            "llama3-2",
            "llama3-3",
        ),
        "llama3",
        "open-weight",
        1.0,
        f"{_LLAMA}:render_llama31",
    ),
    ModelFamily("llama4", ("llama-4", "llama4"), "llama4", "open-weight", 1.0, f"{_LLAMA}:render_llama4"),
    ModelFamily("qwen", ("qwen", "qwq"), "qwen", "open-weight", 1.05, f"{_TEMPLATES}:render_chatml"),
    ModelFamily("deepseek", ("deepseek",), "deepseek", "open-weight", 1.0, f"{_TEMPLATES}:render_deepseek"),
    # The DeepSeek API serves V3.2 under these names: its own template, tools in DSML.
    ModelFamily(
        "deepseek-v3.2",
        ("deepseek-chat", "deepseek-reasoner", "deepseek-v3.2"),
        "deepseek",
        "open-weight",
        1.0,
        f"{_TEMPLATES}:render_deepseek_v32",
    ),
    # The R1 distillations keep their base model's vocabulary under DeepSeek's template.
    ModelFamily(
        "deepseek-r1-llama",
        ("deepseek-r1-distill-llama",),
        "llama3",
        "open-weight",
        1.0,
        f"{_TEMPLATES}:render_deepseek",
    ),
    ModelFamily(
        "deepseek-r1-qwen",
        ("deepseek-r1-distill-qwen",),
        "qwen",
        "open-weight",
        1.05,
        f"{_TEMPLATES}:render_deepseek",
    ),
    ModelFamily(
        "mistral",
        (
            "mistral",
            "magistral",
            "ministral",
            "pixtral",
            "codestral",
            "devstral",
            "open-mistral",
            "open-mixtral",
            "mixtral",
        ),
        "mistral",
        "open-weight",
        1.0,
        "otel_ctx.families._mistral:render_mistral",
    ),
    ModelFamily("gpt-oss", ("gpt-oss",), None, None, 1.0, "otel_ctx.families._harmony:render_harmony"),
    ModelFamily("gemma", ("gemma",), "gemma3", "open-weight", 1.0, f"{_TEMPLATES}:render_gemma"),
    ModelFamily("glm", ("glm", "zai-glm"), "glm4", "open-weight", 1.0, f"{_TEMPLATES}:render_glm"),
    # Cohere publishes no offline tokenizer: an estimate from its bills, never exact.
    ModelFamily("command", ("command", "c4ai-command"), None, None, 1.0, f"{_TEMPLATES}:render_cohere"),
)

#: Tokenizer name -> a function that builds it. A loader imports its extra's package inside
#: (the one place an import is deferred on purpose: the extra is optional and heavy), and
#: raises ``ImportError`` when the extra is not installed.
TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {}


class _Splintr:
    """A vocabulary ``splintr-rs`` ships, under the name counting reports."""

    def __init__(self, name: str, vocabulary: str) -> None:
        import splintr  # the gemini or open-weight extra: loaded on the first count of such a model

        self.name = name
        self._tok = splintr.Tokenizer.from_pretrained(vocabulary)
        # Ordinary text only: a marker spelled in a message is text, as the hosts bill it.
        self.encode_ordinary = self._tok.encode_ordinary

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return bytes(self._tok.decode_bytes(list(tokens)))


def _splintr(name: str, vocabulary: str) -> Callable[[], Tokenizer]:
    """The loader of one of splintr-rs's vocabularies."""
    return lambda: _Splintr(name, vocabulary)


def _llama4() -> Tokenizer:
    """Llama 4's own vocabulary (not o200k's), from the file ``llama-models`` ships."""
    path = resources.files("llama_models").joinpath("llama4/tokenizer.model")
    with resources.as_file(path) as file:
        ranks = tiktoken.load.load_tiktoken_bpe(str(file))  # a local file: no download
    return tiktoken.Encoding(name="llama4", pat_str=_LLAMA4_SPLIT, mergeable_ranks=ranks, special_tokens={})


#: Llama 4's split pattern (o200k's), as ``llama_models/llama4/tokenizer.py`` defines it.
_LLAMA4_SPLIT = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

for _name, _vocabulary in (
    ("llama3", "llama3"),
    ("qwen", "qwen3"),
    ("deepseek", "deepseek_v3"),
    ("mistral", "mistral_v3"),
    ("gemma3", "gemma3"),
    # Gemini's: Gemma 4's pieces are Gemma 3's (the two count every text alike, checked on the
    # bills' texts and on fuzzed ones), and splintr merges them as byte-pair ranks, an order of
    # magnitude faster than the unigram search it runs for Gemma 3's model file.
    ("gemma4", "gemma4"),
    ("glm4", "glm4"),
):
    TOKENIZERS[_name] = _splintr(_name, _vocabulary)
TOKENIZERS["llama4"] = _llama4

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
