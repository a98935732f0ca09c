"""A stand-in for Grafana's HTTP API, enough for ``otel-ctx dashboards push``.

It answers the calls grafana-client makes (``/api/health``, ``/api/datasources/...``,
``/api/folders``, ``/api/dashboards/db``) the way Grafana 11 does, records every request
(method, path, headers, JSON body) for the tests to assert on, and can be told to answer
everything with one status (401, 403, ...) to exercise the error paths. Hostile modes: it
can echo the request's Authorization header in its error messages (``echo_auth``), answer
a path with any status, content type and raw body (``overrides``), and trickle every body
one byte at a time (``drip_seconds``). It listens on 127.0.0.1 only, on a port the OS
picks, in a daemon thread.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGrafana:
    datasources: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {"id": 1, "uid": "prom-uid", "name": "Prometheus", "type": "prometheus"},
            {"id": 2, "uid": "jaeger-uid", "name": "Jaeger", "type": "jaeger"},
        ]
    )
    folders: list[dict[str, Any]] = field(default_factory=list)
    #: When set, every /api call except /api/health answers with this status.
    fail_status: int | None = None
    #: When set, /api/health answers with this status too.
    fail_health: bool = False
    #: Error messages quote the request's Authorization header, as a careless proxy might.
    echo_auth: bool = False
    #: ``(method, path) -> (status, content type, raw body)``: answered as given.
    overrides: dict[tuple[str, str], tuple[int, str, bytes]] = field(default_factory=dict)
    #: When set, bodies are sent one byte at a time with this many seconds between bytes.
    drip_seconds: float | None = None
    requests: list[Recorded] = field(default_factory=list)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    url: str = ""

    def calls(self, method: str, path_prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    # --- request handling ------------------------------------------------------------

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if path == "/api/health" and not self.fail_health:
            return 200, {"commit": "fake", "database": "ok", "version": "11.6.0"}
        if self.fail_status is not None:
            message = _STATUS_MESSAGES.get(self.fail_status, "error")
            if self.echo_auth and self.requests:
                message += f" (Authorization: {self.requests[-1].headers.get('authorization')})"
            return self.fail_status, {"message": message}
        if method == "GET" and path == "/api/datasources":
            return 200, self.datasources
        for key in ("name", "uid"):
            prefix = f"/api/datasources/{key}/"
            if method == "GET" and path.startswith(prefix):
                wanted = unquote(path[len(prefix) :])
                for ds in self.datasources:
                    if ds[key] == wanted:
                        return 200, ds
                return 404, {"message": "Data source not found"}
        if method == "GET" and path == "/api/folders":
            return 200, [{"id": f["id"], "uid": f["uid"], "title": f["title"]} for f in self.folders]
        if method == "POST" and path == "/api/folders":
            folder = {
                "id": len(self.folders) + 1,
                "uid": body.get("uid") or "generated",
                "title": body["title"],
            }
            self.folders.append(folder)
            return 200, {**folder, "url": f"/dashboards/f/{folder['uid']}/"}
        if method == "POST" and path == "/api/dashboards/db":
            board = body["dashboard"]
            uid = board["uid"]
            version = self.dashboards.get(uid, {}).get("version", 0) + 1
            self.dashboards[uid] = {**board, "version": version}
            return 200, {
                "id": len(self.dashboards),
                "uid": uid,
                "url": f"/d/{uid}/{uid}",
                "status": "success",
                "version": version,
                "slug": uid,
            }
        return 404, {"message": "Not found"}


_STATUS_MESSAGES = {401: "Unauthorized", 403: "Permission denied", 404: "Not found", 500: "Internal error"}


def _handler(fake: FakeGrafana) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            fake.requests.append(
                Recorded(
                    self.command,
                    parts.path,
                    parts.query,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
            )
            override = fake.overrides.get((self.command, parts.path))
            if override is not None:
                status, content_type, data = override
            else:
                status, payload = fake.handle(self.command, parts.path, body)
                content_type, data = "application/json", json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if fake.drip_seconds is None:
                self.wfile.write(data)
                return
            try:
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(fake.drip_seconds)
            except OSError:  # the client gave up
                pass

        do_GET = do_POST = do_PUT = do_DELETE = _serve  # http.server's naming

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running(fake: FakeGrafana | None = None) -> Iterator[FakeGrafana]:
    """Serve ``fake`` on 127.0.0.1 for the duration of the block; ``fake.url`` is its root."""
    fake = fake or FakeGrafana()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
