"""The parts of `vecmem proxy` on their own: the background learner (order per user, settling before the next
request, failures logged, nothing lost at close), what is read from a request and where the memories go, and the
`vecmem proxy` command's refusals."""

from __future__ import annotations

import logging
import socket
import threading

import pytest
from starlette.datastructures import Headers

from vecmem import Settings
from vecmem.errors import LLMError
from vecmem.interfaces.http.keys import ADMIN, Principal
from vecmem.interfaces.proxy.learning import Exchange, ExchangeLearner
from vecmem.interfaces.proxy.request import ProxyRequest, RequestError, answer_text, chunk_text, with_memories

SETTINGS = Settings(default_user="someone", chat_model="configured-model")


class SlowBank:
    """Records what it was asked to learn; each learn waits for ``gate``; a message with "fail" raises."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.learnt: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def add_messages(self, messages, *, user_id=None, session_id=None):
        self.gate.wait(30)
        said = messages[0]["content"]
        if "fail" in said:
            raise LLMError("the model server answered 500: scripted")
        if "crash" in said:
            raise KeyError("a bug")
        with self.lock:
            self.learnt.append((user_id, said))


def exchange(user: str, said: str) -> Exchange:
    return Exchange(user, None, said, "an answer")


def test_a_users_exchanges_are_learnt_in_order_and_settled_before_the_next_request(caplog):
    bank = SlowBank()
    learner = ExchangeLearner(bank, workers=2)
    for said in ("one", "two fail", "three crash", "four"):
        learner.submit(exchange("alice", said))
    learner.submit(exchange("bob", "bob's one"))
    assert learner.pending("alice") == 4  # nothing learnt while the bank is held
    bank.gate.set()
    with caplog.at_level(logging.WARNING, logger="vecmem.interfaces.proxy.learning"):
        assert learner.settle("alice") and learner.settle("bob")
    assert learner.pending("alice") == 0
    assert [said for user, said in bank.learnt if user == "alice"] == ["one", "four"]  # in order, past failures
    assert ("bob", "bob's one") in bank.learnt
    failures = [record for record in caplog.records if "alice" in record.getMessage()]
    assert "'two fail'" in failures[0].getMessage() and "answered 500" in failures[0].getMessage()
    assert failures[1].exc_info is not None and failures[1].exc_info[0] is KeyError  # a bug: with its traceback
    learner.close()


def test_settle_gives_up_after_its_wait_and_says_so(caplog):
    bank = SlowBank()  # never released until the end: a learn that hangs
    learner = ExchangeLearner(bank, wait=0.05)
    learner.submit(exchange("alice", "one"))
    with caplog.at_level(logging.WARNING, logger="vecmem.interfaces.proxy.learning"):
        assert learner.settle("alice") is False
    assert "still being learnt" in caplog.text
    assert learner.settle("bob") is True  # nothing queued for bob
    bank.gate.set()
    learner.close()


def test_close_learns_everything_still_queued_and_learns_what_comes_after_in_place():
    bank = SlowBank()
    learner = ExchangeLearner(bank, workers=1)
    for n in range(5):
        learner.submit(exchange(f"user{n % 2}", f"said {n}"))
    threading.Timer(0.05, bank.gate.set).start()
    learner.close()
    assert sorted(said for _, said in bank.learnt) == [f"said {n}" for n in range(5)]
    learner.submit(exchange("late", "answered while stopping"))
    assert ("late", "answered while stopping") in bank.learnt


def test_an_exchange_is_the_users_message_with_its_id_and_the_answer_when_there_is_one():
    assert Exchange("u", "s", "hi there", "hello", "chatcmpl-1").messages() == [
        {"role": "user", "content": "hi there", "id": "chatcmpl-1"}, {"role": "assistant", "content": "hello"}]
    assert Exchange("u", None, "call the tool", "").messages() == [{"role": "user", "content": "call the tool"}]


def read(body, headers=None, principal=ADMIN) -> ProxyRequest:
    return ProxyRequest.of(body, Headers(headers or {}), principal, SETTINGS)


def test_what_is_read_from_a_request():
    plain = read({"messages": [{"role": "user", "content": "I live in Hangzhou"}]})
    assert (plain.user_id, plain.session_id, plain.query, plain.said) == ("someone", None, "I live in Hangzhou",
                                                                           "I live in Hangzhou")
    assert plain.body["model"] == "configured-model" and plain.stream is False
    parts = read({"model": "mine", "user": "li", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is in"}, {"type": "image_url", "image_url": {
            "url": "data:,"}}, {"type": "text", "text": "this picture?"}]}]}, {"x-vecmem-session": "photos"})
    assert (parts.user_id, parts.session_id, parts.query) == ("li", "photos", "What is in\nthis picture?")
    assert parts.body["model"] == "mine"
    tool_round = read({"messages": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})
    assert tool_round.query == "What is the weather in Paris?" and tool_round.said is None  # learnt the first time
    assert read({"messages": [{"role": "system", "content": "be brief"}]}).query is None


def test_the_header_names_the_user_before_the_body_and_a_users_key_stays_its_own():
    body = {"user": "from-body", "messages": [{"role": "user", "content": "hi"}]}
    assert read(body).user_id == "from-body"
    assert read(body, {"X-Vecmem-User": "from-header"}).user_id == "from-header"
    alice = Principal("alice", "k1")
    assert read({"messages": body["messages"]}, principal=alice).user_id == "alice"
    assert read({**body, "user": "alice"}, principal=alice).user_id == "alice"
    with pytest.raises(RequestError) as refused:
        read(body, principal=alice)
    assert (refused.value.status, refused.value.param) == (403, "user")
    with pytest.raises(RequestError) as bad:
        read({**body, "user": 7})
    assert (bad.value.status, bad.value.param) == (400, "user")


def test_memories_go_just_before_the_message_they_were_recalled_for():
    talk = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "and now?"}]
    memory = {"role": "system", "content": "MEM"}
    assert with_memories(talk, "") == talk
    assert with_memories(talk, "MEM") == [*talk[:3], memory, talk[3]]  # what came before: as the turn before
    tool_round = [*talk, {"role": "assistant", "content": None, "tool_calls": []}, {"role": "tool", "content": "x"}]
    assert with_memories(tool_round, "MEM") == [*talk[:3], memory, *tool_round[3:]]
    assert with_memories(talk[:1], "MEM") == [*talk[:1], memory]  # no user message: at the end
    developer = [{"role": "developer", "content": "rules"}, *talk[1:]]
    assert with_memories(developer, "MEM")[3] == {"role": "developer", "content": "MEM"}


def test_the_answer_is_the_text_of_choice_zero():
    assert answer_text({"choices": [{"index": 0, "message": {"role": "assistant", "content": "yes"}}]}) == "yes"
    assert answer_text({"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}) == ""
    assert answer_text({"unexpected": True}) == ""
    assert chunk_text({"choices": [{"index": 1, "delta": {"content": "b"}}, {"index": 0, "delta": {"content": "a"}}]}) == "a"
    assert chunk_text({"choices": [], "usage": {"total_tokens": 3}}) == ""


def test_the_command_needs_a_model_server_a_free_port_and_a_key_off_loopback(cli, monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VECMEM_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = cli("proxy")
    assert code == 2 and err.count("\n") == 1 and "OPENAI_BASE_URL" in err
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    code, _, err = cli("proxy", "--host", "0.0.0.0")
    assert code == 2 and err.count("\n") == 1 and "token" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, _, err = cli("proxy", "--port", str(taken.getsockname()[1]))
    assert code == 1 and err.count("\n") == 1 and "cannot listen on 127.0.0.1:" in err
    code, _, err = cli("proxy", "--port", "70000")
    assert code == 2 and "Traceback" not in err
