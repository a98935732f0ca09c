"""Context the provider holds: Responses calls that continue a stored conversation.

A Responses request with ``previous_response_id`` or ``conversation`` sends only its new items;
the model sees them after everything the server stored. Measured alone, the body would report a
fraction of the window (and teach the calibration a wrong factor), so each observed response
leaves its chain's transcript lines here (token counts by role, never text), and the next call
of the chain is measured as those lines plus its new items (instructions and tools are sent
anew by every request). What this process never saw is the ``server_held`` line, filled from
the provider's reported input tokens when the response arrives.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from otel_ctx import names
from otel_ctx.engine._tokens import REPLY_PRIMING
from otel_ctx.telemetry._trim import Trim

if TYPE_CHECKING:
    from otel_ctx._fitting import ContextFitter
    from otel_ctx.engine._result import FitResult
    from otel_ctx.instrumentation._core import Observer, Round

#: A reported input this much above what the chain accounts for is context the server
#: holds that this process did not see (items added elsewhere); below it, counting error.
_UNSEEN_TOLERANCE = 0.10
#: A reported input this much below the estimate, on a request that lets the server cut,
#: is the server's truncation (a compaction names itself with an item in the output).
_SHRINK_TOLERANCE = 0.10
_RESPONSES_DONE = frozenset({"response.completed", "response.incomplete"})


@dataclass(frozen=True, slots=True)
class ChainState:
    """The context the server holds after one response, as this process knows it."""

    by_role: Mapping[str, int]
    #: Tokens held that this process never saw (known from usage).
    server_held: int
    round: int
    conversation_id: str
    #: The server changed the stored context in a way not measurable here (compaction):
    #: the next round's server-held line is filled from its usage again.
    unknown: bool = False


class ChainStore:
    """Bounded: the least recently used chain is forgotten first (its next call then counts as unseen)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(1, max_entries)
        self._states: OrderedDict[str, ChainState] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> ChainState | None:
        with self._lock:
            state = self._states.get(key)
            if state is not None:
                self._states.move_to_end(key)
            return state

    def put(self, keys: tuple[str, ...], state: ChainState) -> None:
        with self._lock:
            for key in keys:
                self._states.pop(key, None)
                self._states[key] = state
            while len(self._states) > self.max_entries:
                self._states.popitem(last=False)

    def __len__(self) -> int:
        return len(self._states)


def _conversation_param(body: Mapping[str, Any]) -> str | None:
    conv = body.get("conversation")
    if isinstance(conv, str) and conv:
        return conv
    if isinstance(conv, Mapping):
        found = conv.get("id")
        return found if isinstance(found, str) and found else None
    found = getattr(conv, "id", None)
    return found if isinstance(found, str) and found else None


def lets_server_cut(body: Mapping[str, Any]) -> bool:
    """The request allows the server to drop or compact context (so usage may count less)."""
    return body.get("truncation") == "auto" or bool(body.get("context_management"))


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for role, tokens in b.items():
        out[role] = out.get(role, 0) + tokens
    return out


def _without_priming(by_role: Mapping[str, int]) -> dict[str, int]:
    """A request's lines as they stay in the stored context: the reply priming is per request."""
    out = dict(by_role)
    out["assistant"] = max(0, out.get("assistant", 0) - REPLY_PRIMING)
    return out


def _with_lines(result: FitResult, by_role: Mapping[str, int], server_held: int) -> FitResult:
    """``result`` with the chain's lines added: the breakdown still closes."""
    b = result.breakdown
    roles = {r: b.transcript_by_role.get(r, 0) for r in names.ROLES}
    for role, tokens in by_role.items():
        roles[role] = roles.get(role, 0) + tokens
    added = sum(by_role.values()) + server_held - b.server_held
    estimated = b.estimated + added
    breakdown = dataclasses.replace(
        b,
        transcript=sum(roles.values()),
        transcript_by_role=roles,
        server_held=server_held,
        estimated=estimated,
        remaining=b.budget - estimated,
    )
    outcome = result.outcome
    if outcome != names.OUTCOME_COMPACTED:
        outcome = names.OUTCOME_FIT if estimated <= b.budget else names.OUTCOME_OVERFLOW
    return dataclasses.replace(result, breakdown=breakdown, outcome=outcome)


@dataclass(slots=True)
class ChainRound:
    """One Responses call and what it continues."""

    store: ChainStore
    request: Mapping[str, int]  # the new items' transcript lines, as measured
    base: ChainState | None
    previous_id: str | None
    conversation: str | None
    keep: bool  # the server stores this response (``store`` not False)
    cut_allowed: bool
    round_number: int
    #: Whether the breakdown still waits for the provider's usage (part of the context unseen).
    pending: bool = False
    response_id: str | None = None
    output: Any = None
    figure_source: str = names.FIGURE_REQUEST
    trim: tuple[str, int, int, int] | None = None  # (kind, before, after, items removed)

    @property
    def continues(self) -> bool:
        return self.previous_id is not None or self.conversation is not None

    @property
    def conversation_id(self) -> str | None:
        """The conversation param, else the chain's first response id (known once it answered)."""
        if self.conversation is not None:
            return self.conversation
        if self.base is not None:
            return self.base.conversation_id
        return self.previous_id

    def see(self, obj: Any) -> None:
        """A response object or stream event: keep the finished response's id and output."""
        if getattr(obj, "type", None) in _RESPONSES_DONE:
            obj = getattr(obj, "response", None)
        rid = getattr(obj, "id", None)
        output = getattr(obj, "output", None)
        if isinstance(rid, str) and isinstance(output, list):
            self.response_id = rid
            self.output = output

    def settle(self, round_: Round, reported: int | None) -> None:
        """The answer is complete: the round's result over the whole held context, the chain's id
        on its span, the breakdown that waited for the usage, and the provider's own cut."""
        round_.result = settle(self, round_.result, reported, round_.fitter, round_.model)
        if self.response_id is not None and round_.span.is_recording():
            round_.span.set_attribute(names.GEN_AI_CONVERSATION_ID, self.conversation_id or self.response_id)
        round_.breakdown_settled()
        if self.trim is not None:
            trim = Trim(names.PERFORMER_PROVIDER, *self.trim)
            round_.record.trim(trim, round_.result.task_type)


