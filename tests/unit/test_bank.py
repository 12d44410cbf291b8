"""MemoryBank on real Chroma in tmp_path, with the deterministic fake embedder passed through the constructor."""

import json
import math

import pytest

from tests.conftest import FakeEmbedder
from vecmem import (
    ConflictError,
    EmbeddingError,
    EmbeddingMismatchError,
    InvalidInputError,
    MemoryBank,
    MemoryRecord,
    NotFoundError,
)
from vecmem.bank.facade import content_id
from vecmem.retrieval.rank import prior_share

pytestmark = pytest.mark.both_stores  # embedded, and again on a real `chroma run` server


def ids(hits):
    return [hit.id for hit in hits]


class TestAddGetForget:
    def test_add_returns_the_stored_record(self, bank, clock):
        record = bank.add("The user likes green tea", memory_type="preference", importance=7, tags=["drinks"])
        assert record.importance == pytest.approx(0.7) and record.created_at == clock.now
        assert record.id == content_id("default", "global", "The user likes green tea")
        assert bank.get(record.id) == record

    def test_adding_the_same_statement_twice_stores_it_once(self, bank):
        first = bank.add("The user likes green tea")
        again = bank.add("  the user LIKES green tea ", importance=0.9)
        assert again == first
        assert bank.stats().count == 1

    def test_same_statement_in_a_session_is_a_different_memory(self, bank):
        bank.add("Working on the parser")
        bank.add("Working on the parser", session_id="s1")
        assert bank.stats().count == 2

    def test_explicit_id_cannot_be_reused_for_other_content(self, bank):
        bank.add("one", memory_id="fixed")
        with pytest.raises(ConflictError, match="already used"):
            bank.add("two", memory_id="fixed")

    def test_invalid_add_stores_nothing(self, bank):
        with pytest.raises(InvalidInputError):
            bank.add("fine text", memory_type="opinion")
        with pytest.raises(InvalidInputError):
            bank.add("fine text", session_id="global")
        assert bank.stats().count == 0

    def test_forget(self, bank):
        kept = bank.add("keep me")
        gone = bank.add("forget me please")
        assert bank.forget(gone.id) == gone
        with pytest.raises(NotFoundError):
            bank.get(gone.id)
        with pytest.raises(NotFoundError):
            bank.forget(gone.id)
        assert ids(bank.search("forget me please", 5)) == [kept.id]
        assert [r.id for r in bank.export()] == [kept.id]

    def test_update_reembeds_new_content(self, bank):
        record = bank.add("The user likes cats", importance=0.5)
        updated = bank.update(record.id, content="The user likes dogs", importance=0.9, tags=["pets"])
        assert updated.id == record.id and updated.importance == 0.9 and updated.tags == ("pets",)
        assert bank.get(record.id) == updated
        assert bank.search("dogs", 1)[0].similarity > bank.search("cats", 1)[0].similarity

    def test_update_can_clear_tags(self, bank):
        record = bank.add("tagged memory", tags=["a", "b"])
        assert bank.update(record.id, tags=[]).tags == ()
        assert bank.get(record.id).tags == ()


