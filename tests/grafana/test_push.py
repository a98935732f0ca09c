"""``otel-ctx dashboards push`` against a fake Grafana HTTP API on 127.0.0.1."""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Iterator

import pytest
from fake_grafana import FakeGrafana, running
from support import free_port
from typer.testing import CliRunner

from otel_ctx.cli import app
from otel_ctx.grafana import build_dashboards
from otel_ctx.grafana._push import GrafanaTarget, PushError, push

TOKEN = "glsa_s3cr3t-token-value"
PASSWORD = "pa55-w0rd-value"
runner = CliRunner()


@pytest.fixture
def grafana() -> Iterator[FakeGrafana]:
    with running() as fake:
        yield fake


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["dashboards", "push", *args], env={"COLUMNS": "200", **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text
        assert PASSWORD not in text


# --- the happy path ----------------------------------------------------------------------


def test_push_creates_folder_and_uploads_every_dashboard_with_overwrite(grafana: FakeGrafana) -> None:
    code, out, err = cli("--url", grafana.url, env={"GRAFANA_TOKEN": TOKEN})
    assert code == 0, err
    shipped = build_dashboards()
    saves = grafana.calls("POST", "/api/dashboards/db")
    assert [s.body["dashboard"]["uid"] for s in saves] == [m["uid"] for m in shipped.values()]
    created = grafana.calls("POST", "/api/folders")
    assert len(created) == 1 and created[0].body["title"] == "otel-ctx"
    folder_uid = grafana.folders[0]["uid"]
    for save in saves:
        assert save.body["overwrite"] is True
        assert save.body["folderUid"] == folder_uid
        assert "id" not in save.body["dashboard"]
        ds_var = next(v for v in save.body["dashboard"]["templating"]["list"] if v["name"] == "datasource")
        assert ds_var["current"] == {"text": "Prometheus", "value": "prom-uid"}
    for request in grafana.requests:
        if request.path != "/api/health":
            assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert grafana.calls("GET", "/api/datasources/name/Prometheus")
    assert "created" in out and "otel-ctx-overview" in out
    assert_no_secret(out, err)


def test_second_push_reuses_the_folder_and_overwrites(grafana: FakeGrafana) -> None:
    grafana.folders.append({"id": 7, "uid": "existing-uid", "title": "Agents"})
    for _ in range(2):
        code, out, err = cli("--url", grafana.url, "--token", TOKEN, "--folder", "Agents")
        assert code == 0, err
    assert not grafana.calls("POST", "/api/folders")
    assert {s.body["folderUid"] for s in grafana.calls("POST", "/api/dashboards/db")} == {"existing-uid"}
    assert {b["version"] for b in grafana.dashboards.values()} == {2}
    assert "reused" in out


def test_basic_auth_and_datasource_by_uid(grafana: FakeGrafana) -> None:
    grafana.datasources.append({"id": 3, "uid": "prom-2", "name": "Other Prom", "type": "prometheus"})
    code, out, err = cli("--url", grafana.url, "--user", f"admin:{PASSWORD}", "--datasource-uid", "prom-2")
    assert code == 0, err
    expected = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    assert grafana.calls("GET", "/api/datasources/uid/prom-2")[0].headers["authorization"] == expected
    save = grafana.calls("POST", "/api/dashboards/db")[0]
    ds_var = next(v for v in save.body["dashboard"]["templating"]["list"] if v["name"] == "datasource")
    assert ds_var["current"] == {"text": "Other Prom", "value": "prom-2"}
    assert_no_secret(out, err)


def test_push_does_not_change_the_callers_models(grafana: FakeGrafana) -> None:
    models = build_dashboards()
    before = copy.deepcopy(models)
    push(GrafanaTarget(grafana.url, token=TOKEN), models)
    assert models == before


def test_grafana_under_a_sub_path(grafana: FakeGrafana) -> None:
    # The fake serves /api at the root; a sub-path must be kept in front of "api", not glued to it.
    code, _, err = cli("--url", grafana.url + "/grafana", "--token", TOKEN)
    assert code == 1
    assert grafana.requests[0].path == "/grafana/api/health"
    assert "404" in err


# --- the data source check ---------------------------------------------------------------


def test_missing_datasource_is_said_plainly_and_nothing_is_uploaded(grafana: FakeGrafana) -> None:
    code, _, err = cli("--url", grafana.url, "--token", TOKEN, "--datasource", "Mimir")
    assert code == 1
    assert err.count("\n") == 1
    assert "no data source with name 'Mimir'" in err
    assert "Prometheus (uid prom-uid)" in err  # what does exist, so the fix is one flag away
    assert not grafana.calls("POST", "/api/dashboards/db")
    assert not grafana.calls("POST", "/api/folders")


def test_datasource_of_the_wrong_type_is_refused(grafana: FakeGrafana) -> None:
    code, _, err = cli("--url", grafana.url, "--token", TOKEN, "--datasource", "Jaeger")
    assert code == 1
    assert "type 'jaeger', not 'prometheus'" in err
    assert not grafana.calls("POST", "/api/dashboards/db")


# --- errors: one line, no secret -----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "phrase"),
    [
        (401, "unauthorized", "rejected the credentials (401 Unauthorized)"),
        (403, "forbidden", "(403 Forbidden)"),
        (500, "server", "(500)"),
    ],
)
def test_http_errors_are_one_line(grafana: FakeGrafana, status: int, kind: str, phrase: str) -> None:
    grafana.fail_status = status
    with pytest.raises(PushError) as caught:
        push(GrafanaTarget(grafana.url, token=TOKEN), build_dashboards())
    assert caught.value.kind == kind
    code, out, err = cli("--url", grafana.url, "--token", TOKEN)
    assert code == 1
    assert err.count("\n") == 1 and phrase in err and grafana.url in err
    assert_no_secret(out, err, repr(caught.value), str(caught.value))


