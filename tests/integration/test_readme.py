"""The Python example in the README runs as written."""

import re

from tests.conftest import REPO


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S)
                  if "MemoryBank()" in block and "OpenAI(" not in block]
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
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "OpenAI(" in block]

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