class TestSearch:
    def test_hits_carry_score_parts_and_the_formula_holds(self, bank, clock):
        old = bank.add("The user writes Python scripts", importance=0.9)
        clock.advance(days=30)
        new = bank.add("The user writes Go services", importance=0.3)
        hits = bank.search("python scripts", 2)
        assert ids(hits) == [old.id, new.id]
        by_id = {hit.id: hit for hit in hits}
        assert by_id[old.id].recency == pytest.approx(math.exp(-0.01 * 30))
        assert by_id[new.id].recency == pytest.approx(1.0)
        for hit in hits:
            assert hit.importance == bank.get(hit.id).importance
            priors = 0.2 * hit.recency + 0.2 * hit.importance
            assert hit.score == pytest.approx(0.6 * hit.similarity + prior_share(hit.similarity) * priors)
            assert 0.0 <= hit.similarity <= 1.0

    def test_configured_weights_and_decay_are_used(self, make_bank, settings, clock):
        from vecmem import RankWeights

        bank = make_bank(settings=settings.with_changes(weights=RankWeights(1, 0, 0), recency_decay_per_day=0.1))
        bank.add("alpha beta")
        clock.advance(days=10)
        hit = bank.search("alpha beta", 1)[0]
        assert hit.score == pytest.approx(hit.similarity)
        assert hit.recency == pytest.approx(math.exp(-1.0))

    def test_returned_memories_record_the_access(self, bank, clock):
        a = bank.add("apples are red")
        b = bank.add("bananas are yellow")
        clock.advance(days=3)
        bank.search("apples", 1)
        assert bank.get(a.id).access_count == 1 and bank.get(a.id).last_accessed == clock.now
        assert bank.get(b.id).access_count == 0 and bank.get(b.id).last_accessed is None
        bank.search("apples", 1, record_access=False)
        assert bank.get(a.id).access_count == 1

    def test_access_refreshes_recency(self, bank, clock):
        record = bank.add("refresh me")
        clock.advance(days=50)
        assert bank.search("refresh me", 1)[0].recency == pytest.approx(math.exp(-0.5))
        assert bank.search("refresh me", 1)[0].recency == pytest.approx(1.0)  # last_accessed is now
        assert bank.get(record.id).access_count == 2

    def test_sessions_see_global_plus_their_own_only(self, bank):
        g = bank.add("deploy notes global", session_id=None)
        s1 = bank.add("deploy notes for session one", session_id="s1")
        s2 = bank.add("deploy notes for session two", session_id="s2")
        assert set(ids(bank.search("deploy notes", 10))) == {g.id}
        assert set(ids(bank.search("deploy notes", 10, session_id="s1"))) == {g.id, s1.id}
        assert set(ids(bank.search("deploy notes", 10, session_id="s2"))) == {g.id, s2.id}
        assert set(ids(bank.search("deploy notes", 10, session_id="s3"))) == {g.id}

    def test_superseded_memories_are_never_returned(self, bank):
        old = bank.add("The user edits in VS Code", memory_type="preference")
        new = bank.add("The user edits in Neovim now", memory_type="preference")
        bank.supersede(old.id, new.id)
        for query in ("VS Code", "The user edits in VS Code", ""):
            assert old.id not in ids(bank.search(query, 10))
        assert bank.get(old.id).superseded_by == new.id
        listed = bank.list_memories(include_superseded=True)
        assert old.id in [r.id for r in listed] and old.id not in [r.id for r in bank.list_memories()]

    def test_overfetch_keeps_k_live_results_behind_many_superseded(self, bank):
        replacement = bank.add("unrelated replacement text")
        for i in range(30):
            record = bank.add(f"the exact query words {i}")
            if i < 25:
                bank.supersede(record.id, replacement.id)
        hits = bank.search("the exact query words", 5)
        assert len(hits) == 5 and all(not bank.get(h).superseded for h in ids(hits))

    def test_type_filter(self, bank):
        bank.add("likes tea", memory_type="preference")
        bank.add("tea is grown in Yunnan", memory_type="fact")
        bank.add("always answer about tea briefly", memory_type="instruction")
        assert {h.type for h in bank.search("tea", 10, types=["preference"])} == {"preference"}
        assert {h.type for h in bank.search("tea", 10, types="fact")} == {"fact"}
        assert {h.type for h in bank.search("tea", 10, types=["fact", "instruction"])} == {"fact", "instruction"}
        with pytest.raises(InvalidInputError):
            bank.search("tea", 10, types=["opinion"])

    def test_users_never_meet(self, bank):
        alice = bank.add("secret plan alpha", user_id="alice")
        bob = bank.add("secret plan alpha", user_id="bob")
        assert ids(bank.search("secret plan alpha", 10, user_id="alice")) == [alice.id]
        assert ids(bank.search("secret plan alpha", 10, user_id="bob")) == [bob.id]
        assert bank.search("secret plan alpha", 10) == []  # the default user has nothing
        with pytest.raises(NotFoundError):
            bank.get(alice.id, user_id="carol")
        bank.forget(alice.id, user_id="alice")
        assert ids(bank.search("secret plan alpha", 10, user_id="bob")) == [bob.id]
        assert sorted(bank.users()) == ["alice", "bob"]

    def test_empty_query_returns_the_most_important(self, bank):
        bank.add("minor detail", importance=0.1)
        top = bank.add("critical instruction", importance=1.0, memory_type="instruction")
        mid = bank.add("useful fact", importance=0.6)
        hits = bank.search("   ", 2)
        assert ids(hits) == [top.id, mid.id]
        assert all(h.similarity == 0.0 for h in hits)

    def test_warm_up_loads_the_model_and_the_keyword_index(self, bank, make_bank):
        bank.add("the user drinks green tea", user_id="alice")
        fresh = make_bank(embedder=bank.embedder)  # a new bank on the same store: nothing loaded yet
        queries = bank.embedder.query_calls
        fresh.warm_up(user_id="alice")
        # "warm up"; the calibration (retrieval/embedding/calibration.py) is read from the cache the first bank
        # left, under the same model's fingerprint, without embedding the calibration set again
        assert bank.embedder.query_calls == queries + 1
        assert fresh._retriever._cohort._calibration is not None
        assert "alice" in fresh._retriever._copies and len(fresh._retriever._copies["alice"].index) == 1

    def test_an_edit_during_an_index_build_is_not_lost(self, bank, make_bank):
        """A write while another thread builds the keyword index lands in the new index (the build holds the
        retriever's lock; writes wait for it instead of updating the index it replaces)."""
        import threading

        for i in range(50):
            bank.add(f"memory number {i} about tea", memory_id=f"m{i}")
        fresh = make_bank(embedder=bank.embedder)
        builder = threading.Thread(target=fresh.warm_up)
        builder.start()
        added = fresh.add("a new memory about coffee", memory_id="late")
        builder.join()
        assert "late" in ids(fresh.search("coffee", 3, record_access=False))
        assert added.id in fresh._retriever._copies["default"].index

    def test_k_bounds(self, bank):
        bank.add("only one memory")
        assert len(bank.search("memory", 10_000)) == 1
        for bad in (0, -1, 1.5, True):
            with pytest.raises(InvalidInputError, match="k"):
                bank.search("memory", bad)
        with pytest.raises(InvalidInputError, match="query"):
            bank.search(None, 3)  # type: ignore[arg-type]

    def test_empty_store_returns_nothing(self, bank):
        assert bank.search("anything", 5) == []
        assert bank.search("", 5) == []


