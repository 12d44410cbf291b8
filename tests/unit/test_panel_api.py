"""What the memory panel asks of the HTTP API beyond the basics: a page of memories in any order with the total
in ``X-Total-Count``, moving a memory between scopes with ``PATCH``, and one action on many memories with every
memory's outcome (``POST /bulk``)."""

import pytest
from fastapi.testclient import TestClient

from vecmem.interfaces.http.app import create_app

pytestmark = pytest.mark.both_stores  # embedded, and again on a real `chroma run` server


@pytest.fixture
def api(bank):
    return TestClient(create_app(bank), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                      headers={"X-Vecmem-Request": "1"})


@pytest.fixture
def seven(api, clock):
    made = []
    for number in range(7):
        made.append(api.post("/memories", json={"content": f"memory number {number}",
                                                "importance": round(0.1 * ((number * 3) % 7), 1)}).json())
        clock.advance(minutes=1)
    return made


def test_pages_in_any_order_with_the_total_in_a_header(api, seven):
    first = api.get("/memories", params={"limit": 3})
    assert first.headers["X-Total-Count"] == "7"
    assert [m["id"] for m in first.json()] == [m["id"] for m in reversed(seven)][:3]  # newest first, as ever
    by_importance = [m["id"] for m in sorted(seven, key=lambda m: (m["importance"], m["id"]))]
    pages = [api.get("/memories", params={"sort": "importance", "offset": offset, "limit": 3})
             for offset in (0, 3, 6)]
    assert [m["id"] for page in pages for m in page.json()] == by_importance
    assert {page.headers["X-Total-Count"] for page in pages} == {"7"}
    assert api.get("/memories", params={"offset": 50}).json() == []
    assert api.get("/memories", params={"type": "preference"}).headers["X-Total-Count"] == "0"


@pytest.mark.parametrize(("params", "field"), [({"sort": "colour"}, "sort"), ({"offset": -1}, "offset"),
                                               ({"offset": "two"}, "offset"), ({"limit": 0}, "limit")])
def test_a_bad_page_is_a_422_naming_its_parameter(api, seven, params, field):
    response = api.get("/memories", params=params)
    assert response.status_code == 422 and response.json()["field"] == field


def test_the_total_and_the_orders_are_declared(api):
    operation = api.get("/openapi.json").json()["paths"]["/memories"]["get"]
    assert "X-Total-Count" in operation["responses"]["200"]["headers"]
    sort = next(p for p in operation["parameters"] if p["name"] == "sort")
    assert "-importance" in sort["schema"]["enum"] and sort["schema"]["default"] == "-created_at"


def test_patch_moves_a_memory_and_says_why_it_cannot(api):
    note = api.post("/memories", json={"content": "The deploy is on Friday"}).json()
    moved = api.patch(f"/memories/{note['id']}", json={"scope": "work", "version": note["version"]})
    assert moved.status_code == 200 and moved.json()["scope"] == "work"
    assert api.post("/search", json={"query": "deploy Friday"}).json() == []
    stale = api.patch(f"/memories/{note['id']}", json={"scope": "global", "version": note["version"]})
    assert stale.status_code == 409 and stale.json()["current_version"] == moved.json()["version"]
    newer = api.post("/memories", json={"content": "The deploy moved to Monday", "session_id": "work"}).json()
    api.post(f"/memories/{note['id']}/supersede", json={"new_id": newer["id"]})
    refused = api.patch(f"/memories/{note['id']}", json={"scope": "global"})
    assert refused.status_code == 409 and refused.json()["field"] == "scope"
    bad = api.patch(f"/memories/{note['id']}", json={"scope": " "})
    assert bad.status_code == 422 and bad.json()["field"] == "scope"


def test_bulk_reports_every_memory_and_one_failure_stops_none(api, bank):
    pending = [bank.add(f"The user maybe likes sport {n}", source="extracted", confidence=0.2, status="pending")
               for n in range(3)]
    live = bank.add("The user likes tea")
    answer = api.post("/bulk", json={"action": "approve",
                                              "ids": [pending[0].id, live.id, "no-such-memory", pending[1].id]})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["action"], body["done"], body["failed"]) == ("approve", 2, 2)
    assert [(r["id"], r["status"]) for r in body["results"]] == [
        (pending[0].id, 200), (live.id, 409), ("no-such-memory", 404), (pending[1].id, 200)]
    assert body["results"][0]["memory"]["status"] == "live" and body["results"][1]["memory"] is None
    assert body["results"][1]["error"] and body["results"][1]["field"] == "id"
    assert bank.get(pending[1].id).status == "live"  # done after the two that failed
    rejected = api.post("/bulk", json={"action": "reject", "ids": [pending[2].id, pending[2].id]}).json()
    assert [r["status"] for r in rejected["results"]] == [200, 404]  # named twice: the second finds it gone
    forgotten = api.post("/bulk", json={"action": "forget", "ids": [live.id, pending[0].id]}).json()
    assert forgotten["done"] == 2 and [r["memory"]["content"] for r in forgotten["results"]] == [
        "The user likes tea", "The user maybe likes sport 0"]
    assert {r.id for r in bank.export()} == {pending[1].id}


@pytest.mark.parametrize("body", [{"action": "forget", "ids": []}, {"action": "explode", "ids": ["a"]},
                                  {"action": "forget", "ids": ["ok", " padded "]},
                                  {"action": "forget", "ids": ["x"] * 501}])
def test_a_malformed_bulk_request_does_nothing(api, bank, body):
    kept = bank.add("The user likes tea")
    response = api.post("/bulk", json=body)
    assert response.status_code == 422 and response.json()["field"] in ("ids", "action")
    assert bank.get(kept.id) == kept
