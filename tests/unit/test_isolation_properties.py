"""Isolation, property-tested: random sequences of add / search / update / supersede / forget / restore, by
several users in several sessions, through two banks on one store (two processes in real life), checked after
every step against a plain reference model.

What must hold, always:
* a user never sees another user's memory (the same ids are used by every user on purpose);
* a session never sees another session's session-scoped memory;
* a forgotten memory is never returned, listed, exported or found by id;
* a superseded memory is never returned by retrieval;
* and nothing is lost: a search for enough hits returns every memory the filter lets through, listing and
  export return exactly the model's memories.

After every step, every user is searched, listed and exported in every session through one of the banks.
``VECMEM_PROPERTY_EXAMPLES`` runs more sequences (default 30 of up to 30 steps).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conftest import Clock, FakeEmbedder
from tests.tally import count
from vecmem import MemoryBank, Settings
from vecmem.errors import ConflictError, InvalidInputError, NotFoundError
from vecmem.storage.memory import InMemoryStore
from vecmem.storage.state.changes import ChangeFeed

USERS = ("alice", "bob", "carol")
SESSIONS = ("s1", "s2")
IDS = tuple(f"m{i}" for i in range(8))  # shared by every user: a leak across users would show as a wrong id
WORDS = ("tea", "coffee", "python", "rust", "otter", "heron", "budget", "editor")
EXAMPLES = int(os.environ.get("VECMEM_PROPERTY_EXAMPLES", "30"))


@dataclass
class Expected:
    content: str
    scope: str
    superseded_by: str | None = None


def _visible(memory: Expected, session: str | None) -> bool:
    return memory.scope == "global" or memory.scope == session


def _replaces(newer: Expected, older: Expected) -> bool:
    """A memory may replace another only when it is seen wherever the other is (chains.seen_wherever)."""
    return newer.scope in ("global", older.scope)


class IsolationMachine(RuleBasedStateMachine):
    chroma_url: str | None = None  # set by the server variant below
    in_memory = False  # set by the in-memory variant: the banks share an InMemoryStore, each with its feed
    bank_count = 2

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="vecmem-props-"))
        store = Settings(home=self.folder / "home", index_check_seconds=3600)  # the change feed alone
        if self.chroma_url is not None:
            store = store.with_changes(chroma_url=self.chroma_url, chroma_database=f"props-{uuid.uuid4().hex[:16]}")
        embedder, clock = FakeEmbedder(dimension=32), Clock()
        shared = InMemoryStore(model_name=embedder.name) if self.in_memory else None
        self.banks = [
            MemoryBank(store, embedder=embedder, clock=clock,
                       store=None if shared is None else shared.sharing(changes=ChangeFeed(store.home / "changes.sqlite3")))
            for _ in range(self.bank_count)
        ]
        self.model: dict[str, dict[str, Expected]] = {user: {} for user in USERS}
        self.clock = clock

    def teardown(self) -> None:
        for bank in self.banks:
            bank.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        count("isolation: operation sequences run")

    @initialize()
    def first_bank_reads_everyone(self) -> None:
        for user in USERS:  # both banks hold a copy of every user from the start, to be kept in step
            for bank in self.banks:
                bank.search("tea", 1, user_id=user, record_access=False)

    def _bank(self, which: int) -> MemoryBank:
        count("isolation: operations")
        self.clock.advance(minutes=1)
        return self.banks[which % len(self.banks)]

    # ------------------------------------------------------------------------------------------ writes

    @rule(which=st.integers(0, 1), user=st.sampled_from(USERS), memory_id=st.sampled_from(IDS),
          session=st.none() | st.sampled_from(SESSIONS), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
    def add(self, which, user, memory_id, session, words) -> None:
        content = " ".join(words) + f" by {user}"
        bank = self._bank(which)
        if memory_id in self.model[user]:
            return  # adding an existing id is an update, covered below
        bank.add(content, user_id=user, memory_id=memory_id, session_id=session)
        self.model[user][memory_id] = Expected(content, session or "global")

    @rule(which=st.integers(0, 1), user=st.sampled_from(USERS), memory_id=st.sampled_from(IDS),
          words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
    def update(self, which, user, memory_id, words) -> None:
        content = " ".join(words) + f" edited by {user}"
        bank = self._bank(which)
        if memory_id not in self.model[user]:
            try:
                bank.update(memory_id, user_id=user, content=content)
            except NotFoundError:
                return
            raise AssertionError(f"updated {memory_id}, which {user} does not have")
        bank.update(memory_id, user_id=user, content=content)
        memories, current = self.model[user], self.model[user][memory_id]
        if content != current.content:  # the edit keeps the id; what it said before is its next revision
            number = 1 + sum(1 for i, m in memories.items() if m.superseded_by == memory_id and "@v" in i)
            memories[f"{memory_id}@v{number}"] = Expected(current.content, current.scope, superseded_by=memory_id)
        current.content = content

    @rule(which=st.integers(0, 1), user=st.sampled_from(USERS), old=st.sampled_from(IDS), new=st.sampled_from(IDS))
    def supersede(self, which, user, old, new) -> None:
        bank, memories = self._bank(which), self.model[user]
        if (old not in memories or new not in memories or old == new or old in self._chain(user, new)
                or not _replaces(memories[new], memories[old])):
            try:
                bank.supersede(old, new, user_id=user)
            except (NotFoundError, InvalidInputError, ConflictError):
                return
            raise AssertionError(f"{user}: superseding {old} by {new} should have been refused")
        bank.supersede(old, new, user_id=user)
        memories[old].superseded_by = new

    @rule(which=st.integers(0, 1), user=st.sampled_from(USERS), memory_id=st.sampled_from(IDS))
    def restore(self, which, user, memory_id) -> None:
        bank, memories = self._bank(which), self.model[user]
        if memory_id not in memories or memories[memory_id].superseded_by is None:
            try:
                bank.restore(memory_id, user_id=user)
            except (NotFoundError, InvalidInputError, ConflictError):
                return
            raise AssertionError(f"{user}: restoring {memory_id} should have been refused")
        bank.restore(memory_id, user_id=user)
        chain = self._chain(user, memory_id)
        head = memories.get(chain[-1]) if chain else None
        memories[memory_id].superseded_by = None
        if (head is not None and head.superseded_by is None and chain[-1] != memory_id
                and _replaces(memories[memory_id], head)):  # a session's memory leaves a global head live
            head.superseded_by = memory_id

    @rule(which=st.integers(0, 1), user=st.sampled_from(USERS), memory_id=st.sampled_from(IDS))
    def forget(self, which, user, memory_id) -> None:
        bank = self._bank(which)
        if memory_id not in self.model[user]:
            try:
                bank.forget(memory_id, user_id=user)
            except NotFoundError:
                return
            raise AssertionError(f"forgot {memory_id}, which {user} does not have")
        bank.forget(memory_id, user_id=user)
        memories = self.model[user]
        forgotten = memories.pop(memory_id)
        for revision in [i for i, m in memories.items() if m.superseded_by == memory_id and "@v" in i]:
            del memories[revision]  # its earlier versions are forgotten with it
        heir_id = forgotten.superseded_by
        for replaced_id, replaced in memories.items():  # what it replaced goes to its successor, or is live again
            if replaced.superseded_by == memory_id:
                heir = memories.get(heir_id) if heir_id is not None else None
                keeps = (heir is not None and heir_id != replaced_id and _replaces(heir, replaced)
                         and replaced_id not in self._chain(user, heir_id))
                replaced.superseded_by = heir_id if keeps else None

    def _chain(self, user: str, memory_id: str) -> list[str]:
        chain, current = [], self.model[user].get(memory_id)
        while current is not None and current.superseded_by and current.superseded_by not in chain:
            chain.append(current.superseded_by)
            current = self.model[user].get(current.superseded_by)
        return chain

    # ------------------------------------------------------------------------------------------ reads

    @precondition(lambda self: any(self.model.values()))
    @rule(which=st.integers(0, 1), user=st.sampled_from(USERS), session=st.none() | st.sampled_from(SESSIONS),
          words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def search(self, which, user, session, words) -> None:
        self._check_search(self._bank(which), user, session, words)

    def _check_search(self, bank, user, session, words) -> None:
        expected = {i for i, m in self.model[user].items() if _visible(m, session) and m.superseded_by is None}
        hits = bank.search(" ".join(words), len(IDS), user_id=user, session_id=session, record_access=False)
        found = {hit.id for hit in hits}
        leaked = found - expected
        count("isolation: searches checked")
        count("isolation: memories leaked", len(leaked))
        assert not leaked, f"{user} in {session} got {leaked}; may see {expected}"
        assert found == expected, f"{user} in {session} lost {expected - found}"
        for hit in hits:
            assert hit.record.user_id == user and hit.content == self.model[user][hit.id].content

    @invariant()
    def listing_export_and_get_agree_with_the_model(self) -> None:
        bank = self.banks[len(self.model["alice"]) % len(self.banks)]
        for user in USERS:
            memories = self.model[user]
            exported = {r.id: r for r in bank.export(user_id=user)}
            assert set(exported) == set(memories), user
            for memory_id, record in exported.items():
                expected = memories[memory_id]
                assert (record.user_id, record.content, record.scope, record.superseded_by) == (
                    user, expected.content, expected.scope, expected.superseded_by)
            for session in (None, *SESSIONS):
                self._check_search(bank, user, session, ["tea", "heron"])
                listed = {r.id for r in bank.list_memories(user_id=user, session_id=session)}
                wanted = {i for i, m in memories.items() if m.superseded_by is None
                          and (session is None or _visible(m, session))}
                assert listed == wanted, (user, session)


RUN = settings(
    max_examples=EXAMPLES, stateful_step_count=30, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
IsolationMachine.TestCase.settings = RUN
TestIsolation = pytest.mark.chroma(IsolationMachine.TestCase)


class InMemoryIsolation(IsolationMachine):
    """The same sequences through two banks sharing one in-memory store (the fast lane's run of them)."""

    in_memory = True


InMemoryIsolation.TestCase.settings = RUN
TestIsolationInMemory = InMemoryIsolation.TestCase


@pytest.mark.chroma
def test_isolation_on_a_chroma_server(chroma_server):
    """The same sequences on a real `chroma run` server, through one client: a server has no change feed, so
    a second client's copy would learn of supersessions only at its next count check (see the README)."""

    class OnAServer(IsolationMachine):
        chroma_url = chroma_server
        bank_count = 1

    run_state_machine_as_test(OnAServer, settings=settings(RUN, max_examples=max(EXAMPLES // 2, 1)))
