"""Crash safety: a bulk import in a child process is killed with SIGKILL at random moments, again and again on
the same store. After every kill the store opens, every memory whose write was acknowledged is there exactly
once, nothing else is (only memories of the batch in flight may have landed), and the keyword index agrees with
the vector store. The next round resumes the import where the last acknowledged write left it.

``VECMEM_CRASH_ROUNDS`` sets the number of kills (default 6; each round costs about 8 s).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.tally import count

pytestmark = pytest.mark.integration

ROUNDS = int(os.environ.get("VECMEM_CRASH_ROUNDS", "6"))
PER_ROUND = 4_000  # more than a round can write before its kill
BATCH = 256  # WRITE_BATCH in vecmem/maintenance/transfer.py: what can be in flight at the moment of a kill


def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.crash_child", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def _import_and_kill(home: Path, first: int, delay: float) -> tuple[int, bool]:
    """Start an import at ``first``, kill it ``delay`` seconds after it is ready; the last acknowledged count."""
    child = _child("import", str(home), str(first), str(PER_ROUND))
    acknowledged, ready = first, threading.Event()

    def read() -> None:
        nonlocal acknowledged
        for line in child.stdout:  # type: ignore[union-attr]
            if line.startswith("ready"):
                ready.set()
            elif line.startswith("ack "):
                acknowledged = int(line.split()[1])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(60):
        raise AssertionError(child.stderr.read() if child.poll() is not None else "the import never started")
    time.sleep(delay)
    killed = child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    reader.join(10)
    return acknowledged, killed


def _check(home: Path) -> dict:
    child = _child("check", str(home))
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def test_acknowledged_memories_survive_sigkill_exactly_once(tmp_path):
    rng = random.Random(11)
    home = tmp_path / "home"
    acknowledged = 0
    kills = 0
    for _ in range(ROUNDS):
        acknowledged, killed = _import_and_kill(home, acknowledged, delay=rng.uniform(0.2, 2.5))
        kills += killed
        state = _check(home)
        stored = sorted(int(memory_id.split("-")[1]) for memory_id in state["ids"])
        missing = set(range(acknowledged)) - set(stored)
        count("crash safety: SIGKILLs survived", int(killed))
        count("crash safety: memories lost", len(missing))
        count("crash safety: memories duplicated", state["duplicates"])
        assert not missing, f"acknowledged memories lost after a kill: {sorted(missing)[:10]}"
        assert state["duplicates"] == 0
        # beyond the acknowledged ones, only the batch in flight (and the next one being embedded) may be there
        assert all(n < acknowledged + 2 * BATCH for n in stored), "memories that were never sent are in the store"
        assert state["count"] == len(stored) == state["index_size"] == state["indexed"], state
        assert state["hits"] == 5
    assert kills >= ROUNDS - 1  # every round but perhaps one was killed mid-import, not after it finished
