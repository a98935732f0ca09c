"""Google Gen AI (``google-genai``): every request ``models.generate_content`` and
``models.generate_content_stream`` send, sync and async (``client.aio.models``).

One public call may send several requests (automatic function calling calls the model again),
so the wrappers sit on the per-request methods the public ones call (``_generate_content``,
``_generate_content_stream``, sync and async): each request is one round, measured as sent,
with the ``usage_metadata`` of its own response. Observe-only, like the other wrappers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

from otel_ctx._pricing import Usage
from otel_ctx.instrumentation._core import Dialect, Observer, Round, int_or_0
from otel_ctx.instrumentation._sdk import Target, WrapperFn
from otel_ctx.telemetry._emitter import log_failure

PROVIDER = "google"
#: Gemini keeps the transcript in ``contents`` (its answers are the ``model`` turns).
DIALECTS = {PROVIDER: Dialect(transcript="contents")}
#: Prefixes the SDK accepts before a Gemini model id (``models/gemini-2.5-flash``,
#: ``publishers/google/models/...``): the model table knows the bare id.
_MODEL_PREFIX = "models/"


def google_usage(metadata: Any) -> Usage | None:
    """``usage_metadata``: ``prompt_token_count`` already includes the cached tokens; the answer's
    tokens are the candidates' plus the model's thinking."""
    if metadata is None:
        return None
    return Usage.reported(
        input_tokens=int_or_0(getattr(metadata, "prompt_token_count", 0)),
        output_tokens=int_or_0(getattr(metadata, "candidates_token_count", 0))
        + int_or_0(getattr(metadata, "thoughts_token_count", 0)),
        cached_input_tokens=int_or_0(getattr(metadata, "cached_content_token_count", 0)),
    )


def _usage_of(response: Any) -> Usage | None:
    return google_usage(getattr(response, "usage_metadata", None))


def model_name(model: Any) -> str:
    """The bare model id of what the SDK was given (the resource path's last name)."""
    name = str(model or "unknown")
    return name.rsplit(_MODEL_PREFIX, 1)[-1] if _MODEL_PREFIX in name else name


def _measured(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What is measured: the request's own arguments, the model by its bare id (a new dict:
    the caller's arguments are passed on as they came)."""
    return {**kwargs, "model": model_name(kwargs.get("model"))}


class _Chunks:
    """The latest usage a stream reported: every chunk carries the counts so far."""

    __slots__ = ("usage",)

    def __init__(self) -> None:
        self.usage: Usage | None = None

    def see(self, chunk: Any) -> None:
        try:
            found = _usage_of(chunk)
            if found is not None and found.input_tokens > 0:
                self.usage = found
        except Exception as exc:
            log_failure("reading a stream chunk's usage", exc)


def _sync(then: Callable[[Round, Any], Any]) -> Callable[[Observer], WrapperFn]:
    """A wrapper of one sync per-request method; ``then`` takes what the SDK returned."""

    def factory(observer: Observer) -> WrapperFn:
        def wrapper(
            wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            round_ = observer.start(_measured(kwargs), PROVIDER)
            if round_ is None:
                return wrapped(*args, **kwargs)
            return then(round_, round_.call(wrapped, args, kwargs))

        return wrapper

    return factory


def _async(then: Callable[[Round, Any], Any]) -> Callable[[Observer], WrapperFn]:
    """:func:`_sync` for an async method: the request goes out when it is awaited."""

    def factory(observer: Observer) -> WrapperFn:
        async def wrapper(
            wrapped: Callable[..., Awaitable[Any]],
            instance: Any,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
        ) -> Any:
            round_ = observer.start(_measured(kwargs), PROVIDER)
            if round_ is None:
                return await wrapped(*args, **kwargs)
            return then(round_, await round_.acall(wrapped, args, kwargs))

        return wrapper

    return factory


def _finish(round_: Round, response: Any) -> Any:
    try:
        usage = _usage_of(response)
    except Exception as exc:
        log_failure("reading a provider response", exc)
        usage = None
    round_.finish(usage)
    return response


def _watched(round_: Round, chunks: Iterator[Any]) -> Iterator[Any]:
    """The SDK's chunks as they come; the round ends when the stream ends, fails or is closed.
    (``_generate_content_stream`` is a generator: its request goes out on the first ``next``.)"""
    watch = _Chunks()
    error: BaseException | None = None
    try:
        for chunk in chunks:
            watch.see(chunk)
            yield chunk
    except BaseException as exc:
        error = None if isinstance(exc, GeneratorExit) else exc
        raise
    finally:
        round_.finish(watch.usage, error)


async def _awatched(round_: Round, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
    watch = _Chunks()
    error: BaseException | None = None
    try:
        async for chunk in chunks:
            watch.see(chunk)
            yield chunk
    except BaseException as exc:
        error = None if isinstance(exc, GeneratorExit) else exc
        raise
    finally:
        round_.finish(watch.usage, error)


def google_targets() -> list[Target]:
    """The per-request methods of ``google.genai.models`` (ImportError when the SDK is absent)."""
    import google.genai.models  # noqa: F401

    module = "google.genai.models"
    return [
        (module, "Models._generate_content", _sync(_finish)),
        (module, "Models._generate_content_stream", _sync(_watched)),
        (module, "AsyncModels._generate_content", _async(_finish)),
        (module, "AsyncModels._generate_content_stream", _async(_awatched)),
    ]
