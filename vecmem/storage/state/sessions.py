"""Conversation state that is not long-term memory: short-term turns, the task in progress (working memory),
the write gate's decision log, summary bookkeeping and hit-rate counters.

It lives in the state database (database.py): ``VECMEM_HOME/sessions.sqlite3``, or the PostgreSQL database
every worker shares, so a chat can be stopped and resumed with ``--session``, on any worker.

A user turn is stored with a status: ``pending`` until the write step has run for it, then ``kept`` (the gate
kept it and its memories were written) or ``dropped`` (the gate dropped it). A turn whose write step failed
(model timeout, invalid JSON, a store error) becomes ``retry`` and is tried once more with the next turn;
failing again, it is ``parked``: reported, kept here, never tried again (the agent, ``memory_agent.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vecmem.config import Settings
from vecmem.errors import InvalidInputError
from vecmem.storage.state.backend import state_database
from vecmem.storage.state.database import Database
from vecmem.storage.state.sqlite import SQLiteFile

__all__ = ["SessionStore", "StoredTurn", "RecentSession", "Task", "LoggedDecision", "SessionCounters", "TurnUsage"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id {serial}, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    role TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL, created_at {float} NOT NULL);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns (user_id, session_id, id);
CREATE TABLE IF NOT EXISTS tasks (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, goal TEXT NOT NULL, steps TEXT NOT NULL,
    results TEXT NOT NULL, started_at {float} NOT NULL, PRIMARY KEY (user_id, session_id));
CREATE TABLE IF NOT EXISTS decisions (
    id {serial}, user_id TEXT NOT NULL, session_id TEXT NOT NULL, text TEXT NOT NULL,
    kept INTEGER NOT NULL, stage TEXT NOT NULL, memory_type TEXT, reason TEXT NOT NULL, created_at {float} NOT NULL);
CREATE TABLE IF NOT EXISTS window_memories (
    id {serial}, user_id TEXT NOT NULL, session_id TEXT NOT NULL, memory_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS model_usage (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, turn_id {bigint} NOT NULL, calls INTEGER NOT NULL,
    prompt_tokens {bigint} NOT NULL, completion_tokens {bigint} NOT NULL, created_at {float} NOT NULL);
CREATE INDEX IF NOT EXISTS model_usage_by_session ON model_usage (user_id, session_id, turn_id);
CREATE TABLE IF NOT EXISTS counters (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, kept_turns INTEGER NOT NULL DEFAULT 0,
    local_summaries TEXT NOT NULL DEFAULT '[]', injected {bigint} NOT NULL DEFAULT 0,
    used {bigint} NOT NULL DEFAULT 0, PRIMARY KEY (user_id, session_id));
"""


def _now() -> float:
    return datetime.now(UTC).timestamp()


@dataclass(frozen=True)
class StoredTurn:
    id: int
    role: str
    content: str
    status: str


@dataclass(frozen=True)
class RecentSession:
    """A session of the user and when it was last talked in (its last turn)."""

    session_id: str
    last_active: datetime


@dataclass(frozen=True)
class Task:
    """Working memory: the task in progress, kept verbatim until it is marked done."""

    goal: str
    steps: tuple[str, ...] = ()
    results: tuple[str, ...] = ()

    def render(self) -> str:
        lines = [f"Current task (in progress): {self.goal}"]
        if self.steps:
            lines.append("Steps done:")
            lines.extend(f"- {step}" for step in self.steps)
        if self.results:
            lines.append("Intermediate results:")
            lines.extend(f"- {result}" for result in self.results)
        return "\n".join(lines)

    def progress(self) -> str:
        return f"{self.goal} ({len(self.steps)} steps done)" if self.steps else self.goal


@dataclass(frozen=True)
class LoggedDecision:
    session_id: str
    text: str
    kept: bool
    stage: str
    memory_type: str | None
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class SessionCounters:
    kept_turns: int
    local_summaries: tuple[str, ...]  # memory ids of the local summaries, oldest first
    injected: int  # memories put into prompts that got an answer
    used: int  # of those, the ones the answer used

    @property
    def hit_rate(self) -> float | None:
        return None if self.injected == 0 else self.used / self.injected


