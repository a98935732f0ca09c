"""Bounded metric labels: every label value comes from a set whose size is known in advance.

Spans may carry anything the request had (they are sampled and indexed per trace);
metrics multiply series by every distinct label value, so an unbounded task type or
round number would turn one histogram into thousands of series.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from otel_ctx import encodings, names
from otel_ctx.ledger import check_resolutions

logger = logging.getLogger("otel_ctx.telemetry")

#: Rounds 1..DEFAULT_MAX_ROUND keep their own label; later rounds share ``"<max+1>+"``. The labels
#: are zero-padded to one width (``01`` … ``12``, ``13+``): Grafana and Prometheus order label
#: values as text, and unpadded rounds would sort 1, 10, 11, 12, 13+, 2, … .
DEFAULT_MAX_ROUND = 12
#: When no task types are configured, the first this-many distinct ones keep their name.
DEFAULT_MAX_TASK_TYPES = 20
#: The first this-many models outside the model table keep their name: variants of a known
#: family (dated snapshots, ``-mini``), and any name (a local model) while none are configured.
DEFAULT_MAX_MODELS = 20

_other_model_warned = False


class LabelPolicy:
    """Maps a task type and a round number to bounded metric label values."""

    def __init__(
        self,
        *,
        task_types: Iterable[str] | None = None,
        max_round: int = DEFAULT_MAX_ROUND,
        max_task_types: int = DEFAULT_MAX_TASK_TYPES,
        models: Iterable[str] | None = None,
        max_models: int = DEFAULT_MAX_MODELS,
        resolutions: Iterable[str] = (),
    ) -> None:
        if isinstance(max_round, bool) or not isinstance(max_round, int) or max_round < 1:
            raise ValueError(f"max_round must be an integer >= 1, got {max_round!r}")
        if isinstance(max_task_types, bool) or not isinstance(max_task_types, int) or max_task_types < 0:
            raise ValueError(f"max_task_types must be an integer >= 0, got {max_task_types!r}")
        if isinstance(max_models, bool) or not isinstance(max_models, int) or max_models < 0:
            raise ValueError(f"max_models must be an integer >= 0, got {max_models!r}")
        self.task_types: frozenset[str] = frozenset(task_types or ())
        #: The application's own run resolutions, beside resolved/escalated/abandoned/... .
        self.resolutions: tuple[str, ...] = check_resolutions(resolutions)
        self.max_round = max_round
        self.max_task_types = max_task_types
        width = len(str(max_round + 1))
        self._round_labels = tuple(str(i).zfill(width) for i in range(max_round + 1))
        self._overflow_round = f"{max_round + 1}+"
        # First-seen task types, used only when neither the fitter nor configure() names a set.
        self._seen: set[str] = set()
        self.models: frozenset[str] = frozenset(models or ())
        self.max_models = max_models
        self._table = encodings.known_model_names()
        self._seen_models: set[str] = set()
        self._lock = threading.Lock()

    def round_label(self, round_number: int) -> str:
        """``"01"`` … ``"<max>"`` exactly, then ``"<max+1>+"``, all one width so text order is round order."""
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

    def model_label(self, model: str) -> str:
        """The model if it is configured or a name of the model table, else ``other``.

        The first ``max_models`` other names of a known family (``gpt-4o-2024-08-06``,
        ``gpt-4.1-mini``) keep theirs too, and with no configured models any name does (a
        local model): a proxy that passes every request's model through must not turn one
        histogram into thousands of series.
        """
        if model in self.models or model in self._table or model in self._seen_models:
            return model
        if not self.models or encodings.is_known_model(model):
            with self._lock:
                if len(self._seen_models) < self.max_models:
                    self._seen_models.add(model)
                    return model
        _warn_other_model(model)
        return names.OTHER_MODEL


def _warn_other_model(model: str) -> None:
    """Once per process (then DEBUG): one line says what happened, and no set of names grows."""
    global _other_model_warned
    level = logging.DEBUG if _other_model_warned else logging.WARNING
    _other_model_warned = True
    logger.log(
        level,
        "otel-ctx telemetry: metrics label model %r as %r (neither configured nor in the model "
        "table, and the label's bound is reached); configure(models=[...]) keeps a model's name. "
        "Further models are reported at DEBUG.",
        model,
        names.OTHER_MODEL,
    )