class TestPersistenceAndModel:
    def test_memories_survive_reopening(self, make_bank):
        first = make_bank()
        record = first.add("persist me", memory_type="instruction", tags=["x"], session_id="s1", importance=0.8)
        first.search("persist me", 1, session_id="s1")
        reopened = make_bank()
        stored = reopened.get(record.id)
        assert stored.content == "persist me" and stored.tags == ("x",) and stored.scope == "s1"
        assert stored.access_count == 1
        assert ids(reopened.search("persist me", 1, session_id="s1")) == [record.id]

    def test_opening_with_another_model_names_both_and_the_fix(self, make_bank):
        make_bank(embedder=FakeEmbedder("model-a", 64)).add("hello world")
        with pytest.raises(EmbeddingMismatchError) as excinfo:
            make_bank(embedder=FakeEmbedder("model-b", 32))
        message = str(excinfo.value)
        assert "model-a" in message and "model-b" in message and "vecmem reindex" in message
        assert excinfo.value.stored_dim == 64

    def test_reindex_moves_the_store_to_the_new_model(self, make_bank):
        old = make_bank(embedder=FakeEmbedder("model-a", 64))
        kept = old.add("The user likes jasmine tea", memory_type="preference", importance=0.8, session_id="s1")
        superseded = old.add("The user likes black tea", memory_type="preference", session_id="s1")  # same scope:
        old.supersede(superseded.id, kept.id)  # a session memory replaces only memories of its own session
        old.add("another user's memory", user_id="bob")
        done = make_bank(embedder=FakeEmbedder("model-b", 32), verify_model=False).reindex()
        assert done == {"default": 2, "bob": 1}
        fixed = make_bank(embedder=FakeEmbedder("model-b", 32))
        assert fixed.stats().embed_model == "model-b" and fixed.stats().embed_dim == 32
        assert ids(fixed.search("jasmine tea", 5, session_id="s1")) == [kept.id]
        assert fixed.get(superseded.id).superseded_by == kept.id
        assert fixed.get(kept.id).importance == 0.8
        with pytest.raises(EmbeddingMismatchError):
            make_bank(embedder=FakeEmbedder("model-a", 64))

    def test_a_failed_reindex_leaves_the_old_store_usable(self, make_bank):
        class Broken(FakeEmbedder):
            def embed_documents(self, texts):
                raise EmbeddingError("model crashed")

        make_bank(embedder=FakeEmbedder("model-a", 64)).add("still here")
        with pytest.raises(EmbeddingError):
            make_bank(embedder=Broken("model-b", 32), verify_model=False).reindex()
        assert ids(make_bank(embedder=FakeEmbedder("model-a", 64)).search("still here", 1))

    def test_a_reindex_that_died_midway_resumes_without_embedding_twice(self, make_bank, settings):
        class Dying(FakeEmbedder):
            def embed_documents(self, texts):
                if self.document_calls == 3:  # the fourth batch: a kill, as far as the reindex can tell
                    raise KeyboardInterrupt
                return super().embed_documents(texts)

        small = settings.with_changes(embed_batch_size=1, dedicated_at=40)  # batches of 64; "big" has its own
        old = make_bank(settings=small, embedder=FakeEmbedder("model-a", 64))
        old.add_records(MemoryRecord(id=f"b{n}", user_id="big", content=f"big note {n} on kestrels")
                        for n in range(300))
        old.add_records(MemoryRecord(id=f"s{n}", user_id=f"small{n % 3}", content=f"small note {n}")
                        for n in range(12))
        with pytest.raises(KeyboardInterrupt):
            make_bank(settings=small, embedder=Dying("model-b", 32), verify_model=False).reindex()
        reader = make_bank(settings=small, embedder=FakeEmbedder("model-a", 64))  # the old model reads it all
        assert reader.count(user_id="big") == 300 and ids(reader.search("kestrels", 1, user_id="big"))
        with pytest.raises(EmbeddingMismatchError):
            make_bank(settings=small, embedder=FakeEmbedder("model-b", 32))

        resumed = FakeEmbedder("model-b", 32)
        seen: list[int] = []
        done = make_bank(settings=small, embedder=resumed, verify_model=False).reindex(progress=seen.append)
        assert done == {"big": 300, "small0": 4, "small1": 4, "small2": 4} and sum(seen) == 312
        assert resumed.document_calls == 5  # the 108 left of "big" in two batches of 64, a batch per small user
        new = make_bank(settings=small, embedder=FakeEmbedder("model-b", 32))
        exported = list(new.export())
        assert len(exported) == len({r.id for r in exported}) == 312
        assert not new.doctor().findings and ids(new.search("kestrels", 1, user_id="big"))

    @pytest.mark.embedded_only  # white-box on Chroma's client
    def test_an_interrupted_swap_is_finished_on_open(self, make_bank, settings):
        dedicated = settings.with_changes(dedicated_at=1)  # collections of its own, which a reindex swaps
        bank = make_bank(settings=dedicated)
        record = bank.add("survives a crash mid-swap")
        client = bank._store._client  # white-box: recreate the state a crash between drop and rename leaves
        (collection,) = [c for c in client.list_collections() if c.name.endswith("-fact")]
        collection.modify(name=collection.name + "-reindex", metadata={**collection.metadata, "vecmem_rebuild_complete": True})
        assert make_bank(settings=dedicated).get(record.id).content == "survives a crash mid-swap"


    @pytest.mark.embedded_only  # it writes the old layout into the store's folder
    def test_a_one_collection_store_is_split_by_type_on_open(self, make_bank, settings, clock):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        from vecmem.retrieval.index.keyword import memory_tokens
        from vecmem.storage.chroma.rows import to_metadata
        from vecmem.storage.chroma.shared import user_key as first_layout_name  # the first layout named a collection so

        # write a user the way vecmem's first layout did: one collection holding every type
        embedder = FakeEmbedder()
        client = chromadb.PersistentClient(path=str(settings.home / "chroma"),
                                           settings=ChromaSettings(anonymized_telemetry=False))
        client.get_or_create_collection("vecmem-registry", metadata={"embed_model": embedder.name, "embed_dim": 64,
                                                                     "vecmem_schema": 1}, embedding_function=None)
        legacy = client.create_collection(first_layout_name("default"), configuration={"hnsw": {"space": "cosine"}},
                                          metadata={"vecmem_user": "default", "embed_model": embedder.name,
                                                    "embed_dim": 64, "vecmem_schema": 1}, embedding_function=None)
        from vecmem import MemoryRecord

        old = [MemoryRecord(id="a", content="likes green tea", type="preference", created_at=clock.now),
               MemoryRecord(id="b", content="lives in Lisbon", type="fact", created_at=clock.now),
               MemoryRecord(id="c", content="always answer briefly", type="instruction", created_at=clock.now)]
        legacy.upsert(ids=[r.id for r in old], embeddings=embedder.embed_documents([r.content for r in old]),
                   documents=[r.content for r in old],
                   metadatas=[{**to_metadata(r), "keywords": " ".join(memory_tokens(r))} for r in old])
        bank = make_bank(embedder=embedder)
        assert {r.id for r in bank.list_memories()} == {"a", "b", "c"}
        assert [h.id for h in bank.search("green tea", 3, types=["preference"])] == ["a"]
        assert not [c for c in client.list_collections() if c.name == first_layout_name("default")]
        assert not [c for c in client.list_collections() if c.name.startswith("vecmem-u-")]  # a small user:
        assert [c for c in client.list_collections() if c.name.startswith("vecmem-shared-")]  # shared collections

    def test_changing_the_type_moves_the_memory(self, bank):
        record = bank.add("the user drinks oolong tea", memory_type="fact")
        bank.update(record.id, memory_type="preference")
        assert [h.id for h in bank.search("oolong tea", 3, types=["preference"])] == [record.id]
        assert bank.search("oolong tea", 3, types=["fact"]) == []
        assert bank.get(record.id).type == "preference"
        # the memory, and the revision the edit kept of it (history)
        assert bank.count() == 2 and [r.type for r in bank.history(record.id)] == ["fact", "preference"]


