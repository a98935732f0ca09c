"""Reading a request file or stdin with a size cap, without hanging and without surprises.

A request body pulled out of a log is a few hundred kilobytes; ``/dev/zero``, an endless
pipe or a mistyped path to a device would otherwise be read until memory runs out, and a
FIFO nobody writes to would block forever. So: a regular file (or stdin) only, checked
with ``os.stat`` before anything is opened; a FIFO is never opened (opening one blocks
until a writer appears); at most ``limit`` bytes are read, and one byte more means the
input is refused rather than cut.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import BinaryIO

from otel_ctx.cli.errors import CliError

#: Default cap on a request body: far above any real request (a 128k-token window is
#: about half a megabyte of text), far below what would strain the machine.
DEFAULT_MAX_INPUT_BYTES = 16 * 1024 * 1024
_CHUNK = 1 << 20


def parse_size(text: str) -> int:
    """``"16M"``, ``"512k"``, ``"2G"`` or a plain byte count, as bytes (for ``--max-input-size``)."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    factor = 1
    for suffix, multiplier in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if value.endswith(suffix):
            value, factor = value[:-1], multiplier
            break
    try:
        size = int(value) * factor
    except ValueError:
        raise CliError(f"--max-input-size: {text!r} is not a size like 16M, 512k or 1048576") from None
    if size < 1:
        raise CliError(f"--max-input-size: {text!r} must be at least one byte")
    return size


def describe_size(size: int) -> str:
    for unit, multiplier in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if size >= multiplier and size % multiplier == 0:
            return f"{size // multiplier}{unit}"
    return f"{size} bytes"


def read_input(path: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[str, bytes]:
    """``(label, bytes)`` of ``path`` (``-`` is stdin), refusing what is not a regular file
    or is larger than ``limit`` bytes, with a :class:`CliError` naming the input."""
    if path == "-":
        return "<stdin>", _read_capped(sys.stdin.buffer, "<stdin>", limit)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise CliError(f"{path}: is a directory, expected a JSON file")
    if not stat.S_ISREG(info.st_mode):
        raise CliError(
            f"{path}: is {_kind(info.st_mode)}, not a regular file; "
            f"pipe it to stdin with '-' if you mean to (at most {describe_size(limit)} is read)"
        )
    if info.st_size > limit:
        raise CliError(_too_large(path, limit))
    try:
        # O_NONBLOCK: should the path have been swapped for a FIFO since the stat, the open
        # returns at once instead of waiting for a writer; the check below then refuses it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise CliError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CliError(f"{path}: is not a regular file")
        return path, _read_capped(handle, path, limit)


def _read_capped(stream: BinaryIO, label: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= limit:
            chunk = stream.read(min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise CliError(f"{label}: cannot read it ({exc.strerror or exc})") from None
    if total > limit:
        raise CliError(_too_large(label, limit))
    return b"".join(chunks)


def _too_large(label: str, limit: int) -> str:
    return (
        f"{label}: larger than the {describe_size(limit)} input limit; "
        "raise it with --max-input-size if the request really is that large"
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