def test_not_a_grafana_is_a_404(grafana: FakeGrafana) -> None:
    grafana.fail_status = 404
    grafana.fail_health = True
    code, _, err = cli("--url", grafana.url, "--token", TOKEN)
    assert code == 1
    assert "404 Not Found" in err and "Grafana's root" in err


def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = cli("--url", url, "--token", TOKEN)
    assert code == 1
    expected = f"cannot connect to Grafana at {url}: connection refused (is it running?)"
    assert err == f"otel-ctx dashboards push: error: {expected}\n"
    assert_no_secret(out, err)


def test_tls_failure_against_a_plain_http_server(grafana: FakeGrafana) -> None:
    url = grafana.url.replace("http://", "https://")
    code, out, err = cli("--url", url, "--token", TOKEN, "--timeout", "5")
    assert code == 1
    assert err.count("\n") == 1
    assert "TLS failed" in err and url in err and "--ca-cert" in err
    assert_no_secret(out, err)


def test_credentials_in_the_url_are_never_shown(grafana: FakeGrafana) -> None:
    grafana.fail_status = 401
    url = grafana.url.replace("http://", f"http://admin:{PASSWORD}@")
    code, out, err = cli("--url", url)
    assert code == 1
    assert "401" in err
    assert_no_secret(out, err)


def test_target_repr_hides_secrets() -> None:
    target = GrafanaTarget("http://localhost:3000", token=TOKEN)
    assert_no_secret(repr(target))
    assert_no_secret(repr(GrafanaTarget("http://localhost:3000", basic_auth=("admin", PASSWORD))))


# --- usage errors: exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "phrase"),
    [
        ((), {}, "no Grafana URL"),
        (("--url", "http://localhost:3000"), {}, "no credentials"),
        (("--url", "localhost:3000", "--token", TOKEN), {}, "not an http(s):// URL"),
        (("--url", "http://localhost:3000", "--token", TOKEN, "--user", "a:b"), {}, "either --token"),
        (("--url", "http://localhost:3000", "--user", "admin"), {}, "USER:PASSWORD"),
        (
            ("--url", "http://localhost:3000", "--token", TOKEN, "--insecure", "--ca-cert", "/x"),
            {},
            "contradict",
        ),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], env: dict[str, str], phrase: str) -> None:
    code, out, err = cli(*args, env={"GRAFANA_URL": "", "GRAFANA_TOKEN": "", **env})
    assert code == 2, err
    assert err.count("\n") == 1 and phrase in err
    assert_no_secret(out, err)


