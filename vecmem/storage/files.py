"""Files and folders of a store are the user's alone: folders 0700, files 0600.

Memories, access statistics, sessions, keys and the lock say a lot about a person; a shared machine's other
accounts must not read them. Folders vecmem creates are made 0700 and files 0600 from the start (never
created open and narrowed later). A folder or file that already exists is narrowed when it is ours to
change; one the user made looser on purpose elsewhere (a home folder shared on purpose) is left as it is when
we cannot change it. SQLite creates its -wal and -shm files with the main file's mode, so those follow.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["private_dir", "private_file", "replace_atomically"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create the folder (and missing parents, which get the same mode) readable by its owner only."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(folder, DIR_MODE)  # mkdir's mode is masked by the umask
    _narrow(path, DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create the file if it is missing, with mode 0600; narrow an existing one of ours to 0600."""
    private_dir(path.parent)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(descriptor)
    _narrow(path, FILE_MODE)
    return path


def replace_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``write`` into a temporary file beside it (0600 from the start) renamed over it, so a
    reader sees the old file or the whole new one. OSError when the folder cannot take it: the temporary file is
    removed, the old one left as it was."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as out:
            write(out)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _narrow(path: Path, mode: int) -> None:
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~mode:
            os.chmod(path, mode)
    except OSError:  # not ours, or gone: leave it; opening it will say what is wrong
        pass
