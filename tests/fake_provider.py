"""A fake LLM provider on 127.0.0.1 for tests with the real ``openai`` and ``anthropic`` SDKs.

The SDKs are used exactly as an agent uses them, with ``base_url`` pointed here:
OpenAI Chat Completions (``POST /v1/chat/completions``), OpenAI Responses
(``POST /v1/responses``), Anthropic Messages (``POST /v1/messages``) and Gemini
(``POST /v1/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``,
as the Gemini API answers them, with ``usageMetadata``), each plain or streamed as
server-sent events. Every request is recorded byte for byte, so a test
can prove that instrumentation sent the same body it would have sent without it.

Replies come from a queue of :class:`Reply` (default: a short text answer). A reply
can make tool calls, carry a chosen usage, or be an HTTP error (``status=400``,
``status=500``). A refused connection is tested with :func:`closed_port_url`.

Responses keeps state as OpenAI does: each response is stored (unless ``store=false``)
with the whole context it saw plus its output; ``previous_response_id`` and
``conversation`` continue it and are billed for the whole stored context, not only
the new items. Conversations are created and filled through ``/v1/conversations``.
``truncation="auto"`` drops the oldest items beyond :attr:`FakeProvider.window`;
``context_management=[{"type": "compaction", "compact_threshold": N}]`` replaces a
rendered context above N with one compaction item during that response (the item leads its
output; the bill is the rendered context unless the reply sets one), and
``/v1/responses/compact`` does it on demand.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import free_port, serve, shut


@dataclass
class Reply:
    """What the fake provider answers to one request."""

    text: str = "Done."
    #: ``[(name, arguments_json), ...]``: the answer calls these tools instead of (or besides) text.
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    #: Reported prompt/input tokens; ``None`` asks :attr:`FakeProvider.usage_for` (default: a size proxy).
    input_tokens: int | None = None
    output_tokens: int = 7
    cached_tokens: int = 0
    #: An HTTP error status instead of an answer (the SDK raises its own error type).
    status: int = 200
    #: In a stream, send the usage (OpenAI chat: only if the request asked with ``stream_options``).
    stream_usage: bool = True
    #: Anthropic: a stop reason other than the default (``model_context_window_exceeded``).
    stop_reason: str | None = None
    #: The answer's ``usage`` object exactly as given (a recorded one), instead of one built from
    #: the counts above; Responses chains still bill ``input_tokens`` when it is set.
    usage: dict[str, Any] | None = None

    @classmethod
    def structured(cls, answer: Any, **kwargs: Any) -> Reply:
        """A structured-output answer: the JSON text ``parse()`` validates into the caller's type."""
        return cls(text=json.dumps(answer, separators=(",", ":")), **kwargs)


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived: path, headers and the exact body bytes."""

    path: str
    headers: dict[str, str]
    body: bytes
    #: The query string (``beta=true`` on Anthropic's and OpenAI's beta endpoints), without the ``?``.
    query: str = ""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class FakeProvider:
    """The server; start with :meth:`start`, or use the ``fake_provider`` fixture."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[Recorded] = []
        self.replies: deque[Reply] = deque()
        self.usage_for: Callable[[Any], int] = lambda body: max(1, len(json.dumps(body)) // 4)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._ids = 0
        #: Responses state: the context each stored response ends with, and each conversation's.
        self.stored: dict[str, list[Any]] = {}
        self.conversations: dict[str, list[Any]] = {}
        #: The model window ``truncation="auto"`` cuts to (in ``usage_for`` units).
        self.window = 1 << 30
        #: What each Responses call was billed for, in order (the whole context the model saw).
        self.billed: list[int] = []
        #: Continue an unknown ``previous_response_id`` or conversation from an empty context
        #: instead of answering 400 (replayed traffic continues chains stored elsewhere).
        self.hold_unknown = False

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def openai_url(self) -> str:
        """``base_url`` for ``openai.OpenAI`` (it appends ``/chat/completions``, ``/responses``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def gemini_url(self) -> str:
        """``http_options.base_url`` for ``google.genai.Client`` (it appends ``/v1beta/models/...``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_url(self) -> str:
        """``base_url`` for ``anthropic.Anthropic`` (it appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeProvider:
        self._server = serve(self.port, self._handle)
        return self

    def stop(self) -> None:
        shut(self._server)

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with these, in order (then the default text reply)."""
        with self._lock:
            self.replies.extend(replies)

    def bodies(self, path_suffix: str = "") -> list[bytes]:
        """Exact request bodies received, optionally only those whose path ends with the suffix."""
        return [r.body for r in self.requests if r.path.endswith(path_suffix)]

    # -- serving ---------------------------------------------------------------------------

    def _next(self, body: bytes, path: str, headers: dict[str, str], query: str = "") -> tuple[Reply, int]:
        with self._lock:
            self.requests.append(Recorded(path, headers, body, query))
            reply = self.replies.popleft() if self.replies else Reply()
            self._ids += 1
            return reply, self._ids

    def _handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        path, _, query = h.path.partition("?")
        reply, n = self._next(raw, path, {k.lower(): v for k, v in h.headers.items()}, query)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send_json(h, 400, {"error": {"message": "body is not JSON", "type": "invalid"}})
        if reply.status != 200:
            kind = "invalid_request_error" if reply.status < 500 else "api_error"
            payload: dict[str, Any] = {"error": {"message": f"fake {reply.status}", "type": kind}}
            if path.endswith("/messages"):
                payload = {"type": "error", "error": {"type": kind, "message": f"fake {reply.status}"}}
            if path.endswith(("generateContent", "GenerateContent")):
                status = "INVALID_ARGUMENT" if reply.status < 500 else "INTERNAL"
                payload = {
                    "error": {"code": reply.status, "message": f"fake {reply.status}", "status": status}
                }
            return self._send_json(h, reply.status, payload)
        stateful = "/responses" in path or "/conversations" in path  # billed for what the server holds
        usage_in = 0
        if not stateful:
            usage_in = reply.input_tokens if reply.input_tokens is not None else self.usage_for(body)
        stream = bool(body.get("stream"))
        if path.endswith("/chat/completions"):
            if stream:
                want_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return self._send_sse(h, _chat_chunks(body, reply, n, usage_in, want_usage))
            return self._send_json(h, 200, _chat_completion(body, reply, n, usage_in))
        if "/conversations" in path:
            return self._conversation(h, path, body, n)
        if path.endswith("/responses/compact"):
            return self._send_json(h, 200, self._compact(body, n))
        if path.endswith("/responses"):
            found = self._held(body)
            if found is None:
                return self._send_json(
                    h,
                    400,
                    {"error": {"message": "Previous response not found.", "type": "invalid_request_error"}},
                )
            body, usage_in = self._stateful(body, found, reply, n)
            if stream:
                return self._send_sse(h, _responses_events(body, reply, n, usage_in))
            return self._send_json(h, 200, _response(body, reply, n, usage_in))
        if path.endswith("/messages") and body.get("context_management"):
            body, usage_in = _anthropic_managed(body, reply, usage_in, self.usage_for)
        if path.endswith("/messages"):
            if stream:
                return self._send_sse(h, _anthropic_events(body, reply, n, usage_in))
            return self._send_json(h, 200, _anthropic_message(body, reply, n, usage_in))
        if path.endswith(":generateContent"):
            return self._send_json(h, 200, _gemini_response(path, reply, n, usage_in))
        if path.endswith(":streamGenerateContent"):
            return self._send_sse(h, _gemini_chunks(path, reply, n, usage_in))
        return self._send_json(h, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    # -- Responses state ---------------------------------------------------------------------

    def _held(self, body: Any) -> list[Any] | None:
        """The stored context a request continues ([] for none); None for an unknown id."""
        previous = body.get("previous_response_id")
        conv = body.get("conversation")
        conv_id = conv.get("id") if isinstance(conv, dict) else conv
        with self._lock:
            unknown: list[Any] | None = [] if self.hold_unknown else None
            if previous:
                return list(self.stored[previous]) if previous in self.stored else unknown
            if conv_id:
                return list(self.conversations[conv_id]) if conv_id in self.conversations else unknown
        return []

    def _stateful(self, body: Any, held: list[Any], reply: Reply, n: int) -> tuple[Any, int]:
        """The request as the model sees it (held context + new items), billed whole."""
        new = body.get("input", [])
        new_items = [{"role": "user", "content": new}] if isinstance(new, str) else list(new)
        seen = {k: v for k, v in body.items() if k not in ("previous_response_id", "conversation")}
        # A request that continues nothing is billed exactly as sent.
        seen["input"] = held + new_items if held else new
        if body.get("truncation") == "auto":
            while (
                isinstance(seen["input"], list)
                and len(seen["input"]) > 1
                and self.usage_for(seen) > self.window
            ):
                seen["input"] = seen["input"][1:]
        rendered = self.usage_for(seen)
        billed = reply.input_tokens if reply.input_tokens is not None else rendered
        context = seen["input"]
        # As OpenAI documents server-side compaction: the rendered input crossing the
        # threshold compacts during this response, whose output carries the compaction item.
        for entry in body.get("context_management") or []:
            threshold = entry.get("compact_threshold")
            if entry.get("type") == "compaction" and threshold is not None and rendered > threshold:
                context = [_compaction_item(n, context)]
        with self._lock:
            self.billed.append(billed)
        response = _response(body, reply, n, billed)
        if context is not seen["input"]:
            response["output"].insert(0, context[0])
        before = context if isinstance(context, list) else new_items
        after = [*before, *_stored_output(response)]
        conv = body.get("conversation")
        conv_id = conv.get("id") if isinstance(conv, dict) else conv
        with self._lock:
            if body.get("store") is not False:
                self.stored[response["id"]] = after
            if conv_id:
                self.conversations[conv_id] = after
        return {**body, "_response": response}, billed

    def _compact(self, body: Any, n: int) -> dict[str, Any]:
        held = self._held(body) or []
        new = body.get("input") or []
        items = held + ([{"role": "user", "content": new}] if isinstance(new, str) else list(new))
        users = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": i["content"]}]
                if isinstance(i.get("content"), str)
                else i.get("content"),
            }
            for i in items
            if isinstance(i, dict) and i.get("role") == "user"
        ]
        billed = self.usage_for({"model": body.get("model"), "input": items})
        with self._lock:
            self.billed.append(billed)
        return {
            "id": f"resp_compact_{n}",
            "object": "response.compaction",
            "created_at": 1_700_000_000 + n,
            "output": [*users, _compaction_item(n, items)],
            "usage": {
                "input_tokens": billed,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": billed + 10,
            },
        }

    def _conversation(self, h: BaseHTTPRequestHandler, path: str, body: Any, n: int) -> None:
        parts = path.rstrip("/").split("/")
        if parts[-1] == "conversations":  # create
            conv_id = f"conv_{n}"
            with self._lock:
                self.conversations[conv_id] = list(body.get("items") or [])
            payload = {
                "id": conv_id,
                "object": "conversation",
                "created_at": 1_700_000_000 + n,
                "metadata": {},
            }
            return self._send_json(h, 200, payload)
        if parts[-1] == "items":  # add items
            conv_id = parts[-2]
            added = [{**item, "id": f"item_{n}_{i}"} for i, item in enumerate(body.get("items") or [])]
            with self._lock:
                self.conversations.setdefault(conv_id, []).extend(body.get("items") or [])
            payload = {"object": "list", "data": added, "first_id": None, "last_id": None, "has_more": False}
            return self._send_json(h, 200, payload)
        return self._send_json(h, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    @staticmethod
    def _send_json(h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _send_sse(h: BaseHTTPRequestHandler, events: Iterator[tuple[str | None, Any]]) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("connection", "close")
        h.end_headers()
        for event, data in events:
            head = f"event: {event}\n" if event else ""
            text = data if isinstance(data, str) else json.dumps(data)
            h.wfile.write(f"{head}data: {text}\n\n".encode())
            h.wfile.flush()
        h.close_connection = True


# -- OpenAI Chat Completions -----------------------------------------------------------------


def _chat_usage(reply: Reply, usage_in: int) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    return {
        "prompt_tokens": usage_in,
        "completion_tokens": reply.output_tokens,
        "total_tokens": usage_in + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
    }


def _chat_tool_calls(reply: Reply, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(reply.tool_calls)
    ]


def _chat_completion(body: Any, reply: Reply, n: int, usage_in: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if reply.tool_calls else reply.text}
    if reply.tool_calls:
        message["tool_calls"] = _chat_tool_calls(reply, n)
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000 + n,
        "model": body.get("model", "gpt-4o"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _chat_usage(reply, usage_in),
    }


def _chat_chunks(
    body: Any, reply: Reply, n: int, usage_in: int, want_usage: bool
) -> Iterator[tuple[str | None, Any]]:
    base = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000 + n,
        "model": body.get("model", "gpt-4o"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield None, chunk({"role": "assistant", "content": ""})
    if reply.tool_calls:
        for i, call in enumerate(_chat_tool_calls(reply, n)):
            yield None, chunk({"tool_calls": [{"index": i, **call}]})
        yield None, chunk({}, "tool_calls")
    else:
        for word in _pieces(reply.text):
            yield None, chunk({"content": word})
        yield None, chunk({}, "stop")
    if want_usage and reply.stream_usage:
        yield None, {**base, "choices": [], "usage": _chat_usage(reply, usage_in)}
    yield None, "[DONE]"


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


# -- OpenAI Responses ------------------------------------------------------------------------


def _compaction_item(n: int, replaced: list[Any]) -> dict[str, Any]:
    return {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": f"enc-{n}-{len(replaced)}"}


def _stored_output(response: dict[str, Any]) -> list[Any]:
    """The output items the next request of the chain sees (a compaction item is already in place)."""
    return [item for item in response["output"] if item.get("type") != "compaction"]


def _response(body: Any, reply: Reply, n: int, usage_in: int) -> dict[str, Any]:
    if "_response" in body:  # built once by the stateful path, which had to know the output
        return dict(body["_response"])
    output: list[dict[str, Any]] = []
    for i, (name, args) in enumerate(reply.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": args,
                "status": "completed",
            }
        )
    if not reply.tool_calls:
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1_700_000_000 + n,
        "status": "completed",
        "model": body.get("model", "gpt-4o"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools", []),
        "usage": dict(reply.usage)
        if reply.usage is not None
        else {
            "input_tokens": usage_in,
            "input_tokens_details": {"cached_tokens": reply.cached_tokens},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage_in + reply.output_tokens,
        },
    }


def _responses_events(body: Any, reply: Reply, n: int, usage_in: int) -> Iterator[tuple[str | None, Any]]:
    """The events the Responses API streams: each output item is added, filled and done, in order."""
    done = _response(body, reply, n, usage_in)
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> tuple[str, Any]:
        return kind, {"type": kind, **fields, "sequence_number": next(seq)}

    yield event("response.created", response=started)
    for index, item in enumerate(done["output"]):
        if item["type"] != "message":
            yield event("response.output_item.added", output_index=index, item=item)
            yield event("response.output_item.done", output_index=index, item=item)
            continue
        yield event("response.output_item.added", output_index=index, item={**item, "content": []})
        empty = {"type": "output_text", "text": "", "annotations": []}
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        yield event("response.content_part.added", **ids, part=empty)
        for word in _pieces(reply.text):
            yield event("response.output_text.delta", **ids, delta=word, logprobs=[])
        yield event("response.output_text.done", **ids, text=reply.text, logprobs=[])
        yield event("response.content_part.done", **ids, part=item["content"][0])
        yield event("response.output_item.done", output_index=index, item=item)
    completed = done if reply.stream_usage else {**done, "usage": None}
    yield event("response.completed", response=completed)


# -- Anthropic Messages ----------------------------------------------------------------------


def _anthropic_usage(reply: Reply, usage_in: int) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    return {
        "input_tokens": usage_in,
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cached_tokens,
        "cache_creation_input_tokens": 0,
    }


def _anthropic_content(reply: Reply, n: int) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if reply.text and not reply.tool_calls:
        content.append({"type": "text", "text": reply.text})
    for i, (name, args) in enumerate(reply.tool_calls):
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": json.loads(args)})
    return content


def _anthropic_managed(
    body: Any, reply: Reply, usage_in: int, usage_for: Callable[[Any], int]
) -> tuple[Any, int]:
    """Anthropic's server-side context management: clear old tool results, or compact the
    context into one summary block, and report what was done as the API does."""
    edits = (body.get("context_management") or {}).get("edits") or []
    messages = body.get("messages", [])
    applied: list[dict[str, Any]] = []
    compaction: dict[str, Any] | None = None
    iterations: list[dict[str, Any]] | None = None
    for edit in edits:
        kind = str(edit.get("type", ""))
        if kind.startswith("clear_tool_uses"):
            keep = int((edit.get("keep") or {}).get("value", 3))
            results = [
                (i, k)
                for i, m in enumerate(messages)
                if isinstance(m.get("content"), list)
                for k, b in enumerate(m["content"])
                if b.get("type") == "tool_result"
            ]
            cleared = results[: max(0, len(results) - keep)]
            if not cleared:
                continue
            edited = json.loads(json.dumps(messages))
            for i, k in cleared:
                edited[i]["content"][k]["content"] = "[cleared]"
            before = usage_for({**body, "messages": messages})
            messages = edited
            after = usage_for({**body, "messages": messages})
            applied.append(
                {"type": kind, "cleared_tool_uses": len(cleared), "cleared_input_tokens": before - after}
            )
        elif kind.startswith("compact_"):
            trigger = int((edit.get("trigger") or {}).get("value", 150_000))
            whole = usage_for({**body, "messages": messages})
            if whole > trigger:
                compaction = {
                    "type": "compaction",
                    "content": "Summary: a cracked shelf, replacement agreed.",
                }
                messages = [{"role": "user", "content": [{"type": "text", "text": compaction["content"]}]}]
                after = usage_for({**body, "messages": messages})
                iterations = [
                    {"type": "compaction", "input_tokens": whole, "output_tokens": 40,
                     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                    {"type": "message", "input_tokens": after, "output_tokens": reply.output_tokens,
                     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                ]  # fmt: skip
    billed = (
        reply.input_tokens if reply.input_tokens is not None else usage_for({**body, "messages": messages})
    )
    managed = {"applied_edits": applied}
    return {**body, "_managed": (managed, compaction, iterations)}, billed


def _anthropic_message(body: Any, reply: Reply, n: int, usage_in: int) -> dict[str, Any]:
    if "_managed" in body:
        managed, compaction, iterations = body["_managed"]
        plain = _anthropic_message({k: v for k, v in body.items() if k != "_managed"}, reply, n, usage_in)
        plain["context_management"] = managed
        if compaction is not None:
            plain["content"].insert(0, compaction)
        if iterations is not None:
            plain["usage"]["iterations"] = iterations
        return plain
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-6"),
        "content": _anthropic_content(reply, n),
        "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply, usage_in),
    }


def _anthropic_events(body: Any, reply: Reply, n: int, usage_in: int) -> Iterator[tuple[str | None, Any]]:
    message = _anthropic_message(body, reply, n, usage_in)
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
            )
            for word in _pieces(block["text"]):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": word},
                    },
                )
        elif block["type"] == "compaction":
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": block}
        else:
            empty = {**block, "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": empty}
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    usage = {"output_tokens": reply.output_tokens} if reply.stream_usage else {"output_tokens": 0}
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": usage,
    }
    if "context_management" in message:  # the beta stream reports the edits at the end
        delta["context_management"] = message["context_management"]
    yield "message_delta", delta
    yield "message_stop", {"type": "message_stop"}


# -- Gemini generateContent ------------------------------------------------------------------


def _gemini_model(path: str) -> str:
    return path.rsplit("/", 1)[-1].split(":", 1)[0]


def _gemini_usage(reply: Reply, usage_in: int, output: int) -> dict[str, Any]:
    """``promptTokenCount`` includes the cached tokens (``cachedContentTokenCount`` is part of it)."""
    usage: dict[str, Any] = {
        "promptTokenCount": usage_in,
        "candidatesTokenCount": output,
        "totalTokenCount": usage_in + output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": usage_in}],
    }
    if reply.cached_tokens:
        usage["cachedContentTokenCount"] = reply.cached_tokens
    return usage


def _gemini_parts(reply: Reply) -> list[dict[str, Any]]:
    if reply.tool_calls:
        return [{"functionCall": {"name": name, "args": json.loads(args)}} for name, args in reply.tool_calls]
    return [{"text": reply.text}]


def _gemini_response(path: str, reply: Reply, n: int, usage_in: int) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": _gemini_parts(reply)}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": _gemini_usage(reply, usage_in, reply.output_tokens),
        "modelVersion": _gemini_model(path),
        "responseId": f"gemini-{n}",
    }


def _gemini_chunks(path: str, reply: Reply, n: int, usage_in: int) -> Iterator[tuple[str | None, Any]]:
    """Every chunk carries the usage so far (the prompt count from the first); the last one is final."""
    pieces: list[list[dict[str, Any]]] = (
        [_gemini_parts(reply)] if reply.tool_calls else [[{"text": w}] for w in _pieces(reply.text)]
    )
    for k, parts in enumerate(pieces):
        last = k == len(pieces) - 1
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if last:
            candidate["finishReason"] = "STOP"
        chunk: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": _gemini_model(path),
            "responseId": f"gemini-{n}",
        }
        if reply.stream_usage:
            chunk["usageMetadata"] = _gemini_usage(reply, usage_in, reply.output_tokens if last else k + 1)
        yield None, chunk


def closed_port_url() -> str:
    """A base URL nothing listens on: the SDK's connection error, quickly."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A running fake provider for one test."""
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()
