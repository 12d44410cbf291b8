"""The `vecmem` command, run in-process through cli.main with a bank factory that injects the fake embedder."""

import io
import json

import pytest

from tests.conftest import SEED_FILE, FakeEmbedder
from vecmem import MemoryBank
from vecmem.interfaces.cli.main import main
from vecmem.retrieval.rank import prior_share


@pytest.fixture
def run(tmp_path, monkeypatch, clock):
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VECMEM_CHROMA_URL", raising=False)
    monkeypatch.delenv("VECMEM_USER", raising=False)
    state = {"embedder": FakeEmbedder()}

    def factory(settings, verify_model=True):
        return MemoryBank(settings, embedder=state["embedder"], clock=clock, verify_model=verify_model)

    def invoke(*argv: str):
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), stdout=out, stderr=err, bank_factory=factory)
        return code, out.getvalue(), err.getvalue()

    invoke.state = state
    return invoke


def json_of(output: str):
    return json.loads(output)


def test_seed_is_idempotent(run):
    code, out, err = run("seed")
    assert code == 0, err
    count = json_of(run("stats", "--json")[1])["count"]
    assert count == sum(1 for line in SEED_FILE.read_text(encoding="utf-8").splitlines() if line.strip())
    assert count >= 30
    assert run("seed")[0] == 0
    assert json_of(run("stats", "--json")[1])["count"] == count


def test_add_get_search_list_forget(run):
    code, out, _ = run("add", "The user likes green tea", "--type", "preference", "--importance", "7",
                       "--tag", "drinks", "--json")
    assert code == 0
    added = json_of(out)
    assert added["importance"] == pytest.approx(0.7) and added["tags"] == ["drinks"]
    assert json_of(run("get", added["id"])[1])["content"] == "The user likes green tea"

    code, out, _ = run("search", "green tea", "--k", "3", "--json")
    hits = json_of(out)
    assert code == 0 and hits[0]["id"] == added["id"]
    assert set(hits[0]) >= {"id", "content", "type", "score", "similarity", "recency", "importance"}
    h = hits[0]
    priors = 0.2 * h["recency"] + 0.2 * h["importance"]
    assert h["score"] == pytest.approx(0.6 * h["similarity"] + prior_share(h["similarity"]) * priors)

    code, out, _ = run("search", "green tea")
    assert code == 0 and "The user likes green tea" in out and "0.6·similarity" in out

    listed = json_of(run("list", "--json")[1])
    assert [r["id"] for r in listed] == [added["id"]]
    code, out, _ = run("forget", added["id"])
    assert code == 0 and "forgot" in out
    assert json_of(run("list", "--json")[1]) == []


def test_filters_on_the_command_line(run):
    run("add", "global fact about deploys")
    run("add", "session one note about deploys", "--session", "s1", "--type", "instruction")
    run("add", "other user note about deploys", "--user", "bob")
    search = lambda *extra: {h["content"] for h in json_of(run("search", "deploys", "--k", "10", "--json", *extra)[1])}
    assert search() == {"global fact about deploys"}
    assert search("--session", "s1") == {"global fact about deploys", "session one note about deploys"}
    assert search("--session", "s1", "--type", "instruction") == {"session one note about deploys"}
    assert search("--session", "s1", "--type", "fact,instruction") == {
        "global fact about deploys", "session one note about deploys"}
    assert search("--user", "bob") == {"other user note about deploys"}
    listed = {r["content"] for r in json_of(run("list", "--json", "--session", "s2")[1])}
    assert listed == {"global fact about deploys"}


def test_superseded_only_listed_on_request(run):
    old = json_of(run("add", "uses VS Code", "--type", "preference", "--json")[1])["id"]
    new = json_of(run("add", "uses Neovim", "--type", "preference", "--json")[1])["id"]
    assert run("supersede", old, new)[0] == 0
    assert [h["id"] for h in json_of(run("search", "VS Code", "--json")[1])] == [new]
    assert {r["id"] for r in json_of(run("list", "--json")[1])} == {new}
    assert {r["id"] for r in json_of(run("list", "--json", "--include-superseded")[1])} == {old, new}


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["search", "x", "--k", "0"], "positive integer"),
        (["search", "x", "--type", "opinion"], "unknown type"),
        (["add", "x", "--importance", "11"], "importance"),
        (["add", "x", "--importance", "lots"], "importance"),
        (["add", "   "], "content"),
        (["add", "x", "--session", "global"], "session_id"),
        (["get", "no-such-id"], "no memory"),
        (["forget", "no-such-id"], "no memory"),
        (["import", "/no/such/file.jsonl"], "cannot read"),
        (["frobnicate"], "invalid choice"),
        (["search"], "required"),
        (["list", "--limit", "-3"], "positive integer"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(run, argv, fragment):
    code, out, err = run(*argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("vecmem: error: ")
    assert fragment in err
    assert "Traceback" not in err


def test_no_command_prints_help(run):
    code, out, _ = run()
    assert code == 2 and "COMMAND" in out


def test_version_is_the_packages_and_opens_no_store():
    import tomllib

    from tests.conftest import REPO

    def no_bank(settings, verify_model=True):
        raise AssertionError("--version opened a bank")

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    out, err = io.StringIO(), io.StringIO()
    assert main(["--version"], stdout=out, stderr=err, bank_factory=no_bank) == 0
    assert (out.getvalue(), err.getvalue()) == (f"vecmem {declared}\n", "")


def test_import_reports_bad_lines_by_number(run, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": "a", "content": "good one"}),
        "{broken",
        json.dumps({"id": "b", "content": "good two", "type": "preference"}),
        json.dumps({"id": "c", "content": "bad importance", "importance": -2}),
    ]) + "\n", encoding="utf-8")
    code, out, err = run("import", str(path))
    assert code == 2
    assert f"{path}:2:" in err and f"{path}:4:" in err and "importance" in err
    assert "imported 2 memories" in out
    assert {r["id"] for r in json_of(run("list", "--json")[1])} == {"a", "b"}


