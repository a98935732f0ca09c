"""Bounded metric labels: every label value comes from a set whose size is known in advance.

Spans may carry anything the request had (they are sampled and indexed per trace);
metrics multiply series by every distinct label value, so an unbounded task type or
round number would turn one histogram into thousands of series.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable

from otel_ctx import _encodings as encodings
from otel_ctx import names
from otel_ctx._ledger import BUILTIN_RESOLUTIONS, MAX_EXTRA_RESOLUTIONS, check_resolutions

logger = logging.getLogger("otel_ctx.telemetry")

#: Rounds 1..DEFAULT_MAX_ROUND keep their own label; later rounds share ``"<max+1>+"``. The labels
#: are zero-padded to one width (``01`` … ``12``, ``13+``): Grafana and Prometheus order label
#: values as text, and unpadded rounds would sort 1, 10, 11, 12, 13+, 2, … .
DEFAULT_MAX_ROUND = 12
#: Besides the configured task types, the first this-many others keep their name: a fitter's
#: own, or any while none are known. All fitters of the process share the bound.
DEFAULT_MAX_TASK_TYPES = 20
#: Besides the configured models, the first this-many model names keep theirs: any name (a
#: local model) while none are configured, else only a known family's (dated snapshots,
#: ``-mini``). The shipped model table is not a licence: 45 names times every other label
#: would be thousands of series from one process.
DEFAULT_MAX_MODELS = 8

_other_model_warned = False

#: Labels whose values are a fixed set of the registry's.
_FIXED: dict[str, tuple[str, ...]] = {
    names.OUTCOME: names.OUTCOMES,
    names.STOP: names.STOPS,
    names.TRIM_PERFORMER: names.PERFORMERS,
    names.UNOBSERVED_REASON: names.UNOBSERVED_REASONS,
}


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
        self._seen_models: set[str] = set()
        # Resolutions a run added for itself (beyond the configured ones), first come first kept.
        self._seen_resolutions: set[str] = set()
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
        if task_type in self.task_types or task_type in self._seen:
            return task_type
        if (self.task_types or known) and task_type not in known:
            return names.OTHER_TASK_TYPE
        # A fitter's own task types pass too, but all fitters together share one bound: the
        # label's worst case must be known before the first fit (the SDK's cardinality limits).
        with self._lock:
            if len(self._seen) < self.max_task_types:
                self._seen.add(task_type)
                return task_type
        return names.OTHER_TASK_TYPE

    def model_label(self, model: str) -> str:
        """The model if it is configured, else one of the first ``max_models`` others, else ``other``.

        With models configured, only names of a known family (``gpt-4o-2024-08-06``,
        ``gpt-4.1-mini``) fill those slots; with none configured any name does (a local
        model): a proxy that passes every request's model through must not turn one
        histogram into thousands of series.
        """
        if model in self.models or model in self._seen_models:
            return model
        if not self.models or encodings.is_known_model(model):
            with self._lock:
                if len(self._seen_models) < self.max_models:
                    self._seen_models.add(model)
                    return model
        _warn_other_model(model)
        return names.OTHER_MODEL

    def resolution_label(self, resolution: str) -> str:
        """A run's resolution as a label: built-in and configured ones as they are; a run's own
        extras while the process has seen at most ``MAX_EXTRA_RESOLUTIONS`` of them, else ``other``."""
        if resolution in BUILTIN_RESOLUTIONS or resolution in self.resolutions:
            return resolution
        if resolution in self._seen_resolutions:
            return resolution
        with self._lock:
            if len(self._seen_resolutions) + len(self.resolutions) < MAX_EXTRA_RESOLUTIONS:
                self._seen_resolutions.add(resolution)
                return resolution
        return names.OTHER_RESOLUTION

    # --- the worst case, known before the first fit --------------------------------------

    def values(self, attribute: str, metric: names.Metric) -> int:
        """How many values ``attribute`` of ``metric`` can take in this process, at most."""
        if attribute == names.TASK_TYPE:
            # configured ones, the first max_task_types others, the default and ``other``
            return len(self.task_types) + self.max_task_types + 2
        if attribute == names.GEN_AI_REQUEST_MODEL:
            return len(self.models) + self.max_models + 1
        if attribute == names.ROUND:
            return len(self._round_labels) + 1
        if attribute == names.RESOLUTION:
            return len(BUILTIN_RESOLUTIONS) + MAX_EXTRA_RESOLUTIONS + 1
        if attribute == names.COMPONENT:
            return len(names.ROUND_COMPONENTS if metric is names.ROUND_TOKENS else names.COMPONENTS)
        if attribute in _FIXED:
            return len(_FIXED[attribute])
        raise ValueError(f"{metric.name}: no bound known for the label {attribute!r}")

    def worst_case(self, metric: names.Metric) -> int:
        """The most label sets (points) ``metric`` can have: the product of its labels' bounds.

        The views set each instrument's SDK cardinality limit to this, so otel-ctx's own labels
        never reach the SDK's overflow series.
        """
        return math.prod(self.values(attribute, metric) for attribute in metric.attributes)

    def series(self, metric: names.Metric, points: int) -> int:
        """Prometheus series that ``points`` label sets of ``metric`` become (buckets, +Inf, sum, count)."""
        return points * (len(metric.buckets) + 3) if metric.kind == "histogram" else points


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
