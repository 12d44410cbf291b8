"""HNSW segment files that would crash Chroma, found before Chroma loads them.

A segment's link lists (``link_lists.bin``) hold one record per element: a 4-byte size, then that many bytes of
neighbour ids. A SIGKILL while Chroma's embedded backend rewrites them can leave a record cut short, so that
the next size is read out of the middle of a neighbour list. chromadb's loader (its hnswlib) trusts every size:
it takes levels from neighbour ids and reads the rest out of step, raising nothing; a later call dies of
SIGSEGV, or a flush seeks by a garbage size and grows the file to a sparse terabyte (chroma-core/chroma#7510 and
#7238, open upstream; both found here by ``make torture``). No exception reaches Python, so repair.py never
runs.

``disarm_torn_segments`` runs when a process takes an embedded store (storage/state/lock.py): no process, this
one included, has the files open for writing then. It reads each segment's header and walks its link lists as
the loader would, checking what the loader does not. A segment the loader could not read safely is cut to the
shape Chroma refuses with an error (an empty header, no link lists): the first call that loads the collection
then fails with "Error loading hnsw index"; repair.py, asked to look by that message, finds the empty header
(the evidence it needs) and rebuilds the collection from its rows and texts in ``chroma.sqlite3``.

These are Chroma's private files: the check runs only under a chromadb it was tested against, and reads a
header's format version before anything else, so a header of a version it does not know is left to Chroma
whatever its size (chroma/formats.py holds the table; anything else is one log line and no cut).
``known_format`` and ``torn_evidence`` are what repair.py asks of a collection's segment before it rebuilds it.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

from vecmem.storage.chroma.formats import chromadb_known, hnsw_header_known

__all__ = ["disarm_torn_segments", "known_format", "torn_evidence", "unsafe_segment"]

log = logging.getLogger("vecmem")

HEADER = struct.Struct("<iQQQQQQiIQQQdQ")  # hnswlib's persisted header, as chromadb 1.5 writes it (version 1)
_VERSION = struct.Struct("<i")  # the header's first field, whatever its version
_SIZE = struct.Struct("<I")


def unsafe_segment(folder: Path) -> str | None:
    """Why Chroma's loader could not read the HNSW segment in ``folder`` safely, or None when it can (or when
    nothing was persisted yet, the header is already empty, or it is a version this check does not know)."""
    header_file = folder / "header.bin"
    if not header_file.is_file():
        return None
    header = header_file.read_bytes()
    if not header:
        return None  # Chroma refuses an empty header with an error; repair.py rebuilds such a collection
    if len(header) < _VERSION.size:
        return f"its header is {len(header)} bytes, too short to hold its version"
    if not hnsw_header_known(_VERSION.unpack_from(header)[0], folder):
        return None  # another layout: its size and fields mean nothing to this check
    if len(header) != HEADER.size:
        return f"its header is {len(header)} bytes, not {HEADER.size}"
    (_, _, capacity, count, element_size, _, _, top_level, entry, max_links, *_) = HEADER.unpack(header)
    if count > capacity or element_size <= 0 or max_links <= 0:
        return f"its header is inconsistent ({count} elements of {capacity}, {element_size} bytes each)"
    for name, each in (("data_level0.bin", element_size), ("length.bin", 4)):
        if _size(folder / name) < count * each:
            return f"{name} holds fewer than its {count} elements"
    if count == 0:
        return None
    if top_level < 0 or entry >= count:
        return f"its entry point ({entry}, level {top_level}) is not one of its {count} elements"
    return _unsafe_links(folder / "link_lists.bin", count, top_level, entry, max_links * 4 + 4)


def _unsafe_links(path: Path, count: int, top_level: int, entry: int, link_size: int) -> str | None:
    """Walk the link lists' records as hnswlib's loader does, with the checks it leaves out."""
    most, size_on_disk = count * (_SIZE.size + link_size * top_level), _size(path)
    if size_on_disk > most:  # read nothing of a file that a garbage size made sparse and huge
        return f"link_lists.bin is {size_on_disk:,} bytes, more than {count} elements can fill ({most:,})"
    data = path.read_bytes() if size_on_disk else b""
    offset = 0
    for element in range(count):
        if offset + _SIZE.size > len(data):
            return f"link_lists.bin ends at element {element} of {count}"
        (size,) = _SIZE.unpack_from(data, offset)
        level, rest = divmod(size, link_size)
        if rest or level > top_level:
            return f"link_lists.bin gives element {element} {size} bytes of links (torn record)"
        if element == entry and level != top_level:
            return f"its entry point {entry} has level {level}, not the top level {top_level}"
        offset += _SIZE.size + size
        if offset > len(data):
            return f"link_lists.bin ends inside element {element}'s links"
    return None


def known_format(folder: Path) -> bool:
    """Whether ``torn_evidence`` can read the HNSW segment in ``folder``: a chromadb this check was tested
    against, and a header of a version it knows (or none yet, or an empty one)."""
    if not chromadb_known():
        return False
    header = folder / "header.bin"
    try:
        with header.open("rb") as file:
            start = file.read(_VERSION.size)
    except FileNotFoundError:
        return True  # nothing persisted yet
    return len(start) < _VERSION.size or hnsw_header_known(_VERSION.unpack(start)[0], folder)


def torn_evidence(folder: Path) -> str | None:
    """What the files of the HNSW segment in ``folder`` show of a tear: an empty header (as a kill or
    ``disarm_torn_segments`` leaves it) or what ``unsafe_segment`` finds; None when they show none. Ask only
    of a ``known_format`` segment."""
    if (folder / "header.bin").is_file() and not _size(folder / "header.bin"):
        return "its header is empty"
    return unsafe_segment(folder)


def disarm_torn_segments(chroma_folder: Path) -> list[str]:
    """Cut every segment of an embedded store that Chroma could not load safely to an empty header and no link
    lists (module docstring); the folders cut. Does nothing under a chromadb this check was not tested against.
    Call only while no process has the store open."""
    if not chroma_folder.is_dir() or not chromadb_known():
        return []
    cut = []
    for folder in sorted(path for path in chroma_folder.iterdir() if path.is_dir()):
        try:
            why = unsafe_segment(folder)
            if why is None:
                continue
            os.truncate(folder / "header.bin", 0)
            if (folder / "link_lists.bin").is_file():
                os.truncate(folder / "link_lists.bin", 0)  # a sparse giant gives its space back now
        except OSError as exc:
            log.warning("vecmem: could not check the HNSW segment %s: %s", folder, exc)
            continue
        log.warning("vecmem: the HNSW segment %s was torn by a kill (%s); its collection is rebuilt from its rows "
                    "when next read", folder.name, why)
        cut.append(folder.name)
    return cut


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
