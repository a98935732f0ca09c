"""``otel-ctx advise`` against a hostile or broken Prometheus on 127.0.0.1.

Each case used to misbehave: a huge answer was read whole, a trickle kept it waiting past
any timeout, userinfo was printed (and not used), a redirect to another host was followed,
``+Inf`` and non-object answers escaped as "unexpected" Python errors, negative counters
printed negative limits. Now every one is a :class:`PrometheusError` naming the server
(without credentials) and, for an answer, the query; the same HTTP policy as ``dashboards
push`` (one deadline, a size cap, no cross-origin redirect, scrubbed credentials).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hostile_http import HostileServer, Reply, Seen, endless, running, sized
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_ctx.cli import main
from otel_ctx.cli._advise import Prometheus, PrometheusError, gather
from otel_ctx.cli._errors import CliError

PASSWORD = "S3cretPassw0rd-value"
TOKEN = "prom-bearer-token-value-42"


def _vector(*samples: tuple[dict[str, str], str]) -> bytes:
    result = [{"metric": m, "value": [1_700_000_000.0, v]} for m, v in samples]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


EMPTY = _vector()


@pytest.fixture
def prom() -> Iterator[HostileServer]:
    with running() as server:
        yield server


@pytest.fixture
def advise(capsys: pytest.CaptureFixture[str]) -> Any:
    """``otel-ctx advise --prometheus URL ARGS...`` through the console entry point: (exit code, output)."""

    def run(url: str, *args: str) -> tuple[int, str]:
        try:
            main(["advise", "--prometheus", url, *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


def test_an_answer_over_the_cap_is_refused_while_it_arrives(prom: HostileServer) -> None:
    prom.respond = lambda seen: Reply(200, endless())  # no Content-Length, never ends
    with pytest.raises(PrometheusError) as caught:
        Prometheus(prom.url, max_response_bytes=1 << 20).query("up")
    assert caught.value.kind == "response" and "more than 1 MB" in str(caught.value)
    assert prom.sent_bytes < 64 << 20  # it stopped reading; a whole-body read would never end


def test_an_announced_huge_answer_is_refused_before_reading(prom: HostileServer) -> None:
    prom.respond = lambda seen: Reply(200, sized(200 << 20), content_length=200 << 20)
    with pytest.raises(PrometheusError) as caught:
        Prometheus(prom.url).query("up")
    assert caught.value.kind == "response" and prom.sent_bytes < 200 << 20


def test_a_trickling_server_meets_one_deadline_for_the_whole_exchange(prom: HostileServer) -> None:
    # A byte every 0.2 s: no single read ever waits long, and the body takes ~20 s to arrive,
    # so only a deadline over the whole exchange can end it first.
    prom.respond = lambda seen: Reply(200, EMPTY + b" " * 40, drip_seconds=0.2)
    with pytest.raises(PrometheusError) as caught:
        gather(Prometheus(prom.url, timeout=1.5), window="1d", service=".*")
    assert caught.value.kind == "timeout" and "1.5s" in str(caught.value)
    assert prom.sent_bytes < len(EMPTY) + 40


def test_a_bucket_whose_le_is_no_number_is_an_unreadable_answer(prom: HostileServer) -> None:
    """Every query answers one histogram bucket with an empty ``le``: refused as a response
    otel-ctx cannot read, not a ValueError from deep in the quantile code."""
    sample = {"metric": {"task_type": "t", "outcome": "fit", "le": ""}, "value": [1.0, "3"]}
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [sample]}})
    prom.respond = lambda seen: Reply(200, body.encode(), headers={"Content-Type": "application/json"})
    with pytest.raises(PrometheusError) as caught:
        gather(Prometheus(prom.url, timeout=10), window="1d", service=".*")
    assert caught.value.kind == "response" and "le label is not a number" in str(caught.value)


def _needs_basic(seen: Seen) -> Reply:
    wanted = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    if seen.headers.get("authorization") != wanted:
        # A careless proxy that echoes what it was sent.
        return Reply(401, json.dumps({"error": f"bad auth {seen.headers.get('authorization')}"}).encode())
    return Reply(200, EMPTY)


def test_userinfo_authenticates_and_never_appears_in_a_message(prom: HostileServer, advise: Any) -> None:
    prom.respond = _needs_basic
    url = prom.url.replace("http://", f"http://admin:{PASSWORD}@")
    code, out = advise(url)
    assert code == 0, out
    assert "nothing to advise" in out
    wrong = prom.url.replace("http://", f"http://admin:{PASSWORD}-wrong@")
    code, out = advise(wrong)
    assert code != 0 and "401" in out
    echoed = base64.b64encode(f"admin:{PASSWORD}-wrong".encode()).decode()
    assert PASSWORD not in out and echoed not in out and echoed[:12] not in out


def test_a_bearer_token_authenticates_and_is_scrubbed(prom: HostileServer, advise: Any) -> None:
    def needs_bearer(seen: Seen) -> Reply:
        if seen.headers.get("authorization") != f"Bearer {TOKEN}":
            return Reply(403, f"denied for {seen.headers.get('authorization')}".encode())
        return Reply(200, EMPTY)

    prom.respond = needs_bearer
    assert advise(prom.url, "--token", TOKEN)[0] == 0
    code, out = advise(prom.url, "--token", TOKEN + "-stale")
    assert code != 0 and "403" in out and TOKEN not in out


def test_a_redirect_to_another_origin_is_refused_and_never_followed(prom: HostileServer) -> None:
    with running() as elsewhere:
        elsewhere.respond = lambda seen: Reply(200, EMPTY)
        prom.respond = lambda seen: Reply(307, b"", headers={"Location": f"{elsewhere.url}/api/v1/query"})
        url = prom.url.replace("http://", f"http://admin:{PASSWORD}@")
        with pytest.raises(PrometheusError) as caught:
            gather(Prometheus(url), window="1d", service=".*")
        assert caught.value.kind == "redirect" and elsewhere.url in str(caught.value)
        assert elsewhere.requests == [] and PASSWORD not in str(caught.value)


def test_a_redirect_within_the_same_origin_is_followed(prom: HostileServer) -> None:
    prom.respond = lambda seen: (
        Reply(308, b"", headers={"Location": "/prom/api/v1/query?" + "query=up"})
        if not seen.path.startswith("/prom")
        else Reply(200, _vector(({}, "3")))
    )
    assert Prometheus(prom.url).query("up") == [{"metric": {}, "value": [1_700_000_000.0, 3.0]}]


@pytest.mark.parametrize(
    ("body", "phrase"),
    [
        (_vector(({"task_type": "returns"}, "+Inf")), "only a count"),
        (_vector(({"task_type": "returns"}, "-4800")), "only a count"),
        (_vector(({"task_type": "returns"}, "lots")), "not a number"),
        (b"[]", "a JSON list"),
        (b'"ok"', "a JSON str"),
        (b'{"status": "success", "data": []}', "no data.result"),
        (b'{"status": "success", "data": {"result": [1]}}', "a sample not shaped"),
        (
            b'{"status": "success", "data": {"result": [{"metric": {"a": 1}, "value": [0, "1"]}]}}',
            "not shaped",
        ),
    ],
)
def test_impossible_answers_are_one_typed_error_naming_the_query(
    prom: HostileServer, body: bytes, phrase: str, advise: Any
) -> None:
    prom.respond = lambda seen: Reply(200, body)
    with pytest.raises(PrometheusError) as caught:
        gather(Prometheus(prom.url), window="1d", service=".*")
    text = str(caught.value)
    assert caught.value.kind == "response" and phrase in text
    assert "cannot read" in text and "for the query sum by" in text
    code, out = advise(prom.url)
    assert code == 2 and "cannot read" in out and "Traceback" not in out and "unexpected" not in out


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
_VALUES = st.one_of(
    st.sampled_from(["+Inf", "-Inf", "NaN", "-1", "1e309", "0", "12", "", " ", "0x10"]), st.text(max_size=6)
)
_SAMPLES = st.lists(
    st.fixed_dictionaries(
        {
            "metric": st.one_of(
                st.dictionaries(st.sampled_from(["task_type", "outcome", "le", "x"]), st.text(max_size=6)),
                _JSON,
            ),
            "value": st.one_of(st.tuples(st.floats(), _VALUES).map(list), _JSON),
        }
    ),
    max_size=4,
)
_ANSWERS = st.one_of(
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    _SAMPLES.map(lambda r: json.dumps({"status": "success", "data": {"result": r}}).encode()),
    st.builds(
        lambda s, e: json.dumps({"status": s, "error": e}).encode(),
        st.sampled_from(["error", "success", None]),
        _JSON,
    ),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    status=st.sampled_from([200, 200, 200, 204, 301, 400, 404, 422, 500, 503]),
    body=_ANSWERS,
    content_type=st.sampled_from(["application/json", "text/html", "application/octet-stream"]),
)
def test_only_typed_errors_come_out_of_any_answer(
    prom: HostileServer, status: int, body: bytes, content_type: str
) -> None:
    headers: dict[str, Any] = {"Content-Type": content_type}
    if 300 <= status < 400:
        headers["Location"] = "http://127.0.0.2:1/elsewhere"
    prom.respond = lambda seen: Reply(status, body, headers=headers)
    with contextlib.suppress(CliError):  # only the typed errors may come out (PrometheusError is one)
        gather(Prometheus(prom.url, timeout=10), window="1d", service=".*")
