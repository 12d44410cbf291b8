import types

import vecmem


def test_all_names_exist_and_are_unique():
    assert len(vecmem.__all__) == len(set(vecmem.__all__))
    for name in vecmem.__all__:
        assert hasattr(vecmem, name), name


def test_every_public_attribute_is_listed():
    for name in vecmem.__all__:
        getattr(vecmem, name)  # each is loaded on first use (PEP 562), then a plain attribute
    public = {
        name for name, value in vars(vecmem).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)  # submodules are not names
    }
    assert public == set(vecmem.__all__) - {"__version__"}


def test_the_public_api_is_declared_once_and_type_checkers_see_the_same_names():
    """``__all__`` and the loader come from ``_PUBLIC``; the ``TYPE_CHECKING`` imports (which type checkers need, as
    they cannot read ``_PUBLIC``) name the same names from the same modules, each as an explicit re-export."""
    import ast
    import inspect

    assert vecmem.__all__ == [name for names in vecmem._PUBLIC.values() for name in names] + ["__version__"]
    tree = ast.parse(inspect.getsource(vecmem))
    (guarded,) = [node for node in tree.body if isinstance(node, ast.If)]  # if typing.TYPE_CHECKING:
    imported = {alias.name: node.module for node in guarded.body for alias in node.names}
    assert all(alias.asname == alias.name for node in guarded.body for alias in node.names)
    assert imported == vecmem._WHERE
    assert "NoSuchName" not in dir(vecmem) and sorted(imported) == sorted(set(dir(vecmem)) & set(imported))


def test_internals_are_not_exported_but_stay_importable_from_their_modules():
    import importlib

    internals = {
        "vecmem.storage.state.database": ("Cursor", "Database", "Transaction"),
        "vecmem.storage.state.changes": ("ChangeFeed", "Changes"),
        "vecmem.storage.state.sessions": ("SessionStore", "Task"),
        "vecmem.storage.base": ("MemoryStore", "UserWrite"),
        "vecmem.storage.memory": ("InMemoryStore",),
        "vecmem.storage.chroma.store": ("ChromaStore",),
        "vecmem.models": ("MemoryFilter",),
    }
    for module, names in internals.items():
        for name in names:
            assert name not in vecmem.__all__ and not hasattr(vecmem, name), name
            assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


def test_errors_form_one_tree():
    for name in vecmem.errors.__all__:
        obj = getattr(vecmem.errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, vecmem.VecmemError)
    assert issubclass(vecmem.EmbeddingMismatchError, vecmem.StoreError)


def _vecmem_classes(annotation, seen):
    """Every vecmem class named anywhere inside a type annotation (list[Hit], Iterator[MemoryRecord], X | None)."""
    import typing

    key = repr(annotation)  # some annotations (Callable's argument lists) are not hashable
    if key in seen:
        return
    seen.add(key)
    if isinstance(annotation, type) and annotation.__module__.startswith("vecmem"):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _vecmem_classes(argument, seen)


def _type_checking_names(module_name: str) -> dict[str, object]:
    """What ``module_name`` imports under ``if TYPE_CHECKING:``: names its annotations use but it never loads."""
    import ast
    import inspect
    import sys

    module = sys.modules[module_name]
    names: dict[str, object] = {}
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                try:
                    exec(compile(ast.Module(body=[statement], type_ignores=[]), module.__file__, "exec"), names)
                except ImportError:  # a stub-only module (_typeshed): annotations of vecmem's types never need it
                    continue
    return names


def _returned(function) -> list:
    """The return annotation of a vecmem function (a coroutine twin's is its wrapped method's), resolved."""
    import inspect
    import typing

    function = inspect.unwrap(function)
    module = getattr(function, "__module__", None) or ""
    if not module.startswith("vecmem"):
        return []  # inherited from a framework (pydantic, LangChain, LangGraph): theirs, not vecmem's promise
    hints = typing.get_type_hints(function, localns=_type_checking_names(module))
    return [hints["return"]] if "return" in hints else []


