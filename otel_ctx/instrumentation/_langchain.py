"""LangChain: every chat-model call as a budget round, from a callback handler.

``otel_ctx.instrument()`` attaches :class:`OtelCtxCallbackHandler` globally (through
LangChain's configure hook, so every chain, agent and chat model gets it with no code).
It can also be passed by hand: ``model.invoke(messages, config={"callbacks": [handler]})``.

When the chat model calls an SDK otel-ctx also wraps (``ChatOpenAI`` calls the OpenAI
SDK), the SDK call's exact measure is the round and the handler records nothing, so a
call is never counted twice. For any other chat model the handler measures the
messages LangChain sent (as Chat Completions messages) when the call ends, with the
usage the model reported.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, convert_to_openai_messages
from opentelemetry import context as otel_context
from opentelemetry.context import Context

from otel_ctx._pricing import Usage
from otel_ctx.instrumentation._core import FRAMEWORK_CALL, FrameworkCall, Observer, int_or_0
from otel_ctx.instrumentation._framework_trims import FrameworkTrims
from otel_ctx.instrumentation._state import active_observer
from otel_ctx.telemetry._emitter import log_failure

_MAX_PENDING = 10_000


@dataclass(slots=True)
class _Pending:
    messages: Sequence[BaseMessage]
    params: Mapping[str, Any]
    metadata: Mapping[str, Any]
    start_time: int
    context: Context
    call: FrameworkCall
    token: Token[FrameworkCall | None] | None = None


def usage_of(response: Any) -> Usage | None:
    """The usage LangChain normalised onto the answer (``usage_metadata``), else the provider's raw one."""
    try:
        message = response.generations[0][0].message
    except (AttributeError, IndexError, TypeError):
        message = None
    meta = getattr(message, "usage_metadata", None)
    if isinstance(meta, Mapping) and int_or_0(meta.get("input_tokens")):
        details = meta.get("input_token_details") or {}
        return Usage.reported(
            input_tokens=int_or_0(meta.get("input_tokens")),  # LangChain's total: cached tokens included
            output_tokens=int_or_0(meta.get("output_tokens")),
            cached_input_tokens=int_or_0(details.get("cache_read")),
            cache_creation_input_tokens=int_or_0(details.get("cache_creation")),
        )
    raw = (getattr(response, "llm_output", None) or {}).get("token_usage")
    if isinstance(raw, Mapping) and int_or_0(raw.get("prompt_tokens")):
        return Usage.reported(
            input_tokens=int_or_0(raw.get("prompt_tokens")),
            output_tokens=int_or_0(raw.get("completion_tokens")),
        )
    return None


def _tools(params: Mapping[str, Any]) -> list[Any] | None:
    tools = params.get("tools")
    if not tools:
        return None
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return [convert_to_openai_tool(t) for t in tools]


class OtelCtxCallbackHandler(BaseCallbackHandler):
    """Chat model start: remember the request; end: measure it (unless the SDK call did) with its usage.

    ``observer`` defaults to the active instrumentation's; with none active it does nothing.
    """

    run_inline = True  # in the caller's context, so the SDK call inside can claim the round
    raise_error = False

    def __init__(self, observer: Observer | None = None) -> None:
        self._observer = observer
        self._pending: OrderedDict[UUID, _Pending] = OrderedDict()
        self._lock = threading.Lock()
        self._trims = FrameworkTrims()
        self.enabled = True

    def _target(self) -> Observer | None:
        if not self.enabled:
            return None
        if self._observer is not None:
            return self._observer
        return active_observer()

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A graph node starts: its place in the run, and a trimming hook's messages before."""
        try:
            if self._target() is None:
                return
            name = kwargs.get("name") or (serialized or {}).get("name")
            self._trims.chain_start(run_id, parent_run_id, name, inputs)
        except Exception as exc:
            log_failure("observing a LangChain chain", exc)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A trimming hook returned: what it cut is a framework trim of the run's next model call."""
        try:
            observer = self._target()
            if observer is None:
                return
            self._trims.chain_end(run_id, outputs, observer.fitter("unknown"))
        except Exception as exc:
            log_failure("observing a LangChain framework trim", exc)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if self._target() is None or not messages:
                return
            call = FrameworkCall()
            try:
                observer = self._target()
                fitter = observer.fitter("unknown") if observer is not None else None
                call.trims = self._trims.model_start(parent_run_id, messages[0], fitter)
            except Exception as exc:
                log_failure("observing a LangChain framework trim", exc)
            pending = _Pending(
                messages=messages[0],
                params=kwargs.get("invocation_params") or {},
                metadata=metadata or {},
                start_time=time.time_ns(),
                context=otel_context.get_current(),
                call=call,
            )
            pending.token = FRAMEWORK_CALL.set(call)
            with self._lock:
                self._pending[run_id] = pending
                while len(self._pending) > _MAX_PENDING:  # a run whose end never came
                    self._pending.popitem(last=False)
        except Exception as exc:
            log_failure("observing a LangChain chat model", exc)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, response, None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, None, error)

    def _end(self, run_id: UUID, response: Any, error: BaseException | None) -> None:
        with self._lock:
            pending = self._pending.pop(run_id, None)
        if pending is None:
            return
        if pending.token is not None:
            try:
                FRAMEWORK_CALL.reset(pending.token)
            except ValueError:  # ended in another context than it started in
                FRAMEWORK_CALL.set(None)
        if pending.call.claimed:
            return
        observer = self._target()
        if observer is None:
            return
        try:
            params, meta = pending.params, pending.metadata
            body: dict[str, Any] = {
                "model": str(
                    params.get("model") or params.get("model_name") or meta.get("ls_model_name") or "unknown"
                ),
                "messages": convert_to_openai_messages(list(pending.messages)),
            }
            tools = _tools(params)
            if tools:
                body["tools"] = tools
            for key in ("max_completion_tokens", "max_tokens"):
                if isinstance(params.get(key), int):
                    body[key] = params[key]
                    break
        except Exception as exc:
            log_failure("reading a LangChain chat model's request", exc)
            return
        round_ = observer.start(
            body, "openai", start_time=pending.start_time, parent=pending.context, framework=True
        )
        if round_ is None:
            return
        round_.detach()
        round_.record_trims(pending.call.trims)
        try:
            usage = usage_of(response) if response is not None else None
        except Exception as exc:
            log_failure("reading a LangChain chat model's usage", exc)
            usage = None
        round_.finish(usage, error)


#: The handler LangChain's configure hook adds to every run (enabled while instrumented).
GLOBAL_HANDLER = OtelCtxCallbackHandler()
GLOBAL_HANDLER.enabled = False
_HOOK_VAR: ContextVar[OtelCtxCallbackHandler | None] = ContextVar(
    "otel_ctx_langchain", default=GLOBAL_HANDLER
)
_registered = False
_register_lock = threading.Lock()


def attach_globally(observer: Observer | None = None) -> OtelCtxCallbackHandler:
    """Add the handler to every LangChain run in this process (registered once; enabled now)."""
    global _registered
    with _register_lock:
        if not _registered:
            from langchain_core.tracers.context import register_configure_hook

            register_configure_hook(_HOOK_VAR, True)
            _registered = True
        GLOBAL_HANDLER._observer = observer
        GLOBAL_HANDLER.enabled = True
    return GLOBAL_HANDLER


def detach_globally() -> None:
    """Stop the global handler (LangChain keeps the hook; the handler then does nothing)."""
    with _register_lock:
        GLOBAL_HANDLER.enabled = False
        GLOBAL_HANDLER._observer = None
