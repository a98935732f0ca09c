"""Tool-calling transcripts on the warm path: read once, served from the cache, never stale.

An assistant message that makes tool calls and a tool result are kept by their content
like plain messages, and the history read last round is kept whole (a private copy of its
messages and their turns), so the next round of a long tool-calling run compares that
history in one go and reads only its new messages. The cached read must say exactly what
the full read says, for good transcripts and broken ones, whatever changed between rounds,
and a message changed in place must be read again.
"""

from __future__ import annotations

import copy
import json
import sys
import threading
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_ctx import BudgetPolicy, ContextFitter, OtelCtxError

POLICY = BudgetPolicy(context_length=1_000_000, reserved_output=1_000, tool_result_cap=60)


def fitter() -> ContextFitter:
    return ContextFitter(POLICY, model="gpt-4o")


def call(cid: str, name: str = "lookup_order", args: str = '{"order": "SO-1"}') -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def full_read(messages: list[dict[str, Any]]) -> list[Any]:
    """The same messages as read-only mappings: they never take the cached path."""
    return [MappingProxyType(m) for m in messages]


def outcome(f: ContextFitter, messages: list[Any], strict: bool) -> tuple[Any, ...]:
    try:
        r = f.fit(messages) if strict else f.measure(messages)
    except OtelCtxError as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", r.breakdown, r.outcome, r.problems, [dict(m) for m in r.messages], r.replies)


_ids = st.sampled_from(["call_a", "call_b", "call_c"])
_text = st.sampled_from(["", "ok", "Order SO-1: shipped, tracking 7919. " * 6, "x" * 400])
_message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t or "hi"}, _text),
    st.builds(
        lambda ids, content, absent: {
            "role": "assistant",
            **({} if absent else {"content": content}),
            "tool_calls": [call(i, args=json.dumps({"n": k})) for k, i in enumerate(ids)],
        },
        st.lists(_ids, min_size=1, max_size=2),
        st.one_of(st.none(), _text),
        st.booleans(),
    ),
    st.builds(lambda i, t: {"role": "tool", "tool_call_id": i, "content": t}, _ids, _text),
    st.builds(lambda t: {"role": "assistant", "content": t or "done"}, _text),
)


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(_message, min_size=1, max_size=12), strict=st.booleans())
def test_the_cached_read_says_what_the_full_read_says(messages: list[dict[str, Any]], strict: bool) -> None:
    warm = fitter()
    for _ in range(2):  # the second round is served from the cache
        got = outcome(warm, messages, strict)
    assert got == outcome(fitter(), full_read(messages), strict)


def test_a_message_changed_in_place_is_read_again() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Where is my parcel?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
        {"role": "assistant", "content": "It has shipped."},
    ]
    f = fitter()
    f.fit(messages)
    # The same dict objects, changed: longer arguments, a longer result, another call id.
    messages[1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"order": "SO-1", "note": "urgent " * 20}
    )
    messages[2]["content"] = "shipped from the depot at dawn, " * 3
    warm = f.fit(messages)
    assert warm.breakdown == fitter().fit(full_read(messages)).breakdown
    messages[1]["tool_calls"][0]["id"] = "call_2"
    messages[2]["tool_call_id"] = "call_2"
    assert f.fit(messages).breakdown == fitter().fit(full_read(messages)).breakdown


def test_a_warm_round_reads_no_history_message_again() -> None:
    """Each history message is one cache lookup: no text of it is looked up or counted again."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    for k in range(50):
        history += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(f"call_{k}", args=json.dumps({"k": k}))],
            },
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"order {k}: shipped"},
        ]
    f = fitter()
    f.fit(history)
    looked_up: list[str] = []
    counter = f.counter
    original = counter.text

    def text(value: str) -> int:
        looked_up.append(value)
        return original(value)

    counter.text = text  # type: ignore[method-assign]
    try:
        f.fit(history)
    finally:
        counter.text = original  # type: ignore[method-assign]
    assert looked_up == []


def _pair(k: int) -> list[dict[str, Any]]:
    cid = f"call_{k}"
    return [
        {"role": "assistant", "content": None, "tool_calls": [call(cid, args=json.dumps({"k": k}))]},
        {"role": "tool", "tool_call_id": cid, "content": f"order {k}: shipped"},
    ]


def _history(pairs: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    for k in range(pairs):
        history += _pair(k)
    return history


def _reads_per_message(f: ContextFitter) -> list[str]:
    """Wrap the reader's per-message paths of ``f``: the list names each message read one by one."""
    from otel_ctx.adapters._openai_chat import OpenAIChatAdapter

    reader = OpenAIChatAdapter.reader(f.counter)
    seen: list[str] = []
    known, message = reader._known_call_turn, reader._message

    def known_call_turn(m: Any, *args: Any) -> Any:
        seen.append(str(m.get("role")))
        return known(m, *args)

    def full(m: Any, *args: Any) -> Any:
        seen.append("full")
        return message(m, *args)

    reader._known_call_turn = known_call_turn  # type: ignore[method-assign]
    reader._message = full  # type: ignore[method-assign]
    return seen


