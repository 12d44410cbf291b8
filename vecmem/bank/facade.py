"""MemoryBank: the one facade, and the one place where the concrete parts are wired together.

    bank = MemoryBank()                                    # settings from the environment
    bank.add("The user prefers concise code", memory_type="preference", importance=9)
    bank.search("write me a sleep function", k=3)          # -> [Hit(score, similarity, recency, importance)]
    bank.build_context("write me a sleep function").messages

Every part can be replaced through the constructor (an embedder, a token counter, a clock, the store itself),
which is how the tests run without the real model. The bank validates arguments, holds the write lock and wires
the parts; what each operation does lives beside it in vecmem/bank/ (a module a concern: the write path, edits,
supersession chains, listing, erasure, review, intake) and in vecmem/maintenance/ (the doctor, forgetting,
import and export, statistics), written against ``MemoryStore``. ``add_messages`` runs the memory agent's write
side and ``add`` types and resolves a statement with the agent's rules: the agent is a layer above and cannot be
imported here, so its parts are handed to the bank from above (vecmem/assembly.py, the ``MemoryBank`` the package
exports) or through the constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime

from vecmem.bank import chains, edits, erase, intake, learning, listing, opening, resolving, review
from vecmem.bank.learning import AddMessagesResult, MessageLearner
from vecmem.bank.listing import MemoryPage
from vecmem.bank.resolving import AddResolver, AddResult
from vecmem.bank.writes import WritePath
from vecmem.config import Settings
from vecmem.errors import ConfigError, NotFoundError
from vecmem.maintenance import hygiene, recovery, transfer
from vecmem.maintenance.doctor import DoctorReport, examine
from vecmem.maintenance.hygiene import PruneCandidate
from vecmem.maintenance.stats import store_stats
from vecmem.maintenance.transfer import content_id
from vecmem.models import Hit, ImportReport, MemoryFilter, MemoryRecord, PromptPack, Provenance, StoreStats, Turn
from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT, ContextAssembler, TiktokenCounter, TokenCounter
from vecmem.retrieval.embedding.embedders import Embedder, canonical_model_name, default_model, embedder_for
from vecmem.retrieval.query.parsed import MAX_QUERY_CHARS, searchable
from vecmem.retrieval.query.tokenize import warm_up as warm_tokenizer
from vecmem.retrieval.retriever import Retriever
from vecmem.storage.base import MemoryStore
from vecmem.storage.state.changes import ChangeFeed
from vecmem.validation import (
    GLOBAL_SCOPE,
    check_query,
    check_type_names,
    require_positive_int,
    validate_identifier,
    validate_new_id,
    validate_session_id,
)

__all__ = ["MemoryBank", "content_id"]



class MemoryBank:
    """Long-term memory for an LLM agent: add, search, build a budgeted context, and manage the store.

    All methods take ``user_id`` (default: ``Settings.default_user``); users never see each other's memories.
    A ``session_id`` makes a memory visible to that session only; global memories are visible everywhere.
    Threads may share a bank, and processes a store: each write holds its user's write lock in the shared
    state (storage/state/database.py) from the reads it checks to the store's write."""

    def __init__(self, settings: Settings | None = None, *, embedder: Embedder | None = None,
                 token_counter: TokenCounter | None = None, clock: Callable[[], datetime] | None = None,
                 verify_model: bool = True, store: MemoryStore | None = None,
                 learner: MessageLearner | None = None, resolver: AddResolver | None = None,
                 recover: bool = True) -> None:
        """``store``: a store the caller opened (the in-memory one of the tests), used as is and closed by ``close``
        (default: Chroma, opening.py). ``learner``: what ``add_messages`` runs, ``resolver``: what types and resolves a direct
        ``add`` (default: ``_default_learner`` and ``_default_resolver``, which the assembled bank, vecmem/assembly.py,
        gives the memory agent's). ``recover=False``: what killed writers left is left to the next bank that opens
        the store (a bank that only reads a saved replica: vecmem/assembly.py, ``reading_saved``)."""
        self._learner = learner
        self._resolver = resolver
        self.settings = settings if settings is not None else Settings.from_env()
        # a store that records its model keeps it unless one is configured (a store built before the default
        # changed keeps working); ``verify_model=False`` (reindex) opens it with the model it is moving to
        adopt_stored = embedder is None and store is None and self.settings.embed_model is None and verify_model
        model_name = embedder.name if embedder is not None else canonical_model_name(
            self.settings.embed_model or default_model())
        self._assembler = ContextAssembler(token_counter or TiktokenCounter(self.settings.tokenizer), self.settings.shares,
                                           self.settings.relevance_floor)
        self._clock = clock or (lambda: datetime.now(UTC))
        # Each part is registered to be released as soon as it is taken: a failure half-way (a model mismatch,
        # an unreadable access.sqlite3) releases what was taken, newest first, and leaves the lock free.
        with ExitStack() as acquired:
            self._store = store if store is not None else opening.open_store(self.settings, model_name, acquired,
                                                                             adopt_stored_model=adopt_stored)
            self.embedder: Embedder = embedder or embedder_for(self.settings, self._store.model_name)
            if adopt_stored and self._store.model_name != model_name:
                opening.say_how_to_move(self._store.model_name, model_name)
            self._changes: ChangeFeed | None = self._store.changes
            opening.mend_with(self._store, self.embedder.name, self.embedder.embed_documents)
            if verify_model:
                self._store.check_model()
            self._access, self._locks = opening.open_state(self.settings, acquired)
            self._retriever = Retriever(self._store, self.embedder, self.settings, self._access)
            acquired.callback(self._retriever.close)  # stops its vector loaders, drops the users' copies
            self._writes = WritePath(self._store, self._retriever, self._access, self.embedder.embed_documents)
            # what a killed writer left is settled before this bank serves anything (recovery.py)
            if recover:
                recovery.recover(self._store, self._access, self._locks,
                                 lambda _user, records: self._writes.write(records), model=self.embedder.name)
            self._release = acquired.pop_all()  # close() releases the same parts in the same order
        if store is not None:  # the caller's until the bank is built; from now on close() closes it, last
            self._release = opening.closing_last(self._release, store)

    @contextmanager
    def _writing(self, users: Iterable[str]) -> Iterator[None]:
        """The shared write locks of ``users``: what every write holds. Nothing process-wide: threads writing
        other users run side by side (their stores meet in one Chroma write, bank/writes.py), and a
        thread waits only for writes of its users, whichever process or thread makes them."""
        with self._locks.holding(users):
            yield

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def embed_model(self) -> str:
        return self.embedder.name

    @property
    def token_counter(self) -> TokenCounter:  # counts as the budgeter counts (tiktoken, retrieval/budget.py)
        return self._assembler.counter

    # ------------------------------------------------------------------------------------------ writing

    def add(self, content: str, *, user_id: str | None = None, memory_type: str | None = None,
            importance: float = 0.5, tags: Sequence[str] = (), session_id: str | None = None, source: str = "manual",
            confidence: float = 1.0, memory_id: str | None = None, created_at: datetime | None = None,
            context: str = "", status: str = "live", provenance: Provenance | None = None,
            resolve: bool = True) -> MemoryRecord:
        """Store one statement and return the memory as stored: the new one, or the stored one that already said
        it. ``remember`` takes the same arguments and also says what it did (``AddResult``: added, replaced what,
        or already remembered, and the inferred type).

        Why two methods: ``add`` has returned the stored ``MemoryRecord`` from the start and every caller (the
        agent, the adapters, scripts, applications) reads it as one; a decision is not a property of a memory, so
        it is no field of the record, and a union or tuple return would break each of those callers. ``remember``
        is the same call with the full answer; ``add`` is ``remember(...).record``."""
        return self.remember(content, user_id=user_id, memory_type=memory_type, importance=importance, tags=tags,
                             session_id=session_id, source=source, confidence=confidence, memory_id=memory_id,
                             created_at=created_at, context=context, status=status, provenance=provenance,
                             resolve=resolve).record

    def remember(self, content: str, *, user_id: str | None = None, memory_type: str | None = None,
                 importance: float = 0.5, tags: Sequence[str] = (), session_id: str | None = None,
                 source: str = "manual", confidence: float = 1.0, memory_id: str | None = None,
                 created_at: datetime | None = None, context: str = "", status: str = "live",
                 provenance: Provenance | None = None, resolve: bool = True) -> AddResult:
        """Store one statement as the memory agent would, and say what happened.

        ``memory_type`` None: the agent's rules type it (fact, preference, instruction or conclusion: "I prefer
        concise code" is a preference, "Always answer in Chinese" an instruction; a fact when no cue says
        otherwise), and ``type_inferred`` says so. Then, unless ``resolve=False``, the agent's supersession
        decides (agent/writing/decide.py, through the registered ``AddResolver``: resolving.py): the same claim
        again is no new memory (``unchanged``, the stored one returned); a statement that contradicts a memory (the
        same holder and attribute with another value of a one-value attribute, a negation, a stated change:
        "我住在上海" after "我住在杭州", "I'm not vegetarian anymore") supersedes it, within scope (a session's memory
        only those of its session) -- kept for ``history`` and ``restore``, with ``superseded_by`` set
        (``replaced``); a memory of several facts of which it revises one keeps the others (``revised``). Closeness
        alone never replaces anything, nor makes a statement a duplicate.
        Restating a superseded memory makes it current again (the one that had replaced it is replaced).
        ``resolve=False`` stores it as given (bulk loads, key-value stores, what the agent already decided).

        ``context`` is text the memory should also be found by (keyword search only; never shown to the model),
        such as the conversation turns around it; ``provenance``, where it came from (the conversation and
        messages it was learnt from: the agent's). ``status="pending"`` puts it in the review queue instead of
        retrieval (hygiene.py). The same statement (user, scope, normalised text) added again returns the stored
        memory unchanged, superseded or not (with ``resolve=False``), even once an edit holds its derived id
        (intake.unused_id); ``memory_id`` reused for other content is refused, as is one outside
        ``validation.NEW_ID_RULE``. A model's text (``source="extracted"``, any path) is screened: planted
        instructions and doubtful memories (intake.py); a pending memory replaces nothing until approved."""
        user, scope = self._user(user_id), GLOBAL_SCOPE if session_id is None else validate_session_id(session_id)
        record = MemoryRecord(
            id=validate_new_id(memory_id) if memory_id is not None
            else content_id(user, scope, transfer.text_for_id(content)),
            type="fact" if memory_type is None else memory_type,  # type: ignore[arg-type]  # checked by MemoryRecord
            source=source, status=status,  # type: ignore[arg-type]
            tags=tags,  # type: ignore[arg-type]  # MemoryRecord refuses a bare string instead of splitting it
            content=content, importance=importance, scope=scope, created_at=created_at or self._clock(),
            confidence=confidence, user_id=user, context=context, provenance=provenance)
        guess = None
        if memory_type is None:  # typed by the agent's rules, on the text as validated
            guess = self._resolving().infer_type(record.content)
            record = record.with_changes(type=guess.type)
        record = intake.screened(record, self.settings)
        explicit = memory_id is not None
        with self._writing([user]):
            if resolve:
                resolver = self._resolving()
                plan = resolver.decide(record, resolving.gather(self, record, resolver))
                if explicit and plan.action == "unchanged":  # the caller's id is kept: it keys its own records
                    plan = resolving.Plan("add", f"stored under the id given ({plan.reason})")
                result = resolving.carry_out(self, record, plan, lambda given: self._stored(given, explicit))
            else:
                stored, new = self._stored(record, explicit)
                result = (AddResult("added", stored, reason="stored as given") if new else
                          AddResult("unchanged", stored, reason=f"already stored as {stored.id}"))
            if result.action != "unchanged":
                self._apply_caps([user])
        if guess is None:
            return result
        return replace(result, type_inferred=guess.type, type_reason=guess.reason)

    def _stored(self, record: MemoryRecord, explicit_id: bool) -> tuple[MemoryRecord, bool]:
        """Store ``record`` (under the caller's write lock): (it, True), or (the memory already stored under its id
        that says the same, False). An id the caller did not choose is the first free one for this statement
        (an edited memory keeps the id its first text gave it: intake.unused_id)."""
        if explicit_id:
            stored = self._writes.add(record)
        else:
            free_id, held = intake.unused_id(self._store, record)
            record = record.with_changes(id=free_id)
            stored = self._writes.add(record, stored=[] if held is None else [held])
        return (record, True) if stored is None else (stored, False)

    def _resolving(self) -> AddResolver:
        if self._resolver is None:
            self._resolver = self._default_resolver()
        return self._resolver

    def _default_resolver(self) -> AddResolver:
        """What resolves an add when none was given: none here; the assembled bank (vecmem/assembly.py, what
        ``from vecmem import MemoryBank`` gives) has the memory agent's."""
        raise ConfigError("this bank was built without an add resolver: pass MemoryBank(resolver=...), add with "
                          "resolve=False, or use vecmem.MemoryBank, which has the memory agent's")

    def _default_learner(self) -> MessageLearner:
        """What ``add_messages`` runs when no learner was given: none here; the assembled bank has the agent's."""
        raise ConfigError("this bank was built without a message learner: pass MemoryBank(learner=...), or use "
                          "vecmem.MemoryBank, which has the memory agent's")

    def add_messages(self, messages: Sequence[Mapping[str, object] | Turn] | str, *, user_id: str | None = None,
                     session_id: str | None = None) -> AddMessagesResult:
        """Learn from chat messages (dicts with ``role`` and ``content``, ``Turn``s, or one string: a user message)
        as the chat's agent learns from a turn: each user message through the write gate, extraction and
        supersession, assistant messages as context only; rules, or the configured model (agent/writing/learn.py,
        learning.py); each memory records its provenance (the session, the message's ``id`` or position)."""
        turns = learning.chat_messages(messages)
        user, session = self._user(user_id), None if session_id is None else validate_session_id(session_id)
        if self._learner is None:
            self._learner = self._default_learner()
        return self._learner.learn(self, turns, user_id=user, session_id=session)

    def add_records(self, records: Iterable[MemoryRecord], *, overwrite: bool = False,
                    progress: Callable[[int], None] | None = None) -> ImportReport:
        """Store many validated records in batches of WRITE_BATCH (transfer.py), embedding the next batch
        while the current one is written (embedding and Chroma's writes overlap on two cores). A record whose id is already stored, or came earlier in ``records``, is skipped (counted in
        ``skipped``) unless ``overwrite``; an id outside ``validation.NEW_ID_RULE`` is refused. ``progress`` is
        called with the number of records handled so far.
        """
        report, users = transfer.write_batched(records, self._writes, self._writing, overwrite=overwrite,
                                               progress=progress)
        self._apply_caps(users)
        return report

    def update(self, memory_id: str, *, user_id: str | None = None, content: str | None = None,
               memory_type: str | None = None, importance: float | None = None, tags: Sequence[str] | None = None,
               confidence: float | None = None, context: str | None = None, scope: str | None = None,
               keep_history: bool = True, expected_version: int | None = None) -> MemoryRecord:
        """Change fields of a memory, which keeps its id (new words are re-embedded and re-indexed); what it said
        before stays in ``history`` as a revision ``<id>@v<n>`` dated by this edit (edits.py), unless
        ``keep_history=False`` (an adjustment that is not an edit, such as the templates' decay). ``scope``
        ("global" or a session id) moves it, unless a supersession link forbids (chains.moving). The fields given
        are applied to the memory as stored under the write lock, so concurrent changes of different fields
        merge; ``expected_version`` (the version the change was built on) refuses a stale one (edits.at_version)."""
        given = {"content": content, "type": memory_type, "importance": importance, "tags": tags,
                 "confidence": confidence, "context": context, "scope": scope}
        user = self._user(user_id)
        with self._writing([user]):
            changes = {name: value for name, value in given.items() if value is not None}
            stored = edits.at_version(self._get(memory_id, user_id=user), expected_version)
            return edits.edit(self._writes, stored, changes, self._clock(), keep_history=keep_history)

    def supersede(self, old_id: str, new_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Mark ``old_id`` as replaced by ``new_id``: kept for history, never returned by search again. Only a
        memory seen wherever the old one is may replace it (global, or of the old one's session: chains.py)."""
        user = self._user(user_id)
        with self._writing([user]):  # the chain is read and checked for a cycle under the lock, then written
            old, newer = self._get(old_id, user_id=user), self._get(new_id, user_id=user)
            updated = chains.superseding(old, newer, chains.reader(self._store, old.user_id))
            return self._writes.rewrite_fields(updated.user_id, [updated])[0]

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryRecord]:
        """Every memory linked to this one by supersession, each before the memory that replaced it
        (the live one, with no superseded_by, comes last); its earlier versions (revisions kept by edits) too."""
        return self._access.apply(chains.history(self._get(memory_id, user_id=user_id), self._store))

    def restore(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Undo a supersession: this memory is live again, the live one that replaced it superseded by it; returns
        it. A revision (kept by an edit) reverts its memory to what it says instead, and that memory is returned."""
        user = self._user(user_id)
        with self._writing([user]):
            return edits.restore(self._writes, self._get(memory_id, user_id=user), self._clock())

    def forget(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Delete a memory for good, its earlier versions with it; returns what was deleted. What it had replaced
        is replaced by its own successor instead, or is live again (chains.unlinking); a crash half-way leaves it
        stored, and forgetting it again finishes (edits.forget)."""
        user = self._user(user_id)
        with self._writing([user]):
            edits.forget(self._writes, record := self._get(memory_id, user_id=user))
        return record

    def forget_all(self, user_id: str, *, session_id: str | None = None) -> int:
        """Delete every memory of ``user_id`` (named: never the configured user by default), or of its session
        ``session_id``, in any state, with revisions, access statistics and copies (erase.py); returns how many."""
        user = validate_identifier("user_id", user_id)
        session = None if session_id is None else validate_session_id(session_id)
        with self._writing([user]):
            return erase.erase(self._writes, user, session)

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

    def list_memories(self, *, user_id: str | None = None, session_id: str | None = None,
                      types: Iterable[str] | None = None, include_superseded: bool = False, limit: int | None = None,
                      statuses: Iterable[str] = ("live",)) -> list[MemoryRecord]:
        """Memories of a user, newest first. With ``session_id``: what that session sees (global + its own).
        ``statuses``: live (the default), archived (by the forgetting policy), pending (the review queue)."""
        return list(self.page_memories(user_id=user_id, session_id=session_id, types=types, limit=limit,
                                       include_superseded=include_superseded, statuses=statuses).memories)

    def page_memories(self, *, user_id: str | None = None, session_id: str | None = None,
                      types: Iterable[str] | None = None, include_superseded: bool = False,
                      statuses: Iterable[str] = ("live",), sort: str = listing.DEFAULT_SORT, offset: int = 0,
                      limit: int | None = None) -> MemoryPage:
        """``list_memories`` a page at a time: sorted by a field of listing.SORTS (newest first by default), from
        ``offset`` on, at most ``limit``, with how many memories the listing holds in all (listing.py)."""
        return listing.page(self._listed, self._access, self._user(user_id), listing.listed(
            session_id, types, include_superseded, statuses), sort=sort, offset=offset, limit=limit)

    def _listed(self, user: str, memory_filter: MemoryFilter) -> list[MemoryRecord]:
        """What a listing holds: from the retriever's replica where a change feed keeps it exact (no scan of the
        store, and a saved replica lists without Chroma), else from a scan of the store."""
        if self._store.changes is None:
            return list(self._store.scan(user, memory_filter))
        return self._retriever.visible(user, memory_filter)

    def search(self, query: str, k: int = 5, *, user_id: str | None = None, session_id: str | None = None,
               types: Iterable[str] | None = None, record_access: bool = True) -> list[Hit]:
        """The ``k`` best memories for ``query`` that this user and session may see, best first: global ones and
        those of ``session_id``, never superseded ones; for an empty query the most important. Returned memories
        get their access count and last-accessed time updated (``record_access=False`` to look without touching);
        the hits show the memory as it was ranked. A query is at most MAX_QUERY_CHARS long (query/parsed.py)."""
        check_query(query, max_chars=MAX_QUERY_CHARS)
        require_positive_int("k", k)
        user, memory_filter = self._user(user_id), MemoryFilter(session_id=session_id, types=check_type_names(types))
        hits = self._retriever.rank(query, k, user, memory_filter, self._clock())
        if record_access:
            self._record_access(hits)
        return hits

    def _record_access(self, hits: Sequence[Hit]) -> None:
        if hits:
            self._access.record([hit.record for hit in hits], self._clock())

    def warm_up(self, *, user_id: str | None = None) -> None:
        """Load what the first search would otherwise wait for: the embedding model (seconds) and relevance cohort,
        jieba's dictionary (a second), the user's keyword index and records (from the store); returns once the
        user's vectors are held in memory too (held.py). Safe in a background thread (the chat runs it at start)."""
        self._retriever.warm_up()
        warm_tokenizer()  # else loaded by the first Chinese text: never by a one-off command that has none
        self._retriever.hold_vectors(self._user(user_id))

    def close(self) -> None:
        """Let go of what the bank holds, newest first: the retriever (vector loaders, users' copies, a big user's
        hundreds of megabytes), access statistics, store, change feed, store lock (another process may open the
        store then); each even when an earlier one failed. Writes are durable already: this is tidiness."""
        self._release.close()

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def build_context(self, query: str, *, user_id: str | None = None, session_id: str | None = None,
                      context_tokens: int | None = None, k: int = 10, types: Iterable[str] | None = None,
                      system_prompt: str = DEFAULT_SYSTEM_PROMPT, short_term: Sequence[Turn] = (),
                      working_memory: str = "", hits: Sequence[Hit] | None = None) -> PromptPack:
        """Messages for the model: system prompt, the memories that fit the long-term share, the current task
        (``working_memory``, verbatim) and recent turns, then the query. Up to ``k`` memories are retrieved (or
        ``hits``, ranked, used as given); those under the relevance floor are left out, then the lowest-ranked
        until the section fits its share of ``context_tokens`` (budget.py). Only those in the prompt count as used.
        The query is a message (up to learning.MAX_MESSAGE_CHARS): the memories are retrieved for its last
        MAX_QUERY_CHARS (``searchable``), the prompt holds it whole."""
        check_query(query, max_chars=learning.MAX_MESSAGE_CHARS)
        window = require_positive_int("context_tokens", self.settings.context_tokens if context_tokens is None
                                      else context_tokens)
        if hits is None:
            hits = self.search(searchable(query), k, user_id=user_id, session_id=session_id, types=types,
                               record_access=False)
        pack = self._assembler.assemble(query=query, hits=hits, context_tokens=window, system_prompt=system_prompt,
                                        short_term=tuple(short_term), working_memory=working_memory)
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
        return store_stats(self._store, None if user_id is None else self._user(user_id), self.embedder.name)

    def export(self, *, user_id: str | None = None) -> Iterator[MemoryRecord]:
        """Every memory (superseded ones included) of one user, or of every user when ``user_id`` is None."""
        users = self.users() if user_id is None else [self._user(user_id)]
        yield from transfer.export(self._store, self._access, users)

    def import_jsonl(self, lines: Iterable[str], *, user_id: str | None = None, overwrite: bool = False,
                     progress: Callable[[int], None] | None = None) -> ImportReport:
        """Import JSON Lines (the `vecmem export` format). Bad lines are reported by number; good ones imported.
        A line without ``user_id`` goes to ``user_id`` (default user when None); ``user_id`` given here overrides
        the lines' own. A line without ``id`` gets the content-derived id, so importing the same file twice adds
        nothing the second time. Existing ids are skipped unless ``overwrite``."""
        forced = None if user_id is None else self._user(user_id)
        return transfer.import_lines(lines, forced, forced or self.settings.default_user, self._clock,
                                     lambda records: self.add_records(records, overwrite=overwrite, progress=progress))

    # ------------------------------------------------------------------------------------------ hygiene

    def prune(self, *, user_id: str | None = None, dry_run: bool = False) -> list[PruneCandidate]:
        """Apply the forgetting policy (hygiene.py) to one user, or to every user when ``user_id`` is None:
        archive what it selects, or with ``dry_run`` only say what and why. Returns the candidates (none when
        no part of the policy is configured: nothing is read then)."""
        if not hygiene.active(self.settings):
            return []
        users = self.users() if user_id is None else [self._user(user_id)]
        return hygiene.archive_by_policy(self._store, self._access, users, self._clock, self.settings,
                                         self._writes.rewrite_fields, self._writing, dry_run=dry_run)

    def _apply_caps(self, users: Iterable[str]) -> None:
        """After a write: archive past a configured cap (counted on the in-memory catalogue: cheap under it)."""
        live = MemoryFilter(all_sessions=True)
        for user in hygiene.over_cap(self.settings, users, lambda u: self._retriever.keyword_index(u).view(live).count):
            self.prune(user_id=user)

    def unarchive(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Bring an archived memory back into retrieval."""
        user = self._user(user_id)
        with self._writing([user]):
            return review.move(self._writes, self._get(memory_id, user_id=user), frm="archived", to="live")

    def review_queue(self, *, user_id: str | None = None) -> list[MemoryRecord]:
        """Extracted memories waiting for approval, oldest first."""
        return review.pending(self._store, self._access, self._user(user_id))

    def approve(self, memory_id: str, *, user_id: str | None = None, content: str | None = None) -> MemoryRecord:
        """Let a pending memory into retrieval (source and confidence kept); ``content`` corrects it first."""
        user = self._user(user_id)
        with self._writing([user]):
            return review.approve(self._writes, self._get(memory_id, user_id=user), content, self._clock())

    def reject(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        """Delete a pending memory for good."""
        user = self._user(user_id)
        with self._writing([user]):
            return review.reject(self._writes, self._get(memory_id, user_id=user))

    def doctor(self, *, repair: bool = False) -> DoctorReport:
        """Examine the store (counts per user and type, unreadable rows, misplaced copies, dangling or cyclic
        supersession, keyword tokens out of step, model mismatch, stale access statistics, unfinished writes);
        with ``repair``, mend what can be mended without guessing (doctor.py says what)."""
        with self._writing(self.users()) if repair else nullcontext():  # a look: no lock
            report = examine(self._store, self._access, self._changes, self.embedder.name, repair=repair,
                             rewrite=lambda user, records: self._writes.write(records))
            if repair and report.findings:
                self._retriever.clear()  # copies are rebuilt from the mended store
        return report

    def reindex(self, progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Re-embed every memory of every user with the configured model; returns memories per user."""
        dimension, batch_size = self.embedder.dimension, max(self.settings.embed_batch_size, 64)
        with self._writing(users := self.users()):
            return self._writes.reembed_all(users, dimension, batch_size, progress)

    def _user(self, user_id: str | None) -> str:
        return validate_identifier("user_id", self.settings.default_user if user_id is None else user_id)
