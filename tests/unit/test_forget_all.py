"""``forget_all``: every memory of a user, or of one of its sessions, deleted for good, on every path (Python, the
CLI with its confirmation, HTTP with the keys' users, MCP), and nothing of anyone else touched."""

from __future__ import annotations

import asyncio
import io

import pytest
from fastapi.testclient import TestClient

from vecmem import InvalidInputError, MemoryRecord
from vecmem.interfaces.http.app import create_app
from vecmem.interfaces.http.keys import KeyStore, keys_path
from vecmem.interfaces.mcp_server import create_server
from vecmem.models import STATUSES

EVERY = {"include_superseded": True, "statuses": STATUSES}


def _everything(bank, user):
    return {record.id: record for record in bank.list_memories(user_id=user, **EVERY)}


def _populate(bank, user):
    """Memories in every state: live, superseded, edited (with a revision), pending, archived, in two sessions;
    the ones searched have access statistics. Returns {name: id}."""
    ids = {}
    ids["tea"] = bank.add(f"{user} prefers green tea", user_id=user, memory_type="preference").id
    ids["old"] = bank.add(f"{user} writes TypeScript", user_id=user).id
    ids["new"] = bank.add(f"{user} writes JavaScript now", user_id=user).id
    bank.supersede(ids["old"], ids["new"], user_id=user)
    ids["edited"] = bank.add(f"{user} lives in Hangzhou", user_id=user).id
    bank.update(ids["edited"], user_id=user, content=f"{user} lives in Shanghai")
    ids["pending"] = bank.add(f"{user} may like jazz", user_id=user, source="extracted", confidence=0.2).id
    ids["archived"] = bank.add(f"{user} once liked opera", user_id=user, status="archived").id
    ids["s1"] = bank.add(f"{user} debugs the login page today", user_id=user, session_id="s1").id
    bank.update(ids["s1"], user_id=user, content=f"{user} debugs the signup page today")
    ids["s1-old"] = bank.add(f"{user} uses port 8080 in this task", user_id=user, session_id="s1").id
    ids["s1-new"] = bank.add(f"{user} uses port 9090 in this task", user_id=user, session_id="s1").id
    bank.supersede(ids["s1-old"], ids["s1-new"], user_id=user)
    ids["s2"] = bank.add(f"{user} plans the release in this session", user_id=user, session_id="s2").id
    assert bank.search(f"{user} green tea", user_id=user)  # access statistics recorded
    bank.search(f"{user} login signup page", user_id=user, session_id="s1")
    return ids


@pytest.mark.stores("memory", "embedded")  # the embedded run reads Chroma's raw rows (slow lane)
def test_forget_all_deletes_every_memory_of_the_user_and_nothing_else(make_bank):
    bank = make_bank()
    _populate(bank, "alice")
    _populate(bank, "bob")
    alice, bob = _everything(bank, "alice"), _everything(bank, "bob")
    assert any("@v" in memory_id for memory_id in alice)  # the edits' revisions are there to be deleted
    assert bank.forget_all("alice") == len(alice) == bank.stats(user_id="bob").count
    assert _everything(bank, "alice") == {} and bank.count(user_id="alice") == 0
    assert bank.search("alice green tea", user_id="alice") == [] and bank.review_queue(user_id="alice") == []
    assert bank.search("alice login page", user_id="alice", session_id="s1") == []
    assert bank.forget_all("alice") == 0  # again: nothing left, no error
    # bob, with the same kinds of memories and colliding ids for none of them, is exactly as he was
    after = _everything(bank, "bob")
    assert after.keys() == bob.keys()
    assert {i: (r.content, r.superseded_by, r.status, r.access_count) for i, r in after.items()} == {
        i: (r.content, r.superseded_by, r.status, r.access_count) for i, r in bob.items()}
    assert bank.search("bob green tea", user_id="bob")[0].content == "bob prefers green tea"
    # alice starts again from nothing: no access statistics survive for a re-added memory
    again = bank.add("alice prefers green tea", user_id="alice", memory_type="preference")
    assert bank.get(again.id, user_id="alice").access_count == 0


def test_a_new_bank_on_the_same_store_sees_nothing_of_the_user(make_bank):
    bank = make_bank()
    _populate(bank, "alice")
    other = make_bank()  # another process's copies learn through the change feed
    assert other.search("alice green tea", user_id="alice")
    bank.forget_all("alice")
    assert other.search("alice green tea", user_id="alice") == []
    other.close()


