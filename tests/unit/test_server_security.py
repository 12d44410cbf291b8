"""Who may call `vecmem serve` (http/security.py, keys.py): the Host allow-list, the Origin check, the header
every state-changing request needs, the bearer scheme, per-user keys that cannot reach another user, and the
`vecmem keys` and `vecmem serve` commands."""

from __future__ import annotations

import io
import socket
import stat
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from vecmem.errors import ConfigError
from vecmem.interfaces.cli.main import main
from vecmem.interfaces.http.app import check_binding, create_app
from vecmem.interfaces.http.keys import KeyStore, keys_path

LOCAL = "http://127.0.0.1:8765"
CSRF = {"X-Vecmem-Request": "1"}


def client(app, base_url=LOCAL, peer="127.0.0.1", **headers):
    return TestClient(app, base_url=base_url, client=(peer, 50000), headers=headers)


@pytest.fixture
def keys(bank):
    store = KeyStore(keys_path(bank.settings.home))
    yield store
    store.close()


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8765", "127.0.0.1.nip.io:8765",
                                  "192.168.1.5:8765", ""])
@pytest.mark.parametrize("path", ["/", "/openapi.json", "/export", "/memories"])
def test_a_foreign_host_is_refused_before_anything_is_read(bank, host, path):
    bank.add("a secret memory")
    response = client(create_app(bank)).get(path, headers={"Host": host})
    assert response.status_code == 421
    assert response.json()["field"] == "Host" and "secret" not in response.text


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:9", "LOCALHOST", "[::1]:8765", "127.0.0.1"])
def test_loopback_names_and_configured_ones_are_served(bank, host):
    assert client(create_app(bank)).get("/stats", headers={"Host": host}).status_code == 200
    configured = client(create_app(bank, allowed_hosts=["memory.internal"]))
    assert configured.get("/stats", headers={"Host": "memory.internal:8765"}).status_code == 200
    assert configured.get("/stats", headers={"Host": "other.internal:8765"}).status_code == 421


@pytest.mark.parametrize("origin", ["http://127.0.0.1:9999", "http://attacker.example:8765", "null",
                                    "https://127.0.0.1:8765.attacker.example", "file://"])
def test_a_foreign_origin_is_refused_even_for_reads(bank, origin):
    api = client(create_app(bank), **CSRF)
    assert api.get("/export", headers={"Origin": origin}).status_code == 403
    refused = api.post("/memories", json={"content": "planted"}, headers={"Origin": origin})
    assert refused.status_code == 403 and refused.json()["field"] == "Origin"
    assert bank.list_memories() == []


def test_the_servers_own_origin_is_served(bank):
    api = client(create_app(bank), **CSRF)
    assert api.post("/memories", json={"content": "The user likes tea"},
                    headers={"Origin": LOCAL}).status_code == 201


def _state_changes(bank):
    """Every state-changing route, each on a memory in the state it needs; returns (method, path, json)."""
    old = bank.add("The user writes TypeScript")
    new = bank.add("The user writes JavaScript now")
    bank.supersede(old.id, new.id)
    pending = bank.add("The user maybe keeps bees", source="extracted", confidence=0.2, status="pending")
    other = bank.add("The user maybe sails", source="extracted", confidence=0.2, status="pending")
    return [("post", f"/memories/{old.id}/restore", None), ("post", f"/memories/{pending.id}/approve", None),
            ("post", f"/memories/{other.id}/reject", None), ("post", "/prune", None),
            ("post", "/memories", {"content": "planted by a page"}), ("delete", f"/memories/{new.id}", None),
            ("patch", f"/memories/{new.id}", {"importance": 0.1}),
            ("post", f"/memories/{new.id}/supersede", {"new_id": old.id}),
            ("post", f"/memories/{old.id}/unarchive", None),
            ("post", "/bulk", {"action": "forget", "ids": [new.id, old.id]})]


def test_state_changing_requests_need_the_cross_site_header_body_or_not(bank):
    bank.settings = replace(bank.settings, cap_per_user=1)  # so /prune would archive something
    routes = _state_changes(bank)
    before = sorted((r.id, r.status, r.superseded_by, r.importance) for r in bank.export())
    api = client(create_app(bank))
    for method, path, body in routes:
        for content_type in ({}, {"Content-Type": "text/plain"}, {"Content-Type": "application/json"}):
            response = api.request(method.upper(), path, json=body, headers=content_type)
            assert response.status_code == 403, (method, path)
            assert response.json() == {"error": response.json()["error"], "field": "X-Vecmem-Request"}
    assert sorted((r.id, r.status, r.superseded_by, r.importance) for r in bank.export()) == before
    guarded = client(create_app(bank), **CSRF)
    assert guarded.post(routes[0][1]).status_code == 200  # the same request with the header goes through


def test_the_bearer_scheme_is_parsed_as_the_rfcs_say(bank):
    api = client(create_app(bank, token="s3cret"))
    assert api.get("/stats", headers={"Authorization": "bearer s3cret"}).status_code == 200
    assert api.get("/stats", headers={"Authorization": "BEARER   s3cret "}).status_code == 200
    for refused in ("s3cret", "Basic s3cret", "Bearer", "Bearer s3cret extra", "Bearers3cret", "Bearer wrong"):
        response = api.get("/stats", headers={"Authorization": refused})
        assert response.status_code == 401, refused
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert response.json()["field"] == "Authorization"


def test_the_key_is_checked_before_the_body_is_parsed(bank):
    api = client(create_app(bank, token="s3cret"), **CSRF)
    for body in (b"{not json", b'{"content": 12}', b"\xff\xfe"):
        response = api.post("/memories", content=body, headers={"Authorization": "Bearer wrong",
                                                                 "Content-Type": "application/json"})
        assert response.status_code == 401


