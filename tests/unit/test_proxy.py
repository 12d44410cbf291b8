"""`vecmem proxy` through the openai Python SDK: the proxy served by uvicorn on 127.0.0.1 (in-memory store, fake
embedder) in front of a scripted chat-completions server, every call a real HTTP request. What the second
request of a conversation carries, who a request is for, the errors the SDK raises, and who may call."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import openai
import pytest

from tests.chat_server import ScriptedChatServer
from tests.conftest import serving
from tests.proxy_script import ANSWER, FACT, LEARNT, QUESTION, carries, remembering_upstream
from vecmem.agent.llm import ChatCompletions
from vecmem.interfaces.http.keys import KeyStore, keys_path
from vecmem.interfaces.proxy.server import create_proxy_app
from vecmem.retrieval.budget import LONG_TERM_HEADER, LONG_TERM_HEADERS

GUIDE = {"role": "system", "content": "You are a hiking guide."}


class Proxy:
    def __init__(self, server: ScriptedChatServer, bank, port: int) -> None:
        self.server, self.bank, self.port = server, bank, port
        self.url = f"http://127.0.0.1:{port}/v1"

    def client(self, **options) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key=options.pop("api_key", "unused"), max_retries=0, **options)

    def answered(self) -> list[dict]:
        """The requests the model server got to answer (not the learning calls), in order."""
        return [body for kind, body in self.server.requests if kind == "answer"]

    def learnt(self, user: str) -> list[str]:
        return [record.content for record in self.bank.list_memories(user_id=user)]


@pytest.fixture
def proxy(make_bank, settings):
    with ScriptedChatServer(remembering_upstream) as server:
        bank = make_bank(settings=settings.with_changes(openai_base_url=server.base_url, openai_api_key="server-key",
                                                        chat_model="scripted-model", llm_timeout=5.0))
        app = create_proxy_app(bank, ChatCompletions(base_url=server.base_url, api_key="server-key", timeout=1.0))
        with serving(app, ready="/") as port:
            yield Proxy(server, bank, port)


def test_the_second_request_carries_what_the_first_taught(proxy):
    client = proxy.client()
    history = [GUIDE, {"role": "user", "content": FACT}]
    first = client.chat.completions.create(model="scripted-model", messages=history, user="alice", temperature=0.3)
    assert first.choices[0].message.content == ANSWER
    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": QUESTION}]
    second = client.chat.completions.with_raw_response.create(model="scripted-model", messages=history, user="alice",
                                                              max_tokens=50)

    sent_first, sent_second = proxy.answered()
    assert sent_first["messages"] == history[:2]  # nothing learnt yet: the request as the client sent it
    assert sent_first["temperature"] == 0.3 and sent_first["user"] == "alice" and sent_first["model"] == "scripted-model"
    messages = sent_second["messages"]
    memory = messages.pop(-2)  # just before the message it was recalled for
    assert messages == history  # the client's messages kept as sent, history included
    assert memory["role"] == "system" and memory["content"].startswith(LONG_TERM_HEADER)
    assert f"[fact] {LEARNT}" in memory["content"]
    assert sent_second["max_tokens"] == 50
    (stored,) = proxy.bank.list_memories(user_id="alice")
    assert second.headers["x-vecmem-memories"] == stored.id
    assert stored.provenance.message_ids == (first.id,)  # learnt from the exchange that completion answered
    assert proxy.learnt("default") == []


def test_a_chinese_conversation_gets_the_chinese_header(proxy):
    proxy.bank.add("用户对花生过敏", user_id="alice")
    client = proxy.client()
    client.chat.completions.create(model="scripted-model", user="alice",
                                   messages=[GUIDE, {"role": "user", "content": "我对花生过敏，花生酱能吃吗？"}])
    (sent,) = proxy.answered()
    memory = sent["messages"][-2]
    header, line = memory["content"].splitlines()
    assert memory["role"] == "system" and header == LONG_TERM_HEADERS["zh"] and line.endswith("[fact] 用户对花生过敏")


def test_streamed_answers_are_relayed_and_learnt_from(proxy):
    client = proxy.client()
    history = [{"role": "user", "content": FACT}]
    pieces = [chunk.choices[0].delta.content for chunk in client.chat.completions.create(
        model="scripted-model", messages=history, stream=True, extra_headers={"X-Vecmem-User": "alice"})]
    assert "".join(pieces) == ANSWER and len(pieces) > 1
    history += [{"role": "assistant", "content": "".join(pieces)}, {"role": "user", "content": QUESTION}]
    with client.chat.completions.create(model="scripted-model", messages=history, stream=True,
                                        extra_headers={"X-Vecmem-User": "alice"}) as stream:
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == ANSWER

    sent_first, sent_second = proxy.answered()
    assert sent_first["stream"] is True and sent_first["messages"] == history[:1]
    memory = sent_second["messages"].pop(-2)
    assert LEARNT in memory["content"] and sent_second["messages"] == history
    assert proxy.learnt("alice") == [LEARNT]


def test_the_user_comes_from_the_header_then_the_user_field_and_the_session_from_its_header(proxy):
    client = proxy.client()
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": FACT}], user="bob",
                                   extra_headers={"X-Vecmem-User": "alice", "X-Vecmem-Session": "trip"})
    ask = [{"role": "user", "content": QUESTION}]
    client.chat.completions.create(model="m", messages=ask, user="bob")
    client.chat.completions.create(model="m", messages=ask, extra_headers={"X-Vecmem-User": "carol"})
    client.chat.completions.create(model="m", messages=ask, user="alice")
    client.chat.completions.create(model="m", messages=ask, extra_headers={"X-Vecmem-User": "alice",
                                                                            "X-Vecmem-Session": "another"})

    carried = [carries(body) for body in proxy.answered()]
    assert carried == [False, False, False, True, True]  # the header won over user="bob"; a global fact
    (memory,) = proxy.bank.list_memories(user_id="alice")
    assert memory.content == LEARNT and memory.provenance.session_id == "trip"
    assert proxy.learnt("bob") == [] and proxy.learnt("carol") == []


@pytest.mark.parametrize(("options", "param"), [
    ({"user": "two\nlines"}, "user"),
    ({"extra_headers": {"X-Vecmem-Session": "global"}}, "X-Vecmem-Session"),  # the word reserved for global memories
    ({"extra_body": {"messages": []}}, "messages"),
    ({"extra_body": {"stream": "yes"}}, "stream"),
])
def test_a_request_the_proxy_cannot_read_is_a_400_the_sdk_raises(proxy, options, param):
    with pytest.raises(openai.BadRequestError) as refused:
        proxy.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], **options)
    assert refused.value.status_code == 400 and refused.value.body["param"] == param
    assert refused.value.body["type"] == "invalid_request_error"
    assert proxy.answered() == []


@pytest.mark.parametrize("stream", [False, True])
def test_model_server_errors_come_back_as_the_sdks_own_exceptions(proxy, stream):
    client = proxy.client()

    def ask(text):
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}],
                                               user="alice", stream=stream)
        return list(reply) if stream else reply

    with pytest.raises(openai.RateLimitError) as limited:
        ask(f"{FACT} Now rate limit me")
    assert limited.value.status_code == 429 and limited.value.response.headers["retry-after"] == "7"
    assert limited.value.message.endswith("answered 429: scripted 429")  # the server's own words, once
    with pytest.raises(openai.InternalServerError) as failed:
        ask(f"{FACT} Now break down")
    assert failed.value.status_code == 500 and failed.value.body["type"] == "scripted"  # the server's own type
    with pytest.raises(openai.InternalServerError) as late:
        ask(f"{FACT} But take your time")
    assert late.value.status_code == 504 and late.value.body["type"] == "timeout"
    assert "did not answer within 1 s" in late.value.message
    if stream:  # a stream the server broke off mid-way ends with an error event, which the SDK raises
        with pytest.raises(openai.APIError, match="overloaded mid-way"):
            ask(f"{FACT} Please stream then fail")
    assert "extract" not in proxy.server.kinds()  # no answer, nothing learnt
    assert proxy.learnt("alice") == []


def test_an_unreachable_model_server_is_a_502(make_bank, settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    app = create_proxy_app(make_bank(), ChatCompletions(base_url=nowhere, timeout=5.0))
    with serving(app, ready="/") as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.APIStatusError) as unreachable:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello there"}])
    assert unreachable.value.status_code == 502 and "cannot reach the model server" in unreachable.value.message


def test_the_model_list_is_passed_through_and_other_routes_are_404(proxy):
    client = proxy.client()
    assert [model.id for model in client.models.list()] == ["scripted-model"]
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="m", input="hi")
    assert "POST /v1/chat/completions" in missing.value.message


def post(proxy, body: bytes, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(proxy.url + "/chat/completions", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_what_a_web_page_could_send_is_refused_and_malformed_json_is_a_400(proxy):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": FACT}]}).encode()
    status, error = post(proxy, body, {"Content-Type": "text/plain"})  # a simple cross-site request
    assert status == 403 and "Content-Type: application/json" in error["error"]["message"]
    status, error = post(proxy, body, {"Content-Type": "application/json", "Origin": "http://evil.example"})
    assert status == 403 and error["error"]["param"] == "Origin"
    status, error = post(proxy, b'{"model": "m", "messages": [', {"Content-Type": "application/json"})
    assert status == 400 and error["error"]["param"] == "body" and error["error"]["type"] == "invalid_request_error"
    assert proxy.answered() == [] and proxy.learnt("default") == []
    status, reply = post(proxy, body, {"Content-Type": "application/json; charset=utf-8"})
    assert status == 200 and reply["choices"][0]["message"]["content"] == ANSWER


def test_keys_decide_who_may_call_and_a_user_key_acts_for_its_user_only(proxy):
    keys = KeyStore(keys_path(proxy.bank.settings.home))
    _, alice = keys.create("alice")
    keys.close()
    said = [{"role": "user", "content": FACT}]
    with pytest.raises(openai.AuthenticationError):
        proxy.client(api_key="not-a-key").chat.completions.create(model="m", messages=said)
    with pytest.raises(openai.PermissionDeniedError) as other:
        proxy.client(api_key=alice).chat.completions.create(model="m", messages=said, user="bob")
    assert other.value.body["param"] == "user"
    proxy.client(api_key=alice).chat.completions.create(model="m", messages=said)  # no user named: the key's own
    proxy.client(api_key=alice).chat.completions.create(model="m", messages=said, user="alice")
    assert proxy.learnt("alice") == [LEARNT] and proxy.learnt("bob") == []
