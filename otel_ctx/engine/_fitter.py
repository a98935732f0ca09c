"""The fit: cap tool results, count, compact the middle, keep the floor, explain.

If a request plus the room its answer needs does not fit the task type's budget, whole
turns are dropped from the middle of the history (where the model attends least). The
pinned floor (leading system messages, the original ticket, caller pins, the newest turn
and the latest tool results) is never dropped; if it alone does not fit, the outcome is
``overflow`` and the caller escalates instead of letting the provider truncate.

The engine decides on the request model alone: the :class:`FitRequest` names the adapter
that reads it and writes the result back, so no provider and no OpenTelemetry is known here.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tiktoken

import otel_ctx.engine._dialect as dialect
from otel_ctx.engine._accounting import Tally
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._cache import BoundedCache
from otel_ctx.engine._calibration import SCALE, UNCALIBRATED, Calibration, Learner, check_reported_tokens
from otel_ctx.engine._capping import Capper
from otel_ctx.engine._compaction import Plan, Strategy, compact, drop_next
from otel_ctx.engine._errors import (
    InvalidRequestError,
    OtelCtxError,
    TooDeeplyNestedError,
    UnknownTaskTypeError,
    shown,
)
from otel_ctx.engine._model import Block, RequestModel, Turn, units
from otel_ctx.engine._request import FitRequest, Pinned
from otel_ctx.engine._result import OUTCOME_COMPACTED, OUTCOME_FIT, OUTCOME_OVERFLOW, FitResult, Outcome
from otel_ctx.engine._sources import SourceInfo, as_sources
from otel_ctx.engine._tokens import TokenCounter, resolve_encoding

if TYPE_CHECKING:
    from otel_ctx.engine._dialect import Adapter, ReadContext, Reading

#: Receives the dropped messages in order; returns the message (or text) that replaces them.
Summarizer = Callable[[list[Any]], Any]
#: Counts a whole request exactly (for example with a provider's token-counting
#: endpoint): called with the provider name and the request body as it will be sent.
ExactCounter = Callable[[str, Any], int]


class Fitter:
    """The fit engine: :meth:`decide` fits or measures a :class:`FitRequest`, :meth:`tokens` counts it.

    Agents use :class:`otel_ctx.ContextFitter`, which picks each request's adapter; its
    docstring says what the constructor's arguments mean.
    """

    def __init__(
        self,
        policies: BudgetPolicy | Mapping[str, BudgetPolicy],
        *,
        default: BudgetPolicy | str | None = None,
        model: str = "gpt-4o",
        encoding: str | tiktoken.Encoding | None = None,
        strategy: Strategy = "middle",
        summarizer: Summarizer | None = None,
        cache_entries: int = 16_384,
        cache_chars: int = 16_000_000,
        exact_counter: ExactCounter | None = None,
    ) -> None:
        self._policies: dict[str, BudgetPolicy] = {}
        self._default: BudgetPolicy | None = None
        if isinstance(policies, BudgetPolicy):
            self._default = policies
        elif isinstance(policies, Mapping):
            for key, policy in policies.items():
                if not isinstance(key, str) or not isinstance(policy, BudgetPolicy):
                    raise InvalidRequestError(
                        f"policies[{shown(key)}]", "must map a task-type string to a BudgetPolicy"
                    )
                self._policies[key] = policy
        else:
            raise InvalidRequestError(
                "policies", f"must be a BudgetPolicy or a mapping of them, got {type(policies).__name__}"
            )
        if isinstance(default, str):
            if default not in self._policies:
                raise UnknownTaskTypeError(default, list(self._policies))
            self._default = self._policies[default]
        elif default is not None:
            if not isinstance(default, BudgetPolicy):
                raise InvalidRequestError("default", "must be a BudgetPolicy or a task-type key")
            self._default = default
        if strategy not in ("middle", "oldest"):
            raise InvalidRequestError("strategy", f"must be 'middle' or 'oldest', got {shown(strategy)}")
        if exact_counter is not None and not callable(exact_counter):
            raise InvalidRequestError("exact_counter", "must be a callable (provider, body) -> int")
        self.strategy: Strategy = strategy
        self.summarizer = summarizer
        self.exact_counter = exact_counter
        self.model = model
        self._resolved = resolve_encoding(model, encoding)
        self.counter = TokenCounter(
            self._resolved,
            model=model,
            cache=BoundedCache(max_entries=cache_entries, max_chars=cache_chars),
        )
        self._capper = Capper(self.counter, max_chars=cache_chars)
        self._cal: Calibration = UNCALIBRATED
        self._learner = Learner()
        self._lock = threading.Lock()

    # -- configuration ---------------------------------------------------------------------

    @property
    def encoding_name(self) -> str:
        """The tiktoken encoding counts are made with (``cl100k_base``, ...)."""
        return self._resolved.name

    @property
    def encoding_fallback(self) -> bool:
        """True when the model's own encoding is not installed and a fallback counts."""
        return self._resolved.fallback

    @property
    def task_types(self) -> tuple[str, ...]:
        """The task types with a policy of their own (telemetry bounds its labels to these)."""
        return tuple(self._policies)

    @property
    def calibration(self) -> float:
        """Factor (>= 1.0) every estimate is scaled by, learned from reported usage."""
        return self._cal.factor

    @calibration.setter
    def calibration(self, factor: float) -> None:
        self._cal = Calibration.of(factor)

    def clear_cache(self) -> None:
        """Forget every counted text and capped tool result (the next fit counts cold)."""
        self.counter.cache.clear()
        for cache in self.counter.text_caches.values():
            cache.clear()
        self.counter.dialect_state.clear()
        self._capper.clear()

    def policy_for(self, task_type: str | None) -> BudgetPolicy:
        """The policy of ``task_type``, else the default; :class:`UnknownTaskTypeError` if none."""
        if task_type is not None:
            policy = self._policies.get(task_type)
            if policy is not None:
                return policy
        if self._default is not None:
            return self._default
        raise UnknownTaskTypeError(task_type, list(self._policies))

    # -- entry points --------------------------------------------------------------------------

    def cap_tool_result(self, text: str, *, task_type: str | None = None) -> str:
        """Cut a tool result to the policy's cap, with a visible marker; unchanged if within it."""
        if not isinstance(text, str):
            raise InvalidRequestError("text", f"must be a string, got {type(text).__name__}")
        cap = self.policy_for(task_type).tool_result_cap
        return text if cap is None else self._capper(text, cap)

    def tokens(self, request: FitRequest) -> int:
        """Prompt tokens of the request as given (uncalibrated); a body's by the exact counter, if given."""
        if request.items is None and self.exact_counter is not None:
            return self._exact(request.adapter.provider, request.body)
        # Counting only: a rule the provider does not enforce is no reason to refuse a count.
        reading = self._read(request, dialect.ReadContext(self.counter, strict=False))
        self._add_blocks(request.adapter, reading.model, request)
        return reading.model.total

    def decide(self, request: FitRequest) -> FitResult:
        """Fit the request to its budget (or, with ``request.observe``, measure it as given)."""
        policy = request.policy if request.policy is not None else self.policy_for(request.task_type)
        if request.observe:
            ctx = dialect.ReadContext(self.counter, strict=False)
        else:
            ctx = dialect.ReadContext(self.counter, cap=self._cap_for(policy), cap_key=policy.tool_result_cap)
        reading = self._read(request, ctx)
        adapter, model = request.adapter, reading.model
        cal, exact = self._calibration_for(adapter, reading)
        added, sources = self._add_blocks(adapter, model, request)
        ceiling = cal.ceiling(policy.budget)
        if request.observe:
            total = model.total
            verdict: Outcome = OUTCOME_FIT if total <= ceiling else OUTCOME_OVERFLOW
            plan = Plan(units(model.turns, model.known.units), [], [], total, verdict)
        else:
            plan = compact(model, ceiling, _pinned_turns(request.pinned, reading.items, model), self.strategy)
        summary: Any = None
        summary_turn: Turn | None = None
        if self.summarizer is not None and plan.outcome == OUTCOME_COMPACTED:
            plan, summary, summary_turn = self._summarized(adapter, reading, plan, ceiling)
        decision = _Decision(policy, cal, exact, plan, added, sources, summary, summary_turn)
        return self._result(request, reading, tuple(ctx.problems), decision)

    # -- calibration -----------------------------------------------------------------------

    def observe_usage(self, result: FitResult, input_tokens: int) -> float:
        """Learn from the provider's reported input tokens; returns reported ÷ estimated.

        The factor scales only the parts counted by an estimate, so it learns only what those
        parts cost: the bill less the parts counted exactly, over the estimated text. A bill it
        cannot explain that way teaches nothing: a request counted exactly throughout (nothing
        to learn), one holding a bound (``result.unknowns``: server tools, media by URL), or
        one whose estimate includes images or documents (their error is not the text's). The
        factor never goes below 1.0: an estimate may err high (wasted room), not low
        (truncation). ``input_tokens`` is everything the provider billed as input (with
        Anthropic's prompt caching: ``input_tokens`` plus the cache creation and read counts).
        """
        reported = check_reported_tokens(input_tokens)
        ratio = _learnable_ratio(result, reported)
        if ratio is not None:
            with self._lock:
                self._cal = self._learner.learn(self._cal, ratio)
        return reported / max(1, result.breakdown.estimated)

    # -- internals -------------------------------------------------------------------------

    def _cap_for(self, policy: BudgetPolicy) -> Callable[[str], str] | None:
        cap = policy.tool_result_cap
        if cap is None:
            return None
        capper = self._capper
        return lambda text: capper(text, cap)

    def _exact(self, provider: str, body: Any) -> int:
        assert self.exact_counter is not None
        n = self.exact_counter(provider, body)
        return check_reported_tokens(n, "exact_counter")

    def _read(self, request: FitRequest, ctx: ReadContext) -> Reading:
        if request.items is not None:
            return request.adapter.read_items(request.items, request.tools, ctx)
        return request.adapter.to_model(request.body, ctx)

    def _add_blocks(
        self, adapter: Adapter, model: RequestModel, request: FitRequest
    ) -> tuple[tuple[Block, ...], tuple[SourceInfo, ...]]:
        """Add the caller's system prompt, snippets and skills to the model as blocks."""
        system_prompt, snippets, skills = request.system_prompt, request.snippets, request.skills
        if system_prompt is None and snippets is None and skills is None:
            return (), ()  # the common round: nothing to add
        snippet_sources = as_sources(snippets, "snippets")
        skill_sources = as_sources(skills, "skills")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise InvalidRequestError(
                "system_prompt", f"must be a string, got {type(system_prompt).__name__}"
            )
        added: list[Block] = []
        if system_prompt is not None or snippet_sources:
            prompt_parts = ([system_prompt] if system_prompt else []) + [s.text for s in snippet_sources]
            added.append(adapter.block("system_prompt", "\n\n".join(prompt_parts), self.counter))
        if skill_sources:
            added.append(adapter.block("skills", "\n\n".join(s.text for s in skill_sources), self.counter))
        sources = tuple(SourceInfo(s.name, "snippet", s.data_class) for s in snippet_sources) + tuple(
            SourceInfo(s.name, "skill", s.data_class) for s in skill_sources
        )
        model.blocks = (*model.blocks, *added)
        return tuple(added), sources

    def _calibration_for(self, adapter: Adapter, reading: Reading) -> tuple[Calibration, bool]:
        """The calibration this request is decided with, and whether its count is exact.

        With an exact counter, the request as the caller built it is counted exactly and
        this request's factor is at least exact ÷ estimated: the breakdown's lines keep their
        proportions and sum to the exact figure (rounded up). Without one, the learned factor,
        unless every part was counted by the provider's rule and there is nothing to scale.
        """
        learned = self._cal
        native = adapter.exact and not self._resolved.fallback
        model = reading.model
        if self.exact_counter is None:
            scaled = native and learned.scaled != SCALE
            if scaled and not model.schema_inexact and not any(t.inexact for t in model.turns):
                return UNCALIBRATED, True
            return learned, native
        if reading.body is None:
            return learned, native
        raw = model.total
        exact = self._exact(adapter.provider, reading.body)
        if raw <= 0:
            return learned, True
        return max(learned, Calibration.covering(exact, raw)), True

    def _summarized(
        self, adapter: Adapter, reading: Reading, plan: Plan, ceiling: int
    ) -> tuple[Plan, Any, Turn | None]:
        """The plan with a summary of what it drops, dropping more until the summary fits too."""
        while True:
            summary, turn = self._summarize(adapter, reading, plan)
            if plan.total + turn.cost <= ceiling:
                return plan, summary, turn
            more = drop_next(reading.model, plan)
            if more is None:  # the summary itself does not fit: send without it
                return plan, None, None
            plan = more

    def _summarize(self, adapter: Adapter, reading: Reading, plan: Plan) -> tuple[Any, Turn]:
        assert self.summarizer is not None
        model = reading.model
        run = [reading.items[i] for k in sorted(plan.dropped_turns()) for i in model.span(k)]
        produced = self.summarizer(run)
        try:
            return adapter.summary(produced, self.counter)
        except OtelCtxError:
            raise
        except RecursionError:
            raise TooDeeplyNestedError("summarizer", "returned a value nested too deeply to count") from None
        except Exception as exc:  # whatever a dialect trips on in a value it never expected
            raise InvalidRequestError(
                "summarizer",
                f"returned a value the {adapter.provider} dialect cannot use as a message "
                f"({type(exc).__name__}); return a string or a message of the transcript's kind",
            ) from None

    def _result(
        self, request: FitRequest, reading: Reading, problems: tuple[str, ...], d: _Decision
    ) -> FitResult:
        """Write the decision back in the request's dialect and account for what is sent."""
        adapter, model, plan = request.adapter, reading.model, d.plan
        kept: Sequence[int] = plan.kept_turns() if plan.dropped else range(len(model.turns))
        dropped: Sequence[int] = model.item_indexes(plan.dropped_turns()) if plan.dropped else ()
        summary_at = 0
        if d.summary is not None:
            first = dropped[0] if dropped else model.items
            summary_at = sum(len(model.span(k)) for k in kept if model.starts[k] < first)
        body, items = adapter.from_model(reading, dialect.Fitted(kept, d.summary, summary_at, d.added))
        if request.observe and reading.body is not None:
            body = reading.body  # observe-only: the request goes out exactly as the caller built it
        # Counted exactly by the caller's exact counter: the factor brings the whole to its figure.
        counted = self.exact_counter is not None and reading.body is not None
        native = adapter.exact and not self._resolved.fallback
        t = Tally(
            model, kept, d.summary_turn, by_part=native and not counted, whole_schema=adapter.exact or counted
        )
        blocks = model.blocks
        in_turns = model.system_in_turns and not (blocks and any(b.kind == "system_prompt" for b in blocks))
        b = t.breakdown(d.cal, d.policy, d.sources, prompt_in_turns=in_turns)
        if plan.dropped or plan.outcome == OUTCOME_COMPACTED:
            outcome = plan.outcome
        else:
            # Nothing dropped: the breakdown's verdict (a calibration that scales only the
            # estimated parts can fit what the conservative ceiling of the plan did not).
            outcome = OUTCOME_FIT if b.estimated <= b.budget else OUTCOME_OVERFLOW
        leading_system = next((k for k, t in enumerate(model.turns) if t.role != "system"), len(model.turns))
        n_units = len(plan.units)
        kept_units = max(0, n_units - len(plan.dropped) - min(leading_system, n_units))
        block_item = getattr(adapter, "block_message", None)
        return FitResult(
            messages=items,
            outcome=outcome,
            breakdown=b,
            task_type=request.task_type,
            calibration=d.cal.factor,
            dropped_turns=len(plan.dropped),
            kept_turns=kept_units + (1 if d.summary is not None else 0),
            dropped_messages=len(dropped),
            dropped_indices=tuple(dropped),
            capped_tool_results=model.capped,
            raw_tokens=t.total,
            model=self.model,
            encoding=model.encoding or self.encoding_name,
            summary=d.summary,
            prefix_messages=tuple(block_item(x) for x in d.added) if block_item and d.added else (),
            request=body,
            provider=adapter.provider,
            exact=d.exact and (counted or (not t.inexact and not model.unknowns)),
            problems=problems,
            # What the request would have cost whole: a compaction's "before", for telemetry.
            tokens_before=model.total + (b.estimated - t.total) if plan.dropped else 0,
            replies=model.replies,
            inexact_tokens=t.inexact,
            inexact_media_tokens=t.media,
            estimated_lines=t.estimated_lines() if t.inexact else (),
            unknowns=model.unknowns,
        )


