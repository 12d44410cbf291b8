"""One local owner: the process that holds a store serves it to the others (vecmem/interfaces/owner/endpoint.py,
remote.py, opening.py), here on the in-memory store with the fake embedder; tests/integration/test_owner_process.py
runs the real chat, commands and panel as processes."""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from tests.conftest import REPO
from vecmem import MemoryBank, Settings, Turn
from vecmem.errors import ConflictError, InvalidInputError, NotFoundError, StoreError, StoreInUseError
from vecmem.interfaces.cli.main import main as cli_main
from vecmem.interfaces.owner import opening, remote
from vecmem.interfaces.owner.endpoint import OwnerEndpoint
from vecmem.interfaces.owner.handover import long_running_bank
from vecmem.interfaces.owner.opening import find_owner, open_bank
from vecmem.interfaces.owner.remote import RemoteBank
from vecmem.interfaces.owner.wire import OwnerInfo, encode, read_owner


@pytest.fixture
def owned(make_bank, settings):
    """A bank on the test's store, served by an owner endpoint as a long-running process serves its store."""
    bank = make_bank()
    with OwnerEndpoint(bank, settings.home, program="vecmem serve") as endpoint:
        yield bank, endpoint


@pytest.fixture
def client(owned, settings):
    remote_bank = find_owner(settings)
    assert remote_bank is not None
    yield remote_bank
    remote_bank.close()


