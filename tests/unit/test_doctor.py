"""`vecmem doctor` finds each kind of damage, repairs what it safely can, and then finds the store healthy."""

import io
import json

import numpy as np
import pytest

import vecmem.storage.state.changes as changes_module
from tests.conftest import FakeEmbedder
from vecmem.interfaces.cli.main import main as cli_main
from vecmem.storage.chroma.rows import to_metadata

pytestmark = pytest.mark.chroma  # the damage is made in Chroma's own collections, below the store's interface


def _kinds(report):
    return {finding.kind: finding for finding in report.findings}


def _damaged(bank):
    """A store with one of every repairable problem, made the way a crash, an old version or a bug would."""
    for i in range(6):
        bank.add(f"the user keeps bees number {i}", memory_id=f"b{i}")
    bank.supersede("b1", "b2")
    store = bank._store
    # b0 points at a memory that is not there (forgetting through the bank would hand b0 back)
    store.update_metadata("default", [store.get("default", ["b0"])["b0"].with_changes(superseded_by="newer")])
    cyclic = store.get("default", ["b2"])["b2"].with_changes(superseded_by="b1")
    store.update_metadata("default", [cyclic])  # b1 -> b2 -> b1, written past the bank's cycle check
    record = store.get("default", ["b3"])["b3"]
    collections = store._typed("default", ["preference"], create_with_dimension=64)
    collections["preference"].add(ids=["b3"], embeddings=np.zeros((1, 64), dtype=np.float32) + 0.1,
                                  documents=[record.content], metadatas=[{**to_metadata(record), "keywords": "x"}])
    fact = store._typed("default", ["fact"])["fact"]
    fact.update(ids=["b4"], metadatas=[{**to_metadata(store.get("default", ["b4"])["b4"]), "keywords": "stale"}])
    bank._access.record([store.get("default", ["b5"])["b5"].with_changes(id="long-gone")], bank._clock())
    bank._changes._append([("default", "b5")], changes_module._BEGIN, writer="killed")  # killed mid-write
    bank._retriever.clear()


def test_the_doctor_finds_every_problem_and_repairs_them(make_bank):
    bank = make_bank()
    _damaged(bank)
    found = bank.doctor()
    kinds = _kinds(found)
    assert set(kinds) == {"dangling-superseded-by", "supersession-cycle", "misplaced-copies",
                          "keyword-index-out-of-step", "stale-access-statistics", "unfinished-writes"}
    assert kinds["dangling-superseded-by"].memory_ids == ("b0",)
    assert set(kinds["supersession-cycle"].memory_ids) == {"b1", "b2"}
    assert kinds["misplaced-copies"].memory_ids == ("b3",)
    assert "b4" in kinds["keyword-index-out-of-step"].memory_ids
    assert kinds["stale-access-statistics"].memory_ids == ("long-gone",)
    assert kinds["unfinished-writes"].memory_ids == ("b5",)
    assert not found.healthy and not any(f.repaired for f in found.findings)
    assert bank.doctor().findings == found.findings  # examining changed nothing

    repaired = bank.doctor(repair=True)
    assert repaired.healthy and all(f.repaired for f in repaired.findings)
    after = bank.doctor()
    assert after.findings == () and after.healthy
    assert after.counts == {"default": {"fact": 6, "preference": 0, "instruction": 0, "conclusion": 0}}
    assert not bank.get("b0").superseded
    assert (bank.get("b3").type, bank.get("b3").content) == ("fact", "the user keeps bees number 3")  # its own copy
    assert [bank.get(i).superseded for i in ("b1", "b2")].count(True) == 1  # the cycle is broken, one live
    assert "b4" in {hit.id for hit in bank.search("bees number 4", 6, record_access=False)}


def test_a_model_mismatch_is_reported_not_repaired(make_bank):
    make_bank().add("the user keeps bees")
    other = make_bank(embedder=FakeEmbedder(name="another-model"), verify_model=False)
    report = other.doctor(repair=True)
    (finding,) = report.findings
    assert finding.kind == "model-mismatch" and "vecmem reindex" in finding.detail and not finding.repaired
    assert not report.healthy


def test_the_cli_exit_code_says_whether_problems_remain(make_bank, settings):
    bank = make_bank()
    _damaged(bank)
    factory = lambda settings_, verify_model=True: bank
    out = io.StringIO()
    assert cli_main(["doctor"], stdout=out, stderr=io.StringIO(), bank_factory=factory) == 1
    assert "dangling-superseded-by" in out.getvalue() and "[repairable: --repair]" in out.getvalue()
    out = io.StringIO()
    assert cli_main(["doctor", "--repair"], stdout=out, stderr=io.StringIO(), bank_factory=factory) == 0
    assert "[repaired]" in out.getvalue()
    out = io.StringIO()
    assert cli_main(["doctor", "--json"], stdout=out, stderr=io.StringIO(), bank_factory=factory) == 0
    assert json.loads(out.getvalue())["healthy"] is True


def test_the_doctor_does_not_take_a_write_in_flight_in_its_own_process_for_damage(make_bank):
    bank = make_bank()
    bank.add("the user keeps bees", memory_id="bee")
    with bank._changes.writing("default", ["bee"]):  # a write this process is making right now
        assert bank.doctor().findings == ()
