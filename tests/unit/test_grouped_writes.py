"""Writes of several threads of one process: side by side for different users, one write to the store for those
that wait at the same moment (storage/grouped.py), each writer told its own write's outcome; and the model-free
embedder a deployment names as ``hashed:<dimension>`` (retrieval/embedding/hashed.py)."""

import threading
import time

import numpy as np
import pytest

from vecmem import MemoryRecord, Settings
from vecmem.errors import ConfigError
from vecmem.retrieval.embedding.embedders import embedder_for
from vecmem.retrieval.embedding.hashed import HashedEmbedder
from vecmem.storage.base import UserWrite
from vecmem.storage.grouped import GroupCommit


def write_of(user: str, memory_id: str = "m1") -> UserWrite:
    return UserWrite(user, [MemoryRecord(id=memory_id, content=f"{user} note", user_id=user)],
                     np.ones((1, 4), dtype=np.float32), [["note"]])


class Store:
    """Records each upsert_many; the first waits for ``release``; a write of user ``bad`` fails."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bool]] = []
        self.entered, self.release = threading.Event(), threading.Event()

    def upsert_many(self, writes, *, new=False) -> None:
        if not self.calls and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30)
        if any(write.user_id == "bad" for write in writes):
            self.calls.append(([w.user_id for w in writes], new))
            raise ValueError("refused")
        self.calls.append(([w.user_id for w in writes], new))


def run_writers(grouped: GroupCommit, store: Store, first: tuple[str, bool], then: list[tuple[str, bool]]):
    """``first`` writes (and blocks in the store); ``then`` queue behind it; the store lets go once all wait.
    Returns {user: the error its writer got, or None}."""
    outcome: dict[str, BaseException | None] = {}

    def write(user: str, new: bool) -> None:
        try:
            grouped([write_of(user)], new=new)
            outcome[user] = None
        except Exception as exc:
            outcome[user] = exc

    threads = [threading.Thread(target=write, args=first)]
    threads[0].start()
    assert store.entered.wait(30)
    for user, new in then:
        threads.append(threading.Thread(target=write, args=(user, new)))
        threads[-1].start()
    deadline = time.monotonic() + 30
    while len(grouped._queue) < len(then):  # every later writer is waiting behind the first
        assert time.monotonic() < deadline
        time.sleep(0.01)
    store.release.set()
    for thread in threads:
        thread.join(30)
    return outcome


def test_writers_that_wait_at_the_same_moment_reach_the_store_in_one_write():
    store = Store()
    grouped = GroupCommit(store.upsert_many)
    outcome = run_writers(grouped, store, ("ann", False), [("bob", False), ("cy", False), ("dee", False)])
    assert outcome == {"ann": None, "bob": None, "cy": None, "dee": None}
    assert store.calls[0] == (["ann"], False)
    assert len(store.calls) == 2 and sorted(store.calls[1][0]) == ["bob", "cy", "dee"]


def test_a_write_that_fails_in_a_group_fails_its_own_writer_only():
    store = Store()
    grouped = GroupCommit(store.upsert_many)
    outcome = run_writers(grouped, store, ("ann", False), [("bob", False), ("bad", False), ("dee", False)])
    assert outcome["ann"] is None and outcome["bob"] is None and outcome["dee"] is None
    assert isinstance(outcome["bad"], ValueError)
    landed = {user for users, _ in store.calls[2:] for user in users if user != "bad"}
    assert landed == {"bob", "dee"}  # written again one writer at a time after the group failed


def test_new_memories_and_rewrites_are_never_written_in_one_group():
    store = Store()
    grouped = GroupCommit(store.upsert_many)
    outcome = run_writers(grouped, store, ("ann", False), [("bob", True), ("cy", False), ("dee", True)])
    assert set(outcome.values()) == {None}
    for users, new in store.calls[1:]:
        assert all((user in ("bob", "dee")) == new for user in users)
    assert sorted(user for users, _ in store.calls for user in users) == ["ann", "bob", "cy", "dee"]


class EventInterruptedIn(threading.Event):
    """An event whose wait raises KeyboardInterrupt in the thread named ``interrupted``, as Ctrl-C would."""

    def wait(self, timeout=None):
        if threading.current_thread().name == "interrupted":
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_a_writer_interrupted_while_it_waits_leaves_the_queue_and_nobody_hangs(monkeypatch):
    store = Store()
    grouped = GroupCommit(store.upsert_many)
    first = threading.Thread(target=grouped, args=([write_of("ann")],))
    first.start()
    assert store.entered.wait(30)
    monkeypatch.setattr(threading, "Event", EventInterruptedIn)
    raised: list[BaseException] = []

    def interrupted_write() -> None:
        try:
            grouped([write_of("bob")])
        except BaseException as exc:  # the KeyboardInterrupt the writer meets
            raised.append(exc)

    waiter = threading.Thread(target=interrupted_write, name="interrupted")
    waiter.start()
    waiter.join(30)
    monkeypatch.undo()
    store.release.set()
    first.join(30)
    assert [type(exc) for exc in raised] == [KeyboardInterrupt]
    grouped([write_of("cy")])  # would wait for ever if the lead had gone to the interrupted writer
    assert [users for users, _ in store.calls] == [["ann"], ["cy"]]  # bob's write was not made after he gave up


def test_a_users_write_does_not_wait_for_another_users_write_of_the_same_bank(make_bank):
    """The first write is held inside its embedding until the second, another user's, has been stored: with a
    lock of the whole process around every write, the second would wait for the first and neither would end."""
    second_stored = threading.Event()
    bank = make_bank()
    embed = bank.embedder.embed_documents

    def slow_for_ann(texts):
        if any("ann" in text for text in texts):
            assert second_stored.wait(30), "the other user's write waited for this one"
        return embed(texts)

    bank._writes.embed_documents = slow_for_ann
    results: list[MemoryRecord] = []
    first = threading.Thread(target=lambda: results.append(bank.add("ann likes tea", user_id="ann", resolve=False)))
    first.start()
    bank.add("bob likes coffee", user_id="bob", resolve=False)
    second_stored.set()
    first.join(60)
    assert [r.content for r in results] == ["ann likes tea"]
    assert [r.content for r in bank.list_memories(user_id="ann")] == ["ann likes tea"]
    assert [r.content for r in bank.list_memories(user_id="bob")] == ["bob likes coffee"]
    bank.close()


def test_the_hashed_embedder_is_deterministic_normalised_and_named_by_its_dimension():
    embedder = embedder_for(Settings(embed_model="hashed:96"))
    assert isinstance(embedder, HashedEmbedder)
    assert (embedder.name, embedder.dimension) == ("hashed:96", 96)
    vectors = embedder.embed_documents(["the otter swims", "the otter swims", "a violin sings", "!!!"])
    assert vectors.shape == (4, 96) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors[0], vectors[1])
    assert np.array_equal(embedder.embed_query("The OTTER swims"), vectors[0])  # case does not matter
    assert float(vectors[0] @ embedder.embed_query("otter")) > float(vectors[2] @ embedder.embed_query("otter"))
    assert embedder.embed_documents([]).shape == (0, 96)


@pytest.mark.parametrize("name", ["hashed:", "hashed:abc", "hashed:4", "hashed:100000", "hashed:0384", "hashed:²",
                                  "hashed:٣٨٤", "hashed:+384"])
def test_a_hashed_model_without_a_usable_dimension_is_refused_clearly(name):
    with pytest.raises(ConfigError, match="hashed:<dimension>"):
        embedder_for(Settings(embed_model=name))
