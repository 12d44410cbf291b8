"""The same MemoryBank code against a real `chroma run` server (VECMEM_CHROMA_URL)."""

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest
from chromadb import errors as chroma

from tests.conftest import FakeEmbedder
from vecmem import EmbeddingMismatchError, MemoryBank, Settings, StoreError
from vecmem.storage.chroma.client import chroma_errors, open_client
from vecmem.storage.chroma.layout import ChromaCollections
from vecmem.storage.chroma.store import ChromaStore


@pytest.fixture
def server_settings(chroma_server, tmp_path):
    """A store of the test's own on the shared server (a store is shared through one state: this test's home)."""
    return Settings(home=tmp_path / "home", chroma_url=chroma_server, chroma_database=f"test-{uuid.uuid4().hex[:16]}")


def test_add_search_filters_and_isolation_over_http(server_settings, clock):
    user = f"server-user-{id(clock)}"
    bank = MemoryBank(server_settings, embedder=FakeEmbedder(), clock=clock)
    g = bank.add("server side global memory", user_id=user)
    s1 = bank.add("server side session memory", user_id=user, session_id="s1")
    old = bank.add("server side old preference", user_id=user, memory_type="preference")
    bank.supersede(old.id, g.id, user_id=user)
    assert {h.id for h in bank.search("server side memory", 10, user_id=user)} == {g.id}
    assert {h.id for h in bank.search("server side memory", 10, user_id=user, session_id="s1")} == {g.id, s1.id}
    assert bank.search("server side memory", 10, user_id=user + "-other") == []
    assert bank.get(g.id, user_id=user).access_count == 2
    assert not (server_settings.home / "chroma").exists()  # no memory was written locally (only the state)
    assert bank.location.startswith(server_settings.chroma_url)


def test_model_record_and_reindex_over_http(server_settings):
    bank = MemoryBank(server_settings, embedder=FakeEmbedder())
    bank.add("kept across reindex", user_id="reindexed")
    with pytest.raises(EmbeddingMismatchError):
        MemoryBank(server_settings, embedder=FakeEmbedder("other", 16))
    MemoryBank(server_settings, embedder=FakeEmbedder("other", 16), verify_model=False).reindex()
    moved = MemoryBank(server_settings, embedder=FakeEmbedder("other", 16))
    assert moved.search("kept across reindex", 1, user_id="reindexed")[0].content == "kept across reindex"


def test_what_a_server_raises_is_mapped_by_type(chroma_server):
    """chromadb's HTTP client reports some failures with other types than embedded Chroma does (an existing
    collection or database: a bare ChromaError); the table in chroma/client.py covers both."""
    database = f"errors-{uuid.uuid4().hex[:12]}"
    client = open_client(url=chroma_server, database=database)  # the database is created: it was missing
    assert open_client(url=chroma_server, database=database) is not None  # and found the second time
    layout = ChromaCollections(client, "model", None)
    first = layout.create("vecmem-race", {"k": 1})
    assert layout.create("vecmem-race", {"k": 2}).id == first.id  # another client made it first: returned
    with pytest.raises(chroma.ChromaError) as caught:
        client.create_collection("vecmem-race", embedding_function=None)
    assert type(caught.value) is chroma.ChromaError  # the generic type create_or_existing has to look behind
    assert layout.get("vecmem-missing") is None
    first.add(ids=["a"], embeddings=np.ones((1, 4), dtype=np.float32))
    with pytest.raises(StoreError, match="run `vecmem reindex`"), chroma_errors("writing", sends_vectors=True):
        first.upsert(ids=["b"], embeddings=np.ones((1, 8), dtype=np.float32))


def test_a_server_that_goes_away_is_a_store_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([str(Path(sys.executable).parent / "chroma"), "run", "--path", str(tmp_path / "data"),
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "chroma run did not start"
                time.sleep(0.2)
        store = ChromaStore(model_name=FakeEmbedder().name, url=url)
        assert store.count("someone") == 0
    finally:
        server.terminate()
        server.wait(timeout=30)
    with pytest.raises(StoreError, match="cannot reach the Chroma server") as caught:
        store.users()
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    store.close()


def test_a_second_home_on_one_store_is_refused_until_it_claims_the_store(server_settings, tmp_path, monkeypatch):
    """Two processes with states of their own would lose each other's writes; the second is refused in one line,
    and `vecmem claim` moves the store to its state on purpose (the first is refused from then on)."""
    import io

    from vecmem.interfaces.cli.main import main

    def vecmem(home, *argv, stdin=""):
        monkeypatch.setenv("VECMEM_HOME", str(home))
        monkeypatch.setenv("VECMEM_CHROMA_URL", server_settings.chroma_url)
        monkeypatch.setenv("VECMEM_CHROMA_DATABASE", server_settings.chroma_database)
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(stdin),
                    bank_factory=lambda settings, verify_model=True: MemoryBank(settings, embedder=FakeEmbedder(),
                                                                                verify_model=verify_model))
        return code, out.getvalue(), err.getvalue()

    first, second = tmp_path / "first", tmp_path / "second"
    assert vecmem(first, "add", "the first home wrote this")[0] == 0
    code, _, err = vecmem(second, "list")
    assert code == 2 and err.count("\n") == 1 and "share its state" in err and str(first) in err
    assert vecmem(second, "claim")[0] == 2  # no terminal, no --yes: a usage error, nothing changed
    assert vecmem(first, "list")[0] == 0
    code, out, _ = vecmem(second, "claim", "--yes")
    assert code == 0 and str(second) in out
    assert "the first home wrote this" in vecmem(second, "list")[1]
    assert vecmem(first, "list")[0] == 2
