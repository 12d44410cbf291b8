"""The owner endpoint: a process that holds an embedded store serves it to the other processes of its user.

An embedded store serves one process at a time (storage/state/lock.py). A long-running process that opened one itself
(`vecmem serve`, the chat, `vecmem mcp`) therefore starts ``OwnerEndpoint``: the standard library's
``ThreadingHTTPServer`` on 127.0.0.1, a free port, a thread per connection, HTTP/1.1 with keep-alive. It answers one
route, ``POST /call`` with ``Authorization: Bearer <secret>`` and ``{"method": name, "args": {...}}`` (wire.py),
by calling that method of its bank: one of ``CALLS``, the ``MemoryApi`` methods (vecmem/bank/api.py) minus
``close``, plus ``hello`` (who the owner is). Every other route, method, name or argument is refused. Where to
find it and the secret are in ``VECMEM_HOME/owner.json`` (mode 0600, in the 0700 home), written atomically
after the server listens and removed when it stops; the secret is new each time (``secrets.token_urlsafe(32)``)
and compared in constant time. A browser cannot call it: requests with an ``Origin`` are refused, a cross-site
request cannot send the ``Authorization`` header without a preflight this server never answers, and it knows no
secret. Clients: remote.py; which process is which: opening.py.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from vecmem.bank.api import MemoryApi
from vecmem.errors import InvalidInputError, StoreError, VecmemError, is_user_error
from vecmem.interfaces.owner.wire import OWNER_FILE, OwnerInfo, decode, encode, error_payload, remove_owner
from vecmem.storage.files import FILE_MODE, private_dir

__all__ = ["CALLS", "MAX_BODY", "OwnerEndpoint", "dispatch"]

MAX_BODY = 256 * 1024 * 1024  # a call's body: an import's chunk of lines is the largest (remote.IMPORT_CHUNK)
IDLE_SECONDS = 300  # a client's idle connection is closed after this; the client opens a new one
_NOT_SENT = frozenset({"progress"})  # callbacks stay with the caller (remote.py)


def _call(name: str) -> Callable[[MemoryApi, dict[str, Any]], Any]:
    def call(bank: MemoryApi, args: dict[str, Any]) -> Any:
        return getattr(bank, name)(**args)

    return call


# What a client may call: the protocol's methods (never close: a client cannot shut the owner's store) ...
CALLS: dict[str, Callable[[MemoryApi, dict[str, Any]], Any]] = {
    name: _call(name) for name, member in vars(MemoryApi).items()
    if not name.startswith("_") and inspect.isfunction(member) and name != "close"}
CALLS["export"] = lambda bank, args: list(bank.export(**args))  # an iterator travels as a list
CALLS["location"] = lambda bank, args: bank.location
# ... and ``hello``: whether this is the owner, and which (opening.py asks before it trusts owner.json)
_SIGNATURES = {name: inspect.signature(member) for name, member in vars(MemoryApi).items()
               if name in CALLS and inspect.isfunction(member)}
_log = logging.getLogger(__name__)


def dispatch(bank: MemoryApi, body: bytes, hello: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Answer one call: (HTTP status, JSON body). A refused call or a VecmemError is the error's shape
    (wire.error_payload); anything else that fails is a 500 naming only the exception's type."""
    try:
        method, args = _parsed(body)
        if method == "hello":
            return 200, {"result": encode(hello)}
        return 200, {"result": encode(CALLS[method](bank, args))}
    except VecmemError as error:
        return (422 if is_user_error(error) else 500), error_payload(error)
    except Exception as error:  # noqa: BLE001 - the client gets one line; the owner goes on serving
        _log.exception("vecmem: a client's call failed in the store's owner")
        return 500, {"error": "internal", "message": f"internal error in the store's owner: {type(error).__name__}",
                     "field": None, "current_version": None}


def _parsed(body: bytes) -> tuple[str, dict[str, Any]]:
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInputError("body", "is not JSON") from None
    if not isinstance(request, dict) or set(request) != {"method", "args"} or not isinstance(request["args"], dict):
        raise InvalidInputError("body", 'must be {"method": name, "args": {...}}')
    method, given = request["method"], request["args"]
    if method == "hello" and not given:
        return method, {}
    if not isinstance(method, str) or method not in CALLS:
        raise InvalidInputError("method", f"{str(method)[:80]!r} is not a call the store's owner answers")
    args = {name: decode(value) for name, value in given.items()}
    if method in _SIGNATURES:
        if set(args) & _NOT_SENT:
            raise InvalidInputError("args", f"{method} takes no {sorted(set(args) & _NOT_SENT)[0]} from a client")
        try:
            _SIGNATURES[method].bind(None, **args)
        except TypeError as exc:
            raise InvalidInputError("args", f"{method}: {exc}") from None
    elif args:
        raise InvalidInputError("args", f"{method} takes none")
    return method, args


