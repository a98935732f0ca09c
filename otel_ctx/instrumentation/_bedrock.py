"""Amazon Bedrock through boto3: every ``bedrock-runtime`` ``converse``, ``converse_stream``,
``invoke_model`` and ``invoke_model_with_response_stream`` call.

boto3 builds its client methods at run time, so there is no method of a class to wrap per
operation: the wrapper sits on ``botocore.client.BaseClient._make_api_call``, which every
client's every call goes through, and steps aside at once (one attribute read and a set
lookup) for any service or operation other than these four. It runs before botocore
serialises and signs the request, and reads the parameters only: what goes on the wire is
botocore's own work on the caller's parameters, unchanged.

What is measured, under ``provider="bedrock"`` with the call's ``modelId`` as the model:
Converse's parameters as its body; InvokeModel's ``body`` decoded from its JSON (a copy: the
caller's bytes are sent as they are). A body given as a file-like object is never read (that
would consume the caller's stream): its round is recorded as unmeasured, with its usage.

The usage: Converse's ``usage`` (``inputTokens`` plus the cache reads and writes, which
Bedrock reports apart), ConverseStream's ``metadata`` event; InvokeModel's
``x-amzn-bedrock-input-token-count`` answer headers (and the cache read and write headers
Claude's answers carry), which hold the same counts as the body's ``usage`` without reading the
body the caller is handed; InvokeModelWithResponseStream's ``amazon-bedrock-invocationMetrics``
in its last chunk. Streams are handed back behind a proxy that passes every event through.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from otel_ctx._pricing import Usage
from otel_ctx.instrumentation._core import Observer, Round, field_of, int_or_0
from otel_ctx.instrumentation._sdk import Target, WrapperFn
from otel_ctx.instrumentation._streams import Closes, Watch, Watcher
from otel_ctx.telemetry._emitter import log_failure

PROVIDER = "bedrock"
SERVICE = "bedrock-runtime"
#: The operations observed, and whether the answer is an event stream.
OPERATIONS = {
    "Converse": False,
    "ConverseStream": True,
    "InvokeModel": False,
    "InvokeModelWithResponseStream": True,
}
#: Converse parameters that are not part of what the model is sent.
_NOT_SENT = frozenset({"modelId", "requestMetadata", "guardrailConfig", "performanceConfig", "serviceTier"})
#: InvokeModel's answer headers with its counts.
_INPUT_HEADER = "x-amzn-bedrock-input-token-count"
_OUTPUT_HEADER = "x-amzn-bedrock-output-token-count"
_CACHE_READ_HEADER = "x-amzn-bedrock-cache-read-input-token-count"
_CACHE_WRITE_HEADER = "x-amzn-bedrock-cache-write-input-token-count"
#: The counts Bedrock adds to the last chunk of an InvokeModel stream.
_METRICS = "amazon-bedrock-invocationMetrics"


def _service(client: Any) -> str | None:
    meta = getattr(client, "meta", None)
    model = getattr(meta, "service_model", None)
    name = getattr(model, "service_name", None)
    return name if isinstance(name, str) else None


def _billed(fresh: int, read: int, written: int, output: int) -> Usage | None:
    """Bedrock reports the cached input apart from the rest (read from and written to the cache),
    in every form it answers with; the bill's input is all three. Nothing reported is no usage."""
    if fresh + read + written <= 0:
        return None
    return Usage.reported(fresh + read + written, output, read, written)


def converse_usage(usage: Any) -> Usage | None:
    """Converse's ``usage``: ``inputTokens`` leaves out the cached part, which is reported apart
    (``cacheReadInputTokens``, ``cacheWriteInputTokens``); the bill's input is all three."""
    if not isinstance(usage, Mapping):
        return None
    return _billed(
        int_or_0(usage.get("inputTokens")),
        int_or_0(usage.get("cacheReadInputTokens")),
        int_or_0(usage.get("cacheWriteInputTokens")),
        int_or_0(usage.get("outputTokens")),
    )


def _header_int(headers: Mapping[str, Any], name: str) -> int:
    value = headers.get(name)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def invoke_usage(response: Any) -> Usage | None:
    """InvokeModel's counts, from its answer headers."""
    metadata = field_of(response, "ResponseMetadata")
    headers = field_of(metadata, "HTTPHeaders") if metadata is not None else None
    if not isinstance(headers, Mapping):
        return None
    return _billed(
        _header_int(headers, _INPUT_HEADER),
        _header_int(headers, _CACHE_READ_HEADER),
        _header_int(headers, _CACHE_WRITE_HEADER),
        _header_int(headers, _OUTPUT_HEADER),
    )