def _reachable_types():
    """The vecmem types a caller of the public API gets back: what the exported functions and the public methods and
    properties of the exported classes return, and the fields of the value types among them, transitively.
    Parameters are not followed: a caller may pass an internal type, imported from its module, without its being
    promised."""
    import dataclasses
    import inspect
    import typing

    found: dict[str, type] = {}
    exported = [getattr(vecmem, name) for name in vecmem.__all__ if name != "__version__"]
    frontier: list[type] = [obj for obj in exported if isinstance(obj, type)]
    for function in (obj for obj in exported if inspect.isfunction(obj)):
        for annotation in _returned(function):
            frontier.extend(_vecmem_classes(annotation, set()))
    while frontier:
        cls = frontier.pop()
        if cls.__name__ in found:
            continue
        found[cls.__name__] = cls
        annotations = []
        for name, member in inspect.getmembers(cls):
            if name.startswith("_"):
                continue
            function = member.fget if isinstance(member, property) else member
            if callable(function):
                annotations.extend(_returned(function))
        if dataclasses.is_dataclass(cls):
            annotations.extend(typing.get_type_hints(cls).values())
        seen: set = set()
        for annotation in annotations:
            frontier.extend(c for c in _vecmem_classes(annotation, seen) if c.__name__ not in found)
    return found


def test_every_type_the_public_api_returns_or_raises_is_exported():
    reachable = _reachable_types()
    assert {"MemoryRecord", "Hit", "PromptPack", "AddResult", "MemoryPage", "TurnResult"} <= set(reachable)
    missing = sorted(name for name, cls in reachable.items() if getattr(vecmem, name, None) is not cls)
    assert missing == []
    raised = [name for name in vecmem.errors.__all__ if isinstance(getattr(vecmem.errors, name), type)]
    assert sorted(set(raised) - set(vecmem.__all__)) == []


def test_memory_types_and_statuses_have_literal_aliases():
    import typing

    from vecmem.models import MEMORY_TYPES, SOURCES, STATUSES

    assert typing.get_args(vecmem.MemoryType) == MEMORY_TYPES
    assert typing.get_args(vecmem.MemoryStatus) == STATUSES
    assert typing.get_args(vecmem.MemorySource) == SOURCES


def _docs():
    from tests.conftest import REPO

    return {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
            for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]}


def test_docs_api_page_lists_exactly_the_public_names():
    """docs/api.md has one line for each name of ``vecmem.__all__`` (``- `Name`: what it is for``), and no other."""
    import re

    listed = re.findall(r"^- `(\w+)`:", _docs()["docs/api.md"], flags=re.MULTILINE)
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(vecmem.__all__)


def test_docs_import_only_public_names():
    """Every ``from vecmem import ...`` in the README and docs/ (in code or prose), and every ``vecmem.<name>`` that
    is not a module, names something in ``vecmem.__all__``: the docs teach the public API only."""
    import importlib.util
    import re

    public = set(vecmem.__all__)
    for page, text in _docs().items():
        for match in re.finditer(r"from vecmem import (\([^)]*\)|[\w ,]+)", text):
            names = {name.split(" as ")[0].strip() for name in match.group(1).strip("()").split(",")}
            assert names - {""} <= public, f"{page}: {match.group(0)!r} imports {sorted(names - public - {''})}"
        for match in re.finditer(r"\bvecmem\.(\w+)", text):
            name = match.group(1)
            if name not in public and not name.startswith("_"):  # vecmem.__all__, vecmem.__file__
                assert importlib.util.find_spec(f"vecmem.{name}") is not None, f"{page}: vecmem.{name}"


def test_importing_vecmem_loads_little_and_a_bank_still_learns(tmp_path):
    """`import vecmem` (which any `vecmem.x` import runs first) loads neither the agent nor numpy nor the framework
    adapters' SDKs; vecmem's bank learns from messages with the agent's learner all the same, loaded then."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    probe = f"""
import sys
import vecmem
assert not {{"vecmem.agent", "vecmem.bank.facade", "numpy", "pydantic", "langgraph", "langchain_core"}} & set(sys.modules)
from tests.conftest import FakeEmbedder
from vecmem import MemoryBank
from vecmem.config import Settings
from vecmem.storage.memory import InMemoryStore
bank = MemoryBank(Settings(home={str(tmp_path)!r}), embedder=FakeEmbedder(), store=InMemoryStore(model_name="fake"),
                  verify_model=False)
assert "vecmem.agent" not in sys.modules  # opening a bank does not load the agent either
print([record.content for record in bank.add_messages("I live in Berlin").written])
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['The user lives in Berlin.']"
