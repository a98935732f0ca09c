"""Replaying recorded bodies through the real openai and anthropic SDKs, without then with otel-ctx.

The real-traffic replays (OpenAI and Anthropic's files, the OpenAI-compatible hosts' bodies)
share this: each body is sent as the SDK's own method would be called with it, once without
otel-ctx (the bytes it becomes on the wire) and once through one instrumentation with its
calibration live, to the fake provider answering each case's recorded usage. What otel-ctx
emitted for each call is kept beside what the caller got, for the tests to check its promises.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anthropic
import openai
from fake_provider import FakeProvider, Reply
from instrument_support import Instrumented

import otel_ctx.instrumentation as oi
from otel_ctx import names as n

C = TypeVar("C")


class Sender:
    """Sends a recorded body as the SDK's own method would be called with it: the parameters the
    method declares as keywords, any other top-level key through ``extra_body``."""

    def __init__(self, fake: FakeProvider) -> None:
        oc = openai.OpenAI(base_url=fake.openai_url, api_key="test-key", max_retries=0)
        # A timeout of its own, as the projects that sent a large ``max_tokens`` without streaming
        # had: with the default one the SDK refuses such a call itself, before any instrumentation.
        ac = anthropic.Anthropic(base_url=fake.anthropic_url, api_key="test-key", max_retries=0, timeout=60.0)
        self.methods: dict[str, Callable[..., Any]] = {
            "openai.chat": oc.chat.completions.create,
            "openai.responses": oc.responses.create,
            "anthropic.messages": ac.messages.create,
        }
        self.params = {api: set(inspect.signature(m).parameters) for api, m in self.methods.items()}

    def send(self, api: str, body: dict[str, Any]) -> None:
        known = self.params[api]
        kwargs = {k: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items() if k not in known}
        if extra:
            kwargs["extra_body"] = extra
        answer = self.methods[api](**kwargs)
        if body.get("stream") is True:
            for _ in answer:  # consumed to the end, as an agent reading the whole answer does
                pass


class LogLines(logging.Handler):
    """Every message otel-ctx logged, to look for request content in."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@dataclass
class Outcome(Generic[C]):
    """One replayed call: what the caller got and what otel-ctx emitted for it."""

    case: C
    error: str | None = None
    plain_body: bytes | None = None
    sent_body: bytes | None = None
    spans: list[Any] = field(default_factory=list)

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self.spans[0].attributes or {}) if len(self.spans) == 1 else {}


@dataclass
class Replay(Generic[C]):
    outcomes: list[Outcome[C]]
    capture: Instrumented
    logs: list[str]


def _sent(
    fake: FakeProvider,
    sender: Sender,
    send: Callable[[Sender, C], None],
    reply: Callable[[C], Reply],
    outcome: Outcome[C],
    phase: str,
) -> bytes | None:
    """Send ``outcome``'s case once with its recorded reply queued: the bytes that reached the
    fake, or None when nothing did (the first error of either pass is kept on the outcome)."""
    fake.queue(reply(outcome.case))
    before = len(fake.requests)
    try:
        send(sender, outcome.case)
    except Exception as exc:
        outcome.error = outcome.error or f"{phase}: {type(exc).__name__}"
    fake.replies.clear()  # a body the SDK refused sent nothing: its reply must not shift
    return fake.requests[-1].body if len(fake.requests) > before else None


def replay(
    cases: Sequence[C], send: Callable[[Sender, C], None], reply: Callable[[C], Reply]
) -> Iterator[Replay[C]]:
    """A module fixture's body: every case sent without otel-ctx, then each again instrumented
    (one instrumentation, the cases in order), its round spans and otel-ctx's log kept."""
    fake = FakeProvider()
    fake.hold_unknown = True
    fake.start()
    sender = Sender(fake)
    outcomes = [Outcome(c) for c in cases]
    try:
        # Without otel-ctx: the bytes each body becomes on the wire.
        for outcome in outcomes:
            outcome.plain_body = _sent(fake, sender, send, reply, outcome, "uninstrumented")
        capture = Instrumented()
        handler = LogLines()
        logger = logging.getLogger("otel_ctx")
        level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        oi.instrument(
            tracer_provider=capture.tracer_provider, meter_provider=capture.meter_provider, langchain=False
        )
        try:
            for outcome in outcomes:
                outcome.sent_body = _sent(fake, sender, send, reply, outcome, "instrumented")
                outcome.spans = capture.rounds()
                capture.span_exporter.clear()
        finally:
            oi.uninstrument()
            logger.removeHandler(handler)
            logger.setLevel(level)
        yield Replay(outcomes, capture, handler.messages)
    finally:
        fake.stop()


#: Keys whose values are identifiers, not content: a model name (or a router's list of fallback
#: models), a stored response or conversation (the round's ``gen_ai.conversation.id``), a cache key.
IDENTIFIERS = frozenset({"model", "models", "previous_response_id", "conversation", "prompt_cache_key"})


def unmeasured_agree(replay: Replay[Any]) -> dict[str, int]:
    """The rounds otel-ctx could not measure, by reason, from the spans; asserted equal to what the
    ``context_budget.calls.unobserved`` counter says (the counter tells the same story)."""
    unmeasured: dict[str, int] = {}
    for o in replay.outcomes:
        reason = o.attrs.get(n.UNOBSERVED_REASON)
        if reason is not None:
            unmeasured[reason] = unmeasured.get(reason, 0) + 1
    counted = {
        p.attributes[n.UNOBSERVED_REASON]: p.value
        for p in replay.capture.points(n.UNOBSERVED_CALLS.name)
        if p.value
    }
    assert counted == unmeasured
    return unmeasured


def strings(value: Any, key: str = "") -> Iterator[str]:
    """Every text of a body, its identifiers aside."""
    if isinstance(value, str):
        if key not in IDENTIFIERS:
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from strings(v, key)


def telemetry_strings(replay: Replay[Any]) -> set[str]:
    """Every text otel-ctx emitted: log messages, span and event attributes, metric labels."""
    out: set[str] = set(replay.logs)
    for o in replay.outcomes:
        for span in o.spans:
            values: list[Any] = list((span.attributes or {}).values())
            for event in span.events:
                values += list((event.attributes or {}).values())
            for v in values:
                if isinstance(v, str):
                    out.add(v)
                elif isinstance(v, (list, tuple)):
                    out.update(x for x in v if isinstance(x, str))
    metrics = replay.capture.reader.get_metrics_data()
    if metrics is not None:
        for rm in metrics.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for point in m.data.data_points:
                        out.update(v for v in (point.attributes or {}).values() if isinstance(v, str))
    return out


def leaks(bodies: Sequence[dict[str, Any]], replay: Replay[Any]) -> list[str]:
    """Texts of ``bodies`` (16 characters or more) found in what otel-ctx emitted, whole or as a
    32-character piece (a fragment of a longer text, a message cut short in an error)."""
    content = {s for body in bodies for s in strings(body) if len(s) >= 16}
    telemetry = telemetry_strings(replay)
    assert telemetry, "nothing emitted"
    found = [f"{t[:80]!r} holds {c[:40]!r}" for t in telemetry if len(t) >= 16 for c in content if c in t]
    corpus = "\x00".join(content)
    width = 32
    pieces = {t[i : i + width] for t in telemetry for i in range(0, len(t) - width + 1, width)}
    return found + [f"piece {p!r}" for p in pieces if p in corpus]
