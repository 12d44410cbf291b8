"""Shared fixtures: a deterministic fake embedder, a settable clock, and banks on real Chroma in tmp_path."""

from __future__ import annotations

import hashlib
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from vecmem import MemoryBank, Settings

REPO = Path(__file__).resolve().parent.parent
SEED_FILE = REPO / "data" / "seed_memories.jsonl"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
VENV_BIN = Path(sys.executable).parent

_TOKEN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]", re.IGNORECASE)


class FakeEmbedder:
    """Bag of hashed words (CJK: characters), L2-normalised: texts sharing words are similar, deterministically.

    It implements vecmem's Embedder protocol and is passed to MemoryBank through its constructor.
    """

    def __init__(self, name: str = "fake-hash-64", dimension: int = 64) -> None:
        self._name = name
        self._dimension = dimension
        self.document_calls = 0
        self.query_calls = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dimension, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            digest = hashlib.sha256(token.encode("utf-8")).digest()
            vector[digest[0] % self._dimension] += 1.0 if digest[1] % 2 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return vector / norm

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        return self._vector(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.query_calls += 1
        return np.stack([self._vector(text) for text in texts])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.document_calls += 1
        return np.stack([self._vector(text) for text in texts]) if texts else np.zeros((0, self._dimension))


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def pytest_generate_tests(metafunc) -> None:
    """Tests marked ``both_stores`` run twice: on an embedded store and on a real `chroma run` server (unless
    marked ``embedded_only``: what only an embedded store has, a folder, the change feed)."""
    marked = metafunc.definition.get_closest_marker("both_stores")
    if marked and not metafunc.definition.get_closest_marker("embedded_only") and "settings" in metafunc.fixturenames:
        metafunc.parametrize("store_kind", ["embedded", "server"], indirect=True)


@pytest.fixture
def store_kind(request) -> str:
    return getattr(request, "param", "embedded")


@pytest.fixture
def settings(tmp_path: Path, store_kind: str, request) -> Settings:
    if store_kind == "server":  # a database of its own on the shared server: an empty store per test
        url = request.getfixturevalue("chroma_server")
        return Settings(home=tmp_path / "home", chroma_url=url, chroma_database=f"test-{uuid.uuid4().hex[:16]}")
    return Settings(home=tmp_path / "home")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """`chroma run` on a free loopback port, started once for the test session and stopped after it."""
    port = _free_port()
    log = tmp_path_factory.mktemp("chroma-log") / "server.log"
    with log.open("w") as handle:
        process = subprocess.Popen(
            [str(VENV_BIN / "chroma"), "run", "--path", str(tmp_path_factory.mktemp("chroma-data")),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=handle, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma run did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def make_bank(settings: Settings, clock: Clock):
    """Open (or reopen) a bank on the test's store; keyword arguments override the defaults."""

    def factory(**overrides) -> MemoryBank:
        options = {"embedder": FakeEmbedder(), "clock": clock}
        options.update(overrides)
        return MemoryBank(overrides.pop("settings", settings), **{k: v for k, v in options.items() if k != "settings"})

    return factory


@pytest.fixture
def bank(make_bank) -> MemoryBank:
    return make_bank()


class ScriptedModel:
    """A ChatModel fake: ``responder(kind, messages)`` returns the reply text or raises LLMError.

    ``kind`` is "gate", "extract", "summary" or "answer", told apart by the system prompt (the same
    classification the HTTP test server uses).
    """

    name = "scripted"

    def __init__(self, responder) -> None:
        self.responder = responder
        self.calls: list[str] = []

    def complete(self, messages, *, max_tokens=None) -> str:
        from tests.chat_server import request_kind

        kind = request_kind({"messages": list(messages)})
        self.calls.append(kind)
        return self.responder(kind, list(messages))


@pytest.fixture
def make_agent(make_bank, settings, tmp_path):
    """A MemoryAgent on the test's store and session file; keyword arguments change the settings."""
    from vecmem.agent.memory_agent import MemoryAgent
    from vecmem.storage.sessions import SessionStore

    def factory(model=None, session="s1", user=None, bank=None, **changes) -> "MemoryAgent":
        bank = bank or make_bank(settings=settings.with_changes(**changes))
        return MemoryAgent(bank, SessionStore(tmp_path / "sessions.sqlite3"), model=model, session_id=session,
                           user_id=user)

    return factory


def pytest_terminal_summary(terminalreporter) -> None:
    from tests.tally import TALLY

    if TALLY:
        terminalreporter.section("robustness figures")
        for name, amount in sorted(TALLY.items()):
            terminalreporter.write_line(f"{name}: {amount:,}")
