"""A direct add decides as the memory agent decides (issue 26): ``MemoryBank.add`` / ``remember`` resolve updates
by default (the same statement is stored once, a newer value of a slot replaces the old one, kept for history and
undo), infer the type when none is given, and say what they did -- in Python, the async twin, the store's owner,
the CLI (``add``, ``add --raw``, ``learn``), HTTP and MCP. ``resolve=False`` / ``--raw`` store as given."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from fastapi.testclient import TestClient

from vecmem import AsyncMemoryBank, MemoryBank, Settings
from vecmem.bank import resolving
from vecmem.bank.resolving import Plan, TypeGuess
from vecmem.interfaces.http.app import create_app
from vecmem.interfaces.mcp_server import create_server
from vecmem.interfaces.owner.wire import decode, encode

# ---------------------------------------------------------------------------------------------- Python


@pytest.mark.parametrize(("older", "newer"), [("我住在杭州", "我住在上海"), ("I live in Hangzhou", "I moved to Shanghai")])
def test_a_new_value_of_a_slot_replaces_the_old_one(bank, older, newer):
    first = bank.remember(older)
    assert first.action == "added" and first.replaced == ()
    second = bank.remember(newer)
    assert second.action == "replaced"
    assert second.replaced_ids == (first.record.id,)
    assert second.replaced[0].superseded_by == second.record.id  # as stored now
    assert first.record.id in second.reason
    assert [m.content for m in bank.list_memories()] == [newer]
    assert [h.content for h in bank.search(older, 5)] == [newer]  # the old one is never retrieved again
    assert bank.get(first.record.id).superseded_by == second.record.id  # kept for history


def test_the_memories_a_slot_statement_is_weighed_against_are_not_a_scan_of_the_store(bank, monkeypatch):
    bank.add("我住在杭州")
    bank.add("用户养了一只猫", session_id="s1")  # another session's memory: weighed, and never replaced

    def no_scan(*_args, **_kwargs):
        raise AssertionError("the store was scanned")

    monkeypatch.setattr(type(bank._store), "scan", no_scan)
    result = bank.remember("我住在上海")
    assert result.action == "replaced" and [old.content for old in result.replaced] == ["我住在杭州"]


def test_add_returns_the_stored_record_and_resolves_too(bank):
    old = bank.add("我住在杭州")
    new = bank.add("我住在上海")
    assert type(new).__name__ == "MemoryRecord" and new.content == "我住在上海"
    assert bank.get(old.id).superseded_by == new.id


def test_the_same_statement_twice_is_one_memory(bank):
    first = bank.remember("I prefer concise code")
    again = bank.remember("I prefer concise code")
    assert again.action == "unchanged" and again.record.id == first.record.id
    assert again.reason.startswith(f"already remembered as {first.record.id}")
    assert bank.count() == 1
    assert bank.add("I prefer concise code").id == first.record.id and bank.count() == 1


def test_resolve_false_keeps_both(bank):
    bank.add("我住在杭州")
    raw = bank.remember("我住在上海", resolve=False)
    assert raw.action == "added" and raw.replaced == ()
    assert {m.content for m in bank.list_memories()} == {"我住在杭州", "我住在上海"}
    again = bank.remember("我住在上海", resolve=False)  # the content-derived id still stores it once
    assert again.action == "unchanged" and again.record.id == raw.record.id and bank.count() == 2


@pytest.mark.parametrize(("text", "kind"), [("I prefer concise code", "preference"),
                                            ("Always answer in Chinese", "instruction"),
                                            ("我住在杭州", "fact"),
                                            ("The user keeps bees", "fact")])
def test_the_type_is_inferred_when_none_is_given(bank, text, kind):
    result = bank.remember(text)
    assert result.record.type == kind and result.type_inferred == kind and result.type_reason


def test_a_given_type_is_kept_and_not_reported_as_inferred(bank):
    result = bank.remember("I prefer concise code", memory_type="fact")
    assert result.record.type == "fact" and result.type_inferred is None and result.type_reason == ""


def test_a_replaced_memory_can_be_restored_and_stated_again(bank):
    old = bank.add("我住在杭州")
    new = bank.remember("我住在上海").record
    restored = bank.restore(old.id)  # undo: the old one is current again, the new one replaced by it
    assert restored.superseded_by is None and bank.get(new.id).superseded_by == old.id
    assert [r.id for r in bank.history(new.id)] == [new.id, old.id]
    again = bank.remember("我住在上海")  # stating the newer one again makes it current again
    assert again.action == "replaced" and again.record.id == new.id and again.replaced_ids == (old.id,)
    assert [m.content for m in bank.list_memories()] == ["我住在上海"]


def test_a_session_memory_never_replaces_a_global_one(bank):
    bank.add("我住在杭州")
    scoped = bank.remember("我住在上海", session_id="trip")
    assert scoped.action == "added"
    assert {m.content for m in bank.list_memories(session_id="trip")} == {"我住在杭州", "我住在上海"}


def test_another_users_memories_are_never_replaced(bank):
    bank.add("我住在杭州", user_id="alice")
    assert bank.remember("我住在上海", user_id="bob").action == "added"
    assert [m.content for m in bank.list_memories(user_id="alice")] == ["我住在杭州"]


def test_a_pending_memory_replaces_nothing_until_approved(bank):
    bank.add("I live in Hangzhou")
    waiting = bank.remember("I moved to Shanghai", source="extracted", confidence=0.2)
    assert waiting.action == "added" and waiting.record.status == "pending" and "pending" in waiting.reason
    assert [m.content for m in bank.list_memories()] == ["I live in Hangzhou"]


def test_the_agent_still_decides_once(bank):
    """The agent resolves, then stores with resolve=False: a turn's write is the same as before."""
    learnt = bank.add_messages([{"role": "user", "content": "我住在杭州"}, {"role": "user", "content": "我住在上海"}])
    assert [m.content for m in bank.list_memories()] == ["用户住在上海"]
    assert len(learnt.replaced) == 1


