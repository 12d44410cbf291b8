"""The write decision with a model, through the real openai client against a scripted server on 127.0.0.1: the
prompt shows the candidates with their aliases and days and asks for a contradiction; the reply becomes the same
kind of plan the rules make, and one that would drop the new value is refused."""

from __future__ import annotations

import json
import re

from tests.chat_server import Reply, ScriptedChatServer
from vecmem import MemoryBank, Settings
from vecmem.agent.llm import OpenAIChatModel
from vecmem.agent.writing.learn import Learner


def _item(content: str, action: str, target: int | None) -> dict:
    return {"content": content, "type": "fact", "importance": 0.5, "tags": [], "scope": "global",
            "confidence": 0.9, "action": action, "target": target}


def test_the_model_decides_by_contradiction_and_never_drops_a_new_value(tmp_path):
    prompts: list[str] = []

    def responder(kind: str, body: dict) -> Reply:
        assert kind == "extract", kind
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        prompts.append(system + "\n" + user)
        said = user.split("Exchange:\nUser: ")[1].split("\n")[0]
        paris = re.search(r"\[(\d+)\] \([^)]*\) The user lives in Paris", user)
        alias = int(paris.group(1)) if paris else None
        if said.startswith("Host web-02"):  # a careless model calls it a repeat of web-01
            return Reply(json.dumps({"memories": [_item("Host web-02 runs nginx 1.26", "NONE", 0)]}))
        if said.startswith("I used to live in Paris"):
            return Reply(json.dumps({"memories": [_item("The user lives in Rome (used to live in Paris)", "UPDATE",
                                                        alias)]}))
        if said == "I live in Paris":
            return Reply(json.dumps({"memories": [_item("The user lives in Paris", "NONE", alias)]}))
        return Reply(json.dumps({"memories": [_item(said, "ADD", None)]}))

    settings = Settings.from_env().with_changes(home=tmp_path, chroma_url=None, embed_model="hashed:384",
                                                cold_start=False)
    with ScriptedChatServer(responder) as server, MemoryBank(settings, learner=Learner(
            model=OpenAIChatModel(model="scripted", base_url=server.base_url, timeout=10.0))) as bank:
        web01 = bank.add("Host web-01 runs nginx 1.24")
        result = bank.add_messages("Host web-02 runs nginx 1.26")
        assert [m.content for m in result.written] == ["Host web-02 runs nginx 1.26"]  # refused: a new value
        assert not bank.get(web01.id).superseded
        shown = prompts[-1]
        assert re.search(r"\[0\] \(fact, \d{4}-\d{2}-\d{2}\) Host web-01 runs nginx 1\.24", shown)
        assert "contradicts" in shown and "never by similarity" in shown

        paris = bank.add("The user lives in Paris")
        again = bank.add_messages("I live in Paris")  # the same claim: NONE is kept, nothing is written
        assert again.written == () and again.unchanged == (paris.id,)
        moved = bank.add_messages("I used to live in Paris, now I'm in Rome")
        (rome,) = moved.written
        assert bank.get(paris.id).superseded_by == rome.id and "Paris" in rome.content
        assert [m.content for m in bank.list_memories() if "Paris" in m.content] == [rome.content]
