"""VecmemStore, LangGraph's BaseStore on a vecmem bank: where items go, what comes back, vecmem's ranking, batches,
bad input, and a LangGraph graph that keeps its memories in it. (test_langgraph_differential.py compares it with
LangGraph's own InMemoryStore on random operation sequences.)"""

from __future__ import annotations

import asyncio
import json
import operator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp

from vecmem import InvalidInputError, VecmemStore
from vecmem.interfaces.integrations.items import item_id, vecmem_name
from vecmem.interfaces.integrations.langgraph_store import NamespaceError

TEA = {"text": "Alice drinks green tea every morning", "source": "chat"}


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture
def store(bank, clock):
    return VecmemStore(bank, clock=clock)


def test_an_item_is_a_memory_of_the_user_and_session_its_namespace_names(store, bank):
    store.put(("alice", "prefs", "ui"), "theme", {"text": "Alice wants a dark theme", "level": 2})
    store.put(("alice",), "name", {"text": "Alice's full name is Alice Liddell"})
    (ui,) = [record for record in bank.list_memories(user_id="alice") if record.scope != "global"]
    assert ui.session_id == "prefs" and ui.id == item_id(("alice", "prefs", "ui"), "theme")
    assert ui.content == "Alice wants a dark theme"  # what the model sees; the whole item is in the context
    assert json.loads(ui.context)["value"] == {"text": "Alice wants a dark theme", "level": 2}
    (top,) = [record for record in bank.list_memories(user_id="alice") if record.scope == "global"]
    assert top.content == "Alice's full name is Alice Liddell"
    assert bank.users() == ["alice"]


def test_labels_and_keys_vecmem_refuses_are_hashed_and_come_back_as_put(store, bank):
    odd = ("Bob Smith", "global", "ключ*")
    value = {"text": "Bob\x85 builds\ud800 boats", "nested": {"list": [1, 2.5, None, True, "é"]}, "empty": {}}
    store.put(odd, "a key/with?odd chars.", value)
    item = store.get(odd, "a key/with?odd chars.")
    assert (item.namespace, item.key, item.value) == (odd, "a key/with?odd chars.", value)
    (user,) = bank.users()
    assert user == vecmem_name("Bob Smith") and user.startswith("@") and len(user) == 33
    (record,) = bank.list_memories(user_id=user)
    assert record.session_id == vecmem_name("global") != "global"
    assert record.content == "Bob  builds\ufffd boats\né"  # searchable text: controls and surrogates blanked
    assert store.list_namespaces() == [odd]


def test_langmem_namespaces_name_the_user_second(bank, clock):
    store = VecmemStore(bank, user_label=1, clock=clock)
    store.put(("memories", "alice"), "m1", {"content": "Alice is vegetarian"})
    assert [(r.user_id, r.session_id) for r in bank.list_memories(user_id="alice")] == [("alice", "memories")]
    with pytest.raises(NamespaceError) as refused:
        store.put(("memories",), "m2", {"content": "no user label"})
    assert isinstance(refused.value, InvalidInputError) and isinstance(refused.value, InvalidNamespaceError)
    assert store.get(("memories",), "m2") is None
    assert [i.key for i in store.search(("memories",), query="vegetarian")] == ["m1"]


def test_a_put_replaces_keeping_the_creation_time_and_none_deletes(store, bank, clock):
    store.put(("alice", "memories"), "tea", TEA)
    first = store.get(("alice", "memories"), "tea")
    assert first.created_at == first.updated_at == clock.now
    clock.advance(hours=2)
    store.put(("alice", "memories"), "tea", {"text": "Alice switched to black coffee"})
    second = store.get(("alice", "memories"), "tea")
    assert second.value == {"text": "Alice switched to black coffee"}
    assert second.created_at == first.created_at and second.updated_at == first.updated_at.replace(hour=14)
    (record,) = bank.list_memories(user_id="alice")
    assert record.content == "Alice switched to black coffee" and bank.history(record.id, user_id="alice") == [record]
    store.put(("alice", "memories"), "tea", None)  # what LangGraph's delete sends
    store.delete(("alice", "memories"), "tea")  # twice: nothing to delete is no error
    assert store.get(("alice", "memories"), "tea") is None and bank.count(user_id="alice") == 0


@pytest.mark.parametrize(("value", "reason"), [
    ({"when": (2026, 6)}, "exactly"),
    ({1: "int key"}, "exactly"),
    ({"tags": {"a", "b"}}, "must be JSON"),
    ({"score": float("nan")}, "must be JSON"),
    ({"text": "x" * 9000}, "at most 8,000"),
    ({"deep": _nested(5000)}, "must be JSON"),
    (["not", "a", "dict"], "JSON object"),
])
def test_a_value_that_is_not_exactly_json_or_too_big_is_refused_and_nothing_written(store, bank, value, reason):
    with pytest.raises(InvalidInputError) as refused:
        store.put(("alice", "memories"), "k", value)
    assert refused.value.field == "value" and reason in str(refused.value)
    assert bank.count(user_id="alice") == 0


