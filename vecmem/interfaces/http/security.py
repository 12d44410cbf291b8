"""What every request to ``vecmem serve`` passes before a route sees it (and before its body is read):

1. **Host** must be a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``, any port) or a configured one,
   else 421 Misdirected Request: a page whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own name.
2. **Origin**, when sent, must be this server's own origin (``http(s)://`` + the Host it was sent to), else 403:
   a page on another origin, another port of 127.0.0.1 included, cannot drive the API.
3. **State-changing methods** (anything but GET, HEAD, OPTIONS) must send ``X-Vecmem-Request: 1``, else 403.
   A simple cross-site request (a form post, ``fetch`` in ``no-cors`` mode) cannot send a custom header, and a
   CORS preflight gets no CORS answer, so only same-origin pages (the panel) and non-browser clients can.
   `vecmem proxy` (``json_is_intent``) also takes ``Content-Type: application/json`` as that proof, which no simple
   cross-site request can send either: OpenAI's SDKs send it, and no header of vecmem's.
4. **The key**: once any key is configured (``--token``/``VECMEM_API_TOKEN`` or `vecmem keys`), every route but
   the panel and ``/openapi.json`` needs ``Authorization: Bearer <key>`` (the scheme in any case, RFC 7235),
   else 401. With no key at all, only loopback clients are served.
5. **The user**: a per-user key may not name another user (``?user=``), nor call a route over every user
   (``/export``, ``/stats`` and ``/prune`` without ``?user=``): 403.

Refusals are the API's one error shape, ``{"error": message, "field": name or null}`` (the proxy gives its own
``render``: OpenAI's shape).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, QueryParams
from starlette.types import ASGIApp, Receive, Scope, Send

from vecmem.errors import ConfigError
from vecmem.interfaces.http.keys import ADMIN, KeyStore, Principal

__all__ = ["CSRF_HEADER", "EVERY_USER_ROUTES", "PRINCIPAL", "PUBLIC_PATHS", "Guard", "Render", "check_binding",
           "is_loopback", "keyed", "vecmem_error_body"]

CSRF_HEADER = "X-Vecmem-Request"
PRINCIPAL = "vecmem.principal"  # the scope key under which a route finds who the request acts for
PUBLIC_PATHS = frozenset({"/", "/openapi.json"})  # the static panel and the API description: no memory in them
# Routes that cover every user when ``user`` is absent: the admin's alone then.
EVERY_USER_ROUTES = frozenset({("GET", "/export"), ("GET", "/stats"), ("POST", "/prune")})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
Render = Callable[[int, str, "str | None"], bytes]  # (status, message, field) -> the JSON body of a refusal


def vecmem_error_body(status: int, message: str, field: str | None) -> bytes:
    """The API's one error shape (the status is in the response line)."""
    return json.dumps({"error": message, "field": field}).encode()


