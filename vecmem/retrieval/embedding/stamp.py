"""What names a model's weights on disk: a ``weights_stamp`` (fingerprint.py's ``WeightsOnDisk``), under which a
model's fingerprint and what loading it made are kept, so new weights or a reinstalled package are kept anew."""

from __future__ import annotations

from pathlib import Path

__all__ = ["files_stamp"]


def files_stamp(name: str, folder: Path) -> str | None:
    """``name``, the folder and each file in it by name, size and modification time; None when it cannot be read."""
    try:
        files = sorted((path.name, path.stat()) for path in folder.iterdir() if path.is_file())
    except OSError:
        return None
    return ";".join([name, str(folder), *(f"{file}:{stat.st_size}:{stat.st_mtime_ns}" for file, stat in files)])
