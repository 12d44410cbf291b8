"""Concurrent use: one process at a time on an embedded store (a second gets a clear error, the first loses
nothing), any number of banks and threads inside that process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import REPO, FakeEmbedder
from tests.integration.conftest import cli_env, run_cli
from tests.tally import count
from vecmem import MemoryBank, MemoryRecord, Settings
from vecmem.errors import StoreInUseError
from vecmem.models import MEMORY_TYPES
from vecmem.storage.chroma.store import ChromaStore

pytestmark = pytest.mark.integration

HOLDER = """
import sys, time
from tests.conftest import FakeEmbedder
from vecmem import MemoryBank, Settings
bank = MemoryBank(Settings(home=sys.argv[1]), embedder=FakeEmbedder())
for i in range(int(sys.argv[2])):
    bank.add(f"the holder's memory {i}", memory_id=f"h{i}")
print("holding", flush=True)
sys.stdin.readline()  # until told to go
bank.close()
print("released", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def holder(tmp_path, request):
    """Another process with the store open (a chat, say), which has written 50 memories (or as parametrized)."""
    home = tmp_path / "home"
    memories = str(getattr(request, "param", 50))
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(home), memories], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout.readline().strip() == "holding"
    yield home, child
    if child.poll() is None:
        child.kill()
    child.wait(30)


def test_a_second_process_gets_a_clear_error_and_the_first_loses_nothing(holder):
    home, child = holder
    with pytest.raises(StoreInUseError, match=rf"open in another process \(pid {child.pid}: .*VECMEM_CHROMA_URL"):
        MemoryBank(Settings(home=home), embedder=FakeEmbedder())
    count("concurrent use: second processes refused")
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "released"
    with MemoryBank(Settings(home=home), embedder=FakeEmbedder()) as after:  # free once the first has closed
        assert after.count() == 50 and after.get("h49").content == "the holder's memory 49"


@pytest.mark.parametrize("holder", [0], indirect=True)  # nothing written: the CLI's real model may write
def test_the_cli_meets_a_busy_store_with_one_line_and_exit_code_2(holder):
    home, child = holder
    env = cli_env(home)
    result = run_cli("add", "a memory the import must not lose", env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "open in another process" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    child.send_signal(signal.SIGKILL)  # a holder that dies lets go too
    child.wait(30)
    assert run_cli("add", "a memory the import must not lose", env=env).returncode == 0
    assert "must not lose" in run_cli("search", "import must not lose", env=env).stdout


def test_banks_and_threads_of_one_process_share_the_store(tmp_path):
    settings = Settings(home=tmp_path / "home")
    first, second = (MemoryBank(settings, embedder=FakeEmbedder()) for _ in range(2))

    def work(i: int) -> None:
        bank = (first, second)[i % 2]
        bank.add(f"thread memory number {i}", memory_id=f"t{i}")
        assert all(hit.id.startswith("t") for hit in bank.search("thread memory", 5, record_access=False))

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(work, range(60)))
    count("concurrent use: writes from threads", 60)
    assert first.count() == second.count() == 60
    assert {hit.id for hit in first.search("thread memory number", 60, record_access=False)} == {
        f"t{i}" for i in range(60)}
    first.close()
    second.add("still open: the lock is shared until the last bank of the process closes")
    second.close()


def test_a_store_searches_its_collections_at_once_on_threads_it_lets_go_of_on_close(tmp_path):
    embedder = FakeEmbedder()
    store = ChromaStore(model_name=embedder.name, path=tmp_path / "chroma", dedicated_at=1)  # per-type collections
    records = [MemoryRecord(id=f"m-{kind}", content=f"a memory of type {kind}", type=kind, user_id="u") for kind in MEMORY_TYPES]
    store.upsert("u", records, embedder.embed_documents([r.content for r in records]),
                 [r.content.split() for r in records], new=True)
    before = set(threading.enumerate())
    ids, _ = store.nearest("u", embedder.embed_query("a memory"), 10)  # one search per type, at once
    searchers = set(threading.enumerate()) - before
    assert sorted(ids) == sorted(r.id for r in records) and searchers
    store.close()
    assert not any(thread.is_alive() for thread in searchers)
