"""The programs that stay (`vecmem mcp`, `vecmem serve`, `vecmem proxy`, the chat) stop with exit status 0 and a
clean stderr at the end of their input, on SIGTERM and on Ctrl-C (SIGINT), in a loop: VECMEM_EXIT_ROUNDS rounds
(default 2) of each. `vecmem mcp` and the chat are stopped right after their first answer, while the warm-up may
still be loading the model (a thread left inside native code at exit aborted the process: exit 134, "terminate
called without an active exception"). The servers do not read stdin: closing it leaves them serving, and the
signal that follows stops them. Nothing reaches stderr but the programs' own lines (``_foreign``): no
"Exception ignored", no traceback. VECMEM_EXIT_HOGS=N runs N busy processes beside the loop, as a loaded machine
does (the issue's check: VECMEM_EXIT_ROUNDS=20 VECMEM_EXIT_HOGS=4). `vecmem mcp` reading requests from a pipe
that then closes answers every one of them before it exits."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration.conftest import VENV_BIN, cli_env

ROUNDS = int(os.environ.get("VECMEM_EXIT_ROUNDS", "2"))
HOGS = int(os.environ.get("VECMEM_EXIT_HOGS", "0"))
STOPS = ("eof", "SIGTERM", "SIGINT")
# what the programs themselves write to stderr: their own lines, and the logging of the servers they run
OWN_LINES = re.compile(r"^(vecmem|INFO:|WARNING:|\s*$)")


def _foreign(errors: str) -> list[str]:
    """The lines of stderr that no program of vecmem's wrote: the interpreter's, a library's at exit."""
    return [line for line in errors.splitlines() if not OWN_LINES.match(line)]


@pytest.fixture(scope="module")
def busy_machine():
    """HOGS processes that keep a core each busy while the module's tests run."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    yield
    for hog in hogs:
        hog.terminate()
        hog.wait()


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
def test_each_program_stops_cleanly_at_eof_sigterm_and_sigint(program, tmp_path, busy_machine):
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
            assert not _foreign(errors), f"{program} {how} round {round_number}: stderr\n{errors}"
    print(f"{program}: {len(results)} stops, all exit 0: {results}")


def test_mcp_answers_every_request_it_read_before_its_input_ended(tmp_path, busy_machine):
    env = {k: v for k, v in cli_env(tmp_path / "home").items() if not k.startswith("OPENAI_")}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "three", "method": "tools/call", "params": {
            "name": "remember", "arguments": {"content": "The user plays the cello"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "recall", "arguments": {"query": "which instrument?"}}},
    ]
    piped = "".join(json.dumps(request) + "\n" for request in requests).encode()
    done = subprocess.run([str(VENV_BIN / "vecmem"), "mcp"], env=env, input=piped, capture_output=True, timeout=180)
    answers = {json.loads(line)["id"]: json.loads(line) for line in done.stdout.splitlines() if line.strip()}
    assert sorted(answers, key=str) == [1, 2, 4, "three"], done.stdout
    assert all("result" in answer for answer in answers.values()), answers  # answers, not "connection closed"
    assert "cello" in json.dumps(answers["three"]["result"])
    assert done.returncode == 0 and not _foreign(done.stderr.decode()), done.stderr.decode()
