"""What the owner of a store and its clients say to each other (vecmem/interfaces/owner/wire.py): every value type comes
back equal to what was sent, errors come back as the same class, nothing outside the lists is ever built, and
the protocol, the bank and the remote bank keep one set of signatures."""

from __future__ import annotations

import inspect
import json
import os
from datetime import UTC, datetime, timedelta, timezone

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from vecmem import errors
from vecmem.bank.api import MemoryApi
from vecmem.bank.facade import MemoryBank
from vecmem.bank.learning import AddMessagesResult, SkippedMessage
from vecmem.bank.listing import MemoryPage
from vecmem.bank.resolving import AddResult
from vecmem.errors import ConflictError, EmbeddingMismatchError, InvalidInputError, NotFoundError, StoreError
from vecmem.interfaces.owner.remote import RemoteBank
from vecmem.interfaces.owner.wire import (
    VALUE_TYPES,
    OwnerInfo,
    decode,
    encode,
    error_from,
    error_payload,
    read_owner,
)
from vecmem.maintenance.doctor import DoctorReport, Finding
from vecmem.maintenance.hygiene import PruneCandidate
from vecmem.models import Hit, ImportReport, MemoryRecord, PromptPack, Provenance, StoreStats, Turn


def through_the_wire(value, *, trusted=False):
    """``value`` encoded, sent as JSON text (as the owner sends it) and decoded."""
    return decode(json.loads(json.dumps(encode(value))), trusted=trusted)


T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RECORD = MemoryRecord(id="m1", content="The user likes green tea", type="preference", tags=("drinks", "tea"),
                      importance=0.7, scope="work", created_at=T0, last_accessed=T0 + timedelta(days=2),
                      access_count=3, source="extracted", confidence=0.8, superseded_by="m2", user_id="li",
                      context="we talked about tea", status="pending", version=4)
HIT = Hit(id="m1", content=RECORD.content, type="preference", score=0.71, similarity=0.5, recency=0.99,
          importance=0.56, record=RECORD, dense=0.4, keyword=None, matched_terms=("green", "茶"))
EVERY_TYPE = [
    RECORD,
    HIT,
    Turn("assistant", "好的"),
    PromptPack(messages=({"role": "system", "content": "s"}, {"role": "user", "content": "q"}),
               tokens={"system": 1, "long_term": 9, "short_term": 0, "current": 1},
               limits={"system": 45, "long_term": 75, "short_term": 90, "current": 90}, long_term="- tea",
               memories=(HIT,), dropped_ids=("m3",), truncated_ids=("m4",)),
    ImportReport(added=2, skipped=1, errors=((3, "line: not JSON"), (7, "content: is required"))),
    StoreStats(user_id=None, count=3, live=2, superseded=1, by_type={"fact": 2, "preference": 1},
               by_scope={"global": 2, "session": 1}, users=("default", "li"), embed_model="m", embed_dim=384,
               location="/tmp/x", archived=0, pending=1),
    DoctorReport(counts={"li": {"fact": 1}}, findings=(
        Finding(kind="dangling", user_id="li", memory_ids=("m1",), detail="points nowhere", repairable=True,
                repaired=True),)),
    PruneCandidate(record=RECORD, retention=0.012, reason="retention below 0.05"),
    AddMessagesResult(written=(RECORD,), replaced=(("m0", "m1"),), skipped=(SkippedMessage(1, "hi", "rules", "filler"),),
                      unchanged=("m9",)),
    SkippedMessage(index=0, content="ok", stage="rules", reason="filler"),
    Finding(kind="unreadable", user_id=None, memory_ids=(), detail="a row", repairable=False),
    Provenance(session_id="chat-1", message_ids=("12", "13")),
    MemoryPage(memories=(RECORD,), total=7, offset=3, sort="-importance"),
    AddResult(action="replaced", record=RECORD, replaced=(RECORD,), reason="revises m0: residence is now 上海",
              type_inferred="fact", type_reason="first-person fact cue '我住'"),
]


def _value_types(annotation):
    """The vecmem dataclasses named in an annotation, and in their fields' annotations, transitively."""
    import dataclasses
    import typing

    found = set()
    pending = [annotation]
    while pending:
        current = pending.pop()
        if isinstance(current, type) and dataclasses.is_dataclass(current) and current not in found:
            found.add(current)
            pending.extend(typing.get_type_hints(current).values())
        pending.extend(typing.get_args(current))
    return found


