"""The programs that stay (`vecmem mcp`, `vecmem serve`, `vecmem proxy`, the chat) stop with exit status 0 and a
clean stderr at the end of their input, on SIGTERM and on Ctrl-C (SIGINT), in a loop: VECMEM_EXIT_ROUNDS rounds
(default 2) of each. `vecmem mcp` and the chat are stopped right after their first answer, while the warm-up may
still be loading the model (a thread left inside native code at exit aborted the process: exit 134, "terminate
called without an active exception"). The servers do not read stdin: closing it leaves them serving, and the
signal that follows stops them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration.conftest import VENV_BIN, cli_env

ROUNDS = int(os.environ.get("VECMEM_EXIT_ROUNDS", "2"))
STOPS = ("eof", "SIGTERM", "SIGINT")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _send(process: subprocess.Popen, message: dict) -> None:
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def _start_mcp(env: dict[str, str]) -> subprocess.Popen:
    process = subprocess.Popen([str(VENV_BIN / "vecmem"), "mcp"], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _send(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
    assert b'"id":1' in process.stdout.readline()
    _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "remember", "arguments": {"content": "The user drinks green tea"}}})
    assert b'"id":2' in process.stdout.readline()
    return process


def _start_chat(env: dict[str, str]) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "vecmem.chat"], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert b"vecmem chat" in process.stdout.readline()
    return process


def _start_server(command: str, env: dict[str, str]) -> subprocess.Popen:
    port = _free_port()
    process = subprocess.Popen([str(VENV_BIN / "vecmem"), command, "--port", str(port)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    path = "/v1/models" if command == "proxy" else "/openapi.json"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5)
            break
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP answer (the proxy's model server is not there: 502)
                break
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
            time.sleep(0.2)
    return process


def _stop(process: subprocess.Popen, how: str) -> tuple[int, str]:
    process.stdin.close()  # every way starts with the client gone; the servers go on serving after it
    if how != "eof":
        if process.args[-3:-2] in (["serve"], ["proxy"]):
            time.sleep(0.3)
            assert process.poll() is None, "a server stopped when its stdin closed"
        process.send_signal(getattr(signal, how))
    try:
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return code, process.stderr.read().decode(errors="replace")


@pytest.mark.parametrize("program", ["mcp", "chat", "serve", "proxy"])
def test_each_program_stops_cleanly_at_eof_sigterm_and_sigint(program, tmp_path):
    env = cli_env(tmp_path / "home", OPENAI_BASE_URL="http://127.0.0.1:9/v1",
                  PYTHONUNBUFFERED="1")
    if program != "proxy":
        env = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
    results = []
    for round_number in range(ROUNDS):
        for how in STOPS:
            if how == "eof" and program in ("serve", "proxy"):
                continue  # they do not read stdin (systemd and nohup start them with none): a signal stops them
            started = {"mcp": lambda: _start_mcp(env), "chat": lambda: _start_chat(env)}.get(
                program, lambda: _start_server(program, env))()
            code, errors = _stop(started, how)
            results.append((round_number, how, code))
            assert code == 0, f"{program} {how} round {round_number}: exit {code}\n{errors}"
            assert "terminate called" not in errors and "Traceback" not in errors and "Fatal" not in errors, errors
    print(f"{program}: {len(results)} stops, all exit 0: {results}")
