"""The ``otel-ctx`` CLI, driven as a user drives it: a subprocess, real arguments, real files."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from cli_support import CLI, assert_one_line_error, clean_env, cli
from support import free_port

import otel_ctx
from otel_ctx import names
from otel_ctx.demo import SUPPORT_DESK, make_ticket
from otel_ctx.demo._content import SYSTEM_PROMPT, TOOLS

ESC = "\x1b["
TESTS = Path(__file__).parents[1]


def request_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": messages, "tools": TOOLS, **extra}


@pytest.fixture(scope="module")
def dispute_request(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Round 8 of a real dispute from the demo: system prompt as message 0, tools, tool results."""
    ticket = next(make_ticket(1, i) for i in range(1, 400) if make_ticket(1, i).kind == "damage-claim")
    transcript = list(ticket.transcripts())[-1]
    path = tmp_path_factory.mktemp("req") / "dispute.json"
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, *transcript]
    path.write_text(json.dumps(request_body(messages, temperature=0.2)))
    return path


# --- version, help -----------------------------------------------------------------------


def test_version() -> None:
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"otel-ctx {otel_ctx.__version__}"


@pytest.mark.parametrize("command", [[], ["demo"], ["fit"], ["dashboards"]])
def test_help_on_every_command(command: list[str]) -> None:
    proc = cli(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage: otel-ctx" in proc.stdout
    assert ESC not in proc.stdout
    if command in (["demo"], ["fit"]):
        assert "Examples" in proc.stdout
        assert f"otel-ctx {command[0]}" in proc.stdout


def test_no_arguments_shows_help_and_usage_exit() -> None:
    proc = cli()
    assert proc.returncode == 2
    assert "demo" in proc.stdout and "fit" in proc.stdout


def test_unknown_option_is_one_line() -> None:
    assert_one_line_error(cli("demo", "--ticketz", "3"), "--ticketz")
    assert_one_line_error(cli("demo", "--tickets", "zero"), "--tickets")


# --- demo ---------------------------------------------------------------------------------


def test_demo_summary_is_plain_when_piped() -> None:
    proc = cli("demo", "--tickets", "40", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert ESC not in proc.stdout
    assert proc.stderr == ""  # no progress bar, no warnings when not on a terminal
    for row in ("status", "returns", "dispute", "all"):
        assert any(line.startswith(row) for line in proc.stdout.splitlines()), row
    for header in ("Runs", "Rounds", "Compacted", "Overflow", "Transcript", "Tool schema", "p95"):
        assert header in proc.stdout
    assert "Telemetry: none" in proc.stdout


def test_demo_json_is_deterministic_and_adds_up() -> None:
    a = json.loads(cli("demo", "--tickets", "60", "--seed", "4", "--json").stdout)
    b = json.loads(cli("demo", "--tickets", "60", "--seed", "4", "--json").stdout)
    c = json.loads(cli("demo", "--tickets", "60", "--seed", "5", "--json").stdout)
    assert a == b
    assert a != c
    per_task = a["task_types"]
    assert sum(t["runs"] for t in per_task) == 60 == a["all"]["runs"]
    assert sum(t["rounds"] for t in per_task) == a["all"]["rounds"]
    for t in per_task:
        assert sum(t["mean_share"].values()) == pytest.approx(1.0, abs=0.001)
        assert 0 < t["p95_utilization"] < 4
    assert {t["task_type"] for t in per_task} == {"status", "returns", "dispute"}


def test_demo_inspect_shows_the_overflowing_run() -> None:
    data = json.loads(cli("demo", "--inspect", "--json", "--tickets", "80").stdout)
    assert data["escalated"] is True
    assert data["task_type"] == "dispute"
    rounds = data["rounds"]
    assert rounds[-1]["outcome"] == "overflow"
    assert any(r["outcome"] == "compacted" for r in rounds)
    for r in rounds:
        b = r["breakdown"]
        assert b["transcript"] + b["tool_schema"] + b["system_prompt"] + b["skills"] == b["estimated"]
        assert b["budget"] - b["estimated"] == b["remaining"]
    assert rounds[-1]["breakdown"]["remaining"] < 0
    assert {s["name"]: s["data_class"] for s in rounds[0]["breakdown"]["sources"]}[
        "pii-handling"
    ] == "confidential"


def test_demo_inspect_text_has_the_inspector_rows() -> None:
    proc = cli("demo", "--inspect", "T00003", "--seed", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("Ticket T00003")
    labels = ("Context length", "− Reserved output", "= Budget", "Transcript", "Tool schema")
    labels += ("System prompt (incl. snippets)", "Skills", "= Estimated", "Remaining", "Round 1")
    for label in labels:
        assert label in out, label
    assert cli("demo", "--inspect", "3", "--seed", "2").stdout == out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--inspect", "bogus"], "not a ticket"),
        (["--rate", "2"], "--rate only applies with --forever"),
        (["--forever", "--inspect"], "do not go together"),
        (["--tickets", "0"], "--tickets"),
        (["--otlp", "collector:4317"], "not a URL"),
        (["--otlp", "http://[::1"], "--otlp: 'http://[::1' is not a URL"),
        (["--otlp", "http://localhost:99999"], "not a URL"),
    ],
)
def test_demo_usage_errors(args: list[str], fragment: str) -> None:
    assert_one_line_error(cli("demo", *args), fragment)


def _receiver(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        # Two minutes: it must outlive a demo's start, run and flush on a loaded machine.
        [sys.executable, str(TESTS / "otlp_receiver.py"), str(port), str(tmp_path), "120"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    return proc, port


def _spans(out_dir: Path) -> list[Any]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    spans = []
    for f in sorted(out_dir.glob("traces-*.pb")):
        req = ExportTraceServiceRequest.FromString(f.read_bytes())
        spans += [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return spans


def test_demo_otlp_exports_every_round_before_exiting(tmp_path: Path) -> None:
    receiver, port = _receiver(tmp_path)
    try:
        proc = cli("demo", "--tickets", "6", "--seed", "2", "--otlp", f"http://127.0.0.1:{port}", "--json")
        assert proc.returncode == 0, proc.stderr
        rounds = json.loads(proc.stdout)["all"]["rounds"]
    finally:
        receiver.terminate()
        receiver.wait(10)
    fit_spans = [s for s in _spans(tmp_path) if s.name == names.SPAN_FIT]
    run_spans = [s for s in _spans(tmp_path) if s.name == names.SPAN_RUN]
    assert len(fit_spans) == rounds
    assert len(run_spans) == 6
    assert list(tmp_path.glob("metrics-*.pb")), "metrics must be flushed at exit"


def test_demo_forever_stops_cleanly_on_sigterm_and_flushes(tmp_path: Path) -> None:
    receiver, port = _receiver(tmp_path)
    try:
        proc = subprocess.Popen(
            [*CLI, "demo", "--forever", "--rate", "20", "--otlp", f"http://127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        # The banner comes just before the handlers are installed; wait for it, not a fixed
        # time (start-up, loading the encoder included, is slower on a loaded machine).
        banner = proc.stderr.readline() if proc.stderr else ""
        assert "until Ctrl-C or SIGTERM" in banner, banner
        time.sleep(2)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        err = banner + err
        assert proc.returncode == 0, err
        assert "stopping; flushing telemetry" in err
        assert "Traceback" not in err
        assert any(line.startswith("all") for line in out.splitlines())
    finally:
        receiver.terminate()
        receiver.wait(10)
    assert [s for s in _spans(tmp_path) if s.name == names.SPAN_FIT]
    assert list(tmp_path.glob("metrics-*.pb"))


def test_demo_prometheus_endpoint_serves_the_registry_names() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "demo", "--forever", "--rate", "20", "--prometheus-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        body = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and names.TOKENS.prometheus not in body:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    body = resp.read().decode()
            except OSError:
                continue
        assert names.TOKENS.prometheus in body
        assert names.FITS.prometheus in body
        label = names.prometheus_label(names.TASK_TYPE)
        # Whichever ticket came first: the label carries one of the desk's task types.
        assert any(f'{label}="{task}"' in body for task in SUPPORT_DESK), body[-2000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


# --- fit ----------------------------------------------------------------------------------


def test_fit_prints_the_breakdown(dispute_request: Path) -> None:
    proc = cli("fit", str(dispute_request), "--task-type", "returns")
    assert proc.returncode == 0, proc.stderr
    assert ESC not in proc.stdout
    for label in ("= Budget", "System prompt (incl. snippets)", "counted in the transcript", "Remaining"):
        assert label in proc.stdout
    assert "Traceback" not in proc.stderr


def test_fit_json_closes_and_reads_stdin(dispute_request: Path) -> None:
    from_file = json.loads(cli("fit", str(dispute_request), "--task-type", "status", "--json").stdout)
    from_stdin = json.loads(
        cli("fit", "-", "--task-type", "status", "--json", stdin=dispute_request.read_text()).stdout
    )
    assert from_stdin["outcome"] == from_file["outcome"] == "compacted"
    assert from_stdin["breakdown"] == from_file["breakdown"]
    b = from_file["breakdown"]
    assert b["transcript"] + b["tool_schema"] + b["system_prompt"] + b["skills"] == b["estimated"]
    assert b["request_limit"] == 4_000 and b["budget"] == 3_200
    assert from_file["dropped_indices"] and 0 not in from_file["dropped_indices"]
    assert from_file["capped_tool_results"] > 0


def test_fit_writes_the_fitted_request(dispute_request: Path, tmp_path: Path) -> None:
    out = tmp_path / "fitted.json"
    proc = cli(
        "fit", str(dispute_request), "--request-limit", "4000", "--tool-result-cap", "600", "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    original = json.loads(dispute_request.read_text())
    fitted = json.loads(out.read_text())
    assert fitted["temperature"] == 0.2 and fitted["tools"] == original["tools"]
    assert len(fitted["messages"]) < len(original["messages"])
    # Sendable as is: every tool result still answers a call that is present.
    declared = {c["id"] for m in fitted["messages"] for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in declared for m in fitted["messages"] if m["role"] == "tool")
    again = json.loads(
        cli("fit", str(out), "--request-limit", "4000", "--tool-result-cap", "600", "--json").stdout
    )
    assert again["outcome"] == "fit"  # idempotent: the fitted request fits as it is


def test_measure_changes_nothing_and_fail_on_overflow(dispute_request: Path) -> None:
    measured = cli("fit", str(dispute_request), "--budget", "3000", "--measure", "--json")
    assert measured.returncode == 0
    data = json.loads(measured.stdout)
    original = json.loads(dispute_request.read_text())
    assert data["mode"] == "measure" and data["outcome"] == "overflow"
    assert data["messages_sent"] == len(original["messages"]) and data["dropped_turns"] == 0
    assert data["policy"]["budget"] == 3000 and data["policy"]["request_limit"] == 3800
    failed = cli("fit", str(dispute_request), "--budget", "3000", "--measure", "--fail-on-overflow")
    assert failed.returncode == 1
    assert "OVERFLOW" in failed.stdout
    fitted = cli("fit", str(dispute_request), "--budget", "3000", "--fail-on-overflow", "--json")
    assert fitted.returncode == 0  # the fit compacts it under the budget
    assert json.loads(fitted.stdout)["outcome"] == "compacted"


def test_reserve_defaults_to_the_bodys_max_tokens(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1234}))
    data = json.loads(cli("fit", str(path), "--json").stdout)
    assert data["policy"]["reserved_output"] == 1234
    data = json.loads(cli("fit", str(path), "--json", "--reserve", "50").stdout)
    assert data["policy"]["reserved_output"] == 50


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("{not json", ["not JSON", "line 1"]),
        ("", ["empty"]),
        ("[1, 2]", ["expected a JSON object", "array"]),
        ('{"model": "gpt-4o"}', ["no 'messages'"]),
        ('{"messages": {"role": "user"}}', ["'messages' must be a list"]),
        ('{"messages": [], "tools": {}}', ["'tools' must be a list"]),
        ('{"messages": [{"role": "wizard", "content": "hi"}]}', ["messages[0]", "wizard"]),
        ('{"messages": [{"role": "user", "content": 5}]}', ["messages[0]"]),
        ('{"messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]}', ["messages[0]"]),
        ('{"messages": [], "max_tokens": -3}', ["max_tokens"]),
    ],
)
def test_bad_request_files(tmp_path: Path, content: str, fragments: list[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert_one_line_error(cli("fit", str(path)), str(path), *fragments)


def test_bad_paths_and_policies(tmp_path: Path, dispute_request: Path) -> None:
    assert_one_line_error(cli("fit", str(tmp_path / "missing.json")), "no such file")
    assert_one_line_error(cli("fit", str(tmp_path)), "is a directory")
    (tmp_path / "latin1.json").write_bytes(b'{"messages": "\xe9"}')
    assert_one_line_error(cli("fit", str(tmp_path / "latin1.json")), "not UTF-8")
    assert_one_line_error(
        cli("fit", str(dispute_request), "--request-limit", "500", "--reserve", "800"), "budget"
    )
    assert_one_line_error(
        cli("fit", str(dispute_request), "--budget", "10", "--request-limit", "10"), "not both"
    )
    assert_one_line_error(cli("fit", str(dispute_request), "--strategy", "random"), "--strategy")
    assert_one_line_error(cli("fit"), "REQUEST")


# --- colour -------------------------------------------------------------------------------


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run with stdout and stderr on a pseudo-terminal; return what the terminal received."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*CLI, *args], stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(10)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_no_color_is_respected_on_a_terminal(dispute_request: Path) -> None:
    args = ["fit", str(dispute_request), "--task-type", "status"]
    coloured = _on_a_terminal(args, clean_env(TERM="xterm-256color", COLUMNS="120"))
    plain = _on_a_terminal(args, clean_env(TERM="xterm-256color", COLUMNS="120", NO_COLOR="1"))
    assert ESC in coloured  # the check can fail: a terminal does get styles
    assert "= Budget" in plain
    assert ESC not in plain


# --- hostile input ------------------------------------------------------------------------


def _capped_memory() -> None:
    # Reading without a bound would hit MemoryError here instead of swapping the machine.
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_deeply_nested_json_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text('{"messages":' + "[" * 100_000 + "]" * 100_000 + "}")
    assert_one_line_error(cli("fit", str(path)), str(path), "nested too deeply")


def test_hostile_tool_schema_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "enum.json"
    tool = {"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"enum": 5}}}}}
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}))
    assert_one_line_error(cli("fit", str(path)))


def test_an_endless_stdin_is_cut_at_the_input_limit() -> None:
    with open("/dev/zero", "rb") as zeros:
        proc = subprocess.run(
            [*CLI, "fit", "-"],
            stdin=zeros,
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
            preexec_fn=_capped_memory,
        )
    assert_one_line_error(proc, "<stdin>", "larger than the 16M input limit", "--max-input-size")


def test_devices_and_fifos_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # No writer ever opens the FIFO: opening it for reading would block forever.
    assert_one_line_error(cli("fit", str(fifo), timeout=20), str(fifo), "named pipe", "not a regular file")
    proc = subprocess.run(
        [*CLI, "fit", "/dev/zero"], capture_output=True, text=True, env=clean_env(), timeout=60,
        preexec_fn=_capped_memory,
    )  # fmt: skip
    assert_one_line_error(proc, "/dev/zero", "character device")


def test_the_input_limit_is_a_flag(tmp_path: Path, dispute_request: Path) -> None:
    size = dispute_request.stat().st_size
    assert_one_line_error(
        cli("fit", str(dispute_request), "--max-input-size", str(size - 1)), "input limit", "--max-input-size"
    )
    small = cli("fit", "-", "--max-input-size", "1k", stdin=dispute_request.read_text())
    assert_one_line_error(small, "<stdin>", "larger than the 1k input limit")
    assert cli("fit", str(dispute_request), "--max-input-size", str(size)).returncode == 0
    assert cli("fit", "-", "--max-input-size", "1M", stdin=dispute_request.read_text()).returncode == 0
    assert_one_line_error(cli("fit", str(dispute_request), "--max-input-size", "lots"), "--max-input-size")


def test_an_unwritable_fitted_request_leaves_the_old_file_and_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.json"
    # A lone surrogate is valid JSON (an escape) but no UTF-8 encoder can write it back.
    path.write_text('{"messages": [{"role": "user", "content": "hi \\ud800 there"}]}')
    out = tmp_path / "fitted.json"
    out.write_text("previous\n")
    proc = cli("fit", str(path), "-o", str(out))
    assert_one_line_error(proc, str(out), "message 0", "not valid Unicode", "nothing was written")
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fitted.json", "surrogate.json"]
    assert_one_line_error(cli("fit", str(path), "-o", str(tmp_path)), str(tmp_path), "is a directory")


# --- --otlp and the OTEL_* variables --------------------------------------------------------


class _OtlpHttpSink:
    """Records the paths OTLP/HTTP exporters POST to, on the http/protobuf default port."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.paths: list[str] = []
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        try:
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 4318), Handler)
        except OSError as exc:
            pytest.fail(f"port 4318 (the OTLP/HTTP default this test checks) is taken: {exc}")
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def otlp_http_sink() -> Any:
    sink = _OtlpHttpSink()
    yield sink
    sink.close()


def test_bare_otlp_with_http_protobuf_uses_the_http_port(otlp_http_sink: _OtlpHttpSink) -> None:
    env = clean_env(OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    proc = cli("demo", "--tickets", "2", "--seed", "2", "--otlp", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "OTLP to http://localhost:4318" in proc.stdout
    assert "/v1/traces" in otlp_http_sink.paths
    assert "/v1/metrics" in otlp_http_sink.paths


def test_otlp_keeps_a_signal_the_environment_turned_off(otlp_http_sink: _OtlpHttpSink) -> None:
    env = clean_env(OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_METRICS_EXPORTER="none")
    proc = cli("demo", "--tickets", "2", "--seed", "2", "--otlp", "http://127.0.0.1:4318", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "/v1/traces" in otlp_http_sink.paths
    assert "/v1/metrics" not in otlp_http_sink.paths


def test_otlp_with_prometheus_sends_spans_only_over_otlp(otlp_http_sink: _OtlpHttpSink) -> None:
    env = clean_env(OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", COLUMNS="300")
    args = ["--otlp", "http://127.0.0.1:4318", "--prometheus-port", "0"]
    proc = cli("demo", "--tickets", "2", "--seed", "2", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "/v1/traces" in otlp_http_sink.paths
    assert "/v1/metrics" not in otlp_http_sink.paths  # metrics are for Prometheus to scrape
    assert "OTLP to http://127.0.0.1:4318 (spans), Prometheus metrics on http://127.0.0.1:" in proc.stdout
