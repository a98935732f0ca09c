"""Shared test helpers: prerequisites that skip locally and fail under CI=true; the end-to-end
checks every telemetry path into Prometheus must pass; the servers ``make servers`` builds."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from otel_ctx import names
from otel_ctx.grafana import _alerts as alerts

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> None:
    """Skip with the reason locally; under ``CI=true`` a missing prerequisite is a failure."""
    if IN_CI:
        pytest.fail(f"missing prerequisite under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str, hint: str = "") -> str:
    """The path of an executable on PATH, or skip/fail naming what to install."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH{'; ' + hint if hint else ''}")
        raise AssertionError("unreachable")  # pragma: no cover - missing() raised
    return path


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts next.

    The port lies below the kernel's ephemeral range: the kernel hands ports in that range to
    every outgoing connection (Prometheus scraping, an SDK calling the fake provider), so a port
    found free there can be taken by one before the server binds it, and the server dies with
    "Address already in use". Below the range only a bind can take it. Each port is handed out
    once per session, so two servers of one test never get the same one.
    """
    low, _ = _ephemeral_range()
    first = max(1024, low - 12000)
    for port in random.sample(range(first, low), low - first):
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {first}..{low - 1}")


def serve(port: int, handle: Callable[[BaseHTTPRequestHandler, bytes], None]) -> ThreadingHTTPServer:
    """A fake HTTP service on 127.0.0.1:``port``, served from a daemon thread until :func:`shut`:
    each POST's body is read whole and handed to ``handle`` with the request's handler, which
    answers on it. Nothing is logged (test output stays clean)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as separate writes: without TCP_NODELAY, Nagle's algorithm
        # and the client's delayed ACK hold each answer back by tens of milliseconds.
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            handle(self, self.rfile.read(int(self.headers.get("content-length") or 0)))

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def shut(server: ThreadingHTTPServer | None) -> None:
    """Stop a server :func:`serve` started (nothing if it never started) and free its port."""
    if server is not None:
        server.shutdown()
        server.server_close()


class Children:
    """The servers and workloads an end-to-end test starts, each logging to ``<tmp>/<name>.log``.

    ``procs`` holds them as ``(name, process)`` in the order started (stop them in reverse);
    :meth:`check_alive` fails the test with the last lines of the log of one that exited (but
    those in ``may_exit``, which end on their own), and :meth:`ok` is a readiness probe that
    checks them first, so a server that died is named instead of waited for.
    """

    def __init__(self, tmp: Path, may_exit: frozenset[str] = frozenset()) -> None:
        self.tmp = tmp
        self.may_exit = may_exit
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._logs: list[Any] = []

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start ``cmd`` as ``name``, its output into ``<tmp>/<name>.log``."""
        log = (self.tmp / f"{name}.log").open("wb")
        self._logs.append(log)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs.append((name, proc))
        return proc

    def stop(self) -> None:
        """Stop every child, the last started first, and close the logs :meth:`start` opened."""
        for _, proc in reversed(self.procs):
            stop(proc)
        for log in self._logs:
            log.close()

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None and name not in self.may_exit:
                log = (self.tmp / f"{name}.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"{name} exited with {proc.returncode}:\n{log}")

    def ok(self, url: str) -> bool:
        self.check_alive()
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)


# --- the end-to-end checks, shared by every path telemetry takes into Prometheus ----------------

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
#: The window the dashboards' interval macros stand for in the end-to-end tests.
E2E_WINDOW = "1m"
# Dashboard variables and Grafana's interval macros, as the README's conventions define them.
SUBSTITUTIONS = {
    "$__rate_interval": E2E_WINDOW,
    "$__interval": E2E_WINDOW,
    "$__range": E2E_WINDOW,
    "$service": ".*",
    "$task_type": ".*",
    "$model": ".*",
    "$tool_result_cap": "1200",
}
# Series Prometheus adds by itself (scrape health, alert state) and the resource metric.
INFRASTRUCTURE = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
    "target_info",
    "ALERTS",
    "ALERTS_FOR_STATE",
}

T = TypeVar("T")
#: An instant PromQL query: expression in, result vector out.
Query = Callable[[str], list[dict[str, Any]]]


def wait(what: str, timeout: float, probe: Callable[[], T | None]) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` and the last error."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (OSError, urllib.error.URLError, AssertionError, KeyError) as err:
            last_error, value = err, None
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_error})")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a server or workload the test started, then kill it if it does not exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def substitute(expr: str) -> str:
    """A dashboard expression with its variables and interval macros filled in."""
    for var, value in SUBSTITUTIONS.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def committed_dashboards() -> dict[str, dict[str, Any]]:
    """File name -> model of every committed dashboard."""
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in DASHBOARDS}


def panel_queries(models: Mapping[str, Mapping[str, Any]] | None = None) -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expr) for every target of every committed dashboard (or of
    ``models``, file name -> model)."""
    found = []
    for name, model in (committed_dashboards() if models is None else models).items():
        stack = list(model.get("panels") or [])
        while stack:
            panel = stack.pop(0)
            stack[:0] = panel.get("panels") or []
            for target in panel.get("targets") or []:
                expr = target.get("expr")
                if isinstance(expr, str) and expr.strip():
                    found.append((name, str(panel.get("title", "")), expr))
    return found


