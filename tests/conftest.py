"""Shared fixtures: a deterministic fake embedder, a settable clock, and banks on a store of the test's own.

Which store a bank gets (``store_kind``): in tests/unit, the in-memory store (``InMemoryStore``, milliseconds a
test) unless the test or its module is marked ``chroma`` (it needs what only real Chroma has: the store's folder,
the change-feed file beside it, the process lock, rows damaged in Chroma, held vectors, crashes, concurrency) or
``embedded_only``; those get embedded Chroma in tmp_path, as every test outside tests/unit does. Modules marked
``both_stores`` run each test on the in-memory store, on embedded Chroma and on a real `chroma run` server
(``stores(...)`` names the kinds). Every run on real Chroma carries the ``chroma`` marker, and it, the real
model (``integration``) and long runs marked ``slow`` by hand are ``slow``: the fast lane, well under a minute, is
``pytest tests/unit tests/conformance -m "not slow"``.
``VECMEM_TEST_STORE=embedded`` puts every unit test back on embedded Chroma (to tell a store difference from a bug).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from vecmem import MemoryBank, Settings
from vecmem.storage.memory import InMemoryStore
from vecmem.storage.state.changes import ChangeFeed

REPO = Path(__file__).resolve().parent.parent
SEED_FILE = REPO / "data" / "seed_memories.jsonl"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
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


class WideFakeEmbedder(FakeEmbedder):
    """The fake embedder over 4,096 buckets: over FakeEmbedder's 64, two texts without a word in common share a
    bucket often enough to look alike (a cosine of 0.3 between "谢谢" and a memory), which no real model does."""

    def __init__(self) -> None:
        super().__init__("fake-hash-4096", 4096)

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            digest = hashlib.sha256(token.encode("utf-8")).digest()
            vector[int.from_bytes(digest[:4], "big") % self.dimension] += 1.0 if digest[4] % 2 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return vector / norm


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


UNIT = REPO / "tests" / "unit"
# each store kind as a parametrization; those on real Chroma carry the `chroma` marker (not in the fast lane)
STORE_KINDS = {"memory": "memory", "embedded": pytest.param("embedded", marks=pytest.mark.chroma),
               "server": pytest.param("server", marks=pytest.mark.chroma)}


def pytest_generate_tests(metafunc) -> None:
    """Tests marked ``both_stores`` run on the in-memory store, on an embedded store and on a real `chroma run`
    server; ``stores("memory", "embedded")`` names the kinds instead. Those also marked ``chroma`` (what Chroma
    itself does) run on the Chroma kinds among them only, and those marked ``embedded_only`` (what only an
    embedded store has: a folder, the change feed) once, embedded."""
    definition = metafunc.definition
    if definition.get_closest_marker("embedded_only") or "settings" not in metafunc.fixturenames:
        return
    named = definition.get_closest_marker("stores")
    kinds = list(named.args) if named else list(STORE_KINDS) if definition.get_closest_marker("both_stores") else []
    if definition.get_closest_marker("chroma"):
        kinds = [kind for kind in kinds if kind != "memory"]
    if kinds:
        metafunc.parametrize("store_kind", [STORE_KINDS[kind] for kind in kinds], indirect=True)


def _on_chroma_by_default(item: pytest.Item) -> bool:
    """Whether a test that does not choose its store kind gets embedded Chroma rather than the in-memory store."""
    return (item.get_closest_marker("chroma") is not None or item.get_closest_marker("embedded_only") is not None
            or UNIT not in Path(str(item.path)).parents or os.environ.get("VECMEM_TEST_STORE") == "embedded")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on embedded Chroma by default (``embedded_only``) is marked ``chroma`` too; every test on real
    Chroma or the real model (``integration``) is marked ``slow``, so the fast lane (``-m "not slow"``) leaves
    them out."""
    for item in items:
        if item.get_closest_marker("embedded_only") is not None and item.get_closest_marker("chroma") is None:
            item.add_marker(pytest.mark.chroma)
        if item.get_closest_marker("slow") is None and (
                item.get_closest_marker("chroma") is not None or item.get_closest_marker("integration") is not None):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def store_kind(request) -> str:
    """"memory", "embedded" or "server": the parametrization's, else the test's default (module docstring)."""
    if hasattr(request, "param"):
        return str(request.param)
    return "embedded" if _on_chroma_by_default(request.node) else "memory"


