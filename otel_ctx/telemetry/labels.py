"""Bounded metric labels: every label value comes from a set whose size is known in advance.

Spans may carry anything the request had (they are sampled and indexed per trace);
metrics multiply series by every distinct label value, so an unbounded task type or
round number would turn one histogram into thousands of series.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from otel_ctx import names
from otel_ctx.ledger import check_resolutions

#: Rounds 1..DEFAULT_MAX_ROUND keep their own label; later rounds share ``"<max+1>+"``.
DEFAULT_MAX_ROUND = 12
#: When no task types are configured, the first this-many distinct ones keep their name.
DEFAULT_MAX_TASK_TYPES = 20


class LabelPolicy:
    """Maps a task type and a round number to bounded metric label values."""

    def __init__(
        self,
        *,
        task_types: Iterable[str] | None = None,
        max_round: int = DEFAULT_MAX_ROUND,
        max_task_types: int = DEFAULT_MAX_TASK_TYPES,
        resolutions: Iterable[str] = (),
    ) -> None:
        if isinstance(max_round, bool) or not isinstance(max_round, int) or max_round < 1:
            raise ValueError(f"max_round must be an integer >= 1, got {max_round!r}")
        if isinstance(max_task_types, bool) or not isinstance(max_task_types, int) or max_task_types < 0:
            raise ValueError(f"max_task_types must be an integer >= 0, got {max_task_types!r}")
        self.task_types: frozenset[str] = frozenset(task_types or ())
        #: The application's own run resolutions, beside resolved/escalated/abandoned/... .
        self.resolutions: tuple[str, ...] = check_resolutions(resolutions)
        self.max_round = max_round
        self.max_task_types = max_task_types
        self._round_labels = tuple(str(i) for i in range(max_round + 1))
        self._overflow_round = f"{max_round + 1}+"
        # First-seen task types, used only when neither the fitter nor configure() names a set.
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def round_label(self, round_number: int) -> str:
        """``"1"`` … ``"<max>"`` exactly, then ``"<max+1>+"``."""
        if 0 <= round_number <= self.max_round:
            return self._round_labels[round_number]
        return self._overflow_round

    def task_label(self, task_type: str | None, known: Iterable[str] = ()) -> str:
        """The task type if it is in the configured set (the fitter's plus configure()'s), else ``other``.

        With no configured set at all, the first ``max_task_types`` distinct task types
        pass and later ones become ``other``: a fitter with a single policy accepts any
        string, and a bug that passes a ticket id must not explode the series count.
        """
        if task_type is None:
            return names.DEFAULT_TASK_TYPE
        if task_type in self.task_types or task_type in known:
            return task_type
        if self.task_types or known:
            return names.OTHER_TASK_TYPE
        if task_type in self._seen:
            return task_type
        with self._lock:
            if len(self._seen) < self.max_task_types:
                self._seen.add(task_type)
                return task_type
        return names.OTHER_TASK_TYPE