def raw_call(info: OwnerInfo, body: object, *, secret: str | None = None, path="/call", method="POST",
             headers=None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", info.port, timeout=10)
    sent = {"Authorization": f"Bearer {info.secret if secret is None else secret}", **(headers or {})}
    connection.request(method, path, json.dumps(body).encode(), sent)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, json.loads(data) if data else {}


def test_owner_json_is_private_says_where_the_owner_answers_and_goes_when_it_stops(make_bank, settings):
    bank = make_bank()
    endpoint = OwnerEndpoint(bank, settings.home, program="vecmem serve").start()
    path = settings.home / "owner.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = json.loads(path.read_text())
    assert set(written) == {"pid", "port", "secret", "program", "started"}
    assert written["pid"] == os.getpid() and written["program"] == "vecmem serve" and len(written["secret"]) >= 43
    assert read_owner(settings.home) == endpoint.info
    assert [p.name for p in settings.home.iterdir() if p.name.startswith(".owner")] == []  # no temporary left
    endpoint.stop()
    assert not path.exists()
    assert find_owner(settings) is None


def test_a_second_owner_gets_a_new_secret_and_the_first_one_stopping_leaves_its_file(make_bank, settings):
    bank = make_bank()
    first = OwnerEndpoint(bank, settings.home, program="first").start()
    second = OwnerEndpoint(bank, settings.home, program="second").start()  # (one per store, in real life)
    assert first.info.secret != second.info.secret and read_owner(settings.home) == second.info
    first.stop()
    assert read_owner(settings.home) == second.info
    second.stop()
    assert read_owner(settings.home) is None


def test_every_call_through_the_owner_answers_what_the_bank_answers(owned, client, clock):
    bank, _ = owned
    made = client.add("The user likes green tea", memory_type="preference", importance=7, tags=["tea"],
                      session_id="s1")
    assert made == bank.get(made.id) and made.importance == 0.7
    later = client.add("The user likes black coffee", session_id="s1", created_at=clock() - timedelta(days=3))
    assert client.get(later.id) == bank.get(later.id)
    assert client.list_memories() == bank.list_memories()
    assert client.list_memories(types={"preference"}, statuses=("live",)) == [bank.get(made.id)]
    hits = client.search("green tea", 3, session_id="s1", record_access=False)
    assert hits == bank.search("green tea", 3, session_id="s1", record_access=False) and hits[0].id == made.id
    assert client.build_context("tea?", session_id="s1", short_term=[Turn("user", "hi")], hits=hits) == \
        bank.build_context("tea?", session_id="s1", short_term=[Turn("user", "hi")], hits=hits)
    edited = client.update(made.id, content="The user likes jasmine tea")
    assert edited.version == 2 and bank.get(made.id).content == edited.content
    assert client.history(made.id) == bank.history(made.id)
    assert client.restore(f"{made.id}@v1").content == "The user likes green tea"
    assert client.supersede(later.id, made.id).superseded_by == made.id
    assert client.count() == bank.count() and client.stats() == bank.stats()
    assert list(client.export()) == list(bank.export())
    assert client.review_queue() == [] and client.prune(dry_run=True) == []
    assert client.doctor() == bank.doctor()
    learnt = client.add_messages([{"role": "user", "content": "I live in Berlin"}], session_id="s1")
    assert [r.content for r in learnt.written] == ["The user lives in Berlin."]
    assert client.location == bank.location
    client.warm_up()
    assert client.forget(later.id).id == later.id
    in_session = sum(1 for record in bank.export() if record.scope == "s1")  # the tea and its revisions
    assert client.forget_all("default", session_id="s1") == in_session >= 2
    assert [record.content for record in bank.export()] == ["The user lives in Berlin."]  # a lasting fact: global


def test_refusals_come_back_as_the_same_error_with_its_field(owned, client):
    bank, _ = owned
    with pytest.raises(InvalidInputError) as refused:
        client.add("   ")
    assert refused.value.field == "content" and "empty" in str(refused.value)
    with pytest.raises(NotFoundError, match="no memory 'nope'"):
        client.get("nope")
    made = client.add("The user likes green tea")
    client.update(made.id, importance=0.9)
    with pytest.raises(ConflictError) as stale:
        client.update(made.id, content="The user likes tea", expected_version=1)
    assert stale.value.field == "version" and stale.value.current_version == 2
    assert bank.get(made.id).content == "The user likes green tea"  # nothing changed


def test_the_owner_refuses_a_wrong_secret_a_browser_and_other_routes(owned):
    _, endpoint = owned
    info = endpoint.info
    ok = {"method": "count", "args": {}}
    assert raw_call(info, ok) == (200, {"result": 0})
    assert raw_call(info, ok, secret="x" * 43)[0] == 401
    assert raw_call(info, ok, secret="")[0] == 401
    assert raw_call(info, ok, headers={"Origin": "http://127.0.0.1:8765"})[0] == 403
    assert raw_call(info, ok, path="/")[0] == 404
    assert raw_call(info, ok, method="GET")[0] == 405


@pytest.mark.parametrize("body, field", [
    ({"method": "close", "args": {}}, "method"),  # a client cannot close the owner's store
    ({"method": "_writing", "args": {}}, "method"),
    ({"method": "__init__", "args": {}}, "method"),
    ({"method": "add_records", "args": {"records": []}}, "method"),  # a MemoryBank method, not the protocol's
    ({"method": "count", "args": {"user_id": {"$t": "Settings", "v": {}}}}, "value"),
    ({"method": "count", "args": {"nobody": 1}}, "args"),
    ({"method": "import_jsonl", "args": {"lines": [], "progress": 1}}, "args"),
    ({"method": "count"}, "body"),
])
def test_the_owner_answers_only_listed_calls_with_listed_values(owned, body, field):
    bank, endpoint = owned
    status, answer = raw_call(endpoint.info, body)
    assert status == 422 and answer["error"] == "InvalidInputError" and answer["field"] == field
    assert bank.count() == 0, list(bank.export())


def test_an_import_is_sent_in_chunks_and_reports_the_files_line_numbers(owned, client, monkeypatch, make_bank,
                                                                         settings):
    monkeypatch.setattr(remote, "IMPORT_CHUNK", 3)
    lines = ['{"content": "memory one"}', "not json", "", '{"content": "memory two"}', '{"content": ""}',
             '{"content": "memory one"}', '{"content": "memory three", "id": "m3"}', "{"]
    done: list[int] = []
    report = client.import_jsonl(lines, progress=done.append)
    direct = make_bank(settings=Settings(home=settings.home.parent / "other")).import_jsonl(lines)
    assert report == direct
    assert [number for number, _ in report.errors] == [2, 5, 8] and report.added == 3
    assert done == [1, 3, 4]  # records handled after each chunk


def test_a_reindex_with_another_model_than_the_owners_is_refused(owned, settings):
    other = RemoteBank(settings.with_changes(embed_model="/models/another"), read_owner(settings.home))
    with pytest.raises(StoreInUseError, match=r"another process .*vecmem serve.*/models/another"):
        other.reindex()


def test_an_owner_that_stops_is_one_clear_error(owned, client):
    _, endpoint = owned
    client.add("The user likes green tea")
    endpoint.stop()
    with pytest.raises(StoreError) as gone:
        client.count()
    assert "\n" not in str(gone.value) and "not answering" in str(gone.value) and "run the command again" in str(
        gone.value)


def test_a_call_under_way_when_the_owner_stops_is_answered_before_the_stop_returns(owned, client, monkeypatch):
    """The owner's bank closes after ``stop``: closing Chroma or the model under a call still running crashed
    or hung the owner's exit, so ``stop`` waits for the call and its answer."""
    bank, endpoint = owned
    client.add("The user likes green tea")
    inside, done, counted = threading.Event(), threading.Event(), bank.count

    def slow_count(**kwargs):
        inside.set()
        time.sleep(0.5)
        try:
            return counted(**kwargs)
        finally:
            done.set()

    monkeypatch.setattr(bank, "count", slow_count)
    answers: list[object] = []
    caller = threading.Thread(target=lambda: answers.append(client.count()))
    caller.start()
    assert inside.wait(10)
    endpoint.stop()
    assert done.is_set()  # the call ended before stop returned
    caller.join(10)
    assert answers == [1]  # and its answer reached the client


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _counting_factory(make_bank):
    opened: list[MemoryBank] = []

    def factory(settings, verify_model=True):
        opened.append(make_bank(settings=settings, verify_model=verify_model))
        return opened[-1]

    return factory, opened


@pytest.mark.parametrize("pid", [_dead_pid, os.getpid], ids=["dead process", "nothing on its port"])
def test_a_stale_owner_json_is_ignored_and_cleared_by_the_process_that_opens_the_store(make_bank, settings, pid):
    stale = OwnerInfo(pid=pid(), port=9, secret="s" * 43, program="python -m vecmem.chat", started="2026-06-01")
    settings.home.mkdir(parents=True)
    (settings.home / "owner.json").write_text(stale.to_json())
    os.chmod(settings.home / "owner.json", 0o600)
    factory, opened = _counting_factory(make_bank)
    bank = open_bank(settings, factory=factory)
    assert opened == [bank] and not (settings.home / "owner.json").exists()


def test_an_owner_that_never_answers_is_not_waited_for(make_bank, settings, monkeypatch):
    """A suspended owner (Ctrl-Z) still accepts connections: its hello is given up on after CONNECT_SECONDS."""
    monkeypatch.setattr(remote, "CONNECT_SECONDS", 0.3)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        frozen = OwnerInfo(pid=os.getpid(), port=silent.getsockname()[1], secret="s" * 43, program="vecmem mcp",
                           started="2026-06-01")
        settings.home.mkdir(parents=True)
        (settings.home / "owner.json").write_text(frozen.to_json())
        os.chmod(settings.home / "owner.json", 0o600)
        assert find_owner(settings) is None
        factory, opened = _counting_factory(make_bank)
        assert open_bank(settings, factory=factory) is opened[0]


def test_commands_go_through_a_live_owner_and_never_open_the_store(owned, settings, make_bank):
    bank, _ = owned
    factory, opened = _counting_factory(make_bank)
    chosen = open_bank(settings, factory=factory)
    assert isinstance(chosen, RemoteBank) and opened == []
    with long_running_bank(settings, program="vecmem serve", factory=factory) as served:  # the panel's
        assert isinstance(served.bank, RemoteBank) and not served.serving and opened == []
        served.add("The user likes green tea")
    assert bank.count() == 1 and read_owner(settings.home) is not None  # the owner's endpoint is untouched


def test_a_server_store_never_looks_for_an_owner(owned, settings, make_bank):
    factory, opened = _counting_factory(make_bank)
    on_a_server = settings.with_changes(chroma_url="http://127.0.0.1:9")
    assert open_bank(on_a_server, factory=lambda s, verify_model: "the store itself") == "the store itself"
    assert opened == []


def test_a_long_running_process_that_opens_the_store_serves_it_until_it_stops(make_bank, settings):
    factory, opened = _counting_factory(make_bank)
    with long_running_bank(settings, program="python -m vecmem.chat", factory=factory) as bank:
        assert opened == [bank.bank] and bank.serving and read_owner(settings.home).program == "python -m vecmem.chat"
        with open_bank(settings, factory=factory) as command:  # a command meanwhile
            assert isinstance(command, RemoteBank) and command.add("The user likes tea").content == "The user likes tea"
        assert bank.count() == 1
    assert read_owner(settings.home) is None and len(opened) == 1


def test_a_store_just_taken_by_another_process_is_waited_for_until_it_serves(owned, settings, make_bank, monkeypatch):
    _, endpoint = owned
    info = endpoint.info
    (settings.home / "owner.json").unlink()  # the other process has the store, and announces itself a moment later
    attempts: list[int] = []

    def busy(settings, verify_model=True):
        attempts.append(1)
        if len(attempts) == 3:
            (settings.home / "owner.json").write_text(info.to_json())
            os.chmod(settings.home / "owner.json", 0o600)
        raise StoreInUseError("the store is open in another process")

    assert isinstance(open_bank(settings, factory=busy), RemoteBank) and len(attempts) == 3
    (settings.home / "owner.json").unlink()
    monkeypatch.setattr(opening, "OWNER_WAIT", 0.3)
    with pytest.raises(StoreInUseError, match="open in another process"):  # a holder that never serves: as before
        open_bank(settings, factory=busy)


def test_the_cli_through_an_owner_prints_what_the_owners_store_holds(owned, monkeypatch, settings):
    bank, _ = owned
    bank.add("The user likes green tea", memory_type="preference")
    monkeypatch.setenv("VECMEM_HOME", str(settings.home))
    monkeypatch.delenv("VECMEM_CHROMA_URL", raising=False)

    def refuse(settings, verify_model=True):
        raise AssertionError("a command opened the store although an owner serves it")

    def vecmem(*argv):
        out, err = io.StringIO(), io.StringIO()
        return cli_main(list(argv), stdout=out, stderr=err, bank_factory=refuse), out.getvalue(), err.getvalue()

    code, out, _ = vecmem("list", "--json")
    assert code == 0 and [m["content"] for m in json.loads(out)] == ["The user likes green tea"]
    code, out, _ = vecmem("search", "green tea", "--json")
    assert code == 0 and json.loads(out)[0]["content"] == "The user likes green tea"
    assert vecmem("add", "The user lives in Berlin")[0] == 0 and bank.count() == 2
    code, _, err = vecmem("get", "nope")
    assert code == 2 and err.count("\n") == 1 and "no memory 'nope'" in err


def test_a_command_through_an_owner_imports_no_store_and_no_model(owned, settings):
    bank, _ = owned
    bank.add("The user likes green tea")
    probe = ("import sys\nfrom vecmem.interfaces.cli.main import main\ncode = main(['list'])\n"
             "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'chromadb', 'torch', 'sentence_transformers', "
             "'onnxruntime', 'tiktoken', 'transformers', 'numpy'})\nprint('HEAVY', heavy, code)")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VECMEM_")}, "VECMEM_HOME": str(settings.home),
           "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert "green tea" in result.stdout, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "HEAVY [] 0"


def test_values_the_wire_cannot_carry_are_refused_naming_the_argument(client):
    with pytest.raises(InvalidInputError) as refused:
        client.add_messages([{"role": "user", "content": "hi", "attachment": object()}])
    assert refused.value.field == "messages"
    assert encode(("a", 1)) == {"$t": "tuple", "v": ["a", 1]}


# ---- an owner for the shell (VECMEM_OWNER_LINGER: interfaces/owner/lingering.py)

def test_the_owner_knows_how_long_no_call_has_come(owned, client):
    _, endpoint = owned
    time.sleep(0.3)
    assert endpoint.quiet_for() >= 0.3
    client.count()
    assert endpoint.quiet_for() < 0.3


def test_an_owner_that_lingers_returns_once_quiet_for_long_enough():
    from vecmem.interfaces.owner.lingering import serve_until_quiet

    asked = iter([0.0, 0.0, 0.6, 1.2])  # a call under way, then quiet
    serve_until_quiet(lambda: next(asked), 1.0)
    assert next(asked, None) is None


def test_with_a_linger_a_command_goes_through_the_owner_there_is_and_starts_none(owned, monkeypatch, settings):
    from vecmem.interfaces.owner import lingering

    bank, _ = owned
    bank.add("The user likes green tea")
    monkeypatch.setenv("VECMEM_HOME", str(settings.home))
    monkeypatch.setenv("VECMEM_OWNER_LINGER", "30")
    monkeypatch.delenv("VECMEM_CHROMA_URL", raising=False)
    monkeypatch.setattr(lingering.subprocess, "Popen", lambda *a, **k: pytest.fail("an owner was started"))
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["list", "--json"], stdout=out, stderr=err) == 0
    assert [m["content"] for m in json.loads(out.getvalue())] == ["The user likes green tea"] and err.getvalue() == ""


def test_an_owner_that_could_not_start_leaves_the_command_to_open_the_store(settings, monkeypatch):
    from vecmem.interfaces.owner import lingering

    class Gone:  # the owner's process left at once (another process holds the store, or it could not open it)
        pid = 999_999

        def poll(self) -> int:
            return 1

    said: list[str] = []
    monkeypatch.setattr(lingering.subprocess, "Popen", lambda *a, **k: Gone())
    assert lingering.through_lingering_owner(settings.with_changes(owner_linger=30.0), said.append) is None
    assert said == []
