"""Reading a file the user names, with a size cap, without hanging and without surprises.

``/dev/zero``, an endless pipe or a device would be read until memory runs out, and a FIFO
nobody writes to blocks forever. So: a regular file only, checked with ``os.stat`` before
anything is opened; at most ``limit`` bytes, and one byte more refuses the file rather than
cutting it. The caller says how a refusal is raised (the CLI's one-line error, the engine's
``InvalidPolicyError``), so every reader of user files shares one set of rules.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO, NoReturn

#: Builds the exception for a refused file: ``(label, problem)``, e.g. ``("x.json", "no such file")``.
Refuse = Callable[[str, str], Exception]

_CHUNK = 1 << 20


def describe_size(size: int) -> str:
    """``16M``, ``512k`` or ``N bytes``: a limit as a user would write it."""
    for unit, multiplier in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if size >= multiplier and size % multiplier == 0:
            return f"{size // multiplier}{unit}"
    return f"{size} bytes"


def read_regular_file(
    path: str,
    limit: int,
    refuse: Refuse,
    *,
    what: str = "a JSON file",
    not_regular_hint: str = "",
    too_large_hint: str = "",
) -> bytes:
    """The bytes of ``path``, refusing what is not a regular file or holds more than ``limit``
    bytes with ``refuse(path, problem)``. ``what`` names what was expected (for a directory);
    the hints follow the matching refusals."""

    def fail(problem: str) -> NoReturn:
        raise refuse(path, problem)

    try:
        info = os.stat(path)
    except FileNotFoundError:
        fail("no such file")
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        fail(f"cannot read it ({getattr(exc, 'strerror', None) or exc})")
    if stat.S_ISDIR(info.st_mode):
        fail(f"is a directory, expected {what}")
    if not stat.S_ISREG(info.st_mode):
        fail(f"is {_kind(info.st_mode)}, not a regular file{not_regular_hint}")
    if info.st_size > limit:
        fail(too_large(limit, too_large_hint))
    try:
        # O_NONBLOCK: should the path have been swapped for a FIFO since the stat, the open
        # returns at once instead of waiting for a writer; the check below then refuses it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        fail(f"cannot read it ({exc.strerror or exc})")
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            fail("is not a regular file")
        return read_capped(handle, path, limit, refuse, too_large_hint=too_large_hint)


def read_capped(
    stream: BinaryIO, label: str, limit: int, refuse: Refuse, *, too_large_hint: str = ""
) -> bytes:
    """At most ``limit`` bytes of ``stream``; one more is ``refuse(label, ...)``, not a cut."""
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
        raise refuse(label, f"cannot read it ({exc.strerror or exc})") from None
    if total > limit:
        raise refuse(label, too_large(limit, too_large_hint))
    return b"".join(chunks)


def too_large(limit: int, hint: str = "") -> str:
    return f"larger than the {describe_size(limit)} input limit{hint}"


_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")
