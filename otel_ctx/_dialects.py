"""Which dialect reads a request: adapters by provider name, and detected from the body.

The one layer that knows every adapter. Adapters are imported on first use, so a dialect's
optional dependency (``langchain-core``) loads only when its objects arrive; ``detect``
refuses to guess when more than one dialect could read a body.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.engine._dialect import Adapter
from otel_ctx.engine._errors import InvalidRequestError, UnknownProviderError, shown

#: Provider name -> the module that defines its ``ADAPTER``.
_MODULES: dict[str, str] = {
    "openai": "otel_ctx.adapters._openai_chat",
    "openai-responses": "otel_ctx.adapters._openai_responses",
    "anthropic": "otel_ctx.adapters._anthropic",
    "google": "otel_ctx.adapters._google_genai",
    "bedrock": "otel_ctx.adapters._bedrock",
    "ollama": "otel_ctx.adapters._ollama",
    "cohere": "otel_ctx.adapters._cohere",
}
#: Dialects a bare transcript (``fit(messages)``) may be in, tried in order; Chat
#: Completions last, as the default.
_ITEM_MODULES: tuple[str, ...] = ("otel_ctx.adapters._langchain", "otel_ctx.adapters._openai_chat")
PROVIDERS: tuple[str, ...] = (
    "openai",
    "openai-responses",
    "anthropic",
    "google",
    "bedrock",
    "ollama",
    "cohere",
)
_loaded: dict[str, Adapter] = {}


def register(adapter: Adapter) -> None:
    """Make ``adapter`` the one used for its provider name (also for a new dialect)."""
    _loaded[adapter.provider] = adapter


_modules: dict[str, Adapter | None] = {}


def _load(module: str) -> Adapter | None:
    """The ``ADAPTER`` of ``module``, imported once (a failed import is remembered too:
    searching the path again on every fit would cost more than the fit)."""
    if module in _modules:
        return _modules[module]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        adapter = None  # the dialect is not part of this installation
    else:
        found = getattr(mod, "ADAPTER", None)
        built_on = getattr(mod, "BUILT_ON", None)
        if found is None and isinstance(built_on, str):
            # A dialect read through another's accounting (LangChain through Chat
            # Completions) is handed that adapter: dialect modules never import each other.
            found = mod.build(adapter_for(built_on))
        adapter = found if isinstance(found, Adapter) else None
    _modules[module] = adapter
    return adapter


def adapter_for(provider: str) -> Adapter:
    """The adapter of ``provider``; :class:`UnknownProviderError` for a name none provides."""
    hit = _loaded.get(provider)
    if hit is not None:
        return hit
    module = _MODULES.get(provider) if isinstance(provider, str) else None
    adapter = _load(module) if module is not None else None
    if adapter is None:
        raise UnknownProviderError(
            "provider", f"unknown provider {shown(provider)}; expected one of {', '.join(PROVIDERS)}"
        )
    _loaded[provider] = adapter
    return adapter


def _available() -> list[Adapter]:
    out = list(_loaded.values())
    for name in _MODULES:
        if name not in _loaded:
            try:
                out.append(adapter_for(name))
            except UnknownProviderError:
                continue
    return out


def detect(body: Any) -> Adapter:
    """The one dialect that can read ``body``; :class:`UnknownProviderError` when none or several."""
    if not isinstance(body, Mapping):
        raise UnknownProviderError(
            "request", f"must be a JSON object (a request body), got {type(body).__name__}"
        )
    sure: list[Adapter] = []
    maybe: list[Adapter] = []
    for adapter in _available():
        verdict = adapter.claims(body)
        if verdict is True:
            sure.append(adapter)
        elif verdict is None:
            maybe.append(adapter)
    found = sure or maybe
    if len(found) == 1:
        return found[0]
    names = ", ".join(a.provider for a in found) or "none"
    raise UnknownProviderError(
        "request",
        f"cannot tell the provider from the body (could be: {names}); pass provider= "
        f"one of {', '.join(PROVIDERS)}",
    )


def for_body(body: Any, provider: str | None) -> Adapter:
    """The adapter of ``provider``; when it is None, the one dialect that can read ``body``."""
    return detect(body) if provider is None else adapter_for(provider)


def adapter_for_items(items: Sequence[Any]) -> Adapter:
    """The dialect of a bare transcript: LangChain messages, else Chat Completions."""
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise InvalidRequestError(
            "messages", f"must be a list of message objects, got {type(items).__name__}"
        )
    fallback: Adapter | None = None
    for module in _ITEM_MODULES:
        adapter = _load(module)
        if adapter is None:
            continue
        fallback = adapter
        if adapter.claims_items(items):
            return adapter
    assert fallback is not None  # the Chat Completions adapter is always installed
    return fallback
