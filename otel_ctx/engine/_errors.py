"""Typed errors: each names what was wrong and where, so a caller can act on it."""

from __future__ import annotations

import reprlib

#: Error messages quote the caller's values through this: a bounded repr, so a value nested a
#: thousand levels deep (or a megabyte long) cannot turn a typed error into a RecursionError
#: or a message nobody can read.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = 60
_SHOWN.maxother = 60


def shown(value: object) -> str:
    """The caller's ``value`` as an error message quotes it: a repr bounded in depth and length."""
    return _SHOWN.repr(value)


class OtelCtxError(Exception):
    """Base class of every error otel-ctx raises on purpose."""


class InvalidPolicyError(OtelCtxError, ValueError):
    """A budget policy whose numbers cannot describe a request budget."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class InvalidRequestError(OtelCtxError, ValueError):
    """A request that cannot be counted or sent as given.

    ``where`` locates the problem (``messages[3].tool_call_id``, ``tools[1]``,
    ``skills['refunds']``); nothing has been changed when this is raised.
    """

    def __init__(self, where: str, problem: str, *, index: int | None = None) -> None:
        self.where = where
        self.problem = problem
        self.index = index
        super().__init__(f"{where}: {problem}")


class InvalidMessageError(InvalidRequestError):
    """One message is malformed: unknown role, wrong content type, orphaned tool result."""


class InvalidToolSchemaError(InvalidRequestError):
    """A tool definition that is not a JSON object of the provider's tool shape."""


class TranscriptRuleError(InvalidMessageError):
    """A transcript the provider would reject: a tool call left unanswered, a result
    answering no call, a call id used twice.

    ``fit`` raises it (sending would fail anyway); observe-only paths record the
    problem on the result instead, so watching an agent never breaks it.
    """


class TooDeeplyNestedError(InvalidRequestError):
    """Content parts or a tool schema nested deeper than any real request is."""


class UnknownProviderError(InvalidRequestError):
    """A request body whose dialect is unknown, or that more than one dialect could read."""


class UnknownTaskTypeError(OtelCtxError, KeyError):
    """A task type with no budget policy and no default to fall back on."""

    def __init__(self, task_type: str | None, known: list[str]) -> None:
        self.task_type = task_type
        self.known = known
        super().__init__(
            f"task_type {shown(task_type)} has no budget policy and the fitter has no default; "
            f"known task types: {', '.join(known) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])
