"""Upload the dashboards to a running Grafana with grafana-client.

The sequence is the one an operator would do by hand: is this a Grafana (health), is
the Prometheus data source there, make or reuse the folder, then save each dashboard
with ``overwrite`` so a re-push updates in place (same uid). Every failure becomes a
:class:`PushError` with one line that says what to do; credentials never appear in
messages or reprs, however the underlying library words its errors.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import niquests
import niquests.exceptions
from grafana_client.api import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaTimeoutError

import otel_ctx.grafana._promql as promql
from otel_ctx._httpguard import Endpoint, guard, within_deadline
from otel_ctx.engine._errors import OtelCtxError

DEFAULT_FOLDER = "otel-ctx"
DEFAULT_DATASOURCE = "Prometheus"


class PushError(OtelCtxError):
    """Pushing failed; ``kind`` says why (``unauthorized``, ``forbidden``, ``not_found``,
    ``refused``, ``tls``, ``timeout``, ``connection``, ``redirect`` (to another origin,
    refused), ``datasource``, ``server``, ``response`` (an answer not shaped like
    Grafana's, or larger than the cap), ``usage``)."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class GrafanaTarget(Endpoint):
    """Where to push and as whom (the shared HTTP policy's endpoint). Secrets are kept out
    of ``repr`` and out of every message; only values long enough to be secrets are
    replaced one by one, so a short token does not garble every message."""

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise PushError("usage", f"Grafana {problem}" if problem.startswith("URL") else problem)


@dataclass(frozen=True)
class PushedDashboard:
    title: str
    uid: str
    url: str
    version: int | None


@dataclass(frozen=True)
class PushResult:
    grafana_version: str
    folder_title: str
    folder_uid: str
    folder_created: bool
    datasource_name: str
    datasource_uid: str
    dashboards: tuple[PushedDashboard, ...]


def _client(target: GrafanaTarget) -> Any:
    # grafana-client is untyped: its API object is Any to mypy, on purpose.
    parts = urlsplit(target.url)
    credential = target.token if target.token is not None else target.auth()
    prefix = parts.path.strip("/")
    api = GrafanaApi(
        auth=credential,
        host=parts.hostname,
        port=parts.port,
        # grafana-client glues the prefix straight onto "api": "grafana/" + "api".
        url_path_prefix=prefix + "/" if prefix else "",
        protocol=parts.scheme,
        verify=target.verify,
        timeout=target.timeout,
    )
    guard(api.client.s, target, _refused, server="Grafana")
    return api


def _refused(kind: str, message: str) -> PushError:
    """The shared policy's refusals: another origin is a connection problem, a huge answer
    is not Grafana's shape."""
    return PushError("redirect" if kind == "redirect" else "response", message)


def _one_line(text: object) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


#: How much of a server's own words a message quotes.
_DETAIL_CHARS = 200


def _detail(exc: BaseException, target: GrafanaTarget) -> str:
    """The exception's text, scrubbed, on one line, then cut to a readable length."""
    text = target.scrub(_one_line(exc))
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _is_refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if (
            isinstance(current, ConnectionRefusedError)
            or getattr(current, "errno", None) == errno.ECONNREFUSED
        ):
            return True
        if "refused" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


#: What Grafana means by a status it answers with, and what to do about it.
_STATUS = {
    401: (
        "unauthorized",
        "Grafana at {url} rejected the credentials (401 Unauthorized) while {action}; "
        "check --token / GRAFANA_TOKEN or --user",
    ),
    403: (
        "forbidden",
        "Grafana at {url} refused {action} (403 Forbidden); the token or user needs the "
        "Editor role (folders and dashboards write) in this organization",
    ),
    404: (
        "not_found",
        "Grafana at {url} answered 404 Not Found while {action}; is the URL Grafana's root "
        "(with its sub-path, if it is served under one)?",
    ),
}


def _explain(exc: BaseException, action: str, target: GrafanaTarget) -> PushError:
    """Turn whatever grafana-client or niquests raised into one actionable line."""
    kind, message = _reason(exc, action, target)
    return PushError(kind, target.scrub(message))


def _reason(exc: BaseException, action: str, target: GrafanaTarget) -> tuple[str, str]:
    """The failure's kind and what to tell the user about it."""
    url = target.display_url
    if isinstance(exc, niquests.exceptions.SSLError):
        found = re.search(r"\] ([^\[\]]+?) \(_ssl\.c:\d+\)", target.scrub(_one_line(exc)))
        reason = found.group(1) if found else "handshake failed"
        return "tls", (
            f"TLS failed talking to {url} while {action} ({reason}); "
            "check the URL's scheme, or pass --ca-cert PATH (or --insecure to skip verification)"
        )
    if isinstance(exc, GrafanaTimeoutError | niquests.exceptions.Timeout):
        return "timeout", f"Grafana at {url} did not answer within {target.timeout:g}s while {action}"
    if isinstance(exc, niquests.exceptions.ConnectionError) or (
        isinstance(exc, GrafanaException) and exc.status_code == 0
    ):
        if _is_refused(exc):
            return "refused", f"cannot connect to Grafana at {url}: connection refused (is it running?)"
        return "connection", f"cannot connect to Grafana at {url}: {_detail(exc, target)}"
    if isinstance(exc, GrafanaException) and exc.status_code in _STATUS:
        kind, says = _STATUS[exc.status_code]
        return kind, says.format(url=url, action=action)
    if isinstance(exc, GrafanaException):
        said = "rejected" if isinstance(exc, GrafanaClientError) else "failed while"
        return "server", f"Grafana at {url} {said} {action} ({exc.status_code}): {_detail(exc, target)}"
    return "connection", f"talking to Grafana at {url} failed while {action}: {_detail(exc, target)}"


def _shape(value: object) -> str:
    if isinstance(value, str):
        return "text" if value.strip() else "an empty body"
    if isinstance(value, dict):
        return "an empty JSON object" if not value else "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    return "null" if value is None else f"JSON {type(value).__name__}"


def _unexpected(target: GrafanaTarget, action: str, got: str, wanted: str) -> PushError:
    return PushError(
        "response",
        f"Grafana at {target.display_url} answered {action} with {got}, not {wanted}; "
        "is the URL Grafana's root, and nothing (a proxy, a login page) in between?",
    )


def _object(value: object, target: GrafanaTarget, action: str, *keys: str) -> dict[str, Any]:
    """``value`` as a JSON object holding ``keys``, else a ``response`` PushError."""
    wanted = "a JSON object" + (f" with {', '.join(repr(k) for k in keys)}" if keys else "")
    if not isinstance(value, dict):
        raise _unexpected(target, action, _shape(value), wanted)
    missing = [k for k in keys if value.get(k) in (None, "")]
    if missing:
        raise _unexpected(target, action, f"{_shape(value)} without {', '.join(map(repr, missing))}", wanted)
    return value


def _objects(value: object, target: GrafanaTarget, action: str) -> list[dict[str, Any]]:
    """``value`` as a JSON array of objects, else a ``response`` PushError."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        got = "a JSON array holding non-objects" if isinstance(value, list) else _shape(value)
        raise _unexpected(target, action, got, "a JSON array of objects")
    return value


_CALL_ERRORS = (GrafanaException, niquests.exceptions.RequestException)


def _call(target: GrafanaTarget, action: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, its failure explained as ``action``'s."""
    try:
        return call(*args, **kwargs)
    except _CALL_ERRORS as exc:
        raise _explain(exc, action, target) from None


def _datasource(api: Any, target: GrafanaTarget, name: str | None, uid: str | None) -> tuple[str, str]:
    wanted = f"uid {uid!r}" if uid else f"name {name!r}"
    try:
        found = (
            api.datasource.get_datasource_by_uid(uid) if uid else api.datasource.get_datasource_by_name(name)
        )
    except _CALL_ERRORS as exc:
        if not isinstance(exc, GrafanaException) or exc.status_code != 404:
            raise _explain(exc, "looking up the data source", target) from None
        others = _prometheus_datasources(api)
        hint = (
            f"Prometheus data sources there: {', '.join(others)}"
            if others
            else "it has no Prometheus data source"
        )
        raise PushError(
            "datasource",
            f"Grafana at {target.display_url} has no data source with {wanted}; {hint}. "
            "Pass --datasource NAME or --datasource-uid UID (or add the data source first)",
        ) from None
    found = _object(found, target, "the data source lookup", "type")
    kind = str(found.get("type", ""))
    if kind != "prometheus":
        raise PushError(
            "datasource",
            f"data source with {wanted} in Grafana at {target.display_url} is of type {kind!r}, not "
            "'prometheus'; the dashboards query PromQL",
        )
    return str(found.get("name", name or "")), str(found.get("uid", uid or ""))


def _prometheus_datasources(api: Any) -> list[str]:
    """Names for a hint only: anything unexpected gives no hint rather than an error."""
    try:
        listed = api.datasource.list_datasources()
    except _CALL_ERRORS:
        return []
    if not isinstance(listed, list):
        return []
    listed = [d for d in listed if isinstance(d, dict)]
    return sorted(f"{d.get('name')} (uid {d.get('uid')})" for d in listed if d.get("type") == "prometheus")


def _folder(api: Any, target: GrafanaTarget, title: str) -> tuple[str, bool]:
    folders = _call(target, "listing folders", api.folder.get_all_folders)
    for folder in _objects(folders, target, "listing folders"):
        if folder.get("title") == title:
            return str(_object(folder, target, "listing folders", "uid")["uid"]), False
    creating = f"creating folder {title!r}"
    created = _call(target, creating, api.folder.create_folder, title, uid=_slug(title))
    return str(_object(created, target, creating, "uid")["uid"]), True


def _slug(title: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "-", title).strip("-").lower()
    return slug[:40] or "otel-ctx"


def prepare(model: Mapping[str, Any], datasource_name: str, datasource_uid: str) -> dict[str, Any]:
    """A copy of ``model`` ready to save: no numeric ``id``, the data source variable preset."""
    board = copy.deepcopy(dict(model))
    board.pop("id", None)
    for variable in (board.get("templating") or {}).get("list") or ():
        if variable.get("type") == "datasource" and variable.get("name") == promql.VAR_DATASOURCE:
            variable["current"] = {"text": datasource_name, "value": datasource_uid}
    return board


def push(
    target: GrafanaTarget,
    dashboards: Mapping[str, Mapping[str, Any]],
    *,
    folder: str = DEFAULT_FOLDER,
    datasource: str | None = DEFAULT_DATASOURCE,
    datasource_uid: str | None = None,
    message: str = "otel-ctx dashboards push",
) -> PushResult:
    """Check the data source, make or reuse ``folder``, save every dashboard with overwrite.

    Nothing is uploaded unless the data source check passed. The caller's models are not
    changed (each is copied before the data source variable is preset).
    """
    if not folder.strip():
        raise PushError("usage", "the folder title is empty")
    if not datasource and not datasource_uid:
        raise PushError(
            "usage", "name the Prometheus data source (--datasource NAME or --datasource-uid UID)"
        )
    api = _client(target)

    def timed_out() -> PushError:
        return PushError(
            "timeout",
            f"Grafana at {target.display_url} did not finish within {target.timeout:g}s (--timeout)",
        )

    # The client's timeout bounds each socket read, so a server that trickles one byte at a
    # time never trips it; the whole push gets one deadline instead.
    return within_deadline(
        lambda: _push_all(api, target, dashboards, folder, datasource, datasource_uid, message),
        target.timeout,
        timed_out,
        lambda: _close(api),
    )


def _close(api: Any) -> None:
    """Drop the client's connections so the abandoned worker stops at its next read."""
    # Best effort: the worker is a daemon and the deadline has passed anyway.
    with contextlib.suppress(Exception):
        api.client.s.close()


def _push_all(
    api: Any,
    target: GrafanaTarget,
    dashboards: Mapping[str, Mapping[str, Any]],
    folder: str,
    datasource: str | None,
    datasource_uid: str | None,
    message: str,
) -> PushResult:
    # /api/health answers without credentials: it tells "not a Grafana" (404) and
    # "unreachable" apart from "wrong credentials", which the next call finds out.
    health = _call(target, "checking its health", api.client.GET, "/health")
    version = str(health.get("version", "")) if isinstance(health, dict) else ""
    ds_name, ds_uid = _datasource(api, target, datasource, datasource_uid)
    folder_uid, created = _folder(api, target, folder)
    pushed = []
    for model in dashboards.values():
        board = prepare(model, ds_name, ds_uid)
        title = str(board.get("title", ""))
        saving = f"saving dashboard {title!r}"
        body = {"dashboard": board, "folderUid": folder_uid, "overwrite": True, "message": message}
        saved = _object(_call(target, saving, api.dashboard.update_dashboard, body), target, saving)
        pushed.append(
            PushedDashboard(
                title=title,
                uid=str(saved.get("uid", board.get("uid", ""))),
                url=target.origin + str(saved.get("url", "")),
                version=saved.get("version"),
            )
        )
    return PushResult(
        grafana_version=version,
        folder_title=folder,
        folder_uid=folder_uid,
        folder_created=created,
        datasource_name=ds_name,
        datasource_uid=ds_uid,
        dashboards=tuple(pushed),
    )
