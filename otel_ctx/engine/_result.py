"""The outcome of one fit: what to send, and why it looks like that."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from otel_ctx.engine._breakdown import Breakdown
from otel_ctx.engine._errors import OtelCtxError

#: What a fit decided: everything fitted, history was compacted to fit, or the pinned
#: floor alone exceeds the budget. Read these by name; the type spells the same three.
OUTCOME_FIT: Final = "fit"
OUTCOME_COMPACTED: Final = "compacted"
OUTCOME_OVERFLOW: Final = "overflow"
Outcome = Literal["fit", "compacted", "overflow"]
OUTCOMES: tuple[Outcome, ...] = (OUTCOME_FIT, OUTCOME_COMPACTED, OUTCOME_OVERFLOW)

#: Who decided what was sent: otel-ctx fitted the request, or it only measured a request
#: someone else built (observe-only paths never change the request).
MODE_FIT: Final = "fit"
MODE_OBSERVE: Final = "observe"
Mode = Literal["fit", "observe"]
MODES: tuple[Mode, ...] = (MODE_FIT, MODE_OBSERVE)
Message = dict[str, Any]


class _WeaklyReferable:
    """A ``__weakref__`` slot for a slotted dataclass (``weakref_slot=`` needs Python 3.11): a run
    finds the round a result was by a weak reference, without keeping every result alive."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, slots=True)
class FitResult(_WeaklyReferable):
    """What :meth:`ContextFitter.fit` decided.

    ``messages`` is the transcript to send, in the caller's order, with the caller's own
    objects for every message it did not touch (capped tool results and a summary are
    new objects). ``request_messages()`` adds the system prompt and skills messages in
    front, exactly as they were counted. For a whole request body (``fit_request``),
    ``request`` is the fitted body in the caller's dialect, ready to send.
    """

    messages: list[Message]
    outcome: Outcome
    breakdown: Breakdown
    task_type: str | None
    calibration: float
    dropped_turns: int = 0
    kept_turns: int = 0
    dropped_messages: int = 0
    #: Indexes into the caller's list of the messages compaction removed.
    dropped_indices: tuple[int, ...] = ()
    capped_tool_results: int = 0
    #: Uncalibrated prompt tokens of the request as sent (what the provider should report).
    raw_tokens: int = 0
    model: str = ""
    encoding: str = ""
    summary: Message | None = None
    prefix_messages: tuple[Message, ...] = field(default=())
    #: The fitted request body (``fit_request``/``measure_request``); ``None`` for ``fit``.
    request: Any = None
    #: The dialect the request was read as: ``openai``, ``openai-responses``, ``anthropic``...
    provider: str = "openai"
    #: True only when every part of the request was counted by a rule that reproduces the
    #: provider's count; False when any part is an estimate or a bound (``estimated_lines``).
    exact: bool = True
    #: Transcript rules the provider would reject the request for, found by observe-only
    #: paths (``measure``), which record rather than raise. Empty when the request is valid.
    problems: tuple[str, ...] = ()
    #: Estimated tokens of the request before history was dropped (0 when nothing was):
    #: with ``breakdown.estimated``, what a compaction removed.
    tokens_before: int = 0
    #: The model's answers in the transcript as given, before any history was dropped (runs of
    #: its messages, calls and reasoning): the request is turn ``replies + 1`` of its
    #: conversation, which is how an observer numbers a round it has no conversation id for.
    replies: int = 0
    #: Raw tokens of the request counted by an estimate or a bound rather than the provider's
    #: rule (all of them where the provider publishes no tokenizer); the calibration factor
    #: scales these only.
    inexact_tokens: int = 0
    #: Of ``inexact_tokens``, those of images and documents (estimated from their size and pages).
    inexact_media_tokens: int = 0
    #: The breakdown lines that hold an estimated part (``"user"``, ``"tool_schema"``, ...).
    estimated_lines: tuple[str, ...] = ()
    #: What the provider bills that the body does not show ("image by URL", "server tool ..."):
    #: the count is a bound, and the bill teaches the calibration nothing.
    unknowns: tuple[str, ...] = ()

    @property
    def compacted(self) -> bool:
        """True when history was dropped (also on overflow, where everything droppable went)."""
        return self.dropped_turns > 0

    def request_messages(self) -> list[Message]:
        """The full message list for the provider: system prompt, skills, then the transcript."""
        return [*self.prefix_messages, *self.messages]

    def raise_for_overflow(self) -> FitResult:
        """Raise :class:`ContextOverflow` when the pinned floor does not fit; else return self."""
        if self.outcome == OUTCOME_OVERFLOW:
            raise ContextOverflow(self)
        return self


class ContextOverflow(OtelCtxError):
    """The pinned floor alone exceeds the budget: escalate rather than send.

    Carries the whole :class:`FitResult`, so the caller can hand the work so far
    (``result.messages``) and the reason (``result.breakdown``) to a person.
    """

    def __init__(self, result: FitResult) -> None:
        self.result = result
        b = result.breakdown
        super().__init__(
            f"pinned floor overflows the budget for task type {result.task_type!r}: "
            f"{b.estimated} estimated tokens against a budget of {b.budget} "
            f"({-b.remaining} over; transcript {b.transcript}, tool schema {b.tool_schema}, "
            f"system prompt {b.system_prompt}, skills {b.skills})"
        )
