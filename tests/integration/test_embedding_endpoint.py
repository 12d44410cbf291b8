"""The real default model served through a scripted OpenAI-compatible ``/v1/embeddings`` endpoint on 127.0.0.1
(tests/embedding_server.py): recall through the endpoint (VECMEM_EMBED_MODEL=openai:<name>) equals recall with the
model run locally, figure for figure, on the native sets, in every mode."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from contextlib import redirect_stdout

import pytest

from tests.conftest import REPO
from tests.embedding_server import ScriptedEmbeddingServer
from vecmem import Settings


def _eval_module():
    if "eval_hit_rate" in sys.modules:
        return sys.modules["eval_hit_rate"]
    spec = importlib.util.spec_from_file_location("eval_hit_rate", REPO / "scripts" / "eval_hit_rate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval_hit_rate"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("data", ["native_en.json", "native_zh.json"])
def test_recall_through_the_endpoint_equals_the_local_models(tmp_path, real_embedder, data):
    evaluate = _eval_module().main
    argv = ["--format", "vecmem", "--data", str(REPO / "data" / "eval" / data), "--mode", "dense", "keyword", "hybrid",
            "--json", "--quiet"]

    def run(settings: Settings, **options) -> dict:
        out = io.StringIO()
        with redirect_stdout(out):
            assert evaluate(argv, settings_factory=lambda: settings, **options) == 0
        return json.loads(out.getvalue())

    local = run(Settings(home=tmp_path / "local"), embedder=real_embedder)
    with ScriptedEmbeddingServer(real_embedder.embed_documents) as server:
        remote = run(Settings(home=tmp_path / "remote", embed_model="openai:all-MiniLM-L6-v2",
                              embed_base_url=server.base_url))
        assert server.requests and {r["model"] for r in server.requests} == {"all-MiniLM-L6-v2"}
    for figures in (local, remote):
        for per_mode in figures["modes"].values():
            per_mode.pop("seconds", None)
            per_mode.pop("settings", None)
    assert remote == local
