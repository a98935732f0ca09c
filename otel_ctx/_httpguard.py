"""One policy for otel-ctx's HTTP clients: ``advise`` (Prometheus) and ``dashboards push`` (Grafana).

Both talk to a server the user names, which may be broken or hostile, and print what went wrong:

* one deadline for the whole exchange (a server trickling a byte at a time never trips a
  socket timeout): :func:`within_deadline`;
* a cap on every answer's size, counted as the body arrives: :func:`guard`;
* no redirect to another origin: the credentials and the data are for the server named;
* credentials (URL userinfo, a bearer token, user:password) scrubbed from every message in
  every form (raw, percent-encoded, base64 of a Basic header). Only values long enough to be
  secrets are replaced one by one; whole credential fields are scrubbed whatever their length.
"""

from __future__ import annotations

import base64
import contextlib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus, unquote, urljoin, urlsplit, urlunsplit

#: Shorter values are not scrubbed one by one (replacing every "ab" garbles a message and
#: hides nothing worth hiding); credential fields are still scrubbed whole.
MIN_SECRET_CHARS = 8
#: Cap on one answer: Prometheus's and Grafana's real answers here are kilobytes.
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
#: Same-origin redirects followed at most (a trailing slash, a sub-path move).
MAX_REDIRECTS = 5
_CHUNK = 64 * 1024

#: Builds the exception for a refused answer: ``(kind, message)``; kinds are
#: ``"redirect"`` (another origin) and ``"too_large"`` (over the cap).
Refuse = Callable[[str, str], Exception]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Endpoint:
    """Where a client talks and as whom. Secrets are kept out of ``repr`` and every message."""

    url: str
    token: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    #: ``True``, ``False`` (no certificate check) or a CA bundle path.
    verify: bool | str = True
    timeout: float = 10.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def problem(self) -> str | None:
        """Why this endpoint cannot be used, or ``None`` (the caller raises its own error)."""
        try:
            parts = urlsplit(self.url)
            parts.port  # noqa: B018  (a port that is not a number raises here)
        except ValueError:
            return f"URL {self.display_url!r} is not an http(s):// URL with a host"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"URL {self.display_url!r} is not an http(s):// URL with a host"
        if self.token is not None and self.basic_auth is not None:
            return "give either a token or a user:password, not both"
        if self.token is not None and parts.password:
            return "give either a token or a user:password in the URL, not both"
        return None

    @property
    def display_url(self) -> str:
        """The URL without any ``user:password@`` part (and without query or fragment)."""
        try:
            parts = urlsplit(self.url)
            netloc = parts.hostname or ""
            if parts.port is not None:
                netloc += f":{parts.port}"
        except ValueError:
            return _URL_USERINFO.sub(r"\1***@", self.url)
        return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")) or self.url

    @property
    def origin(self) -> str:
        """``scheme://host[:port]``."""
        return origin_of(self.url)

    def auth(self) -> tuple[str, str] | None:
        """The user:password to send as HTTP Basic: the given pair, else the URL's userinfo."""
        if self.basic_auth is not None:
            return self.basic_auth
        parts = urlsplit(self.url)
        if parts.username is not None and parts.password is not None:
            return unquote(parts.username), unquote(parts.password)
        return None

    def headers(self) -> dict[str, str]:
        """The bearer token's header (empty without a token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def secrets(self) -> list[str]:
        """Every form a credential can take in an error text, long enough to be a secret:
        raw, URL-encoded, and the base64 ``user:password`` of a Basic header. Longest
        first, so a form that contains another is replaced whole."""
        parts = urlsplit(self.url)
        pairs = [p for p in (self.basic_auth,) if p is not None]
        if parts.username is not None and parts.password:
            pairs.append((unquote(parts.username), unquote(parts.password)))
        raw = [s for s in (self.token, *(pw for _, pw in pairs)) if s]
        if parts.password:
            raw.append(parts.password)  # as written in the URL, maybe percent-encoded
        forms: set[str] = set()
        for secret in raw:
            forms.update({secret, quote(secret, safe=""), quote_plus(secret, safe="")})
        for user, password in pairs:
            userinfo = f"{user}:{password}"
            encoded = base64.b64encode(userinfo.encode()).decode()
            forms.update({encoded, encoded.rstrip("=")})
            if password and len(password) >= MIN_SECRET_CHARS:
                forms.update({userinfo, quote(userinfo, safe=""), quote(userinfo, safe=":")})
        return sorted((f for f in forms if len(f) >= MIN_SECRET_CHARS), key=len, reverse=True)

    def scrub(self, message: str) -> str:
        """``message`` without the credentials; done before any cutting, so a secret that
        straddles the cut cannot leave its prefix behind."""
        for secret in self.secrets():
            message = message.replace(secret, "***")
        message = _AUTH_HEADER.sub(lambda m: f"{m.group(1)} ***", message)
        return _URL_USERINFO.sub(r"\1***@", message)


#: Whatever a server echoes back: an Authorization header's value, a userinfo in a URL.
_AUTH_HEADER = re.compile(r"\b(Bearer|Basic)(\s+|%20|\+)[A-Za-z0-9._~+/=%-]+", re.IGNORECASE)
_URL_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, the default port left out (``""`` if unparsable)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    netloc = parts.hostname or ""
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        netloc += f":{port}"
    return f"{scheme}://{netloc}"


def guard(session: Any, endpoint: Endpoint, refuse: Refuse, *, server: str) -> None:
    """Make ``session`` (a niquests ``Session``, as grafana-client uses) follow the policy:
    every answer read with the size cap, a redirect to another origin refused before it is
    followed.

    ``server`` names the other side in messages ("Prometheus", "Grafana").
    """
    session.max_redirects = MAX_REDIRECTS

    def on_response(response: Any, **_: Any) -> Any:
        headers = response.headers
        try:
            if response.is_redirect:
                target = urljoin(str(response.url or endpoint.url), str(headers.get("location", "")))
                check_redirect(target, endpoint, refuse, server=server)
            chunks = response.iter_content(_CHUNK)
            body = read_capped(chunks, headers.get("content-length"), endpoint, refuse, server=server)
        except BaseException:
            response.close()
            raise
        response._content = body
        response._content_consumed = True
        return response

    session.hooks["response"].append(on_response)


def check_redirect(location: str, endpoint: Endpoint, refuse: Refuse, *, server: str) -> None:
    """Refuse a redirect to ``location`` (already absolute) unless it stays in the endpoint's origin."""
    if origin_of(location) != endpoint.origin:
        raise refuse(
            "redirect",
            endpoint.scrub(
                f"{server} at {endpoint.display_url} redirected to another origin "
                f"({origin_of(location) or 'an unreadable URL'}); otel-ctx does not follow it "
                "(the credentials and data are for the server you named): use the final URL"
            ),
        )


