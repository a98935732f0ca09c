"""Trims an agent framework makes before the model call, seen from the LangChain callbacks.

Three shapes reach the callback handler, none of which the request body says:

* a node that replaces the state's messages (LangChain 1.x ``SummarizationMiddleware``'s
  ``before_model``, a LangGraph ``pre_model_hook`` returning ``RemoveMessage(REMOVE_ALL)``
  and what to keep) or hands the model a shorter list (``llm_input_messages``): the
  node's inputs and outputs are both seen, so the trim is measured on both sides;
* ``ContextEditingMiddleware`` clearing old tool results in the request it passes on (the
  state keeps them): a cleared tool message carries ``context_editing.cleared``, and its
  size before is remembered from the call that last sent it whole.

Each is recorded once, as a trim by the framework on the next model call's round of the
same agent run. Token counts only; the messages are never kept (the remembered sizes are
a bounded map of message id to token count).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from otel_ctx import names
from otel_ctx.telemetry._trim import Trim

if TYPE_CHECKING:
    from otel_ctx._fitting import ContextFitter

_MAX = 10_000
#: Graph nodes whose output may replace the model's messages.
_HOOK_SUFFIXES = (".before_model", "pre_model_hook")
_REMOVE_ALL = "__remove_all__"


def _bounded_put(table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > _MAX:
        table.popitem(last=False)


def _is_hook(name: str | None) -> bool:
    return bool(name) and any(str(name).endswith(s) for s in _HOOK_SUFFIXES)


def _messages(value: Any) -> Sequence[Any] | None:
    if isinstance(value, Mapping):
        value = value.get("messages")
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return value
    return None


class FrameworkTrims:
    """State shared by one callback handler: run parents, hook inputs, pending trims, sizes."""

    def __init__(self) -> None:
        self._parents: OrderedDict[UUID, UUID | None] = OrderedDict()
        self._hook_inputs: OrderedDict[UUID, tuple[UUID | None, Sequence[Any]]] = OrderedDict()
        self._pending: OrderedDict[UUID | None, list[Trim]] = OrderedDict()
        self._tool_sizes: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    # -- the run tree ----------------------------------------------------------------------

    def _root(self, run_id: UUID | None) -> UUID | None:
        seen = 0
        while run_id is not None and seen < 64:
            parent = self._parents.get(run_id)
            if parent is None:
                return run_id
            run_id, seen = parent, seen + 1
        return run_id

    def chain_start(self, run_id: UUID, parent: UUID | None, name: str | None, inputs: Any) -> None:
        with self._lock:
            _bounded_put(self._parents, run_id, parent)
            if _is_hook(name):
                msgs = _messages(inputs)
                if msgs is not None:
                    _bounded_put(self._hook_inputs, run_id, (parent, list(msgs)))

    def chain_end(self, run_id: UUID, outputs: Any, fitter: ContextFitter | None) -> None:
        with self._lock:
            entry = self._hook_inputs.pop(run_id, None)
        if entry is None or fitter is None or not isinstance(outputs, Mapping):
            return
        parent, before = entry
        after: Sequence[Any] | None = None
        kind = "drop"
        given = outputs.get("llm_input_messages")
        if isinstance(given, Sequence) and not isinstance(given, (str, bytes)):
            after = given
        else:
            update = _messages(outputs)
            if update and getattr(update[0], "id", None) == _REMOVE_ALL:
                after = update[1:]
        if after is None:
            return
        if any(
            (getattr(m, "additional_kwargs", None) or {}).get("lc_source") == "summarization" for m in after
        ):
            kind = "summary"
        from otel_ctx.telemetry._observe import as_chat_messages

        tokens_before = fitter.measure(as_chat_messages(list(before))).breakdown.estimated
        tokens_after = fitter.measure(as_chat_messages(list(after))).breakdown.estimated if after else 0
        kept_ids = {getattr(m, "id", None) for m in after} - {None}
        removed = sum(1 for m in before if getattr(m, "id", None) not in kept_ids)
        trim = Trim(names.PERFORMER_FRAMEWORK, kind, tokens_before, tokens_after, removed)
        with self._lock:
            root = self._root(parent)
            _bounded_put(self._pending, root, [*self._pending.get(root, []), trim])

    # -- the model call --------------------------------------------------------------------

    def model_start(
        self, parent: UUID | None, messages: Sequence[Any], fitter: ContextFitter | None
    ) -> list[Trim]:
        """The trims to record on this model call's round: the run's pending ones and the tool
        results this request carries cleared."""
        with self._lock:
            trims = self._pending.pop(self._root(parent), [])
        if fitter is None:
            return trims
        cleared_before = cleared_after = cleared = 0
        for m in messages:
            if getattr(m, "type", None) != "tool":
                continue
            mid = getattr(m, "id", None) or getattr(m, "tool_call_id", None)
            if not isinstance(mid, str):
                continue
            meta = getattr(m, "response_metadata", None) or {}
            content = getattr(m, "content", "")
            size = fitter.counter.text(content if isinstance(content, str) else str(content))
            if (meta.get("context_editing") or {}).get("cleared"):
                with self._lock:
                    whole = self._tool_sizes.get(mid)
                if whole is not None and whole > size:
                    cleared_before += whole
                    cleared_after += size
                    cleared += 1
            else:
                with self._lock:
                    _bounded_put(self._tool_sizes, mid, size)
        if cleared:
            trims.append(Trim(names.PERFORMER_FRAMEWORK, "edit", cleared_before, cleared_after, 0))
        return trims
