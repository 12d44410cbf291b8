"""The same MemoryBank code against a real `chroma run` server (VECMEM_CHROMA_URL)."""

import pytest

from tests.conftest import FakeEmbedder
from vecmem import EmbeddingMismatchError, MemoryBank, Settings


@pytest.fixture
def server_settings(chroma_server, tmp_path):
    return Settings(home=tmp_path / "unused", chroma_url=chroma_server)


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
    assert not (server_settings.home / "chroma").exists()  # nothing was written locally
    assert bank.location == server_settings.chroma_url


def test_model_record_and_reindex_over_http(server_settings):
    bank = MemoryBank(server_settings, embedder=FakeEmbedder())
    bank.add("kept across reindex", user_id="reindexed")
    with pytest.raises(EmbeddingMismatchError):
        MemoryBank(server_settings, embedder=FakeEmbedder("other", 16))
    MemoryBank(server_settings, embedder=FakeEmbedder("other", 16), verify_model=False).reindex()
    moved = MemoryBank(server_settings, embedder=FakeEmbedder("other", 16))
    assert moved.search("kept across reindex", 1, user_id="reindexed")[0].content == "kept across reindex"