@dataclass(slots=True)
class _Decision:
    """What :meth:`Fitter.decide` settled before the request is written back and accounted for."""

    policy: BudgetPolicy
    cal: Calibration
    #: The count reproduces the provider's (its rule, or the caller's exact counter).
    exact: bool
    plan: Plan
    #: The system prompt, snippets and skills added in front of the transcript, and their sources.
    added: tuple[Block, ...]
    sources: tuple[SourceInfo, ...]
    summary: Any
    summary_turn: Turn | None


def _learnable_ratio(result: FitResult, reported: int) -> float | None:
    """Reported ÷ estimated for the estimated text of ``result``, or None when the bill cannot
    be explained part by part (see :meth:`Fitter.observe_usage`)."""
    text = result.inexact_tokens - result.inexact_media_tokens
    if result.unknowns or result.inexact_media_tokens or text <= 0:
        return None
    rest = reported - (result.raw_tokens - result.inexact_tokens)
    return rest / text if rest > 0 else None


def _pinned_turns(pinned: Pinned, items: Sequence[Any], model: RequestModel) -> list[int]:
    """The caller's pins (indexes into its transcript items) as turn indexes."""
    n = len(items)
    if pinned is None:
        return []
    if callable(pinned):
        chosen = [i for i, m in enumerate(items) if pinned(i, m)]
    else:
        chosen = []
        for k, i in enumerate(pinned):
            if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
                raise InvalidRequestError(f"pinned[{k}]", f"{shown(i)} is not an index into {n} messages")
            chosen.append(i % n)
    starts = model.starts
    return [bisect_right(starts, i) - 1 for i in chosen]