def test_a_query_is_ranked_by_vecmem_with_its_scores(store, bank):
    store.put(("alice", "memories"), "tea", TEA)
    store.put(("alice", "memories"), "bike", {"text": "Alice rides a red bicycle to work"})
    store.put(("alice", "memories"), "quiet", {"text": "Alice drinks green tea too"}, index=False)
    found = store.search(("alice", "memories"), query="what does alice drink? green tea")
    assert [i.key for i in found] == ["tea", "bike", "quiet"]  # the unindexed item last, unscored
    # each item's score is its hit's cosine: comparable between the searches one LangGraph search may merge
    hits = {hit.id: hit.dense for hit in bank.search("what does alice drink? green tea", k=5, user_id="alice",
                                                     session_id="memories", record_access=False)}
    assert [i.score for i in found[:2]] == [hits[item_id(("alice", "memories"), k)] for k in ("tea", "bike")]
    assert found[2].score is None
    assert [i.key for i in store.search(("alice", "memories"), query="green tea", limit=1, offset=1)] == ["bike"]


def test_fields_choose_what_an_item_is_found_by(bank, clock):
    store = VecmemStore(bank, fields=["title", "notes[*].body"], clock=clock)
    store.put(("u1", "docs"), "d1", {"title": "Trip to Lisbon", "notes": [{"body": "pack sunscreen"}],
                                     "owner": "unrelated words"})
    store.put(("u1", "docs"), "d2", {"title": "Ignored title", "body": "the tram schedule"}, index=["body"])
    store.put(("u1", "docs"), "d3", {"count": 3})  # no text at the paths: its JSON stands in
    contents = {r.id: r.content for r in bank.list_memories(user_id="u1")}
    assert contents[item_id(("u1", "docs"), "d1")] == "Trip to Lisbon\npack sunscreen"
    assert contents[item_id(("u1", "docs"), "d2")] == "the tram schedule"
    assert contents[item_id(("u1", "docs"), "d3")] == '{"count": 3}'


def test_the_users_own_memories_are_not_items_and_many_of_them_do_not_hide_items(store, bank):
    for n in range(40):  # global memories of alice, which a search of her session sees, ranked above the item
        bank.add(f"green tea fact number {n}: green tea green tea", user_id="alice")
    store.put(("alice", "memories"), "tea", TEA)
    found = store.search(("alice", "memories"), query="green tea", limit=3)
    assert [i.key for i in found] == ["tea"]
    assert [i.key for i in store.search(("alice",), query="green tea")] == ["tea"]
    assert store.list_namespaces() == [("alice", "memories")] and bank.count(user_id="alice") == 41


def test_a_search_across_sessions_and_users_merges_by_score(store):
    store.put(("alice", "work"), "w", {"text": "Alice writes Rust at work"})
    store.put(("alice", "home"), "h", {"text": "Alice grows tomatoes at home"})
    store.put(("alice",), "g", {"text": "Alice is left-handed"})
    store.put(("bob", "home"), "b", {"text": "Bob grows tomatoes on his balcony"})
    mine = store.search(("alice",), query="tomatoes at home")
    assert [i.key for i in mine][:1] == ["h"] and {i.key for i in mine} == {"w", "h", "g"}
    assert [s for s in (i.score for i in mine)] == sorted((i.score for i in mine), reverse=True)
    everyone = store.search((), query="grows tomatoes", limit=2)
    assert {i.key for i in everyone} == {"h", "b"}
    assert [i.key for i in store.search((), filter={"text": "Alice is left-handed"})] == ["g"]


def test_without_a_query_the_latest_update_comes_first(store, clock):
    for key in ("a", "b", "c"):
        store.put(("alice", "log"), key, {"text": f"entry {key}"})
        clock.advance(minutes=1)
    store.put(("alice", "log"), "a", {"text": "entry a, edited"})
    assert [i.key for i in store.search(("alice", "log"))] == ["a", "c", "b"]
    assert [i.key for i in store.search(("alice", "log"), limit=2, offset=1)] == ["c", "b"]


