"""AsyncMemoryBank: the MemoryApi as coroutines run in a thread pool, so the event loop keeps running meanwhile."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading

import pytest

from tests.conftest import FakeEmbedder
from vecmem import AsyncMemoryBank, InvalidInputError, MemoryApi, MemoryBank, NotFoundError, StoreError


class GatedEmbedder(FakeEmbedder):
    """Embeds a query only once the test opens the gate, saying when a query is waiting at it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.gate = threading.Event()

    def embed_query(self, text: str):
        self.waiting.set()
        if not self.gate.wait(30):
            raise AssertionError("the gate was never opened: the event loop did not run while the search waited")
        return super().embed_query(text)


def _api_methods() -> list[str]:
    return sorted(name for name, member in vars(MemoryApi).items()
                  if not name.startswith("_") and inspect.isfunction(member) and name not in {"close", "export"})


@pytest.mark.parametrize("name", _api_methods())
def test_every_call_of_the_api_has_a_coroutine_twin_with_the_banks_signature(name):
    twin = getattr(AsyncMemoryBank, name)
    assert inspect.iscoroutinefunction(twin)
    assert inspect.signature(twin) == inspect.signature(getattr(MemoryBank, name))
    assert twin.__doc__ == getattr(MemoryBank, name).__doc__


async def test_other_tasks_keep_running_while_a_search_waits(make_bank):
    embedder = GatedEmbedder()
    async with AsyncMemoryBank(make_bank(embedder=embedder)) as abank:
        await abank.add("The user drinks green tea every morning", resolve=False)  # no search at the gate
        search = asyncio.create_task(abank.search("green tea", k=1))
        assert await asyncio.to_thread(embedder.waiting.wait, 30)  # the search is inside the model, in its thread
        ticks = []
        for tick in range(5):  # the loop runs other work meanwhile: each tick goes round the loop
            await asyncio.sleep(0)
            ticks.append((tick, search.done()))
        assert ticks == [(tick, False) for tick in range(5)]  # all while the search was still waiting at the gate
        embedder.gate.set()
        hits = await search
    assert [hit.content for hit in hits] == ["The user drinks green tea every morning"]


async def test_results_and_errors_are_the_banks(make_bank):
    bank = make_bank()
    async with AsyncMemoryBank(bank) as abank:
        added = await abank.add("The user lives in Lisbon", memory_type="fact", tags=["home"], session_id="s1")
        assert added == bank.get(added.id)
        assert await abank.get(added.id) == bank.get(added.id)
        assert [h.id for h in await abank.search("Lisbon", k=3, session_id="s1", record_access=False)] == \
            [h.id for h in bank.search("Lisbon", k=3, session_id="s1", record_access=False)]
        assert await abank.export() == list(bank.export())
        pack = await abank.build_context("where does the user live", session_id="s1")
        assert "Lisbon" in pack.long_term
        with pytest.raises(InvalidInputError) as refused:
            await abank.search("Lisbon", k=0)
        assert refused.value.field == "k"
        with pytest.raises(NotFoundError):
            await abank.forget("no-such-memory")
        assert (await abank.stats()).count == bank.count() == 1


async def test_calls_run_side_by_side_and_carry_the_callers_context(make_bank):
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")
    bank = make_bank()
    original_get = bank.get

    def get(memory_id, *, user_id=None):
        assert seen.get() == "set by the caller"
        return original_get(memory_id, user_id=user_id)

    bank.get = get  # type: ignore[method-assign]
    async with AsyncMemoryBank(bank, max_workers=3) as abank:
        added = await asyncio.gather(*(abank.add(f"The user owns {n} bicycles", user_id=f"u{n % 3}")
                                       for n in range(12)))
        seen.set("set by the caller")
        fetched = await asyncio.gather(*(abank.get(record.id, user_id=record.user_id) for record in added))
    assert fetched == added
    assert sorted(bank.users()) == ["u0", "u1", "u2"]