def test_invalid_utf8_line_is_reported_not_fatal(run, tmp_path):
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b'{"id": "a", "content": "ok"}\n{"id": "b", "content": "bad \xff byte"}\n')
    code, out, err = run("import", str(path))
    assert code == 2 and f"{path}:2:" in err and "surrogate" in err
    assert [r["id"] for r in json_of(run("list", "--json")[1])] == ["a"]


def test_export_import_round_trip(run, tmp_path, monkeypatch):
    run("seed")
    target = tmp_path / "backup.jsonl"
    assert run("export", "--output", str(target))[0] == 0
    exported = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert len(exported) == json_of(run("stats", "--json")[1])["count"]
    assert any(r["superseded_by"] for r in exported)
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "restored"))
    code, out, _ = run("import", str(target))
    assert code == 0 and f"imported {len(exported)} memories" in out
    code, out, _ = run("export")
    assert [json.loads(line) for line in out.splitlines()] == exported


def test_model_mismatch_is_one_line_then_reindex_fixes_it(run):
    run("add", "remember this across models")
    run.state["embedder"] = FakeEmbedder("another-model", 32)
    code, out, err = run("search", "remember")
    assert code == 2 and err.count("\n") == 1
    assert "fake-hash-64" in err and "another-model" in err and "vecmem reindex" in err
    code, out, err = run("reindex")
    assert code == 0 and "re-embedded 1 memories" in out
    code, out, _ = run("search", "remember", "--json")
    assert code == 0 and json_of(out)[0]["content"] == "remember this across models"


def test_stats_text_and_json(run):
    run("seed")
    code, out, _ = run("stats")
    assert code == 0 and "superseded" in out and "fake-hash-64" in out
    data = json_of(run("stats", "--json")[1])
    assert data["superseded"] == 1 and data["by_scope"]["session"] >= 2
    assert set(data["by_type"]) == {"fact", "preference", "instruction", "conclusion"}
    assert all(data["by_type"][name] > 0 for name in data["by_type"])


def test_store_failure_is_exit_1(run, monkeypatch):
    monkeypatch.setenv("VECMEM_CHROMA_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    code, out, err = run("stats")
    assert code == 1 and err.startswith("vecmem: error: ") and err.count("\n") == 1


def test_bad_environment_is_exit_2(run, monkeypatch):
    monkeypatch.setenv("VECMEM_CONTEXT_TOKENS", "many")
    code, out, err = run("stats")
    assert code == 2 and "VECMEM_CONTEXT_TOKENS" in err


def test_history_and_restore_commands(run):
    ts = json_of(run("add", "用户喜欢用 TypeScript", "--type", "preference", "--json")[1])["id"]
    js = json_of(run("add", "用户以后都用 JavaScript", "--type", "preference", "--json")[1])["id"]
    run("supersede", ts, js)
    code, out, _ = run("history", js)
    assert code == 0 and out.index(ts) < out.index(js) and f"superseded by {js}" in out and "(live)" in out
    chain = json_of(run("history", ts, "--json")[1])
    assert [r["id"] for r in chain] == [ts, js]
    code, out, _ = run("restore", ts)
    assert code == 0 and f"restored {ts}" in out
    assert [h["id"] for h in json_of(run("search", "TypeScript JavaScript", "--json")[1])] == [ts]
    code, out, err = run("restore", ts)
    assert code == 2 and "not superseded" in err


def test_decisions_command_shows_the_gate_log(run, tmp_path, clock):
    from vecmem import Settings
    from vecmem.agent.memory_agent import MemoryAgent
    from vecmem.storage.state.sessions import SessionStore

    settings = Settings.from_env()
    agent = MemoryAgent(MemoryBank(settings, embedder=run.state["embedder"], clock=clock),
                        SessionStore(settings.home / "sessions.sqlite3"), model=None, session_id="s9")
    agent.turn("你好")
    agent.turn("我喜欢用 TypeScript")
    code, out, _ = run("decisions")
    assert code == 0 and "dropped" in out and "kept as preference" in out and "s9" in out
    logged = json_of(run("decisions", "--json", "--session", "s9")[1])
    assert [d["kept"] for d in logged] == [False, True] and logged[0]["stage"] == "rules"
