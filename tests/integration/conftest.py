"""Integration fixtures: the real embedding model (loaded once per test session) and a real Chroma server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import SEED_FILE
from vecmem import MemoryBank, SentenceTransformerEmbedder, Settings

VENV_BIN = Path(sys.executable).parent


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
    from vecmem.embed import resolve_model_location

    return resolve_model_location("all-MiniLM-L6-v2")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VECMEM_")}
    env.update({"VECMEM_HOME": str(home), "HF_HUB_OFFLINE": "1", **extra})
    return env


def run_cli(*argv: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "vecmem"), *argv], env=env, capture_output=True, text=True, timeout=timeout
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """`chroma run` on a free loopback port, started for the module and stopped after it."""
    port = _free_port()
    log = tmp_path_factory.mktemp("chroma-log") / "server.log"
    with log.open("w") as handle:
        process = subprocess.Popen(
            [str(VENV_BIN / "chroma"), "run", "--path", str(tmp_path_factory.mktemp("chroma-data")),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=handle, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma run did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
