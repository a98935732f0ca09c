"""A fake Amazon Bedrock runtime on 127.0.0.1 for tests with the real boto3 client.

boto3 is used exactly as an agent uses it, with ``endpoint_url`` pointed here and dummy
credentials (requests are SigV4-signed as usual; the fake does not check signatures):
``POST /model/{modelId}/converse`` answers Converse JSON with a ``usage``;
``/converse-stream`` answers an AWS event stream (``application/vnd.amazon.eventstream``:
``messageStart``, ``contentBlockDelta``, ``contentBlockStop``, ``messageStop``, ``metadata``
with the usage); ``/invoke`` answers the model's JSON with Bedrock's
``x-amzn-bedrock-input-token-count`` headers; ``/invoke-with-response-stream`` answers
``chunk`` events whose last carries ``amazon-bedrock-invocationMetrics``. Every request is
recorded byte for byte, so a test can prove instrumentation sent the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import pytest
from support import free_port, serve, shut


@dataclass
class BedrockReply:
    """What the fake answers to one request."""

    text: str = "Done."
    input_tokens: int = 42
    output_tokens: int = 7
    cache_read: int = 0
    cache_write: int = 0
    #: An HTTP error status instead of an answer (boto3 raises its ClientError).
    status: int = 200


@dataclass(frozen=True)
class BedrockRequest:
    """One request as it arrived: the operation, the model id and the exact body bytes."""

    operation: str
    model: str
    body: bytes


def _header(name: str, value: str) -> bytes:
    encoded = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(encoded)) + encoded


def event_message(event_type: str, payload: Any) -> bytes:
    """One AWS event-stream message (prelude, headers, JSON payload, CRCs), as Bedrock sends."""
    headers = (
        _header(":event-type", event_type)
        + _header(":content-type", "application/json")
        + _header(":message-type", "event")
    )
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message))


def _usage(reply: BedrockReply) -> dict[str, int]:
    usage = {
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "totalTokens": reply.input_tokens + reply.cache_read + reply.cache_write + reply.output_tokens,
    }
    if reply.cache_read:
        usage["cacheReadInputTokens"] = reply.cache_read
    if reply.cache_write:
        usage["cacheWriteInputTokens"] = reply.cache_write
    return usage


def _converse_events(reply: BedrockReply) -> Iterator[bytes]:
    yield event_message("messageStart", {"role": "assistant"})
    for piece in (reply.text[: len(reply.text) // 2], reply.text[len(reply.text) // 2 :]):
        yield event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
    yield event_message("contentBlockStop", {"contentBlockIndex": 0})
    yield event_message("messageStop", {"stopReason": "end_turn"})
    yield event_message("metadata", {"usage": _usage(reply), "metrics": {"latencyMs": 3}})


def _invoke_chunks(reply: BedrockReply) -> Iterator[bytes]:
    def chunk(payload: dict[str, Any]) -> bytes:
        return event_message("chunk", {"bytes": base64.b64encode(json.dumps(payload).encode()).decode()})

    yield chunk(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": reply.text}}
    )
    metrics = {
        "inputTokenCount": reply.input_tokens,
        "outputTokenCount": reply.output_tokens,
        "invocationLatency": 3,
        "firstByteLatency": 1,
    }
    if reply.cache_read:
        metrics["cacheReadInputTokenCount"] = reply.cache_read
    if reply.cache_write:
        metrics["cacheWriteInputTokenCount"] = reply.cache_write
    yield chunk({"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics})


class FakeBedrock:
    """The fake Bedrock runtime; :attr:`url` is the client's ``endpoint_url``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[BedrockRequest] = []
        self.replies: deque[BedrockReply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **config: Any) -> Any:
        """A real boto3 ``bedrock-runtime`` client pointed here, with dummy credentials."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=self.url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="dummy-secret",
            config=Config(retries={"max_attempts": 1}, **config),
        )

    def queue(self, *replies: BedrockReply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def start(self) -> FakeBedrock:
        self._server = serve(self.port, self._handle)
        return self

    def stop(self) -> None:
        shut(self._server)

    def _handle(self, h: BaseHTTPRequestHandler, raw: bytes) -> None:
        _, _, model, operation = [*h.path.split("?", 1)[0].split("/", 3), "", "", "", ""][:4]
        with self._lock:
            self.requests.append(BedrockRequest(operation, unquote(model), raw))
            reply = self.replies.popleft() if self.replies else BedrockReply()
        if reply.status != 200:
            self._send(h, reply.status, json.dumps({"message": "fake failure"}).encode(), {})
        elif operation == "converse":
            answer = {
                "output": {"message": {"role": "assistant", "content": [{"text": reply.text}]}},
                "stopReason": "end_turn",
                "usage": _usage(reply),
                "metrics": {"latencyMs": 3},
            }
            self._send(h, 200, json.dumps(answer).encode(), {"Content-Type": "application/json"})
        elif operation == "invoke":
            answer = {"completion": reply.text, "outputText": reply.text}
            headers = {
                "Content-Type": "application/json",
                "x-amzn-bedrock-input-token-count": str(reply.input_tokens),
                "x-amzn-bedrock-output-token-count": str(reply.output_tokens),
            }
            if reply.cache_read:
                headers["x-amzn-bedrock-cache-read-input-token-count"] = str(reply.cache_read)
            if reply.cache_write:
                headers["x-amzn-bedrock-cache-write-input-token-count"] = str(reply.cache_write)
            self._send(h, 200, json.dumps(answer).encode(), headers)
        else:
            events = _converse_events(reply) if operation == "converse-stream" else _invoke_chunks(reply)
            payload = b"".join(events)
            self._send(h, 200, payload, {"Content-Type": "application/vnd.amazon.eventstream"})

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, headers: dict[str, str]) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        if status != 200:
            h.send_header("Content-Type", "application/json")
            h.send_header("x-amzn-ErrorType", "ValidationException")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)


@pytest.fixture
def fake_bedrock() -> Iterator[FakeBedrock]:
    fake = FakeBedrock().start()
    yield fake
    fake.stop()
