"""``otel-ctx advise``: budgets from what the fleet recorded, not from the window size.

Reads Prometheus (the series otel-ctx's telemetry exports) and prints, per task type:
today's request limit and budget, the p50/p95 estimated prompt, the overflow and
compaction rates, the cost per ticket, and what other request limits would have done
to the same requests, with a suggested limit under stated targets.

The what-ifs come from the utilization histogram (estimated ÷ budget) split by outcome.
Candidate limits are the ones whose budget falls on a bucket bound of that histogram,
so the shares are counts, not interpolations:

* below today's budget, a request that fit compacts when its estimate exceeds the new
  budget; one that compacted or overflowed still does (the overflow share is then a
  lower bound: a floor the histogram cannot see might also exceed the smaller budget);
* above it, a floor that overflowed fits once the new budget holds it (exact); one that
  compacted may still compact (an upper bound: its full size was never recorded).

The cost that follows scales today's cost per ticket by the prompt tokens the requests
would send (bucket midpoints, each capped at the new budget), on the reading that a
ticket's cost follows its prompt tokens.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import math
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import IO, Annotated, Any

import typer
from rich.table import Table

from otel_ctx import names
from otel_ctx._httpguard import (
    DEFAULT_MAX_RESPONSE_BYTES,
    MAX_REDIRECTS,
    Endpoint,
    Refuse,
    check_redirect,
    read_capped,
    within_deadline,
)
from otel_ctx.cli._console import make_console, table_box
from otel_ctx.cli._errors import CliError

JOB = "job"
LE = "le"
TASK = names.prometheus_label(names.TASK_TYPE)
OUTCOME = names.prometheus_label(names.OUTCOME)
COMPONENT = names.prometheus_label(names.COMPONENT)
FIT, COMPACTED, OVERFLOW = names.OUTCOMES
#: ``--window all``: the counters as they stand (everything since each process started).
WINDOW_ALL = "all"
#: Seconds every query of one ``advise`` may take together.
DEFAULT_TIMEOUT = 30.0
#: Budgets tried, as multiples of today's: the utilization histogram's bucket bounds.
CANDIDATE_RATIOS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2.0)

HELP = """\
Suggest per-task request limits from what the fleet recorded in Prometheus.

For each task type: today's limit and budget, the p50/p95 estimated prompt, overflow and \
compaction rates, cost per ticket, and what-ifs for other limits (the share of requests that \
would compact or overflow, read from the recorded histograms, and the cost that follows), \
with the smallest limit that meets --max-overflow and --max-compaction.

[bold]Examples[/bold]

  otel-ctx advise --prometheus http://127.0.0.1:9090

  otel-ctx advise --prometheus http://prometheus:9090 --window 7d --service support-agent --json
