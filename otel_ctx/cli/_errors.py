"""User errors of the CLI: one readable line on stderr and an exit code, never a traceback."""

from __future__ import annotations

EXIT_OK = 0
#: The request overflowed and the user asked to fail on it (``--fail-on-overflow``).
EXIT_OVERFLOW = 1
#: Bad usage or bad input (unreadable file, not JSON, invalid message, impossible budget).
EXIT_USAGE = 2


class CliError(Exception):
    """A problem the user can fix; ``str(err)`` is the whole message."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
