"""The chat through the real openai client against a scripted chat-completions server on 127.0.0.1."""

import io
import json
import re

from tests.chat_server import Reply, ScriptedChatServer
from vecmem import MemoryBank, Settings
from vecmem.interfaces.chat import main as chat_main
from vecmem.interfaces.cli.main import main as cli_main
from vecmem.retrieval.budget import LONG_TERM_HEADERS

TS, JS = "用户喜欢用 TypeScript", "用户以后都用 JavaScript"


def item(content, memory_type="fact", action="ADD", target=None, scope="global"):
    return {"content": content, "type": memory_type, "importance": 0.7 if memory_type == "preference" else 0.5,
            "tags": [], "scope": scope, "confidence": 0.9, "action": action, "target": target}


class Script:
    """What the scripted model says, keyed by the user's message."""

    def __init__(self):
        self.extract_failures = {"我是后端工程师，负责支付系统": 1}
        self.server_failures = {"第九条：我用 Neovim 写代码": 1}

    def __call__(self, kind, body):
        messages = body["messages"]
        last = messages[-1]["content"]
        if kind == "extract":  # the write side of a turn: the gate's judgement and the extraction in one call
            message = last.split("Exchange:\nUser: ")[1].split("\nAssistant:")[0]
            if self.server_failures.get(message):
                self.server_failures[message] -= 1
                return Reply(status=500)
            if self.extract_failures.get(message):
                self.extract_failures[message] -= 1
                return Reply('{"memories": [{"content": "用户是后端工程师", "type": "fa')  # cut off mid-way
            if message.startswith("帮我"):
                return Reply(json.dumps({"keep": False, "reason": "a request for help", "memories": []}))
            if message == "我喜欢用 TypeScript":
                return Reply(json.dumps({"memories": [item(TS, "preference")]}, ensure_ascii=False))
            if message == "以后都用 JavaScript 吧":
                alias = int(re.search(r"\[(\d+)\] \(preference, [\d-]+\) " + TS, last).group(1))
                return Reply(json.dumps({"memories": [item(JS, "preference", "UPDATE", alias)]}, ensure_ascii=False))
            return Reply(json.dumps({"memories": [item("用户：" + message)]}, ensure_ascii=False))
        if kind == "summary":
            return Reply(json.dumps({"summary": "用户改用 JavaScript，是后端工程师"}, ensure_ascii=False))
        if "第七条" in last:
            return Reply(status=429)
        if "第八条" in last:
            return Reply(delay=2.5)
        if "第十条" in last:
            return Reply(raw_body='{"id": "chatcmpl-9", "choi')
        if "sleep" in last:
            return Reply("const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));")
        return Reply("好的。")


MESSAGES = [
    "我喜欢用 TypeScript",
    "你好",
    "以后都用 JavaScript 吧",
    "帮我写一个 sleep 函数",
    "我是后端工程师，负责支付系统",
    "我在杭州工作，做支付网关",
    "第七条消息：我最喜欢的数据库是 PostgreSQL",
    "第八条：我每天用 zsh 工作",
    "第九条：我用 Neovim 写代码",
    "第十条：我周末会去爬山",
    "最后一条：我喜欢喝乌龙茶",
    "/quit",
]


