"""The bank of a long-running process carries on when the owner it goes through goes (vecmem/interfaces/owner/handover.py),
here in one process on the in-memory store; tests/integration/test_handover.py kills real owners."""

from __future__ import annotations

import inspect
import socket
import threading

import pytest

from vecmem.bank.api import MemoryApi
from vecmem.errors import StoreError
from vecmem.interfaces.owner import handover
from vecmem.interfaces.owner import remote as remote_module
from vecmem.interfaces.owner.endpoint import OwnerEndpoint
from vecmem.interfaces.owner.handover import HandoverBank, long_running_bank
from vecmem.interfaces.owner.remote import OwnerGoneError, RemoteBank
from vecmem.interfaces.owner.wire import OwnerInfo, read_owner


def _counting_factory(make_bank):
    opened: list = []

    def factory(settings, verify_model=True):
        opened.append(make_bank(settings=settings, verify_model=verify_model))
        return opened[-1]

    return factory, opened


@pytest.fixture
def chat(make_bank, settings):
    """The owner: a bank served as the chat serves its store; ``stop`` is the chat quitting."""
    bank = make_bank()
    endpoint = OwnerEndpoint(bank, settings.home, program="python -m vecmem.chat").start()
    yield endpoint
    endpoint.stop()
    bank.close()


def test_the_bank_wraps_every_call_of_the_protocol():
    protocol = {name for name, member in vars(MemoryApi).items()
                if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))}
    assert handover._API == protocol - {"close", "settings"}
    assert handover._REPEATABLE < handover._API


def test_when_the_owner_stops_a_client_takes_the_store_over_and_serves_it(chat, settings, make_bank):
    factory, opened = _counting_factory(make_bank)
    said: list[str] = []
    with long_running_bank(settings, program="vecmem serve", factory=factory, say=said.append) as served:
        assert served.whose() == f"through the chat (pid {chat.info.pid})" and opened == []
        kept = served.add("The user likes green tea")
        chat.stop()  # the chat quits: owner.json goes, its port refuses

        assert [hit.id for hit in served.search("green tea")] == [kept.id]  # sent again, to the store here
        assert served.serving and served.whose() == "held by this process" and len(opened) == 1
        assert read_owner(settings.home).program == "vecmem serve"
        assert len(said) == 1 and "the chat (pid" in said[0] and "took the store over" in said[0]
        with long_running_bank(settings, program="python -m vecmem.chat", factory=factory) as second:
            assert second.add("The user lives in Lyon").content == "The user lives in Lyon"  # through the new owner
            assert not second.serving and served.count() == 2
    assert read_owner(settings.home) is None and len(opened) == 1


def test_a_killed_owners_file_is_replaced_and_the_other_clients_follow_the_new_owner(chat, settings, make_bank):
    factory, opened = _counting_factory(make_bank)
    killed = chat.info
    with long_running_bank(settings, program="vecmem serve", factory=factory) as first, \
            long_running_bank(settings, program="vecmem mcp", factory=factory) as second:
        first.add("The user likes green tea")
        chat._server.stop()  # as SIGKILL leaves it: nothing answers on its port, owner.json stays
        assert read_owner(settings.home) == killed

        calls = [threading.Thread(target=first.count) for _ in range(4)]  # at once, on the threads of a server
        for call in calls:
            call.start()
        for call in calls:
            call.join(30)
        assert first.serving and len(opened) == 1  # one of its threads took the store over, the others waited

        assert second.count() == 1 and not second.serving and len(opened) == 1  # it follows the new owner
        assert second.whose() == f"through `vecmem serve` (pid {read_owner(settings.home).pid})"
        assert read_owner(settings.home) != killed


def _swallowing_owner() -> OwnerInfo:
    """An owner that reads a call and dies before it answers: the call may have been done."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with listener:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)

    threading.Thread(target=serve, daemon=True).start()
    return OwnerInfo(pid=1, port=listener.getsockname()[1], secret="s" * 43, program="vecmem serve",
                     started="2026-06-01")


def test_a_write_the_gone_owner_may_have_done_is_not_sent_again(settings, make_bank):
    factory, opened = _counting_factory(make_bank)
    gone = RemoteBank(settings, _swallowing_owner())
    with HandoverBank(settings, gone, None, program="vecmem serve", factory=factory) as served:
        with pytest.raises(StoreError, match="may or may not have been done") as raised:
            served.add("The user likes green tea")
        assert not isinstance(raised.value, OwnerGoneError)
        assert served.serving and served.count() == 0  # not repeated; the next call goes to the store here


def test_a_read_the_gone_owner_may_have_read_is_sent_again(settings, make_bank):
    factory, opened = _counting_factory(make_bank)
    make_bank().add("The user likes green tea")
    gone = RemoteBank(settings, _swallowing_owner())
    with HandoverBank(settings, gone, None, program="vecmem serve", factory=factory) as served:
        assert [hit.content for hit in served.search("green tea")] == ["The user likes green tea"]
        assert served.serving and len(opened) == 1


def test_a_closed_bank_takes_nothing_over(chat, settings, make_bank):
    factory, opened = _counting_factory(make_bank)
    served = HandoverBank(settings, RemoteBank(settings, chat.info), None, program="vecmem serve", factory=factory)
    remote = served.bank
    served.close()
    chat.stop()
    with pytest.raises(StoreError, match="closing"):
        served._recover(remote)
    assert opened == []


def test_a_call_sent_again_to_the_next_owner_sends_the_lines_a_generator_gave_the_first_try(chat, settings,
                                                                                          make_bank):
    factory, opened = _counting_factory(make_bank)
    with long_running_bank(settings, program="vecmem serve", factory=factory) as served:
        chat.stop()  # the next call finds nobody on the owner's port, after reading its argument
        lines = (f'{{"content": "The user keeps bees number {n}"}}' for n in range(3))
        report = served.import_jsonl(lines)
        assert served.serving and (report.added, report.errors) == (3, ())
        assert served.count() == 3


def test_an_owner_that_closed_its_kept_connection_and_left_never_read_the_call(chat, settings, monkeypatch):
    """The owner closes the idle connection and exits in the instant after the client found it open: the
    request meets a reset, the new connection is refused. The call was never read, so it may be sent again."""
    client = RemoteBank(settings, chat.info)
    assert client.count() == 0  # the connection is kept alive
    chat.stop()
    monkeypatch.setattr(remote_module, "_closed_by_peer", lambda connection: False)
    with pytest.raises(OwnerGoneError) as gone:
        client.add("The user likes green tea")
    assert gone.value.delivered is False
    client.close()
