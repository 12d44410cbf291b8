"""`vecmem reindex` to another model, SIGKILLed midway in a real subprocess and run again: the store reads as the
old model until the rerun ends, the rerun embeds only what the killed run had not, and every memory ends up
stored once with the new model's vector (`vecmem doctor` clean).

The models are the fake embedder behind two OpenAI-compatible endpoints on 127.0.0.1 (tests/embedding_server.py,
``VECMEM_EMBED_MODEL=openai:<name>``): every text the child embeds is a request the test sees, and the new
model's endpoint answers slowly enough for the kill to land midway.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, FakeEmbedder
from tests.embedding_server import ScriptedEmbeddingServer
from tests.integration.conftest import cli_env
from vecmem import MemoryBank, MemoryRecord, Settings
from vecmem.errors import EmbeddingMismatchError

pytestmark = pytest.mark.integration

OLD, NEW = FakeEmbedder("openai:model-a", 64), FakeEmbedder("openai:model-b", 32)
BIG = 1_200  # one user past VECMEM_DEDICATED_AT: collections of their own
SMALL_USERS, PER_SMALL = 20, 15  # users in the shared collection


def _records() -> list[MemoryRecord]:
    big = [MemoryRecord(id=f"big-{n}", user_id="big", content=f"big note {n} on kestrels {n % 13}",
                        type=("fact", "preference")[n % 2]) for n in range(BIG)]
    small = [MemoryRecord(id=f"s{u}-{n}", user_id=f"small-{u}", content=f"small {u} note {n} about tea")
             for u in range(SMALL_USERS) for n in range(PER_SMALL)]
    return big + small


def _vecmem(env: dict[str, str], *argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vecmem", *argv], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _embedded(server: ScriptedEmbeddingServer, start: int = 0) -> list[str]:
    """The memories' texts sent to the endpoint (not the text the embedder sends once to learn the dimension)."""
    return [text for request in server.requests[start:] for text in request["input"] if " note " in text]


def test_a_killed_reindex_keeps_the_old_model_and_a_rerun_finishes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    records = _records()
    with MemoryBank(Settings(home=home), embedder=OLD) as bank:
        bank.add_records(records)
    contents = sorted(r.content for r in records)

    def slow(texts):  # the new model's pace: the kill lands with most of the store left
        time.sleep(0.05)
        return NEW.embed_documents(texts)

    with ScriptedEmbeddingServer(slow) as server:
        env = cli_env(home, VECMEM_EMBED_MODEL="openai:model-b", VECMEM_EMBED_BASE_URL=server.base_url,
                      VECMEM_EMBED_BATCH_SIZE="64", PYTHONPATH=str(REPO))
        child = _vecmem(env, "reindex")
        deadline = time.monotonic() + 120
        while len(_embedded(server)) < len(records) // 3 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        first = Counter(_embedded(server))
        assert 0 < sum(first.values()) < len(records)

        # until the rerun ends, the old model reads the whole store; the new one is refused with the fix
        with MemoryBank(Settings(home=home), embedder=OLD) as old:
            assert sum(old.count(user_id=user) for user in old.users()) == len(records)
            assert old.search("kestrels", 3, user_id="big", record_access=False)
            assert old.search("tea", 3, user_id="small-3", record_access=False)
        with pytest.raises(EmbeddingMismatchError, match="vecmem reindex"):
            MemoryBank(Settings(home=home), embedder=NEW)

        seen = len(server.requests)
        rerun = _vecmem(env, "reindex")
        out, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err
        assert f"re-embedded {len(records)} memories of {SMALL_USERS + 1} user(s)" in out
        assert "reindexing:" in err  # the plain progress lines (stderr is not a terminal here)
        second = Counter(_embedded(server, seen))
        doctor = subprocess.run([sys.executable, "-m", "vecmem", "doctor"], cwd=REPO, env=env, capture_output=True,
                                text=True, timeout=300)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    # the texts a killed run had stored are not embedded again: at most the batches in flight at the kill
    assert sorted(set(first) | set(second)) == contents
    assert len(set(first) & set(second)) <= 2 * 64
    assert max((first + second).values()) <= 2 and max(second.values()) == 1

    with MemoryBank(Settings(home=home), embedder=NEW) as new:
        exported = list(new.export())
        assert sorted(r.content for r in exported) == contents and len({r.id for r in exported}) == len(records)
        for user in ("big", "small-0"):
            ids = [r.id for r in exported if r.user_id == user]
            indexed = new._store.get_indexed(user, ids)
            for record, vector, _ in indexed.values():
                np.testing.assert_allclose(vector, NEW.embed_documents([record.content])[0], atol=1e-5)
        assert new.search("kestrels 5", 1, user_id="big", record_access=False)
        assert not new.doctor().findings
    with pytest.raises(EmbeddingMismatchError):
        MemoryBank(Settings(home=home), embedder=OLD)
    assert not [name for name in os.listdir(home) if name.endswith(".tmp")]