def test_a_resolver_is_handed_in_through_the_constructor(make_bank):
    seen = []

    class Fixed:
        def infer_type(self, content):
            return TypeGuess("conclusion", "always a conclusion")

        def reads_slots(self, content):
            return False

        def decide(self, record, candidates):
            seen.append(record.content)
            return Plan("add", "fixed")

    assert isinstance(Fixed(), resolving.AddResolver)
    bank = make_bank(resolver=Fixed())
    result = bank.remember("我住在杭州")
    assert (result.record.type, result.type_inferred, result.reason, seen) == ("conclusion", "conclusion", "fixed",
                                                                                ["我住在杭州"])
    assert bank.remember("x", resolve=False).reason == "stored as given" and seen == ["我住在杭州"]


def test_the_result_travels_between_processes_and_to_json(bank):
    bank.add("我住在杭州")
    result = bank.remember("我住在上海")
    assert decode(json.loads(json.dumps(encode(result))), trusted=True) == result
    data = result.to_dict()
    assert data["id"] == result.record.id and data["action"] == "replaced"
    assert data["replaced"] == [{"id": result.replaced[0].id, "content": "我住在杭州"}]


def test_the_async_twin_remembers(bank):
    async def run():
        async with AsyncMemoryBank(bank) as abank:
            await abank.add("I live in Hangzhou")
            return await abank.remember("I moved to Shanghai")

    assert asyncio.run(run()).action == "replaced"


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_add_says_what_it_replaced(cli):
    code, out, err = cli("add", "我住在杭州")
    old = out.strip()
    assert code == 0 and err == ""
    code, out, err = cli("add", "我住在上海")
    new = out.strip()
    assert code == 0 and new.startswith("m-") and new != old  # stdout is the id alone, as before
    assert f"replaced {old}" in err and "我住在杭州" in err and f"vecmem restore {old}" in err
    code, out, err = cli("add", "我住在上海")
    assert code == 0 and out.strip() == new and f"already remembered as {new}" in err
    code, out, _ = cli("list", "--json")
    assert [m["content"] for m in json.loads(out)] == ["我住在上海"]


def test_cli_add_gives_each_replaced_memory_its_own_reason(cli):
    first = cli("add", "我住在杭州", "--raw")[1].strip()
    second = cli("add", "我住在北京", "--raw")[1].strip()
    code, _, err = cli("add", "我住在上海")
    said = {line.split()[2]: line for line in err.strip().splitlines()}  # "vecmem: replaced <id> ..."
    assert code == 0 and set(said) == {first, second}
    assert second not in said[first] and first not in said[second]
    assert all("is now 上海" in line for line in said.values())


def test_cli_add_json_reports_the_decision_and_the_inferred_type(cli):
    code, out, err = cli("add", "I prefer concise code", "--json")
    added = json.loads(out)
    assert code == 0 and added["type"] == "preference" and added["type_inferred"] == "preference"
    assert added["action"] == "added" and "stored as a preference" in err
    cli("add", "I live in Hangzhou")
    moved = json.loads(cli("add", "I moved to Shanghai", "--json")[1])
    assert moved["action"] == "replaced" and [r["content"] for r in moved["replaced"]] == ["I live in Hangzhou"]


def test_cli_add_raw_keeps_both(cli):
    cli("add", "我住在杭州")
    code, out, err = cli("add", "我住在上海", "--raw")
    assert code == 0 and err == ""
    code, out, _ = cli("list", "--json")
    assert {m["content"] for m in json.loads(out)} == {"我住在杭州", "我住在上海"}