def _watch_converse(event: Any, seen: Usage | None) -> Usage | None:
    """ConverseStream: the ``metadata`` event carries the usage."""
    metadata = event.get("metadata") if isinstance(event, Mapping) else None
    return converse_usage(metadata.get("usage")) if isinstance(metadata, Mapping) else None


def _watch_invoke(event: Any, seen: Usage | None) -> Usage | None:
    """InvokeModelWithResponseStream: a chunk's JSON bytes; the last carries Bedrock's metrics."""
    chunk = event.get("chunk") if isinstance(event, Mapping) else None
    data = chunk.get("bytes") if isinstance(chunk, Mapping) else None
    if not isinstance(data, (bytes, bytearray)) or _METRICS.encode() not in data:
        return None
    metrics = json.loads(data).get(_METRICS)
    if not isinstance(metrics, Mapping):
        return None
    return _billed(
        int_or_0(metrics.get("inputTokenCount")),
        int_or_0(metrics.get("cacheReadInputTokenCount")),
        int_or_0(metrics.get("cacheWriteInputTokenCount")),
        int_or_0(metrics.get("outputTokenCount")),
    )


class EventStreamProxy(Closes):
    """botocore's ``EventStream`` behind a proxy: every event passed on as it comes, watched for
    the usage; the round ends when the stream is read to its end, fails or is closed."""

    def __iter__(self) -> Iterator[Any]:
        watch: Watch = self._self_watch
        try:
            for event in self.__wrapped__:
                watch.see(event)
                yield event
        except GeneratorExit:
            watch.done()  # the agent stopped reading: the round ends with what it saw, no error
            raise
        except BaseException as exc:
            watch.done(exc)
            raise
        watch.done()


def _measured(operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The request as the model reads it, with ``modelId`` as its model (a new dict)."""
    model = params.get("modelId")
    if operation.startswith("Converse"):
        body = {k: v for k, v in params.items() if k not in _NOT_SENT}
    else:
        raw = params.get("body")
        if isinstance(raw, (bytes, bytearray, str)):
            decoded = json.loads(raw)
            body = dict(decoded) if isinstance(decoded, Mapping) else {"body": decoded}
        else:
            body = {}  # a file-like body is never read here: the round is recorded unmeasured
    body["model"] = model if isinstance(model, str) else "unknown"
    return body


def _answer(round_: Round, response: Any, operation: str) -> Any:
    """The answer as botocore returned it; an event stream behind a watching proxy."""
    try:
        if OPERATIONS[operation]:
            key = "stream" if operation == "ConverseStream" else "body"
            stream = response.get(key) if isinstance(response, Mapping) else None
            if stream is not None:
                watcher: Watcher = _watch_converse if operation == "ConverseStream" else _watch_invoke
                return {**response, key: EventStreamProxy(stream, Watch(round_, watcher))}
            round_.finish(None)
        elif operation == "Converse":
            round_.finish(converse_usage(field_of(response, "usage")))
        else:
            round_.finish(invoke_usage(response))
    except Exception as exc:
        log_failure("reading a provider response", exc)
        round_.finish(None)
    return response


def _open(observer: Observer, client: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Round | None:
    """The round of a Bedrock model call, or None for any other call (or when it cannot open)."""
    operation = args[0] if args else kwargs.get("operation_name")
    if operation not in OPERATIONS or not observer.active or _service(client) != SERVICE:
        return None
    params = args[1] if len(args) > 1 else kwargs.get("api_params")
    if not isinstance(params, Mapping):
        return None
    try:
        body = _measured(operation, params)
    except Exception:
        # A body that is not JSON: InvokeModel's own answer says what is wrong with it; the
        # round is recorded as one that could not be measured.
        body = {"model": str(params.get("modelId", "unknown"))}
    return observer.start(body, PROVIDER)


def _wrapper(observer: Observer) -> WrapperFn:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            round_ = _open(observer, instance, args, kwargs)
        except Exception as exc:  # never the agent's problem
            log_failure("observing a bedrock-runtime call", exc)
            round_ = None
        if round_ is None:
            return wrapped(*args, **kwargs)
        response = round_.call(wrapped, args, kwargs)
        return _answer(round_, response, args[0] if args else kwargs["operation_name"])

    return wrapper


def bedrock_targets() -> list[Target]:
    """botocore's one entry point of every client call (ImportError when botocore is absent)."""
    import botocore.client  # noqa: F401

    return [("botocore.client", "BaseClient._make_api_call", _wrapper)]
