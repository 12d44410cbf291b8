"""The check of HNSW segment files before Chroma loads them (storage/chroma/segments.py), on segments written
here in hnswlib's persisted format: a sound one passes untouched, each torn shape is found and cut to an empty
header (which Chroma refuses with an error that repair.py mends) without reading a sparse giant; under a
chromadb or a header version the check was not tested against (storage/chroma/formats.py) nothing is cut.
tests/integration/test_chroma_formats.py runs it on segments the installed chromadb wrote."""

from __future__ import annotations

import logging
import os
import re
import struct
import tomllib
from pathlib import Path

import chromadb
import pytest

from tests.conftest import REPO
from vecmem.storage.chroma import formats
from vecmem.storage.chroma.segments import HEADER, disarm_torn_segments, known_format, torn_evidence, unsafe_segment

MAX_LINKS = 4
LINK_SIZE = MAX_LINKS * 4 + 4
ELEMENT_SIZE = 172


def _segment(folder: Path, levels: list[int], *, entry: int | None = None, version: int = 1) -> Path:
    """A segment of ``len(levels)`` elements, element i on level ``levels[i]``, as chromadb persists it."""
    folder.mkdir(parents=True)
    count, top = len(levels), max(levels, default=-1)
    entry = levels.index(top) if entry is None and levels else (entry or 0)
    (folder / "header.bin").write_bytes(HEADER.pack(version, 0, max(count, 100), count, ELEMENT_SIZE, 164, 4, top,
                                                    entry, MAX_LINKS, MAX_LINKS * 2, MAX_LINKS, 0.7, 100))
    (folder / "data_level0.bin").write_bytes(b"\0" * ELEMENT_SIZE * count)
    (folder / "length.bin").write_bytes(struct.pack("<f", 1.0) * count)
    (folder / "link_lists.bin").write_bytes(b"".join(
        struct.pack("<I", LINK_SIZE * level) + b"\1" * LINK_SIZE * level for level in levels))
    return folder


SOUND = [0, 0, 2, 1, 0, 0, 1, 0]


def test_a_sound_segment_and_an_empty_one_pass_untouched(tmp_path):
    sound = _segment(tmp_path / "chroma" / "a", SOUND)
    _segment(tmp_path / "chroma" / "b", [])
    before = {path: path.read_bytes() for path in sound.iterdir()}
    assert unsafe_segment(sound) is None
    assert disarm_torn_segments(tmp_path / "chroma") == []
    assert {path: path.read_bytes() for path in sound.iterdir()} == before


def _cut_record(folder: Path) -> None:
    """A record cut short: the next size is read out of the middle of a neighbour list."""
    data = (folder / "link_lists.bin").read_bytes()
    first = 4 * 2  # elements 0 and 1 have no links; element 2's record starts here
    (folder / "link_lists.bin").write_bytes(data[:first + 4 + 10] + data[first + 4 + LINK_SIZE * 2:])


def _garbage_size(folder: Path) -> None:
    with (folder / "link_lists.bin").open("r+b") as file:
        file.write(struct.pack("<I", 1_065_353_216))


def _sparse_giant(folder: Path) -> None:
    with (folder / "link_lists.bin").open("r+b") as file:
        file.truncate(1 << 40)  # what a flush seeking by a garbage size leaves: a sparse terabyte


def _short_vectors(folder: Path) -> None:
    os.truncate(folder / "data_level0.bin", ELEMENT_SIZE * 3)


def _short_header(folder: Path) -> None:
    os.truncate(folder / "header.bin", 40)


def _lost_tail(folder: Path) -> None:
    os.truncate(folder / "link_lists.bin", (folder / "link_lists.bin").stat().st_size - 6)


@pytest.mark.parametrize(("tear", "reason"), [
    (_cut_record, "torn record"), (_garbage_size, "torn record"), (_sparse_giant, "more than 8 elements"),
    (_short_vectors, "data_level0.bin holds fewer"), (_short_header, "header is 40 bytes"),
    (_lost_tail, "ends inside element"),
])
def test_a_torn_segment_is_cut_to_an_empty_header(tmp_path, tear, reason):
    folder = _segment(tmp_path / "chroma" / "seg", SOUND)
    tear(folder)
    assert reason in (unsafe_segment(folder) or "")
    assert disarm_torn_segments(tmp_path / "chroma") == ["seg"]
    assert (folder / "header.bin").stat().st_size == 0 and (folder / "link_lists.bin").stat().st_size == 0
    assert (folder / "data_level0.bin").exists()  # only what Chroma needs to refuse the segment changes
    assert unsafe_segment(folder) is None  # the next open leaves the cut segment to Chroma's error
    assert disarm_torn_segments(tmp_path / "chroma") == []


