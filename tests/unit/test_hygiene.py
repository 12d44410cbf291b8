"""Memory hygiene: the forgetting policy archives (never destroys) the least valuable memories, and the review
queue keeps uncertain extractions out of retrieval until a person approves them."""

import io
import json

import pytest

from tests.conftest import ScriptedModel
from vecmem.errors import ConflictError
from vecmem.interfaces.cli.main import main as cli_main

pytestmark = pytest.mark.both_stores  # embedded, and again on a real `chroma run` server


def _fill(bank, clock, count):
    """``count`` memories of falling value: older and less important as i grows; every 10th an explicit
    importance-1.0 preference, the oldest of all."""
    for i in range(count):
        clock.advance(hours=1)
        if i % 10 == 0:
            bank.add(f"the user always wants answers about topic {i}", memory_id=f"p{i}",
                     memory_type="preference", importance=1.0, created_at=clock.now.replace(year=2020))
        else:
            bank.add(f"note number {i} about gardening", memory_id=f"n{i}",
                     importance=round(1.0 - i / (count * 1.2), 3))


def test_a_cap_of_100_archives_the_50_lowest_retention_never_an_explicit_preference(make_bank, settings, clock):
    bank = make_bank(settings=settings.with_changes(cap_per_user=100))
    _fill(bank, clock, 150)
    live = bank.list_memories()
    archived = bank.list_memories(statuses=["archived"])
    assert len(live) == 100 and len(archived) == 50
    assert not any(r.importance >= 1.0 and r.type == "preference" for r in archived)
    assert {f"p{i}" for i in range(0, 150, 10)} <= {r.id for r in live}  # the explicit preferences all stay
    from vecmem.maintenance.hygiene import retention

    lowest_live = min(retention(r, clock.now, settings.recency_decay_per_day) for r in live if r.id.startswith("n"))
    assert all(retention(r, clock.now, settings.recency_decay_per_day) <= lowest_live for r in archived)
    assert not {hit.id for hit in bank.search("note about gardening", 150, record_access=False)} & {
        r.id for r in archived}
    assert {r.id for r in bank.export()} >= {r.id for r in archived}  # archived, not destroyed
    for record in archived:
        assert bank.unarchive(record.id).status == "live"
    assert len(bank.list_memories()) == 150


def test_prune_dry_run_changes_nothing_and_gives_each_reason(make_bank, settings, clock):
    bank = make_bank(settings=settings.with_changes(prune_threshold=0.3))
    _fill(bank, clock, 30)
    before = [r.to_dict() for r in bank.export()]
    out = io.StringIO()
    factory = lambda settings_, verify_model=True: bank
    assert cli_main(["prune", "--dry-run", "--json"], stdout=out, stderr=io.StringIO(), bank_factory=factory) == 0
    listed = json.loads(out.getvalue())
    assert listed and all("below the threshold 0.3" in c["reason"] and c["retention"] < 0.3 for c in listed)
    assert not any(c["id"].startswith("p") for c in listed)
    assert [r.to_dict() for r in bank.export()] == before  # a dry run changes nothing
    assert cli_main(["prune"], stdout=io.StringIO(), stderr=io.StringIO(), bank_factory=factory) == 0
    assert {r.id for r in bank.list_memories(statuses=["archived"])} == {c["id"] for c in listed}


def test_a_low_confidence_extraction_waits_for_approval_and_a_rejected_one_is_gone(make_agent, settings):
    def responder(kind, messages):
        if kind == "extract":
            said = messages[-1]["content"].split("User: ")[1].split("\n")[0]
            confidence = 0.3 if "maybe" in said else 0.9
            return json.dumps({"memories": [{"content": "The user " + said, "type": "fact", "importance": 0.6,
                                             "tags": [], "scope": "global", "confidence": confidence,
                                             "action": "ADD", "target": None}]})
        return "ok"

    agent = make_agent(model=ScriptedModel(responder), cold_start=False)
    bank = agent.bank
    agent.turn("maybe lives in Lisbon")
    agent.turn("maybe keeps bees")
    agent.turn("works as a nurse")
    queue = bank.review_queue()
    assert {r.content for r in queue} == {"The user maybe lives in Lisbon", "The user maybe keeps bees"}
    assert all(r.source == "extracted" and r.confidence == 0.3 and r.status == "pending" for r in queue)
    assert [h.content for h in bank.search("Lisbon bees nurse", 10, record_access=False)] == [
        "The user works as a nurse"]
    lisbon, bees = sorted(queue, key=lambda r: "bees" in r.content)
    approved = bank.approve(lisbon.id, content="The user lives in Lisbon")
    assert approved.status == "live" and approved.confidence == 0.3 and approved.source == "extracted"
    assert "The user lives in Lisbon" in [h.content for h in bank.search("Lisbon", 5, record_access=False)]
    bank.reject(bees.id)
    assert bees.id not in {r.id for r in bank.export()} and bank.review_queue() == []
    assert "bees" not in bank.build_context("bees").long_term
    with pytest.raises(ConflictError, match="not pending"):
        bank.reject(approved.id)


def test_with_the_queue_off_low_confidence_only_lowers_the_weight(make_agent):
    def responder(kind, messages):
        if kind == "extract":
            return json.dumps({"memories": [{"content": "The user may like jazz", "type": "preference",
                                             "importance": 0.8, "tags": [], "scope": "global", "confidence": 0.25,
                                             "action": "ADD", "target": None}]})
        return "ok"

    agent = make_agent(model=ScriptedModel(responder), cold_start=False, review_queue=False)
    agent.turn("I think I like jazz")
    (hit,) = agent.bank.search("jazz", 1, record_access=False)
    assert hit.record.status == "live" and hit.importance == pytest.approx(0.8 * 0.25)


def test_review_approve_and_reject_from_the_command_line(make_bank, clock):
    bank = make_bank()
    queued = []
    for text in ("The user maybe drives a tram", "The user maybe owns a boat", "The user maybe plays chess"):
        clock.advance(minutes=1)  # the queue is shown oldest first
        queued.append(bank.add(text, source="extracted", confidence=0.2, status="pending"))
    first, second, third = queued
    factory = lambda settings_, verify_model=True: bank
    out = io.StringIO()
    # approve the first as it is, edit the second, reject the third
    code = cli_main(["review"], stdout=out, stderr=io.StringIO(), bank_factory=factory,
                    stdin=io.StringIO("a\ne\nThe user owns a sailing boat\nr\n"))
    assert code == 0, out.getvalue()
    assert bank.get(first.id).status == "live"
    assert bank.get(second.id).content == "The user owns a sailing boat" and bank.get(second.id).status == "live"
    assert third.id not in {r.id for r in bank.export()}
    again = bank.add("The user maybe sings", source="extracted", confidence=0.2, status="pending")
    assert cli_main(["approve", again.id], stdout=io.StringIO(), stderr=io.StringIO(), bank_factory=factory) == 0
    err = io.StringIO()
    assert cli_main(["reject", again.id], stdout=io.StringIO(), stderr=err, bank_factory=factory) == 2
    assert "not pending" in err.getvalue() and err.getvalue().count("\n") == 1
