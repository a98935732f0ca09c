"""A minimal Chat Completions server on 127.0.0.1: the provider end of the instrumented-call bench.

Runs in its own process (the provider is never in the agent's process), answers every
``POST …/chat/completions`` with the same small completion and its usage, over HTTP/1.1
keep-alive so the SDK's connection pool reuses one connection as it does in production.
It reads the whole request body (the SDK sends it whole) and exits when its parent closes
stdin or after ``--max-seconds``.

    python -m bench.loopback_provider PORT [--max-seconds 600]
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench import child

_ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 40_000, "completion_tokens": 5, "total_tokens": 40_005},
    }
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: The headers and the body are two writes: without TCP_NODELAY the body waits for the
    #: client's delayed ACK (tens of milliseconds), which would drown what the bench measures.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        ok = self.path.rstrip("/").endswith("/chat/completions")
        payload = _ANSWER if ok else b'{"error": {"message": "not here"}}'
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a request line per call would cost the provider more than its answer."""


def main() -> None:
    args = child.arguments()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    child.serve_until_parent_closes(args.max_seconds)
    server.shutdown()


if __name__ == "__main__":
    main()
