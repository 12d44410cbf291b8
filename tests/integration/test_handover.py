"""The hand-over, as processes: when the process serving an embedded store (the chat, `vecmem serve`) stops or is
killed, a `vecmem serve` that went through it takes the store over without a restart, and a second one follows
the new owner (vecmem/interfaces/owner/handover.py). The hand-over time is printed, never asserted beyond the generous
bound that says it carried on (``CARRY_ON``)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.conftest import cli_env
from tests.integration.test_owner_process import _lines, _wait_for_line

CARRY_ON = 30.0  # seconds from the owner's end to the first answer of the client: "carries on", not a speed test


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _call(base: str, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "X-Vecmem-Request": "1"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _search(base: str, query: str) -> tuple[int, list[str]]:
    status, hits = _call(base, "POST", "/search", {"query": query, "k": 10})
    return status, [hit["content"] for hit in hits] if status == 200 else []


def _owned(home: Path, process: subprocess.Popen, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            owner = json.loads((home / "owner.json").read_text())
            if owner["pid"] == process.pid:
                return owner
        except (OSError, ValueError):
            pass
        assert process.poll() is None and time.monotonic() < deadline, "no owner.json of the process"
        time.sleep(0.05)


def _start_chat(env: dict[str, str], home: Path) -> subprocess.Popen:
    chat = subprocess.Popen([sys.executable, "-m", "vecmem.chat", "--session", "owner"], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _owned(home, chat)
    return chat


class Serve:
    """`vecmem serve` on a port of its own; its stderr lines as they come."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "vecmem", "serve", "--port", str(self.port)], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        self.said = _lines(self.process.stderr)
        self.first_line = _wait_for_line(self.said, "on http://", timeout=120)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


def _hand_over(client: Serve, owner: subprocess.Popen, how: signal.Signals, kept: str) -> tuple[float, int]:
    """End ``owner`` with ``how``; the seconds until ``client`` answers a search again with ``kept`` in it once the
    owner has gone, and how many searches failed (5xx) meanwhile. A search answered before the owner is gone was
    answered by the owner, finishing the calls under way as it stops: the client takes the store over at its
    first call after that."""
    started = time.monotonic()
    owner.send_signal(how)
    failed = 0
    while True:
        gone = owner.poll() is not None
        status, found = _search(client.base, kept)
        if status == 200:
            assert kept in found, found
            if gone:
                return time.monotonic() - started, failed
            assert time.monotonic() - started < CARRY_ON, "the owner did not stop"
            time.sleep(0.05)
            continue
        failed += 1
        assert status >= 500 and time.monotonic() - started < CARRY_ON, (status, found)
        time.sleep(0.1)


def _stop_all(*processes: subprocess.Popen) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def _carries_on(client: Serve, home: Path, env: dict[str, str], kept: str) -> None:
    """After the hand-over: every call answers, the new owner serves, a new write lands, a command finds both."""
    for _ in range(5):
        assert _search(client.base, kept)[0] == 200
    assert _owned(home, client.process)["program"] == "vecmem serve"
    status, added = _call(client.base, "POST", "/memories", {"content": "The user plays the cello"})
    assert status == 201, added
    searched = subprocess.run([sys.executable, "-m", "vecmem", "search", "what does the user play", "--json"],
                              env=env, capture_output=True, text=True, timeout=180)  # through the new owner
    assert searched.returncode == 0, searched.stderr
    assert "The user plays the cello" in [hit["content"] for hit in json.loads(searched.stdout)]
    assert kept in _search(client.base, kept)[1]


@pytest.mark.parametrize(("owner_kind", "how"), [("chat", signal.SIGTERM), ("chat", signal.SIGKILL),
                                                 ("serve", signal.SIGKILL)],
                         ids=["chat-SIGTERM", "chat-SIGKILL", "serve-SIGKILL"])
def test_a_serve_through_the_owner_takes_the_store_over_when_the_owner_ends(tmp_path, owner_kind, how):
    home = tmp_path / "home"
    env = cli_env(home)
    owner_serve = Serve(env) if owner_kind == "serve" else None
    owner = _start_chat(env, home) if owner_serve is None else owner_serve.process
    if owner_serve is not None:
        assert "held by this process" in owner_serve.first_line
        _owned(home, owner)
    client = None
    try:
        client = Serve(env)
        holder = "the chat" if owner_kind == "chat" else "`vecmem serve`"
        assert f"through {holder} (pid {owner.pid})" in client.first_line, client.first_line
        kept = "The user's favourite fruit is the mango"
        status, added = _call(client.base, "POST", "/memories", {"content": kept})
        assert status == 201, added

        seconds, failed = _hand_over(client, owner, how, kept)
        print(f"hand-over after {how.name} of the {owner_kind}: {seconds:.1f} s ({failed} searches failed meanwhile)")
        assert owner.wait(30) == (0 if how == signal.SIGTERM else -signal.SIGKILL)
        _wait_for_line(client.said, "took the store over", timeout=5)
        _carries_on(client, home, env, kept)
        assert client.stop() == 0
        assert not (home / "owner.json").exists()
    finally:
        _stop_all(*[p for p in (owner, client.process if client else None) if p is not None])


