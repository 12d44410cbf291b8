"""`vecmem mcp` over stdio, driven by the official MCP Python SDK's client."""

import asyncio
import json

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.integration.conftest import VENV_BIN, cli_env


def _data(result):
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def _session(home):
    params = StdioServerParameters(command=str(VENV_BIN / "vecmem"), args=["mcp"], env=cli_env(home))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == {"remember", "recall", "forget", "list_memories", "remember_messages", "build_context",
                         "forget_all"}
        made = _data(await session.call_tool("remember", {"content": "The user is allergic to peanuts",
                                                           "memory_type": "fact", "importance": 0.9}))
        _data(await session.call_tool("remember", {"content": "Today's task: pack for the hike",
                                                   "session_id": "hike"}))
        recalled = _data(await session.call_tool("recall", {"query": "which snack can I eat? peanuts?"}))
        assert "allergic to peanuts" in recalled["context"] and 0 < recalled["tokens"] < 2048
        assert [m["id"] for m in recalled["memories"]] == [made["id"]]  # the session's note stays in it
        listed = _data(await session.call_tool("list_memories", {"session_id": "hike"}))
        assert len(listed["memories"]) == 2
        refused = await session.call_tool("remember", {"content": "   "})
        assert refused.is_error and "content" in refused.content[0].text
        assert _data(await session.call_tool("forget", {"memory_id": made["id"]}))["forgotten"] == made["id"]
        gone = await session.call_tool("forget", {"memory_id": made["id"]})
        assert gone.is_error and "no memory" in gone.content[0].text
        left = _data(await session.call_tool("list_memories", {}))["memories"]  # every session's, without one
        assert [m["content"] for m in left] == ["Today's task: pack for the hike"]


def test_mcp_tools_through_the_official_client(tmp_path):
    asyncio.run(asyncio.wait_for(_session(tmp_path / "home"), timeout=180))