def test_an_entry_point_off_the_top_level_is_torn(tmp_path):
    assert "entry point 0 has level 0" in (unsafe_segment(_segment(tmp_path / "a", SOUND, entry=0)) or "")
    assert "not one of its 8 elements" in (unsafe_segment(_segment(tmp_path / "b", SOUND, entry=8)) or "")


def test_a_version_it_does_not_know_and_an_unpersisted_segment_are_left_to_chroma(tmp_path):
    other = _segment(tmp_path / "chroma" / "v2", SOUND, version=2)
    _garbage_size(other)
    (tmp_path / "chroma" / "new").mkdir()
    assert unsafe_segment(other) is None and unsafe_segment(tmp_path / "chroma" / "new") is None
    assert disarm_torn_segments(tmp_path / "chroma") == [] and disarm_torn_segments(tmp_path / "absent") == []


def test_the_version_is_read_before_the_size_so_another_layout_is_left_alone(tmp_path):
    other = _segment(tmp_path / "chroma" / "v2", SOUND, version=2)
    with (other / "header.bin").open("ab") as file:
        file.write(b"\0" * 24)  # a longer header, as a later layout might have
    assert unsafe_segment(other) is None and not known_format(other)
    assert disarm_torn_segments(tmp_path / "chroma") == []
    assert (other / "header.bin").stat().st_size == HEADER.size + 24


def test_a_header_too_short_to_hold_its_version_is_torn(tmp_path):
    folder = _segment(tmp_path / "chroma" / "seg", SOUND)
    os.truncate(folder / "header.bin", 2)
    assert "too short to hold its version" in (unsafe_segment(folder) or "")
    assert disarm_torn_segments(tmp_path / "chroma") == ["seg"]


@pytest.fixture
def said(monkeypatch, caplog):
    """The log lines of formats.py, each said once a process: a fresh record of what was said."""
    monkeypatch.setattr(formats, "_said", set())
    caplog.set_level(logging.WARNING, logger="vecmem")
    return caplog


@pytest.mark.parametrize("version", ["1.6.0", "2.0.1", "1.5.8", "1.5", "unknown"])
def test_under_a_chromadb_it_was_not_tested_against_the_check_cuts_nothing_and_says_so_once(
        tmp_path, monkeypatch, said, version):
    monkeypatch.setattr(chromadb, "__version__", version)
    folder = _segment(tmp_path / "chroma" / "seg", SOUND)
    _garbage_size(folder)
    before = {path: path.read_bytes() for path in folder.iterdir()}
    assert disarm_torn_segments(tmp_path / "chroma") == [] and disarm_torn_segments(tmp_path / "chroma") == []
    assert {path: path.read_bytes() for path in folder.iterdir()} == before
    assert not known_format(folder)
    lines = [record.getMessage() for record in said.records]
    assert len(lines) == 1 and f"chromadb {version} is not one" in lines[0], lines


def test_a_header_version_it_does_not_know_is_said_once(tmp_path, said):
    for name in ("a", "b"):
        _garbage_size(_segment(tmp_path / "chroma" / name, SOUND, version=7))
    assert disarm_torn_segments(tmp_path / "chroma") == []
    lines = [record.getMessage() for record in said.records]
    assert len(lines) == 1 and "header version 7" in lines[0], lines


def test_the_evidence_repair_asks_for(tmp_path):
    sound, torn = _segment(tmp_path / "sound", SOUND), _segment(tmp_path / "torn", SOUND)
    _cut_record(torn)
    assert torn_evidence(sound) is None and "torn record" in (torn_evidence(torn) or "")
    disarm_torn_segments(tmp_path)
    assert torn_evidence(torn) == "its header is empty" and known_format(torn)
    (tmp_path / "new").mkdir()
    assert torn_evidence(tmp_path / "new") is None and known_format(tmp_path / "new")


def test_the_installed_chromadb_is_in_the_table_and_the_pin_is_the_table():
    assert formats.chromadb_known(), chromadb.__version__
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (pin,) = [re.sub(r"\s", "", entry) for entry in declared if re.match(r"chromadb\b", entry)]
    low, high = (".".join(map(str, bound)) for bound in formats.TESTED_CHROMADB)
    assert pin == f"chromadb>={low},<{high}"