@pytest.mark.parametrize(("call", "field"), [
    (lambda s: s.search(("a",), filter={"n": {"$gt": "many"}}), "filter"),
    (lambda s: s.search(("a",), filter={"n": {"$near": 3}}), "filter"),
    (lambda s: s.search(("a",), limit=-1), "limit"),
    (lambda s: s.list_namespaces(max_depth=-1), "max_depth"),
    (lambda s: s.batch([PutOp(("a",), 3, {"text": "x"})]), "key"),  # put() itself makes a key a string
    (lambda s: s.batch([PutOp((), "k", {"text": "x"})]), "namespace"),
    (lambda s: s.batch([GetOp(("a.b",), "k")]), "namespace"),
    (lambda s: s.batch(["not an op"]), "op"),
    (lambda s: VecmemStore(s.bank, user_label=-1), "user_label"),
    (lambda s: VecmemStore(s.bank, fields="text"), "fields"),
])
def test_bad_input_is_a_vecmem_error_naming_the_field(store, call, field):
    with pytest.raises(InvalidInputError) as refused:
        call(store)
    assert refused.value.field == field


def test_a_batch_reads_before_it_writes_and_the_last_put_of_a_key_wins(store):
    store.put(("alice", "m"), "k", {"text": "before"})
    results = store.batch([
        PutOp(("alice", "m"), "k", {"text": "first"}),
        GetOp(("alice", "m"), "k"),
        PutOp(("alice", "m"), "k", {"text": "second"}),
        SearchOp(("alice",), None, 10, 0, None),
        ListNamespacesOp(None, None, 10, 0),
    ])
    assert results[0] is None and results[1].value == {"text": "before"}
    assert [i.value for i in results[3]] == [{"text": "before"}] and results[4] == [("alice", "m")]
    assert store.get(("alice", "m"), "k").value == {"text": "second"}


def test_a_batch_with_a_bad_put_writes_nothing(store, bank):
    with pytest.raises(InvalidInputError):
        store.batch([PutOp(("alice", "m"), "good", {"text": "fine"}), PutOp(("alice", "m"), "bad", {"x": (1,)})])
    assert bank.count(user_id="alice") == 0


def test_an_item_the_forgetting_policy_archives_is_gone_until_put_again(make_bank, settings, clock):
    bank = make_bank(settings=settings.with_changes(cap_per_user=1))  # each write archives all but the freshest
    store = VecmemStore(bank, clock=clock)
    store.put(("alice", "m"), "old", TEA)
    clock.advance(days=1)
    store.put(("alice", "m"), "new", {"text": "Alice cycles to work"})
    assert store.get(("alice", "m"), "old") is None and [i.key for i in store.search(("alice",))] == ["new"]
    assert [r.status for r in bank.list_memories(user_id="alice", statuses=["archived"])] == ["archived"]
    clock.advance(days=1)
    store.put(("alice", "m"), "old", TEA)
    assert store.get(("alice", "m"), "old").value == TEA and store.get(("alice", "m"), "new") is None


def test_threads_putting_one_key_leave_one_item_holding_one_of_their_values(store, bank):
    values = [{"text": f"Alice's locker code is {n}"} for n in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda value: store.put(("alice", "m"), "locker", value), values * 3))
    assert store.get(("alice", "m"), "locker").value in values
    (record,) = bank.list_memories(user_id="alice")
    assert json.loads(record.context)["value"]["text"] == record.content  # content and value from one put


@pytest.mark.stores("embedded", "server")
def test_on_real_chroma_embedded_and_a_server(bank, clock):
    store = VecmemStore(bank, clock=clock)
    store.put(("alice", "memories"), "tea", TEA)
    store.put(("alice", "memories", "deep"), "bike", {"text": "Alice rides a red bicycle"})
    store.put(("bob smith",), "b", {"text": "Bob drinks green tea too"})
    assert store.get(("alice", "memories"), "tea").value == TEA
    assert [i.key for i in store.search(("alice",), query="green tea")] == ["tea", "bike"]
    assert store.list_namespaces(max_depth=2) == [("alice", "memories"), ("bob smith",)]
    store.delete(("alice", "memories"), "tea")
    assert [i.key for i in store.search(("alice", "memories"), query="green tea")] == ["bike"]


async def test_the_async_methods_run_in_a_worker_thread(store):
    await store.aput(("alice", "memories"), "tea", TEA)
    puts = [store.aput(("alice", "memories"), f"k{n}", {"text": f"note {n} about tea"}) for n in range(5)]
    await asyncio.gather(*puts)
    assert (await store.aget(("alice", "memories"), "tea")).value == TEA
    found = await store.asearch(("alice", "memories"), query="green tea", limit=3)
    assert found[0].key == "tea" and len(found) == 3
    assert await store.alist_namespaces(prefix=("alice",)) == [("alice", "memories")]
    await store.adelete(("alice", "memories"), "tea")
    assert await store.aget(("alice", "memories"), "tea") is None


class Chat(TypedDict):
    said: str
    recalled: Annotated[list[str], operator.add]