LEARN_INPUT = "\n".join([
    "你好",
    "我住在杭州",
    "",
    '{"role": "assistant", "content": "好的，记住了"}',
    '{"role": "user", "content": "我住在上海"}',
]) + "\n"


def _check_learnt(code, out, err):
    assert code == 0, err
    assert "learnt" in out and "用户住在上海" in out
    assert "replaced" in out and "skipped line 1" in out


def test_cli_learn_from_a_file(cli, tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text(LEARN_INPUT, encoding="utf-8")
    _check_learnt(*cli("learn", str(path)))
    code, out, _ = cli("list", "--json")
    memories = json.loads(out)
    assert [m["content"] for m in memories] == ["用户住在上海"]
    assert memories[0]["provenance"]["message_ids"] == ["5"]  # its line


def test_cli_learn_from_stdin_and_as_json(cli):
    _check_learnt(*cli("learn", stdin=io.StringIO(LEARN_INPUT)))
    code, out, _ = cli("learn", "-", "--json", stdin=io.StringIO("我住在北京\n嗯嗯\n"))
    learnt = json.loads(out)
    assert code == 0 and [m["content"] for m in learnt["written"]] == ["用户住在北京"]
    assert len(learnt["replaced"]) == 1 and learnt["skipped"][0]["line"] == 2


@pytest.mark.parametrize(("argv", "stdin", "fragment"), [
    (["learn", "no-such-file.txt"], "", "cannot read"),
    (["learn"], "\n\n", "holds no messages"),
    (["learn"], "我住在杭州\n{not json\n", "<stdin>:2: not a JSON message"),
    (["learn"], '{"role": "robot", "content": "hi"}\n', "<stdin>:1 (role)"),
    (["learn"], "[1, 2]\n", None),  # plain text: a user message, not a mistake
])
def test_cli_learn_mistakes_are_one_line(cli, argv, stdin, fragment):
    code, out, err = cli(*argv, stdin=io.StringIO(stdin))
    if fragment is None:
        assert code == 0, err
        return
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ---------------------------------------------------------------------------------------------- HTTP and MCP


def test_http_add_reports_the_replacement(bank):
    api = TestClient(create_app(bank), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                     headers={"X-Vecmem-Request": "1"})
    old = api.post("/memories", json={"content": "I live in Hangzhou"}).json()
    assert old["action"] == "added" and old["type"] == "fact" and old["type_inferred"] == "fact"
    new = api.post("/memories", json={"content": "I moved to Shanghai"})
    assert new.status_code == 201
    body = new.json()
    assert body["action"] == "replaced" and body["replaced"] == [{"id": old["id"], "content": "I live in Hangzhou"}]
    assert old["id"] in body["reason"]
    same = api.post("/memories", json={"content": "I moved to Shanghai"}).json()
    assert same["action"] == "unchanged" and same["id"] == body["id"]
    raw = api.post("/memories", json={"content": "I moved to Beijing", "type": "fact", "resolve": False}).json()
    assert raw["action"] == "added" and raw["type_inferred"] is None
    assert {m["content"] for m in api.get("/memories").json()} == {"I moved to Shanghai", "I moved to Beijing"}
    schema = api.get("/openapi.json").json()["components"]["schemas"]
    for name in ("AddedOut", "ReplacedMemoryOut"):
        assert all(field.get("description") for field in schema[name]["properties"].values()), name


def test_mcp_remember_reports_the_replacement(bank):
    server = create_server(bank)

    def call(arguments):
        return asyncio.run(server.call_tool("remember", arguments)).structured_content

    old = call({"content": "用户住在杭州"})
    assert old["action"] == "added" and old["type_inferred"] == "fact"
    new = call({"content": "用户住在上海"})
    assert new["action"] == "replaced" and new["replaced"] == [{"id": old["id"], "content": "用户住在杭州"}]
    assert call({"content": "用户住在上海"})["action"] == "unchanged"
    assert call({"content": "The user prefers concise code"})["type"] == "preference"


def test_a_bank_of_its_own_settings_resolves_by_default(tmp_path):
    """No fixture: what an application gets from MemoryBank(...) (the registered resolver, the agent's)."""
    from tests.conftest import FakeEmbedder
    from vecmem.storage.memory import InMemoryStore

    bank = MemoryBank(Settings(home=tmp_path), embedder=FakeEmbedder(), store=InMemoryStore(model_name="fake"),
                      verify_model=False)
    bank.add("I live in Hangzhou")
    assert bank.remember("I moved to Shanghai").action == "replaced"
    bank.close()
