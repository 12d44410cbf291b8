"""A store's files are its owner's alone, and no secret from a command line lands in them."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import FakeEmbedder
from vecmem import MemoryBank, Settings, StoreInUseError
from vecmem.storage.files import private_dir, private_file, replace_atomically
from vecmem.storage.state import lock as lock_module
from vecmem.storage.state.sessions import SessionStore

pytestmark = pytest.mark.chroma  # the folder layout of an embedded store


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_embedded_store_is_made_of_private_folders_and_files(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    bank = MemoryBank(Settings(home=home), embedder=FakeEmbedder())
    try:
        bank.add("The user keeps a diary")
        SessionStore(home / "sessions.sqlite3").close()
        assert _mode(home) == 0o700 and _mode(home.parent) == 0o700 and _mode(home / "chroma") == 0o700
        ours = [home / name for name in ("store.lock", "access.sqlite3", "changes.sqlite3", "sessions.sqlite3")]
        ours += sorted(home.glob("*.sqlite3-wal"))
        assert all(_mode(path) == 0o600 for path in ours), {p.name: oct(_mode(p)) for p in ours}
    finally:
        bank.close()


def test_existing_loose_files_and_folders_are_narrowed(tmp_path: Path) -> None:
    folder = tmp_path / "loose"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    file = folder / "data.sqlite3"
    file.write_text("")
    file.chmod(0o644)
    private_file(file)
    assert _mode(folder) == 0o700 and _mode(file) == 0o600
    assert private_dir(folder) == folder


def test_the_lock_names_the_program_never_its_arguments(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/bin/vecmem", "serve", "--token", "S3CRET-TOKEN", "--port", "9"])
    home = tmp_path / "home"
    held = lock_module.StoreLock(home)
    try:
        written = (home / "store.lock").read_text()
        assert "S3CRET-TOKEN" not in written and "vecmem serve" in written
        assert _mode(home / "store.lock") == 0o600
        monkeypatch.setattr(lock_module, "_HELD", {})  # as if another process asked for the same store
        with pytest.raises(StoreInUseError) as refused:
            lock_module.StoreLock(home)
        assert "S3CRET-TOKEN" not in str(refused.value) and "vecmem serve" in str(refused.value)
    finally:
        monkeypatch.undo()
        held.release()


def test_a_memory_given_on_the_command_line_is_not_written_to_the_lock(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["vecmem", "add", "my bank PIN is 4711"])
    held = lock_module.StoreLock(tmp_path / "home")
    try:
        assert "4711" not in (tmp_path / "home" / "store.lock").read_text()
    finally:
        held.release()


def test_an_old_lock_file_is_narrowed_and_an_old_holders_command_line_is_not_echoed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "store.lock").write_text("pid 1: vecmem serve --token OLD-SECRET\n")
    (home / "store.lock").chmod(0o644)
    held = lock_module.StoreLock(home)
    try:
        assert _mode(home / "store.lock") == 0o600
    finally:
        held.release()
    assert lock_module._holder_text("pid 1: vecmem serve --token OLD-SECRET") == "a process that did not say which"
    assert lock_module._holder_text("pid 42: vecmem serve") == "pid 42: vecmem serve"


def test_a_file_replaced_atomically_is_private_and_a_failed_write_leaves_the_old_one(tmp_path: Path) -> None:
    path = private_dir(tmp_path / "cache") / "kept.json"
    replace_atomically(path, lambda out: out.write(b"first"))
    assert path.read_bytes() == b"first" and _mode(path) == 0o600

    def broken(out) -> None:
        out.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_atomically(path, broken)
    assert path.read_bytes() == b"first" and [p.name for p in path.parent.iterdir()] == ["kept.json"]
