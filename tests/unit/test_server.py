"""The HTTP API on the facade: every route, its errors, and the bearer token."""

import json

import pytest
from fastapi.testclient import TestClient

from vecmem.errors import ConfigError
from vecmem.interfaces.http.app import check_binding, create_app

pytestmark = pytest.mark.both_stores  # embedded, and again on a real `chroma run` server


def client(app, **headers):
    """A client as a local program is one: on loopback, naming a loopback Host, sending the header every
    state-changing request needs (http/security.py)."""
    return TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                      headers={"X-Vecmem-Request": "1", **headers})


@pytest.fixture
def api(bank):
    return client(create_app(bank))


def test_add_search_with_score_parts_list_get_update(api):
    made = api.post("/memories", json={"content": "The user prefers tea over coffee", "type": "preference",
                                       "importance": 0.8, "tags": ["drinks"]})
    assert made.status_code == 201
    memory = made.json()
    api.post("/memories", json={"content": "session note about the tea shop", "session_id": "s1"})
    hits = api.post("/search", json={"query": "tea or coffee", "k": 5}).json()
    assert [hit["id"] for hit in hits] == [memory["id"]]  # the session note stays in its session
    assert {"score", "similarity", "dense", "keyword", "recency", "importance"} <= set(hits[0])
    assert hits[0]["matched_terms"] == ["tea", "coffee"]  # why it was found
    assert len(api.post("/search", json={"query": "tea", "session_id": "s1"}).json()) == 2
    assert [r["id"] for r in api.get("/memories", params={"type": "preference"}).json()] == [memory["id"]]
    assert api.get(f"/memories/{memory['id']}").json()["tags"] == ["drinks"]
    changed = api.patch(f"/memories/{memory['id']}", json={"importance": 0.3})
    assert changed.status_code == 200 and changed.json()["importance"] == 0.3
    assert api.get("/stats").json()["count"] == 3  # the two, and the importance edit's revision (history)


def test_supersede_history_restore_forget_and_export(api):
    old = api.post("/memories", json={"content": "The user writes TypeScript", "type": "preference"}).json()
    new = api.post("/memories", json={"content": "The user writes JavaScript now", "type": "preference"}).json()
    assert api.post(f"/memories/{old['id']}/supersede", json={"new_id": new["id"]}).json()["superseded_by"] == new["id"]
    assert [r["id"] for r in api.get(f"/memories/{new['id']}/history").json()] == [old["id"], new["id"]]
    assert [h["id"] for h in api.post("/search", json={"query": "writes TypeScript"}).json()] == [new["id"]]
    assert api.post(f"/memories/{old['id']}/restore").json()["superseded_by"] is None
    exported = api.get("/export")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert {json.loads(line)["id"] for line in exported.text.splitlines()} == {old["id"], new["id"]}
    assert api.delete(f"/memories/{new['id']}").json()["id"] == new["id"]
    assert api.get(f"/memories/{new['id']}").status_code == 404


def test_users_are_kept_apart(api):
    api.post("/memories", params={"user": "alice"}, json={"content": "alice likes otters"})
    assert api.post("/search", params={"user": "bob"}, json={"query": "otters"}).json() == []
    assert len(api.post("/search", params={"user": "alice"}, json={"query": "otters"}).json()) == 1


@pytest.mark.parametrize("method, path, body, status, field", [
    ("post", "/memories", {"content": "   "}, 422, "content"),
    ("post", "/memories", {"content": "x", "importance": "lots"}, 422, "importance"),
    ("post", "/memories", {"content": "ok memory", "type": "secret"}, 422, "type"),
    ("post", "/memories", {"content": "ok memory", "colour": "red"}, 422, "colour"),
    ("post", "/memories", {}, 422, "content"),
    ("post", "/search", {"query": "tea", "k": 0}, 422, "k"),
    ("post", "/search", {"query": "tea", "types": {"$ne": 1}}, 422, "types"),
    ("post", "/search", {"query": "茶" * 2_001}, 422, "query"),  # longer than a search reads (MAX_QUERY_CHARS)
    ("post", "/context", {"query": "茶" * 32_001}, 422, "query"),
    ("get", "/memories/no-such-memory", None, 404, None),
    ("patch", "/memories/no-such-memory", {"importance": 0.1}, 404, None),
    ("post", "/memories/no-such-memory/restore", None, 404, None),
])
def test_bad_input_is_a_clear_4xx(api, method, path, body, status, field):
    response = getattr(api, method)(path, **({} if body is None else {"json": body}))
    assert response.status_code == status
    assert response.json()["error"] and response.json()["field"] == field


def test_a_token_is_required_off_loopback_and_enforced_when_given(bank):
    with pytest.raises(ConfigError, match="token"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", "s3cret")
    check_binding("127.0.0.1", None)
    guarded = client(create_app(bank, token="s3cret"))
    assert guarded.get("/stats").status_code == 401
    assert guarded.get("/stats", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.get("/stats", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert guarded.get("/openapi.json").status_code == 200  # the description itself is public


def test_the_openapi_description_names_every_route(api):
    paths = set(api.get("/openapi.json").json()["paths"])
    assert {"/memories", "/memories/{memory_id}", "/memories/{memory_id}/history", "/memories/{memory_id}/restore",
            "/memories/{memory_id}/supersede", "/search", "/stats", "/export"} <= paths


def test_stats_carry_the_chats_hit_rate(api, bank):
    from vecmem.storage.state.sessions import SessionStore

    assert api.get("/stats").json()["hits"] == {"injected": 0, "used": 0, "rate": None}
    sessions = SessionStore(bank.settings.home / "sessions.sqlite3")
    sessions.record_hits("default", "s1", injected=4, used=1)
    sessions.record_hits("default", "s2", injected=4, used=3)
    assert api.get("/stats").json()["hits"] == {"injected": 8, "used": 4, "rate": 0.5}
    assert api.get("/stats", params={"user": "bob"}).json()["hits"]["rate"] is None


def test_review_queue_prune_and_unarchive_over_http(bank):
    from dataclasses import replace

    bank.settings = replace(bank.settings, cap_per_user=1)  # the policy as the server's process would have it
    api = client(create_app(bank))
    waiting = bank.add("The user maybe keeps bees", source="extracted", confidence=0.2, status="pending")
    doubtful = bank.add("The user maybe sails", source="extracted", confidence=0.2, status="pending")
    assert {r["id"] for r in api.get("/review").json()} == {waiting.id, doubtful.id}
    assert api.post(f"/memories/{waiting.id}/approve", json={"content": "The user keeps bees"}).json()["status"] == "live"
    assert api.post(f"/memories/{doubtful.id}/reject").status_code == 200
    assert api.post(f"/memories/{waiting.id}/reject").status_code == 409  # not pending any more
    api.post("/memories", json={"content": "The user likes tea", "importance": 0.9})
    archived = api.get("/memories", params={"status": "archived"}).json()
    assert [r["content"] for r in archived] == ["The user keeps bees"]  # over the cap of 1: the lower retention
    assert api.post(f"/memories/{archived[0]['id']}/unarchive").json()["status"] == "live"
    assert len(api.post("/prune", params={"dry_run": "true"}).json()) == 1
