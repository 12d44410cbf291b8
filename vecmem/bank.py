"""MemoryBank: the one facade, and the one place where the concrete parts are wired together.

    bank = MemoryBank()                                    # settings from the environment
    bank.add("The user prefers concise code", memory_type="preference", importance=9)
    bank.search("write me a sleep function", k=3)          # -> [Hit(score, similarity, recency, importance)]
    bank.build_context("write me a sleep function").messages

Every part can be replaced through the constructor (an embedder, a token counter, a clock), which is how the
tests run without the real model.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT, ContextAssembler, TiktokenCounter, TokenCounter
from vecmem.config import Settings
from vecmem.retrieval.embedders import Embedder, SentenceTransformerEmbedder
from vecmem.errors import InvalidInputError, NotFoundError, VecmemError
from vecmem.storage.access import AccessStats
from vecmem.storage.changes import ChangeFeed
from vecmem.maintenance.doctor import DoctorReport, examine
from vecmem.maintenance.hygiene import PruneCandidate, plan
from vecmem.maintenance.hygiene import active as policy_active
from vecmem.storage.lock import StoreLock
from vecmem.retrieval.keyword import memory_tokens
from vecmem.models import (
    GLOBAL_SCOPE,
    MEMORY_TYPES,
    Hit,
    ImportReport,
    MemoryFilter,
    MemoryRecord,
    PromptPack,
    StoreStats,
    Turn,
    normalize_for_hash,
    validate_identifier,
    validate_session_id,
)
from vecmem.retrieval.retriever import Retriever
from vecmem.storage.chroma import ChromaStore

__all__ = ["MemoryBank", "content_id"]

MAX_QUERY_CHARS = 32_000
WRITE_BATCH = 256  # memories embedded and written together by add_records and imports


def content_id(user_id: str, scope: str, content: str) -> str:
    """The id a memory gets when none is given: the same statement in the same scope is the same memory."""
    digest = hashlib.sha256(f"{user_id}\x1f{scope}\x1f{normalize_for_hash(content)}".encode("utf-8"))
    return "m-" + digest.hexdigest()[:20]


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class MemoryBank:
    """Long-term memory for an LLM agent: add, search, build a budgeted context, and manage the store.

    All methods take ``user_id`` (default: ``Settings.default_user``); users never see each other's memories.
    A ``session_id`` makes a memory visible to that session only; global memories are visible everywhere.
    A MemoryBank may be shared by the threads of one process: writes are serialised by a lock.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        token_counter: TokenCounter | None = None,
        clock: Callable[[], datetime] | None = None,
        verify_model: bool = True,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.embedder: Embedder = embedder or SentenceTransformerEmbedder(
            self.settings.embed_model,
            device=self.settings.embed_device,
            batch_size=self.settings.embed_batch_size,
            backend=self.settings.embed_backend,
            cache_dir=self.settings.model_cache,
        )
        self._changes: ChangeFeed | None = None
        self._store_lock: StoreLock | None = None
        if self.settings.chroma_url:
            self._store = ChromaStore(model_name=self.embedder.name, url=self.settings.chroma_url,
                                      database=self.settings.chroma_database)
        else:
            self._store_lock = StoreLock(self.settings.home)  # one process per embedded store (lock.py)
            try:
                # the banks of this process announce their writes, so each other's copies stay exact
                self._changes = ChangeFeed(self.settings.home / "changes.sqlite3")
                self._store = ChromaStore(model_name=self.embedder.name, path=self.settings.home / "chroma",
                                          changes=self._changes)
                if verify_model:
                    self._store.check_model()
            except BaseException:
                self._store_lock.release()
                raise
        if verify_model and self.settings.chroma_url:
            self._store.check_model()
        self._assembler = ContextAssembler(token_counter or TiktokenCounter(self.settings.tokenizer), self.settings.shares)
        self._clock = clock or _utc_now
        self._lock = threading.RLock()
        self._access = AccessStats(self.settings.home / "access.sqlite3")
        self._retriever = Retriever(self._store, self.embedder, self.settings, self._access)

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def token_counter(self) -> TokenCounter:
        return self._assembler.counter

    # ------------------------------------------------------------------------------------------ writing

    def add(
        self,
        content: str,
        *,
        user_id: str | None = None,
        memory_type: str = "fact",
        importance: float = 0.5,
        tags: Sequence[str] = (),
        session_id: str | None = None,
        source: str = "manual",
        confidence: float = 1.0,
        memory_id: str | None = None,
        created_at: datetime | None = None,
        context: str = "",
        status: str = "live",
    ) -> MemoryRecord:
        """Store one memory and return it. ``context`` is text the memory should also be found by (keyword
        search only; never shown to the model), such as the conversation turns around it. ``status="pending"``
        puts it in the review queue instead of retrieval (hygiene.py).

        Adding the same statement (same user, scope and normalised text) again returns the stored memory
        unchanged, superseded or not; ``memory_id`` reused for different content is refused.
        """
        user = self._user(user_id)
        scope = self._scope(session_id)
        record = MemoryRecord(
            id=memory_id if memory_id is not None else content_id(user, scope, _text_for_id(content)),
            content=content,
            type=memory_type,
            tags=tags,  # type: ignore[arg-type]  # MemoryRecord refuses a bare string instead of splitting it
            importance=importance,
            scope=scope,
            created_at=created_at or self._clock(),
            source=source,
            confidence=confidence,
            user_id=user,
            context=context,
            status=status,
        )
        with self._lock:
            existing = self._store.get(user, [record.id]).get(record.id)
            if existing is not None:
                if normalize_for_hash(existing.content) != normalize_for_hash(record.content):
                    raise InvalidInputError("id", f"{record.id} is already used by another memory; use update()")
                return self._access.apply([existing])[0]
            self._write([record], new=True)
            self._apply_caps([user])
        return record

    def add_records(
        self,
        records: Iterable[MemoryRecord],
        *,
        overwrite: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> ImportReport:
        """Store many validated records in batches of WRITE_BATCH, embedding the next batch while the
        current one is written (embedding and Chroma's writes overlap on two cores).

        A record whose id is already stored, or came earlier in ``records``, is skipped (counted in
        ``skipped``) unless ``overwrite``. ``progress`` is called with the number of records handled so far.
        """
        added = skipped = handled = 0
        scheduled: set[tuple[str, str]] = set()
        waiting: tuple[list[MemoryRecord], Future[Any]] | None = None
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vecmem-embed") as embedding:
            for batch in _batches(records, WRITE_BATCH):
                fresh = self._unseen(batch, overwrite, scheduled)
                skipped += len(batch) - len(fresh)
                handled += len(batch)
                future = embedding.submit(self.embedder.embed_documents, [r.content for r in fresh])
                if waiting is not None:
                    added += self._store_embedded(*waiting, new=not overwrite)
                    if progress is not None:
                        progress(handled - len(batch))
                waiting = (fresh, future)
            if waiting is not None:
                added += self._store_embedded(*waiting, new=not overwrite)
        if progress is not None:
            progress(handled)
        self._apply_caps(sorted({user for user, _ in scheduled}))
        return ImportReport(added=added, skipped=skipped)

    def _unseen(
        self, batch: list[MemoryRecord], overwrite: bool, scheduled: set[tuple[str, str]]
    ) -> list[MemoryRecord]:
        """The records of a batch to write: new ones (or all, with ``overwrite``), the last of repeated ids."""
        unique: dict[tuple[str, str], MemoryRecord] = {}
        for record in batch:
            unique[(record.user_id, record.id)] = record
        by_user: dict[str, list[MemoryRecord]] = {}
        for key, record in unique.items():
            if overwrite or key not in scheduled:
                by_user.setdefault(record.user_id, []).append(record)
        fresh: list[MemoryRecord] = []
        for user, candidates in by_user.items():
            existing = {} if overwrite else self._store.get(user, [r.id for r in candidates])
            fresh.extend(r for r in candidates if r.id not in existing)
        scheduled.update((r.user_id, r.id) for r in fresh)
        return fresh

    def _store_embedded(self, records: list[MemoryRecord], vectors: Future[Any], *, new: bool) -> int:
        embedded = vectors.result()
        if records:
            with self._lock:
                self._write(records, vectors=embedded, new=new)
        return len(records)

    def _write(self, records: Sequence[MemoryRecord], *, vectors: Any = None, new: bool = False) -> None:
        """Embed (unless ``vectors`` are given), tokenize and store records of any users: vector and keywords
        in one write per user. ``new``: the ids are known not to be stored yet (nothing to move)."""
        if not records:
            return
        if vectors is None:
            vectors = self.embedder.embed_documents([r.content for r in records])
        tokens = [memory_tokens(r) for r in records]
        by_user: dict[str, list[int]] = {}
        for index, record in enumerate(records):
            by_user.setdefault(record.user_id, []).append(index)
        for user, indexes in by_user.items():
            written, words = [records[i] for i in indexes], [tokens[i] for i in indexes]
            embedded = vectors[indexes]
            self._store.upsert(user, written, embedded, words, new=new)
            self._retriever.on_written(user, written, words, embedded)

    def _rewrite_fields(self, user: str, records: Sequence[MemoryRecord]) -> None:
        """Store changed fields of memories whose content, tags and context (so vector and keywords) stay."""
        self._store.update_metadata(user, records)
        self._retriever.on_fields_changed(user, records)

    def update(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        content: str | None = None,
        memory_type: str | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        confidence: float | None = None,
        context: str | None = None,
    ) -> MemoryRecord:
        """Change fields of a memory; new content, tags or context are re-embedded and re-indexed."""
        changes: dict[str, object] = {}
        for name, value in (
            ("content", content),
            ("type", memory_type),
            ("importance", importance),
            ("tags", tags),
            ("confidence", confidence),
            ("context", context),
        ):
            if value is not None:
                changes[name] = value
        with self._lock:
            record = self._get(memory_id, user_id=user_id)
            updated = record.with_changes(**changes)
            if (updated.content, updated.tags, updated.context, updated.type) != (
                record.content, record.tags, record.context, record.type
            ):  # new words, or a new type's collection: write it whole
                self._write([updated])
            elif updated != record:
                self._rewrite_fields(updated.user_id, [updated])
        return updated

    def supersede(self, old_id: str, new_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Mark ``old_id`` as replaced by ``new_id``: kept for history, never returned by search again."""
        with self._lock:
            old = self._get(old_id, user_id=user_id)
            newer = self._get(new_id, user_id=user_id)
            if old.id == newer.id:
                raise InvalidInputError("superseded_by", "a memory cannot supersede itself")
            if old.id in self._chain_from(newer):
                raise InvalidInputError("superseded_by", f"{new_id} is already replaced by {old_id}; that would be a cycle")
            updated = old.with_changes(superseded_by=newer.id)
            self._rewrite_fields(updated.user_id, [updated])
        return updated

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryRecord]:
        """Every memory linked to this one by supersession, each before the memory that replaced it
        (the live one, with no superseded_by, comes last)."""
        start = self._get(memory_id, user_id=user_id)
        seen: dict[str, MemoryRecord] = {start.id: start}
        frontier = [start]
        while frontier:
            record = frontier.pop()
            linked = self._store.replaced_by(record.user_id, record.id)
            if record.superseded_by:
                linked += list(self._store.get(record.user_id, [record.superseded_by]).values())
            for other in linked:
                if other.id not in seen:
                    seen[other.id] = other
                    frontier.append(other)
        return self._access.apply(_replaced_first(seen))

    def restore(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Undo a supersession: this memory is live again, and the live memory that replaced it is now
        superseded by it (so one memory of the chain is live). Returns the restored memory."""
        with self._lock:
            record = self._get(memory_id, user_id=user_id)
            if not record.superseded:
                raise InvalidInputError("id", f"{record.id} is not superseded; there is nothing to restore")
            chain = self._chain_from(record)
            heads = list(self._store.get(record.user_id, chain[-1:]).values())
            restored = record.with_changes(superseded_by=None)
            changed = [restored]
            if heads and not heads[0].superseded and heads[0].id != record.id:
                changed.append(heads[0].with_changes(superseded_by=record.id))
            self._rewrite_fields(record.user_id, changed)
        return restored

    def _chain_from(self, record: MemoryRecord) -> list[str]:
        """Ids along record.superseded_by links (stops at a dangling link or a loop)."""
        chain: list[str] = []
        current: MemoryRecord | None = record
        while current is not None and current.superseded_by and current.superseded_by not in chain:
            chain.append(current.superseded_by)
            current = self._store.get(current.user_id, [current.superseded_by]).get(current.superseded_by)
        return chain

    def forget(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Delete a memory for good; returns what was deleted."""
        with self._lock:
            record = self._get(memory_id, user_id=user_id)
            self._store.delete(record.user_id, [record.id])
            self._access.forget(record.user_id, [record.id])
            self._retriever.on_forgotten(record.user_id, [record.id])
        return record

    # ------------------------------------------------------------------------------------------ reading

    def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return self._access.apply([self._get(memory_id, user_id=user_id)])[0]

    def _get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        user = self._user(user_id)
        memory_id = validate_identifier("id", memory_id)
        record = self._store.get(user, [memory_id]).get(memory_id)
        if record is None:
            raise NotFoundError(f"no memory {memory_id!r} for user {user!r}")
        return record

    def list_memories(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        types: Iterable[str] | None = None,
        include_superseded: bool = False,
        limit: int | None = None,
        statuses: Iterable[str] = ("live",),
    ) -> list[MemoryRecord]:
        """Memories of a user, newest first. With ``session_id``: what that session sees (global + its own).
        ``statuses``: live (the default), archived (by the forgetting policy), pending (the review queue)."""
        if isinstance(statuses, str) or not isinstance(statuses, Iterable):
            raise InvalidInputError("statuses", f"must be a list of statuses, got {statuses!r}")
        memory_filter = MemoryFilter(
            session_id=session_id,
            all_sessions=session_id is None,
            types=_type_set(types),
            include_superseded=include_superseded,
            statuses=frozenset(statuses),
        )
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidInputError("limit", f"must be a positive integer, got {limit!r}")
        records = sorted(
            self._store.scan(self._user(user_id), memory_filter), key=lambda r: (r.created_at, r.id), reverse=True
        )
        return self._access.apply(records if limit is None else records[:limit])

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        types: Iterable[str] | None = None,
        record_access: bool = True,
    ) -> list[Hit]:
        """The ``k`` best memories for ``query`` that this user and session may see, best first.

        Only global memories and those of ``session_id`` are candidates; superseded memories never are.
        An empty query returns the most important memories. Returned memories get their access count and
        last-accessed time updated (``record_access=False`` to look without touching); the hits show the
        memory as it was ranked.
        """
        if not isinstance(query, str):
            raise InvalidInputError("query", f"must be a string, got {type(query).__name__}")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInputError("query", f"is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError("k", f"must be a positive integer, got {k!r}")
        user = self._user(user_id)
        memory_filter = MemoryFilter(session_id=session_id, types=_type_set(types))
        hits = self._retriever.rank(query, k, user, memory_filter, self._clock())
        if record_access:
            self._record_access(hits)
        return hits

    def _record_access(self, hits: Sequence[Hit]) -> None:
        if hits:
            self._access.record([hit.record for hit in hits], self._clock())

    def warm_up(self, *, user_id: str | None = None) -> None:
        """Load what the first search would otherwise wait for: the embedding model (seconds), the user's
        keyword index and records (built from the store), and returns once the user's vectors are held in
        memory too (held.py). Safe to run in a background thread (the chat does, while the user types its
        first message)."""
        self.embedder.embed_query("warm up")
        user = self._user(user_id)
        self._retriever.hold_vectors(user)

    def close(self) -> None:
        """Close the access statistics and the change feed (every write is already durable; closing is
        tidiness, not safety)."""
        self._access.close()
        self._retriever.close()  # stops loading vectors, lets go of the users' copies (100 MB and more each)
        if self._changes is not None:
            self._changes.close()
        if self._store_lock is not None:
            self._store_lock.release()  # another process may open the store now

    def __enter__(self) -> "MemoryBank":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def build_context(
        self,
        query: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        context_tokens: int | None = None,
        k: int = 10,
        types: Iterable[str] | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        short_term: Sequence[Turn] = (),
        working_memory: str = "",
        hits: Sequence[Hit] | None = None,
    ) -> PromptPack:
        """Messages for the model: system prompt, the memories that fit the long-term share, the current task
        (``working_memory``, verbatim) and recent turns, then the query.

        Up to ``k`` memories are retrieved (or ``hits``, already retrieved and ranked, are used as given); the
        lowest-ranked are dropped until the long-term section fits its share of ``context_tokens`` (default
        ``Settings.context_tokens``). Only memories that made it into the prompt count as accessed.
        """
        window = self.settings.context_tokens if context_tokens is None else context_tokens
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidInputError("context_tokens", f"must be a positive integer, got {window!r}")
        if hits is None:
            hits = self.search(query, k, user_id=user_id, session_id=session_id, types=types, record_access=False)
        pack = self._assembler.assemble(
            query=query,
            hits=hits,
            context_tokens=window,
            system_prompt=system_prompt,
            short_term=tuple(short_term),
            working_memory=working_memory,
        )
        self._record_access(pack.memories)
        return pack

    # ------------------------------------------------------------------------------------------ store-wide

    def users(self) -> list[str]:
        return self._store.users()

    def count(self, *, user_id: str | None = None) -> int:
        """How many memories the user has, superseded ones included (cheap: no scan)."""
        return self._store.count(self._user(user_id))

    def stats(self, *, user_id: str | None = None) -> StoreStats:
        """Counts by type and scope, for one user or (``user_id=None``) the whole store."""
        every_user = self.users()
        users = every_user if user_id is None else [self._user(user_id)]
        by_type = dict.fromkeys(MEMORY_TYPES, 0)
        by_scope: dict[str, int] = {}
        count = superseded = archived = pending = live = 0
        for user in users:
            for record in self._store.scan(user, MemoryFilter(all_sessions=True, include_superseded=True,
                                                              statuses=None)):
                count += 1
                superseded += record.superseded
                archived += record.status == "archived"
                pending += record.status == "pending"
                live += record.retrievable
                by_type[record.type] += 1
                scope = GLOBAL_SCOPE if record.scope == GLOBAL_SCOPE else "session"
                by_scope[scope] = by_scope.get(scope, 0) + 1
        stored = self._store.stored_model()
        return StoreStats(
            user_id=None if user_id is None else users[0],
            count=count,
            live=live,
            superseded=superseded,
            by_type=by_type,
            by_scope=by_scope,
            users=tuple(every_user),
            embed_model=stored[0] if stored else self.embedder.name,
            embed_dim=stored[1] if stored else 0,
            location=self.location,
            archived=archived,
            pending=pending,
        )

    def export(self, *, user_id: str | None = None) -> Iterator[MemoryRecord]:
        """Every memory (superseded ones included) of one user, or of every user when ``user_id`` is None."""
        users = self.users() if user_id is None else [self._user(user_id)]
        for user in users:
            records = self._store.scan(user, MemoryFilter(all_sessions=True, include_superseded=True, statuses=None))
            yield from self._access.apply(sorted(records, key=lambda r: (r.created_at, r.id)))

    def import_jsonl(
        self,
        lines: Iterable[str],
        *,
        user_id: str | None = None,
        overwrite: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> ImportReport:
        """Import JSON Lines (the `vecmem export` format). Bad lines are reported by number; good ones imported.

        A line without ``user_id`` goes to ``user_id`` (default user when None); ``user_id`` given here
        overrides the lines' own. A line without ``id`` gets the content-derived id, so importing the same
        file twice adds nothing the second time. Existing ids are skipped unless ``overwrite``.
        """
        forced_user = None if user_id is None else self._user(user_id)
        default_user = forced_user or self.settings.default_user
        errors: list[tuple[int, str]] = []

        def parsed() -> Iterator[MemoryRecord]:  # a generator, so a large file is never all in memory
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    yield self._parse_line(line, forced_user, default_user)
                except (ValueError, VecmemError) as exc:  # json.JSONDecodeError is a ValueError
                    errors.append((number, str(exc)))

        report = self.add_records(parsed(), overwrite=overwrite, progress=progress)
        return ImportReport(added=report.added, skipped=report.skipped, errors=tuple(errors))

    def _parse_line(self, line: str, forced_user: str | None, default_user: str) -> MemoryRecord:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise InvalidInputError("line", "must be a JSON object")
        if forced_user is not None:
            data = {**data, "user_id": forced_user}
        data.setdefault("user_id", default_user)
        if "id" not in data or data["id"] in (None, ""):
            scope = data.get("session_id") or data.get("scope") or GLOBAL_SCOPE
            content = data.get("content")
            if not isinstance(content, str) or not isinstance(scope, str) or not isinstance(data["user_id"], str):
                raise InvalidInputError("content", "must be a string")
            data = {**data, "id": content_id(data["user_id"], scope, content)}
        return MemoryRecord.from_dict(data, created_at=self._clock())

    # ------------------------------------------------------------------------------------------ hygiene

    def prune(self, *, user_id: str | None = None, dry_run: bool = False) -> list[PruneCandidate]:
        """Apply the forgetting policy (hygiene.py) to one user, or to every user when ``user_id`` is None:
        archive what it selects, or with ``dry_run`` only say what and why. Returns the candidates (none when
        no part of the policy is configured: nothing is read then)."""
        if not policy_active(self.settings):
            return []
        users = self.users() if user_id is None else [self._user(user_id)]
        chosen: list[PruneCandidate] = []
        with self._lock:
            for user in users:
                records = self._access.apply(list(self._store.scan(user, MemoryFilter(all_sessions=True))))
                picked = plan(records, self._clock(), self.settings)
                if picked and not dry_run:
                    self._rewrite_fields(user, [c.record.with_changes(status="archived") for c in picked])
                chosen.extend(picked)
        return chosen

    def _apply_caps(self, users: Iterable[str]) -> None:
        """After a write: archive past a configured cap (checked on the in-memory catalogue first, so a write
        under the cap costs nothing)."""
        if not (self.settings.cap_per_user or self.settings.cap_per_session):
            return
        for user in users:
            if self.settings.cap_per_session or self._retriever.keyword_index(user).view(
                    MemoryFilter(all_sessions=True)).count > self.settings.cap_per_user:
                self.prune(user_id=user)

    def unarchive(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Bring an archived memory back into retrieval."""
        return self._set_status(memory_id, user_id, frm="archived", to="live")

    def review_queue(self, *, user_id: str | None = None) -> list[MemoryRecord]:
        """Extracted memories waiting for approval, oldest first."""
        records = self._store.scan(self._user(user_id), MemoryFilter(all_sessions=True, statuses={"pending"}))
        return self._access.apply(sorted(records, key=lambda r: (r.created_at, r.id)))

    def approve(self, memory_id: str, *, user_id: str | None = None, content: str | None = None) -> MemoryRecord:
        """Let a pending memory into retrieval (source and confidence kept); ``content`` corrects it first."""
        with self._lock:
            if content is not None:
                self._require_status(memory_id, user_id, "pending")
                self.update(memory_id, user_id=user_id, content=content)
            return self._set_status(memory_id, user_id, frm="pending", to="live")

    def reject(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Delete a pending memory for good."""
        with self._lock:
            self._require_status(memory_id, user_id, "pending")
            return self.forget(memory_id, user_id=user_id)

    def _require_status(self, memory_id: str, user_id: str | None, status: str) -> MemoryRecord:
        record = self._get(memory_id, user_id=user_id)
        if record.status != status:
            raise InvalidInputError("id", f"{record.id} is {record.status}, not {status}")
        return record

    def _set_status(self, memory_id: str, user_id: str | None, *, frm: str, to: str) -> MemoryRecord:
        with self._lock:
            record = self._require_status(memory_id, user_id, frm)
            changed = record.with_changes(status=to)
            self._rewrite_fields(record.user_id, [changed])
        return changed

    def doctor(self, *, repair: bool = False) -> DoctorReport:
        """Examine the store (counts per user and type, unreadable rows, misplaced copies, dangling or cyclic
        supersession, keyword tokens out of step, model mismatch, stale access statistics, unfinished writes);
        with ``repair``, mend what can be mended without guessing (doctor.py says what)."""

        def rewrite(user: str, records: list[MemoryRecord]) -> None:
            self._write(records)

        with self._lock:
            report = examine(self._store, self._access, self._changes, self.embedder.name, repair=repair,
                             rewrite=rewrite)
            if repair and report.findings:
                self._retriever.clear()  # copies are rebuilt from the mended store
        return report

    def reindex(self, progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Re-embed every memory of every user with the configured model; returns memories per user."""
        dimension = self.embedder.dimension
        done: dict[str, int] = {}
        with self._lock:
            for user in self.users():
                done[user] = self._store.rebuild(
                    user,
                    self.embedder.embed_documents,
                    dimension,
                    batch_size=max(self.settings.embed_batch_size, 64),
                    progress=progress,
                )
            self._store.finish_rebuild(dimension)
            self._retriever.clear()
        return done

    # ------------------------------------------------------------------------------------------ helpers

    def _user(self, user_id: str | None) -> str:
        return validate_identifier("user_id", self.settings.default_user if user_id is None else user_id)

    @staticmethod
    def _scope(session_id: str | None) -> str:
        return GLOBAL_SCOPE if session_id is None else validate_session_id(session_id)


def _text_for_id(content: object) -> str:
    # MemoryRecord validates the content; here only a string is needed to derive the id.
    return content if isinstance(content, str) else ""


def _batches(items: Iterable[MemoryRecord], size: int) -> Iterator[list[MemoryRecord]]:
    batch: list[MemoryRecord] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _replaced_first(records: dict[str, MemoryRecord]) -> list[MemoryRecord]:
    """Order a supersession chain so each memory precedes the one that replaced it (then by age)."""
    waiting = {memory_id: 0 for memory_id in records}
    for record in records.values():
        if record.superseded_by in waiting:
            waiting[record.superseded_by] += 1
    ready = sorted((r for r in records.values() if waiting[r.id] == 0), key=lambda r: (r.created_at, r.id))
    ordered: list[MemoryRecord] = []
    while ready:
        record = ready.pop(0)
        ordered.append(record)
        successor = record.superseded_by
        if successor in waiting:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                ready.append(records[successor])
    leftover = [r for r in records.values() if r not in ordered]  # only a corrupt, cyclic chain leaves any
    return ordered + sorted(leftover, key=lambda r: (r.created_at, r.id))


def _type_set(types: Iterable[str] | str | None) -> frozenset[str] | None:
    """Accept one type name or several; MemoryFilter validates them."""
    if types is None:
        return None
    if isinstance(types, str):
        return frozenset([types])
    if isinstance(types, Mapping) or not isinstance(types, Iterable):
        raise InvalidInputError("types", f"must be a type name or a list of them, got {type(types).__name__}")
    try:
        return frozenset(types)
    except TypeError:  # an unhashable element, a list inside the list
        raise InvalidInputError("types", f"must be a type name or a list of them, got {types!r}") from None