def test_the_list_is_exactly_the_value_types_the_api_takes_and_returns():
    import typing

    reachable = set()
    for member in vars(MemoryApi).values():
        if inspect.isfunction(member):
            for annotation in typing.get_type_hints(member).values():
                reachable |= _value_types(annotation)
    assert {cls.__name__ for cls in reachable} == set(VALUE_TYPES)
    assert {type(value).__name__ for value in EVERY_TYPE} == set(VALUE_TYPES)


@pytest.mark.parametrize("value", EVERY_TYPE, ids=lambda value: type(value).__name__)
@pytest.mark.parametrize("trusted", [False, True], ids=["client to owner", "owner to client"])
def test_every_value_type_comes_back_equal(value, trusted):
    back = through_the_wire(value, trusted=trusted)
    assert type(back) is type(value) and back == value


def test_values_a_real_bank_returns_come_back_equal(make_bank):
    bank = make_bank()
    bank.add("The user likes green tea", memory_type="preference", tags=["tea"], session_id="s1")
    bank.add("用户住在杭州", importance=9)
    returned = [bank.list_memories(), bank.page_memories(sort="content", limit=1, offset=1),
                bank.search("green tea", 3, session_id="s1"),
                bank.build_context("tea?", session_id="s1", short_term=[Turn("user", "hi")]), bank.stats(),
                bank.stats(user_id="default"), bank.doctor(), list(bank.export()),
                bank.import_jsonl(['{"content": "x"}', "not json"]),
                bank.add_messages([{"role": "user", "content": "I live in Berlin"}, {"role": "user", "content": "ok"}]),
                bank.remember("I moved to Munich")]
    for value in returned:
        assert through_the_wire(value, trusted=True) == value


TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40).filter(str.strip)
TIMES = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=8))])).map(
    lambda time: time.replace(fold=0))  # fold means nothing at a fixed offset (and ISO 8601 does not carry it)


@settings(max_examples=60, deadline=None)
@given(content=TEXT, tags=st.lists(TEXT, max_size=4), importance=st.floats(0, 1), created=TIMES,
       accessed=st.none() | TIMES, count=st.integers(0, 10**9), confidence=st.floats(0, 1),
       kind=st.sampled_from(["fact", "preference", "instruction", "conclusion"]),
       status=st.sampled_from(["live", "archived", "pending"]), version=st.integers(1, 10**6))
def test_records_of_any_content_come_back_equal(content, tags, importance, created, accessed, count, confidence,
                                                kind, status, version):
    record = MemoryRecord(id="m-1", content=content, type=kind, tags=tuple(tags), importance=importance,
                          created_at=created, last_accessed=accessed, access_count=count, confidence=confidence,
                          status=status, version=version)
    for trusted in (False, True):
        assert through_the_wire(record, trusted=trusted) == record


NESTED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | TIMES,
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=100, deadline=None)
@given(NESTED)
def test_plain_values_keep_their_types(value):
    back = through_the_wire(value)
    assert back == value and repr(back) == repr(value)  # a tuple stays a tuple, an int key an int, 1.0 a float


@pytest.mark.parametrize("data", [
    {"$t": "MemoryFilter", "v": {}},  # a vecmem class, but not one the wire carries
    {"$t": "Settings", "v": {"home": "/"}},
    {"$t": "os.system", "v": {"command": "true"}},
    {"$t": "__import__", "v": "os"},
    {"$t": "MemoryRecord", "v": {"id": "m", "content": "x", "__class__": "x"}},
    {"$t": "tuple", "v": "abc"},
    {"$t": "dict", "v": [[[1], 2]]},
    {"$t": "datetime", "v": "yesterday"},
    {"tags": ["a"]},  # a plain JSON object: only tagged ones are values
    {"$t": "tuple", "v": [], "extra": 1},
])
def test_anything_but_the_listed_shapes_is_refused(data):
    with pytest.raises(InvalidInputError):
        decode(data)


def test_a_record_that_fails_validation_is_refused_from_a_client_but_read_as_stored_from_the_owner():
    sent = encode(RECORD)
    sent["v"]["importance"] = 42  # out of range: a client's record is validated like any new one
    with pytest.raises(InvalidInputError, match="importance"):
        decode(sent)
    stored_long_ago = encode(RECORD)
    stored_long_ago["v"]["id"] = "an id/with a slash"  # ids stored before the id rule stay readable
    assert decode(stored_long_ago, trusted=True).id == "an id/with a slash"


