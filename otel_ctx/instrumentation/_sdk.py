"""The wrapper around the provider SDKs' request layer, and where each dialect keeps its usage.

Every method of the ``openai`` and ``anthropic`` SDKs that sends a model request (``create``,
``stream``, ``parse``, the ``beta.*`` twins, ``with_raw_response``, ``with_streaming_response``,
sync and async) ends in the client's one ``request`` method with the request's path and body.
Wrapping that method observes all of them, once per request (retries happen inside it), in the
dialect the path names; and no otel-ctx frame sits between the agent and the SDK's public
methods, so a warning they raise with a ``stacklevel`` still points at the agent's line.

An SDK that traces itself (``anthropic.messages.create``) opens its span in ``request`` and
runs every attempt in ``_request``: there the wrapper sits on ``_request``, so the round nests
under the SDK's span and annotates it, as it does a GenAI instrumentation's span.

Observe-only: the SDK's method gets exactly its arguments, and the agent gets what it returned
(a stream or an unread raw response behind a transparent proxy that watches for the usage);
the SDK's exceptions pass through untouched. ``responses.compact`` is wrapped here too.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry import trace

from otel_ctx import names
from otel_ctx._pricing import Usage
from otel_ctx.instrumentation._chain import open_chain
from otel_ctx.instrumentation._context import current_task
from otel_ctx.instrumentation._core import OBSERVED_ABOVE, Dialect, Observer, Round, field_of, int_or_0
from otel_ctx.instrumentation._streams import (
    AsyncCloses,
    AsyncStreamProxy,
    Closes,
    StreamProxy,
    Watch,
    Watched,
    Watcher,
)
from otel_ctx.instrumentation._trims import AnthropicCuts
from otel_ctx.telemetry._emitter import log_failure
from otel_ctx.telemetry._trim import Trim

WrapperFn = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


# --- usage, per dialect -------------------------------------------------------------------------


def _openai_usage(input_field: str, output_field: str, details_field: str) -> Callable[[Any], Usage | None]:
    """OpenAI's usage reader for one API: the input count already includes the cached tokens."""

    def usage_of(usage: Any) -> Usage | None:
        if usage is None:
            return None
        details = field_of(usage, details_field)
        return Usage.reported(
            input_tokens=int_or_0(field_of(usage, input_field)),
            output_tokens=int_or_0(field_of(usage, output_field)),
            cached_input_tokens=int_or_0(field_of(details, "cached_tokens")),
        )

    return usage_of


#: Chat Completions and Responses name the same three counts differently.
openai_chat_usage = _openai_usage("prompt_tokens", "completion_tokens", "prompt_tokens_details")
openai_responses_usage = _openai_usage("input_tokens", "output_tokens", "input_tokens_details")


def anthropic_usage(usage: Any) -> Usage | None:
    """Messages: ``input_tokens`` counts only uncached tokens; cache reads and writes come beside it."""
    if usage is None:
        return None
    read = int_or_0(field_of(usage, "cache_read_input_tokens"))
    write = int_or_0(field_of(usage, "cache_creation_input_tokens"))
    return Usage.reported(
        input_tokens=int_or_0(field_of(usage, "input_tokens")) + read + write,
        output_tokens=int_or_0(field_of(usage, "output_tokens")),
        cached_input_tokens=read,
        cache_creation_input_tokens=write,
    )


def watch_openai_chat(chunk: Any, seen: Usage | None) -> Usage | None:
    # Only when the agent asked for it with stream_options; otel-ctx never adds that option.
    usage = field_of(chunk, "usage")
    return openai_chat_usage(usage) if usage is not None else None


_RESPONSES_DONE = frozenset({"response.completed", "response.incomplete", "response.failed"})


def watch_openai_responses(chunk: Any, seen: Usage | None) -> Usage | None:
    if field_of(chunk, "type") not in _RESPONSES_DONE:
        return None
    return openai_responses_usage(field_of(field_of(chunk, "response"), "usage"))


def watch_anthropic(chunk: Any, seen: Usage | None) -> Usage | None:
    kind = field_of(chunk, "type")
    if kind == "message_start":
        return anthropic_usage(field_of(field_of(chunk, "message"), "usage"))
    if kind == "message_delta":
        delta = field_of(chunk, "usage")
        if delta is None:
            return None
        # The final delta's counts are cumulative; input counts appear there only in newer APIs.
        late = anthropic_usage(delta)
        if seen is None:
            return late
        return Usage.reported(
            input_tokens=max(seen.input_tokens, late.input_tokens if late else 0),
            output_tokens=int_or_0(field_of(delta, "output_tokens")) or seen.output_tokens,
            cached_input_tokens=max(seen.cached_input_tokens, late.cached_input_tokens if late else 0),
            cache_creation_input_tokens=max(
                seen.cache_creation_input_tokens, late.cache_creation_input_tokens if late else 0
            ),
        )
    return None