def test_the_history_read_before_is_not_read_message_by_message() -> None:
    """A warm round reads only its new messages: the history is served as one prefix."""
    history = _history(60)
    f = fitter()
    f.fit([*history, *_pair(100)])
    seen = _reads_per_message(f)
    grown = [*history, *_pair(100), *_pair(101)]
    assert f.fit(grown).breakdown == fitter().fit(full_read(grown)).breakdown
    assert seen == ["assistant", "tool"]  # the two new messages, none of the 121 before them
    seen.clear()
    retried = [*history, *_pair(102)]  # the same history, another last call
    assert f.fit(retried).breakdown == fitter().fit(full_read(retried)).breakdown
    assert seen == ["assistant", "tool"]


def test_a_history_message_changed_in_place_is_read_again() -> None:
    """A message deep in the history changed in place (a nested field) is read again, not served stale."""
    history = _history(40)
    f = fitter()
    f.fit(history)
    history[21]["tool_calls"][0]["function"]["arguments"] = json.dumps({"k": 10, "note": "urgent " * 30})
    history[40]["content"] = "order 19: returned to sender at the depot, " * 3
    seen = _reads_per_message(f)
    got = f.fit(history)
    assert got.breakdown == fitter().fit(full_read(history)).breakdown
    assert got.breakdown.transcript > fitter().fit(_history(40)).breakdown.transcript
    assert len(seen) == len(history) - 1  # every tool message read again (the user's plain one is cached)
    seen.clear()
    assert f.fit(history).breakdown == got.breakdown
    assert seen == []


def test_a_memo_under_one_cap_is_not_served_under_another() -> None:
    """The same history fitted for a task type with another tool-result cap is cut by that cap."""
    long_result = "shipped from the depot at dawn and reached the hub by noon. " * 5
    history = [
        {"role": "user", "content": "Where is it?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": long_result},
    ]
    policies = {
        "wide": BudgetPolicy(context_length=1_000_000, reserved_output=1_000),
        "narrow": BudgetPolicy(context_length=1_000_000, reserved_output=1_000, tool_result_cap=60),
    }
    f = ContextFitter(policies, model="gpt-4o")
    wide = f.fit(history, task_type="wide")
    narrow = f.fit(history, task_type="narrow")
    assert (
        narrow.breakdown == ContextFitter(policies, model="gpt-4o").fit(history, task_type="narrow").breakdown
    )
    assert narrow.breakdown.transcript < wide.breakdown.transcript
    assert f.fit(history, task_type="wide").breakdown == wide.breakdown


def test_a_retried_round_may_make_the_call_it_replaces_again() -> None:
    """The memo forgets the calls of the messages a round no longer has: the same id is no duplicate."""
    history = _history(10)
    f = fitter()
    f.fit([*history, *_pair(50)])
    retried = [*history, *_pair(50)]  # the last call made again (same id), new objects
    retried[-2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"k": 50, "note": "again " * 10})
    retried[-1]["content"] = "order 50: shipped twice, " * 4
    got = f.fit(retried)
    assert got.breakdown == fitter().fit(full_read(retried)).breakdown
    assert f.fit([*history, *_pair(50), *_pair(51)]).breakdown == (
        fitter().fit(full_read([*history, *_pair(50), *_pair(51)])).breakdown
    )


def test_rounds_leave_the_callers_messages_as_they_were() -> None:
    """Memo copies are the fitter's own: cutting and growing them never touches a caller's message."""
    messages = _history(8)
    f = fitter()
    for k in range(100, 104):
        messages[-2:] = _pair(k)  # retried
        messages += _pair(k + 50)  # grown
        messages[3]["tool_calls"][0]["function"]["arguments"] = json.dumps({"k": k})  # changed in place
        before = copy.deepcopy(messages)
        got = f.fit(messages)
        assert messages == before
        assert got.breakdown == fitter().fit(full_read(messages)).breakdown
        assert got.messages == before and all(a is b for a, b in zip(got.messages, messages, strict=True))