@dataclass(frozen=True)
class TurnUsage:
    """Model calls and tokens: of one turn, or summed over a session."""

    turns: int  # turns that called the model
    calls: int
    prompt_tokens: int
    completion_tokens: int


class SessionStore:
    """Short-term and working memory of every (user, session), in one SQLite file."""

    def __init__(self, where: Path | Database) -> None:
        """``where``: the state database, a path (its SQLite file) or a ``Database`` (the shared one)."""
        self._db: Database = (SQLiteFile(where, "", label="session store")  # SQLite's default sync: FULL
                              if isinstance(where, Path) else where)
        self._db.create(_SCHEMA)
        # the order rows were added in: a file made before window_memories had an id column has only its rowid
        self._added_order = "rowid" if self._db.dialect == "sqlite" else "id"

    @classmethod
    def open(cls, settings: Settings) -> SessionStore:
        """The configured store's sessions: VECMEM_HOME/sessions.sqlite3, or the shared state database."""
        return cls(state_database(settings, "sessions.sqlite3", "session store"))

    def close(self) -> None:
        self._db.close()

    # ------------------------------------------------------------------------------------------ turns

    def add_turn(self, user_id: str, session_id: str, role: str, content: str, status: str = "pending") -> int:
        return self._db.insert(
            "INSERT INTO turns (user_id, session_id, role, content, status, created_at) VALUES (?,?,?,?,?,?)",
            (user_id, session_id, role, content, status, _now()),
        )

    def set_status(self, turn_id: int, status: str) -> None:
        self._db.fetch("UPDATE turns SET status = ? WHERE id = ?", (status, turn_id))

    def recent_turns(self, user_id: str, session_id: str, exchanges: int) -> list[StoredTurn]:
        """The last ``exchanges`` user messages and the answers that followed them, oldest first."""
        if exchanges <= 0:
            return []
        rows = self._db.fetch(
            "SELECT id FROM turns WHERE user_id = ? AND session_id = ? AND role = 'user' ORDER BY id DESC LIMIT ?",
            (user_id, session_id, exchanges),
        )
        if not rows:
            return []
        return [
            StoredTurn(*row)
            for row in self._db.fetch(
                "SELECT id, role, content, status FROM turns WHERE user_id = ? AND session_id = ? AND id >= ? "
                "ORDER BY id",
                (user_id, session_id, rows[-1][0]),
            )
        ]

    def recent_sessions(self, user_id: str, *, excluding: str | None = None, limit: int = 5) -> list[RecentSession]:
        """The user's sessions, the one last talked in first (by its last turn; the later turn id breaks a tie of
        the clock), ``excluding`` one (the current session), at most ``limit``."""
        if limit <= 0:
            return []
        rows = self._db.fetch(
            "SELECT session_id, max(created_at) AS last_at, max(id) AS last_id FROM turns "
            "WHERE user_id = ? AND session_id <> ? GROUP BY session_id ORDER BY last_at DESC, last_id DESC LIMIT ?",
            (user_id, "" if excluding is None else excluding, limit),
        )
        return [RecentSession(session, datetime.fromtimestamp(last_at, UTC)) for session, last_at, _ in rows]

    def has_history(self, user_id: str) -> bool:
        return bool(self._db.fetch("SELECT 1 FROM turns WHERE user_id = ? LIMIT 1", (user_id,)))

    def pending_turns(self, user_id: str, session_id: str) -> list[StoredTurn]:
        return [
            StoredTurn(*row)
            for row in self._db.fetch(
                "SELECT id, role, content, status FROM turns WHERE user_id = ? AND session_id = ? "
                "AND role = 'user' AND status = 'pending' ORDER BY id",
                (user_id, session_id),
            )
        ]

    def reply_to(self, turn_id: int) -> str | None:
        """The assistant's answer right after a user turn, if there was one."""
        rows = self._db.fetch(
            "SELECT role, content FROM turns WHERE id > ? AND session_id = (SELECT session_id FROM turns WHERE id = ?) "
            "AND user_id = (SELECT user_id FROM turns WHERE id = ?) ORDER BY id LIMIT 1",
            (turn_id, turn_id, turn_id),
        )
        return rows[0][1] if rows and rows[0][0] == "assistant" else None

    def turns_since(self, user_id: str, session_id: str, turn_id: int) -> list[StoredTurn]:
        return [
            StoredTurn(*row)
            for row in self._db.fetch(
                "SELECT id, role, content, status FROM turns WHERE user_id = ? AND session_id = ? AND id > ? "
                "ORDER BY id",
                (user_id, session_id, turn_id),
            )
        ]

    # ------------------------------------------------------------------------------------------ working memory

    def task(self, user_id: str, session_id: str) -> Task | None:
        rows = self._db.fetch(
            "SELECT goal, steps, results FROM tasks WHERE user_id = ? AND session_id = ?", (user_id, session_id)
        )
        if not rows:
            return None
        goal, steps, results = rows[0]
        return Task(goal, tuple(json.loads(steps)), tuple(json.loads(results)))

    def start_task(self, user_id: str, session_id: str, goal: str) -> Task:
        goal = goal.strip()
        if not goal:
            raise InvalidInputError("task", "give the goal of the task")
        self._db.fetch(
            "INSERT INTO tasks (user_id, session_id, goal, steps, results, started_at) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT (user_id, session_id) DO UPDATE SET goal = excluded.goal, steps = excluded.steps, "
            "results = excluded.results, started_at = excluded.started_at",
            (user_id, session_id, goal, "[]", "[]", _now()),
        )
        return Task(goal)

    def add_to_task(self, user_id: str, session_id: str, *, step: str | None = None, result: str | None = None) -> Task:
        task = self.task(user_id, session_id)
        if task is None:
            raise InvalidInputError("task", "no task in progress; start one with /task GOAL")
        text = (step or result or "").strip()
        if not text:
            raise InvalidInputError("task", "say what was done or found")
        steps = task.steps + ((text,) if step is not None else ())
        results = task.results + ((text,) if result is not None else ())
        self._db.fetch(
            "UPDATE tasks SET steps = ?, results = ? WHERE user_id = ? AND session_id = ?",
            (json.dumps(steps, ensure_ascii=False), json.dumps(results, ensure_ascii=False), user_id, session_id),
        )
        return Task(task.goal, steps, results)

    def finish_task(self, user_id: str, session_id: str) -> Task:
        task = self.task(user_id, session_id)
        if task is None:
            raise InvalidInputError("task", "no task in progress")
        self._db.fetch("DELETE FROM tasks WHERE user_id = ? AND session_id = ?", (user_id, session_id))
        return task

    # ------------------------------------------------------------------------------------------ gate log

    def log_decision(
        self, user_id: str, session_id: str, *, text: str, kept: bool, stage: str, memory_type: str | None, reason: str
    ) -> None:
        self._db.fetch(
            "INSERT INTO decisions (user_id, session_id, text, kept, stage, memory_type, reason, created_at) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (user_id, session_id, text, int(kept), stage, memory_type, reason, _now()),
        )

    def decisions(self, user_id: str, session_id: str | None = None, limit: int = 50) -> list[LoggedDecision]:
        """The most recent gate decisions, newest last."""
        where, params = ("user_id = ?", (user_id,)) if session_id is None else (
            "user_id = ? AND session_id = ?", (user_id, session_id))
        rows = self._db.fetch(
            f"SELECT session_id, text, kept, stage, memory_type, reason, created_at FROM decisions WHERE {where} "
            "ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        return [
            LoggedDecision(s, text, bool(kept), stage, memory_type, reason, datetime.fromtimestamp(at, UTC))
            for s, text, kept, stage, memory_type, reason, at in reversed(rows)
        ]

    # ------------------------------------------------------------------------------------------ summaries, hits

    def counters(self, user_id: str, session_id: str) -> SessionCounters:
        rows = self._db.fetch(
            "SELECT kept_turns, local_summaries, injected, used FROM counters WHERE user_id = ? AND session_id = ?",
            (user_id, session_id),
        )
        if not rows:
            return SessionCounters(0, (), 0, 0)
        kept, summaries, injected, used = rows[0]
        return SessionCounters(kept, tuple(json.loads(summaries)), injected, used)

    def hit_totals(self, user_id: str) -> tuple[int, int]:
        """(memories injected, of those used by the answer) over every session of the user."""
        rows = self._db.fetch("SELECT coalesce(sum(injected), 0), coalesce(sum(used), 0) FROM counters WHERE user_id = ?",
                         (user_id,))
        return int(rows[0][0]), int(rows[0][1])

    def _ensure_counters(self, user_id: str, session_id: str) -> None:
        self._db.fetch("INSERT INTO counters (user_id, session_id) VALUES (?, ?) ON CONFLICT DO NOTHING", (user_id, session_id))

    def note_kept_turn(self, user_id: str, session_id: str, memory_ids: list[str]) -> int:
        """Count a kept turn and remember the memories it wrote for the next local summary; returns the count."""
        self._ensure_counters(user_id, session_id)
        with self._db.transaction() as db:
            db.execute(
                "UPDATE counters SET kept_turns = kept_turns + 1 WHERE user_id = ? AND session_id = ?",
                (user_id, session_id),
            )
            db.executemany(
                "INSERT INTO window_memories (user_id, session_id, memory_id) VALUES (?,?,?)",
                [(user_id, session_id, memory_id) for memory_id in memory_ids],
            )
        return self.counters(user_id, session_id).kept_turns

    def window_memories(self, user_id: str, session_id: str) -> list[str]:
        rows = self._db.fetch(
            f"SELECT memory_id FROM window_memories WHERE user_id = ? AND session_id = ? ORDER BY {self._added_order}",
            (user_id, session_id),
        )
        return list(dict.fromkeys(row[0] for row in rows))

    def note_local_summary(self, user_id: str, session_id: str, summary_id: str) -> int:
        """Record a local summary and start a new window; returns how many local summaries the session has."""
        summaries = (*self.counters(user_id, session_id).local_summaries, summary_id)
        with self._db.transaction() as db:
            db.execute(
                "UPDATE counters SET local_summaries = ? WHERE user_id = ? AND session_id = ?",
                (json.dumps(summaries), user_id, session_id),
            )
            db.execute("DELETE FROM window_memories WHERE user_id = ? AND session_id = ?", (user_id, session_id))
        return len(summaries)

    def record_usage(self, user_id: str, session_id: str, turn_id: int, *, calls: int, prompt_tokens: int,
                     completion_tokens: int) -> None:
        """What one turn cost in model calls and tokens (the chat's /stats)."""
        self._db.fetch(
            "INSERT INTO model_usage (user_id, session_id, turn_id, calls, prompt_tokens, completion_tokens, "
            "created_at) VALUES (?,?,?,?,?,?,?)",
            (user_id, session_id, turn_id, calls, prompt_tokens, completion_tokens, _now()),
        )

    def usage(self, user_id: str, session_id: str) -> tuple[TurnUsage, TurnUsage | None]:
        """(the session's model use summed, its last turn's, or None before any)."""
        rows = self._db.fetch(
            "SELECT count(*), coalesce(sum(calls), 0), coalesce(sum(prompt_tokens), 0), "
            "coalesce(sum(completion_tokens), 0) FROM model_usage WHERE user_id = ? AND session_id = ?",
            (user_id, session_id))
        last = self._db.fetch(
            "SELECT calls, prompt_tokens, completion_tokens FROM model_usage WHERE user_id = ? AND session_id = ? "
            "ORDER BY turn_id DESC LIMIT 1", (user_id, session_id))
        total = TurnUsage(*(int(value) for value in rows[0]))
        return total, None if not last else TurnUsage(1, *(int(value) for value in last[0]))

    def record_hits(self, user_id: str, session_id: str, *, injected: int, used: int) -> SessionCounters:
        self._ensure_counters(user_id, session_id)
        self._db.fetch(
            "UPDATE counters SET injected = injected + ?, used = used + ? WHERE user_id = ? AND session_id = ?",
            (injected, used, user_id, session_id),
        )
        return self.counters(user_id, session_id)