def read_capped(
    chunks: Iterable[bytes], declared: str | None, endpoint: Endpoint, refuse: Refuse, *, server: str
) -> bytes:
    """An answer's body from its ``chunks``, refused (kind ``too_large``) once it passes the
    endpoint's cap, or at once when its ``Content-Length`` (``declared``) already does."""
    cap = endpoint.max_response_bytes
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise refuse("too_large", _too_large(server, endpoint, cap))
    out: list[bytes] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > cap:
            raise refuse("too_large", _too_large(server, endpoint, cap))
        out.append(chunk)
    return b"".join(out)


def _too_large(server: str, endpoint: Endpoint, cap: int) -> str:
    return (
        f"{server} at {endpoint.display_url} answered with more than {cap // (1024 * 1024)} MB; "
        "no answer otel-ctx asks for is that large (is the URL right?)"
    )


def within_deadline(
    work: Callable[[], _T],
    seconds: float,
    on_timeout: Callable[[], BaseException],
    abandon: Callable[[], None] = lambda: None,
) -> _T:
    """``work()`` with one deadline for all of it, kept by running it on a daemon thread.

    On expiry ``abandon()`` is called (close the connections, so the worker stops at its
    next read) and ``on_timeout()`` is raised; the worker's own exception is re-raised here.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="otel-ctx-http", daemon=True)
    worker.start()
    worker.join(max(seconds, 0.0))
    if worker.is_alive():
        with contextlib.suppress(Exception):  # best effort: the worker is a daemon anyway
            abandon()
        raise on_timeout()
    if "error" in outcome:
        raise outcome["error"]
    result: _T = outcome["result"]
    return result
