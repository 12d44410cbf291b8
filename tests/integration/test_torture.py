"""Torture: writers of every kind (add, import, supersede, forget_all, reindex) in a child process, killed with
SIGKILL at random moments, round after round on one store. After every kill the next process opens the store
with no command run: it settles what the kill left (maintenance/recovery.py), search works, every acknowledged
write is there exactly once (a memory stored, a supersession, a finished ``forget_all``), and the doctor finds
nothing (``vecmem doctor`` would exit 0).

``VECMEM_TORTURE_ROUNDS`` sets the number of kills (default 10, about a minute; ``make torture`` runs 100).
The counts are printed at the end (rounds, kills by kind, acknowledged writes checked, recoveries).
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
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.tally import count
from tests.torture_child import MAIN, WRITERS

pytestmark = pytest.mark.integration

ROUNDS = int(os.environ.get("VECMEM_TORTURE_ROUNDS", "10"))


def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.torture_child", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"})


class Acknowledged:
    """What the writers said was done, across every round."""

    def __init__(self) -> None:
        self.memories: dict[str, set[str]] = {}  # user -> ids acknowledged
        self.superseded: dict[str, str] = {}  # old -> new, of MAIN
        self.erasing: set[str] = set()  # users whose forget_all began (any of their memories may be gone)
        self.erased: set[str] = set()  # users whose forget_all was acknowledged

    def read(self, line: str) -> None:
        kind, *words = line.split()
        if kind == "ack":
            self.memories.setdefault(words[0], set()).add(words[1])
        elif kind == "sup":
            self.superseded[words[0]] = words[1]
        elif kind == "start":
            self.erasing.add(words[0])
        elif kind == "forgot":
            self.erased.add(words[0])

    def checked(self, held: dict[str, dict[str, str | None]], where: str) -> int:
        """Assert the store holds what was acknowledged; returns how many acknowledged writes were checked."""
        checked = 0
        for user, ids in self.memories.items():
            if user in self.erased:
                assert not held.get(user), f"{where}: {user}'s forget_all was acknowledged, yet memories remain"
            elif user not in self.erasing:
                missing = ids - set(held.get(user, {}))
                assert not missing, f"{where}: acknowledged memories of {user} lost: {sorted(missing)[:10]}"
            checked += len(ids)
        for old, new in self.superseded.items():
            assert held[MAIN].get(old) == new, f"{where}: the acknowledged supersession {old} -> {new} was lost"
        return checked + len(self.superseded) + len(self.erased)


def _write_and_kill(home: Path, kind: str, round_number: int, delay: float, acked: Acknowledged) -> bool:
    """Run a writer of ``kind``, SIGKILL it ``delay`` seconds after it is ready; whether it was still running."""
    child = _child("write", kind, str(home), str(round_number))
    ready = threading.Event()

    def read() -> None:
        for line in child.stdout:  # type: ignore[union-attr]
            if line.startswith("ready"):
                ready.set()
            else:
                acked.read(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(120):
        raise AssertionError(child.stderr.read() if child.poll() is not None else "the writer never started")  # type: ignore[union-attr]
    time.sleep(delay)
    running = child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    reader.join(10)
    assert running or child.returncode == 0, child.stderr.read()  # type: ignore[union-attr]
    return running


def _check(home: Path) -> dict:
    child = _child("check", str(home))
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_every_kind_of_writer_killed_again_and_again(tmp_path):
    rng = random.Random(int(os.environ.get("VECMEM_TORTURE_SEED", "27")))
    home, acked = tmp_path / "home", Acknowledged()
    kills, recoveries, checked = Counter[str](), 0, 0
    started = time.monotonic()
    for round_number in range(ROUNDS):
        # an import first, so that later rounds (supersede, reindex) work on a store of some size
        kind = "import" if round_number == 0 else rng.choice(sorted(WRITERS))
        if _write_and_kill(home, kind, round_number, rng.uniform(0.3, 2.0), acked):
            kills[kind] += 1
        state = _check(home)
        recoveries += len(state["recovery"])
        assert not state["findings"], f"round {round_number} ({kind}): the doctor found {state['findings']}"
        assert not any(state["duplicates"].values()), state["duplicates"]
        assert state["hits"] == 5
        assert state["vectors"] == {user: len(ids) for user, ids in state["memories"].items()}
        checked = acked.checked(state["memories"], f"round {round_number} ({kind})")
    count("torture: SIGKILLs survived", sum(kills.values()))
    count("torture: acknowledged writes checked", checked)
    count("torture: recoveries on open", recoveries)
    print(f"\ntorture: {ROUNDS} rounds, kills by kind {dict(sorted(kills.items()))}, {checked} acknowledged writes "
          f"checked after the last round, {recoveries} recoveries on open, {time.monotonic() - started:.0f} s")
    assert sum(kills.values()) >= ROUNDS * 3 // 4  # most rounds were killed mid-write, not after finishing