def open_chain(
    observer: Observer, body: Mapping[str, Any], result: FitResult
) -> tuple[ChainRound, FitResult]:
    """A Responses call's reader: its chain round, and its breakdown over the whole held context."""
    store = observer.chains
    previous = body.get("previous_response_id")
    previous_id = previous if isinstance(previous, str) and previous else None
    conversation = _conversation_param(body)
    base = None
    if previous_id is not None:
        base = store.get(previous_id)
    if base is None and conversation is not None:
        base = store.get(conversation)
    chain = ChainRound(
        store=store,
        request=_without_priming(result.breakdown.transcript_by_role),
        base=base,
        previous_id=previous_id,
        conversation=conversation,
        keep=body.get("store") is not False,
        cut_allowed=lets_server_cut(body),
        round_number=(base.round + 1) if base is not None else (2 if previous_id is not None else 1),
    )
    if not chain.continues:
        return chain, result
    if base is None or base.unknown:
        chain.pending = True
        chain.figure_source = names.FIGURE_USAGE
        if base is None:
            return chain, result
    else:
        chain.figure_source = names.FIGURE_USAGE if base.server_held else names.FIGURE_CHAIN
    return chain, _with_lines(result, base.by_role, base.server_held)


def _compacted(output: list[Any]) -> bool:
    """The server compacted during the response: a compaction item replaces what came before."""
    return any(getattr(item, "type", None) == "compaction" for item in output)


def _output_lines(fitter: ContextFitter, model: str, output: list[Any]) -> dict[str, int]:
    """The transcript lines the response's output adds to the stored context (a compaction
    item is opaque: what it holds is known from the next round's usage)."""
    kept = [item for item in output if getattr(item, "type", None) != "compaction"]
    if not kept:
        return {}
    measured = fitter.measure_request({"model": model, "input": kept}, provider="openai-responses")
    return _without_priming(measured.breakdown.transcript_by_role)


def _compaction(chain: ChainRound, result: FitResult, reported_input: int | None, kept: int) -> None:
    """The server compacted during this response (its output carries the compaction item), so
    the cut is this call's: before is what the call held (the estimate, or the bill if higher).
    After is the bill when it is well below the estimate (the model ran on what the compaction
    left); a bill near the estimate counted the context before the cut, so after is the output
    items kept beside the opaque compaction item (whose size the next round's usage tells).
    """
    estimated = result.breakdown.estimated
    before = max(estimated, reported_input or 0)
    if reported_input is not None and reported_input < (1 - _SHRINK_TOLERANCE) * estimated:
        after = reported_input
    else:
        after = kept
    chain.trim = ("compaction", before, min(before, after), 0)


def settle(
    chain: ChainRound, result: FitResult, reported_input: int | None, fitter: ContextFitter, model: str
) -> FitResult:
    """The answer arrived: fill the server-held line from usage, note a server-side cut, and
    store the chain as it stands after this response. Returns the round's final result."""
    b = result.breakdown
    seen = b.estimated - b.server_held
    output = chain.output or []
    compacted = _compacted(output)
    stored = chain.response_id is not None and (chain.keep or chain.conversation is not None)
    output_lines = _output_lines(fitter, model, output) if compacted or stored else {}
    shrank = (
        reported_input is not None
        and chain.cut_allowed
        and reported_input < (1 - _SHRINK_TOLERANCE) * b.estimated
    )
    if reported_input is not None and reported_input > 0 and chain.continues:
        excess = reported_input - seen
        if chain.pending or excess > _UNSEEN_TOLERANCE * max(1, seen):
            result = _with_lines(result, {}, max(0, excess))
            chain.figure_source = names.FIGURE_USAGE
            shrank = False
    if compacted:
        _compaction(chain, result, reported_input, sum(output_lines.values()))
    elif shrank and reported_input is not None:
        chain.trim = ("truncation", b.estimated, reported_input, 0)
    if not stored or chain.response_id is None:
        return result
    base_lines = chain.base.by_role if chain.base is not None else {}
    held_lines = {} if compacted else _add(base_lines, chain.request)
    state = ChainState(
        by_role=_add(held_lines, output_lines),
        server_held=0 if compacted else result.breakdown.server_held,
        round=chain.round_number,
        conversation_id=chain.conversation_id or chain.response_id,
        unknown=compacted,
    )
    keys = tuple(k for k in (chain.response_id if chain.keep else None, chain.conversation) if k)
    chain.store.put(keys, state)
    return result
