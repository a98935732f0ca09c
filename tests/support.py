"""Shared test helpers: prerequisites that skip locally and fail under CI=true."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> None:
    """Skip with the reason locally; under ``CI=true`` a missing prerequisite is a failure."""
    if IN_CI:
        pytest.fail(f"missing prerequisite under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str, hint: str = "") -> str:
    """The path of an executable on PATH, or skip/fail naming what to install."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH{'; ' + hint if hint else ''}")
        raise AssertionError("unreachable")  # pragma: no cover - missing() raised
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
