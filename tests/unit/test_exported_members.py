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


def test_the_names_type_checkers_see_are_the_names_loaded_on_use():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(vecmem))
    (guarded,) = [node for node in tree.body if isinstance(node, ast.If)]  # if typing.TYPE_CHECKING:
    imported = {alias.name: node.module for node in guarded.body for alias in node.names}
    assert imported == vecmem._WHERE
    assert set(imported) == set(vecmem.__all__) - {"__version__"}
    assert "NoSuchName" not in dir(vecmem) and sorted(imported) == sorted(set(dir(vecmem)) & set(imported))


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


def _reachable_types():
    """The vecmem types a caller of the public API meets: what public methods and properties of exported classes
    return, and the fields of the value types they return, transitively."""
    import dataclasses
    import inspect
    import typing

    found: dict[str, type] = {}
    frontier = [obj for name in vecmem.__all__ if isinstance(obj := getattr(vecmem, name), type)]
    while frontier:
        cls = frontier.pop()
        if cls.__name__ in found:
            continue
        found[cls.__name__] = cls
        annotations = []
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") and name != "__init__":
                continue
            function = member.fget if isinstance(member, property) else member
            if callable(function):
                try:
                    hints = typing.get_type_hints(function)
                except (NameError, TypeError):
                    continue
                annotations.extend(hints.values())
        if dataclasses.is_dataclass(cls):
            annotations.extend(typing.get_type_hints(cls).values())
        seen: set = set()
        for annotation in annotations:
            frontier.extend(c for c in _vecmem_classes(annotation, seen) if c.__name__ not in found)
    return found


def test_every_type_the_public_api_returns_or_raises_is_exported():
    missing = sorted(name for name in _reachable_types() if name not in vecmem.__all__)
    assert missing == []
    raised = [name for name in vecmem.errors.__all__ if isinstance(getattr(vecmem.errors, name), type)]
    assert sorted(set(raised) - set(vecmem.__all__)) == []


def test_memory_types_and_statuses_have_literal_aliases():
    import typing

    assert typing.get_args(vecmem.MemoryType) == vecmem.MEMORY_TYPES
    assert typing.get_args(vecmem.MemoryStatus) == vecmem.STATUSES
    assert typing.get_args(vecmem.MemorySource) == vecmem.SOURCES


def test_importing_vecmem_loads_little_and_a_bank_still_learns(tmp_path):
    """`import vecmem` (which any `vecmem.x` import runs first) loads neither the agent nor numpy nor the framework
    adapters' SDKs; a bank that learns from messages gets the agent's learner all the same, loaded then."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    probe = f"""
import sys
import vecmem
assert not {{"vecmem.agent", "vecmem.bank.facade", "numpy", "pydantic", "langgraph", "langchain_core"}} & set(sys.modules)
from tests.conftest import FakeEmbedder
from vecmem.bank.facade import MemoryBank
from vecmem.config import Settings
from vecmem.storage.memory import InMemoryStore
bank = MemoryBank(Settings(home={str(tmp_path)!r}), embedder=FakeEmbedder(), store=InMemoryStore(model_name="fake"),
                  verify_model=False)
print([record.content for record in bank.add_messages("I live in Berlin").written])
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['The user lives in Berlin.']"
