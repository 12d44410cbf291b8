"""Provenance: where an extracted memory came from (the conversation and its messages), kept with the memory on
every path: the store's row, export and import, ``vecmem get``, the HTTP API and its description."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from vecmem import InvalidInputError, MemoryRecord, Provenance
from vecmem.interfaces.http.app import create_app
from vecmem.models import MAX_PROVENANCE_MESSAGES
from vecmem.storage.chroma.rows import from_row, to_metadata


def test_a_provenance_is_validated_and_normalised():
    source = Provenance("chat-1", ["D1:3", 7, "D1:3"])  # type: ignore[arg-type]  # a list, an integer: checked
    assert source.message_ids == ("D1:3", "7") and source.to_dict() == {"session_id": "chat-1", "message_ids": ["D1:3", "7"]}
    assert Provenance(None, ("m1",)).session_id is None and Provenance("s").message_ids == ()
    assert Provenance.of(None) is None and Provenance.of(source) is source
    assert Provenance.of({"message_ids": [0]}) == Provenance(None, ("0",))


@pytest.mark.parametrize(("value", "field"), [
    ({}, "provenance"),
    ({"session_id": "s", "turn": 3}, "provenance.turn"),
    ("chat-1", "provenance"),
    ({"session_id": " padded"}, "provenance.session_id"),
    ({"message_ids": "D1:3"}, "provenance.message_ids"),
    ({"message_ids": [True]}, "provenance.message_ids"),
    ({"message_ids": [-1]}, "provenance.message_ids"),
    ({"message_ids": ["two\nlines"]}, "provenance.message_ids"),
    ({"message_ids": [str(i) for i in range(MAX_PROVENANCE_MESSAGES + 1)]}, "provenance.message_ids"),
])
def test_a_bad_provenance_is_refused_naming_the_field(value, field):
    with pytest.raises(InvalidInputError) as refused:
        MemoryRecord(id="m", content="The user lives in Hangzhou", provenance=value)  # type: ignore[arg-type]
    assert refused.value.field == field


def test_it_survives_the_row_the_dict_and_a_copy():
    record = MemoryRecord(id="m", content="The user lives in Hangzhou", source="extracted",
                          provenance=Provenance("chat-1", ("42",)))
    assert from_row("m", record.content, to_metadata(record)).provenance == record.provenance
    data = json.loads(json.dumps(record.to_dict()))
    assert data["provenance"] == {"session_id": "chat-1", "message_ids": ["42"]}
    assert MemoryRecord.from_dict(data) == record and record.with_changes(content="x").provenance == record.provenance
    plain = MemoryRecord(id="p", content="added by hand")
    assert "provenance" not in json.loads(to_metadata(plain)["fields"]) and plain.to_dict()["provenance"] is None
    assert from_row("p", plain.content, to_metadata(plain)).provenance is None


def test_add_messages_records_the_ids_given_or_the_positions(bank):
    given = bank.add_messages([{"role": "user", "content": "我住在杭州", "id": "msg-17"},
                               {"role": "assistant", "content": "好的"},
                               {"role": "user", "content": "I work at Acme", "id": 9}], session_id="chat-1")
    assert [(r.provenance.session_id, r.provenance.message_ids) for r in given.written] == [
        ("chat-1", ("msg-17",)), ("chat-1", ("9",))]
    positions = bank.add_messages("我养了一只猫叫年糕", user_id="other")  # one string: one message, at 0
    assert positions.written[0].provenance == Provenance(None, ("0",))
    mixed = bank.add_messages([{"role": "assistant", "content": "hello"}, {"role": "user", "content": "I live in Rome"}],
                              user_id="third")
    assert mixed.written[0].provenance.message_ids == ("1",)  # its position in the list, assistant counted
    with pytest.raises(InvalidInputError) as refused:
        bank.add_messages([{"role": "user", "content": "I live in Rome", "id": ["x"]}])
    assert refused.value.field == "messages[0].id"


def test_export_and_import_keep_it(bank, make_bank, settings, tmp_path):
    written = bank.add_messages([{"role": "user", "content": "I live in Hangzhou", "id": "t1"}], session_id="c").written
    lines = [json.dumps(record.to_dict()) for record in bank.export()]
    other = make_bank(settings=settings.with_changes(home=tmp_path / "elsewhere"))
    assert other.import_jsonl(lines).added == 1
    assert other.get(written[0].id).provenance == Provenance("c", ("t1",))


def test_vecmem_get_shows_it(cli):
    bank = cli.bank()
    (record,) = bank.add_messages([{"role": "user", "content": "I live in Hangzhou", "id": "t1"}]).written
    bank.close()
    code, out, err = cli("get", record.id)
    assert code == 0, err
    assert json.loads(out)["provenance"] == {"session_id": None, "message_ids": ["t1"]}


def test_the_http_api_shows_and_describes_it(bank):
    api = TestClient(create_app(bank), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                     headers={"X-Vecmem-Request": "1"})
    made = api.post("/messages", json={"messages": [{"role": "user", "content": "我住在杭州", "id": "turn-3"},
                                                    {"role": "user", "content": "I work at Acme", "id": 4}],
                                       "session_id": "chat-9"})
    assert made.status_code == 200, made.text
    written = made.json()["written"]
    assert [m["provenance"] for m in written] == [{"session_id": "chat-9", "message_ids": ["turn-3"], "speaker": None},
                                                   {"session_id": "chat-9", "message_ids": ["4"], "speaker": None}]
    named = api.post("/messages", json={"messages": [{"role": "user", "content": "I adopted a cat called Miso",
                                                      "speaker": "Dana"}], "session_id": "chat-9"}).json()
    assert named["written"][0]["provenance"] == {"session_id": "chat-9", "message_ids": ["0"], "speaker": "Dana"}
    assert api.get(f"/memories/{written[0]['id']}").json()["provenance"]["message_ids"] == ["turn-3"]
    by_hand = api.post("/memories", json={"content": "The user likes tea"}).json()
    assert by_hand["provenance"] is None
    refused = api.post("/messages", json={"messages": [{"role": "user", "content": "I live in Rome", "id": -2}]})
    assert refused.status_code == 422 and refused.json()["field"] == "messages[0].id"
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    assert "provenance" in schemas["MemoryOut"]["properties"] and schemas["ProvenanceOut"]["properties"]["message_ids"]
