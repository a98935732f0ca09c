"""A small HTTP server on 127.0.0.1 that answers whatever a test tells it to, hostile included.

For the clients that talk to a server the user names (``advise`` to Prometheus, ``dashboards
push`` to Grafana): a test sets ``server.respond`` to a function of the request that returns
a :class:`Reply` (status, headers, body), and the body can be endless, huge, dripped one byte
at a time, or a redirect elsewhere. The server records every request and counts the bytes it
managed to send, so a test can tell that a client stopped reading at its cap. It listens on
127.0.0.1 only, on a port the OS picks, in a daemon thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    #: Seconds between bytes: every byte is sent on its own, so no single read times out.
    drip_seconds: float | None = None
    #: Announce this Content-Length (None: the body's length if it is bytes, else no header).
    content_length: int | None = None


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class HostileServer:
    respond: Callable[[Seen], Reply] = lambda seen: Reply(404, b"{}")
    requests: list[Seen] = field(default_factory=list)
    sent_bytes: int = 0
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def endless(chunk: bytes = b"[" * 65536) -> Iterator[bytes]:
    """A body that never ends (the client must stop reading)."""
    while True:
        yield chunk


def sized(total: int, chunk: bytes = b" " * 65536) -> Iterator[bytes]:
    """``total`` bytes, made as they are sent (nothing that size is held in memory)."""
    left = total
    while left > 0:
        piece = chunk[: min(len(chunk), left)]
        left -= len(piece)
        yield piece


def _handler(server: HostileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            seen = Seen(
                self.command,
                parts.path,
                parse_qs(parts.query),
                {k.lower(): v for k, v in self.headers.items()},
            )
            with server.lock:
                server.requests.append(seen)
            reply = server.respond(seen)
            body = reply.body
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            if reply.content_length is not None:
                self.send_header("Content-Length", str(reply.content_length))
            elif isinstance(body, bytes):
                self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            chunks = [body] if isinstance(body, bytes) else body
            try:
                for chunk in chunks:
                    if reply.drip_seconds is None:
                        self.wfile.write(chunk)
                        server.sent_bytes += len(chunk)
                        continue
                    for i in range(len(chunk)):
                        self.wfile.write(chunk[i : i + 1])
                        self.wfile.flush()
                        server.sent_bytes += 1
                        time.sleep(reply.drip_seconds)
            except OSError:  # the client stopped reading
                pass
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = _serve  # http.server's naming

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running(server: HostileServer | None = None) -> Iterator[HostileServer]:
    """Serve on 127.0.0.1 for the duration of the block; ``server.url`` is its root."""
    server = server or HostileServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
