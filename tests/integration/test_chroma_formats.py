"""Chroma's private files as the installed chromadb writes them, read where vecmem was tested against them
(storage/chroma/formats.py) and nowhere else.

A store filled by a real process (tests/torture_child.py ``fill``: collections of their own past Chroma's 1,000
rows kept in its log, and a shared one) has segments the installed chromadb wrote: every one is of a format the
check knows and passes it untouched, and tears made in them are found. Under a chromadb the check was not tested
against, or in a segment of a header version it does not know, a torn segment is not cut (one log line says
so), the store opens, and what Chroma raises goes to the mend through Chroma's API (storage/chroma/repair.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import chromadb
import pytest

from tests.conftest import REPO
from tests.torture_child import FILLED, MAIN, small_users
from vecmem.storage.chroma import formats, repair
from vecmem.storage.chroma.segments import HEADER, disarm_torn_segments, known_format, torn_evidence, unsafe_segment

pytestmark = pytest.mark.integration

# a process that opens the store as torture_child's ``check`` does, first saying what the check of segments cut
# (and how big each header was right after it), under the chromadb version given ("-": the installed one)
_CHILD = """
import json, sys
from pathlib import Path
import chromadb
if sys.argv[2] != "-":
    chromadb.__version__ = sys.argv[2]
import vecmem.bank.opening as opening
from tests.torture_child import check
checked = opening.disarm_torn_segments
def disarm(folder):
    cut = checked(folder)
    headers = {p.name: (p / "header.bin").stat().st_size for p in folder.iterdir() if (p / "header.bin").is_file()}
    print(json.dumps({"cut": cut, "headers": headers}), flush=True)
    return cut
opening.disarm_torn_segments = disarm
check(Path(sys.argv[1]))
"""


def _run(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("filled") / "home"
    _run("-m", "tests.torture_child", "fill", str(home))
    return home


@pytest.fixture
def home(filled, tmp_path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(filled, copy)
    return copy


def _segments(home: Path) -> dict[str, Path]:
    """Each collection's HNSW segment folder, by collection name."""
    with sqlite3.connect(home / "chroma" / "chroma.sqlite3") as db:
        rows = db.execute("SELECT c.name, s.id FROM segments s JOIN collections c ON s.collection = c.id "
                          "WHERE s.scope = 'VECTOR'").fetchall()
    return {name: home / "chroma" / segment for name, segment in rows}


def _fact_segment(home: Path) -> Path:
    (folder,) = [folder for name, folder in _segments(home).items() if name.startswith("vecmem-u-")
                 and name.endswith("-fact")]
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()
            and not path.name.startswith("chroma.sqlite3")}


def test_segments_the_installed_chromadb_wrote_pass_the_check_untouched(home):
    assert formats.chromadb_known() and formats.sqlite_schema_known(home / "chroma" / "chroma.sqlite3")
    segments = _segments(home)
    walked = 0
    for name, folder in segments.items():
        assert known_format(folder), name
        assert unsafe_segment(folder) is None and torn_evidence(folder) is None, name
        with sqlite3.connect(home / "chroma" / "chroma.sqlite3") as db:
            (collection_id,) = db.execute("SELECT collection FROM segments WHERE id = ?", (folder.name,)).fetchone()
        assert repair.segment_folder(home / "chroma", collection_id) == folder
        header = (folder / "header.bin").read_bytes() if (folder / "header.bin").exists() else b""
        if header and HEADER.unpack(header)[3] and (folder / "link_lists.bin").stat().st_size:
            walked += 1  # elements on upper levels: the walk of link lists ran on Chroma's own records
    assert walked >= 2, "the fill no longer writes segments with link lists"
    before = _files(home / "chroma")
    assert disarm_torn_segments(home / "chroma") == []
    assert _files(home / "chroma") == before


def _garbage_size(folder: Path) -> None:
    with (folder / "link_lists.bin").open("r+b") as file:
        file.write((1_065_353_216).to_bytes(4, "little"))


def _cut_vectors(folder: Path) -> None:
    os.truncate(folder / "data_level0.bin", (folder / "data_level0.bin").stat().st_size // 3)


def _lost_tail(folder: Path) -> None:
    os.truncate(folder / "link_lists.bin", (folder / "link_lists.bin").stat().st_size - 6)


@pytest.mark.parametrize(("tear", "reason"), [
    (_garbage_size, "torn record"), (_cut_vectors, "data_level0.bin holds fewer"), (_lost_tail, "ends inside"),
])
def test_tears_in_a_segment_chromadb_wrote_are_found(home, tear, reason):
    folder = _fact_segment(home)
    tear(folder)
    assert reason in (unsafe_segment(folder) or "")
    assert disarm_torn_segments(home / "chroma") == [folder.name]
    assert torn_evidence(folder) == "its header is empty"


def _version_two(folder: Path) -> None:
    """A header of a version the check does not know, over link lists it would cut in version 1."""
    with (folder / "header.bin").open("r+b") as file:
        file.write(struct.pack("<i", 2))
    _garbage_size(folder)


@pytest.mark.parametrize(("chromadb_version", "tear", "cut"), [
    ("1.6.0", _cut_vectors, False), ("2.0.0", _cut_vectors, False), ("-", _version_two, False),
    ("-", _cut_vectors, True),  # the installed chromadb and a version-1 header: the check cuts, as it should
], ids=["chromadb-1.6", "chromadb-2.0", "header-version-2", "known-control"])
def test_where_the_format_is_not_known_nothing_is_cut_and_the_store_opens_and_mends(home, monkeypatch,
                                                                                     chromadb_version, tear, cut):
    folder = _fact_segment(home)
    tear(folder)
    torn_files = _files(folder)
    if chromadb_version != "-":
        monkeypatch.setattr(chromadb, "__version__", chromadb_version)
        monkeypatch.setattr(formats, "_said", set())
        assert disarm_torn_segments(home / "chroma") == [] and _files(folder) == torn_files
    lines = _run("-c", _CHILD, str(home), chromadb_version)
    checked, state = json.loads(lines[0]), json.loads(lines[-1])
    assert checked["cut"] == ([folder.name] if cut else [])
    assert checked["headers"][folder.name] == (0 if cut else HEADER.size)
    # the store opened, and Chroma's own error on the torn collection was mended through its API
    assert sorted(state["memories"][MAIN]) == sorted(f"f{n}" for n in range(FILLED))
    for user in small_users():
        assert sorted(state["memories"][user]) == sorted(f"f{n}" for n in range(150))
    assert state["vectors"] == {user: len(ids) for user, ids in state["memories"].items()}
    (rebuilt,) = [line for line in state["recovery"] if "rebuilt collection" in line]
    assert ("its header is empty" if cut else "Chroma cannot read its vectors") in rebuilt, rebuilt