# --- which requests are model requests ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """A model-request path: its dialect, where its answer keeps the usage, how its stream reports it."""

    provider: str
    usage_of: Callable[[Any], Usage | None]
    watcher: Watcher


CHAT = Route("openai", openai_chat_usage, watch_openai_chat)
RESPONSES = Route("openai-responses", openai_responses_usage, watch_openai_responses)
MESSAGES = Route("anthropic", anthropic_usage, watch_anthropic)


def openai_route(path: str) -> Route | None:
    """``/chat/completions`` and ``/responses`` (not ``/responses/{id}``, ``/responses/compact``, ...)."""
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/responses"):
        return RESPONSES
    return None


def anthropic_route(path: str) -> Route | None:
    """``/v1/messages``, also for ``beta.messages``; not ``count_tokens``, batches or other collections."""
    return MESSAGES if path.endswith("/v1/messages") else None


class _Never:
    """Stands for an SDK type an older SDK version does not have: nothing is an instance of it."""


@dataclass(frozen=True, slots=True)
class Sdk:
    """What one SDK's ``request`` can return besides a parsed answer."""

    route: Callable[[str], Route | None]
    streams: tuple[type, ...]
    async_streams: tuple[type, ...]
    #: Raw responses (``with_raw_response``: ``LegacyAPIResponse`` or ``APIResponse``;
    #: ``with_streaming_response``: ``APIResponse``), whose ``parse()`` the agent calls later.
    raw: tuple[type, ...]
    async_raw: tuple[type, ...]


def _request_of(
    sdk: Sdk, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Route, dict[str, Any]] | None:
    """The route and body of a ``request(cast_to, options, ...)`` call, if it is a model request."""
    try:
        options = args[1] if len(args) > 1 else kwargs.get("options")
        if str(getattr(options, "method", "")).lower() != "post":
            return None
        url = getattr(options, "url", None)
        if not isinstance(url, str):
            return None
        route = sdk.route(url.split("?", 1)[0].rstrip("/"))
        if route is None:
            return None
        data = getattr(options, "json_data", None)
        if not isinstance(data, Mapping):
            return None
        extra = getattr(options, "extra_json", None)  # extra_body: sent, so measured
        return route, ({**data, **extra} if isinstance(extra, Mapping) else dict(data))
    except Exception as exc:
        log_failure("reading an SDK request", exc)
        return None


# --- answers: parsed, raw, streamed -----------------------------------------------------------------


def _usage_in_body(content: bytes, route: Route) -> Usage | None:
    """The usage in a raw answer's JSON body (a streamed body, server-sent events, carries none here)."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return route.usage_of(data.get("usage")) if isinstance(data, dict) else None


def _read_body(response: Any) -> bytes | None:
    """The raw answer's body if the SDK has read it already (a non-streamed raw response), else None."""
    http = getattr(response, "http_response", None)
    try:
        content = http.content if http is not None else None
    except Exception:  # not read yet: the agent reads it later (with_streaming_response)
        return None
    return content if isinstance(content, bytes) else None


def _respond(round_: Round, response: Any, route: Route, sdk: Sdk, streamed: bool) -> Any:
    """The response as the SDK returned it; a stream or unread raw response behind a watching proxy."""
    try:
        if isinstance(response, sdk.streams):
            return StreamProxy(response, Watch(round_, route.watcher))
        if isinstance(response, sdk.async_streams):
            return AsyncStreamProxy(response, Watch(round_, route.watcher))
        if isinstance(response, sdk.raw + sdk.async_raw):
            body = None if streamed else _read_body(response)
            if body is not None:  # with_raw_response of a plain call: the body is here already
                if round_.reads_answers and isinstance(response, sdk.raw):
                    # What the usage does not say (a chain's output, a provider's edits) is in the
                    # parsed answer; the SDK caches it, so the agent's own parse() gets the same object.
                    round_.see(cast(Any, response).parse())
                round_.finish(_usage_in_body(body, route))
                return response
            proxy = AsyncRawProxy if isinstance(response, sdk.async_raw) else RawProxy
            return proxy(response, Watch(round_, route.watcher), route, sdk, streamed)
        round_.see(response)
        round_.finish(route.usage_of(field_of(response, "usage")))
    except Exception as exc:
        log_failure("reading a provider response", exc)
        round_.finish(None)
    return response


