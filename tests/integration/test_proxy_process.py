"""`vecmem proxy` as the installed command, with the real embedding model, in front of a scripted chat-completions
server: the openai Python SDK and the official openai npm package (run by node: a client in another language) each
hold a conversation through it, and the second request of each, as the model server got it, carries the memory
the first one taught."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import openai
import pytest

from tests.chat_server import ScriptedChatServer
from tests.conftest import REPO, _free_port
from tests.integration.conftest import VENV_BIN, cli_env, run_cli
from tests.proxy_script import ANSWER, FACT, QUESTION, carries, remembering_upstream
from vecmem.retrieval.budget import LONG_TERM_HEADER

NODE_CLIENT = REPO / "tests" / "node"
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH", "network")


@dataclass
class Running:
    server: ScriptedChatServer
    url: str
    process: subprocess.Popen

    def answered(self) -> list[dict]:
        """The requests the model server got to answer (not the proxy's learning calls), in order."""
        return [body for kind, body in self.server.requests if kind == "answer"]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    with ScriptedChatServer(remembering_upstream) as server:
        port = _free_port()
        env = cli_env(tmp_path_factory.mktemp("proxy-home"), OPENAI_BASE_URL=server.base_url,
                      OPENAI_API_KEY="server-key", VECMEM_CHAT_MODEL="scripted-model")
        process = subprocess.Popen([str(VENV_BIN / "vecmem"), "proxy", "--port", str(port)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running = Running(server, f"http://127.0.0.1:{port}/v1", process)
        try:
            _wait_for(running)
            yield running
        finally:
            process.terminate()
            process.wait(60)


def _wait_for(running: Running) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(running.url + "/models", timeout=5).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            assert running.process.poll() is None, running.process.stderr.read()
            assert time.monotonic() < deadline, "vecmem proxy did not start"
            time.sleep(0.2)


@pytest.mark.parametrize("streamed_first", [False, True], ids=["whole-then-streamed", "streamed-then-whole"])
def test_the_python_sdk_talks_to_the_proxy_and_the_second_request_carries_the_first_ones_memory(proxy,
                                                                                              streamed_first):
    client = openai.OpenAI(base_url=proxy.url, api_key="unused", max_retries=0)
    user = f"py-{int(streamed_first)}"

    def ask(messages, stream):
        if not stream:
            return client.chat.completions.create(model="scripted-model", messages=messages, user=user) \
                .choices[0].message.content
        chunks = client.chat.completions.create(model="scripted-model", messages=messages, stream=True,
                                                extra_headers={"X-Vecmem-User": user})
        return "".join(chunk.choices[0].delta.content or "" for chunk in chunks)

    before = len(proxy.answered())
    history = [{"role": "user", "content": FACT}]
    history.append({"role": "assistant", "content": ask(history, streamed_first)})
    history.append({"role": "user", "content": QUESTION})
    assert ask(history, not streamed_first) == ANSWER

    first, second = proxy.answered()[before:]
    assert first["messages"] == history[:1]
    memory = second["messages"].pop(-2)  # just before the message it was recalled for
    assert carries({"messages": [memory]}) and memory["content"].startswith(LONG_TERM_HEADER)
    assert second["messages"] == history


def _node_client() -> None:
    """Install the openai npm package into tests/node when it is missing (skip only when npm cannot reach the
    registry)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    if (NODE_CLIENT / "node_modules" / "openai" / "package.json").is_file():
        return
    installed = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_CLIENT,
                               capture_output=True, text=True, timeout=600)
    if installed.returncode != 0:
        said = installed.stderr.strip() or installed.stdout.strip()
        if any(sign in said for sign in _OFFLINE):
            pytest.skip(f"npm could not reach the registry to install openai: {said.splitlines()[-1]}")
        pytest.fail(f"npm install failed: {said}")


def test_the_openai_npm_package_talks_to_the_proxy_streaming_included(proxy):
    _node_client()
    before = len(proxy.answered())
    ran = subprocess.run(["node", "proxy_client.mjs", proxy.url, "node-alice"], cwd=NODE_CLIENT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout)
    assert said["first"] == ANSWER and said["streamed"] == ANSWER and said["chunks"] > 1
    assert said["firstMemories"] == "" and said["streamedMemories"]  # the second request carried a memory
    error = said["error"]
    assert error["rateLimitError"] and error["status"] == 429 and error["retryAfter"] == "7"
    assert "answered 429" in error["message"]

    first, second, refused = proxy.answered()[before:]
    assert first["user"] == "node-alice" and not carries(first)
    assert second["stream"] is True and carries(second)
    assert [*second["messages"][:-2], second["messages"][-1]] == [
        *first["messages"], {"role": "assistant", "content": ANSWER}, {"role": "user", "content": QUESTION}]
    assert refused["messages"][-1]["content"] == "Please rate limit me"


def test_without_a_model_server_the_command_says_so_in_one_line(tmp_path):
    refused = run_cli("proxy", env={**cli_env(tmp_path / "home"), "OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "OPENAI_BASE_URL" in refused.stderr
