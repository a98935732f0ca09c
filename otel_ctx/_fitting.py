"""The request-level entry points: the fit engine with each request's dialect picked for it.

:class:`ContextFitter` (``otel_ctx.ContextFitter``) asks :mod:`otel_ctx._dialects` which
adapter reads a request and hands the engine one :class:`~otel_ctx.engine._request.FitRequest`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otel_ctx import _dialects as dialects
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._fitter import ExactCounter, Fitter, Summarizer
from otel_ctx.engine._request import FitOptions, FitRequest, MeasureOptions, Pinned, RequestParts
from otel_ctx.engine._result import FitResult
from otel_ctx.engine._sources import SourcesLike

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Unpack

__all__ = [
    "ContextFitter",
    "ExactCounter",
    "FitOptions",
    "MeasureOptions",
    "Pinned",
    "RequestParts",
    "Summarizer",
]


class ContextFitter(Fitter):
    """Fits agent requests to per-task-type budgets and explains every decision.

    ``policies`` is one :class:`BudgetPolicy` for every request, or a mapping from
    task type to policy (with an optional ``default`` policy or key for task types
    the mapping does not name). The fitter keeps a bounded token cache, so reuse one
    fitter across the rounds of a conversation (and across conversations); it is
    safe to share between threads.

    ``exact_counter`` is an optional callable ``(provider, body) -> tokens`` that counts
    a request exactly (a provider's token-counting endpoint, say): ``count_request``
    returns its figure, and ``fit_request``/``measure_request`` scale their estimate of
    that request up to it. Nothing calls the network unless you pass one.
    """

    # -- bare transcripts --------------------------------------------------------------------
    # Each builder names every FitRequest field its keywords do not cover, so a keyword the
    # method does not take is refused with a TypeError, as by a spelled-out signature. An
    # unknown task type is named before the messages are read.

    def count(
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] | None = None,
        system_prompt: str | None = None,
    ) -> int:
        """Prompt tokens of the request as given, as the provider counts them (uncalibrated)."""
        adapter = dialects.adapter_for_items(messages)
        return self.tokens(FitRequest(adapter, items=messages, tools=tools, system_prompt=system_prompt))

    def measure(
        self,
        messages: Sequence[Any],
        *,
        policy: BudgetPolicy | None = None,
        **options: Unpack[MeasureOptions],
    ) -> FitResult:
        """The breakdown of a request exactly as given: nothing capped, nothing dropped.

        For agents whose history is trimmed by someone else; the outcome is ``fit`` or
        ``overflow``, and ``messages`` is a copy of the caller's list. A transcript the
        provider would reject is not an error here: ``problems`` says what is wrong.
        ``policy`` measures against that budget instead of the task type's.
        """
        if policy is None:
            self.policy_for(options.get("task_type"))
        adapter = dialects.adapter_for_items(messages)
        req = FitRequest(
            adapter, items=messages, body=None, pinned=None, policy=policy, observe=True, **options
        )
        return self.decide(req)

    def fit(self, messages: Sequence[Any], **options: Unpack[FitOptions]) -> FitResult:
        """Fit one request to ``task_type``'s budget. Never mutates ``messages``.

        ``messages`` are Chat Completions messages (dicts or the SDK's objects) or
        LangChain messages.

        1. Caps every tool result above the policy's ``tool_result_cap``.
        2. If the estimate fits the budget: outcome ``fit``.
        3. Else drops whole turns (an assistant message with its tool calls goes with
           all their results) middle-first (or oldest-first), never the pinned floor.
        4. If the floor alone does not fit: outcome ``overflow``, with the floor as the
           messages, so the caller can escalate with the work so far.

        A transcript the provider would reject (a tool call never answered, a result
        answering no call) raises :class:`TranscriptRuleError` naming the message.
        """
        self.policy_for(options.get("task_type"))
        adapter = dialects.adapter_for_items(messages)
        req = FitRequest(adapter, items=messages, body=None, policy=None, observe=False, **options)
        return self.decide(req)

    # -- whole request bodies ----------------------------------------------------------------

    def count_request(self, body: Any, *, provider: str | None = None) -> int:
        """Prompt tokens of a whole request body (uncalibrated); exact counter first, if given."""
        return self.tokens(FitRequest(dialects.for_body(body, provider), body=body))

    def fit_request(
        self,
        body: Any,
        *,
        provider: str | None = None,
        task_type: str | None = None,
        pinned: Pinned = None,
        skills: SourcesLike = None,
        snippets: SourcesLike = None,
    ) -> FitResult:
        """Fit a whole request body; ``result.request`` is the fitted body in its own dialect.

        ``provider`` is ``"openai"`` (Chat Completions), ``"openai-responses"`` or
        ``"anthropic"``; ``None`` detects it and raises :class:`UnknownProviderError` when
        the body could be more than one. ``pinned`` indexes the body's transcript items.
        Snippets join the system prompt and skills are added as their own block, the way
        the dialect sends a system prompt. The caller's body is never mutated.
        """
        adapter = dialects.for_body(body, provider)
        return self.decide(
            FitRequest(
                adapter, body=body, task_type=task_type, pinned=pinned, skills=skills, snippets=snippets
            )
        )

    def measure_request(
        self,
        body: Any,
        *,
        provider: str | None = None,
        task_type: str | None = None,
        policy: BudgetPolicy | None = None,
    ) -> FitResult:
        """The breakdown of a whole request body as given: nothing capped or dropped.

        Observe-only: a transcript the provider would reject is recorded on
        ``result.problems``, not raised; ``result.request`` is the body itself.
        ``policy`` measures against that budget instead of the task type's (the
        instrumentor measures each call against its own model window and output reserve).
        """
        adapter = dialects.for_body(body, provider)
        return self.decide(FitRequest(adapter, body=body, task_type=task_type, policy=policy, observe=True))
