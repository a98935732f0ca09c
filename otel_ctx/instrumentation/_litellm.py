"""LiteLLM: every ``litellm.completion`` / ``acompletion`` / ``responses`` / ``aresponses`` call.

LiteLLM takes one dialect whatever the model behind it (Chat Completions for ``completion``,
Responses for ``responses``): the request is measured in it, as LiteLLM received it, against
the provider and model it routes to (``anthropic/claude-sonnet-4-5``: Anthropic's window,
calibration and label), with the usage of LiteLLM's own OpenAI-shaped response or last chunk.

One observation per request: while a LiteLLM call is observed, the inner entry points it goes
through (the openai SDK for ``openai/…`` models, ``completion`` serving ``responses``) stand
down (``_core.OBSERVED_ABOVE``). The wrappers sit on the ``litellm`` module's functions: a name
imported from it before ``instrument()`` keeps LiteLLM's own function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from otel_ctx import names
from otel_ctx._pricing import Usage
from otel_ctx.adapters._gemini_from_chat import gemini_body
from otel_ctx.instrumentation._core import OBSERVED_ABOVE, Observer, Round, int_or_0
from otel_ctx.instrumentation._sdk import (
    Opened,
    Target,
    WrapperFn,
    openai_chat_usage,
    openai_responses_usage,
    round_wrapper,
    watch_openai_chat,
    watch_openai_responses,
)
from otel_ctx.instrumentation._streams import AsyncStreamProxy, StreamProxy, Watch, Watcher
from otel_ctx.telemetry._emitter import log_failure

#: What a Chat Completions / Responses request body holds; LiteLLM's own options (keys,
#: endpoints, retries, metadata) are not part of what the model is sent, and never measured.
_CHAT_FIELDS = frozenset(
    {
        "model", "messages", "tools", "tool_choice", "functions", "function_call",
        "max_tokens", "max_completion_tokens", "parallel_tool_calls", "response_format",
    }
)  # fmt: skip
_RESPONSES_FIELDS = frozenset(
    {
        "model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
        "previous_response_id", "conversation", "reasoning", "text", "include",
    }
)  # fmt: skip
#: The positional parameters of each entry point, in order.
_POSITIONAL = {"openai": ("model", "messages"), "openai-responses": ("input", "model")}
#: LiteLLM's routes to Gemini (the Gemini API and Vertex): it sends them Gemini's own body, so
#: a chat request is measured in that shape, as Gemini bills it.
_GEMINI_ROUTES = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})


#: Reads the provider's usage off a whole (not streamed) LiteLLM answer.
Extract = Callable[[Any], Usage | None]


def _respond(
    round_: Round,
    response: Any,
    extract: Extract,
    watcher: Watcher,
    streams: tuple[type, ...],
    proxy: type[StreamProxy] | type[AsyncStreamProxy],
) -> Any:
    """The answer as LiteLLM returned it; a stream behind a proxy that watches it for usage."""
    try:
        if streams and isinstance(response, streams):
            return proxy(response, Watch(round_, watcher))
        round_.finish(extract(response))
    except Exception as exc:
        log_failure("reading a provider response", exc)
        round_.finish(None)
    return response


def _chat_usage(response: Any) -> Usage | None:
    """LiteLLM's usage: ``prompt_tokens`` already holds every input token (cached reads and, for
    Anthropic, cache writes too); the cache writes are kept beside it when LiteLLM reports them."""
    usage = getattr(response, "usage", None)
    found = openai_chat_usage(usage)
    if found is None:
        return None
    written = int_or_0(getattr(usage, "cache_creation_input_tokens", 0))
    if written:
        return Usage.reported(found.input_tokens, found.output_tokens, found.cached_input_tokens, written)
    return found


def _responses_usage(response: Any) -> Usage | None:
    return openai_responses_usage(getattr(response, "usage", None))


def routed(model: Any, kwargs: Mapping[str, Any]) -> tuple[str, str | None]:
    """The model and provider LiteLLM sends the call to (the name as given when it cannot tell)."""
    import litellm

    name = str(model or "unknown")
    try:
        resolved, provider, _, _ = litellm.get_llm_provider(
            model=name, custom_llm_provider=kwargs.get("custom_llm_provider"), api_base=kwargs.get("api_base")
        )
    except Exception:  # a model LiteLLM cannot route: its own call raises the error the agent sees
        return name, None
    return str(resolved or name), str(provider) if provider else None


def _measured(
    dialect: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """The request body as LiteLLM received it, with the routed model; and the routed provider."""
    fields = _CHAT_FIELDS if dialect == "openai" else _RESPONSES_FIELDS
    given = dict(zip(_POSITIONAL[dialect], args))
    body = {k: v for k, v in {**kwargs, **given}.items() if k in fields and v is not None}
    model, provider = routed(body.get("model"), kwargs)
    body["model"] = model
    return body, provider


def _open(observer: Observer, dialect: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Round | None:
    if OBSERVED_ABOVE.get():
        return None  # inside another observed LiteLLM call (responses served through completion)
    try:
        body, routed_to = _measured(dialect, args, kwargs)
    except Exception as exc:
        log_failure("reading a LiteLLM call", exc)
        return None
    if (
        dialect == "openai"
        and routed_to in _GEMINI_ROUTES
        and str(body.get("model", "")).startswith("gemini")
    ):
        try:
            body, dialect = gemini_body(body, vertex=routed_to != "gemini"), "google"
        except Exception as exc:  # measured as LiteLLM received it instead
            log_failure("reading a LiteLLM call to Gemini", exc)
    round_ = observer.start(body, dialect)
    if round_ is not None and routed_to is not None and round_.span.is_recording():
        round_.span.set_attribute(names.ROUTED_PROVIDER, routed_to)
    return round_


def call_wrapper(
    dialect: str,
    extract: Extract,
    watcher: Watcher,
    streams: Callable[[], tuple[type, ...]],
    *,
    awaited: bool = False,
) -> Callable[[Observer], WrapperFn]:
    """A wrapper of one entry point; while the call runs, the entry points inside it stand down."""
    proxy = AsyncStreamProxy if awaited else StreamProxy

    def factory(observer: Observer) -> WrapperFn:
        def opener(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Opened | None:
            round_ = _open(observer, dialect, args, kwargs)
            if round_ is None:
                return None
            return round_, lambda response: _respond(round_, response, extract, watcher, streams(), proxy)

        return round_wrapper(opener, awaited=awaited, exclusive=True)

    return factory


def _chat_streams() -> tuple[type, ...]:
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    return (CustomStreamWrapper,)


def _responses_streams() -> tuple[type, ...]:
    from litellm.responses.streaming_iterator import BaseResponsesAPIStreamingIterator

    return (BaseResponsesAPIStreamingIterator,)


def litellm_targets() -> list[Target]:
    """The ``litellm`` module's entry points (ImportError when LiteLLM is absent)."""
    import litellm  # noqa: F401

    chat, responses = "openai", "openai-responses"
    return [
        ("litellm", "completion", call_wrapper(chat, _chat_usage, watch_openai_chat, _chat_streams)),
        (
            "litellm",
            "acompletion",
            call_wrapper(chat, _chat_usage, watch_openai_chat, _chat_streams, awaited=True),
        ),
        (
            "litellm",
            "responses",
            call_wrapper(responses, _responses_usage, watch_openai_responses, _responses_streams),
        ),
        (
            "litellm",
            "aresponses",
            call_wrapper(
                responses, _responses_usage, watch_openai_responses, _responses_streams, awaited=True
            ),
        ),
    ]
