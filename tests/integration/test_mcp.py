"""`vecmem mcp` over stdio, driven by the official MCP Python SDK's client: every parameter described, choices as
enums, plain descriptions, the read/write/destroy annotations, a clean stderr, and each tool doing its job."""

import asyncio
import json
import time

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.integration.conftest import VENV_BIN, cli_env


def _data(result):
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _check_tools_are_described(tools):
    """What a model reads in tools/list: a plain description per tool and per parameter, enums for choices."""
    assert {tool.name for tool in tools} == {"remember", "recall", "forget", "list_memories", "remember_messages",
                                             "build_context", "forget_all", "update_memory", "supersede"}
    for tool in tools:
        assert tool.description and "`" not in tool.description and "\n" not in tool.description, tool.name
        assert "  " not in tool.description, tool.name  # no docstring indentation
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
        hints = tool.annotations
        assert hints is not None and hints.read_only_hint is not None and hints.destructive_hint is not None
    by_name = {tool.name: tool for tool in tools}
    kinds = ["fact", "preference", "instruction", "conclusion"]
    memory_type = by_name["remember"].input_schema["properties"]["memory_type"]  # optional: inferred when left out
    assert [branch.get("enum") for branch in memory_type["anyOf"] if "enum" in branch] == [kinds]
    assert by_name["recall"].annotations.read_only_hint and by_name["forget"].annotations.destructive_hint
    assert {"limit", "threshold"} <= set(by_name["recall"].input_schema["properties"])


async def _session(home, errors):
    params = StdioServerParameters(command=str(VENV_BIN / "vecmem"), args=["mcp"], env=cli_env(home))
    async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as session:
        started = time.perf_counter()
        await session.initialize()
        _check_tools_are_described((await session.list_tools()).tools)
        made = _data(await session.call_tool("remember", {"content": "The user is allergic to peanuts",
                                                           "memory_type": "fact", "importance": 0.9}))
        _data(await session.call_tool("remember", {"content": "Today's task: pack for the hike",
                                                   "session_id": "hike"}))
        recalled = _data(await session.call_tool("recall", {"query": "which snack can I eat? peanuts?"}))
        print(f"first recall answered {time.perf_counter() - started:.1f} s after the server was started")
        assert "allergic to peanuts" in recalled["context"] and 0 < recalled["tokens"] < 2048
        assert [m["id"] for m in recalled["memories"]] == [made["id"]]  # the session's note stays in it
        strict = _data(await session.call_tool("recall", {"query": "which snack can I eat?",
                                                          "threshold": 0.99, "limit": 1}))
        assert strict["memories"] == []  # nothing is that relevant: nothing is injected
        edited = _data(await session.call_tool("update_memory", {"memory_id": made["id"], "importance": 1.0,
                                                                 "version": made["version"]}))
        assert edited["importance"] == 1.0 and edited["version"] == made["version"] + 1
        stale = await session.call_tool("update_memory", {"memory_id": made["id"], "importance": 0.2,
                                                          "version": made["version"]})
        assert stale.is_error and "version" in stale.content[0].text
        newer = _data(await session.call_tool("remember", {"content": "The user is allergic to peanuts and cashews"}))
        replaced = _data(await session.call_tool("supersede", {"old_id": made["id"], "new_id": newer["id"]}))
        assert replaced["superseded_by"] == newer["id"]
        loop = await session.call_tool("supersede", {"old_id": newer["id"], "new_id": made["id"]})
        assert loop.is_error and "cycle" in loop.content[0].text
        listed = _data(await session.call_tool("list_memories", {"session_id": "hike"}))
        assert len(listed["memories"]) == 2
        refused = await session.call_tool("remember", {"content": "   "})
        assert refused.is_error and "content" in refused.content[0].text
        assert _data(await session.call_tool("forget", {"memory_id": newer["id"]}))["forgotten"] == newer["id"]
        gone = await session.call_tool("forget", {"memory_id": newer["id"]})
        assert gone.is_error and "no memory" in gone.content[0].text
        assert _data(await session.call_tool("forget", {"memory_id": made["id"]}))["forgotten"] == made["id"]
        left = _data(await session.call_tool("list_memories", {}))["memories"]  # every session's, without one
        assert [m["content"] for m in left] == ["Today's task: pack for the hike"]


def test_mcp_tools_through_the_official_client(tmp_path):
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as handle:
        asyncio.run(asyncio.wait_for(_session(tmp_path / "home", handle), timeout=180))
    assert "DEBUG" not in errors.read_text() and "bm25s" not in errors.read_text()  # a clean stderr
