"""The wrappers around the provider SDKs' methods, and where each dialect keeps its usage.

Each wrapper is observe-only: it reads the keyword arguments, calls the SDK's method
with exactly those arguments, and returns exactly what the method returned (a stream
behind a transparent proxy). The SDK's exceptions pass through untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import wrapt

from otel_ctx.instrumentation._core import Observer, Round, Usage
from otel_ctx.instrumentation._streams import AsyncStreamProxy, StreamProxy, Watcher
from otel_ctx.telemetry.emitter import log_failure

Extract = Callable[[Any], Usage | None]
WrapperFn = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- usage, per dialect -------------------------------------------------------------------------


def _openai_usage(input_field: str, output_field: str, details_field: str) -> Callable[[Any], Usage | None]:
    """OpenAI's usage reader for one API: the input count already includes the cached tokens."""

    def usage_of(usage: Any) -> Usage | None:
        if usage is None:
            return None
        details = getattr(usage, details_field, None)
        return Usage(
            input_tokens=_int(getattr(usage, input_field, 0)),
            output_tokens=_int(getattr(usage, output_field, 0)),
            cached_input_tokens=_int(getattr(details, "cached_tokens", 0)),
        )

    return usage_of


#: Chat Completions and Responses name the same three counts differently.
openai_chat_usage = _openai_usage("prompt_tokens", "completion_tokens", "prompt_tokens_details")
openai_responses_usage = _openai_usage("input_tokens", "output_tokens", "input_tokens_details")


def anthropic_usage(usage: Any) -> Usage | None:
    """Messages: ``input_tokens`` counts only uncached tokens; cache reads and writes come beside it."""
    if usage is None:
        return None
    read = _int(getattr(usage, "cache_read_input_tokens", 0))
    write = _int(getattr(usage, "cache_creation_input_tokens", 0))
    return Usage(
        input_tokens=_int(getattr(usage, "input_tokens", 0)) + read + write,
        output_tokens=_int(getattr(usage, "output_tokens", 0)),
        cached_input_tokens=read,
        cache_creation_input_tokens=write,
    )


def _from_response(usage_of: Callable[[Any], Usage | None]) -> Extract:
    return lambda response: usage_of(getattr(response, "usage", None))


def watch_openai_chat(chunk: Any, seen: Usage | None) -> Usage | None:
    # Only when the agent asked for it with stream_options; otel-ctx never adds that option.
    usage = getattr(chunk, "usage", None)
    return openai_chat_usage(usage) if usage is not None else None


_RESPONSES_DONE = frozenset({"response.completed", "response.incomplete", "response.failed"})


def watch_openai_responses(chunk: Any, seen: Usage | None) -> Usage | None:
    if getattr(chunk, "type", None) not in _RESPONSES_DONE:
        return None
    return openai_responses_usage(getattr(getattr(chunk, "response", None), "usage", None))


def watch_anthropic(chunk: Any, seen: Usage | None) -> Usage | None:
    kind = getattr(chunk, "type", None)
    if kind == "message_start":
        return anthropic_usage(getattr(getattr(chunk, "message", None), "usage", None))
    if kind == "message_delta":
        delta = getattr(chunk, "usage", None)
        if delta is None:
            return None
        # The final delta's counts are cumulative; input counts appear there only in newer APIs.
        late = anthropic_usage(delta)
        if seen is None:
            return late
        return Usage(
            input_tokens=max(seen.input_tokens, late.input_tokens if late else 0),
            output_tokens=_int(getattr(delta, "output_tokens", 0)) or seen.output_tokens,
            cached_input_tokens=max(seen.cached_input_tokens, late.cached_input_tokens if late else 0),
            cache_creation_input_tokens=max(
                seen.cache_creation_input_tokens, late.cache_creation_input_tokens if late else 0
            ),
        )
    return None


# --- the wrappers ---------------------------------------------------------------------------------


def _respond(
    round_: Round, response: Any, extract: Extract, watcher: Watcher, streams: tuple[type, ...], proxy: type
) -> Any:
    """The response as the SDK returned it; a stream behind a watching proxy."""
    try:
        if streams and isinstance(response, streams):
            return proxy(response, round_, watcher)
        round_.see(response)
        round_.finish(extract(response))
    except Exception as exc:
        log_failure("reading a provider response", exc)
        round_.finish(None)
    return response


def sync_create(
    observer: Observer, provider: str, extract: Extract, watcher: Watcher, streams: tuple[type, ...]
) -> WrapperFn:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        round_ = observer.start(kwargs, provider)
        if round_ is None:
            return wrapped(*args, **kwargs)
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            round_.detach()
            round_.finish(None, exc)
            raise
        round_.detach()
        return _respond(round_, response, extract, watcher, streams, StreamProxy)

    return wrapper