class _Raw(Watched):
    """A raw response whose body the agent reads later: the round ends when it is read or closed."""

    def __init__(self, wrapped: Any, watch: Watch, route: Route, sdk: Sdk, streamed: bool) -> None:
        super().__init__(wrapped, watch)
        self._self_route = route
        self._self_sdk = sdk
        self._self_streamed = streamed

    def _read(self) -> None:
        """The agent read the body itself (``read()``, ``text()``, ``json()``)."""
        watch = self._self_watch
        try:
            body = None if self._self_streamed else _read_body(self.__wrapped__)
            if body is not None:
                watch.usage = _usage_in_body(body, self._self_route)
            watch.done()
        except Exception as exc:
            log_failure("reading a provider response", exc)

    def _parsed(self, result: Any) -> Any:
        """What ``parse()`` gave the agent: a stream is watched, an answer read."""
        watch, sdk = self._self_watch, self._self_sdk
        try:
            if isinstance(result, sdk.streams):
                return StreamProxy(result, watch)
            if isinstance(result, sdk.async_streams):
                return AsyncStreamProxy(result, watch)
            if not self._self_streamed:
                watch.round.see(result)
                watch.usage = self._self_route.usage_of(field_of(result, "usage"))
                watch.done()
        except Exception as exc:
            log_failure("reading a provider response", exc)
        return result


def _reads(method: str) -> Callable[[_Raw], Any]:
    """The body read by the agent itself (``read``, ``text``, ``json``), then the round ended."""

    def read(self: _Raw) -> Any:
        data = getattr(self.__wrapped__, method)()
        self._read()
        return data

    return read


def _areads(method: str) -> Callable[[_Raw], Awaitable[Any]]:
    """:func:`_reads` for an async raw response."""

    async def read(self: _Raw) -> Any:
        data = await getattr(self.__wrapped__, method)()
        self._read()
        return data

    return read


class RawProxy(_Raw, Closes):
    """The sync clients' ``LegacyAPIResponse`` or ``APIResponse``, watched."""

    read, text, json = _reads("read"), _reads("text"), _reads("json")

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._parsed(self.__wrapped__.parse(*args, **kwargs))


class AsyncRawProxy(_Raw, AsyncCloses):
    """The async clients' ``AsyncAPIResponse``, watched."""

    read, text, json = _areads("read"), _areads("text"), _areads("json")

    async def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._parsed(await self.__wrapped__.parse(*args, **kwargs))


# --- the wrappers -------------------------------------------------------------------------------------

#: A call's round, opened before the call, and what becomes of the answer (the agent gets what it returns).
Opened = tuple[Round, Callable[[Any], Any]]
#: Opens the round of a call from its ``(args, kwargs)``; None leaves the call unobserved.
Opener = Callable[[tuple[Any, ...], dict[str, Any]], Opened | None]


def round_wrapper(opener: Opener, *, awaited: bool = False, exclusive: bool = False) -> WrapperFn:
    """The wrapper of a sync (or, ``awaited``, async) method: the call made inside the round ``opener``
    opens, its answer handed on as the opener says. ``exclusive``: the entry points the call goes
    through stand down while it runs (``_core.OBSERVED_ABOVE``)."""
    if awaited:

        async def async_wrapper(
            wrapped: Callable[..., Awaitable[Any]],
            instance: Any,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
        ) -> Any:
            opened = opener(args, kwargs)
            if opened is None:
                return await wrapped(*args, **kwargs)
            round_, answer = opened
            with _observed_above() if exclusive else contextlib.nullcontext():
                response = await round_.acall(wrapped, args, kwargs)
            return answer(response)

        return async_wrapper

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        opened = opener(args, kwargs)
        if opened is None:
            return wrapped(*args, **kwargs)
        round_, answer = opened
        with _observed_above() if exclusive else contextlib.nullcontext():
            response = round_.call(wrapped, args, kwargs)
        return answer(response)

    return wrapper


@contextlib.contextmanager
def _observed_above() -> Iterator[None]:
    token = OBSERVED_ABOVE.set(True)
    try:
        yield
    finally:
        OBSERVED_ABOVE.reset(token)


