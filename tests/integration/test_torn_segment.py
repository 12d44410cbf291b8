"""A collection whose HNSW segment a kill tore (chroma-core/chroma#7678) is rebuilt from the rows Chroma still
holds when the store is next used (storage/chroma/repair.py): the segment's files are torn on disk here, as
a SIGKILL mid-flush leaves them, and a fresh process opens the store and finds every memory."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.tally import count
from tests.torture_child import FILLED, MAIN, small_users

pytestmark = pytest.mark.integration


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tests.torture_child", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _segment(home: Path, pattern: str) -> Path:
    """The HNSW segment folder of the biggest collection whose name is LIKE ``pattern``."""
    with sqlite3.connect(home / "chroma" / "chroma.sqlite3") as db:
        (segment,) = db.execute(
            "SELECT s.id FROM segments s JOIN collections c ON s.collection = c.id JOIN segments m ON "
            "m.collection = c.id AND m.scope = 'METADATA' LEFT JOIN embeddings e ON e.segment_id = m.id "
            "WHERE c.name LIKE ? AND s.scope = 'VECTOR' GROUP BY s.id ORDER BY count(e.id) DESC LIMIT 1",
            (pattern,)).fetchone()
    return home / "chroma" / segment


def _tear_header(folder: Path) -> None:
    (folder / "header.bin").write_bytes(b"")  # Chroma cannot load the index at all: every call fails


def _cut_vectors(folder: Path) -> None:
    data = folder / "data_level0.bin"
    with data.open("r+b") as file:
        file.truncate(data.stat().st_size // 3)  # the vectors' file cut short: reads of the rest fail


def _tear_link_lists(folder: Path) -> None:
    """A link-list record sized from the middle of a neighbour list, as a kill mid-flush leaves it. Chroma's loader
    trusts the size and reads the rest out of step, raising nothing: a later search or flush dies of SIGSEGV or
    grows the file to a sparse terabyte (both seen in `make torture`). Without chroma/segments.py nothing here
    is rebuilt."""
    with (folder / "link_lists.bin").open("r+b") as file:
        file.write((1_065_353_216).to_bytes(4, "little"))


def _write_left_open(home: Path) -> None:
    """What a writer killed mid-write beside the tear leaves on the change feed: the recovery on open then
    examines the user, which reads the torn collection first (the two met in `make torture`)."""
    with sqlite3.connect(home / "changes.sqlite3") as db:
        db.execute("INSERT INTO changes (user_id, memory_id, writer, phase) VALUES (?, 'f0', 'killed', 0)", (MAIN,))
        db.execute("UPDATE feed SET value = value + 1 WHERE key = 'open_rows'")


@pytest.mark.parametrize(("collection", "tear", "write_open"), [
    ("vecmem-u-%-fact", _tear_header, False), ("vecmem-u-%-fact", _cut_vectors, False),
    ("vecmem-shared-%", _tear_header, False), ("vecmem-u-%-fact", _tear_header, True),
    ("vecmem-u-%-fact", _tear_link_lists, False), ("vecmem-shared-%", _tear_link_lists, True),
], ids=["own-collection-unloadable", "own-collection-vectors-cut", "shared-collection-unloadable",
        "own-collection-unloadable-and-a-write-left-open", "own-collection-link-lists-torn",
        "shared-collection-link-lists-torn-and-a-write-left-open"])
def test_a_torn_hnsw_segment_is_rebuilt_and_nothing_is_lost(tmp_path, collection, tear, write_open):
    home = tmp_path / "home"
    _run("fill", str(home))
    folder = _segment(home, collection)
    assert (folder / "header.bin").exists()
    tear(folder)
    if write_open:
        _write_left_open(home)
    state = json.loads(_run("check", str(home)).strip().splitlines()[-1])
    assert sorted(state["memories"][MAIN]) == sorted(f"f{n}" for n in range(FILLED))
    for user in small_users():
        assert sorted(state["memories"][user]) == sorted(f"f{n}" for n in range(150))
    assert state["hits"] == 5 and not state["findings"]
    assert state["vectors"] == {user: len(ids) for user, ids in state["memories"].items()}
    assert [line for line in state["recovery"] if "rebuilt collection" in line], state["recovery"]
    count("torn HNSW segments rebuilt")
    # and the rebuilt store opens as any other, with nothing left to rebuild
    again = json.loads(_run("check", str(home)).strip().splitlines()[-1])
    assert again["recovery"] == [] and again["memories"] == state["memories"]