def test_a_scripted_chinese_session_through_the_real_client(tmp_path, real_embedder):
    with ScriptedChatServer(Script()) as server:
        settings = Settings(home=tmp_path / "home", openai_base_url=server.base_url, openai_api_key="test-key",
                            chat_model="scripted-model", llm_timeout=1.0, llm_retries=0)
        bank = MemoryBank(settings, embedder=real_embedder)
        out, err = io.StringIO(), io.StringIO()
        code = chat_main(["--session", "zh"], stdin=io.StringIO("\n".join(MESSAGES) + "\n"), stdout=out,
                         stderr=err, bank=bank)
        requests = list(server.requests)

    output, errors = out.getvalue(), err.getvalue()
    assert code == 0, errors
    assert "Model: scripted-model at " + server.base_url in output
    assert "Traceback" not in output + errors
    error_lines = errors.splitlines()
    assert len(error_lines) == 5, errors  # one line a failed turn: a model that did not answer is not asked again
    assert all(line.startswith("vecmem: error: ") for line in error_lines)
    assert "not valid JSON" in error_lines[0] and "retried next turn" in error_lines[0]  # cut-off extraction
    assert "429" in error_lines[1] and "did not answer within 1 s" in error_lines[2]
    assert "500" in error_lines[3] and "retried next turn" in error_lines[3]  # the write side's call failed
    assert "not valid JSON" in error_lines[4]  # a cut-off answer
    # no retries past the timeout: the timed-out answer was asked once, and no write call followed it in its turn
    eighth = [n for n, (kind, body) in enumerate(requests)
              if kind == "answer" and body["messages"][-1]["content"] == "第八条：我每天用 zsh 工作"]
    assert len(eighth) == 1 and requests[eighth[0] + 1][0] == "answer"  # the next call is the ninth turn's answer
    assert "gate" not in [kind for kind, _ in requests]  # the write side is one call: no separate gate call

    # the coding request was answered with the JavaScript preference, never the TypeScript one
    sleep_call = [body for kind, body in requests if kind == "answer" and body["messages"][-1]["content"].startswith("帮我")]
    long_term = [m["content"] for m in sleep_call[0]["messages"] if m["content"].startswith(LONG_TERM_HEADERS["zh"])][0]
    assert JS in long_term and "TypeScript" not in long_term
    assert "assistant> const sleep" in output
    # raw ids never reach the model, aliases do
    extract_inputs = [body["messages"][-1]["content"] for kind, body in requests if kind == "extract"]
    assert any(re.search(r"\[\d+\] \(preference, \d{4}-\d{2}-\d{2}\) " + TS, text) for text in extract_inputs)
    assert not any(re.search(r"\bm-[0-9a-f]{20}\b", text) for text in extract_inputs)

    # nothing said was lost: every failed step was retried, every message is in short-term memory
    live = {r.content for r in bank.list_memories(session_id="zh")}
    for message in MESSAGES[4:-1]:
        assert "用户：" + message in live
    from vecmem.storage.state.sessions import SessionStore

    sessions = SessionStore(settings.home / "sessions.sqlite3")
    said = [t.content for t in sessions.recent_turns("default", "zh", 20) if t.role == "user"]
    assert said == [m for m in MESSAGES if m != "/quit"]
    assert sessions.pending_turns("default", "zh") == []
    assert sessions.counters("default", "zh").local_summaries  # 5+ kept turns made a summary

    # the chain, seen and undone from the command line
    by_content = {r.content: r for r in bank.list_memories(include_superseded=True)}
    ts, js = by_content[TS], by_content[JS]
    assert ts.superseded_by == js.id

    def cli(*argv):
        cli_out, cli_err = io.StringIO(), io.StringIO()
        result = cli_main(list(argv), stdout=cli_out, stderr=cli_err,
                          bank_factory=lambda _settings, verify_model=True: bank)
        return result, cli_out.getvalue()

    code, history = cli("history", js.id)
    assert code == 0 and history.index(ts.id) < history.index(js.id) and f"superseded by {js.id}" in history
    assert cli("restore", ts.id)[0] == 0
    assert not bank.get(ts.id).superseded and bank.get(js.id).superseded_by == ts.id


def test_a_call_is_retried_only_within_its_timeout_and_a_timeout_never(tmp_path):
    """The SDK's own retries are off (each would wait a full timeout again): a 500 is tried again inside the
    timeout, a timeout is not, and a streamed answer arrives in pieces, counted by the meter."""
    from vecmem.agent.llm import MeteredModel, OpenAIChatModel
    from vecmem.errors import LLMError

    failures = {"flaky": 1}

    def responder(kind, body):
        said = body["messages"][-1]["content"]
        if said == "flaky" and failures["flaky"]:
            failures["flaky"] -= 1
            return Reply(status=500)
        if said == "slow":
            return Reply(delay=1.5)
        return Reply("three short words")

    with ScriptedChatServer(responder) as server:
        model = OpenAIChatModel(model="scripted", base_url=server.base_url, timeout=1.0, retries=2)
        assert model.complete([{"role": "user", "content": "flaky"}]) == "three short words"
        assert len(server.requests) == 2
        try:
            model.complete([{"role": "user", "content": "slow"}])
            raise AssertionError("a slow answer should time out")
        except LLMError as exc:
            assert "did not answer within 1 s" in str(exc)
        assert len(server.requests) == 3  # asked once: the timeout is spent
        metered = MeteredModel(model, lambda text: len(text.split()))
        assert list(metered.stream([{"role": "user", "content": "stream it"}])) == ["three ", "short ", "words"]
        assert (metered.usage.calls, metered.usage.prompt_tokens, metered.usage.completion_tokens) == (1, 2, 3)