def request_wrapper(observer: Observer, sdk: Sdk, *, awaited: bool) -> WrapperFn:
    """The wrapper of an SDK client's request layer: each model request it sends is a round."""

    def opener(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Opened | None:
        found = _request_of(sdk, args, kwargs) if observer.active else None
        if found is None:
            return None
        route, body = found
        round_ = observer.start(body, route.provider)
        if round_ is None:
            return None
        streamed = kwargs.get("stream") is True
        return round_, lambda response: _respond(round_, response, route, sdk, streamed)

    return round_wrapper(opener, awaited=awaited)


# --- what gets wrapped ------------------------------------------------------------------------------

#: (module, "Class.method", factory(observer) -> wrapper)
Target = tuple[str, str, Callable[[Observer], WrapperFn]]


def _types(module: str, *names: str) -> tuple[type, ...]:
    """The SDK's classes of these names (an older SDK may lack some: those never match)."""
    try:
        found = importlib.import_module(module)
    except ImportError:
        return (_Never,)
    return tuple(getattr(found, name, _Never) for name in names)


def request_layer(client: type) -> str:
    """The method of an SDK client class that runs once per call, inside the SDK's own call span.

    ``request`` in an SDK that does not trace itself. One that does opens its call span in
    ``request`` and hands the call, whose span is then current, to ``_request`` (its ``call``
    parameter), which runs the request and every retry: that is the layer to watch. An SDK
    whose ``_request`` takes no call (one attempt of an older SDK, retried by calling itself
    again) keeps ``request``.
    """
    inner = client.__dict__.get("_request")
    try:
        if inner is not None and "call" in inspect.signature(inner).parameters:
            return "_request"
    except (TypeError, ValueError):  # a signature Python cannot read: the outer layer, as before
        pass
    return "request"


def _targets(package: str, route: Callable[[str], Route | None]) -> list[Target]:
    """Both clients' request layer of one SDK: every call that reaches the provider passes there."""
    importlib.import_module(package)  # ImportError: not installed, not instrumented
    sdk = Sdk(
        route=route,
        streams=_types(package, "Stream"),
        async_streams=_types(package, "AsyncStream"),
        raw=_types(f"{package}._legacy_response", "LegacyAPIResponse") + _types(package, "APIResponse"),
        async_raw=_types(package, "AsyncAPIResponse"),
    )
    base = f"{package}._base_client"
    clients = importlib.import_module(base)
    sync_layer = request_layer(clients.SyncAPIClient)
    async_layer = request_layer(clients.AsyncAPIClient)
    return [
        (base, f"SyncAPIClient.{sync_layer}", lambda o: request_wrapper(o, sdk, awaited=False)),
        (base, f"AsyncAPIClient.{async_layer}", lambda o: request_wrapper(o, sdk, awaited=True)),
    ]


# --- responses.compact: the provider compacts a context on demand ---------------------------


def record_compact(observer: Observer, kwargs: Mapping[str, Any], response: Any) -> None:
    """A ``responses.compact`` answer: a provider compaction from what it billed to what it
    returned (the kept user messages and one compaction item). Never raises."""
    try:
        usage = getattr(response, "usage", None)
        before = getattr(usage, "input_tokens", None)
        output = getattr(response, "output", None)
        if not isinstance(before, int) or before <= 0 or not isinstance(output, list):
            return
        model = str(kwargs.get("model") or "unknown")
        fitter = observer.fitter(model)
        after = fitter.measure_request({"model": model, "input": output}, provider="openai-responses")
        task = current_task().task_type or observer.config.default_task_type
        trim = Trim(names.PERFORMER_PROVIDER, "compaction", before, after.breakdown.estimated, 0)
        observer.emitter.record_trim(
            trace.get_current_span(),
            trim,
            task_type=task,
            known_task_types=observer.config.task_types,
        )
    except Exception as exc:
        log_failure("recording a responses.compact call", exc)


def _compact_wrapper(observer: Observer) -> Callable[..., Any]:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        response = wrapped(*args, **kwargs)
        if observer.active:
            record_compact(observer, kwargs, response)
        return response

    return wrapper


def _async_compact_wrapper(observer: Observer) -> Callable[..., Any]:
    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        response = await wrapped(*args, **kwargs)
        if observer.active:
            record_compact(observer, kwargs, response)
        return response

    return wrapper


def compact_targets() -> list[Target]:
    """``responses.compact`` (sync and async), where the installed SDK has it."""
    from openai.resources import responses

    found: list[Target] = []
    if hasattr(responses.Responses, "compact"):
        found.append(("openai.resources.responses", "Responses.compact", _compact_wrapper))
    if hasattr(responses.AsyncResponses, "compact"):
        found.append(("openai.resources.responses", "AsyncResponses.compact", _async_compact_wrapper))
    return found


#: What the openai and anthropic dialects read beyond the usage: a Responses call's stored chain,
#: a Messages call's server-side edits (the chat-completions dialect needs nothing more).
DIALECTS: dict[str, Dialect] = {
    RESPONSES.provider: Dialect(transcript="input", reader=open_chain),
    MESSAGES.provider: Dialect(reader=lambda _observer, _body, result: (AnthropicCuts(), result)),
}


def openai_targets() -> list[Target]:
    return _targets("openai", openai_route)


def anthropic_targets() -> list[Target]:
    return _targets("anthropic", anthropic_route)
