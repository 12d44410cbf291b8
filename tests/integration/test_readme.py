"""The README's examples run as written: the Python API, the agent loop, several workers, asyncio, LangGraph and
LangChain."""

import json
import re

from tests.conftest import REPO


def _example(heading: str) -> str:
    """The one Python block of the README section with this heading (## or ###), up to the next heading."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (section,) = re.findall(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ )", readme, re.S | re.M)
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return example


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    example = _example("Python API")
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    namespace: dict = {}
    exec(compile(example, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "concise coding style" in printed
    pack = namespace["pack"]
    assert set(pack.tokens) == {"system", "long_term", "short_term", "current"}
    assert "after wake from sleep" in pack.long_term


def test_readme_agent_loop_runs_against_a_chat_completions_server(tmp_path, monkeypatch, capsys):
    import json

    from tests.chat_server import Reply, ScriptedChatServer

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S)
                  if "OpenAI(" in block and "MemoryBank()" in block]

    def responder(kind, body):
        messages = body["messages"]
        if messages[0]["content"].startswith("Reply with one short sentence"):
            said = messages[-1]["content"]
            return Reply("The user is allergic to peanuts." if "peanut" in said else "NONE")
        return Reply(json.dumps([m["content"] for m in messages]))  # the answer shows what the model was sent

    with ScriptedChatServer(responder) as server:
        monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        namespace: dict = {}
        exec(compile(example, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    second_call = json.loads(printed[1].removeprefix("assistant: "))
    assert any("allergic to peanuts" in text for text in second_call)  # learnt in turn one, recalled in two
    assert [r.content for r in namespace["bank"].list_memories()] == ["The user is allergic to peanuts."]


def test_readme_proxy_example_runs_through_the_proxy(tmp_path, capsys, real_embedder):
    """The 'Memory proxy' block, against the proxy on this run's port in front of a scripted model server: the
    second request reaches the model with the memory the first one taught."""
    from tests.chat_server import ScriptedChatServer
    from tests.conftest import serving
    from tests.proxy_script import ANSWER, LEARNT, carries, remembering_upstream
    from vecmem import MemoryBank, Settings
    from vecmem.agent.llm import ChatCompletions
    from vecmem.interfaces.proxy.server import create_proxy_app

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "8766/v1" in block]
    with ScriptedChatServer(remembering_upstream) as server:
        bank = MemoryBank(Settings(home=tmp_path / "home", openai_base_url=server.base_url, openai_api_key="key",
                                   chat_model="scripted-model"), embedder=real_embedder)
        app = create_proxy_app(bank, ChatCompletions(base_url=server.base_url, api_key="key"))
        with serving(app, ready="/") as port:
            exec(compile(example.replace("8766", str(port)), "README.md", "exec"), {})
        answered = [body for kind, body in server.requests if kind == "answer"]
    assert capsys.readouterr().out.splitlines() == [f"assistant: {ANSWER}"] * 2
    first, second = answered
    assert not carries(first) and carries(second)
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "system", "user"]
    assert second["messages"][0]["content"] == "You are a friendly hiking guide." and second["user"] == "alice"
    assert [record.content for record in bank.list_memories(user_id="alice")] == [LEARNT]
    bank.close()


def test_readme_several_workers_example_runs(tmp_path, chroma_server, postgres_server, state_schema):
    """The 'Several processes' shell block, with this run's Chroma server, PostgreSQL, ports and folders: the
    second worker finds what the first one stored."""
    import os
    import subprocess
    import uuid

    from tests.conftest import VENV_BIN, _free_port

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", readme, re.S) if b.startswith("# several workers")]
    first, second = _free_port(), _free_port()
    script = (block.replace("http://127.0.0.1:8000", chroma_server)
              .replace("postgresql://vecmem@127.0.0.1:5432/vecmem", postgres_server)
              .replace("8001", str(first)).replace("8002", str(second)).replace("/srv/vecmem", str(tmp_path)))
    environment = {key: value for key, value in os.environ.items() if not key.startswith("VECMEM_")}
    environment.update(PATH=f"{VENV_BIN}:{environment.get('PATH', '')}", VECMEM_DATABASE_SCHEMA=state_schema,
                       VECMEM_CHROMA_DATABASE=f"readme-{uuid.uuid4().hex[:12]}")
    finished = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, env=environment)
    assert finished.returncode == 0, finished.stderr[-3000:]
    added, found = (json.loads(line) for line in finished.stdout.splitlines() if line.startswith(("{", "[")))
    assert added["content"] == "The user deploys on Fridays"
    assert [hit["id"] for hit in found] == [added["id"]]


def _run_example(heading: str, tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    namespace: dict = {}
    exec(compile(_example(heading), "README.md", "exec"), namespace)
    return namespace


def test_readme_asyncio_example_runs(tmp_path, monkeypatch, capsys):
    _run_example("asyncio", tmp_path, monkeypatch)
    content, long_term_tokens = capsys.readouterr().out.strip().rsplit(" ", 1)
    assert content == "The user is allergic to peanuts" and int(long_term_tokens) > 0


def test_readme_langgraph_example_runs(tmp_path, monkeypatch, capsys):
    namespace = _run_example("LangGraph store", tmp_path, monkeypatch)
    assert capsys.readouterr().out.splitlines() == ["['I am allergic to peanuts']", "[('memories', 'alice')]"]
    (memory,) = namespace["store"].bank.list_memories(user_id="alice")
    assert (memory.content, memory.session_id) == ("I am allergic to peanuts", "memories")


def test_readme_langchain_example_runs(tmp_path, monkeypatch, capsys):
    _run_example("LangChain retriever", tmp_path, monkeypatch)
    (line,) = capsys.readouterr().out.splitlines()
    score, content = line.split("  ", 1)
    assert content == "The user deploys on Fridays after the team sync" and 0 < float(score) <= 1