def check_binding(host: str, token: str | None, *, keys: bool = False) -> None:
    """Refuse to serve memories to the network without a key (``keys``: `vecmem keys` made some)."""
    if not is_loopback(host) and not token and not keys:
        raise ConfigError(f"binding to {host} exposes every memory to the network: give a token (--token or "
                          "VECMEM_API_TOKEN) or create keys (`vecmem keys create`), or bind to 127.0.0.1")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """``name:port`` → ``name`` (``[::1]:8765`` → ``[::1]``), lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[:host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Refusal(Exception):
    def __init__(self, status: int, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.headers = status, message, field, headers or {}


class Guard:
    """The ASGI middleware doing the five checks above. ``allowed_hosts``: names besides the loopback ones
    that clients may use for this server (its address on the network, a proxy's name). ``json_is_intent``: a JSON
    body proves a state-changing request is not a simple cross-site one, as the header does. ``render``: the body
    of a refusal."""

    def __init__(self, app: ASGIApp, *, token: str | None, keys: KeyStore | None,
                 allowed_hosts: Iterable[str] = (), json_is_intent: bool = False,
                 render: Render = vecmem_error_body) -> None:
        self.app = app
        self.token = token
        self.keys = keys
        self.hosts = _LOOPBACK_NAMES | {_host_name(name) for name in allowed_hosts if name.strip()}
        self.json_is_intent = json_is_intent
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            scope[PRINCIPAL] = self._admit(scope)
        except _Refusal as refusal:
            await _refuse(refusal, send, self.render)
            return
        await self.app(scope, receive, send)

    def _admit(self, scope: Scope) -> Principal:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if _host_name(host) not in self.hosts:
            raise _Refusal(421, f"this server does not answer for host {host!r} (a rebound name?): use "
                           "127.0.0.1, localhost or a name given with --allow-host", "Host")
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            raise _Refusal(403, f"requests from origin {origin!r} are refused: only this server's own pages "
                           "may call it from a browser", "Origin")
        method = scope["method"]
        if method not in _SAFE_METHODS and headers.get(CSRF_HEADER) != "1" and not self._json(headers):
            sent = " or Content-Type: application/json" if self.json_is_intent else ""
            raise _Refusal(403, f"a {method} request must send the header {CSRF_HEADER}: 1{sent} (what a "
                           "cross-site page cannot send)", CSRF_HEADER)
        path = scope["path"]
        if path in PUBLIC_PATHS and method in _SAFE_METHODS:
            return ADMIN
        principal = self._principal(headers.get("authorization"), scope.get("client"))
        if not principal.admin:
            _check_user(principal, QueryParams(scope.get("query_string", b"")), (method, path))
        return principal

    def _json(self, headers: Headers) -> bool:
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        return self.json_is_intent and media_type == "application/json"

    def _principal(self, authorization: str | None, client: tuple[str, int] | None) -> Principal:
        if not keyed(self.token, self.keys):
            if client is not None and not is_loopback(client[0]):
                raise _Refusal(403, "no API key is configured, so only local clients are served", None)
            return ADMIN
        presented = _bearer(authorization)
        if presented is not None:
            if self.token is not None and hmac.compare_digest(presented.encode(), self.token.encode()):
                return ADMIN
            found = self.keys.principal(presented) if self.keys is not None else None
            if found is not None:
                return found
        raise _Refusal(401, "a valid API key is required (Authorization: Bearer <key>)", "Authorization",
                       {"WWW-Authenticate": 'Bearer realm="vecmem"'})


def keyed(token: str | None, keys: KeyStore | None) -> bool:
    """Whether any key is configured (the token, or a valid key in the key file): then every request needs one.
    Asked per request, so a key created or revoked while the server runs counts at once."""
    return token is not None or (keys is not None and keys.any_valid())


def _bearer(authorization: str | None) -> str | None:
    """The credentials of ``Authorization: Bearer <token>``: the scheme is case-insensitive (RFC 7235 §2.1);
    a bare token without the scheme, another scheme or an empty token is no credential."""
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials or any(ch.isspace() for ch in credentials):
        return None
    return credentials


def _same_origin(origin: str, host: str) -> bool:
    parts = urlsplit(origin.strip())
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.strip().lower() \
        and not (parts.path or parts.query or parts.fragment)


def _check_user(principal: Principal, query: QueryParams, route: tuple[str, str]) -> None:
    named = query.getlist("user")
    if any(user != principal.user_id for user in named):
        raise _Refusal(403, f"this key belongs to user {principal.user_id!r} and cannot act for another user",
                       "user")
    if not named and route in EVERY_USER_ROUTES:
        raise _Refusal(403, f"{route[1]} without ?user= covers every user and needs the admin key; this key "
                       f"can ask for ?user={principal.user_id}", "user")


async def _refuse(refusal: _Refusal, send: Send, render: Render) -> None:
    body = render(refusal.status, refusal.message, refusal.field)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