def test_forget_all_of_a_session_deletes_its_scope_only(bank):
    ids = _populate(bank, "alice")
    _populate(bank, "bob")
    before = _everything(bank, "alice")
    in_s1 = {memory_id for memory_id, record in before.items() if record.scope == "s1"}
    assert {ids["s1"], ids["s1-old"], ids["s1-new"]} < in_s1  # the edit's revision is in s1 too
    assert bank.forget_all("alice", session_id="s1") == len(in_s1)
    left = _everything(bank, "alice")
    assert left.keys() == before.keys() - in_s1
    assert ids["s2"] in left and ids["tea"] in left and left[ids["old"]].superseded_by == ids["new"]
    seen_in_s1 = bank.search("alice login signup page port", k=20, user_id="alice", session_id="s1")
    assert seen_in_s1 and {hit.record.scope for hit in seen_in_s1} == {"global"}  # global ones still seen there
    assert any(r.scope == "s1" for r in _everything(bank, "bob").values())


def test_a_memory_outside_the_session_is_never_left_pointing_at_a_deleted_one(bank):
    """The scope rule forbids a global memory replaced by a session's, but an older store may hold one: it is
    handed to the first successor that survives, or is live again."""
    def record(memory_id, content, scope="global", superseded_by=None):
        return MemoryRecord(id=memory_id, content=content, user_id="alice", scope=scope, superseded_by=superseded_by,
                            created_at=bank._clock())

    bank.add_records([
        record("g-old", "alice writes Perl", superseded_by="s-mid"),
        record("s-mid", "alice writes Ruby this time", scope="s1", superseded_by="g-new"),
        record("g-new", "alice writes Go"),
        record("g-alone", "alice writes Lua", superseded_by="s-head"),
        record("s-head", "alice writes Zig this time", scope="s1"),
    ])
    assert bank.forget_all("alice", session_id="s1") == 2
    left = _everything(bank, "alice")
    assert left["g-old"].superseded_by == "g-new" and left["g-alone"].superseded_by is None
    assert {hit.id for hit in bank.search("alice writes", k=10, user_id="alice")} == {"g-new", "g-alone"}


@pytest.mark.parametrize(("user", "options", "field"), [
    (None, {}, "user_id"), ("", {}, "user_id"), (" alice", {}, "user_id"),
    ("alice", {"session_id": "global"}, "session_id"), ("alice", {"session_id": ""}, "session_id"),
])
def test_bad_user_or_session_is_refused(bank, user, options, field):
    bank.add("alice prefers green tea", user_id="alice")
    with pytest.raises(InvalidInputError) as refused:
        bank.forget_all(user, **options)
    assert refused.value.field == field and bank.count(user_id="alice") == 1


# ---------------------------------------------------------------------------------------------- CLI


class Terminal(io.StringIO):
    """What the person types at a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli(cli):
    """The in-process command (tests/conftest.py) on a store holding two users' memories, one in a session."""
    invoke = cli
    for user in ("alice", "bob"):
        for text in ("prefers green tea", "lives in Hangzhou"):
            assert invoke("add", f"{user} {text}", "--user", user)[0] == 0
        assert invoke("add", f"{user} debugs the login page", "--user", user, "--session", "s1")[0] == 0
    invoke.count = lambda user: len(_listed(invoke, user))
    return invoke


def _listed(cli, user):
    import json

    code, out, err = cli("list", "--user", user, "--include-superseded", "--json")
    assert code == 0, err
    return json.loads(out)


def test_cli_forget_all_with_yes_deletes_the_user_s_memories_only(cli):
    code, out, err = cli("forget", "--all", "--user", "alice", "--yes")
    assert (code, err) == (0, "") and out == "forgot 3 memories of user 'alice'\n"
    assert cli.count("alice") == 0 and cli.count("bob") == 3


def test_cli_forget_all_of_a_session(cli):
    code, out, _ = cli("forget", "--all", "--user", "alice", "--session", "s1", "-y")
    assert code == 0 and "1 memories of user 'alice' in session 's1'" in out
    assert [m["content"] for m in _listed(cli, "alice")] == ["alice lives in Hangzhou", "alice prefers green tea"]


def test_cli_forget_all_refuses_without_a_terminal_or_yes(cli):
    code, out, err = cli("forget", "--all", "--user", "alice")  # stdin is a pipe, not a terminal
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "--yes" in err
    assert cli.count("alice") == 3


