"""The bank's API is declared once, ``MemoryApi`` (vecmem/bank/api.py); every surface is derived from it or checked
against it here, so a surface that misses a member, has one the declaration lacks, or misspells one fails.

- the bank (``MemoryBank``) and the remote client (``RemoteBank``): the declaration's signatures exactly
  (tests/unit/test_owner_wire.py), and nothing public beyond them (the bank: ``LocalMemoryApi``'s few more);
- the owner endpoint: its calls are derived from the declaration (``CALLS``);
- the async twin (``AsyncMemoryBank``): a coroutine per method with the method's parameters, a property per property;
- the MCP tools: each calls declared members only, with arguments the declaration names.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from vecmem.aio import AsyncMemoryBank
from vecmem.assembly import MemoryBank
from vecmem.bank.api import LocalMemoryApi, MemoryApi
from vecmem.interfaces.mcp_server import create_server
from vecmem.interfaces.owner.endpoint import CALLS
from vecmem.interfaces.owner.remote import RemoteBank

LOCAL = {name for name, member in vars(LocalMemoryApi).items()
         if (inspect.isfunction(member) or isinstance(member, property)) and not name.startswith("_")}
METHODS = {name for name, member in vars(MemoryApi).items() if inspect.isfunction(member) and not name.startswith("_")}
PROPERTIES = {name for name, member in vars(MemoryApi).items() if isinstance(member, property)}


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_the_declaration_is_the_whole_public_api_of_the_bank_and_the_remote_client():
    assert _public(MemoryBank) | {"settings"} == METHODS | PROPERTIES | LOCAL  # settings: set by __init__
    for name in sorted(LOCAL - {"token_counter"}):
        declared = inspect.signature(getattr(LocalMemoryApi, name)).parameters
        assert [(p.name, p.kind) for p in inspect.signature(getattr(MemoryBank, name)).parameters.values()] == [
            (p.name, p.kind) for p in declared.values()]
    assert _public(RemoteBank) - METHODS - PROPERTIES == {"hello"}  # who the owner is: opening.py asks it first
    assert METHODS | PROPERTIES <= _public(RemoteBank) | {"settings"}  # set by __init__ (the owner's, from hello)


def test_the_owner_answers_every_declared_method_but_close():
    assert set(CALLS) == (METHODS - {"close"}) | {"location"}


@pytest.mark.parametrize("name", sorted(METHODS - {"close"}))
def test_the_async_twin_has_each_method_as_a_coroutine_with_its_parameters(name):
    twin = getattr(AsyncMemoryBank, name)
    assert inspect.iscoroutinefunction(twin), name
    declared = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(MemoryApi, name)).parameters.values()]
    made = [(p.name, p.kind, p.default) for p in inspect.signature(twin).parameters.values()]
    # the declaration writes defaults as ...; the twin carries the bank's values
    assert [(n, k) for n, k, _ in made] == [(n, k) for n, k, _ in declared]


def test_the_async_twin_has_nothing_the_declaration_lacks():
    lifecycle = {"aclose", "open", "bank"}  # an async bank is opened and closed as asyncio does it
    assert _public(AsyncMemoryBank) - METHODS - PROPERTIES - lifecycle == set()
    assert PROPERTIES <= _public(AsyncMemoryBank)
    assert "close" not in _public(AsyncMemoryBank)  # aclose instead: closing waits for the calls in flight


class _Declared:
    """A bank that answers only what ``MemoryApi`` declares, with the arguments it declares, and records the calls
    (then runs them on a real bank)."""

    def __init__(self, bank: MemoryBank) -> None:
        self._bank = bank
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name in PROPERTIES:
            return getattr(self._bank, name)
        if name not in METHODS:
            raise AssertionError(f"a surface called {name!r}, which MemoryApi does not declare")
        signature = inspect.signature(getattr(MemoryApi, name))

        def call(*args: Any, **kwargs: Any) -> Any:
            signature.bind(None, *args, **kwargs)  # a misspelt or undeclared argument raises TypeError here
            self.calls.append(name)
            return getattr(self._bank, name)(*args, **kwargs)

        return call


def test_each_mcp_tool_calls_declared_members_with_declared_arguments(bank):
    spy = _Declared(bank)
    server = create_server(spy)  # type: ignore[arg-type]
    first = bank.add("I live in Lyon", user_id="u")
    second = bank.add("I moved to Paris", user_id="u", resolve=False)
    third = bank.add("I like tea", user_id="u")
    arguments = {
        "recall": {"query": "where do I live", "user_id": "u"},
        "remember": {"content": "I prefer green tea", "user_id": "u"},
        "remember_messages": {"messages": [{"role": "user", "content": "I work at a bakery"}], "user_id": "u"},
        "build_context": {"query": "where do I live", "user_id": "u"},
        "update_memory": {"memory_id": third.id, "importance": 0.9, "user_id": "u"},
        "supersede": {"old_id": first.id, "new_id": second.id, "user_id": "u"},
        "list_memories": {"user_id": "u"},
        "forget": {"memory_id": third.id, "user_id": "u"},
        "forget_all": {"user_id": "u"},
    }
    tools = {tool.name for tool in asyncio.run(server.list_tools())}
    assert tools == set(arguments)
    for tool, given in arguments.items():
        before = len(spy.calls)
        result = asyncio.run(server.call_tool(tool, given))
        assert not result.is_error, (tool, result.content)
        assert spy.calls[before:], f"{tool} called no member of the bank"


def test_the_hand_over_passes_on_every_declared_member():
    from vecmem.interfaces.owner import handover

    assert handover._API == (METHODS - {"close"}) | (PROPERTIES - {"settings"})
