"""The state database (storage/state/database.py): the same behaviour from SQLite files and from PostgreSQL.

Each test runs on an SQLite file and on a schema of a real PostgreSQL server started by the tests
(tests/postgres.py; those runs are ``slow``). What only a shared database must guarantee is checked under
concurrency: feed rows are read in the order they commit, whatever the threads appending at once, and a
user's write lock excludes every other holder, in this process or another.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from vecmem.config import Settings
from vecmem.errors import ConfigError, NotFoundError
from vecmem.interfaces.http.keys import KeyStore
from vecmem.models import MemoryRecord
from vecmem.storage.state.access import AccessStats
from vecmem.storage.state.backend import state_database, write_locks
from vecmem.storage.state.changes import ChangeFeed
from vecmem.storage.state.database import Database, FileWriteLocks, WriteLocks, stripe
from vecmem.storage.state.sessions import SessionStore
from vecmem.storage.state.sqlite import SQLiteFile

KINDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)]


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return str(request.param)


@pytest.fixture
def settings(kind: str, tmp_path: Path, request) -> Settings:
    if kind == "sqlite":
        return Settings(home=tmp_path / "home")
    return Settings(home=tmp_path / "home", database_url=request.getfixturevalue("state_url"),
                    database_schema=request.getfixturevalue("state_schema"))


def database(settings: Settings, file_name: str = "changes.sqlite3") -> Path | Database:
    return state_database(settings, file_name, "test state")


# ---------------------------------------------------------------------------------------------- the change feed

def test_a_feed_tells_each_reader_what_the_others_wrote_in_order(settings):
    writer, reader = ChangeFeed(database(settings)), ChangeFeed(database(settings))
    with writer.writing("alice", ["a", "b"]):
        begun = reader.since("alice", 0)
        assert begun.begun == ["a", "b"] and not begun.changed
    with writer.writing("bob", ["z"]):
        pass
    done = reader.since("alice", begun.seen)
    assert done.changed == {"a", "b"} and done.ended == ["a", "b"]
    assert not writer.since("alice", 0).changed  # a writer's own finished writes are its own business
    assert reader.since("bob", 0).changed == {"z"}
    assert writer.head() >= done.seen


def test_a_write_that_failed_is_announced_to_every_reader_even_its_own(settings):
    feed = ChangeFeed(database(settings))
    with pytest.raises(RuntimeError), feed.writing("alice", ["a"]):
        raise RuntimeError("Chroma failed half-way")
    assert feed.since("alice", 0).changed == {"a"}
    assert feed.unsettled("alice", feed.head()) == {}


def test_a_reset_by_another_writer_is_seen_and_ones_own_is_not(settings):
    mover, other = ChangeFeed(database(settings)), ChangeFeed(database(settings))
    start = mover.head()
    mover.reset("alice")
    assert other.reset_since("alice", start) and not mover.reset_since("alice", start)
    assert not other.reset_since("bob", start)
    assert other.since("alice", start).rebuild


def test_the_state_has_one_identity_for_every_process_and_a_new_state_another(settings, tmp_path):
    first, second = ChangeFeed(database(settings)), ChangeFeed(database(settings))
    assert first.identity() == second.identity() == first.reader().identity()
    elsewhere = ChangeFeed(tmp_path / "elsewhere" / "changes.sqlite3")
    assert elsewhere.identity() != first.identity()


@pytest.mark.slow
def test_readers_never_miss_a_row_however_many_writers_commit_at_once(settings):
    """Row numbers are handed out before commit in PostgreSQL; without the feed's lock a reader that has read
    row n+1 would never read row n committed after it. Eight threads of two feeds append while a reader reads
    incrementally; every row must be read exactly once."""
    writers = [ChangeFeed(database(settings)) for _ in range(2)]
    reader = ChangeFeed(database(settings))
    stop = threading.Event()
    written: list[str] = []
    lock = threading.Lock()

    def write(feed: ChangeFeed, name: str) -> None:
        for n in range(60):
            memory_id = f"{name}-{n}"
            with feed.writing("alice", [memory_id]):
                pass
            with lock:
                written.append(memory_id)

    seen: list[str] = []
    position = 0

    def read() -> None:
        nonlocal position
        while not stop.is_set():
            changes = reader.since("alice", position)
            seen.extend(changes.ended)
            position = changes.seen

    threads = [threading.Thread(target=write, args=(writers[i % 2], f"w{i}")) for i in range(8)]
    reading = threading.Thread(target=read)
    reading.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.2)
    stop.set()
    reading.join()
    seen.extend(reader.since("alice", position).ended)
    assert sorted(seen) == sorted(written) and len(written) == 8 * 60


# ---------------------------------------------------------------------------------------------- other state

def test_access_statistics_count_every_access_and_keep_the_latest(settings):
    stats = AccessStats(database(settings, "access.sqlite3"))
    record = MemoryRecord(id="m1", content="likes tea", user_id="alice")
    from datetime import UTC, datetime

    stats.record([record], datetime(2026, 1, 2, tzinfo=UTC))
    stats.record([record], datetime(2026, 1, 1, tzinfo=UTC))
    count, last = stats.lookup("alice", ["m1", "m2"])["m1"]
    assert count == 2 and last == datetime(2026, 1, 2, tzinfo=UTC).timestamp()
    assert AccessStats(database(settings, "access.sqlite3")).lookup_all("alice") == ["m1"]
    stats.forget("alice", ["m1"])
    assert stats.lookup("alice", ["m1"]) == {}


def test_sessions_keep_turns_tasks_decisions_and_counters(settings):
    sessions = SessionStore.open(settings)
    first = sessions.add_turn("alice", "s1", "user", "I live in Hangzhou")
    sessions.add_turn("alice", "s1", "assistant", "Noted.")
    sessions.set_status(first, "kept")
    assert [(t.role, t.status) for t in sessions.recent_turns("alice", "s1", 3)] == [("user", "kept"),
                                                                                     ("assistant", "pending")]
    assert sessions.reply_to(first) == "Noted."
    sessions.start_task("alice", "s1", "ship it")
    sessions.start_task("alice", "s1", "ship it again")  # a new task replaces the one in progress
    assert sessions.add_to_task("alice", "s1", step="tests pass").steps == ("tests pass",)
    assert sessions.task("alice", "s1").goal == "ship it again"
    sessions.log_decision("alice", "s1", text="ok", kept=False, stage="gate", memory_type=None, reason="filler")
    assert [d.reason for d in sessions.decisions("alice")] == ["filler"]
    sessions.note_kept_turn("alice", "s1", ["m2", "m1", "m2"])
    assert sessions.window_memories("alice", "s1") == ["m2", "m1"]
    sessions.record_hits("alice", "s1", injected=4, used=3)
    assert SessionStore.open(settings).hit_totals("alice") == (4, 3)  # another process sees the same


def test_keys_made_through_one_handle_open_every_other(settings):
    made, secret = KeyStore.open(settings).create("alice")
    other = KeyStore.open(settings)
    assert other.principal(secret).user_id == "alice"
    other.revoke(made.id)
    assert KeyStore.open(settings).principal(secret) is None
    with pytest.raises(NotFoundError):
        other.revoke("000000000000")


# ---------------------------------------------------------------------------------------------- write locks

def _hold(settings: Settings, user: str, entered, release) -> None:
    locks = write_locks(settings)
    with locks.holding([user]):
        entered.set()
        release.wait(30)
    locks.close()


def test_a_users_write_lock_excludes_another_process_until_it_lets_go(settings):
    context = multiprocessing.get_context("spawn")
    entered, release = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(settings, "alice", entered, release))
    holder.start()
    try:
        assert entered.wait(60)
        locks = write_locks(settings)
        got = threading.Event()

        def take() -> None:
            with locks.holding(["alice"]):
                got.set()

        taker = threading.Thread(target=take)
        taker.start()
        assert not got.wait(0.5), "the lock was taken while another process held it"
        other = next(f"user-{n}" for n in range(1000) if stripe(f"user-{n}") != stripe("alice"))
        with locks.holding([other]):  # another user's writes do not wait
            pass
        release.set()
        assert got.wait(30)
        taker.join()
        locks.close()
    finally:
        release.set()
        holder.join(30)


def test_a_thread_holding_a_users_lock_takes_it_again_without_waiting(settings):
    locks: WriteLocks = write_locks(settings)
    with locks.holding(["alice"]), locks.holding(["alice", "bob"]):
        pass
    locks.close()


def test_file_locks_live_in_the_home_and_are_private(tmp_path):
    locks = FileWriteLocks(tmp_path / "locks")
    with locks.holding(["alice"]):
        files = list((tmp_path / "locks").iterdir())
    assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600


# ---------------------------------------------------------------------------------------------- the claim

@pytest.mark.chroma
def test_a_store_refuses_a_writer_whose_state_is_elsewhere_until_claimed(tmp_path):
    from vecmem.storage.chroma.store import ChromaStore

    first = ChromaStore(model_name="m", path=tmp_path / "chroma", changes=ChangeFeed(tmp_path / "a.sqlite3"))
    first.claim()
    first.claim()  # the same state again: nothing to say
    second = ChromaStore(model_name="m", path=tmp_path / "chroma", changes=ChangeFeed(tmp_path / "b.sqlite3"))
    with pytest.raises(ConfigError, match="share its state"):
        second.claim()
    second.claim(take_over=True)
    with pytest.raises(ConfigError):
        first.claim()


def test_sqlite_files_keep_their_names_in_the_home(tmp_path):
    settings = Settings(home=tmp_path)
    where = state_database(settings, "sessions.sqlite3", "sessions")
    assert where == tmp_path / "sessions.sqlite3"
    assert SQLiteFile(tmp_path / "x.sqlite3", "", label="x").dialect == "sqlite"


def _write_until_killed(settings: Settings, user: str, entered) -> None:
    """A writer as the bank writes (its user's write lock, then begin ... end), stopped inside its write."""
    locks, feed = write_locks(settings), ChangeFeed(database(settings))
    with locks.holding([user]), feed.writing(user, ["m1", "m2"]):
        entered.set()
        time.sleep(120)  # killed here


def test_a_write_open_in_a_live_process_is_waited_for_and_one_left_by_a_killed_one_is_settled(settings):
    context = multiprocessing.get_context("spawn")
    entered = context.Event()
    writer = context.Process(target=_write_until_killed, args=(settings, "alice", entered))
    writer.start()
    try:
        assert entered.wait(60)
        feed, locks = ChangeFeed(database(settings)), write_locks(settings)
        recovered: dict[str, list[str]] = {}
        opener = threading.Thread(target=lambda: recovered.update(feed.recover(locks.holding)))
        opener.start()
        opener.join(1.0)
        assert opener.is_alive() and not recovered  # the writer is alive: its write is not cut off
        writer.kill()  # SIGKILL: its lock (flock, or PostgreSQL's advisory lock) goes with it
        opener.join(60)
        assert recovered == {"alice": ["m1", "m2"]}
        assert feed.unsettled("alice", feed.head()) == {}
        assert feed.recover(locks.holding) == {}
        locks.close()
    finally:
        writer.kill()
        writer.join(30)
