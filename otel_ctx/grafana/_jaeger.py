"""Links from the dashboards into Jaeger's search UI.

Jaeger's UI takes its search form as query parameters: ``service``, ``operation``,
``tags`` (a JSON object of span tag → value) and a time window in microseconds.
Grafana fills in ``${...}`` at click time, and Alertmanager's templates ``{{ ... }}``
when an alert is sent, so those placeholders must survive the percent-encoding of
everything else. The dashboards and the alert rules build their links here.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from otel_ctx import names

#: How many traces one click lists.
SEARCH_LIMIT = 50

_PLACEHOLDER = re.compile(r"(\$\{[^}]+\}|\{\{[^}]+\}\})")


def _encode(value: str) -> str:
    """Percent-encode ``value`` but leave Grafana's ``${...}`` placeholders intact."""
    return "".join(
        part if _PLACEHOLDER.fullmatch(part) else quote(part, safe="")
        for part in _PLACEHOLDER.split(value)
        if part
    )


def overflow_search_url(
    base: str, service: str, tags: dict[str, str] | None = None, *, lookback: str | None = None
) -> str:
    """Jaeger search for the traces with a span whose outcome is overflow.

    No operation filter: the outcome tag alone finds them, whichever span carries it (a
    ``context_budget.fit`` span of ``run()``, a ``context_budget.observe`` span of an
    instrumented SDK call), so one link serves every path.

    ``base`` and ``service`` may be placeholders (``${jaeger_url}``, ``${__data.fields.job}``,
    ``{{ $labels.job }}``). The window is the dashboard's time range, which Grafana gives in
    milliseconds (``${__from}``) and Jaeger wants in microseconds; or, for a link sent with
    an alert, ``lookback`` before now (``1h``).
    """
    return search_url(
        base, service, {names.OUTCOME: names.OUTCOME_OVERFLOW, **(tags or {})}, lookback=lookback
    )


def ceiling_search_url(base: str, service: str, *, lookback: str | None = None) -> str:
    """Jaeger search for the traces with a fit span whose next request would have crossed the
    run's ceiling (the runs the ceiling stopped)."""
    return search_url(base, service, {names.RUN_CEILING_CROSSED: "true"}, lookback=lookback)


def search_url(base: str, service: str, span_tags: dict[str, str], *, lookback: str | None = None) -> str:
    """Jaeger search for ``service``'s traces with a span carrying every one of ``span_tags``
    (the window as :func:`overflow_search_url` describes)."""
    window = (
        [("lookback", lookback)]
        if lookback is not None
        else [("lookback", "custom"), ("start", "${__from}000"), ("end", "${__to}000")]
    )
    params = [
        ("service", service),
        ("tags", json.dumps(span_tags, sort_keys=True, separators=(",", ":"))),
        *window,
        ("limit", str(SEARCH_LIMIT)),
    ]
    query = "&".join(f"{key}={_encode(value)}" for key, value in params)
    return f"{base.rstrip('/')}/search?{query}"