async def test_closing_waits_for_calls_in_flight_then_closes_the_bank(make_bank):
    embedder = GatedEmbedder()
    bank = make_bank(embedder=embedder)
    closed = threading.Event()
    original_close = bank.close

    def close():
        closed.set()
        original_close()

    bank.close = close  # type: ignore[method-assign]
    abank = AsyncMemoryBank(bank)
    await abank.add("The user plays the cello", resolve=False)  # resolving would search, at the gate
    search = asyncio.create_task(abank.search("cello", k=1))
    assert await asyncio.to_thread(embedder.waiting.wait, 30)
    closing = asyncio.create_task(abank.aclose())
    await asyncio.sleep(0)
    with pytest.raises(StoreError):  # no new call once closing has begun
        await abank.count()
    assert not closed.is_set()  # the search is still running: the bank stays open for it
    embedder.gate.set()
    assert [hit.content for hit in await search] == ["The user plays the cello"]
    await closing
    assert closed.is_set()
    await abank.aclose()  # twice is harmless


async def test_open_makes_a_bank_in_a_thread(settings, clock, memory_stores):
    embedder = FakeEmbedder()
    abank = await AsyncMemoryBank.open(settings, embedder=embedder, clock=clock,
                                       store=memory_stores.client(settings.home, embedder.name))
    async with abank:
        assert isinstance(abank.bank, MemoryBank) and abank.settings is settings
        await abank.add("The user's cat is called Miso")
        assert await abank.count() == 1


@pytest.mark.stores("embedded", "server")
async def test_on_real_chroma_embedded_and_a_server(make_bank):
    async with AsyncMemoryBank(make_bank()) as abank:
        written = await asyncio.gather(*(abank.add(f"The user visited city number {n}", session_id="trip")
                                         for n in range(6)))
        hits = await abank.search("city number 3", k=2, session_id="trip")
        assert hits[0].id == written[3].id
        assert await abank.count() == 6


def _closing(store):
    """The store, noting when it is closed (what closing the bank built on it does last)."""
    closed = threading.Event()
    original = store.close

    def close():
        closed.set()
        original()

    store.close = close
    return store, closed


async def test_without_a_bank_it_opens_one_from_the_environment_and_closes_it(tmp_path, monkeypatch, clock,
                                                                             memory_stores):
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "env-home"))
    monkeypatch.setenv("VECMEM_USER", "envuser")
    monkeypatch.delenv("VECMEM_CHROMA_URL", raising=False)
    embedder = FakeEmbedder()
    store, closed = _closing(memory_stores.client(tmp_path / "env-home", embedder.name))
    abank = AsyncMemoryBank(embedder=embedder, clock=clock, store=store, max_workers=2)
    assert isinstance(abank.bank, MemoryBank) and abank.settings.home == tmp_path / "env-home"
    assert abank.bank.embed_model == embedder.name
    added = await abank.add("The user's cat is called Miso")
    assert added.user_id == "envuser"  # the environment's default user, as MemoryBank() has it
    assert [hit.content for hit in await abank.search("cat", k=1)] == ["The user's cat is called Miso"]
    assert not closed.is_set()
    await abank.aclose()
    assert closed.is_set()
    with pytest.raises(StoreError, match="closed"):
        await abank.count()


async def test_settings_as_the_first_argument_or_by_name_take_memorybanks_arguments(settings, clock, memory_stores):
    embedder = FakeEmbedder()
    for first, named in ((settings, None), (None, settings)):
        store, closed = _closing(memory_stores.client(settings.home, embedder.name))
        async with AsyncMemoryBank(first, settings=named, embedder=embedder, clock=clock, store=store) as abank:
            assert abank.settings is settings
            await abank.add("The user rides a red bicycle", user_id="ann")
            assert await abank.count(user_id="ann") >= 1
        assert closed.is_set()


async def test_a_bank_and_settings_for_another_are_refused_and_the_bank_left_as_it_was(make_bank, settings):
    bank = make_bank()
    for options in ({"settings": settings}, {"embedder": FakeEmbedder()}, {"verify_model": False}):
        with pytest.raises(InvalidInputError, match="a bank was given") as refused:
            AsyncMemoryBank(bank, **options)
        assert refused.value.field == "bank"
    with pytest.raises(InvalidInputError, match="given twice"):
        AsyncMemoryBank(settings, settings=settings)
    with pytest.raises(TypeError, match="no_such_option"):  # MemoryBank's own refusal
        AsyncMemoryBank(settings, no_such_option=1)
    async with AsyncMemoryBank(bank) as abank:  # the bank form is unchanged
        await abank.add("The user plays go")
    assert bank.count() == 1
