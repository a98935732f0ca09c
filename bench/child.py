"""What the bench's server processes share: their arguments, and living as long as their parent.

A server the bench starts (``python -m bench.otlp_sink PORT``, ``python -m
bench.loopback_provider PORT``) says ``ready`` on stdout once it listens, and stops when the
bench closes its stdin (or dies, which closes it too) or after ``--max-seconds``: a benchmark
that crashed never leaves a server behind.
"""

from __future__ import annotations

import argparse
import sys
import threading


def arguments() -> argparse.Namespace:
    """``PORT [--max-seconds N]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    return parser.parse_args()


def serve_until_parent_closes(max_seconds: float) -> None:
    """Say ``ready``, then return when the parent closes our stdin or ``max_seconds`` have passed."""
    print("ready", flush=True)
    done = threading.Event()

    def wait_for_parent() -> None:
        sys.stdin.read()  # EOF: the benchmark closed our stdin (or died)
        done.set()

    threading.Thread(target=wait_for_parent, daemon=True).start()
    done.wait(max_seconds)