class TestBuildContext:
    def test_budget_and_access(self, bank, clock):
        for i in range(40):
            bank.add(f"memory {i} about the user's coding habits and preferences " + "detail " * 10, importance=0.5)
        pack = bank.build_context("coding habits", context_tokens=1000, k=40)
        assert 0 < pack.tokens["long_term"] <= 250
        assert bank.token_counter.count(pack.long_term) == pack.tokens["long_term"]
        assert pack.dropped_ids and len(pack.memories) + len(pack.dropped_ids) == 40
        for hit in pack.memories:
            assert bank.get(hit.id).access_count == 1
        for memory_id in pack.dropped_ids:
            assert bank.get(memory_id).access_count == 0
        assert pack.messages[-1] == {"role": "user", "content": "coding habits"}
        assert set(pack.tokens) == {"system", "long_term", "short_term", "current"}

    def test_session_memories_of_other_sessions_stay_out(self, bank):
        bank.add("session one secret", session_id="s1")
        pack = bank.build_context("session one secret", session_id="s2")
        assert "secret" not in pack.long_term

    def test_bad_window(self, bank):
        with pytest.raises(InvalidInputError, match="context_tokens"):
            bank.build_context("q", context_tokens=0)


class TestImportExport:
    def test_bad_lines_are_reported_and_good_lines_imported(self, bank):
        lines = [
            json.dumps({"id": "a", "content": "first good", "type": "fact"}),
            "{not json",
            json.dumps({"id": "b", "content": "bad type", "type": "opinion"}),
            "",
            json.dumps({"content": "no id given, derived", "importance": 8}),
            json.dumps(["not", "an", "object"]),
            json.dumps({"id": "c", "content": "x", "importance": float("nan")}).replace("NaN", "NaN"),
        ]
        report = bank.import_jsonl(lines)
        assert report.added == 2 and report.skipped == 0
        assert [number for number, _ in report.errors] == [2, 3, 6, 7]
        assert "type" in report.errors[1][1] and "importance" in report.errors[3][1]
        assert {r.content for r in bank.export()} == {"first good", "no id given, derived"}
        again = bank.import_jsonl(lines)
        assert again.added == 0 and again.skipped == 2

    def test_overwrite_replaces(self, bank):
        bank.import_jsonl([json.dumps({"id": "a", "content": "old text"})])
        bank.import_jsonl([json.dumps({"id": "a", "content": "new text"})], overwrite=True)
        assert bank.get("a").content == "new text" and bank.stats().count == 1

    def test_export_then_import_into_a_fresh_store_is_identical(self, bank, make_bank, settings, tmp_path):
        bank.add("global fact", importance=0.3)
        bank.add("session pref", memory_type="preference", session_id="s1", tags=["t"])
        bank.add("bob's", user_id="bob")
        exported = [json.dumps(r.to_dict()) for r in bank.export()]
        fresh = make_bank(settings=settings.with_changes(home=tmp_path / "other",
                                                         chroma_database=settings.chroma_database + "-fresh"))
        assert fresh.import_jsonl(exported).added == 3
        assert sorted(r.to_dict()["id"] for r in fresh.export()) == sorted(json.loads(line)["id"] for line in exported)
        assert [r.to_dict() for r in fresh.export(user_id="bob")] == [r.to_dict() for r in bank.export(user_id="bob")]

    def test_user_override(self, bank):
        bank.import_jsonl([json.dumps({"id": "a", "content": "x", "user_id": "alice"})], user_id="zoe")
        assert bank.users() == ["zoe"]