def test_a_user_key_reaches_its_own_user_only(bank, keys):
    _, alice = keys.create("alice")
    bank.add("bob keeps snakes", user_id="bob")
    api = client(create_app(bank, keys=keys), **CSRF, Authorization=f"Bearer {alice}")
    made = api.post("/memories", json={"content": "alice likes otters"})
    assert made.status_code == 201 and made.json()["user_id"] == "alice"  # her own user by default
    assert [r["user_id"] for r in api.get("/memories").json()] == ["alice"]
    assert api.get("/memories", params={"user": "alice"}).status_code == 200
    for method, path in [("get", "/memories"), ("post", "/search"), ("get", "/export"), ("get", "/stats"),
                         ("post", "/prune"), ("get", f"/memories/{made.json()['id']}"), ("get", "/review"),
                         ("post", "/bulk")]:
        body = {"/search": {"query": "snakes"}, "/bulk": {"action": "forget", "ids": ["x"]}}.get(path)
        response = api.request(method.upper(), path, params={"user": "bob"}, json=body)
        assert response.status_code == 403 and response.json()["field"] == "user", path
        doubled = api.request(method.upper(), f"{path}?user=alice&user=bob", json=body)
        assert doubled.status_code == 403, path
    for method, path in [("get", "/export"), ("get", "/stats"), ("post", "/prune")]:
        assert api.request(method.upper(), path).status_code == 403  # every user: the admin's alone
        assert api.request(method.upper(), path, params={"user": "alice"}).status_code == 200
    assert "snakes" not in api.get("/export", params={"user": "alice"}).text


def test_admin_keys_the_configured_token_and_revocation(bank, keys):
    _, admin = keys.create(None)
    user_key, alice = keys.create("alice")
    api = client(create_app(bank, token="s3cret", keys=keys))
    for secret in (admin, "s3cret"):
        assert api.get("/export", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
        assert api.get("/stats", params={"user": "bob"},
                       headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    keys.revoke(user_key.id)
    assert api.get("/memories", headers={"Authorization": f"Bearer {alice}"}).status_code == 401
    assert api.get("/memories", headers={"Authorization": f"Bearer {alice[:-1]}x"}).status_code == 401
    assert api.get("/openapi.json").status_code == 200 and api.get("/").status_code == 200  # no memory in them
    assert api.get("/memories").status_code == 401


def test_keys_are_stored_hashed_in_a_file_only_its_owner_reads(bank, keys):
    _, secret = keys.create("alice")
    path = keys_path(bank.settings.home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = b"".join(p.read_bytes() for p in path.parent.glob("keys.sqlite3*"))
    assert secret.encode() not in stored and secret.split("_")[-1].encode() not in stored


def test_with_no_key_only_local_clients_are_served(bank, keys):
    assert client(create_app(bank), peer="10.0.0.7").get("/stats").status_code == 403
    assert client(create_app(bank)).get("/stats").status_code == 200
    keys.create("alice")  # a key now exists: every request needs one, from anywhere
    assert client(create_app(bank, keys=keys)).get("/stats").status_code == 401


def test_binding_off_loopback_needs_a_token_or_keys():
    with pytest.raises(ConfigError, match="token"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", None, keys=True)
    check_binding("::1", None)


def _run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_keys_command_creates_lists_and_revokes(tmp_path, monkeypatch):
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    code, out, err = _run("keys", "create", "--user", "alice")
    assert code == 0 and out.startswith("vmk_") and len(out.splitlines()) == 1 and "shown this once" in err
    secret = out.strip()
    code, out, _ = _run("keys", "create", "--admin")
    assert code == 0
    code, listed, _ = _run("keys", "list")
    assert code == 0 and "user 'alice'" in listed and "admin" in listed and secret not in listed
    key_id = listed.split()[0]
    assert _run("keys", "revoke", key_id)[0] == 0
    assert "revoked" in _run("keys", "list")[1].splitlines()[0]
    assert _run("keys", "revoke", "nope")[0] == 2
    for wrong in (["keys", "create"], ["keys", "create", "--admin", "--user", "bob"], ["keys", "revoke"],
                  ["keys", "list", "abc"]):
        code, _, err = _run(*wrong)
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("vecmem: error:")


def test_serve_refuses_a_bad_port_or_one_in_use_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    code, _, err = _run("serve", "--port", "99999")
    assert code == 2 and len(err.splitlines()) == 1 and "65535" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, _, err = _run("serve", "--port", str(taken.getsockname()[1]))
    assert code == 1 and len(err.splitlines()) == 1 and "cannot listen" in err and "serving" not in err


def test_serve_binds_first_then_answers_for_its_address_and_the_allowed_names(bank, monkeypatch):
    import uvicorn

    served = {}

    def run(server, sockets=None):
        served["app"], served["sockets"] = server.config.app, sockets

    monkeypatch.setenv("VECMEM_HOME", str(bank.settings.home))
    monkeypatch.setattr(uvicorn.Server, "run", run)
    out, err = io.StringIO(), io.StringIO()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["serve", "--port", str(port), "--host", "127.0.0.2", "--allow-host", "memory.internal",
                 "--token", "s3cret"], stdout=out, stderr=err, bank_factory=lambda settings, verify_model=True: bank)
    assert code == 0 and "serving" in err.getvalue() and "s3cret" not in err.getvalue()
    assert served["sockets"][0].fileno() == -1  # the socket it was given, closed once serving ended
    api = client(served["app"], Authorization="Bearer s3cret")
    for host in ("memory.internal:8765", "127.0.0.2:8765", "localhost"):
        assert api.get("/stats", headers={"Host": host}).status_code == 200, host
    assert api.get("/stats", headers={"Host": "other.internal"}).status_code == 421