class _Server(ThreadingHTTPServer):
    # server_close joins every handler thread (socketserver tracks only threads that are not daemons): a call
    # under way ends before the bank closes under it (closing Chroma or the model under a running call crashed
    # the owner's exit with SIGSEGV, or hung it), and no handler is left to wake up inside an interpreter that is
    # shutting down
    daemon_threads = False
    block_on_close = True

    def __init__(self, bank: MemoryApi, secret: str, hello: dict[str, Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bank, self.hello = bank, hello
        self.expected = f"Bearer {secret}".encode("ascii")
        self._connections: set[socket.socket] = set()  # kept alive between calls: closed by ``stop``
        self._busy: set[socket.socket] = set()  # those whose call is under way
        self._guard = threading.Lock()
        self._last_call = time.monotonic()  # when the last call ended (or the server started)
        self.stopping = False

    def quiet_for(self) -> float:
        """Seconds since the last call ended; 0 while one is under way."""
        with self._guard:
            return 0.0 if self._busy else time.monotonic() - self._last_call

    @contextlib.contextmanager
    def calling(self, connection: socket.socket) -> Iterator[bool]:
        """Around one call read on ``connection``: yields False when the server is stopping (the call is not to be
        made), else True, the connection counting as busy until the block ends."""
        with self._guard:
            allowed = not self.stopping
            if allowed:
                self._busy.add(connection)
        if not allowed:
            yield False
            return
        try:
            yield True
        finally:
            with self._guard:
                self._busy.discard(connection)
                self._last_call = time.monotonic()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not self.stopping:  # a connection that ``stop`` cut is no error worth a traceback on the owner's screen
            super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._guard:
            if self.stopping:
                self.shutdown_request(request)
                return
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._guard:
            self._connections.discard(request)
        super().shutdown_request(request)

    def stop(self) -> None:
        """Stop accepting, end the kept-alive connections, and wait for their threads: a call under way finishes
        and its answer is sent (its connection's reading only is shut), an idle connection ends at once (its
        client sees the end before it sends another call); none starts after."""
        with self._guard:
            self.stopping = True
            busy, idle = list(self._busy), list(self._connections - self._busy)
        self.shutdown()
        for connection, how in [*((c, socket.SHUT_RDWR) for c in idle), *((c, socket.SHUT_RD) for c in busy)]:
            with contextlib.suppress(OSError):
                connection.shutdown(how)
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_SECONDS
    server: _Server

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length", "")
        if self.path != "/call":
            self._answer(404, {"error": "not found", "message": "the only route is POST /call"}, close=True)
        elif self.headers.get("Origin") is not None:
            self._answer(403, {"error": "forbidden", "message": "no browser may call the owner"}, close=True)
        elif not hmac.compare_digest(self.headers.get("Authorization", "").encode("utf-8", "replace"),
                                     self.server.expected):
            self._answer(401, {"error": "unauthorized", "message": "wrong or missing secret"}, close=True)
        elif not length.isdigit() or int(length) > MAX_BODY:
            self._answer(413, {"error": "too large", "message": f"a call's body is 1 to {MAX_BODY} bytes"},
                         close=True)
        else:
            body = self.rfile.read(int(length))
            with self.server.calling(self.connection) as allowed:
                if allowed:
                    self._answer(*dispatch(self.server.bank, body, self.server.hello))
                else:
                    self._answer(503, error_payload(StoreError("the process holding the store is closing it; run "
                                                               "the command again")), close=True)

    def _refuse(self) -> None:
        self._answer(405, {"error": "method not allowed", "message": "the only route is POST /call"}, close=True)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse

    def _answer(self, status: int, body: dict[str, Any], *, close: bool = False) -> None:
        data = json.dumps(body).encode("ascii")  # ensure_ascii: lone surrogates of a bad import line travel too
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:  # a refused request's body is never read: the connection cannot carry another one
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # nothing on the owner's stderr (the chat's screen, the MCP host's log) per call


class OwnerEndpoint:
    """The endpoint of ``bank`` (a store this process holds) for the store in ``home``: ``start`` listens and
    writes owner.json, ``stop`` removes it (if it is still ours) and stops listening."""

    def __init__(self, bank: MemoryApi, home: Path, *, program: str) -> None:
        self.bank, self.home, self.program = bank, home, program
        self.info: OwnerInfo | None = None
        self._server: _Server | None = None

    def start(self) -> OwnerEndpoint:
        secret = secrets.token_urlsafe(32)
        hello = {"pid": os.getpid(), "program": self.program, "location": self.bank.location,
                 "embed_model": self.bank.embed_model}
        self._server = _Server(self.bank, secret, hello)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="vecmem-owner", daemon=True).start()
        self.info = OwnerInfo(pid=os.getpid(), port=self._server.server_address[1], secret=secret,
                              program=self.program, started=datetime.now(UTC).isoformat(timespec="seconds"))
        _write_private(self.home / OWNER_FILE, self.info.to_json())
        return self

    def quiet_for(self) -> float:
        """Seconds since a client's last call ended (0 while one is under way, or when not serving): how an owner
        that serves only while it is used knows when to stop (lingering.py)."""
        return 0.0 if self._server is None else self._server.quiet_for()

    def stop(self) -> None:
        if self.info is not None:
            remove_owner(self.home, self.info)
            self.info = None
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> OwnerEndpoint:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` with mode 0600 from the start, atomically: a reader sees the old file or the whole new one."""
    private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(descriptor, FILE_MODE)  # a leftover temporary file of a killed process had its own mode
        os.write(descriptor, text.encode("utf-8"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