class TestSupersedeAndStats:
    def test_cycles_and_self_are_refused(self, bank):
        a = bank.add("a statement")
        b = bank.add("b statement")
        with pytest.raises(ConflictError, match="itself"):
            bank.supersede(a.id, a.id)
        bank.supersede(a.id, b.id)
        with pytest.raises(ConflictError, match="cycle"):
            bank.supersede(b.id, a.id)

    def test_cannot_supersede_across_users(self, bank):
        a = bank.add("mine", user_id="alice")
        b = bank.add("theirs", user_id="bob")
        with pytest.raises(NotFoundError):
            bank.supersede(a.id, b.id, user_id="alice")

    @pytest.mark.parametrize(("older", "newer"), [(None, "s1"), ("s1", "s2")])
    def test_supersession_across_scopes_that_do_not_see_both_is_refused(self, bank, older, newer):
        old = bank.add("The user drinks tea", session_id=older)
        new = bank.add("The user drinks coffee now", session_id=newer)
        with pytest.raises(ConflictError, match="own session") as refused:
            bank.supersede(old.id, new.id)
        assert refused.value.field == "superseded_by" and new.id in str(refused.value)
        assert bank.get(old.id).superseded_by is None
        assert ids(bank.search("drinks tea", 5, session_id="s2")) != []  # still found wherever it was

    @pytest.mark.parametrize(("older", "newer"), [(None, None), ("s1", None), ("s1", "s1")])
    def test_supersession_by_a_memory_seen_wherever_the_old_one_is_is_allowed(self, bank, older, newer):
        old = bank.add("The user drinks tea", session_id=older)
        new = bank.add("The user drinks coffee now", session_id=newer)
        assert bank.supersede(old.id, new.id).superseded_by == new.id

    def test_the_agent_keeps_a_pair_the_bank_would_refuse_and_finishes_the_turn(self, bank):
        from vecmem.agent.writing.conflict import ConflictResolver
        from vecmem.agent.writing.extract import Candidate

        global_fact = bank.add("The user drinks tea", memory_type="preference")
        candidate = Candidate("The user drinks coffee in this chat", "preference", 0.6, (), session_scoped=True,
                              confidence=1.0, action="UPDATE", target_id=global_fact.id)
        resolver = ConflictResolver(bank)
        _resolution, written = resolver.write(candidate, user_id="default", session_id="s1")
        assert written.record is not None and written.record.scope == "s1" and written.replaced is None
        assert "kept" in written.reason and bank.get(global_fact.id).superseded_by is None  # refused, not failed

    def test_forgetting_the_newer_memory_brings_back_what_it_replaced(self, bank):
        old = bank.add("The user writes TypeScript", memory_type="preference")
        new = bank.add("The user writes JavaScript now", memory_type="preference")
        bank.supersede(old.id, new.id)
        assert ids(bank.search("writes TypeScript", 5)) == [new.id]
        assert bank.forget(new.id).id == new.id
        assert bank.get(old.id).superseded_by is None
        assert ids(bank.search("writes TypeScript", 5)) == [old.id]
        assert [r.id for r in bank.history(old.id)] == [old.id]

    def test_forgetting_the_middle_of_a_chain_links_its_elders_to_its_successor(self, bank):
        first, second = bank.add("tea first", memory_id="first"), bank.add("tea second", memory_id="second")
        third, other = bank.add("tea third", memory_id="third"), bank.add("tea other", memory_id="other")
        bank.supersede(first.id, second.id)
        bank.supersede(other.id, second.id)
        bank.supersede(second.id, third.id)
        bank.forget(second.id)
        assert {r.id: r.superseded_by for r in bank.list_memories(include_superseded=True)} == {
            "first": "third", "other": "third", "third": None}
        assert ids(bank.search("tea", 5)) == ["third"]
        assert [r.id for r in bank.history(third.id)] in (["first", "other", "third"], ["other", "first", "third"])

    def test_stats(self, bank):
        bank.add("f1")
        bank.add("p1", memory_type="preference", session_id="s")
        old = bank.add("i1", memory_type="instruction")
        bank.supersede(old.id, bank.add("c1", memory_type="conclusion").id)
        stats = bank.stats()
        assert stats.count == 4 and stats.live == 3 and stats.superseded == 1
        assert stats.by_type == {"fact": 1, "preference": 1, "instruction": 1, "conclusion": 1}
        assert stats.by_scope == {"global": 3, "session": 1}
        assert stats.embed_model == "fake-hash-64" and stats.embed_dim == 64
        assert bank.stats(user_id="nobody").count == 0