def test_cli_forget_all_asks_at_a_terminal_for_the_user_id(cli):
    code, out, err = cli("forget", "--all", "--user", "alice", stdin=Terminal("alice\n"))
    assert code == 0, err
    assert "This deletes 3 memories of user 'alice'" in out and "Type the user id (alice) to confirm" in out
    assert cli.count("alice") == 0 and cli.count("bob") == 3
    code, out, err = cli("forget", "--all", "--user", "bob", "--session", "s1", stdin=Terminal("bob\n"))
    assert code == 0 and "This deletes 1 memories of user 'bob' in session 's1'" in out
    assert cli.count("bob") == 2


@pytest.mark.parametrize("answer", ["y\n", "yes\n", "ALICE\n", "\n", ""])
def test_cli_forget_all_does_nothing_unless_the_user_id_is_typed(cli, answer):
    code, _, err = cli("forget", "--all", "--user", "alice", stdin=Terminal(answer))
    assert code == 2 and "nothing was deleted" in err and len(err.splitlines()) == 1
    assert cli.count("alice") == 3


@pytest.mark.parametrize("argv", [
    ("forget",), ("forget", "--all", "m-1", "--yes"), ("forget", "m-1", "--session", "s1"), ("forget", "m-1", "-y"),
])
def test_cli_forget_usage_mistakes(cli, argv):
    code, out, err = cli(*argv, "--user", "alice")
    assert code == 2 and out == "" and err.startswith("vecmem: error:")
    assert cli.count("alice") == 3


def test_cli_forget_by_id_still_works(cli):
    memory_id = _listed(cli, "alice")[0]["id"]
    code, out, _ = cli("forget", memory_id, "--user", "alice")
    assert code == 0 and out.startswith(f"forgot {memory_id}: ")
    assert cli.count("alice") == 2


# ---------------------------------------------------------------------------------------------- HTTP


def _client(app, **headers):
    return TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                      headers={"X-Vecmem-Request": "1", **headers})


def test_http_delete_every_memory_of_a_user(bank):
    _populate(bank, "alice")
    _populate(bank, "bob")
    api = _client(create_app(bank))
    in_s1 = sum(1 for r in _everything(bank, "alice").values() if r.scope == "s1")
    erased = api.delete("/users/alice/memories", params={"session_id": "s1"})
    assert erased.status_code == 200 and erased.json() == {"user_id": "alice", "session_id": "s1", "deleted": in_s1}
    left = len(_everything(bank, "alice"))
    assert api.delete("/users/alice/memories").json() == {"user_id": "alice", "session_id": None, "deleted": left}
    assert _everything(bank, "alice") == {} and _everything(bank, "bob")
    refused = api.delete("/users/alice/memories", params={"session_id": "global"})
    assert refused.status_code == 422 and refused.json()["field"] == "session_id"
    no_header = _client(create_app(bank)).delete("/users/bob/memories", headers={"X-Vecmem-Request": "0"})
    assert no_header.status_code == 403 and _everything(bank, "bob")


def test_http_a_user_key_deletes_only_its_own_user(bank):
    _populate(bank, "alice")
    _populate(bank, "bob")
    keys = KeyStore(keys_path(bank.settings.home))
    bob_key = keys.create("bob")[1]
    app = create_app(bank, keys=keys)
    as_bob = _client(app, Authorization=f"Bearer {bob_key}")
    refused = as_bob.delete("/users/alice/memories")
    assert refused.status_code == 403 and refused.json()["field"] == "user_id"
    assert as_bob.delete("/users/alice/memories", params={"user": "alice"}).status_code == 403
    assert _client(app).delete("/users/bob/memories").status_code == 401  # no key at all
    assert len(_everything(bank, "alice")) > 0 and len(_everything(bank, "bob")) > 0
    assert as_bob.delete("/users/bob/memories").json()["deleted"] > 0
    assert _everything(bank, "bob") == {} and _everything(bank, "alice")
    keys.close()


# ---------------------------------------------------------------------------------------------- MCP


def test_mcp_forget_all_is_marked_destructive_and_needs_the_user(bank):
    from mcp.server.mcpserver.exceptions import ToolError

    _populate(bank, "alice")
    _populate(bank, "bob")
    server = create_server(bank)
    tool = next(t for t in asyncio.run(server.list_tools()) if t.name == "forget_all")
    assert tool.annotations.destructive_hint is True and tool.annotations.read_only_hint is False
    assert "user_id" in tool.input_schema["required"] and tool.description
    with pytest.raises(ToolError):
        asyncio.run(server.call_tool("forget_all", {}))
    expected = len(_everything(bank, "alice"))
    result = asyncio.run(server.call_tool("forget_all", {"user_id": "alice"})).structured_content
    assert result == {"user_id": "alice", "session_id": None, "deleted": expected}
    assert _everything(bank, "alice") == {} and _everything(bank, "bob")
