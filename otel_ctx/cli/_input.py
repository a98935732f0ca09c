"""Reading a request file or stdin with a size cap, without hanging and without surprises.

The rules are :mod:`otel_ctx._files`' (regular files only, a FIFO never opened, one byte
over the cap refused rather than cut); this module adds stdin and the CLI's wording.
"""

from __future__ import annotations

import sys

from otel_ctx._files import describe_size, read_capped, read_regular_file
from otel_ctx.cli._errors import CliError

#: Default cap on a request body: far above any real request (a 128k-token window is
#: about half a megabyte of text), far below what would strain the machine.
DEFAULT_MAX_INPUT_BYTES = 16 * 1024 * 1024


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


def read_input(path: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[str, bytes]:
    """``(label, bytes)`` of ``path`` (``-`` is stdin), refusing what is not a regular file
    or is larger than ``limit`` bytes, with a :class:`CliError` naming the input."""
    if path == "-":
        return "<stdin>", read_capped(sys.stdin.buffer, "<stdin>", limit, _refuse, too_large_hint=_RAISE_IT)
    data = read_regular_file(
        path,
        limit,
        _refuse,
        not_regular_hint=(
            f"; pipe it to stdin with '-' if you mean to (at most {describe_size(limit)} is read)"
        ),
        too_large_hint=_RAISE_IT,
    )
    return path, data


_RAISE_IT = "; raise it with --max-input-size if the request really is that large"


def _refuse(label: str, problem: str) -> CliError:
    return CliError(f"{label}: {problem}")


__all__ = ["DEFAULT_MAX_INPUT_BYTES", "describe_size", "parse_size", "read_input"]
