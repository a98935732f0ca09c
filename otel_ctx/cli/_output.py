"""Writing a file the CLI produces: all of it or nothing, never a truncated file.

The text goes to a temporary file beside the target, which is renamed over it only once
everything is written; a failure (an unencodable character, a full disk) leaves any
earlier file as it was and names both the file and the problem.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from otel_ctx.cli._errors import CliError


def first_unencodable(items: Sequence[Any]) -> int | None:
    """Index of the first item whose JSON holds text UTF-8 cannot encode (a lone surrogate
    from a ``\\udXXX`` escape in the input), to name it in the error."""
    for i, item in enumerate(items):
        try:
            json.dumps(item, ensure_ascii=False).encode("utf-8")
        except (UnicodeEncodeError, TypeError, ValueError):
            return i
    return None


def write_atomically(path: Path, text: str, *, what: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` by temp file + rename; ``what`` names the content."""
    if path.is_dir():
        raise CliError(f"{path}: is a directory; give a file name to write {what} to")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CliError(
            f"{path}: cannot write {what}: it holds text that is not valid Unicode "
            f"({exc.reason}, {exc.object[exc.start : exc.end]!a} at character {exc.start}); "
            "nothing was written"
        ) from None
    directory = path.parent if str(path.parent) else Path(".")
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise CliError(f"{path}: cannot write {what} ({exc.strerror or exc})") from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