@pytest.mark.parametrize("value", [{1, 2}, object(), print, b"bytes", MemoryBank])
def test_values_the_wire_cannot_carry_are_refused_before_sending(value):
    with pytest.raises(InvalidInputError):
        encode(value)


ERRORS = [
    InvalidInputError("importance", "must be between 0 and 10"),
    ConflictError("version", "the memory changed", current_version=7),
    ConflictError("status", "is not pending"),
    NotFoundError("no memory 'm1' for user 'li'"),
    EmbeddingMismatchError("sentence-transformers/all-MiniLM-L6-v2", 384, "/models/bge"),
    *(getattr(errors, name)("a message") for name in ("ConfigError", "StoreError", "StoreInUseError",
                                                       "EmbeddingError", "LLMError", "ExtractionError",
                                                       "BudgetError", "VecmemError")),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_errors_come_back_as_the_same_class_with_their_fields(error):
    payload = json.loads(json.dumps(error_payload(error)))
    assert {"error", "message", "field", "current_version"} <= set(payload)
    back = error_from(payload)
    assert type(back) is type(error) and str(back) == str(error)
    for name in ("field", "reason", "current_version", "stored_model", "stored_dim", "configured_model"):
        assert getattr(back, name, None) == getattr(error, name, None)
    assert errors.is_user_error(back) == errors.is_user_error(error)


@pytest.mark.parametrize("payload", [
    {"error": "internal", "message": "internal error in the store's owner: KeyError"},
    {"error": "SystemExit", "message": "bye"},  # a real class, but not one of vecmem's errors
    {"error": "is_user_error", "message": "a function in vecmem.errors"},
    {"no": "message"},
    ["a list"],
])
def test_anything_else_is_a_store_error(payload):
    assert type(error_from(payload)) is StoreError


def _parameters(function):
    return [(p.name, p.kind, p.annotation) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", sorted(name for name, member in vars(MemoryApi).items()
                                        if inspect.isfunction(member) and not name.startswith("_")))
def test_the_bank_and_the_remote_bank_have_the_protocols_signatures(name):
    protocol = getattr(MemoryApi, name)
    assert _parameters(getattr(MemoryBank, name)) == _parameters(protocol)
    assert _parameters(getattr(RemoteBank, name)) == _parameters(protocol)
    assert inspect.signature(getattr(RemoteBank, name)) == inspect.signature(getattr(MemoryBank, name))


def _write(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)


def test_owner_json_is_read_only_when_it_is_ours_private_and_well_formed(tmp_path):
    info = OwnerInfo(pid=os.getpid(), port=4321, secret="s" * 43, program="vecmem serve", started="2026-06-01")
    assert read_owner(tmp_path) is None  # none yet
    _write(tmp_path / "owner.json", info.to_json())
    assert read_owner(tmp_path) == info
    _write(tmp_path / "owner.json", info.to_json(), mode=0o644)  # others could read the secret: not an owner's
    assert read_owner(tmp_path) is None
    for broken in ("{", "[]", '{"pid": 1}', info.to_json().replace("4321", "70000"),
                   info.to_json().replace('"vecmem serve"', "3"), info.to_json()[:-1] + ', "more": 1}'):
        _write(tmp_path / "owner.json", broken)
        assert read_owner(tmp_path) is None, broken


def test_a_command_through_the_owner_imports_neither_numpy_nor_the_stores_modules():
    """A `vecmem` command that an owner answers starts as fast as the wire lets it: the value types of an answer
    are imported when one comes (a record: models.py), not the doctor's, the listing's store and numpy."""
    import subprocess
    import sys

    code = ("import sys; import vecmem.interfaces.cli.main, vecmem.interfaces.owner.opening; "
            "from vecmem.interfaces.owner.wire import decode, encode; from vecmem.models import MemoryRecord; "
            "assert decode(encode([MemoryRecord(id='m-1', content='x')]), trusted=True)[0].id == 'm-1'; "
            "heavy = {'numpy', 'chromadb', 'vecmem.storage.base', 'vecmem.maintenance.doctor'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_value_types_are_found_by_name_where_they_are_defined():
    assert all(VALUE_TYPES[name].__name__ == name for name in VALUE_TYPES)
    with pytest.raises(KeyError):
        VALUE_TYPES["Path"]  # a name off the list is never looked up