def test_of_two_clients_exactly_one_becomes_the_owner_and_the_other_follows_it(tmp_path):
    home = tmp_path / "home"
    env = cli_env(home)
    chat = _start_chat(env, home)
    clients: list[Serve] = []
    try:
        clients = [Serve(env), Serve(env)]
        kept = "The user lives in Hangzhou"
        assert _call(clients[0].base, "POST", "/memories", {"content": kept})[0] == 201

        started = time.monotonic()
        chat.send_signal(signal.SIGKILL)
        chat.wait(30)
        answered: dict[int, float] = {}
        while len(answered) < 2:  # both are asked at once, over and over: both try to take the store
            for number, client in enumerate(clients):
                if number not in answered:
                    status, found = _search(client.base, kept)
                    assert status == 200 or (status >= 500 and time.monotonic() - started < CARRY_ON)
                    if status == 200:
                        assert kept in found
                        answered[number] = time.monotonic() - started
            time.sleep(0.05)
        print("hand-over after SIGKILL, two clients: " + ", ".join(f"{s:.1f} s" for s in answered.values()))

        owner = json.loads((home / "owner.json").read_text())
        owners = [client for client in clients if client.process.pid == owner["pid"]]
        assert len(owners) == 1  # exactly one took the store over
        (other,) = [client for client in clients if client is not owners[0]]
        _wait_for_line(owners[0].said, "took the store over", timeout=5)
        _wait_for_line(other.said, f"now goes through `vecmem serve` (pid {owner['pid']})", timeout=5)
        assert _call(other.base, "POST", "/memories", {"content": "The user plays the cello"})[0] == 201
        assert "The user plays the cello" in _search(owners[0].base, "cello")[1]

        assert other.stop() == 0  # the follower first, then the owner, each exits 0
        assert owners[0].stop() == 0
        assert not (home / "owner.json").exists()
    finally:
        _stop_all(chat, *(client.process for client in clients))


def test_a_second_chat_carries_on_when_the_first_is_killed(tmp_path):
    home = tmp_path / "home"
    env = cli_env(home)
    first = _start_chat(env, home)
    second = subprocess.Popen([sys.executable, "-m", "vecmem.chat", "--session", "two"], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = _lines(second.stdout)
    try:
        second.stdin.write("/memories anything\n")  # answered once it has its bank: the first chat's
        second.stdin.flush()
        _wait_for_line(said, "memor", timeout=120)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        started = time.monotonic()
        second.stdin.write("I live in Hangzhou\n/memories Hangzhou\n")
        second.stdin.flush()
        assert "lives in Hangzhou" in _wait_for_line(said, "lives in Hangzhou", timeout=CARRY_ON)
        print(f"a second chat's message after SIGKILL of the first: {time.monotonic() - started:.1f} s")
        assert _owned(home, second)["program"] == "python -m vecmem.chat"  # it took the store over
        second.stdin.write("/quit\n")
        second.stdin.flush()
        assert second.wait(60) == 0, second.stderr.read()
        assert not (home / "owner.json").exists()
    finally:
        _stop_all(first, second)


PYTHON_BESIDE = """
import vecmem
try:
    vecmem.MemoryBank()
except vecmem.StoreInUseError as exc:
    print("refused:", exc)
with vecmem.connect() as bank:
    print("through:", type(bank).__name__, bank.search("the user's favourite fruit")[0].content)
"""


def test_python_beside_the_chat_is_told_in_one_line_to_connect_and_connect_goes_through_it(tmp_path):
    home = tmp_path / "home"
    env = cli_env(home)
    chat = _start_chat(env, home)
    try:
        added = subprocess.run([sys.executable, "-m", "vecmem", "add", "The user's favourite fruit is the mango"],
                               env=env, capture_output=True, text=True, timeout=180)
        assert added.returncode == 0, added.stderr
        result = subprocess.run([sys.executable, "-c", PYTHON_BESIDE], env=env, capture_output=True, text=True,
                                timeout=180)
        assert result.returncode == 0, result.stderr
        refused, through = result.stdout.splitlines()
        assert refused.startswith("refused: ") and "vecmem.connect()" in refused and f"pid {chat.pid}" in refused
        assert through == "through: RemoteBank The user's favourite fruit is the mango"
        chat.send_signal(signal.SIGTERM)
        assert chat.wait(60) == 0
    finally:
        _stop_all(chat)


async def _mcp_through_a_hand_over(env: dict[str, str], chat: subprocess.Popen) -> tuple[list[str], list[str]]:
    """What `vecmem mcp` lists through the chat, and then again after the chat is killed."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def listed(session: ClientSession) -> list[str]:
        result = await session.call_tool("list_memories", {})
        assert not result.is_error, result.content
        return [memory["content"] for memory in json.loads(result.content[0].text)["memories"]]

    params = StdioServerParameters(command=sys.executable, args=["-m", "vecmem", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        before = await listed(session)
        chat.send_signal(signal.SIGKILL)
        chat.wait(30)
        return before, await listed(session)


def test_vecmem_mcp_carries_on_when_the_chat_it_went_through_is_killed(tmp_path):
    import asyncio

    home = tmp_path / "home"
    env = cli_env(home)
    chat = _start_chat(env, home)
    try:
        kept = "The user's favourite fruit is the mango"
        added = subprocess.run([sys.executable, "-m", "vecmem", "add", kept], env=env, capture_output=True,
                               text=True, timeout=180)
        assert added.returncode == 0, added.stderr
        before, after = asyncio.run(asyncio.wait_for(_mcp_through_a_hand_over(env, chat), timeout=180))
        assert kept in before and kept in after
        assert not (home / "owner.json").exists()  # the MCP server took the store over, and let go as it ended
    finally:
        _stop_all(chat)
