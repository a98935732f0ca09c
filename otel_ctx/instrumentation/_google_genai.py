"""Google Gen AI (``google-genai``): every request ``models.generate_content`` and
``models.generate_content_stream`` send, sync and async (``client.aio.models``).

One public call may send several requests (automatic function calling calls the model again),
so the wrappers sit on the per-request methods the public ones call (``_generate_content``,
``_generate_content_stream``, sync and async): each request is one round, measured as sent,
with the ``usage_metadata`` of its own response. Observe-only, like the other wrappers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from otel_ctx._pricing import Usage
from otel_ctx.instrumentation._core import Dialect, Observer, Round, int_or_0
from otel_ctx.instrumentation._sdk import Opened, Target, WrapperFn, round_wrapper
from otel_ctx.instrumentation._streams import AsyncStreamProxy, StreamProxy, Watch
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


def _measured(kwargs: Mapping[str, Any], vertex: bool = False) -> dict[str, Any]:
    """What is measured: the request's own arguments, the model by its bare id (a new dict:
    the caller's arguments are passed on as they came). A Vertex client's request carries
    ``labels`` (Vertex's own field, empty when the caller set none), which tells the counter it
    is billed as Vertex bills."""
    view = {**kwargs, "model": model_name(kwargs.get("model"))}
    if vertex and view.get("labels") is None:
        view["labels"] = {}
    return view


def _is_vertex(instance: Any) -> bool:
    """The ``Models`` object belongs to a Vertex client (``genai.Client(vertexai=True)``)."""
    return getattr(getattr(instance, "_api_client", None), "vertexai", False) is True


def _watch_chunk(chunk: Any, seen: Usage | None) -> Usage | None:
    """Every chunk of a stream carries the counts so far: the latest that counts any input."""
    found = _usage_of(chunk)
    return found if found is not None and found.input_tokens > 0 else None


def _wrapper(then: Callable[[Round, Any], Any], *, awaited: bool = False) -> Callable[[Observer], WrapperFn]:
    """A wrapper of one per-request method; ``then`` takes what the SDK returned (an async method's
    request goes out when it is awaited)."""

    def factory(observer: Observer) -> WrapperFn:
        def opener(vertex: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Opened | None:
            round_ = observer.start(_measured(kwargs, vertex), PROVIDER)
            return None if round_ is None else (round_, functools.partial(then, round_))

        on_api = round_wrapper(functools.partial(opener, False), awaited=awaited)
        on_vertex = round_wrapper(functools.partial(opener, True), awaited=awaited)

        def wrapper(
            wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            try:
                vertex = _is_vertex(instance)
            except Exception:  # never in the agent's way: read as the Gemini API's
                vertex = False
            return (on_vertex if vertex else on_api)(wrapped, instance, args, kwargs)

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


def _watched(round_: Round, chunks: Any) -> Any:
    """The SDK's chunks behind a proxy that passes them on as they come; the round ends when the
    stream ends, fails or is closed. (``_generate_content_stream`` is a generator: its request
    goes out on the first ``next``.)"""
    return StreamProxy(chunks, Watch(round_, _watch_chunk))


def _awatched(round_: Round, chunks: Any) -> Any:
    return AsyncStreamProxy(chunks, Watch(round_, _watch_chunk))


def google_targets() -> list[Target]:
    """The per-request methods of ``google.genai.models`` (ImportError when the SDK is absent)."""
    import google.genai.models  # noqa: F401

    module = "google.genai.models"
    return [
        (module, "Models._generate_content", _wrapper(_finish)),
        (module, "Models._generate_content_stream", _wrapper(_watched)),
        (module, "AsyncModels._generate_content", _wrapper(_finish, awaited=True)),
        (module, "AsyncModels._generate_content_stream", _wrapper(_awatched, awaited=True)),
    ]