def stored(found: set[str]) -> set[str]:
    """The otel-ctx series among metric names Prometheus holds: without its own series and
    without the recording rules' (``job:<series>:rate``), which the rule tests check."""
    return {n for n in found if n not in INFRASTRUCTURE and not n.startswith("job:")}


def registry_series() -> set[str]:
    """Every series name the names registry defines, as Prometheus stores them."""
    return {
        m.series(suffix)
        for m in names.METRICS
        for suffix in (("_bucket", "_sum", "_count") if m.kind == "histogram" else ("",))
    }


def _value(sample: dict[str, Any]) -> float:
    """A sample's number; a native histogram's (a heatmap's rate, a recorded native rate) is its count."""
    if "histogram" in sample:
        return float(sample["histogram"][1]["count"])
    return float(sample["value"][1])


def _family(metric: names.Metric, naming: str) -> str:
    return metric.utf8 if naming == names.NAMES_UTF8 else metric.prometheus


def needs_distributions(expr: str, naming: str = names.NAMES_UNDERSCORE) -> bool:
    """True when a query reads only the per-round distributions (native histograms only), not a
    classic series beside them as a fallback."""
    return any(_family(m, naming) in expr for m in names.DISTRIBUTIONS) and not any(
        _family(m, naming) in expr for m in names.METRICS
    )


def assert_panel_queries_answer(
    query: Query,
    *,
    distributions: bool = False,
    models: Mapping[str, Mapping[str, Any]] | None = None,
    naming: str = names.NAMES_UNDERSCORE,
) -> None:
    """Every panel query of every committed dashboard (or of ``models``, built for ``naming``)
    returns plausible series.

    Without ``distributions`` (metrics scraped from the SDK, or pushed with classic buckets) the
    queries of the distribution panels must return nothing at all, never another number: the
    panel then says what it needs.
    """
    queries = panel_queries(models)
    assert queries
    empty = []
    outcome = names.OUTCOME if naming == names.NAMES_UTF8 else names.prometheus_label(names.OUTCOME)
    outcome = f'"{outcome}"' if naming == names.NAMES_UTF8 else outcome
    for dashboard, title, expr in queries:
        result = query(substitute(expr))
        if needs_distributions(expr, naming) and not distributions:
            assert not result, (f"{dashboard}: {title} answers without distributions", result)
            continue
        if not result:
            empty.append(f"{dashboard}: {title}\n{expr}")
            continue
        values = [_value(s) for s in result]
        where = f"{dashboard}: {title}"
        # An error budget left goes below 0 once it is overspent; everything else is a count,
        # a rate or a share.
        overspendable = "_budget_remaining" in expr
        assert all(math.isfinite(v) and (v >= 0 or overspendable) for v in values), (where, values)
        if _family(names.UTILIZATION, naming) in expr and expr.startswith("histogram_quantile"):
            assert all(0 < v <= 4 for v in values), (where, values)
        if f'{outcome}="overflow"' in expr and "/" in expr:
            assert all(v <= 1 for v in values), (where, values)
        if _family(names.ESTIMATE_ACCURACY, naming) in expr and "increase" not in expr:
            assert all(0.5 < v < 2 for v in values), (where, values)
    assert not empty, "panel queries with no data on the demo workload:\n" + "\n".join(empty)


def assert_shipped_alerts_evaluate(query: Query, rules: Mapping[str, Any] | None = None) -> None:
    """The committed rules (or ``rules``, a loaded rule file) run as written (ten-minute windows:
    they may not fire on seconds of data)."""
    shipped = rules or yaml.safe_load((ROOT / "dashboards" / "alerts.yml").read_text(encoding="utf-8"))
    absent = None
    for group in shipped["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alerts.TELEMETRY_ABSENT:
                absent = rule["expr"]
            for sample in query(rule["expr"]):
                assert math.isfinite(_value(sample)), rule.get("alert", rule.get("record"))
    # Telemetry is flowing: the absent alert's expression returns nothing.
    assert absent is not None
    assert query(absent) == []


# --- the servers stack/build-servers.sh builds ------------------------------------------------


def built_servers(*wanted: str) -> dict[str, Path]:
    """The server binaries ``make servers`` built (``otelcol``, ``jaeger``, ``prometheus``,
    ``promtool``, ``victoriametrics``, ``vmalert``; default the Collector and Jaeger).

    Skips locally, and fails under ``CI=true``, when one of them is not built.
    """
    wanted = wanted or ("otelcol", "jaeger")
    script = ROOT / "stack" / "build-servers.sh"
    result = subprocess.run(
        ["bash", str(script), "--paths"], capture_output=True, text=True, timeout=60, check=False
    )
    paths = {
        name: Path(path) for name, _, path in (line.partition("=") for line in result.stdout.splitlines())
    }
    absent = [name for name in wanted if name not in paths or not os.access(paths[name], os.X_OK)]
    if absent:
        where = ", ".join(str(paths.get(name, name)) for name in absent)
        missing(f"not built: {where}; run `make servers` (stack/build-servers.sh) {result.stderr.strip()}")
    return {name: paths[name] for name in wanted}


def prometheus_tool(name: str) -> str:
    """``prometheus`` or ``promtool`` as ``make servers`` built them: the Prometheus 3 release
    docker-compose.yml pins, never whichever one PATH holds (skip/fail as built_servers does)."""
    return str(built_servers(name)[name])