"""


class PrometheusError(CliError):
    """``advise`` could not get or read an answer; ``kind`` says why (``usage``, ``refused``,
    ``connection``, ``timeout``, ``rejected`` (an HTTP error status), ``redirect`` (to
    another origin, refused), ``response`` (an answer otel-ctx cannot read: not JSON, not
    Prometheus's shape, impossible values, larger than the cap)). The message names the
    server without its credentials and, for an answer, the query."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class Prometheus:
    """Instant queries against Prometheus's HTTP API, under the shared HTTP policy: one
    deadline for every query of the run, a cap on each answer, no redirect to another
    origin, credentials (the URL's userinfo or a bearer token) never in a message."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        at: float | None = None,
        token: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.at = at
        self.endpoint = Endpoint(
            url, token=token or None, timeout=timeout, max_response_bytes=max_response_bytes
        )
        problem = self.endpoint.problem()
        if problem is not None:
            if problem.startswith("URL"):
                problem = f"{self.endpoint.display_url!r} is not a URL like http://localhost:9090"
            raise PrometheusError("usage", f"--prometheus: {problem}")
        self.base = self.endpoint.display_url
        self.timeout = timeout
        self._deadline: float | None = None
        # The standard library's client, so advise needs nothing beyond the base install;
        # the policy is the shared one (otel_ctx._httpguard), as dashboards push follows it.
        self._opener = urllib.request.build_opener(_SameOrigin(self.endpoint, _refuse))

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr``: samples with string labels and a finite value >= 0
        (every series asked for is a counter or a histogram bucket)."""
        if self._deadline is None:  # one deadline for the whole exchange, from the first query
            self._deadline = time.monotonic() + self.timeout
        opened: list[Any] = []

        def abandon() -> None:
            # Shut the socket down under the worker's blocked read, so it stops now rather
            # than when a trickling server finally finishes (best effort: private attributes).
            for response in opened:
                sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
                with contextlib.suppress(OSError):
                    if sock is not None:
                        sock.shutdown(socket.SHUT_RDWR)
                response.close()

        raw = within_deadline(
            lambda: self._get(expr, opened), self._deadline - time.monotonic(), self._timed_out, abandon
        )
        return _vector(raw, expr, self.base)

    def _timed_out(self) -> PrometheusError:
        return PrometheusError(
            "timeout", f"Prometheus at {self.base} did not answer within {self.timeout:g}s (--timeout)"
        )

    def _read(self, answer: Any) -> bytes:
        """The whole body of an answer (an error's too), closed after, under the shared cap."""
        with answer:
            return read_capped(
                iter(lambda: answer.read(_CHUNK), b""),
                answer.headers.get("Content-Length") if answer.headers else None,
                self.endpoint,
                _refuse,
                server="Prometheus",
            )

    def _get(self, expr: str, opened: list[Any]) -> bytes:
        params = {"query": expr} if self.at is None else {"query": expr, "time": f"{self.at:.3f}"}
        endpoint = self.endpoint
        headers = endpoint.headers()
        auth = endpoint.auth()
        if auth is not None:
            basic = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
        request = urllib.request.Request(
            f"{self.base}/api/v1/query?{urllib.parse.urlencode(params)}", headers=headers
        )
        try:
            response = self._opener.open(request, timeout=self.timeout)
            opened.append(response)
            return self._read(response)
        except PrometheusError:
            raise
        except urllib.error.HTTPError as exc:
            detail = endpoint.scrub(_one_line(self._read(exc).decode("utf-8", "replace")))[:300]
            raise PrometheusError(
                "rejected", f"Prometheus at {self.base} rejected a query ({exc.code}): {detail}"
            ) from None
        except TimeoutError:
            raise self._timed_out() from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            kind = "refused" if isinstance(reason, ConnectionRefusedError) else "connection"
            raise PrometheusError(
                kind, endpoint.scrub(f"cannot reach Prometheus at {self.base}: {_one_line(reason)}")[:400]
            ) from None


_CHUNK = 64 * 1024


def _refuse(kind: str, message: str) -> PrometheusError:
    return PrometheusError("redirect" if kind == "redirect" else "response", message)


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the origin the user named (and at most a few)."""

    max_redirections = MAX_REDIRECTS

    def __init__(self, endpoint: Endpoint, refuse: Refuse) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.refuse = refuse

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        check_redirect(newurl, self.endpoint, self.refuse, server="Prometheus")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _unreadable(base: str, expr: str, what: str) -> PrometheusError:
    return PrometheusError(
        "response",
        f"Prometheus at {base} answered something otel-ctx cannot read ({what}) for the query {expr}",
    )


def _vector(raw: bytes, expr: str, base: str) -> list[dict[str, Any]]:
    """Prometheus's answer checked: a success with an instant vector of readable samples."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise _unreadable(base, expr, "JSON nested too deeply") from None
    except ValueError:  # not JSON, not UTF-8, or an integer past Python's digit limit
        raise PrometheusError("response", f"{base} did not answer like Prometheus (no JSON)") from None
    if not isinstance(body, dict):
        raise _unreadable(base, expr, f"a JSON {type(body).__name__}, not an object")
    if body.get("status") != "success":
        error = body.get("error")
        said = _one_line(error)[:300] if isinstance(error, str) else "query failed"
        raise PrometheusError("rejected", f"Prometheus at {base}: {said} (query {expr})")
    data = body.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list):
        raise _unreadable(base, expr, "no data.result list")
    samples: list[dict[str, Any]] = []
    for sample in result:
        metric = sample.get("metric") if isinstance(sample, dict) else None
        value = sample.get("value") if isinstance(sample, dict) else None
        if (
            not isinstance(metric, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items())
            or not isinstance(value, list)
            or len(value) != 2
            or not isinstance(value[1], str)
        ):
            raise _unreadable(base, expr, 'a sample not shaped like {metric: {...}, value: [t, "v"]}')
        try:
            number = float(value[1])
        except ValueError:
            raise _unreadable(base, expr, f"the value {value[1][:40]!r} is not a number") from None
        if math.isinf(number) or number < 0:
            raise _unreadable(base, expr, f"the value {value[1][:40]} where only a count >= 0 can be")
        samples.append({"metric": metric, "value": [value[0], number]})
    return samples


@dataclass(frozen=True)
class WhatIf:
    """One candidate request limit and what it would have done to the recorded requests."""

    limit: int
    budget: int
    ratio: float
    compaction_rate: float
    #: ``=`` exact, ``>=`` a lower bound, ``<=`` an upper bound.
    compaction_bound: str
    overflow_rate: float
    overflow_bound: str
    cost_per_ticket: float | None


@dataclass
class TaskAdvice:
    task_type: str
    requests: int = 0
    limit: int | None = None
    budget: int | None = None
    reserved_output: int = 0
    safety_margin: int = 0
    p50_prompt: float | None = None
    p95_prompt: float | None = None
    overflow_rate: float = 0.0
    compaction_rate: float = 0.0
    tickets: int = 0
    cost_per_ticket: float | None = None
    p95_cost_per_ticket: float | None = None
    what_ifs: list[WhatIf] = field(default_factory=list)
    suggested_limit: int | None = None
    suggestion: str = ""


def _total(window: str, service: str, series: str, by: tuple[str, ...], **matchers: str) -> str:
    """PromQL for a series' total per ``by`` over one window (``increase``), or the counters as they
    stand (``all``)."""
    parts = [f"{JOB}=~{json.dumps(service)}", *(f"{label}={json.dumps(v)}" for label, v in matchers.items())]
    inner = f"{series}{{{', '.join(parts)}}}"
    if window != WINDOW_ALL:
        inner = f"increase({inner}[{window}])"
    return f"sum by ({', '.join(by)}) ({inner})"


def _by_labels(samples: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for s in samples:
        value = float(s["value"][1])  # checked finite and >= 0 (or NaN) by Prometheus.query
        if math.isnan(value):
            continue
        key = tuple(s["metric"].get(label, "") for label in labels)
        out[key] = out.get(key, 0.0) + value
    return out


def _le(text: str, series: str) -> float:
    """A bucket's upper bound from its ``le`` label; an answer whose label is no number (a proxy
    or an impostor in Prometheus's place) is refused as unreadable, never a crash."""
    try:
        return math.inf if text == "+Inf" else float(text)
    except ValueError:
        raise PrometheusError(
            "response", f"a {series} bucket's le label is not a number: {text[:40]!r}"
        ) from None


def _quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus's histogram_quantile over cumulative bucket counts (linear within a bucket)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def _at(buckets: Mapping[float, float], bound: float) -> float:
    """The cumulative count at a bucket bound (0 when the histogram has none there)."""
    for b, count in buckets.items():
        if math.isclose(b, bound, rel_tol=1e-9):
            return count
    return 0.0


def _prompt_volume(per_outcome: Mapping[str, Mapping[float, float]], ratio: float) -> float:
    """Prompt volume (in budgets) the requests would send with the budget at ``ratio`` × today's.

    Each bucket's requests count at the bucket's midpoint, capped at the new budget;
    overflowed floors that the new budget holds are sent too.
    """
    volume = 0.0
    for outcome, buckets in per_outcome.items():
        prev_bound, prev_count = 0.0, 0.0
        for bound in sorted(buckets):
            count = buckets[bound] - prev_count
            upper = prev_bound if math.isinf(bound) else bound
            mid = (prev_bound + upper) / 2
            if count > 0 and (outcome != OVERFLOW or upper <= ratio + 1e-9):
                volume += count * min(mid, ratio)
            prev_bound, prev_count = (prev_bound if math.isinf(bound) else bound), buckets[bound]
    return volume


def what_ifs(
    advice: TaskAdvice, per_outcome: Mapping[str, Mapping[float, float]], ratios: tuple[float, ...]
) -> list[WhatIf]:
    """The candidate limits of one task type (needs today's budget and the utilization buckets)."""
    if advice.budget is None:
        return []
    totals = {o: max(b.values(), default=0.0) for o, b in per_outcome.items()}
    n = sum(totals.values())
    if n <= 0:
        return []
    n_fit, n_compacted, n_overflow = (totals.get(o, 0.0) for o in (FIT, COMPACTED, OVERFLOW))
    today = _prompt_volume(per_outcome, 1.0)
    out = []
    for r in ratios:
        if r < 1:
            fit_under = _at(per_outcome.get(FIT, {}), r)
            compaction = (n_compacted + n_overflow + n_fit - fit_under) / n
            overflow, c_bound, o_bound = n_overflow / n, "=", ">="
        else:
            held = _at(per_outcome.get(OVERFLOW, {}), r)
            overflow = (n_overflow - held) / n
            compaction = (n_compacted + n_overflow - held) / n
            c_bound = "=" if r == 1 else "<="
            o_bound = "="
        if r == 1:
            compaction, overflow = (n_compacted + n_overflow) / n, n_overflow / n
        cost = None
        if advice.cost_per_ticket is not None and today > 0:
            cost = advice.cost_per_ticket * _prompt_volume(per_outcome, r) / today
        budget = round(advice.budget * r)
        out.append(
            WhatIf(
                limit=budget + advice.reserved_output + advice.safety_margin,
                budget=budget,
                ratio=r,
                compaction_rate=compaction,
                compaction_bound=c_bound,
                overflow_rate=overflow,
                overflow_bound=o_bound,
                cost_per_ticket=cost,
            )
        )
    return out


def suggest(advice: TaskAdvice, max_overflow: float, max_compaction: float) -> None:
    """The smallest candidate limit whose overflow and compaction shares meet the targets."""
    for w in advice.what_ifs:
        if w.overflow_rate <= max_overflow and w.compaction_rate <= max_compaction:
            advice.suggested_limit = w.limit
            if w.ratio == 1:
                advice.suggestion = "keep today's limit"
            else:
                advice.suggestion = f"{w.ratio:g}× today's budget"
            return
    advice.suggested_limit = None
    advice.suggestion = "no candidate meets the targets (raise the limit beyond 2×, or loosen them)"


def gather(
    prom: Prometheus,
    *,
    window: str,
    service: str,
    ratios: tuple[float, ...] = CANDIDATE_RATIOS,
    max_overflow: float = 0.01,
    max_compaction: float = 0.25,
) -> list[TaskAdvice]:
    """Everything the advisor prints, per task type, from Prometheus."""

    def totals(series: str, *by: str, **matchers: str) -> dict[tuple[str, ...], float]:
        return _by_labels(prom.query(_total(window, service, series, by, **matchers)), *by)

    # A line's mean per request: its tokens total over the requests (the fits counter).
    requests = totals(names.FITS.prometheus, TASK)

    def mean_of(component: str) -> dict[str, float]:
        s = totals(names.TOKENS.prometheus, TASK, **{COMPONENT: component})
        return {k[0]: s[k] / requests[k] for k in s if requests.get(k)}

    budget = mean_of(names.COMPONENT_BUDGET)
    reserved = mean_of(names.COMPONENT_RESERVED_OUTPUT)
    margin = mean_of(names.COMPONENT_SAFETY_MARGIN)
    fits = totals(names.FITS.prometheus, TASK, OUTCOME)
    util: dict[str, dict[str, dict[float, float]]] = {}
    all_outcomes: dict[str, dict[float, float]] = {}
    for (task, outcome, le), v in totals(names.UTILIZATION.series("_bucket"), TASK, OUTCOME, LE).items():
        bound = _le(le, names.UTILIZATION.series("_bucket"))
        util.setdefault(task, {}).setdefault(outcome, {})[bound] = v
        all_outcomes.setdefault(task, {})[bound] = all_outcomes.get(task, {}).get(bound, 0.0) + v
    cost_sum = totals(names.RUN_COST.series("_sum"), TASK)
    cost_count = totals(names.RUN_COST.series("_count"), TASK)
    cost_buckets: dict[str, dict[float, float]] = {}
    for (task, le), v in totals(names.RUN_COST.series("_bucket"), TASK, LE).items():
        cost_buckets.setdefault(task, {})[_le(le, names.RUN_COST.series("_bucket"))] = v

    tasks = sorted({t for t, _ in fits} | set(budget))
    out = []
    for task in tasks:
        a = TaskAdvice(task)
        per_outcome = {
            o: sum(v for (t, oc), v in fits.items() if t == task and oc == o) for o in names.OUTCOMES
        }
        n = sum(per_outcome.values())
        a.requests = round(n)
        if n:
            a.overflow_rate = per_outcome[OVERFLOW] / n
            a.compaction_rate = per_outcome[COMPACTED] / n
        if task in budget:
            a.budget = round(budget[task])
            a.reserved_output = round(reserved.get(task, 0.0))
            a.safety_margin = round(margin.get(task, 0.0))
            a.limit = a.budget + a.reserved_output + a.safety_margin
        # Estimated prompt = utilization × budget: its quantiles from the utilization buckets.
        p50, p95 = (_quantile(q, all_outcomes.get(task, {})) for q in (0.5, 0.95))
        if task in budget:
            a.p50_prompt = None if p50 is None else p50 * budget[task]
            a.p95_prompt = None if p95 is None else p95 * budget[task]
        key = (task,)
        if cost_count.get(key):
            a.tickets = round(cost_count[key])
            a.cost_per_ticket = cost_sum.get(key, 0.0) / cost_count[key]
            a.p95_cost_per_ticket = _quantile(0.95, cost_buckets.get(task, {}))
        a.what_ifs = what_ifs(a, util.get(task, {}), ratios)
        suggest(a, max_overflow, max_compaction)
        out.append(a)
    return out


def _pct(value: float, bound: str = "=") -> str:
    prefix = {"=": "", ">=": "≥", "<=": "≤"}[bound]
    return f"{prefix}{value:.1%}"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.4f}"


def _print(advice: list[TaskAdvice], *, window: str, max_overflow: float, max_compaction: float) -> None:
    out = make_console()
    span = "everything the counters hold" if window == WINDOW_ALL else f"the last {window}"
    out.print(
        f"[bold]Budget advice[/bold] from {span}; targets: overflow ≤ {max_overflow:.1%}, "
        f"compaction ≤ {max_compaction:.1%}"
    )
    if not advice:
        out.print("No otel-ctx fits recorded in that window: nothing to advise on.")
        return
    for a in advice:
        out.print()
        today = f"limit {a.limit:,} (budget {a.budget:,})" if a.limit is not None else "limit unknown"
        prompt = (
            f"p50/p95 estimated prompt {a.p50_prompt:,.0f}/{a.p95_prompt:,.0f}"
            if a.p50_prompt is not None and a.p95_prompt is not None
            else "no prompt sizes recorded"
        )
        out.print(
            f"[bold]{a.task_type}[/bold]: {a.requests:,} requests, {a.tickets:,} tickets; "
            f"today {today}; {prompt}; "
            f"overflow {a.overflow_rate:.1%}, compaction {a.compaction_rate:.1%}; cost per ticket "
            f"{_usd(a.cost_per_ticket)} (p95 {_usd(a.p95_cost_per_ticket)})"
        )
        if not a.what_ifs:
            continue
        table = Table(box=table_box(out), show_edge=False, pad_edge=False)
        for name in ("Limit", "Budget", "× today", "Compact or overflow", "Overflow", "Cost/ticket"):
            table.add_column(name, justify="right", no_wrap=True)
        for w in a.what_ifs:
            table.add_row(
                f"{w.limit:,}",
                f"{w.budget:,}",
                f"{w.ratio:g}",
                _pct(w.compaction_rate, w.compaction_bound),
                _pct(w.overflow_rate, w.overflow_bound),
                _usd(w.cost_per_ticket),
                style="bold" if w.limit == a.suggested_limit else ("dim" if w.ratio == 1 else ""),
            )
        out.print(table)
        if a.suggested_limit is not None:
            out.print(f"Suggested limit: [bold]{a.suggested_limit:,}[/bold] ({a.suggestion}).")
        else:
            out.print(f"Suggested limit: {a.suggestion}.")
    out.print(
        "≥/≤: a bound, not a count (the histograms do not record a compacted request's full size or "
        "a fitted request's floor). Cost/ticket follows the prompt tokens the requests would send.",
        style="dim",
    )


def advise(
    prometheus: Annotated[str, typer.Option(metavar="URL", help="Prometheus base URL.")],
    window: Annotated[
        str,
        typer.Option(help="PromQL range to read (1d, 7d, ...), or 'all' for the counters as they stand."),
    ] = "1d",
    service: Annotated[str, typer.Option(help="Regex over the job label (the agents' service.name).")] = ".*",
    max_overflow: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Target: share of requests that may overflow.")
    ] = 0.01,
    max_compaction: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Target: share of requests that may compact (or overflow)."),
    ] = 0.25,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    at: Annotated[
        float | None,
        typer.Option(
            metavar="UNIX_TIME", help="Evaluate as of this time (default: now), e.g. the end of a day."
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="PROMETHEUS_TOKEN",
            help="Bearer token for a Prometheus behind an auth proxy (or put user:password@ in the URL).",
            show_envvar=True,
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds all the queries may take together (the whole exchange)."),
    ] = DEFAULT_TIMEOUT,
) -> None:
    if window != WINDOW_ALL and not _valid_duration(window):
        raise CliError(f"--window: {window!r} is not a duration like 1d, 12h or 30m, nor 'all'")
    prom = Prometheus(prometheus, at=at, token=token, timeout=timeout)
    advice = gather(
        prom, window=window, service=service, max_overflow=max_overflow, max_compaction=max_compaction
    )
    if as_json:
        payload = {
            "window": window,
            "service": service,
            "targets": {"max_overflow": max_overflow, "max_compaction": max_compaction},
            "task_types": [asdict(a) for a in advice],
        }
        make_console().print_json(json.dumps(payload))
        return
    _print(advice, window=window, max_overflow=max_overflow, max_compaction=max_compaction)


def _valid_duration(text: str) -> bool:
    import re

    return re.fullmatch(r"(\d+(ms|s|m|h|d|w|y))+", text) is not None