def test_list_filters(bank):
    bank.add("g fact")
    bank.add("s1 pref", memory_type="preference", session_id="s1")
    bank.add("s2 fact", session_id="s2")
    assert len(bank.list_memories()) == 3
    assert {r.content for r in bank.list_memories(session_id="s1")} == {"g fact", "s1 pref"}
    assert {r.content for r in bank.list_memories(types=["preference"])} == {"s1 pref"}
    assert len(bank.list_memories(limit=2)) == 2
    with pytest.raises(InvalidInputError):
        bank.list_memories(limit=0)


def test_access_statistics_are_shared_by_every_bank_on_the_store(make_bank, clock):
    first = make_bank()
    record = first.add("count me")
    for _ in range(3):
        first.search("count me", 1)
    other = make_bank()  # another bank (or process) on the same store sees the counts at once
    assert other.get(record.id).access_count == 3
    other.search("count me", 1)
    assert first.get(record.id).access_count == 4
    assert first.get(record.id).last_accessed == clock.now
    first.forget(record.id)
    again = first.add("count me")  # the same statement added anew starts from zero
    assert again.access_count == 0 and first.get(again.id).access_count == 0


def test_a_shared_bank_is_safe_across_threads(bank):
    from concurrent.futures import ThreadPoolExecutor

    def work(i: int) -> None:
        bank.add(f"thread memory number {i}")
        bank.search("thread memory", 3)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(20)))
    assert bank.stats().count == 20


def test_memory_bank_reads_settings_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "envhome"))
    monkeypatch.setenv("VECMEM_USER", "envuser")
    bank = MemoryBank(embedder=FakeEmbedder())
    bank.add("from the environment")
    assert bank.users() == ["envuser"]
    assert (tmp_path / "envhome" / "chroma").is_dir()


def test_tags_must_be_a_list_not_a_string(bank):
    with pytest.raises(InvalidInputError, match="tags"):
        bank.add("tagged", tags="drinks")
    record = bank.add("tagged", tags=["drinks"])
    with pytest.raises(InvalidInputError, match="tags"):
        bank.update(record.id, tags="food")
