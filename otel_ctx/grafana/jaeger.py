"""Links from the dashboards into Jaeger's search UI.

Jaeger's UI takes its search form as query parameters: ``service``, ``operation``,
``tags`` (a JSON object of span tag → value) and a time window in microseconds.
Grafana fills in ``${...}`` at click time, so those placeholders must survive the
percent-encoding of everything else.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from otel_ctx import names

DEFAULT_JAEGER_URL = "http://localhost:16686"
#: How many traces one click lists.
SEARCH_LIMIT = 50

_PLACEHOLDER = re.compile(r"(\$\{[^}]+\})")


def _encode(value: str) -> str:
    """Percent-encode ``value`` but leave Grafana's ``${...}`` placeholders intact."""
    return "".join(
        part if _PLACEHOLDER.fullmatch(part) else quote(part, safe="")
        for part in _PLACEHOLDER.split(value)
        if part
    )


def overflow_search_url(base: str, service: str, tags: dict[str, str] | None = None) -> str:
    """Jaeger search for ``context_budget.fit`` spans whose outcome is overflow.

    ``base`` and ``service`` may be Grafana placeholders (``${jaeger_url}``,
    ``${__data.fields.job}``); the window is the dashboard's time range, which Grafana
    gives in milliseconds (``${__from}``) and Jaeger wants in microseconds.
    """
    span_tags = {names.OUTCOME: names.OUTCOME_OVERFLOW, **(tags or {})}
    params = [
        ("service", service),
        ("operation", names.SPAN_FIT),
        ("tags", json.dumps(span_tags, sort_keys=True, separators=(",", ":"))),
        ("lookback", "custom"),
        ("start", "${__from}000"),
        ("end", "${__to}000"),
        ("limit", str(SEARCH_LIMIT)),
    ]
    query = "&".join(f"{key}={_encode(value)}" for key, value in params)
    return f"{base}/search?{query}"
