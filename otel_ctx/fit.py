"""The fit: cap tool results, count, compact the middle, keep the floor, explain.

Before each request the agent asks: does what I am about to send, plus the room the
answer needs, fit this task type's budget? If not, whole turns are dropped from the
middle of the history (where the model attends least) until it does. The pinned
floor (leading system messages, the original ticket, caller-pinned constraints and
state, the newest turn and the latest tool results) is never dropped; if the floor
alone does not fit, the outcome is ``overflow`` and the caller escalates with the
work so far instead of letting the provider truncate.

Nothing here imports OpenTelemetry: the telemetry layer turns a :class:`FitResult`
into spans and metrics.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import tiktoken

from otel_ctx.breakdown import Breakdown
from otel_ctx.budget import BudgetPolicy
from otel_ctx.errors import InvalidMessageError, InvalidRequestError, UnknownTaskTypeError
from otel_ctx.result import FitResult, Message, Outcome
from otel_ctx.sources import SourceInfo, SourcesLike, as_sources, strictest
from otel_ctx.tokens import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    BoundedCache,
    TokenCounter,
    calibrated,
    calibrated_floor,
    calibration_e4,
    resolve_encoding,
)

Strategy = Literal["middle", "oldest"]
Pinned = Iterable[int] | Callable[[int, Message], bool] | None
#: Receives the dropped messages in order; returns the message (or text) that replaces them.
Summarizer = Callable[[list[Message]], Message | str]

#: Role -> the transcript line it is counted in (``developer`` is the newer name for system).
ROLE_BUCKETS: Mapping[str, str] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
_BUCKETS = ("system", "user", "assistant", "tool")
SUMMARY_PREFIX = "Summary of earlier conversation (compacted by otel-ctx):\n"
#: Calibration is learned as an exponential average of reported/estimated, capped so one
#: garbage usage report cannot make every later request look full.
CALIBRATION_ALPHA = 0.3
CALIBRATION_MAX = 4.0


@dataclass(slots=True)
class _Prepared:
    """A validated, capped, counted request: everything the decision needs."""

    work: list[Message]
    costs: list[int]
    buckets: list[str]
    opens_calls: list[bool]
    capped: int
    prefix: tuple[Message, ...]
    system_prompt: int
    skills: int
    schema: int
    sources: tuple[SourceInfo, ...]
    system_prompt_in_transcript: bool

    @property
    def fixed(self) -> int:
        return self.system_prompt + self.skills + self.schema


class ContextFitter:
    """Fits agent requests to per-task-type budgets and explains every decision.

    ``policies`` is one :class:`BudgetPolicy` for every request, or a mapping from
    task type to policy (with an optional ``default`` policy or key for task types
    the mapping does not name). The fitter keeps a bounded token cache, so reuse one
    fitter across the rounds of a conversation (and across conversations).
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
    ) -> None:
        if isinstance(policies, BudgetPolicy):
            self._policies: dict[str, BudgetPolicy] = {}
            self._default: BudgetPolicy | None = policies
        elif isinstance(policies, Mapping):
            self._policies = {}
            for key, policy in policies.items():
                if not isinstance(key, str) or not isinstance(policy, BudgetPolicy):
                    raise InvalidRequestError(
                        f"policies[{key!r}]", "must map a task-type string to a BudgetPolicy"
                    )
                self._policies[key] = policy
            self._default = None
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
            raise InvalidRequestError("strategy", f"must be 'middle' or 'oldest', got {strategy!r}")
        self.strategy: Strategy = strategy
        self.summarizer = summarizer
        self.model = model
        self._resolved = resolve_encoding(model, encoding)
        self.counter = TokenCounter(
            self._resolved,
            model=model,
            cache=BoundedCache(max_entries=cache_entries, max_chars=cache_chars),
        )
        self._capped: BoundedCache[str] = BoundedCache(max_entries=1_024, max_chars=cache_chars)
        self._cal_e4 = 10_000
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
        return self._cal_e4 / 10_000

    @calibration.setter
    def calibration(self, factor: float) -> None:
        self._cal_e4 = calibration_e4(factor)

    def clear_cache(self) -> None:
        """Forget every counted text and capped tool result (the next fit counts cold)."""
        self.counter.cache.clear()
        self._capped.clear()

    def policy_for(self, task_type: str | None) -> BudgetPolicy:
        """The policy of ``task_type``, else the default; :class:`UnknownTaskTypeError` if none."""
        if task_type is not None:
            policy = self._policies.get(task_type)
            if policy is not None:
                return policy
        if self._default is not None:
            return self._default
        raise UnknownTaskTypeError(task_type, list(self._policies))

    # -- public operations -----------------------------------------------------------------

    def count(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
    ) -> int:
        """Prompt tokens of the request as given, as the provider counts them (uncalibrated)."""
        prep = self._prepare(messages, tools, system_prompt, None, None, cap=None)
        return sum(prep.costs) + REPLY_PRIMING + prep.fixed

    def cap_tool_result(self, text: str, *, task_type: str | None = None) -> str:
        """Cut a tool result to the policy's cap, with a visible marker; unchanged if within it."""
        if not isinstance(text, str):
            raise InvalidRequestError("text", f"must be a string, got {type(text).__name__}")
        cap = self.policy_for(task_type).tool_result_cap
        return text if cap is None else self._cap(text, cap)

    def measure(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
        snippets: SourcesLike = None,
        skills: SourcesLike = None,
        task_type: str | None = None,
        policy: BudgetPolicy | None = None,
    ) -> FitResult:
        """The breakdown of a request exactly as given: nothing capped, nothing dropped.

        For agents whose history is trimmed by someone else; the outcome is ``fit`` or
        ``overflow``, and ``messages`` is a copy of the caller's list.
        """
        policy = policy if policy is not None else self.policy_for(task_type)
        prep = self._prepare(messages, tools, system_prompt, snippets, skills, cap=None)
        cal = self._cal_e4
        total = sum(prep.costs) + REPLY_PRIMING + prep.fixed
        outcome: Outcome = "fit" if total <= policy.budget * 10_000 // cal else "overflow"
        keep = list(range(len(prep.work)))
        units = _units(prep.buckets, prep.opens_calls)
        return self._result(prep, policy, task_type, cal, keep, outcome, units=len(units))

    def fit(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
        snippets: SourcesLike = None,
        skills: SourcesLike = None,
        task_type: str | None = None,
        pinned: Pinned = None,
    ) -> FitResult:
        """Fit one request to ``task_type``'s budget. Never mutates ``messages``.

        1. Caps every tool result above the policy's ``tool_result_cap``.
        2. If the estimate fits the budget: outcome ``fit``.
        3. Else drops whole turns (an assistant message with its tool calls goes with
           all their results) middle-first (or oldest-first), never the pinned floor.
        4. If the floor alone does not fit: outcome ``overflow``, with the floor as the
           messages, so the caller can escalate with the work so far.
        """
        policy = self.policy_for(task_type)
        prep = self._prepare(messages, tools, system_prompt, snippets, skills, cap=policy.tool_result_cap)
        pins = _pinned_indexes(pinned, messages)
        cal = self._cal_e4
        budget = policy.budget
        n = len(prep.work)
        total = sum(prep.costs) + REPLY_PRIMING + prep.fixed
        units = _units(prep.buckets, prep.opens_calls)
        # The most raw tokens whose calibrated estimate still fits: the loop compares ints.
        ceiling = budget * 10_000 // cal
        if total <= ceiling:
            return self._result(prep, policy, task_type, cal, list(range(n)), "fit", units=len(units))

        pinned_units = self._pinned_units(units, prep, pins)
        droppable = [u for u in range(len(units)) if not pinned_units[u]]
        order = _drop_order(droppable, self.strategy)
        costs = prep.costs
        dropped: list[int] = []
        current = total
        for u in order:
            if current <= ceiling:
                break
            dropped.append(u)
            s, e = units[u]
            current -= costs[s] if e - s == 1 else sum(costs[s:e])
        outcome: Outcome = "compacted" if current <= ceiling else "overflow"

        summary: Message | None = None
        summary_cost = 0
        if self.summarizer is not None and outcome == "compacted":
            remaining = order[len(dropped) :]
            while True:
                summary, summary_cost = self._summarize(prep, units, dropped)
                if current + summary_cost <= ceiling:
                    break
                if not remaining:  # the summary itself does not fit: send without it
                    summary, summary_cost = None, 0
                    break
                u = remaining.pop(0)
                dropped.append(u)
                current -= sum(costs[slice(*units[u])])

        drop_set = set(dropped)
        keep: list[int] = []
        dropped_indices: list[int] = []
        for u, (s, e) in enumerate(units):
            (dropped_indices if u in drop_set else keep).extend(range(s, e))
        return self._result(
            prep,
            policy,
            task_type,
            cal,
            keep,
            outcome,
            units=len(units),
            dropped_units=len(dropped),
            dropped_indices=dropped_indices,
            summary=summary,
            summary_cost=summary_cost,
        )

    def observe_usage(self, result: FitResult, input_tokens: int) -> float:
        """Learn from the provider's reported input tokens; returns reported ÷ estimated.

        The calibration factor moves toward reported ÷ counted and never below 1.0:
        an estimate may err high (wasted room) but must not err low (truncation).
        """
        if isinstance(input_tokens, bool) or not isinstance(input_tokens, int) or input_tokens <= 0:
            raise InvalidRequestError("input_tokens", f"must be a positive integer, got {input_tokens!r}")
        if result.raw_tokens > 0:
            ratio = input_tokens / result.raw_tokens
            with self._lock:
                current = self._cal_e4 / 10_000
                target = (1 - CALIBRATION_ALPHA) * current + CALIBRATION_ALPHA * ratio
                self._cal_e4 = calibration_e4(min(CALIBRATION_MAX, max(1.0, target)))
        return input_tokens / max(1, result.breakdown.estimated)

    # -- internals -------------------------------------------------------------------------

    def _prepare(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        system_prompt: str | None,
        snippets: SourcesLike,
        skills: SourcesLike,
        *,
        cap: int | None,
    ) -> _Prepared:
        """Validate, cap and count in one pass. Raises before anything is built."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise InvalidRequestError(
                "messages", f"must be a list of message objects, got {type(messages).__name__}"
            )
        counter = self.counter
        text = counter.text
        cache_get = counter.cache.get
        role_cost = counter.role_cost
        work: list[Message] = []
        costs: list[int] = []
        buckets: list[str] = []
        opens: list[bool] = []
        capped = 0
        open_calls: set[str] = set()
        declared: dict[str, int] = {}
        # The hot loop of every round: no f-strings or ABC checks unless something is wrong.
        for i, m in enumerate(messages):
            if m.__class__ is not dict and not isinstance(m, Mapping):
                raise InvalidMessageError(
                    f"messages[{i}]", f"must be an object, got {type(m).__name__}", index=i
                )
            role = m.get("role")
            bucket = ROLE_BUCKETS.get(role) if role.__class__ is str else None
            if bucket is None:
                raise InvalidMessageError(
                    f"messages[{i}].role",
                    f"unknown role {role!r}; expected one of {', '.join(ROLE_BUCKETS)}",
                    index=i,
                )
            cost = role_cost[role]  # type: ignore[index]
            content = m.get("content")
            opens_calls = False
            if bucket == "tool":
                call_id = m.get("tool_call_id")
                if call_id not in open_calls:
                    raise _orphan(i, call_id, declared)
                if cap is not None:
                    m, content, was_capped = self._cap_message(m, content, cap)
                    capped += was_capped
            else:
                if open_calls:
                    open_calls = set()
                calls = m.get("tool_calls")
                if calls:
                    if bucket != "assistant":
                        raise InvalidMessageError(
                            f"messages[{i}].tool_calls",
                            "only assistant messages may make tool calls",
                            index=i,
                        )
                    cost += counter.tool_calls(calls, f"messages[{i}]", i)
                    open_calls = {c["id"] for c in calls}
                    for c in calls:
                        declared[c["id"]] = i
                    opens_calls = True
            if content.__class__ is str:
                n = cache_get(content)
                cost += text(content) if n is None else n
            else:
                cost += counter.content(content, f"messages[{i}]", i)
            name = m.get("name")
            if name is not None:
                if not isinstance(name, str):
                    raise InvalidMessageError(f"messages[{i}].name", "must be a string", index=i)
                cost += text(name) + TOKENS_PER_NAME
            work.append(m)
            costs.append(cost)
            buckets.append(bucket)
            opens.append(opens_calls)

        schema = counter.tools(tools)
        snippet_sources = as_sources(snippets, "snippets")
        skill_sources = as_sources(skills, "skills")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise InvalidRequestError(
                "system_prompt", f"must be a string, got {type(system_prompt).__name__}"
            )
        prefix: list[Message] = []
        sp_cost = sk_cost = 0
        prompt_parts = ([system_prompt] if system_prompt else []) + [s.text for s in snippet_sources]
        has_prompt = system_prompt is not None or bool(snippet_sources)
        if has_prompt:
            prompt = "\n\n".join(prompt_parts)
            prefix.append({"role": "system", "content": prompt})
            sp_cost = TOKENS_PER_MESSAGE + text("system") + text(prompt)
        if skill_sources:
            skill_text = "\n\n".join(s.text for s in skill_sources)
            prefix.append({"role": "system", "content": skill_text})
            sk_cost = TOKENS_PER_MESSAGE + text("system") + text(skill_text)
        sources = tuple(SourceInfo(s.name, "snippet", s.data_class) for s in snippet_sources) + tuple(
            SourceInfo(s.name, "skill", s.data_class) for s in skill_sources
        )
        return _Prepared(
            work=work,
            costs=costs,
            buckets=buckets,
            opens_calls=opens,
            capped=capped,
            prefix=tuple(prefix),
            system_prompt=sp_cost,
            skills=sk_cost,
            schema=schema,
            sources=sources,
            # As the ADR: with no prompt of its own, a leading system message carries it.
            system_prompt_in_transcript=not has_prompt and bool(buckets) and buckets[0] == "system",
        )

    def _cap_message(self, m: Message, content: Any, cap: int) -> tuple[Message, Any, int]:
        """A tool message with its content cut to ``cap`` (a new dict), or the message itself."""
        if isinstance(content, list):
            texts = [p.get("text") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
            if len(texts) != len(content) or not all(isinstance(t, str) for t in texts):
                return m, content, 0  # images or unknown parts: counted, not cut
            joined = "".join(texts)  # type: ignore[arg-type]
            new = self._cap(joined, cap)
            if new is joined:
                return m, content, 0
        elif isinstance(content, str):
            new = self._cap(content, cap)
            if new is content:
                return m, content, 0
        else:
            return m, content, 0
        out = dict(m)
        out["content"] = new
        return out, new, 1

    def _cap(self, text: str, cap: int) -> str:
        """``text`` if it has at most ``cap`` tokens, else its first tokens plus a marker.

        Bounded time on any size: only a prefix of a few characters per token of the
        cap is encoded (widened if it holds too few tokens), never the whole payload.
        """
        counter = self.counter
        known = counter.cache.get(text)
        if (known is not None and known <= cap) or len(text) * 4 <= cap:
            return text  # a token is at least one UTF-8 byte; a character at most four
        key = f"{cap}\x00{text}"
        hit = self._capped.get(key)
        if hit is not None:
            return hit
        probe_len = cap * 8
        while True:
            probe = text[:probe_len]
            tokens = counter.encode(probe)
            if len(probe) == len(text):
                counter.cache.put(text, len(tokens))
                if len(tokens) <= cap:
                    return text
                break
            if len(tokens) > cap:
                break
            probe_len *= 4
        marker = (
            f"\n[otel-ctx: tool result cut to {cap:,} tokens at the tool boundary; "
            f"{len(text):,} characters in the original]"
        )
        if counter.text(marker) * 2 > cap:
            marker = " [cut]"
        keep = max(0, cap - counter.text(marker))
        while True:
            head = counter.encoding.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore")
            out = head + marker
            over = counter.text(out) - cap
            if over <= 0 or keep == 0:
                break
            keep = max(0, keep - over)
        self._capped.put(key, out)
        return out

    def _pinned_units(self, units: list[tuple[int, int]], prep: _Prepared, pins: list[int]) -> list[bool]:
        """Which units compaction must keep: the floor."""
        n_units = len(units)
        starts = [s for s, _ in units]

        def unit_of(index: int) -> int:
            return bisect_right(starts, index) - 1

        keep = [False] * n_units
        # Leading system messages.
        for u, (s, _) in enumerate(units):
            if prep.buckets[s] != "system":
                break
            keep[u] = True
        # The original ticket: the first user message.
        for i, b in enumerate(prep.buckets):
            if b == "user":
                keep[unit_of(i)] = True
                break
        # The newest turn, and the latest tool calls with their results.
        if n_units:
            keep[-1] = True
        for u in range(n_units - 1, -1, -1):
            if prep.opens_calls[units[u][0]]:
                keep[u] = True
                break
        # The caller's pins: hard constraints, structured state.
        for i in pins:
            keep[unit_of(i)] = True
        return keep

    def _summarize(
        self, prep: _Prepared, units: list[tuple[int, int]], dropped: list[int]
    ) -> tuple[Message, int]:
        assert self.summarizer is not None
        chosen = sorted(dropped)
        run = [prep.work[i] for u in chosen for i in range(*units[u])]
        produced = self.summarizer(run)
        if isinstance(produced, str):
            summary: Message = {"role": "system", "content": SUMMARY_PREFIX + produced}
        elif isinstance(produced, Mapping):
            summary = dict(produced)
        else:
            raise InvalidRequestError(
                "summarizer", f"must return a message dict or a string, got {type(produced).__name__}"
            )
        role = summary.get("role")
        if role not in ("system", "developer", "user", "assistant") or summary.get("tool_calls"):
            raise InvalidRequestError(
                "summarizer", "must return a system, user or assistant message without tool calls"
            )
        cost = TOKENS_PER_MESSAGE + self.counter.text(str(role))
        cost += self.counter.content(summary.get("content"), "summary", None)
        return summary, cost

    def _result(
        self,
        prep: _Prepared,
        policy: BudgetPolicy,
        task_type: str | None,
        cal: int,
        keep: list[int],
        outcome: Outcome,
        *,
        units: int,
        dropped_units: int = 0,
        dropped_indices: Sequence[int] = (),
        summary: Message | None = None,
        summary_cost: int = 0,
    ) -> FitResult:
        raw_roles = dict.fromkeys(_BUCKETS, 0)
        costs, buckets, work = prep.costs, prep.buckets, prep.work
        for i in keep:
            raw_roles[buckets[i]] += costs[i]
        raw_roles["assistant"] += REPLY_PRIMING  # the reply priming is the assistant's turn opening
        messages = [work[i] for i in keep]
        if summary is not None:
            raw_roles[ROLE_BUCKETS[summary["role"]]] += summary_cost
            at = sum(1 for i in keep if i < dropped_indices[0]) if dropped_indices else len(messages)
            messages.insert(at, summary)
        raw_transcript = sum(raw_roles.values())
        raw_total = raw_transcript + prep.fixed
        estimated = calibrated(raw_total, cal)
        by_role = {r: calibrated_floor(v, cal) for r, v in raw_roles.items()}
        transcript = sum(by_role.values())
        system_prompt = calibrated_floor(prep.system_prompt, cal)
        skills = calibrated_floor(prep.skills, cal)
        breakdown = Breakdown(
            context_length=policy.context_length,
            request_limit=policy.request_limit,
            reserved_output=policy.reserved_output,
            safety_margin=policy.safety_margin,
            budget=policy.budget,
            transcript=transcript,
            # The remainder: the marginal cost of the schema block, so the lines close.
            tool_schema=estimated - transcript - system_prompt - skills,
            system_prompt=system_prompt,
            skills=skills,
            estimated=estimated,
            remaining=policy.budget - estimated,
            transcript_by_role=by_role,
            system_prompt_in_transcript=prep.system_prompt_in_transcript,
            sources=prep.sources,
            data_class=strictest(s.data_class for s in prep.sources),
        )
        leading_system = 0
        for b in buckets:
            if b != "system":
                break
            leading_system += 1
        kept_units = units - dropped_units - min(leading_system, units)
        return FitResult(
            messages=messages,
            outcome=outcome,
            breakdown=breakdown,
            task_type=task_type,
            calibration=cal / 10_000,
            dropped_turns=dropped_units,
            kept_turns=max(0, kept_units) + (1 if summary is not None else 0),
            dropped_messages=len(dropped_indices),
            dropped_indices=tuple(dropped_indices),
            capped_tool_results=prep.capped,
            raw_tokens=raw_total,
            model=self.model,
            encoding=self.encoding_name,
            summary=summary,
            prefix_messages=prep.prefix,
        )


def _units(buckets: list[str], opens_calls: list[bool]) -> list[tuple[int, int]]:
    """Split the transcript into turns that are dropped whole.

    An assistant message that makes tool calls forms one turn with the tool results
    that follow it (dropping one without the other would orphan a result or leave a
    call unanswered); every other message is a turn of its own.
    """
    units: list[tuple[int, int]] = []
    n = len(buckets)
    i = 0
    while i < n:
        j = i + 1
        if opens_calls[i]:
            while j < n and buckets[j] == "tool":
                j += 1
        units.append((i, j))
        i = j
    return units


def _drop_order(droppable: list[int], strategy: Strategy) -> list[int]:
    """Middle-first: the turn nearest the middle, then outward, older side first on ties."""
    if strategy == "oldest":
        return list(droppable)
    n = len(droppable)
    left = (n - 1) // 2
    order: list[int] = []
    if n % 2:
        order.append(droppable[left])
        left -= 1
    right = left + 1 + n % 2
    while left >= 0 or right < n:
        if left >= 0:
            order.append(droppable[left])
            left -= 1
        if right < n:
            order.append(droppable[right])
            right += 1
    return order


def _orphan(index: int, call_id: object, declared: Mapping[str, int]) -> InvalidMessageError:
    """The error for a tool result that answers no call of the assistant message before it."""
    where = f"messages[{index}].tool_call_id"
    if not isinstance(call_id, str):
        return InvalidMessageError(where, "a tool result needs a 'tool_call_id' string", index=index)
    if call_id in declared:
        problem = (
            f"answers tool call {call_id!r} of messages[{declared[call_id]}], but tool results "
            "must directly follow the assistant message that made the calls"
        )
    else:
        problem = f"no earlier assistant message declared tool call {call_id!r}"
    return InvalidMessageError(where, problem, index=index)


def _pinned_indexes(pinned: Pinned, messages: Sequence[Message]) -> list[int]:
    n = len(messages)
    if pinned is None:
        return []
    if callable(pinned):
        return [i for i, m in enumerate(messages) if pinned(i, m)]
    out: list[int] = []
    for k, i in enumerate(pinned):
        if isinstance(i, bool) or not isinstance(i, int) or not -n <= i < n:
            raise InvalidRequestError(f"pinned[{k}]", f"{i!r} is not an index into {n} messages")
        out.append(i % n)
    return out
