"""One local owner, as processes: with the chat open on an embedded store, `vecmem` commands, `vecmem serve` (the
panel), `vecmem mcp` and a second chat all go through it. Times are printed, never asserted
(scripts/bench_owner.py measures them)."""

from __future__ import annotations

import asyncio
import json
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.integration.conftest import VENV_BIN, cli_env, run_cli

HEAVY = {"chromadb", "torch", "sentence_transformers", "onnxruntime"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _lines(stream) -> queue.Queue:
    """The lines a process prints, as they come (read on a thread, so a test can wait with a timeout)."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r} in: {''.join(seen)}")


def _get(url: str, **headers: str):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
        return response.read().decode()


async def _mcp_list(env) -> list[str]:
    params = StdioServerParameters(command=str(VENV_BIN / "vecmem"), args=["mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("list_memories", {})
        assert not result.is_error, result.content
        return [memory["content"] for memory in json.loads(result.content[0].text)["memories"]]


def test_with_the_chat_open_everything_else_goes_through_it(tmp_path):
    home = tmp_path / "home"
    env = cli_env(home)
    seeded = run_cli("add", "The user's favourite fruit is the mango", "--type", "preference", env=env)
    assert seeded.returncode == 0, seeded.stderr
    chat = subprocess.Popen([sys.executable, "-m", "vecmem.chat", "--session", "one"], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = _lines(chat.stdout)
    try:
        deadline = time.monotonic() + 60
        while not (home / "owner.json").exists():
            assert chat.poll() is None and time.monotonic() < deadline, chat.stderr.read()
            time.sleep(0.05)

        for argv in (["list"], ["search", "favourite fruit"], ["search", "favourite fruit", "--json"]):
            started = time.perf_counter()
            result = run_cli(*argv, env=env)
            print(f"vecmem {' '.join(argv)} with the chat open: {time.perf_counter() - started:.2f} s")
            assert result.returncode == 0 and "mango" in result.stdout, result.stderr
        assert json.loads(result.stdout)[0]["content"] == "The user's favourite fruit is the mango"

        traced = subprocess.run([sys.executable, "-X", "importtime", "-m", "vecmem", "list"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert traced.returncode == 0 and "mango" in traced.stdout
        imported = {line.split("|")[-1].strip().split(".")[0] for line in traced.stderr.splitlines() if "|" in line}
        assert imported & HEAVY == set()

        port = _free_port()
        server = subprocess.Popen([str(VENV_BIN / "vecmem"), "serve", "--port", str(port)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    page = _get(base + "/")
                    break
                except OSError:
                    assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
                    time.sleep(0.1)
            assert "<title>" in page and "vecmem" in page
            listed = json.loads(_get(base + "/memories"))
            assert [memory["content"] for memory in listed] == ["The user's favourite fruit is the mango"]
            stats = json.loads(_get(base + "/stats"))
            assert stats["count"] == 1 and stats["location"] == str(home / "chroma")
        finally:
            server.terminate()
            server.wait(30)

        assert asyncio.run(asyncio.wait_for(_mcp_list(env), timeout=120)) == [
            "The user's favourite fruit is the mango"]

        second = subprocess.run([sys.executable, "-m", "vecmem.chat", "--session", "two"], env=env, text=True,
                                input="I live in Hangzhou\n/quit\n", capture_output=True, timeout=120)
        assert second.returncode == 0 and "Hangzhou" in second.stdout, second.stdout + second.stderr
        assert (home / "owner.json").exists()  # the second chat went through the first, which still serves

        chat.stdin.write("/memories Hangzhou\n")
        chat.stdin.flush()
        assert "lives in Hangzhou" in _wait_for_line(said, "Hangzhou")  # the first chat's store holds it
        chat.stdin.write("/quit\n")
        chat.stdin.flush()
        assert chat.wait(60) == 0
        assert not (home / "owner.json").exists()  # gone with its owner
        after = run_cli("search", "where does the user live", "--json", env=env)  # no owner: opens the store
        assert after.returncode == 0 and "Hangzhou" in after.stdout, after.stderr
    finally:
        if chat.poll() is None:
            chat.kill()
        chat.wait(30)