def _memory_graph(store: VecmemStore, *, asynchronous: bool = False):
    """A two-node agent without a model: it remembers what the user states, and recalls for every message (with
    ``asynchronous``, its nodes are coroutines that await the store's async methods)."""

    def remembered(state: Chat, runtime: Runtime) -> tuple[tuple[str, str], str, dict] | None:
        if not state["said"].startswith("remember:"):
            return None
        fact = state["said"].removeprefix("remember:").strip()
        return ("memories", runtime.context["user"]), f"fact-{len(fact)}", {"text": fact}

    def remember(state: Chat, runtime: Runtime) -> dict:
        if (item := remembered(state, runtime)) is not None:
            runtime.store.put(*item)
        return {}

    def recall(state: Chat, runtime: Runtime) -> dict:
        found = get_store().search(("memories", runtime.context["user"]), query=state["said"], limit=1)
        return {"recalled": [item.value["text"] for item in found]}

    async def aremember(state: Chat, runtime: Runtime) -> dict:
        if (item := remembered(state, runtime)) is not None:
            await runtime.store.aput(*item)
        return {}

    async def arecall(state: Chat, runtime: Runtime) -> dict:
        found = await runtime.store.asearch(("memories", runtime.context["user"]), query=state["said"], limit=1)
        return {"recalled": [item.value["text"] for item in found]}

    graph = StateGraph(Chat, context_schema=dict)
    graph.add_node("remember", aremember if asynchronous else remember)
    graph.add_node("recall", arecall if asynchronous else recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


def test_a_langgraph_agent_keeps_its_memories_in_vecmem(bank, clock):
    agent = _memory_graph(VecmemStore(bank, user_label=1, clock=clock))
    agent.invoke({"said": "remember: I am allergic to peanuts", "recalled": []}, context={"user": "alice"})
    agent.invoke({"said": "remember: my bike is a red gravel bike", "recalled": []}, context={"user": "alice"})
    agent.invoke({"said": "remember: I like peanuts", "recalled": []}, context={"user": "bob"})
    later = agent.invoke({"said": "which snacks should I avoid? peanuts?", "recalled": []}, context={"user": "alice"})
    assert later["recalled"] == ["I am allergic to peanuts"]
    assert {r.content for r in bank.list_memories(user_id="alice")} == {"I am allergic to peanuts",
                                                                       "my bike is a red gravel bike"}


class CountingStore(VecmemStore):
    __slots__ = ("async_batches",)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.async_batches = 0

    async def abatch(self, ops):
        self.async_batches += 1
        return await super().abatch(ops)


async def test_a_langgraph_agent_with_async_nodes_uses_the_async_batch(bank, clock):
    store = CountingStore(bank, user_label=1, clock=clock)
    agent = _memory_graph(store, asynchronous=True)
    await agent.ainvoke({"said": "remember: my cat is called Miso", "recalled": []}, context={"user": "alice"})
    later = await agent.ainvoke({"said": "what is my cat called", "recalled": []}, context={"user": "alice"})
    assert later["recalled"] == ["my cat is called Miso"] and store.async_batches == 3  # put, search, search


def test_without_a_bank_it_opens_one_with_memorybanks_arguments_and_closes_it(tmp_path, monkeypatch, clock,
                                                                            memory_stores, settings):
    from tests.conftest import FakeEmbedder
    from vecmem import MemoryBank

    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "env-home"))
    monkeypatch.delenv("VECMEM_CHROMA_URL", raising=False)
    embedder = FakeEmbedder()
    for first, named, home in ((None, None, tmp_path / "env-home"), (settings, None, settings.home),
                               (None, settings, settings.home)):
        store = memory_stores.client(home, embedder.name)
        closed = []
        original = store.close
        store.close = lambda original=original, closed=closed: (closed.append(True), original())
        with VecmemStore(first, settings=named, embedder=embedder, store=store, clock=clock, user_label=1) as lg:
            assert isinstance(lg.bank, MemoryBank) and lg.bank.settings.home == home
            lg.put(("memories", "alice"), "tea", TEA)
            (found,) = lg.search(("memories", "alice"), query="what does alice drink?")
            assert found.value == TEA and found.created_at == clock.now
            assert lg.bank.list_memories(user_id="alice")[0].created_at == clock.now  # the bank keeps its clock
            assert not closed
        assert closed == [True]


def test_a_bank_and_arguments_for_another_are_refused(bank, settings):
    with pytest.raises(InvalidInputError, match="a bank was given"):
        VecmemStore(bank, settings=settings)
    with pytest.raises(InvalidInputError, match="user_label"):  # checked before anything is opened
        VecmemStore(settings, user_label=-1, no_such_option=1)
    closed = []
    bank.close = lambda: closed.append(True)
    with VecmemStore(bank) as lg:  # the bank form is unchanged; closing it closes the bank
        lg.put(("alice",), "k", TEA)
        assert lg.get(("alice",), "k").value == TEA and not closed
    assert closed == [True]