@pytest.mark.usefixtures("fast_switching")
def test_threads_sharing_a_fitter_each_read_their_own_transcript() -> None:
    """Rounds of different transcripts on one fitter, from several threads, read as a fresh read does."""
    transcripts = [[*_history(n), *_pair(500 + n)] for n in (5, 20, 40)]
    want = [fitter().fit(full_read(t)).breakdown for t in transcripts]
    f = fitter()
    wrong: list[object] = []

    def work(which: int) -> None:
        for r in range(150):
            k = (which + r) % len(transcripts)
            try:
                if f.fit(transcripts[k]).breakdown != want[k]:
                    wrong.append(k)
            except Exception as exc:  # a read that tripped over another thread's
                wrong.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    # Threads switch every microsecond instead of every 5 ms, so a round that reads the shared
    # memo after another thread could take it is caught on every run, not one in three.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []


_edit = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5)),
    st.tuples(st.just("retry"), st.integers(0, 5)),
    st.tuples(st.just("mutate"), st.integers(0, 40)),
    st.tuples(st.just("drop"), st.integers(0, 40)),
    st.tuples(st.just("append_message"), _message),
    st.tuples(st.just("append_named"), _message),  # a shape only the full read takes
)


@settings(max_examples=300, deadline=None)
@given(edits=st.lists(_edit, min_size=1, max_size=10), strict=st.booleans())
def test_rounds_of_a_changing_transcript_say_what_a_fresh_read_says(
    edits: list[tuple[str, Any]], strict: bool
) -> None:
    """Grown, retried, changed in place, cut or broken: every round reads as a first read would."""
    messages = _history(4)
    warm = fitter()
    outcome(warm, messages, strict)
    fresh_ids = iter(range(1_000, 2_000))
    for kind, arg in edits:
        if kind == "append":
            messages += _pair(next(fresh_ids))[: 1 + arg % 2]
        elif kind == "retry" and len(messages) > 2:
            messages[-2:] = _pair(next(fresh_ids))
        elif kind == "mutate" and messages:
            m = messages[arg % len(messages)]
            if "tool_calls" in m:
                m["tool_calls"][0]["function"]["arguments"] = json.dumps({"changed": arg})
            else:
                m["content"] = f"changed {arg} " * (arg % 7 + 1)
        elif kind == "drop" and messages:
            del messages[arg % len(messages)]
        elif kind == "append_message":
            messages.append(json.loads(json.dumps(arg)))
        elif kind == "append_named":
            messages.append({**json.loads(json.dumps(arg)), "name": "agent"})
        assert outcome(warm, messages, strict) == outcome(fitter(), full_read(messages), strict)


def _replies(messages: list[Any]) -> int:
    """The model's replies in a transcript counted from scratch: runs of assistant messages."""
    runs, before = 0, False
    for m in messages:
        answer = m.get("role") == "assistant"
        runs += answer and not before
        before = answer
    return runs


@settings(max_examples=200, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(st.lists(_message, min_size=0, max_size=4), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_the_replies_kept_from_earlier_rounds_are_the_replies_counted_afresh(
    rounds: list[tuple[list[dict[str, Any]], int, bool]],
) -> None:
    """Each round cuts the transcript back (a retry), grows it, or turns an answer into a user
    message in place: the count that goes on from the reader's memo is the count from scratch."""
    f = fitter()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Where are my orders?"}]
    for new, cut, flip in rounds:
        del messages[max(1, len(messages) - cut) :]
        messages += copy.deepcopy(new)
        if flip:
            for m in messages:
                if m.get("role") == "assistant" and "tool_calls" not in m:
                    m["role"] = "user"  # in place: the memo's copy still says assistant
                    break
        assert f.measure(messages).replies == _replies(messages)


def test_a_long_tool_calling_runs_replies_are_counted_from_the_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Round after round the memo's count covers the history: only the new messages are looked at."""
    import otel_ctx.adapters._base as base

    looked = [0]
    is_answer = base._is_reply

    def counting(item: Any) -> bool:
        looked[0] += 1
        return is_answer(item)

    monkeypatch.setattr(base, "_is_reply", counting)
    f = fitter()
    history = _history(150)
    f.measure(history)
    for k in range(200, 205):
        grown = [*history, *_pair(k)]
        looked[0] = 0
        result = f.measure(grown)
        assert result.replies == _replies(grown) == 151 + k - 200
        assert looked[0] <= 3  # the two new messages, and the one before them
        history = grown


def test_a_fit_that_drops_or_adds_messages_counts_the_replies_it_was_given() -> None:
    """The replies are the transcript's as given: a fit that drops history or adds a system prompt
    is the same turn of the conversation."""
    f = ContextFitter(BudgetPolicy(context_length=1_000, reserved_output=100), model="gpt-4o")
    history = _history(60)  # some 2,000 tokens
    f.fit(history)
    dropped = f.fit(history)
    assert dropped.dropped_messages and dropped.replies == _replies(history) == 60
    small = _history(2)
    f.fit(small)
    assert f.fit(small, system_prompt="You are a support agent.").replies == _replies(small) == 2
    assert f.fit(small).replies == 2
