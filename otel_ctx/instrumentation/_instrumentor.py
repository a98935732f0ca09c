"""The instrumentor: what ``otel_ctx.instrument()`` and ``opentelemetry-instrument`` run.

It wires the rest together and nothing imports it back: it builds the observer, wraps each
installed SDK's methods with the per-provider readers (which take the observer it hands
them), and registers the observer and the task block's run hook in
:mod:`otel_ctx.instrumentation._state`, where the task context and the global LangChain
handler find them. The package ``__init__`` only re-exports.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from otel_ctx._models import ModelTable
from otel_ctx.instrumentation._bedrock import bedrock_targets
from otel_ctx.instrumentation._config import Config, PolicyLike
from otel_ctx.instrumentation._core import Observer
from otel_ctx.instrumentation._google_genai import DIALECTS as GOOGLE_DIALECTS
from otel_ctx.instrumentation._google_genai import google_targets
from otel_ctx.instrumentation._litellm import litellm_targets
from otel_ctx.instrumentation._sdk import DIALECTS as SDK_DIALECTS
from otel_ctx.instrumentation._sdk import (
    Target,
    WrapperFn,
    anthropic_targets,
    compact_targets,
    openai_targets,
)
from otel_ctx.instrumentation._state import activate, active_observer, deactivate
from otel_ctx.instrumentation._ticket import run_opener
from otel_ctx.telemetry._emitter import Emitter, default_emitter, log_failure

#: The package's name: what users configure logging for.
logger = logging.getLogger("otel_ctx.instrumentation")

#: The keyword arguments of ``instrument()`` that configure otel-ctx, :meth:`Config.from_env`'s
#: (the rest are OpenTelemetry's).
CONFIG_KEYS = tuple(inspect.signature(Config.from_env).parameters)


class OtelCtxInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Observe-only wrappers for the OpenAI, Anthropic and Google Gen AI SDKs, LiteLLM, boto3's
    Bedrock runtime, and a global LangChain handler.

    ``instrument(tracer_provider=..., meter_provider=..., policies=..., ...)``; each SDK
    that is installed is wrapped, the others are skipped. ``uninstrument()`` puts the
    SDKs' own methods back.
    """

    _patched: list[tuple[Any, str, Any]]

    @property
    def _observer(self) -> Observer | None:
        # Kept in the shared state, not here: the modules that read it never import the instrumentor.
        return active_observer()

    def instrumentation_dependencies(self) -> Collection[str]:
        # Any one of the SDKs is enough; each is wrapped only if it imports.
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        config = Config.from_env(**{k: kwargs[k] for k in CONFIG_KEYS if k in kwargs})
        tracer_provider = kwargs.get("tracer_provider")
        meter_provider = kwargs.get("meter_provider")
        emitter = (
            Emitter(tracer_provider=tracer_provider, meter_provider=meter_provider)
            if tracer_provider is not None or meter_provider is not None
            else default_emitter()
        )
        observer = Observer(config, emitter, {**SDK_DIALECTS, **GOOGLE_DIALECTS})
        activate(observer, run_opener(observer))
        self._patched = []
        compact: Callable[[], list[Target]] = compact_targets
        for sdk, targets in (
            ("openai", openai_targets),
            ("openai", compact),
            ("anthropic", anthropic_targets),
            ("google-genai", google_targets),
        ):
            try:
                found = targets()
            except ImportError:
                logger.debug("otel-ctx: %s is not installed; not instrumented", sdk)
                continue
            for module, name, factory in found:
                self._wrap(module, name, factory(observer))
        self._when_imported("litellm", litellm_targets, observer)
        # boto3's clients all call through botocore: wrapped when the agent imports it, so a
        # process that never talks to AWS does not pay for importing botocore.
        self._when_imported("botocore.client", bedrock_targets, observer)
        if config.langchain:
            try:
                from otel_ctx.instrumentation._langchain import attach_globally
            except ImportError:
                logger.debug("otel-ctx: langchain-core is not installed; no callback handler attached")
            else:
                attach_globally(observer)

    def _when_imported(self, package: str, targets: Callable[[], list[Target]], observer: Observer) -> None:
        """Wrap ``package`` when the agent imports it (now, if it already has).

        Importing it ourselves would run its import-time work in every instrumented process,
        used or not: LiteLLM's fetches a price map over the network (and retries when there is
        none) on import. Once uninstrumented, the hook does nothing.
        """

        def hook(_module: Any) -> None:
            if self._observer is not observer or not observer.active:
                return
            try:
                for module, name, factory in targets():
                    self._wrap(module, name, factory(observer))
            except Exception as exc:  # an SDK release we cannot wrap: the agent goes on unobserved
                log_failure(f"instrumenting {package}", exc)

        # The top-level package only: finding a submodule's spec would import its package.
        if importlib.util.find_spec(package.partition(".")[0]) is None:
            logger.debug("otel-ctx: %s is not installed; not instrumented", package)
            return
        wrapt.register_post_import_hook(hook, package)

    def _wrap(self, module: str, name: str, wrapper: WrapperFn) -> None:
        # "Class.method", or a module-level function's bare name (LiteLLM's entry points).
        class_name, _, method = name.rpartition(".")
        found = importlib.import_module(module)
        owner = getattr(found, class_name) if class_name else found
        wrapt.wrap_function_wrapper(owner, method, wrapper)
        self._patched.append((owner, method, wrapper))

    def _uninstrument(self, **kwargs: Any) -> None:
        observer = self._observer
        if observer is not None:
            observer.active = False  # a wrapper that cannot be taken out passes calls straight through
        for owner, method, wrapper in reversed(getattr(self, "_patched", [])):
            current = owner.__dict__.get(method)
            if isinstance(current, wrapt.FunctionWrapper) and current._self_wrapper is wrapper:
                setattr(owner, method, current.__wrapped__)
            else:
                logger.info(
                    "otel-ctx: %s.%s was wrapped again after otel-ctx; its otel-ctx layer now only passes "
                    "calls through",
                    owner.__name__,
                    method,
                )
        self._patched = []
        try:
            from otel_ctx.instrumentation._langchain import detach_globally
        except ImportError:
            pass
        else:
            detach_globally()
        deactivate()


_lock = threading.Lock()


def instrument(
    *,
    policies: Mapping[str, PolicyLike] | None = None,
    default_task_type: str | None = None,
    reserved_output: int | None = None,
    context_window: int | None = None,
    max_conversations: int | None = None,
    models: ModelTable | Mapping[str, Any] | None = None,
    langchain: bool | None = None,
    **otel: Any,
) -> OtelCtxInstrumentor:
    """Instrument the installed provider SDKs (once; later calls do nothing until ``uninstrument()``).

    Anything not given comes from the environment (``OTEL_CTX_*``, see docs/integrations.md), then
    the defaults. ``otel`` takes OpenTelemetry's own ``tracer_provider`` and ``meter_provider``.
    """
    given: dict[str, Any] = {
        "policies": policies,
        "default_task_type": default_task_type,
        "reserved_output": reserved_output,
        "context_window": context_window,
        "max_conversations": max_conversations,
        "models": models,
        "langchain": langchain,
    }
    with _lock:
        instrumentor = OtelCtxInstrumentor()
        instrumentor.instrument(**{k: v for k, v in given.items() if v is not None}, **otel)
        return instrumentor


def uninstrument() -> None:
    """Put the SDKs' own methods back and detach the LangChain handler."""
    with _lock:
        OtelCtxInstrumentor().uninstrument()