@pytest.fixture
def settings(tmp_path: Path, store_kind: str, request) -> Settings:
    # a model cache of the test's own: a fake's calibration (relevance.py) is measured in each test, as a test
    # that counts embedding calls expects, and none is left in the user's cache folder
    if store_kind == "server":  # a database of its own on the shared server: an empty store per test
        url = request.getfixturevalue("chroma_server")
        return Settings(home=tmp_path / "home", chroma_url=url, chroma_database=f"test-{uuid.uuid4().hex[:16]}",
                        model_cache=tmp_path / "model-cache")
    return Settings(home=tmp_path / "home", model_cache=tmp_path / "model-cache")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(app, log_level: str = "warning", ready: str = "/openapi.json"):
    """An ASGI app served by uvicorn on a free loopback port, in a thread, until the block ends; yields the port.
    It is up once ``ready`` answers (any HTTP status)."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{ready}", timeout=1).read()
            break
        except urllib.error.HTTPError:  # an answer all the same
            break
        except OSError:
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.1)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


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


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server on a free loopback port (tests/postgres.py), started once for the test session and
    stopped after it; the test is skipped, saying why, where PostgreSQL is not installed (`make test` installs
    it, as it installs Chromium)."""
    from tests.postgres import postgres_bin, running_postgres

    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed here (`make test` installs Debian's postgresql)")
    with running_postgres() as url:
        yield url


@pytest.fixture
def state_url(postgres_server) -> str:
    """The PostgreSQL server's URL; each test puts its state in a schema of its own (``state_schema``)."""
    return postgres_server


@pytest.fixture
def state_schema() -> str:
    return f"test_{uuid.uuid4().hex[:16]}"


class MemoryStores:
    """The in-memory stores of one test, one per home folder: every bank opened on a home shares its store, as
    banks opened on one embedded Chroma folder share it, each bank with a client and a change feed of its own
    (``VECMEM_HOME/changes.sqlite3``, as embedded banks have), so each sees the others' writes exactly."""

    def __init__(self) -> None:
        self.by_home: dict[Path, InMemoryStore] = {}

    def client(self, home: Path, model_name: str) -> InMemoryStore:
        shared = self.by_home.setdefault(home.resolve(), InMemoryStore(model_name=model_name, location=str(home)))
        return shared.sharing(model_name=model_name, changes=ChangeFeed(home / "changes.sqlite3"))


@pytest.fixture
def memory_stores() -> MemoryStores:
    return MemoryStores()


@pytest.fixture
def cli(tmp_path: Path, monkeypatch, clock: Clock, memory_stores: MemoryStores):
    """The `vecmem` command run in this process on the test's own in-memory store: ``cli(*argv, stdin=None)``
    returns (exit code, stdout, stderr); ``cli.bank()`` opens the store the commands use, for what the CLI cannot
    do."""
    from vecmem.interfaces.cli.main import main

    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VECMEM_CHROMA_URL", raising=False)
    monkeypatch.delenv("VECMEM_USER", raising=False)
    embedder = FakeEmbedder()

    def factory(settings: Settings, verify_model: bool = True) -> MemoryBank:
        return MemoryBank(settings, embedder=embedder, clock=clock, verify_model=verify_model,
                          store=memory_stores.client(settings.home, embedder.name))

    def invoke(*argv: str, stdin=None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), stdout=out, stderr=err, stdin=stdin or io.StringIO(), bank_factory=factory)
        return code, out.getvalue(), err.getvalue()

    invoke.bank = lambda: factory(Settings.from_env())  # type: ignore[attr-defined]
    return invoke


@pytest.fixture
def make_bank(settings: Settings, clock: Clock, store_kind: str, memory_stores: MemoryStores):
    """Open (or reopen) a bank on the test's store; keyword arguments override the defaults. On the "memory"
    kind the bank gets the in-memory store of its settings' home (unless given a store or a Chroma server)."""

    def factory(**overrides) -> MemoryBank:
        bank_settings = overrides.pop("settings", settings)
        options = {"embedder": FakeEmbedder(), "clock": clock, **overrides}
        embedder = options["embedder"]
        if store_kind == "memory" and "store" not in options and not bank_settings.chroma_url and embedder:
            options["store"] = memory_stores.client(bank_settings.home, embedder.name)
        return MemoryBank(bank_settings, **options)

    return factory


@pytest.fixture
def bank(make_bank) -> MemoryBank:
    return make_bank()


class ScriptedModel:
    """A ChatModel fake: ``responder(kind, messages)`` returns the reply text or raises LLMError.

    ``kind`` is "extract" (the write side: keep or not, and what), "summary" or "answer" ("gate" for a
    ``WriteGate`` asked alone), told apart by the system prompt (the same
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
    from vecmem.storage.state.sessions import SessionStore

    def factory(model=None, session="s1", user=None, bank=None, **changes) -> MemoryAgent:
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