def async_create(
    observer: Observer, provider: str, extract: Extract, watcher: Watcher, streams: tuple[type, ...]
) -> WrapperFn:
    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        round_ = observer.start(kwargs, provider)
        if round_ is None:
            return await wrapped(*args, **kwargs)
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            round_.detach()
            round_.finish(None, exc)
            raise
        round_.detach()
        return _respond(round_, response, extract, watcher, streams, AsyncStreamProxy)

    return wrapper


def _snapshot_usage(stream: Any) -> Usage | None:
    """What the Messages stream helper accumulated (its message_start carries the input counts)."""
    try:
        snapshot = stream.current_message_snapshot
    except Exception:  # nothing read yet: the helper asserts a snapshot exists
        return None
    return anthropic_usage(getattr(snapshot, "usage", None))


class MessageStreamManagerProxy(wrapt.ObjectProxy[Any]):
    """``client.messages.stream(...)``: the request goes out on ``__enter__``, so the round starts there."""

    def __init__(self, wrapped: Any, observer: Observer, kwargs: dict[str, Any]) -> None:
        super().__init__(wrapped)
        self._self_observer = observer
        self._self_kwargs = kwargs
        self._self_round: Round | None = None
        self._self_stream: Any = None

    def __enter__(self) -> Any:
        round_ = self._self_observer.start(self._self_kwargs, "anthropic")
        try:
            stream = self.__wrapped__.__enter__()
        except BaseException as exc:
            if round_ is not None:
                round_.detach()
                round_.finish(None, exc)
            raise
        if round_ is not None:
            round_.detach()
        self._self_round, self._self_stream = round_, stream
        return stream

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            if self._self_round is not None:
                self._self_round.finish(_snapshot_usage(self._self_stream))


class AsyncMessageStreamManagerProxy(wrapt.ObjectProxy[Any]):
    """``async with client.messages.stream(...)``, as :class:`MessageStreamManagerProxy`."""

    def __init__(self, wrapped: Any, observer: Observer, kwargs: dict[str, Any]) -> None:
        super().__init__(wrapped)
        self._self_observer = observer
        self._self_kwargs = kwargs
        self._self_round: Round | None = None
        self._self_stream: Any = None

    async def __aenter__(self) -> Any:
        round_ = self._self_observer.start(self._self_kwargs, "anthropic")
        try:
            stream = await self.__wrapped__.__aenter__()
        except BaseException as exc:
            if round_ is not None:
                round_.detach()
                round_.finish(None, exc)
            raise
        if round_ is not None:
            round_.detach()
        self._self_round, self._self_stream = round_, stream
        return stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            if self._self_round is not None:
                self._self_round.finish(_snapshot_usage(self._self_stream))


def stream_manager(observer: Observer, proxy: type) -> WrapperFn:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        manager = wrapped(*args, **kwargs)
        if not observer.active:
            return manager
        try:
            return proxy(manager, observer, kwargs)
        except Exception as exc:
            log_failure("wrapping a message stream", exc)
            return manager

    return wrapper


# --- what gets wrapped ------------------------------------------------------------------------------

#: (module, "Class.method", factory(observer) -> wrapper)
Target = tuple[str, str, Callable[[Observer], WrapperFn]]


def openai_targets() -> list[Target]:
    import openai

    streams: tuple[type, ...] = (openai.Stream,)
    astreams: tuple[type, ...] = (openai.AsyncStream,)
    chat, responses = _from_response(openai_chat_usage), _from_response(openai_responses_usage)
    return [
        ("openai.resources.chat.completions", "Completions.create",
         lambda o: sync_create(o, "openai", chat, watch_openai_chat, streams)),
        ("openai.resources.chat.completions", "AsyncCompletions.create",
         lambda o: async_create(o, "openai", chat, watch_openai_chat, astreams)),
        ("openai.resources.responses", "Responses.create",
         lambda o: sync_create(o, "openai-responses", responses, watch_openai_responses, streams)),
        ("openai.resources.responses", "AsyncResponses.create",
         lambda o: async_create(o, "openai-responses", responses, watch_openai_responses, astreams)),
    ]  # fmt: skip


def anthropic_targets() -> list[Target]:
    import anthropic

    streams: tuple[type, ...] = (anthropic.Stream,)
    astreams: tuple[type, ...] = (anthropic.AsyncStream,)
    messages = _from_response(anthropic_usage)
    return [
        ("anthropic.resources.messages", "Messages.create",
         lambda o: sync_create(o, "anthropic", messages, watch_anthropic, streams)),
        ("anthropic.resources.messages", "AsyncMessages.create",
         lambda o: async_create(o, "anthropic", messages, watch_anthropic, astreams)),
        ("anthropic.resources.messages", "Messages.stream",
         lambda o: stream_manager(o, MessageStreamManagerProxy)),
        ("anthropic.resources.messages", "AsyncMessages.stream",
         lambda o: stream_manager(o, AsyncMessageStreamManagerProxy)),
    ]  # fmt: skip
