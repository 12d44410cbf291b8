"""The typed contract of the HTTP API: the OpenAPI description types and describes every field and declares
every status a route returns, every failure has the one error shape, and a bounded schemathesis run (every
default check, stateful transitions included) against a real `uvicorn` server, once with the admin token and once
with a per-user key, finds nothing: with seed 17, or each of VECMEM_SCHEMATHESIS_SEEDS ("1 2 3")."""

from __future__ import annotations

import collections
import os

import pytest
from fastapi.testclient import TestClient

from tests.conftest import FakeEmbedder, serving
from vecmem import MemoryBank, Settings
from vecmem.interfaces.http.app import create_app

ADMIN = "contract-admin-key"


@pytest.fixture
def api(bank):
    return TestClient(create_app(bank), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                      headers={"X-Vecmem-Request": "1"})


def _resolve(schema, node):
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_every_body_and_response_field_is_typed_and_described(api):
    schema = api.get("/openapi.json").json()
    models = schema["components"]["schemas"]
    for name in ("NewMemory", "Changes", "SearchRequest", "Supersession", "Approval", "MemoryOut", "AddedOut", "HitOut",
                 "PruneCandidateOut", "StatsOut", "HitRate", "ErrorBody", "BulkRequest", "BulkOut", "BulkItemOut"):
        for field, declared in models[name]["properties"].items():
            assert declared.get("description"), f"{name}.{field} has no description"
            assert {"type", "anyOf", "$ref", "enum"} & set(declared), f"{name}.{field} has no type"
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                assert parameter.get("description"), f"{method} {path}: {parameter['name']}"
            declared = set(operation["responses"])
            assert {"401", "403", "421", "422", "500"} <= declared, f"{method} {path}"
            assert "{memory_id}" not in path or "404" in declared
            for status, response in operation["responses"].items():
                if not status.startswith("2"):
                    assert response["content"] == {"application/json": {
                        "schema": {"$ref": "#/components/schemas/ErrorBody"}}}, f"{method} {path} {status}"
            assert operation["security"] == [{"bearer": []}, {}]  # no key configured yet: optional
            if method in ("post", "patch", "delete"):
                assert any(p["name"] == "X-Vecmem-Request" and p["required"] for p in operation["parameters"])
    export = schema["paths"]["/export"]["get"]["responses"]["200"]["content"]
    assert list(export) == ["application/x-ndjson"]
    ok = schema["paths"]["/memories"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert _resolve(schema, ok)["title"] == "AddedOut"  # the memory's fields, and what the add did


def test_the_key_is_declared_required_once_one_is_configured(bank):
    from vecmem.interfaces.http.keys import KeyStore, keys_path

    keys = KeyStore(keys_path(bank.settings.home))
    api = TestClient(create_app(bank, keys=keys), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000))
    assert api.get("/openapi.json").json()["paths"]["/stats"]["get"]["security"] == [{"bearer": []}, {}]
    keys.create("alice")
    assert api.get("/openapi.json").json()["paths"]["/stats"]["get"]["security"] == [{"bearer": []}]
    keys.close()


def test_every_failure_has_the_one_error_shape(api):
    failures = [
        (api.get("/no/such/route"), 404, None),
        (api.put("/memories"), 405, None),
        (api.post("/memories", content=b'{"content": "x",', headers={"Content-Type": "application/json"}), 422,
         "body"),
        (api.post("/memories", content=b"\xff\xfe", headers={"Content-Type": "application/json"}), 422, "body"),
        (api.post("/memories", content=b"[1, 2]", headers={"Content-Type": "application/json"}), 422, "body"),
        (api.post("/search"), 422, "body"),
        (api.post("/memories", json={"content": "ok", "importance": True}), 422, "importance"),
        (api.get("/memories", params={"limit": "0"}), 422, "limit"),
        (api.get("/memories/nope"), 404, None),
    ]
    for response, status, field in failures:
        assert response.status_code == status, response.text
        assert response.json() == {"error": response.json()["error"], "field": field}, response.text
        assert response.json()["error"]
    assert set(failures[1][0].headers["allow"].split(", ")) == {"GET", "POST"}


def test_there_is_no_docs_page_that_needs_a_cdn(api):
    assert api.get("/docs").status_code == 404 and api.get("/redoc").status_code == 404
    assert api.get("/openapi.json").status_code == 200


@pytest.fixture(params=["admin token", "per-user key"])
def served(request, tmp_path):
    """A real server, and the key the run sends: the admin token, or a key of user alice (whose requests for
    any other user are refused)."""

    from vecmem.interfaces.http.keys import KeyStore, keys_path

    bank = MemoryBank(Settings(home=tmp_path / "home", cap_per_user=40), embedder=FakeEmbedder())
    bank.add("The user prefers green tea", memory_type="preference", importance=0.7)
    bank.add("alice prefers coffee", memory_type="preference", user_id="alice")
    keys = KeyStore(keys_path(bank.settings.home))
    key = ADMIN if request.param == "admin token" else keys.create("alice")[1]
    with serving(create_app(bank, token=ADMIN, keys=keys), log_level="critical") as port:
        yield f"http://127.0.0.1:{port}", key
    keys.close()
    bank.close()


SEEDS = [int(seed) for seed in os.environ.get("VECMEM_SCHEMATHESIS_SEEDS", "17").split()]  # "1 2 3": several runs


@pytest.mark.slow  # about 30 s of generated requests: in `make test`, not in the fast lane
@pytest.mark.parametrize("seed", SEEDS)
def test_a_bounded_schemathesis_run_finds_nothing(served, seed):
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.config import SchemathesisConfig
    from schemathesis.engine import events

    url, key = served
    config = SchemathesisConfig.from_dict({
        "headers": {"Authorization": f"Bearer {key}", "X-Vecmem-Request": "1"}, "seed": seed, "workers": 1,
        "generation": {"max-examples": 6},  # every check with its default expectations, but one:
        # a well-formed /context request can still ask for more than its token window holds (a 422 no schema
        # can express), so that check accepts a 422 there
        "operations": [{"include-path": "/context", "checks": {"positive_data_acceptance": {
            "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "429", "5xx"]}}}]})
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)
    requests = checks = transitions = 0
    failures: collections.Counter[tuple[str, str]] = collections.Counter()
    errors = []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            requests += len(event.recorder.interactions)
            for nodes in event.recorder.checks.values():
                checks += len(nodes)
                failures.update((event.recorder.label, node.name) for node in nodes if node.status.name == "FAILURE")
        elif isinstance(event, events.PhaseStarted) and event.payload is not None:
            transitions = event.payload.transitions_selected
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            errors.append(event)
    print(f"schemathesis: {requests} requests, {checks} checks, {sum(failures.values())} failures, "
          f"{transitions} stateful transitions")
    assert not errors
    assert dict(failures) == {}
    assert requests > 300 and checks > 3000 and transitions > 50