# --- hostile servers: echoed credentials, odd shapes, a trickle ----------------------------


def test_every_form_of_the_credentials_is_scrubbed_before_the_message_is_cut(grafana: FakeGrafana) -> None:
    from urllib.parse import quote

    password = "p@ss/w:rd%41-" + PASSWORD
    userinfo = f"admin:{password}"
    basic = base64.b64encode(userinfo.encode()).decode()
    forms = [
        password,
        quote(password, safe=""),
        basic,
        f"Basic {basic}",
        f"http://{quote('admin')}:{quote(password, safe='')}@grafana.internal/",
        userinfo,
    ]
    echoed = "bad auth: " + " | ".join(forms)
    grafana.overrides[("GET", "/api/health")] = (
        500,
        "application/json",
        json.dumps({"message": echoed}).encode(),
    )
    with pytest.raises(PushError) as caught:
        push(GrafanaTarget(grafana.url, basic_auth=("admin", password)), build_dashboards())
    text = str(caught.value)
    for form in (*forms, password[:12], basic[:12]):
        assert form not in text, (form, text)
    assert "***" in text and "(500)" in text


def test_an_echoed_basic_header_is_scrubbed(grafana: FakeGrafana) -> None:
    grafana.fail_status = 500
    grafana.echo_auth = True
    basic = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    code, out, err = cli("--url", grafana.url, "--user", f"admin:{PASSWORD}")
    assert code == 1 and err.count("\n") == 1
    assert grafana.requests[-1].headers["authorization"] == f"Basic {basic}"  # it was echoed
    assert basic not in err and basic[:8] not in err
    assert_no_secret(out, err)


def test_a_token_straddling_the_cut_leaves_no_prefix(grafana: FakeGrafana) -> None:
    token = "glsa_" + "k7Qz" * 75  # long enough to cross the 200-character cut
    grafana.fail_status = 500
    grafana.echo_auth = True
    code, out, err = cli("--url", grafana.url, "--token", token)
    assert code == 1 and err.count("\n") == 1
    assert "glsa_k7Qz" not in err and "k7Qzk7Qz" not in err, err
    assert token not in out


_FOLDER = ("GET", "/api/folders")
_DS = ("GET", "/api/datasources/name/Prometheus")


@pytest.mark.parametrize(
    ("where", "content_type", "body", "phrase"),
    [
        (_DS, "application/json", b"[]", "a JSON array"),
        (_DS, "text/plain", b"datasource ok", "text"),
        (_DS, "application/json", b"{}", "an empty JSON object"),
        (_FOLDER, "application/json", b'{"folders": []}', "a JSON object"),
        (_FOLDER, "application/json", b'["otel-ctx"]', "non-objects"),
        (_FOLDER, "application/json", b'[{"title": "otel-ctx"}]', "without 'uid'"),
        (("POST", "/api/folders"), "application/json", b"{}", "without 'uid'"),
        (("POST", "/api/dashboards/db"), "text/plain", b"saved", "text"),
    ],
)
def test_unexpected_response_shapes_are_one_typed_line(
    grafana: FakeGrafana, where: tuple[str, str], content_type: str, body: bytes, phrase: str
) -> None:
    grafana.overrides[where] = (200, content_type, body)
    with pytest.raises(PushError) as caught:
        push(GrafanaTarget(grafana.url, token=TOKEN), build_dashboards())
    assert caught.value.kind == "response"
    assert phrase in str(caught.value)
    code, out, err = cli("--url", grafana.url, "--token", TOKEN)
    assert code == 2, err
    assert err.count("\n") == 1 and phrase in err and grafana.url in err
    assert_no_secret(out, err)


def test_timeout_is_a_deadline_for_the_whole_push(grafana: FakeGrafana) -> None:
    grafana.drip_seconds = 1.0  # every answer arrives one byte a second: no single read times out
    started = time.monotonic()
    code, _, err = cli("--url", grafana.url, "--token", TOKEN, "--timeout", "3")
    elapsed = time.monotonic() - started
    assert code == 1, err
    assert "did not finish within 3s" in err and err.count("\n") == 1
    assert elapsed < 3 + 7, elapsed  # the bound, with slack for a loaded machine
