"""Consoles that respect ``NO_COLOR`` and plain (non-TTY) output.

Rich already drops escape codes when stdout is not a terminal; ``NO_COLOR`` (any
non-empty value, https://no-color.org) additionally turns off every style on a
terminal, because a user who sets it wants text a screen reader or a log can take
as is. Tables go out as Markdown when piped: plain ASCII that still lines up, greps
cleanly and pastes into an incident ticket.
"""

from __future__ import annotations

import os

from rich import box
from rich.console import Console

#: Width for piped output (Rich would assume 80 and wrap the wider tables).
PIPE_WIDTH = 140


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR", ""))


def make_console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, color_system=None if no_color() else "auto")
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH
    return console


def table_box(console: Console) -> box.Box:
    return box.SIMPLE_HEAD if console.is_terminal else box.MARKDOWN
