"""``dashboards push`` against a hostile server: huge answers, cross-origin redirects, short tokens.

A 400 MB ``/api/health`` answer used to be read whole; after a 307 the folder and
dashboards were POSTed to another port while the summary named the original Grafana;
a very short token garbled every message because every occurrence was replaced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fake_grafana import FakeGrafana
from fake_grafana import running as grafana_running
from hostile_http import HostileServer, Reply, Seen, endless, running, sized

from otel_ctx._httpguard import MIN_SECRET_CHARS
from otel_ctx.grafana import build_dashboards
from otel_ctx.grafana._push import GrafanaTarget, PushError, push

TOKEN = "glsa_s3cr3t-token-value"


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with running() as s:
        yield s


def test_an_endless_health_answer_stops_at_the_cap(server: HostileServer) -> None:
    server.respond = lambda seen: Reply(200, endless())
    with pytest.raises(PushError) as caught:
        push(GrafanaTarget(server.url, token=TOKEN, max_response_bytes=1 << 20), build_dashboards())
    assert caught.value.kind == "response" and "more than 1 MB" in str(caught.value)
    assert server.sent_bytes < 64 << 20


def test_an_announced_400_mb_answer_is_refused_unread(server: HostileServer) -> None:
    server.respond = lambda seen: Reply(200, sized(400 << 20), content_length=400 << 20)
    with pytest.raises(PushError) as caught:
        push(GrafanaTarget(server.url, token=TOKEN), build_dashboards())
    assert caught.value.kind == "response" and server.sent_bytes < 400 << 20


def test_a_redirect_to_another_origin_uploads_nothing_there(server: HostileServer) -> None:
    with grafana_running() as elsewhere:

        def bounce(seen: Seen) -> Reply:
            location = f"{elsewhere.url}{seen.path}"
            return Reply(307, b"", headers={"Location": location, "Content-Type": "text/plain"})

        server.respond = bounce
        with pytest.raises(PushError) as caught:
            push(GrafanaTarget(server.url, token=TOKEN), build_dashboards())
        assert caught.value.kind == "redirect"
        assert elsewhere.url in str(caught.value) and server.url in str(caught.value)
        assert elsewhere.requests == [] and elsewhere.dashboards == {}


@pytest.mark.parametrize("token", ["o", "to", "Graf", "a:b"])
def test_a_short_token_does_not_garble_the_message(token: str) -> None:
    assert len(token) < MIN_SECRET_CHARS
    fake = FakeGrafana(fail_status=500, echo_auth=True)
    with grafana_running(fake) as grafana, pytest.raises(PushError) as caught:
        push(GrafanaTarget(grafana.url, token=token), build_dashboards())
    text = str(caught.value)
    assert f"Grafana at {grafana.url} failed while looking up the data source" in text, text
    assert f"Bearer {token}" not in text  # the credential field is still scrubbed whole


def test_a_long_token_is_still_scrubbed_everywhere() -> None:
    fake = FakeGrafana(fail_status=500)
    fake.overrides[("GET", "/api/health")] = (
        500,
        "application/json",
        json.dumps({"message": f"token {TOKEN} rejected"}).encode(),
    )
    with grafana_running(fake) as grafana, pytest.raises(PushError) as caught:
        push(GrafanaTarget(grafana.url, token=TOKEN), build_dashboards())
    assert TOKEN not in str(caught.value) and "***" in str(caught.value)
